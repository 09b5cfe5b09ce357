// The executor of a training step: runs this rank's step program of the schedule
// (axonn/schedule/step.hpp) on a ParallelModel built on a StageEngine, then
// synchronises gradients, clips them and applies Adam, with the time of each phase
// measured.
//
//   Forward / Backward(mb)   the model's stage forward, autograd's backward; the
//                            StageEngine brackets each pass and checks it against the
//                            schedule's pass program
//   Send / Recv(mb)          activations (forward) and their gradients (backward) to and
//                            from the neighbouring stages over the pipe communicator;
//                            each rank exchanges its own shard, tagged by kind, the
//                            micro-batch carried in the message and checked; receives
//                            are posted ahead so that messages land during compute
//   message-driven           no fixed program: both receives stay posted, and whichever
//                            message arrives next drives MessageDrivenStage; the first
//                            rank of the stage's tensor group (X, Y, Z) chooses for all
//                            of it, so that its collectives keep one order
//   ReduceGradients          sends completed, then the data-parallel reductions
//   OptimizerStep            the loss summed over the ranks, then the plan's optimizer
//                            (optimizer.hpp): the global gradient norm (each rank's sum
//                            of squares divided by the number of ranks holding each
//                            element, all-reduced over the replica), clipping, Adam on
//                            the device or offloaded to the host tier
//
// Example:
//   StageEngine se(grid, schedule::build_schedule(plan, grid.coord(topo::Axis::Pipe)), &tracer);
//   ParallelGpt model(cfg, grid, weights, se.schedule(), se.engine());
//   Trainer t(grid, model, se, TrainerOptions{});
//   StepStats s = t.step(source->batch(step));   // s.loss: the mean loss over the batch
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "axonn/runtime/optimizer.hpp"
#include "axonn/runtime/parallel_model.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/stage_engine.hpp"
#include "axonn/runtime/trace.hpp"
#include "axonn/schedule/step.hpp"

namespace axonn::runtime {

struct TrainerOptions {
  double learning_rate = 1e-3;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// Seconds per phase of one step (this rank), and the loss.
struct StepStats {
  double loss = 0;
  double grad_norm = 0;  // before clipping
  double forward_s = 0, backward_s = 0, grad_sync_s = 0, optimizer_s = 0, batch_s = 0;
  double recv_wait_s = 0;  // blocked waiting for pipeline messages (the bubble, seen from this rank)
  double fetch_wait_s = 0;  // L2L: blocked waiting for a unit's weights from the host tier
  double copy_s = 0;        // L2L: host-to-device weight copies (either thread), the paper's X summed
  double push_s = 0;        // L2L: gradients copied to the host tier (the trainer's thread)
  double server_s = 0;      // L2L: the parameter server's reductions and updates (its thread)
  double optimizer_reduce_wait_s = 0;  // in optimizer_s: blocked on the offloaded optimizer's all-reduces
  OverlapBreakdown breakdown;  // filled when the engine has a tracer
};

class Trainer {
 public:
  Trainer(ProcessGrid& grid, ParallelModel& model, StageEngine& engine, TrainerOptions options);
  ~Trainer();
  // `global_batch`: [seqs, seq_len + 1] tokens, identical on every rank.
  StepStats step(const at::Tensor& global_batch);
  // The step without the optimizer: gradients accumulated and reduced; `stats->loss` the
  // mean loss of the batch (on every rank).
  StepStats gradients(const at::Tensor& global_batch);
  // The step instructions this rank ran in its last step, in order.
  const std::vector<schedule::StepInstruction>& executed() const;
  // The stage's parameters (names, shard specs, full shapes).
  const std::vector<Parameter>& parameters() const;
  // The plan's optimizer (optimizer.hpp), e.g. for the buffers it holds.
  const Optimizer& optimizer() const;
  // The weights and Adam's state, between steps (Optimizer::state: under ZeRO,
  // collective over the data group); load_state puts them back.
  TrainingState state();
  void load_state(const TrainingState& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace axonn::runtime
