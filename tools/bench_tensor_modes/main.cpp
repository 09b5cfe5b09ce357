// bench_tensor_modes: one training step of each tensor mode on the same ranks, measured
// in one run, as ratios to Megatron's 1D, beside the planner's predicted ratios
// (issue #11). Run it on a rate-limited network (tools/bench_tensor_modes.sh does, on
// 4 and 8 ranks, with a topology calibrated on that network first).
//
//   mpirun -np N bench_tensor_modes --topology cal.json [--model gpt-bench] [--seqs 8]
//          [--overlap-level 4] [--steps 5] [--warmup 1]
//
// The modes, each on all N ranks with no data parallelism or pipeline, except 2.5d:
//   1d        1,N,1                    (Megatron's column/row pairs)
//   axonn3d   the planner's best tensor-only grid of AxoNN's 3D other than 1d
//   2d        1,q,q with q^2 = N       (SUMMA; when N is a square)
//   2.5d      1,q,q,d with d q^2 = N, q = 2 (Tesseract: 2d with d-way data parallelism)
//   3d        l,l,l with l^3 = N       (Colossal-AI's 3D; when N is a cube)
//   sequence  N ranks splitting each sequence (ring self-attention)
// Each mode's plan is the planner's (planner::make_plan on the calibrated topology:
// fp32, the micro-batches and overlaps it predicts with). The modes take turns step by
// step, each on its own copy of the model, so that drift in the machine's speed hits all
// alike. Per mode: the median batch time of the slowest rank over --steps steps, and the
// planner's predicted batch time, each also as a ratio to 1d.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/topology/topology_io.hpp"
#include "bench_common.hpp"

using namespace axonn;

namespace {

// The modes that fit `n` ranks (above), the axonn3d grid chosen by `best_axonn3d`.
std::vector<tools::ModeGrid> modes_for(int64_t n, const topo::Grid& best_axonn3d) {
  std::vector<tools::ModeGrid> out = tools::colossal_mode_grids(n, "bench_tensor_modes");
  out.insert(out.begin() + 1, {"axonn3d", best_axonn3d});
  out.push_back({"sequence", topo::parse_group_grid(topo::GroupMode::Sequence, std::to_string(n) + ",1,1",
                                                    "bench_tensor_modes", "sequence")});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  std::string model_name = "gpt-bench", topology_path;
  int64_t seqs = 8;
  int overlap_level = 4;
  tools::BenchSteps bench_steps;
  bench_steps.steps = 5;
  bench_steps.warmup = 1;
  tools::BenchProgress progress;
  CLI::App app{"bench_tensor_modes: a training step of each tensor mode, as ratios to 1d, beside the planner's"};
  app.add_option("--model", model_name, "model description")->capture_default_str();
  app.add_option("--topology", topology_path, "the network's topology (axplan calibrate on it)")->required();
  app.add_option("--seqs", seqs, "sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--overlap-level", overlap_level, "overlaps of the plans (0-4, no all-gather cache)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4));
  bench_steps.add_options(app, "per mode");
  progress.add_options(app);
  CLI11_PARSE(app, argc, argv);
  progress.start();
  runtime::set_compute_threads(1);
  try {
    const model::ModelDescription desc = model::load_model(model_name);
    const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
    const topo::Topology topology = topo::load_topology(topology_path);
    planner::PlannerOptions po;
    po.gpus = world.size();
    po.batch_seqs = seqs;
    po.precision = plan::Precision::fp32();  // the runtime's dtype on CPU
    po.overlap = plan::OverlapSettings::level(overlap_level, 0);
    planner::select_tensor_modes(po, "axonn3d", "bench_tensor_modes");
    // AxoNN's 3D: the best predicted grid of tensor parallelism alone, other than 1d.
    std::optional<topo::Grid> axonn3d;
    for (const auto& e : planner::rank_candidates(desc, topology, po).feasible)
      if (e.grid.gdata == 1 && e.grid.ginter == 1 && planner::tensor_mode_name(e.grid) == "axonn3d") {
        axonn3d = e.grid;
        break;
      }
    if (!axonn3d)
      throw InputError("bench_tensor_modes", fmt::format("no feasible AxoNN 3D grid of {} ranks", world.size()),
                       "--model " + model_name, "a model whose tensor-parallel grids fit the topology's memory");
    struct Run {
      tools::ModeGrid mode;
      planner::Evaluation predicted;
      std::unique_ptr<runtime::ProcessGrid> pg;
      std::unique_ptr<gpt::GptStage> stage;
      std::vector<double> batch_s;
    };
    std::vector<Run> runs;
    gpt::SerialGpt weights(cfg, 1);
    for (const tools::ModeGrid& m : modes_for(world.size(), *axonn3d)) {
      planner::Evaluation e = planner::evaluate(desc, topology, m.grid, po);
      if (!e.feasible) {
        if (world.rank() == 0) fmt::print("{}: {} not feasible: {}\n", m.name, m.grid.to_string(), e.rejected_because);
        continue;
      }
      const plan::Plan p = planner::make_plan(desc, topology, po, e, 1, 1);
      auto pg = std::make_unique<runtime::ProcessGrid>(world, p.grid, p.placement_order);
      auto stage = std::make_unique<gpt::GptStage>(p, *pg, cfg, weights.named_parameters(), nullptr);
      runs.push_back({m, e, std::move(pg), std::move(stage), {}});
    }
    if (runs.empty() || runs.front().mode.name != "1d")
      throw InputError("bench_tensor_modes", "1d is not feasible", "--model " + model_name,
                       "a model that 1d on every rank can train (the reference of the ratios)");
    auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 1);
    if (world.rank() == 0)
      fmt::print("bench_tensor_modes: {} on {} ranks, {} sequences per step, fp32, overlap level {}, topology {}; "
                 "median of {} steps per mode (slowest rank), progress {}\n",
                 desc.name, world.size(), seqs, overlap_level, topology.name, bench_steps.steps,
                 progress.describe());
    for (int step = 0; step < bench_steps.total(); ++step)
      for (auto& r : runs) {
        const runtime::StepStats st = r.stage->trainer.step(source->batch(step));
        const double slowest = tools::max_over_ranks(world, st.batch_s);
        if (bench_steps.measured(step)) r.batch_s.push_back(slowest);
      }
    if (world.rank() == 0) {
      fmt::print("{:>10}  {:<44}  {:>13}  {:>7}  {:>14}  {:>7}\n", "mode", "grid", "measured (ms)", "vs 1d",
                 "predicted (ms)", "vs 1d");
      const double m0 = median(runs.front().batch_s), p0 = runs.front().predicted.batch_s;
      for (const auto& r : runs) {
        const double m = median(r.batch_s), p = r.predicted.batch_s;
        fmt::print("{:>10}  {:<44}  {:>13.1f}  {:>7.3f}  {:>14.1f}  {:>7.3f}\n", r.mode.name, r.mode.grid.to_string(),
                   m * 1e3, m / m0, p * 1e3, p / p0);
      }
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), kExitInternal);
  }
  return 0;
}
