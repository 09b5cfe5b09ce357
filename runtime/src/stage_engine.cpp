// The runtime of one stage; see axonn/runtime/stage_engine.hpp.
#include "axonn/runtime/stage_engine.hpp"

namespace axonn::runtime {

using schedule::PassKind;

StageEngine::StageEngine(ProcessGrid& grid, schedule::StageSchedule schedule, Tracer* tracer, bool keep_history)
    : schedule_(std::move(schedule)),
      recorder_(keep_history),
      ops_(tracer),
      weights_(grid, tracer, recorder_),
      reducer_(grid, schedule_.settings.overlap, schedule_.optimizer.reduces_data_parallel(), tracer, recorder_),
      engine_{grid, schedule_.settings.overlap, ops_, weights_, reducer_, recorder_} {}

void StageEngine::begin_forward(int64_t microbatch) {
  microbatch_ = microbatch;
  recorder_.begin(&schedule_.forward, &schedule_.layers);
  weights_.begin_pass(schedule_.forward, PassKind::Forward, microbatch);
}

void StageEngine::end_forward() {
  weights_.end_pass();
  recorder_.check("forward pass of micro-batch " + std::to_string(microbatch_));
}

void StageEngine::begin_backward(int64_t microbatch) {
  microbatch_ = microbatch;
  const bool last = microbatch == schedule_.microbatches - 1;
  const auto& program = last ? schedule_.last_backward : schedule_.backward;
  recorder_.begin(&program, &schedule_.layers);
  weights_.begin_pass(program, last ? PassKind::LastBackward : PassKind::Backward, microbatch);
  reducer_.begin_backward(program, last);
}

void StageEngine::end_backward() {
  reducer_.end_backward();
  weights_.end_pass();
  recorder_.check("backward pass of micro-batch " + std::to_string(microbatch_));
}

void StageEngine::reduce_gradients() { reducer_.finish_step(); }

}  // namespace axonn::runtime
