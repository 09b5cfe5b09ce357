// The collectives of the tensor-parallel operators themselves: all-reduces of partial
// outputs, of input gradients, of layer-norm and loss statistics. Issued and waited
// for where the operators say; timed into the Tracer (the span, and the time blocked
// as exposed). One of the three seams of the runtime (with the weight source and the
// gradient reducer, docs/architecture.md).
//
// Example:
//   OperatorComm ops(&tracer);
//   auto f = ops.issue_all_reduce(grid.y(), dinput, "ar_y");  ... dW ...  ops.wait(f);
#pragma once

#include <ATen/ATen.h>

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
    const char* kind = "";
    double issued_at = 0;
  };
  InFlight issue_all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op = ReduceOp::Sum);
  void wait(InFlight& f);
  void all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op = ReduceOp::Sum);

 private:
  Tracer* tracer_;
};

}  // namespace axonn::runtime
