// One rank's part of training a GPT under an L2L plan (plan.strategy l2l): one
// ParallelGpt per pipeline unit (a block; the embedding with the first, the head and
// loss with the last), each on a StageEngine of its unit's schedule
// (schedule::l2l_unit_schedule), and the L2L executor that relays them through the
// device (runtime/l2l_trainer.hpp). Units are built one at a time, and each hands its
// weights to the parameter server before the next is built.
//
// Example:
//   gpt::GptL2L run(plan, grid, cfg, serial.named_parameters(), {lr, clip});
//   runtime::StepStats s = run.trainer.step(source->batch(step));
#pragma once

#include <memory>
#include <vector>

#include "axonn/gpt/gpt.hpp"
#include "axonn/runtime/l2l_trainer.hpp"
#include "axonn/runtime/stage_engine.hpp"

namespace axonn::gpt {

struct GptL2L {
  std::vector<std::unique_ptr<runtime::StageEngine>> engines;  // one per unit
  std::vector<std::unique_ptr<ParallelGpt>> models;            // one per unit
  runtime::L2LTrainer trainer;

  GptL2L(const plan::Plan& plan, runtime::ProcessGrid& grid, const GptConfig& cfg, const InitialWeights& weights,
         runtime::TrainerOptions options = {});
  // The parameter server's fp32 master weights, full-shape, by name (as SerialGpt's).
  NamedTensors master_weights() const;

 private:
  runtime::ProcessGrid& grid_;
  GptConfig cfg_;
};

}  // namespace axonn::gpt
