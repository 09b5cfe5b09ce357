// One rank's part of training a GPT under a plan: the runtime of its pipeline stage
// (StageEngine: the schedule and the seams that run it), the GPT stage built on it,
// and the executor. What axrun, the benchmarks and the tests put together.
//
// Example:
//   gpt::GptStage run(plan, grid, cfg, serial.named_parameters(), &tracer, {lr, clip});
//   runtime::StepStats s = run.trainer.step(source->batch(step));
#pragma once

#include "axonn/gpt/gpt.hpp"
#include "axonn/runtime/stage_engine.hpp"
#include "axonn/runtime/trainer.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::gpt {

struct GptStage {
  runtime::StageEngine engine;
  ParallelGpt model;
  runtime::Trainer trainer;

  // `keep_history`: the engine records every instruction (tests compare whole steps).
  GptStage(const plan::Plan& plan, runtime::ProcessGrid& grid, const GptConfig& cfg, const InitialWeights& weights,
           runtime::Tracer* tracer, runtime::TrainerOptions options = {}, bool keep_history = false)
      : engine(grid, schedule::build_schedule(plan, grid.coord(topo::Axis::Pipe)), tracer, keep_history),
        model(cfg, grid, weights, engine.schedule(), engine.engine()),
        trainer(grid, model, engine, options) {}
};

}  // namespace axonn::gpt
