// The collectives of the tensor-parallel operators themselves: all-reduces of partial
// outputs, of input gradients, of layer-norm and loss statistics; in the 2d layout the
// all-gathers of inputs and reduce-scatters of input gradients. Issued and waited
// for where the operators say; timed into the Tracer (the span, and the time blocked
// as exposed). One of the three seams of the runtime (with the weight source and the
// gradient reducer, docs/architecture.md).
//
// Example:
//   OperatorComm ops(&tracer);
//   auto f = ops.issue_all_reduce(grid.y(), dinput, plan::CollectiveKind::ArY);  ... dW ...  ops.wait(f);
#pragma once

#include <ATen/ATen.h>

#include "axonn/plan/collective_kind.hpp"
#include "axonn/runtime/communicator.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

class OperatorComm {
 public:
  explicit OperatorComm(Tracer* tracer) : tracer_(tracer) {}
  Tracer* tracer() { return tracer_; }

  // An all-reduce in flight; `work` is null for a group of one.
  struct InFlight {
    WorkHandle work;
    plan::CollectiveKind kind = plan::CollectiveKind::ArX;
    double issued_at = 0;
  };
  InFlight issue_all_reduce(Communicator& c, const at::Tensor& t, plan::CollectiveKind kind, ReduceOp op = ReduceOp::Sum);
  // Communicator::all_gather / reduce_scatter, as an InFlight (with one member: a copy).
  InFlight issue_all_gather(Communicator& c, const at::Tensor& in, const at::Tensor& out, plan::CollectiveKind kind);
  InFlight issue_reduce_scatter(Communicator& c, const at::Tensor& in, const at::Tensor& out,
                                plan::CollectiveKind kind);
  // Communicator::broadcast / reduce (in place, to or from member `root`; SUMMA's).
  InFlight issue_broadcast(Communicator& c, const at::Tensor& t, int root, plan::CollectiveKind kind);
  InFlight issue_reduce(Communicator& c, const at::Tensor& t, int root, plan::CollectiveKind kind);
  void wait(InFlight& f);
  void all_reduce(Communicator& c, const at::Tensor& t, plan::CollectiveKind kind, ReduceOp op = ReduceOp::Sum);

 private:
  template <class Issue>
  InFlight issue(Communicator& c, plan::CollectiveKind kind, Issue&& start);
  Tracer* tracer_;
};

}  // namespace axonn::runtime
