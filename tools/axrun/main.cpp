// axrun: train the model of a plan under mpirun/srun.
//
//   mpirun -np 8 axrun --plan plan.json [--steps 20] [--data FILE] [--seed 1]
//          [--threads 1] [--lr 1e-3] [--measure axrun_measure.json] [--trace DIR]
//          [--overlap-level 0-4] [--async-input-grad-all-reduce on|off]
//          [--async-weight-grad-reduce-scatter on|off] [--prefetch-all-gather on|off]
//          [--cache-layers N] [--bucketed-data-parallel on|off] [--checkpointing on|off]
//          [--progress thread|poll]
//
// The overlap switches and activation checkpointing come from the plan; the flags
// override them (--overlap-level first, then the individual switches). Rank 0 prints
// a progress line per step and writes the measurement JSON (per-step batch time, the
// time of each phase, the communication breakdown by kind); --trace DIR writes one
// Chrome trace per rank (DIR/rank<R>.json). Input errors (bad plan, world size, data
// file) are found on every rank before training; the job then exits with code 2 and
// one message. A failure during training ends every rank through MPI_Abort.
#include <ATen/Parallel.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "axonn/common/error.hpp"
#include "axonn/gpt/gpt.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/launch.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/trainer.hpp"

using namespace axonn;

namespace {

struct Args {
  std::string plan_path, data, measure = "axrun_measure.json", trace_dir;
  int overlap_level = -1;  // -1: the plan's switches
  int64_t cache_layers = -1;
  std::string async_ar, async_rs, prefetch, bucketed, checkpointing;  // empty, on or off
  std::string progress = "thread";
  int64_t steps = 20;
  uint64_t seed = 1;
  int threads = 1;
  double lr = 1e-3;
};

// Fault injection for tests (docs/runtime.md): AXONN_FAIL_RANK and AXONN_FAIL_STEP make
// that rank throw at that step.
void maybe_inject_failure(int rank, int64_t step) {
  const char* r = std::getenv("AXONN_FAIL_RANK");
  const char* s = std::getenv("AXONN_FAIL_STEP");
  if (r && s && std::atoi(r) == rank && std::atoll(s) == step)
    throw std::runtime_error("injected failure (AXONN_FAIL_RANK/AXONN_FAIL_STEP)");
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) throw Error("axrun", "cannot write", tmp, "a writable path");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("axrun", "cannot rename", tmp, "a writable directory");
}

}  // namespace

int main(int argc, char** argv) {
  runtime::MpiEnvironment env(&argc, &argv);
  auto world = runtime::MpiCommunicator::world();
  const int rank = world->rank();

  Args a;
  CLI::App app{"axrun: train the model of an axplan plan with 4D tensor + data parallelism"};
  app.add_option("--plan", a.plan_path, "plan JSON written by axplan plan")->required();
  app.add_option("--steps", a.steps, "training steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--data", a.data, "train a byte-level LM on this text file (default: synthetic tokens)");
  app.add_option("--seed", a.seed, "seed of the weights and the data")->capture_default_str();
  app.add_option("--threads", a.threads, "LibTorch threads per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", a.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--measure", a.measure, "measurement JSON written by rank 0")->capture_default_str();
  app.add_option("--trace", a.trace_dir, "write a Chrome trace per rank into this directory");
  app.add_option("--overlap-level", a.overlap_level, "0 none .. 4 all four optimizations (overrides the plan)")
      ->check(CLI::Range(0, 4));
  const auto on_off = CLI::IsMember({"on", "off"});
  app.add_option("--async-input-grad-all-reduce", a.async_ar, "optimization 1")->check(on_off);
  app.add_option("--async-weight-grad-reduce-scatter", a.async_rs, "optimization 2")->check(on_off);
  app.add_option("--prefetch-all-gather", a.prefetch, "optimization 3")->check(on_off);
  app.add_option("--cache-layers", a.cache_layers, "optimization 4: layers keeping gathered weights")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bucketed-data-parallel", a.bucketed, "data-parallel all-reduce in buckets during backward")
      ->check(on_off);
  app.add_option("--checkpointing", a.checkpointing, "activation checkpointing per block")->check(on_off);
  app.add_option("--progress", a.progress, "who drives MPI progress: a background thread, or polls at layer boundaries")
      ->check(CLI::IsMember({"thread", "poll"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = 0;
    if (rank == 0) code = app.exit(e);
    else code = e.get_exit_code() == 0 ? 0 : kExitUsage;
    return code == 0 ? 0 : kExitUsage;
  }
  at::set_num_threads(a.threads);

  // Setup: every rank validates the same inputs; one agreed outcome, no hang.
  std::string setup_error;
  plan::Plan plan;
  std::unique_ptr<runtime::TokenSource> source;
  gpt::GptConfig cfg;
  try {
    runtime::detect_launch(std::getenv);
    plan = plan::load_plan(a.plan_path);
    if (plan.grid.total() != world->size())
      throw Error("axrun", fmt::format("plan {} needs {} ranks ({}) but the job has {}", a.plan_path, plan.grid.total(),
                                       plan.grid.to_string(), world->size()),
                  "MPI world size", fmt::format("mpirun -np {}", plan.grid.total()));
    cfg = gpt::GptConfig::from(plan.model);
    if (plan.grid.ginter != 1)
      throw Error("axrun", "pipeline parallelism (ginter > 1) is not implemented in the runtime yet",
                  a.plan_path + ": /grid/ginter", "1");
    source = runtime::make_token_source(a.data, cfg.vocab, plan.batch.seqs, cfg.seq_len, a.seed);
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  int failed = setup_error.empty() ? 0 : 1, any_failed = 0, first_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed) {
    int mine = failed ? rank : world->size();
    MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == first_failed) std::cerr << "axrun: " << setup_error << "\n";
    return kExitUsage;
  }

  try {
    runtime::ProcessGrid grid(*world, plan.grid, plan.placement_order);
    gpt::ParallelOptions options;
    options.overlap = plan.overlap;
    options.activation_checkpointing = plan.activation_checkpointing;
    if (a.overlap_level >= 0) {
      const int64_t bucket = options.overlap.bucket_bytes;
      options.overlap = plan::OverlapSettings::level(a.overlap_level, plan.overlap.cache_all_gather_layers);
      options.overlap.bucket_bytes = bucket;
    }
    auto set = [](const std::string& v, bool& field) {
      if (!v.empty()) field = v == "on";
    };
    set(a.async_ar, options.overlap.async_input_grad_all_reduce);
    set(a.async_rs, options.overlap.async_weight_grad_reduce_scatter);
    set(a.prefetch, options.overlap.prefetch_all_gather);
    set(a.bucketed, options.overlap.bucketed_data_parallel_all_reduce);
    set(a.checkpointing, options.activation_checkpointing);
    if (a.cache_layers >= 0) options.overlap.cache_all_gather_layers = a.cache_layers;
    std::unique_ptr<runtime::MpiProgressThread> progress;
    if (a.progress == "thread") progress = std::make_unique<runtime::MpiProgressThread>(std::chrono::microseconds(50));
    runtime::Tracer tracer(!a.trace_dir.empty());
    options.tracer = &tracer;
    gpt::SerialGpt init(cfg, a.seed);  // every rank builds the serial weights, then keeps its shards
    gpt::ParallelGpt model(cfg, grid, init.named_parameters(), options);
    runtime::Trainer trainer(grid, model, plan, runtime::TrainerOptions{a.lr, 1.0});
    if (rank == 0)
      fmt::print("axrun: {} on {} ranks, grid {}, {} sequences x {} tokens per step, {} micro-batch(es); {} thread(s) "
                 "per rank; overlap: async dI all-reduce {}, async dW reduce-scatter {}, all-gather prefetch {}, "
                 "cache {} layers, bucketed data all-reduce {}; checkpointing {}\n",
                 plan.model.name, world->size(), plan.grid.to_string(), plan.batch.seqs, cfg.seq_len,
                 plan.microbatches(), a.threads, options.overlap.async_input_grad_all_reduce,
                 options.overlap.async_weight_grad_reduce_scatter, options.overlap.prefetch_all_gather,
                 options.overlap.cache_all_gather_layers, options.overlap.bucketed_data_parallel_all_reduce,
                 options.activation_checkpointing);
    nlohmann::json steps = nlohmann::json::array();
    // Caught here, while the model and its collectives in flight are still alive: ending
    // the job must not wait for them (another rank may never complete them).
    try {
    for (int64_t step = 0; step < a.steps; ++step) {
      maybe_inject_failure(rank, step);
      runtime::StepStats s = trainer.step(source->batch(step));
      steps.push_back({{"step", step}, {"loss", s.loss}, {"grad_norm", s.grad_norm}, {"batch_s", s.batch_s},
                       {"forward_s", s.forward_s}, {"backward_s", s.backward_s}, {"grad_sync_s", s.grad_sync_s},
                       {"optimizer_s", s.optimizer_s}, {"breakdown", s.breakdown.to_json()}});
      const auto& b = s.breakdown;
      if (rank == 0)
        fmt::print("step {:>4}/{}  loss {:.4f}  batch {:.4f} s  (forward {:.4f}  backward {:.4f}  sync {:.4f}  "
                   "optimizer {:.4f}; communication {:.4f} s, {:.0f}% exposed)\n",
                   step + 1, a.steps, s.loss, s.batch_s, s.forward_s, s.backward_s, s.grad_sync_s, s.optimizer_s,
                   b.comm_s, b.comm_s > 0 ? 100.0 * b.exposed_comm_s / b.comm_s : 0.0);
    }
    } catch (const std::exception& e) {
      runtime::abort_job(e.what(), 3);
    }
    if (!a.trace_dir.empty()) {
      std::filesystem::create_directories(a.trace_dir);
      tracer.write_chrome_trace(a.trace_dir + "/rank" + std::to_string(rank) + ".json", rank);
    }
    if (rank == 0) {
      nlohmann::json m = {{"plan", a.plan_path}, {"model", plan.model.name}, {"world_size", world->size()},
                          {"grid", {{"gx", plan.grid.gx}, {"gy", plan.grid.gy}, {"gz", plan.grid.gz},
                                    {"gdata", plan.grid.gdata}, {"ginter", plan.grid.ginter}}},
                          {"threads_per_rank", a.threads}, {"data", a.data.empty() ? "synthetic" : a.data},
                          {"steps", steps}};
      write_atomically(a.measure, m.dump(2) + "\n");
    }
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), 3);
  }
  return 0;
}
