// The scheduler of a model's collectives: where the 4D paper's four overlap
// optimizations (section IV) and the bucketed data-parallel all-reduce live.
//
//  1. async_input_grad_all_reduce: the backward dI all-reduce is issued, the dW matmul
//     runs, then the all-reduce is waited for (tensor_parallel.cpp).
//  2. async_weight_grad_reduce_scatter: each layer's dW reduce-scatter is issued and
//     waited for only after the whole backward pass (finish_backward).
//  3. prefetch_all_gather: when layer i's weight is requested, the Z all-gather of the
//     next layer in the forward order (computed once, from the registration order) is
//     issued; in the recompute only within the same block; in a backward pass without
//     checkpointing the previous layer's.
//  4. cache_all_gather_layers = N: with activation checkpointing, the gathered weights of
//     the first N layers are kept from the forward pass and reused by the recompute.
//  +  bucketed_data_parallel_all_reduce: as soon as a layer's weight gradient is final
//     (its reduce-scatter completed, in the last micro-batch), it joins a bucket; a full
//     bucket (bucket_bytes) is all-reduced over the data group at once, asynchronously.
//
// Progress: MPI's non-blocking collectives advance only inside MPI calls, so the engine
// polls (test()) every pending operation at each layer boundary. Completions are
// consumed strictly in issue order so that every rank issues the same collectives in
// the same order on each communicator. (Across communicators the order of a data
// bucket relative to other collectives depends on timing: fine for MPI, but a
// backend like NCCL that needs one global order would have to issue buckets only at
// fixed points.)
//
// With every switch off the engine is the synchronous path: issue and wait at once.
//
// Example:
//   CommEngine e(grid, plan.overlap, plan.activation_checkpointing, &tracer);
//   int id = e.add_layer(&weight_shard, /*block=*/3);
//   at::Tensor w = e.weight_block(id);        // gathered over Z (maybe prefetched)
#pragma once

#include <ATen/ATen.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

// Where in the step the model is: the weight a layer needs, and what to prefetch, depend on it.
enum class Phase { Forward, Recompute, Backward };

class CommEngine {
 public:
  CommEngine(ProcessGrid& grid, const plan::OverlapSettings& overlap, bool checkpointing, Tracer* tracer);
  ~CommEngine();

  ProcessGrid& grid() { return grid_; }
  const plan::OverlapSettings& overlap() const { return overlap_; }
  bool checkpointing() const { return checkpointing_; }
  Tracer* tracer() { return tracer_; }

  // Registers a Z-sharded weight in forward order; `block` groups layers recomputed
  // together (-1: outside any block); `weight_in_backward` is false for layers whose
  // backward pass does not read the weight (the embedding). Returns its id.
  int64_t add_layer(at::Tensor* shard, int64_t block, const std::string& name, bool weight_in_backward = true);
  const std::string& layer_name(int64_t id) const { return layers_[id].name; }
  at::Tensor* weight_shard(int64_t id) { return layers_[id].shard; }
  // Parameters whose gradients the engine synchronizes at the end of backward.
  void set_parameters(std::vector<Parameter>* params);

  Phase phase() const { return phase_; }
  // Entering the backward pass (from the forward) also prefetches the last layer's
  // weight when its backward re-gathers it (optimization 3).
  void set_phase(Phase p);

  // The Z-gathered weight block of layer `id` (the shard itself when Gz = 1).
  at::Tensor weight_block(int64_t id);

  // An all-reduce issued by an operator; `work` is null for a group of one.
  struct InFlight {
    WorkHandle work;
    const char* kind = "";
    double issued_at = 0;
  };
  InFlight issue_all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op = ReduceOp::Sum);
  void wait(InFlight& f);  // traced: the span, and the time blocked as exposed
  void all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op = ReduceOp::Sum);
  // Reduce-scatters layer `id`'s weight-gradient block over Z into its shard's gradient
  // (asynchronously with optimization 2).
  void reduce_scatter_weight_grad(int64_t id, const at::Tensor& dw_block);

  void poll();  // drives progress; consumes completions in issue order

  void begin_microbatch(bool last);
  // After backward of a micro-batch: with optimization 2 waits for the reduce-scatters;
  // after the last one also completes the data-parallel reductions of every gradient.
  void finish_backward();

 private:
  struct Pending;
  void wait_pending(Pending& p);
  void finish_pending(Pending& p, double exposed_s);
  void accumulate_weight_grad(int64_t id, const at::Tensor& grad_shard);
  void add_to_bucket(int64_t id);
  void flush_bucket();
  int64_t next_to_prefetch(int64_t id) const;
  void prefetch(int64_t id);

  ProcessGrid& grid_;
  plan::OverlapSettings overlap_;
  bool checkpointing_;
  Tracer* tracer_;
  Phase phase_ = Phase::Forward;
  bool last_microbatch_ = true;
  struct Layer {
    at::Tensor* shard;
    int64_t block;
    std::string name;
    bool weight_in_backward;
    bool cacheable;  // among the first N layers of blocks (optimization 4)
  };
  int64_t cacheable_count_ = 0;
  std::vector<bool> data_reduced_;  // weight gradient all-reduced over data this step
  std::vector<Layer> layers_;
  std::vector<Parameter>* params_ = nullptr;
  std::map<int64_t, at::Tensor> cache_;  // optimization 4: layer id -> gathered block
  struct Prefetch {
    WorkHandle work;
    at::Tensor block;
    double issued_at = 0;
    double done_at = -1;  // when a poll saw it complete
  };
  std::map<int64_t, Prefetch> prefetched_;  // optimization 3
  std::deque<std::unique_ptr<Pending>> pending_rs_;   // optimization 2, in issue order
  std::vector<int64_t> bucket_;                       // layer ids waiting for a data all-reduce
  double bucket_bytes_ = 0;
  std::deque<std::unique_ptr<Pending>> pending_data_; // issued data-parallel buckets
};

}  // namespace axonn::runtime
