// How a stage's parameters are updated after the backward: one of the runtime's seams
// (docs/architecture.md). The trainer asks make_optimizer() for the one the plan names
// (plan::OptimizerSettings, carried by the stage's schedule).
//
//   DeviceAdam  LibTorch's Adam, its state on the device; the data-parallel reductions
//               are the reducer's (during the backward, then ReduceGradients), so step()
//               only clips and updates.
//   FlatAdam    the data-parallel reduction is the optimizer's (or, in mixed precision
//               without offload or ZeRO, the reducer's as for DeviceAdam). The weights and their
//               gradients live in flat device buffers, one per reduction group (the
//               parameters and their .grad are views into them). Adam is LibTorch's
//               element-wise arithmetic in the same order, so each element's update is
//               bitwise DeviceAdam's given the same reduced gradient. Two options:
//     offload   AxoNN 2022 section V (seed-spec A5-A6): the fp32 master weights and
//               Adam's two moments live in the host tier (host_memory.hpp); the device
//               keeps a working set of bsize elements (master, two moments, fp32
//               gradient: 16 bytes each). Without ZeRO the gradients are all-reduced in
//               chunks of k buckets, and while chunk c+1 is reduced a worker thread runs
//               chunk c's buckets (fetch, Adam, write back, refresh the weights).
//     zero = 1  ZeRO stage 1: each rank of the group owns 1/N of the elements (the
//               buffers padded to a multiple of N) and keeps Adam's state (offloaded:
//               and the master) for those only. After the backward: reduce-scatter the
//               gradients into a device buffer of the owned block (freed before the
//               weights are gathered), the norm from the blocks, update the owned
//               weights, all-gather them in place. No chunked overlap here.
//     zero = 2  ZeRO stage 2: as stage 1, and the gradients of the weights split over Z
//               (the data segment) are sharded too: the optimizer is the reducer's
//               gradient sink (gradient_sink.hpp); each backward pass reduces each
//               layer's gradient over the data group to the ranks that own its elements
//               (an uneven reduce-scatter; the reducer keeps at most two in flight),
//               and the segment's
//               gradient buffer is the owned block. Gradients reduced per micro-batch,
//               as DeepSpeed's stage 2. Biases and norms (replicated over Z, reduced
//               over Z x data) are reduced as under stage 1: a small full buffer.
//     zero = 3  ZeRO stage 3: as stage 2, and the weights of the data segment are
//               sharded too: each rank keeps its block's weights only (the parameters
//               hold no elements), the optimizer is the weight source's store
//               (weight_store.hpp), and each Fetch of a pass gathers the layer's shard
//               from the owners (an uneven all-gather, blocking) before the Z
//               all-gather. No weight all-gather after the update. Biases and norms stay
//               whole, as DeepSpeed keeps parameters under its persistence threshold.
//
//     mixed     weights narrower than fp32 (bf16, precision.hpp): the fp32 master copy
//               is Adam's (on the device, or in the host tier when offloaded); each
//               bucket's gradient is copied to an fp32 working buffer of bsize elements,
//               Adam updates the master, and the bucket's weights are refreshed from it.
//               The gradients are bf16 or fp32 (the plan's grad_reduce_bytes).
//
// Gradient clipping needs the norm of the whole reduced gradient, so with clipping on
// (max_grad_norm > 0) the offloaded optimizer reduces every chunk first and then
// updates: the overlap needs clipping off, as in the paper's runs.
//
// Parameters replicated over Z (biases, norms) are reduced over Z x data, the others
// over data (as BucketedReducer::finish_step does): one flat buffer pair and one owned
// block per group, the data group's first.
//
// Example:
//   auto opt = make_optimizer(grid, model.parameters(), schedule.optimizer, schedule.precision, {1e-3}, &tracer);
//   opt->zero_grad();  ... the step's passes ...  engine.reduce_gradients();
//   OptimizerPhase ph = opt->step(/*max_grad_norm=*/1.0);
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/adam.hpp"
#include "axonn/runtime/gradient_sink.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/trace.hpp"
#include "axonn/runtime/training_state.hpp"
#include "axonn/runtime/weight_store.hpp"

namespace axonn::runtime {

// Scales the gradients so their global norm is at most `max_norm` (<= 0: never);
// returns the norm before scaling. Collective over grid.model().
double clip_gradients(ProcessGrid& grid, std::vector<Parameter>& params, double max_norm);

// What one optimizer phase did.
struct OptimizerPhase {
  double grad_norm = 0;      // before clipping (0 when clipping is off and not computed)
  double reduce_wait_s = 0;  // blocked on the optimizer's own collectives (FlatAdam), seconds
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void zero_grad() = 0;
  // After ReduceGradients: the reductions the optimizer owns, the clipping, the update.
  virtual OptimizerPhase step(double max_grad_norm) = 0;
  // Whether the data-parallel reduction is the optimizer's (the reducer skips it).
  virtual bool reduces_data_parallel() const = 0;
  // Where the reducer hands each layer's gradient (ZeRO-2); null: the shards' .grad.
  virtual GradientSink* gradient_sink() { return nullptr; }
  // Where the weight source gathers each layer's shard from (ZeRO-3); null: the shards.
  virtual WeightStore* weight_store() { return nullptr; }
  // The tensors in which the optimizer itself keeps the stage's weights and their
  // gradients (FlatAdam's flat segments: under ZeRO-2 the owned gradient block, under
  // ZeRO-3 the owned weight block, which the parameters' own tensors and .grad no longer
  // hold); empty where those hold them. For memory_breakdown.hpp.
  virtual std::vector<at::Tensor> held_weights() const { return {}; }
  virtual std::vector<at::Tensor> held_gradients() const { return {}; }
  // The weights and Adam's state of every parameter, shaped as its shard
  // (training_state.hpp); between steps. Under ZeRO, collective over the data group
  // (each rank's blocks are all-gathered).
  virtual TrainingState state() = 0;
  // Replaces the weights and Adam's state with `s` (as state() gives it, for the same
  // parameters); between steps, no communication.
  virtual void load_state(const TrainingState& s) = 0;
};

// FlatAdam when the optimizer reduces over data (offload, ZeRO) or the weights are
// narrower than fp32 (mixed precision: `precision` gives the gradients' type); else
// DeviceAdam.
std::unique_ptr<Optimizer> make_optimizer(ProcessGrid& grid, std::vector<Parameter>& params,
                                          const plan::OptimizerSettings& settings, const plan::Precision& precision,
                                          const AdamSettings& adam, Tracer* tracer);

}  // namespace axonn::runtime
