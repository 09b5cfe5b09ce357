// One interface for the collectives the runtime needs, on CPU or device tensors.
// Backends: MPI (runtime/src/mpi_communicator.cpp) and, when built with NCCL, NCCL;
// each returns a Work handle so a caller can overlap communication with compute.
//
// Example (sum a tensor over a group, without blocking):
//   WorkHandle h = comm.all_reduce(t);      // t: contiguous, modified in place
//   ... compute ...
//   h->wait();                              // t now holds the sum over the group
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace axonn::runtime {

// A collective in flight. It keeps its tensors alive until it completes.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;  // blocks until complete; throws axonn::Error on failure
  virtual bool test() = 0;  // true once complete (drives progress)
};
using WorkHandle = std::unique_ptr<Work>;

enum class ReduceOp { Sum, Max };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "world", "x", "z_data", ...

  // In place over the group. `t` contiguous.
  virtual WorkHandle all_reduce(at::Tensor t, ReduceOp op = ReduceOp::Sum) = 0;
  // out.numel() == size() * in.numel(); member i's input lands in out's i-th chunk.
  // In place when `in` is out's rank()-th chunk (NCCL's convention; MPI_IN_PLACE).
  virtual WorkHandle all_gather(at::Tensor in, at::Tensor out) = 0;
  // in.numel() == size() * out.numel(); out = sum over members of in's rank()-th chunk.
  virtual WorkHandle reduce_scatter(at::Tensor in, at::Tensor out) = 0;
  // Uneven chunks: in.numel() == sum(counts), out.numel() == counts[rank()] (0 allowed);
  // out = sum over members of in's rank()-th chunk (ZeRO-2's reduction of one layer's
  // gradient to the ranks that own its elements).
  virtual WorkHandle reduce_scatter_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) = 0;
  // Uneven chunks: in.numel() == counts[rank()] (0 allowed), out.numel() == sum(counts);
  // member i's input lands after the first i members' (ZeRO-3's gather of one layer's
  // weights from the ranks that own its elements).
  virtual WorkHandle all_gather_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) = 0;
  // In place: `root`'s t lands in every member's t (SUMMA's row and column broadcasts).
  virtual WorkHandle broadcast(at::Tensor t, int root) = 0;
  // In place: `root`'s t becomes the sum of every member's t; the others' t is left
  // unspecified (SUMMA's backward).
  virtual WorkHandle reduce(at::Tensor t, int root) = 0;
  virtual WorkHandle send(at::Tensor t, int peer, int tag) = 0;
  virtual WorkHandle recv(at::Tensor t, int peer, int tag) = 0;
  virtual void barrier() = 0;
  // Members with the same color form a new communicator, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name) = 0;
};

// Blocking conveniences.
inline void all_reduce_now(Communicator& c, const at::Tensor& t, ReduceOp op = ReduceOp::Sum) {
  if (c.size() > 1) c.all_reduce(t, op)->wait();
}

}  // namespace axonn::runtime
