// How a stage's parameters are updated after the backward: one of the runtime's seams
// (docs/architecture.md). The trainer asks make_optimizer() for the one the plan names
// (plan::OptimizerSettings, carried by the stage's schedule).
//
//   DeviceAdam     LibTorch's Adam, its state on the device; the data-parallel
//                  reductions are the reducer's (during the backward, then
//                  ReduceGradients), so step() only clips and updates.
//   OffloadedAdam  AxoNN 2022 section V (seed-spec A5-A6): the fp32 master weights and
//                  Adam's two moments live in the host tier (host_memory.hpp); the device
//                  keeps the weights and their gradients, one flat buffer per reduction
//                  group, and a working set of bsize elements per buffer: master, two
//                  moments, fp32 gradient (16 bytes per element). The data-parallel
//                  reduction is the optimizer's: the gradients are all-reduced in chunks
//                  of k buckets, and while chunk c+1 is reduced a worker thread runs
//                  chunk c's buckets (fetch, Adam, write back, refresh the weights).
//                  Adam is the same element-wise arithmetic as LibTorch's, in the same
//                  order, so the parameters are bitwise those of DeviceAdam for every
//                  bsize and k when the all-reduces sum alike.
//
// Gradient clipping needs the norm of the whole reduced gradient, so with clipping on
// (max_grad_norm > 0) OffloadedAdam reduces every chunk first and then updates: the
// overlap needs clipping off, as in the paper's runs.
//
// Parameters replicated over Z (biases, norms) are reduced over Z x data, the others
// over data (as BucketedReducer::finish_step does): one flat gradient buffer and one
// chunk sequence per group, the data group's first.
//
// Example:
//   auto opt = make_optimizer(grid, model.parameters(), schedule.optimizer, {1e-3}, &tracer);
//   opt->zero_grad();  ... the step's passes ...  engine.reduce_gradients();
//   OptimizerPhase ph = opt->step(/*max_grad_norm=*/1.0);
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

// Scales the gradients so their global norm is at most `max_norm` (<= 0: never);
// returns the norm before scaling. Collective over grid.model().
double clip_gradients(ProcessGrid& grid, std::vector<Parameter>& params, double max_norm);

struct AdamSettings {
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // LibTorch's defaults
};

// What one optimizer phase did.
struct OptimizerPhase {
  double grad_norm = 0;      // before clipping (0 when clipping is off and not computed)
  double reduce_wait_s = 0;  // blocked on the optimizer's own all-reduces (offload), seconds
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void zero_grad() = 0;
  // After ReduceGradients: the reductions the optimizer owns, the clipping, the update.
  virtual OptimizerPhase step(double max_grad_norm) = 0;
  // Whether the data-parallel reduction is the optimizer's (the reducer skips it).
  virtual bool reduces_data_parallel() const = 0;
};

std::unique_ptr<Optimizer> make_optimizer(ProcessGrid& grid, std::vector<Parameter>& params,
                                          const plan::OptimizerSettings& settings, const AdamSettings& adam,
                                          Tracer* tracer);

}  // namespace axonn::runtime
