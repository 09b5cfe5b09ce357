// bench_pipeline: the three pipeline schedules measured in one run, with equal stages
// and with one stage 1.5x slower, as ratios to GPipe.
//
//   mpirun -np 4 bench_pipeline [--grid 1,1,1,1,4] [--blocks 8] [--seqs 16] [--microbatches 8]
//          [--steps 10] [--warmup 2] [--slow-stage 1]
//
// The model is a GPT of --blocks blocks (hidden 128, 8 heads, seq 64, vocab 1024).
// Equal stages hold blocks/Ginter blocks each; "one stage slower" moves blocks onto
// --slow-stage until it holds 1.5x the others' (8 blocks on 4 stages: 3, 2, 2, 1 with
// the slow stage second), so its extra time is real compute. The schedules take turns
// step by step (each on its own copy of the model), so that drift in the machine's
// speed hits all alike. Per schedule: the median batch time of the slowest rank, and
// the bubble fraction: the time ranks sat waiting for pipeline messages over the
// batch time (mean over ranks), both also as ratios to GPipe.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "bench_common.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  std::string grid_text;
  int64_t blocks = 8, seqs = 16, microbatches = 8, slow_stage = 1;
  tools::BenchSteps bench_steps;
  tools::BenchProgress progress;
  CLI::App app{"bench_pipeline: message-driven vs 1f1b vs gpipe, equal stages and one slower stage"};
  app.add_option("--grid", grid_text, "gx,gy,gz,gdata,ginter (default: every rank a stage)");
  app.add_option("--blocks", blocks, "transformer blocks")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seqs", seqs, "sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--microbatches", microbatches, "micro-batches per step")->capture_default_str()->check(CLI::PositiveNumber);
  bench_steps.add_options(app, "per schedule");
  app.add_option("--slow-stage", slow_stage, "the stage made 1.5x slower")->capture_default_str();
  progress.add_options(app);
  CLI11_PARSE(app, argc, argv);
  progress.start();
  runtime::set_compute_threads(1);
  try {
    const topo::Grid grid = grid_text.empty() ? topo::Grid{1, 1, 1, 1, world.size()}
                                              : tools::parse_bench_grid(grid_text, world.size());
    const int64_t g = grid.ginter;
    if (g < 2 || blocks % g != 0 || blocks / g < 2 || slow_stage < 0 || slow_stage >= g)
      throw InputError("bench_pipeline", fmt::format("{} blocks on {} stages, slow stage {}", blocks, g, slow_stage),
                       "--blocks / --grid / --slow-stage",
                       "Ginter >= 2 stages of an even number of blocks >= 2 each, and a stage among them");
    const auto desc = model::model_from_json(
        nlohmann::json{{"name", "gpt-pipe-bench"}, {"family", "gpt"}, {"num_layers", blocks}, {"hidden", 128},
                       {"heads", 8}, {"seq_len", 64}, {"vocab", 1024}, {"ffn_multiplier", 4}},
        "bench_pipeline");
    const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
    runtime::ProcessGrid pg(world, grid, topo::default_order());
    auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 1);
    gpt::SerialGpt weights(cfg, 1);
    plan::Plan base = tools::bench_plan(desc, grid, seqs);
    base.batch.microbatch_seqs = seqs / grid.gdata / microbatches;
    if (base.batch.microbatch_seqs < 1 || (seqs / grid.gdata) % microbatches != 0)
      throw InputError("bench_pipeline", fmt::format("{} sequences in {} micro-batches", seqs, microbatches),
                       "--seqs / --microbatches", "a batch that splits evenly");
    // Equal stages; then the slow stage takes blocks from its neighbours until it holds
    // 1.5x their share (the last stage, or the one after, gives them).
    const int64_t share = blocks / g;
    std::vector<int64_t> slow(static_cast<size_t>(g), share);
    for (int64_t moved = 0; moved < share / 2; ++moved) {
      slow[static_cast<size_t>(slow_stage)] += 1;
      slow[static_cast<size_t>(slow_stage == g - 1 ? g - 2 : g - 1)] -= 1;
    }
    const std::vector<plan::PipelineSchedule> schedules = {
        plan::PipelineSchedule::GPipe, plan::PipelineSchedule::OneFOneB, plan::PipelineSchedule::MessageDriven};
    if (world.rank() == 0)
      fmt::print("bench_pipeline: {} blocks (hidden 128, seq 64), {} sequences in {} micro-batches, {} ranks, grid {}, "
                 "median of {} steps per schedule (slowest rank), progress {}\n",
                 blocks, seqs, microbatches, world.size(), grid.to_string(), bench_steps.steps,
                 progress.describe());
    for (const auto& units : {std::vector<int64_t>(static_cast<size_t>(g), share), slow}) {
      std::vector<std::unique_ptr<gpt::GptStage>> runs;
      for (auto s : schedules) {
        plan::Plan p = base;
        p.pipeline.schedule = s;
        p.pipeline.stage_units = units;
        runs.push_back(std::make_unique<gpt::GptStage>(p, pg, cfg, weights.named_parameters(), nullptr));
      }
      std::vector<std::vector<double>> batch(schedules.size()), bubble(schedules.size());
      for (int step = 0; step < bench_steps.total(); ++step)
        for (size_t k = 0; k < schedules.size(); ++k) {
          const runtime::StepStats st = runs[k]->trainer.step(source->batch(step));
          at::Tensor slowest = at::full({1}, st.batch_s, at::kDouble);
          at::Tensor waited = at::full({1}, st.recv_wait_s / st.batch_s, at::kDouble);
          runtime::all_reduce_now(world, slowest, runtime::ReduceOp::Max);
          runtime::all_reduce_now(world, waited);
          if (!bench_steps.measured(step)) continue;
          batch[k].push_back(slowest.item<double>());
          bubble[k].push_back(waited.item<double>() / static_cast<double>(world.size()));
        }
      if (world.rank() != 0) continue;
      fmt::print("\nstages of {} blocks:\n", fmt::join(units, ", "));
      fmt::print("{:>15}  {:>11}  {:>10}  {:>7}  {:>10}\n", "schedule", "batch (ms)", "vs gpipe", "bubble", "vs gpipe");
      const double b0 = median(batch[0]), w0 = median(bubble[0]);
      for (size_t k = 0; k < schedules.size(); ++k) {
        const double b = median(batch[k]), w = median(bubble[k]);
        fmt::print("{:>15}  {:>11.2f}  {:>10.3f}  {:>6.1f}%  {:>10.3f}\n", plan::pipeline_schedule_name(schedules[k]),
                   b * 1e3, b / b0, 100 * w, w0 > 0 ? w / w0 : 0.0);
      }
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), kExitInternal);
  }
  return 0;
}
