// bench_overlap: batch time at overlap levels 0-4, measured in one run.
//
//   mpirun -np 8 bench_overlap --grid 2,2,2,1 [--model gpt-bench] [--seqs 8] [--steps 10]
//
// Level 0: every collective synchronous; 1: + async dI all-reduce; 2: + async dW
// reduce-scatter and bucketed data-parallel all-reduce; 3: + all-gather prefetch;
// 4: + all-gather cache of every block layer (plan::OverlapSettings::level). Activation
// checkpointing is on at every level (the paper's setting). The levels take turns
// step by step, each on its own copy of the model, so that drift in the machine's
// speed hits all of them alike. Per level: median batch time of the slowest rank, its
// ratio to level 0, communication time and the exposed (non-overlapped) fraction.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/trainer.hpp"
#include "bench_common.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  tools::BenchGptArgs model_args;
  model_args.grid = "2,2,2,1";
  tools::BenchSteps bench_steps;
  tools::BenchProgress progress;
  CLI::App app{"bench_overlap: batch time at overlap levels 0-4"};
  model_args.add_options(app);
  bench_steps.add_options(app, "per level");
  progress.add_options(app);
  CLI11_PARSE(app, argc, argv);
  progress.start();
  runtime::set_compute_threads(1);
  try {
    tools::BenchGpt b(world, model_args);
    auto& [grid, desc, cfg, plan, pg, source, weights] = b;
    constexpr int kLevels = 5;
    std::vector<std::unique_ptr<runtime::Tracer>> tracers;
    std::vector<std::unique_ptr<gpt::GptStage>> runs;
    for (int level = 0; level < kLevels; ++level) {
      tracers.push_back(std::make_unique<runtime::Tracer>(false));
      plan::Plan p = plan;
      p.activation_checkpointing = true;
      p.overlap = plan::OverlapSettings::level(level, 4 * cfg.layers);
      runs.push_back(std::make_unique<gpt::GptStage>(p, pg, cfg, weights.named_parameters(), tracers.back().get()));
    }
    std::vector<std::vector<double>> batch(kLevels), comm(kLevels), exposed(kLevels);
    for (int s = 0; s < bench_steps.total(); ++s)
      for (int level = 0; level < kLevels; ++level) {
        runtime::StepStats st = runs[level]->trainer.step(source->batch(s));
        at::Tensor t = at::tensor({st.batch_s, st.breakdown.comm_s, st.breakdown.exposed_comm_s}, at::kDouble);
        runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);  // the slowest rank
        if (!bench_steps.measured(s)) continue;
        batch[level].push_back(t[0].item<double>());
        comm[level].push_back(t[1].item<double>());
        exposed[level].push_back(t[2].item<double>());
      }
    if (world.rank() == 0) {
      fmt::print("bench_overlap: {} ({} layers, hidden {}), {} sequences x {} tokens, {} ranks, grid {}, "
                 "checkpointing on, progress {}, median of {} steps per level (slowest rank)\n",
                 desc.name, cfg.layers, cfg.hidden, model_args.seqs, cfg.seq_len, world.size(), grid.to_string(),
                 progress.describe(),
                 bench_steps.steps);
      fmt::print("{:>5}  {:>12}  {:>10}  {:>10}  {:>12}  {:>14}\n", "level", "batch (ms)", "vs level 0", "comm (ms)",
                 "exposed (ms)", "exposed/comm");
      const double base = median(batch[0]);
      for (int level = 0; level < kLevels; ++level) {
        const double b = median(batch[level]), c = median(comm[level]), x = median(exposed[level]);
        fmt::print("{:>5}  {:>12.2f}  {:>10.3f}  {:>10.2f}  {:>12.2f}  {:>13.0f}%\n", level, b * 1e3, b / base, c * 1e3,
                   x * 1e3, c > 0 ? 100.0 * x / c : 0.0);
      }
    }
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), 2);
  }
  return 0;
}
