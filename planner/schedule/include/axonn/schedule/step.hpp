// One pipeline stage's training step: which micro-batch passes it runs, in which
// order, and what it sends and receives (docs/architecture.md, "The schedule IR";
// docs/model.md section 10). The planner simulates it; the runtime's executor runs it.
//
//   gpipe           every forward, then every backward
//   1f1b            PipeDream-Flush / Megatron: stage s runs min(G-s-1, M) forwards, then
//                   alternates one forward and one backward, then the remaining backwards
//   message-driven  AxoNN 2022 (Algorithm 2, seed-spec A3): no fixed order. Stage 0
//                   injects min(limit, M) forwards; every stage then runs what the next
//                   message implies: an activation from the previous stage -> forward
//                   (the last stage then runs the backward at once), a gradient from the
//                   next stage -> backward (stage 0 then injects the next forward).
//                   MessageDrivenStage is that rule, as a state machine both consume.
// Backwards run in micro-batch order on every stage and schedule (messages are FIFO),
// so gradients accumulate in the same order whatever the interleaving. One stage
// (Ginter = 1) is plain gradient accumulation under every schedule: F0 B0 F1 B1 ...
// Every program ends with ReduceGradients and OptimizerStep.
//
// Example:
//   step_program(plan::PipelineSchedule::OneFOneB, /*stage=*/0, /*stages=*/2, /*microbatches=*/3);
//   // F0 Send0 F1 Send1 RecvG0 B0 F2 Send2 RecvG1 B1 RecvG2 B2 ReduceGradients OptimizerStep
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"

namespace axonn::schedule {

enum class StepOp : uint8_t {
  RecvActivation,   // from the previous stage
  Forward,          // the stage's forward pass of the micro-batch
  SendActivation,   // to the next stage
  RecvGradient,     // from the next stage
  Backward,         // the stage's backward pass of the micro-batch
  SendGradient,     // to the previous stage
  ReduceGradients,  // the data-parallel reductions complete (after the stage's last backward)
  OptimizerStep,
};
const char* step_op_name(StepOp op);

struct StepInstruction {
  StepOp op = StepOp::Forward;
  int32_t microbatch = -1;  // -1 for ReduceGradients and OptimizerStep
  bool operator==(const StepInstruction& o) const { return op == o.op && microbatch == o.microbatch; }
  std::string to_string() const;  // "Forward(3)"
};

// The fixed program of a stage under gpipe or 1f1b (and of any schedule on one stage).
// Throws InternalError for message-driven with more than one stage (no fixed order).
std::vector<StepInstruction> step_program(plan::PipelineSchedule schedule, int64_t stage, int64_t stages,
                                          int64_t microbatches);
// The same into `out` (cleared first; its memory reused: the planner's inner loop).
void step_program(plan::PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t microbatches,
                  std::vector<StepInstruction>& out);

// The message-driven rule of one stage. The caller starts it, then reports each
// arriving message; each call appends to `out` what to run now, in order (never a
// Recv: the arrival is the receive). done() once every backward has run; the caller then runs
// ReduceGradients and OptimizerStep. Messages must arrive in micro-batch order per
// kind (throws InternalError otherwise: a lost or reordered message).
class MessageDrivenStage {
 public:
  MessageDrivenStage(int64_t stage, int64_t stages, int64_t microbatches, int64_t limit);

  void start(std::vector<StepInstruction>& out);
  void on_activation(int64_t microbatch, std::vector<StepInstruction>& out);  // from the previous stage
  void on_gradient(int64_t microbatch, std::vector<StepInstruction>& out);    // from the next stage

  bool expects_activation() const { return stage_ > 0 && next_activation_ < microbatches_; }
  bool expects_gradient() const { return stage_ < stages_ - 1 && next_gradient_ < microbatches_; }
  int64_t next_activation() const { return next_activation_; }
  int64_t next_gradient() const { return next_gradient_; }
  bool done() const { return backwards_ == microbatches_; }

 private:
  void inject(std::vector<StepInstruction>& out);
  [[noreturn]] void out_of_order(const char* what, int64_t mb, int64_t expected) const {
    throw InternalError("schedule",
                        "stage " + std::to_string(stage_) + " received the " + what + " of micro-batch " +
                            std::to_string(mb),
                        "message-driven pipeline", "micro-batch " + std::to_string(expected) + " next");
  }
  int64_t stage_, stages_, microbatches_, limit_;
  int64_t injected_ = 0, next_activation_ = 0, next_gradient_ = 0, backwards_ = 0;
};

// ---- implementation (inline: the planner's event simulation calls it per message) ----

inline MessageDrivenStage::MessageDrivenStage(int64_t stage, int64_t stages, int64_t microbatches, int64_t limit)
    : stage_(stage), stages_(stages), microbatches_(microbatches), limit_(std::max<int64_t>(limit, 1)) {
  AXONN_ASSERT(stage >= 0 && stage < stages && microbatches >= 1);
}

inline void MessageDrivenStage::inject(std::vector<StepInstruction>& out) {
  const auto mb = static_cast<int32_t>(injected_++);
  out.push_back({StepOp::Forward, mb});
  if (stages_ == 1) {
    out.push_back({StepOp::Backward, mb});
    ++backwards_;
  } else {
    out.push_back({StepOp::SendActivation, mb});
  }
}

inline void MessageDrivenStage::start(std::vector<StepInstruction>& out) {
  if (stage_ != 0) return;
  // One stage: plain gradient accumulation. Else the warm-up: at most `limit` in flight.
  const int64_t first = stages_ == 1 ? microbatches_ : std::min(limit_, microbatches_);
  while (injected_ < first) inject(out);
}

inline void MessageDrivenStage::on_activation(int64_t mb, std::vector<StepInstruction>& out) {
  if (!expects_activation() || mb != next_activation_) out_of_order("activation", mb, next_activation_);
  ++next_activation_;
  out.push_back({StepOp::Forward, static_cast<int32_t>(mb)});
  if (stage_ == stages_ - 1) {
    out.push_back({StepOp::Backward, static_cast<int32_t>(mb)});
    out.push_back({StepOp::SendGradient, static_cast<int32_t>(mb)});
    ++backwards_;
  } else {
    out.push_back({StepOp::SendActivation, static_cast<int32_t>(mb)});
  }
}

inline void MessageDrivenStage::on_gradient(int64_t mb, std::vector<StepInstruction>& out) {
  if (!expects_gradient() || mb != next_gradient_) out_of_order("gradient", mb, next_gradient_);
  ++next_gradient_;
  out.push_back({StepOp::Backward, static_cast<int32_t>(mb)});
  ++backwards_;
  if (stage_ > 0) out.push_back({StepOp::SendGradient, static_cast<int32_t>(mb)});
  else if (injected_ < microbatches_) inject(out);
}

}  // namespace axonn::schedule
