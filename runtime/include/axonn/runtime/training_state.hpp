// A stage's training state in one layout, whatever optimizer holds it: for each of the
// stage's parameters (in the order of ParallelModel::parameters()), the weights and
// Adam's state shaped as the parameter's local shard (sharding.hpp), plus Adam's step
// count. Optimizer::state() writes it from its own buffers (flat, offloaded to the host
// tier, ZeRO-sharded over the data group) and Optimizer::load_state() reads it back
// into them, exactly: what a checkpoint (checkpoint.hpp) stores and re-slices.
//
// Example:
//   TrainingState s = trainer.state();          // collective over the data group (ZeRO)
//   s.params[0].exp_avg;                         // fp32, the shape of parameter 0's shard
//   other_trainer.load_state(s);                 // same layout: bitwise the same state
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace axonn::runtime {

struct ParameterState {
  at::Tensor weight;                // the parameter's element type (bf16 in mixed precision)
  at::Tensor exp_avg, exp_avg_sq;   // Adam's moments: fp32 (fp64 for fp64 weights); zeros before the first step
  at::Tensor master;                // fp32 master weights; undefined when the weights are fp32
};

// The full-precision values of a parameter's weights: the master copy where there is
// one. What fp32 weights and a master copy are loaded from (a checkpoint of a mixed-
// precision run resumed in fp32, and back).
inline const at::Tensor& full_precision_weight(const ParameterState& s) {
  return s.master.defined() ? s.master : s.weight;
}

struct TrainingState {
  int64_t adam_steps = 0;  // Adam updates applied (the next one is adam_steps + 1)
  std::vector<ParameterState> params;
};

}  // namespace axonn::runtime
