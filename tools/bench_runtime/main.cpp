// bench_runtime: the runtime's step time against plain LibTorch, and its phases.
//
//   bench_runtime [--model gpt-bench] [--seqs 8] [--steps 20]                 one rank:
//       the same GPT, weights and batches as a plain LibTorch step (SerialGpt +
//       torch::optim::Adam + clip_grad_norm_) and as a runtime step (ParallelGpt +
//       Trainer on a 1-rank grid), interleaved; prints both medians and their ratio.
//   mpirun -np 8 bench_runtime --grid 2,2,2,1 [...]                            N ranks:
//       the runtime step on that grid; per phase, the median over steps of the
//       slowest rank.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/device_memory.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/trainer.hpp"
#include "bench_common.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  std::string model_name = "gpt-bench", grid_text;
  int64_t seqs = 8;
  tools::BenchSteps bench_steps{20, 3};
  int threads = 1;
  CLI::App app{"bench_runtime: runtime step time vs plain LibTorch, and per-phase times"};
  app.add_option("--model", model_name, "model description")->capture_default_str();
  app.add_option("--seqs", seqs, "sequences per step")->capture_default_str();
  bench_steps.add_options(app, "");
  app.add_option("--threads", threads, "compute threads per rank (LibTorch's and the BLAS's own pool)")->capture_default_str();
  app.add_option("--grid", grid_text, "gx,gy,gz,gdata (default 1,1,1,1 on one rank)");
  bool count_memory = false;
  app.add_flag("--count-device-memory", count_memory, "allocate through the counting device allocator, as axrun does");
  CLI11_PARSE(app, argc, argv);
  runtime::set_compute_threads(threads);
  const bool root = world.rank() == 0;
  if (count_memory) runtime::DeviceMemory::install();
  try {
    auto desc = model::load_model(model_name);
    gpt::GptConfig cfg = gpt::GptConfig::from(desc);
    topo::Grid grid = grid_text.empty() ? topo::Grid{1, 1, 1, world.size(), 1}
                                        : tools::parse_bench_grid(grid_text, world.size());
    plan::Plan plan = tools::bench_plan(desc, grid, seqs);
    plan.overlap = plan::OverlapSettings::synchronous();  // the runtime's plain path against plain LibTorch
    plan.activation_checkpointing = false;
    runtime::ProcessGrid pg(world, grid, topo::default_order());
    auto source = runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, 1);
    gpt::SerialGpt serial(cfg, 1);
    gpt::SerialGpt weights(cfg, 1);
    gpt::GptStage run(plan, pg, cfg, weights.named_parameters(), nullptr, runtime::TrainerOptions{1e-3, 1.0});
    runtime::Trainer& trainer = run.trainer;
    std::vector<at::Tensor> sp;
    for (auto& [n, t] : serial.named_parameters()) sp.push_back(t);
    torch::optim::Adam adam(sp, torch::optim::AdamOptions(1e-3));
    const bool compare = world.size() == 1;

    std::vector<double> plain, batch, fwd, bwd, sync, opt;
    for (int s = 0; s < bench_steps.total(); ++s) {
      at::Tensor b = source->batch(s);
      double plain_s = 0;
      if (compare) {
        double t0 = now_s();
        adam.zero_grad();
        serial.loss(b).backward();
        torch::nn::utils::clip_grad_norm_(sp, 1.0);
        adam.step();
        plain_s = now_s() - t0;
      }
      runtime::StepStats st = trainer.step(b);
      // the slowest rank's time of each phase
      at::Tensor t = at::tensor({st.batch_s, st.forward_s, st.backward_s, st.grad_sync_s, st.optimizer_s}, at::kDouble);
      runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);
      if (!bench_steps.measured(s)) continue;
      plain.push_back(plain_s);
      batch.push_back(t[0].item<double>());
      fwd.push_back(t[1].item<double>());
      bwd.push_back(t[2].item<double>());
      sync.push_back(t[3].item<double>());
      opt.push_back(t[4].item<double>());
    }
    if (root) {
      fmt::print("bench_runtime: {} ({} layers, hidden {}), {} sequences x {} tokens per step, {} rank(s), grid {}, "
                 "{} thread(s) per rank, median of {} steps after {} warm-up\n",
                 desc.name, cfg.layers, cfg.hidden, seqs, cfg.seq_len, world.size(), grid.to_string(), threads,
                 bench_steps.steps, bench_steps.warmup);
      if (compare)
        fmt::print("plain LibTorch step {:.2f} ms, runtime step {:.2f} ms, ratio runtime/plain {:.3f}\n",
                   median(plain) * 1e3, median(batch) * 1e3, median(batch) / median(plain));
      fmt::print("phases (ms, slowest rank): batch {:.2f}  forward {:.2f}  backward {:.2f}  grad sync {:.2f}  "
                 "optimizer {:.2f}\n",
                 median(batch) * 1e3, median(fwd) * 1e3, median(bwd) * 1e3, median(sync) * 1e3, median(opt) * 1e3);
    }
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), 2);
  }
  return 0;
}
