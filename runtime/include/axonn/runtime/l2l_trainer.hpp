// The executor of an L2L step (axonn/schedule/l2l.hpp): runs the layer-major program
// over the model's units, each a ParallelModel of one pipeline unit on its own
// StageEngine (schedule::l2l_unit_schedule), with the weights and Adam's state in the
// parameter server (parameter_server.hpp).
//
//   Forward(l, mb)   the unit's forward under no_grad on the stashed input (the tokens
//                    for the first unit); its output stashed, on the device or copied
//                    to the host tier (the plan's l2l.stash)
//   Backward(l, mb)  the stashed input back on the device, the unit's forward again
//                    with autograd (the last unit's gives the loss), its backward from
//                    the gradient the unit after it produced; the input's gradient is
//                    kept for the unit before, and the stash entry freed
//   the rest         the parameter server's fetch, prefetch, release, push, wait
//
// Every micro-batch's gradient w.r.t. a unit's output is on the device during the
// backward (M activations), the stash holds the N-1 units' outputs of every
// micro-batch (on the device, or in the host tier), and one unit's weights, gradients
// and autograd graph of one micro-batch are on the device at a time (two units' weights
// with prefetch): constant device memory in depth with the stash on the host.
//
// Example:
//   L2LTrainer t(grid, plan, TrainerOptions{1e-3, 1.0});
//   for (...) t.add_unit({&unit_model, &unit_engine});
//   StepStats s = t.step(source->batch(step));   // s.loss: the mean loss over the batch
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/parallel_model.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/stage_engine.hpp"
#include "axonn/runtime/trainer.hpp"
#include "axonn/schedule/l2l.hpp"

namespace axonn::runtime {

struct L2LUnit {
  ParallelModel* model = nullptr;
  StageEngine* engine = nullptr;
};

class L2LTrainer {
 public:
  L2LTrainer(ProcessGrid& grid, const plan::Plan& plan, TrainerOptions options);
  // The units in model order, one per pipeline unit of the plan, before the first step;
  // each unit's parameters move to the parameter server here (so that a model is built
  // one unit at a time on the device).
  void add_unit(L2LUnit unit);
  ~L2LTrainer();
  StepStats step(const at::Tensor& global_batch);
  // The program this rank runs each step.
  const std::vector<schedule::L2LInstruction>& program() const;
  // Every parameter's master weights (host tier), by name: what serial comparisons read.
  std::vector<std::pair<std::string, at::Tensor>> master_weights() const;
  // Checkpoints (checkpoint.hpp): the parameter server's parameters and state.
  std::vector<Parameter> parameters() const;
  TrainingState state() const;
  void load_state(const TrainingState& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace axonn::runtime
