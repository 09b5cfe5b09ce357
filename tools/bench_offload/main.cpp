// bench_offload: the offloaded optimizer's phase at all-reduce coarsening k = 1, 2, 4, 8
// and with no overlap, measured in one run (AxoNN 2022 section V-B, seed-spec A6).
//
//   mpirun -np 2 bench_offload [--grid 1,1,1,2] [--model gpt-bench] [--bucket-elements 262144]
//
// Every variant trains its own copy of the same model with the optimizer offloaded
// (plan::OptimizerSettings) and clipping off, which the overlap needs. "none" reduces
// every chunk, then updates; k reduces chunks of k buckets and runs chunk c's buckets on
// the worker thread while chunk c+1 is reduced. The variants take turns step by step, so
// that drift in the machine's speed hits all of them alike. Per variant: the median
// optimizer phase of the slowest rank (after the backward: the data-parallel all-reduce
// and Adam), its ratio to "none", the time blocked on the all-reduces, and the number of
// chunks, and the planner's phase for k (docs/model.md section 11) from the all-reduce
// and update times measured with "none" and the measured cost of one collective call. The variants compute the same numbers; the last column checks it (the loss of
// the last step, relative to "none").
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/planner/batch_time.hpp"
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
  model_args.grid = "1,1,1,2";
  int64_t bucket_elements = 262144;
  tools::BenchSteps bench_steps;
  tools::BenchProgress progress;
  CLI::App app{"bench_offload: the offloaded optimizer's phase at all-reduce coarsening 1, 2, 4, 8 and none"};
  model_args.add_options(app);
  app.add_option("--bucket-elements", bucket_elements, "bsize: elements per optimizer bucket")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_steps.add_options(app, "per variant");
  progress.add_options(app);
  CLI11_PARSE(app, argc, argv);
  progress.start();
  runtime::set_compute_threads(1);
  try {
    tools::BenchGpt b(world, model_args);
    auto& [grid, desc, cfg, plan, pg, source, weights] = b;
    const std::vector<int> coarsenings = {0, 1, 2, 4, 8};  // 0: no overlap
    std::vector<std::unique_ptr<gpt::GptStage>> runs;
    for (int k : coarsenings) {
      plan::Plan p = plan;
      p.optimizer.offload = true;
      p.optimizer.bucket_elements = bucket_elements;
      p.optimizer.allreduce_coarsening = k;
      runs.push_back(std::make_unique<gpt::GptStage>(p, pg, cfg, weights.named_parameters(), nullptr,
                                                     runtime::TrainerOptions{1e-3, /*max_grad_norm=*/0.0}));
    }
    // What one collective call over data costs beyond its bytes: the median of 50
    // one-element all-reduces (after 10 unmeasured), the model's per-chunk term.
    std::vector<double> calls;
    at::Tensor one = at::zeros({1});
    for (int i = 0; i < 60; ++i) {
      const double t0 = now_s();
      runtime::all_reduce_now(pg.data(), one);
      if (i >= 10) calls.push_back(now_s() - t0);
    }
    at::Tensor call_s = at::tensor({median(calls)}, at::kDouble);
    runtime::all_reduce_now(world, call_s, runtime::ReduceOp::Max);
    const double per_call = call_s.item<double>();
    const size_t n = coarsenings.size();
    std::vector<std::vector<double>> phase(n), wait(n);
    std::vector<double> last_loss(n);
    for (int s = 0; s < bench_steps.total(); ++s)
      for (size_t v = 0; v < n; ++v) {
        runtime::StepStats st = runs[v]->trainer.step(source->batch(s));
        at::Tensor t = at::tensor({st.optimizer_s, st.optimizer_reduce_wait_s}, at::kDouble);
        runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);  // the slowest rank
        last_loss[v] = st.loss;
        if (!bench_steps.measured(s)) continue;
        phase[v].push_back(t[0].item<double>());
        wait[v].push_back(t[1].item<double>());
      }
    if (world.rank() == 0) {
      // The optimizer's two reduction groups (optimizer.hpp): over data, and over Z x data.
      int64_t segment[2] = {0, 0};
      for (const auto& p : runs.front()->model.parameters()) segment[p.spec.replicated_over_z() ? 1 : 0] += p.tensor.numel();
      const int64_t elements = segment[0] + segment[1];
      auto chunks = [&](int64_t k) {
        int64_t c = 0;
        for (int64_t e : segment) c += (e + k * bucket_elements - 1) / (k * bucket_elements);
        return c;
      };
      fmt::print("bench_offload: {} ({} layers, hidden {}, {} parameters on this rank), {} ranks, grid {}, "
                 "bsize {} elements, clipping off, progress {}, median of {} steps per variant (slowest rank)\n",
                 desc.name, cfg.layers, cfg.hidden, elements, world.size(), grid.to_string(), bucket_elements,
                 progress.describe(),
                 bench_steps.steps);
      fmt::print("one collective call over data: {:.1f} us (the model's per-chunk term)\n", per_call * 1e6);
      fmt::print("{:>5}  {:>6}  {:>14}  {:>8}  {:>16}  {:>10}  {:>18}\n", "k", "chunks", "optimizer (ms)", "vs none",
                 "reduce wait (ms)", "model (ms)", "loss vs none (rel)");
      const double base = median(phase[0]);
      // The planner's phase (docs/model.md section 11) from "none" (one all-reduce per
      // reduction group): the all-reduce's bandwidth term A = its wait less the per-call
      // cost of each call, the update U = the rest.
      const int64_t none_calls = (segment[0] > 0) + (segment[1] > 0);
      const double all_reduce = median(wait[0]) - static_cast<double>(none_calls) * per_call,
                   update = base - median(wait[0]);
      for (size_t v = 0; v < n; ++v) {
        const int k = coarsenings[v];
        const double ph = median(phase[v]);
        const double model =
            planner::offloaded_optimizer_phase_s(all_reduce, update, k == 0 ? none_calls : chunks(k), k > 0, per_call);
        fmt::print("{:>5}  {:>6}  {:>14.2f}  {:>8.3f}  {:>16.2f}  {:>10.2f}  {:>18.1e}\n",
                   k == 0 ? std::string("none") : std::to_string(k), k == 0 ? std::string("-") : std::to_string(chunks(k)),
                   ph * 1e3, ph / base, median(wait[v]) * 1e3, model * 1e3,
                   std::abs(last_loss[v] - last_loss[0]) / std::abs(last_loss[0]));
      }
    }
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), 2);
  }
  return 0;
}
