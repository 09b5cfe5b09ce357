// Where a layer's weight comes from during a pass: one of the three seams of the
// runtime (docs/architecture.md). The model's operators ask for a layer's weight; the
// source follows the schedule's pass program (axonn/schedule/pass.hpp): it checks that
// the fetch is the one the program expects next, takes the block from where the
// program says (an all-gather now, a prefetch, the cache), and issues the prefetches
// the program places after it.
//
// GatheredWeights is the 4D paper's: each rank holds 1/Gz of its (Gx, Gy) block and
// the block is all-gathered over Z (optimization 3 prefetches, 4 caches for the
// recompute). ZeRO-3 plugs a WeightStore (weight_store.hpp) into it: the shard itself
// is gathered over the data group first. Later sources (the L2L parameter server)
// implement the same interface.
//
// Example:
//   GatheredWeights w(grid, &tracer, recorder);
//   w.add_layer(3, &qkv_shard);
//   w.begin_pass(schedule.forward, PassKind::Forward, /*microbatch=*/0);
//   at::Tensor block = w.weight(3);   // the program's next fetch must be layer 3
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <utility>
#include <vector>

#include "axonn/runtime/pass_recorder.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/trace.hpp"
#include "axonn/runtime/weight_store.hpp"
#include "axonn/schedule/pass.hpp"

namespace axonn::runtime {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // `layer`: the stage's layer index in the schedule; `shard`: this rank's part.
  virtual void add_layer(int64_t layer, at::Tensor* shard) = 0;
  virtual at::Tensor* shard(int64_t layer) = 0;
  // The weight block this rank computes with (flat).
  virtual at::Tensor weight(int64_t layer) = 0;
  // This rank's shard of a layer's weight, whole: the parameter, or gathered by the
  // store (then collective over the data group). Outside the pass programs (tests,
  // checkpoints).
  virtual at::Tensor shard_elements(int64_t layer) = 0;
  // Inside a backward pass (a forward there is the recompute).
  virtual bool in_backward() const = 0;
  virtual void begin_pass(const std::vector<schedule::LayerInstruction>& program, schedule::PassKind kind,
                          int64_t microbatch) = 0;
  // Throws InternalError if a fetch of the program did not happen.
  virtual void end_pass() = 0;
  virtual void poll() = 0;
  // Null: each layer's shard is its parameter; else the store gathers it (ZeRO-3).
  virtual void set_store(WeightStore* store) = 0;
};

class GatheredWeights final : public WeightSource {
 public:
  GatheredWeights(ProcessGrid& grid, Tracer* tracer, PassRecorder& recorder);
  ~GatheredWeights() override;

  void add_layer(int64_t layer, at::Tensor* shard) override;
  at::Tensor* shard(int64_t layer) override;
  at::Tensor weight(int64_t layer) override;
  bool in_backward() const override { return kind_ != schedule::PassKind::Forward; }
  void begin_pass(const std::vector<schedule::LayerInstruction>& program, schedule::PassKind kind,
                  int64_t microbatch) override;
  void end_pass() override;
  void poll() override;
  void set_store(WeightStore* store) override { store_ = store; }
  at::Tensor shard_elements(int64_t layer) override;

 private:
  void issue_prefetches();  // the program's Prefetch instructions up to its next Fetch
  at::Tensor gather_now(int64_t layer);

  struct Prefetch {
    WorkHandle work;
    at::Tensor block;
    double issued_at = 0;
    double done_at = -1;  // when a poll saw it complete
  };
  ProcessGrid& grid_;
  Tracer* tracer_;
  PassRecorder& recorder_;
  std::vector<at::Tensor*> shards_;  // by layer; null for layers without a weight
  WeightStore* store_ = nullptr;
  std::vector<schedule::LayerInstruction> ops_;  // the pass's Fetch and Prefetch instructions
  size_t next_ = 0;
  schedule::PassKind kind_ = schedule::PassKind::Forward;
  int64_t microbatch_ = 0;
  std::map<int64_t, Prefetch> prefetched_;                   // optimization 3: layer -> in flight
  std::map<std::pair<int64_t, int64_t>, at::Tensor> cache_;  // optimization 4: (micro-batch, layer) -> block
};

}  // namespace axonn::runtime
