// One training step of a ParallelModel under a plan: micro-batches (forward and
// backward, gradients accumulated), gradient synchronisation, distributed gradient
// clipping and Adam, with the time of each phase measured.
//
// Gradient synchronisation is the model's CommEngine's (docs/runtime.md): weight shards,
// summed over Z by the backward reduce-scatter, are all-reduced over the data group
// (in buckets during the backward pass when the plan says so); parameters replicated
// over Z (biases, layer norms) over the Z x data group. The global gradient norm
// counts every element once: each rank's sum of squares divided by the number of ranks
// of its model replica holding that element, all-reduced over the replica.
//
// Example:
//   Trainer t(grid, model, plan, TrainerOptions{});
//   StepStats s = t.step(source->batch(step));   // s.loss: the mean loss over the batch
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/parallel_model.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

// Scales the gradients so their global norm is at most `max_norm` (<= 0: never);
// returns the norm before scaling. Collective over grid.model().
double clip_gradients(ProcessGrid& grid, std::vector<Parameter>& params, double max_norm);

struct TrainerOptions {
  double learning_rate = 1e-3;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// Seconds per phase of one step, and the loss.
struct StepStats {
  double loss = 0;
  double grad_norm = 0;  // before clipping
  double forward_s = 0, backward_s = 0, grad_sync_s = 0, optimizer_s = 0, batch_s = 0;
  OverlapBreakdown breakdown;  // filled when the model's engine has a tracer
};

class Trainer {
 public:
  Trainer(ProcessGrid& grid, ParallelModel& model, const plan::Plan& plan, TrainerOptions options);
  ~Trainer();
  // `global_batch`: [seqs, seq_len + 1] tokens, identical on every rank.
  StepStats step(const at::Tensor& global_batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace axonn::runtime
