// axrun: train the model of a plan under mpirun/srun.
//
//   mpirun -np 8 axrun --plan plan.json [--steps 20] [--data FILE] [--seed 1]
//          [--threads 1] [--lr 1e-3] [--measure axrun_measure.json] [--trace DIR] [--profile-ops DIR]
//          [--overlap-level 0-4] [--async-input-grad-all-reduce on|off]
//          [--async-weight-grad-reduce-scatter on|off] [--prefetch-all-gather on|off]
//          [--cache-layers N] [--bucketed-data-parallel on|off] [--checkpointing on|off]
//          [--progress thread|poll] [--wait auto|yield|sleep] [--log-every N] [--pipeline-schedule message-driven|1f1b|gpipe]
//          [--device-memory SIZE] [--save DIR [--save-every K] [--keep N]] [--resume DIR]
//          [--collective-timeout SECONDS]
//
// Under mpirun or srun (axonn/runtime/launch.hpp): the launcher's rank and size must
// be MPI's, or the job stops with a message (an MPI without that launcher's support).
// The overlap switches and activation checkpointing come from the plan; the flags
// override them (--overlap-level first, then the individual switches). Rank 0 shows
// progress (step, loss, tokens/s, ETA): one live line on a terminal, else a line every
// --log-every steps (and always the last step); --log-every N also forces lines on a
// terminal. It writes the measurement JSON (per-step batch time, the time of each
// phase, the communication breakdown by kind, the peak device bytes of each step and
// the live ones after it (weights, gradients, optimizer state and the next batch), the
// process's resident bytes (rank 0's);
// after the steps, each rank's peak beside the plan's predicted memory per GPU);
// --trace DIR writes one Chrome trace per rank (DIR/rank<R>.json); --profile-ops DIR
// writes each rank's CPU time by LibTorch operator over the steps after the first
// (DIR/rank<R>-ops.json, axonn/runtime/op_profile.hpp) and prints rank 0's top ten. Device memory is
// counted by LibTorch's allocator (axonn/runtime/device_memory.hpp); --device-memory
// SIZE (bytes, or with a unit: 512MiB, 2GiB) fails the job like a GPU out of memory
// when a rank's tensors would take more. --save DIR writes a checkpoint every K steps
// and after the last (axonn/runtime/checkpoint.hpp: each rank its shards, atomically,
// the newest N kept); --resume DIR (a checkpoint, or a --save directory: its newest
// complete one) continues from it to step --steps, under this plan's layout, whatever
// the layout that wrote it. Input errors (bad plan, world size, data file) are found
// on every rank before training; the job then exits with code 2 and one message. A
// collective or message that takes longer than --collective-timeout (a rank hangs or
// died) throws on the ranks waiting for it (runtime::set_completion_timeout). A
// failure during training ends every rank through MPI_Abort (exit code 3 for a
// communication failure, 1 otherwise).
#include <ATen/Parallel.h>
#include <unistd.h>

#include <array>
#include <csignal>

#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <nlohmann/json.hpp>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/units.hpp"
#include "axonn/gpt/gpt_l2l.hpp"
#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/runtime/check.hpp"
#include "axonn/runtime/checkpoint.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/device_memory.hpp"
#include "axonn/runtime/host_memory.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/launch.hpp"
#include "axonn/runtime/machine_cores.hpp"
#include "axonn/runtime/memory_breakdown.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/op_profile.hpp"
#include "axonn/runtime/precision.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/resident_memory.hpp"
#include "axonn/runtime/trainer.hpp"
#include "axonn/topology/topology_io.hpp"
#include "axrun/progress.hpp"

using namespace axonn;

namespace {

struct Args {
  std::string plan_path, data, measure = "axrun_measure.json", trace_dir, profile_ops_dir;
  int overlap_level = -1;  // -1: the plan's switches
  int64_t cache_layers = -1;
  std::string async_ar, async_rs, prefetch, bucketed, checkpointing;  // empty, on or off
  std::string progress = "thread";
  std::string wait = "auto";
  std::string pipeline_schedule;  // empty: the plan's
  int64_t steps = 20;
  uint64_t seed = 1;
  int threads = 1;
  double lr = 1e-3;
  int64_t log_every = 0;  // 0: live line on a terminal, else every 10 steps
  int64_t device_memory = 0;  // bytes; 0: no budget
  std::string offload;        // empty (the plan's), on or off
  int64_t bucket_elements = 0, coarsening = -1;  // 0 / -1: the plan's
  int64_t zero = -1;                              // -1: the plan's
  double clip_grad = 1.0;     // <= 0: no clipping
  std::string save_dir, resume;
  int64_t save_every = 0;  // 0: after the last step only
  int64_t keep = 2;
  double collective_timeout = 600;  // seconds; 0: none
};

// Fault injection for tests (docs/runtime.md): AXONN_FAIL_RANK and AXONN_FAIL_STEP make
// that rank throw at that step.
void maybe_inject_failure(int rank, int64_t step) {
  const char* r = std::getenv("AXONN_FAIL_RANK");
  const char* s = std::getenv("AXONN_FAIL_STEP");
  if (r && s && std::atoi(r) == rank && std::atoll(s) == step)
    throw std::runtime_error("injected failure (AXONN_FAIL_RANK/AXONN_FAIL_STEP)");
}

// AXONN_KILL_RANK and AXONN_KILL_STEP: that rank dies by SIGKILL at that step, as a
// crashed node would, with nothing cleaned up (AXONN_KILL_STAMP=FILE: it first writes
// the time, in ms since the epoch, there, for tests that time the job's end).
void maybe_kill(int rank, int64_t step) {
  const char* r = std::getenv("AXONN_KILL_RANK");
  const char* s = std::getenv("AXONN_KILL_STEP");
  if (!r || !s || std::atoi(r) != rank || std::atoll(s) != step) return;
  if (const char* stamp = std::getenv("AXONN_KILL_STAMP")) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::ofstream(stamp) << ms.count() << "\n";
  }
  std::raise(SIGKILL);
}

// AXONN_HANG_RANK and AXONN_HANG_STEP: that rank stops at that step, forever (the
// others' watchdog must end the job).
void maybe_hang(int rank, int64_t step) {
  const char* r = std::getenv("AXONN_HANG_RANK");
  const char* s = std::getenv("AXONN_HANG_STEP");
  if (r && s && std::atoi(r) == rank && std::atoll(s) == step)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Rank 0's operators with the most self time, per profiled step.
void print_top_ops(const runtime::OpProfile& ops, int64_t steps, const std::string& path) {
  const std::vector<runtime::OpTime> top = ops.totals();
  double self_s = 0;
  for (const runtime::OpTime& o : top) self_s += o.self_s;
  const double per = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  fmt::print("axrun: rank 0 spent {:.4f} s a step in LibTorch operators over {} profiled step(s) ({}); the most "
             "self time:\n",
             self_s * per, steps, path);
  for (size_t i = 0; i < std::min<size_t>(top.size(), 10); ++i)
    fmt::print("  {:<48} {:>7.1f} calls {:>9.4f} s self {:>9.4f} s total a step\n", top[i].name,
               static_cast<double>(top[i].calls) * per, top[i].self_s * per, top[i].total_s * per);
}

// AXONN_KILL_IN_CHECKPOINT=K: rank 0 dies by SIGKILL while saving the checkpoint of step
// K, after its files and manifest and before its completion marker.
std::function<void()> kill_in_checkpoint(int64_t step) {
  const char* k = std::getenv("AXONN_KILL_IN_CHECKPOINT");
  if (!k || std::atoll(k) != step) return {};
  return [] { std::raise(SIGKILL); };
}

}  // namespace

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  const int rank = world.rank();

  Args a;
  CLI::App app{"axrun: train the model of an axplan plan with 4D tensor + data parallelism"};
  app.add_option("--plan", a.plan_path, "plan JSON written by axplan plan")->required();
  app.add_option("--steps", a.steps, "training steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--data", a.data, "train a byte-level LM on this text file (default: synthetic tokens)");
  app.add_option("--seed", a.seed, "seed of the weights and the data")->capture_default_str();
  app.add_option("--threads", a.threads, "compute threads per rank: LibTorch's and the BLAS's own pool (compute_threads.hpp)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", a.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--measure", a.measure, "measurement JSON written by rank 0")->capture_default_str();
  app.add_option("--trace", a.trace_dir, "write a Chrome trace per rank into this directory");
  app.add_option("--profile-ops", a.profile_ops_dir,
                 "write each rank's CPU time by LibTorch operator, over the steps after the first, into "
                 "DIR/rank<R>-ops.json (LibTorch's profiler: those steps run slower)");
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
  app.add_option("--wait", a.wait,
                 "between polls of a wait: yield the core, or sleep once the wait is long (leaves time-shared cores "
                 "to the ranks computing); auto: sleep where the ranks have fewer cores than --threads each")
      ->check(CLI::IsMember({"auto", "yield", "sleep"}))
      ->capture_default_str();
  app.add_option("--pipeline-schedule", a.pipeline_schedule, "pipeline schedule (default: the plan's)")
      ->check(CLI::IsMember({"message-driven", "1f1b", "gpipe"}));
  app.add_option("--log-every", a.log_every,
                 "a progress line every N steps (default: one live line on a terminal, else every 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device-memory", a.device_memory,
                 "device memory budget per rank: bytes or with a unit (512MiB, 2GiB); past it the job fails as a GPU "
                 "out of memory")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--offload-optimizer", a.offload,
                 "fp32 master weights and Adam state in the host tier, updated in buckets (default: the plan's)")
      ->check(on_off);
  app.add_option("--bucket-elements", a.bucket_elements, "offload: elements per optimizer bucket (default: the plan's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--allreduce-coarsening", a.coarsening,
                 "offload: buckets per data-parallel all-reduce chunk, 0 = no overlap (default: the plan's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--zero", a.zero,
                 "ZeRO stage over the data-parallel group, 0-3: 1 shards Adam's state (and the offloaded master), "
                 "reduce-scatters the gradients and all-gathers the weights; 2 shards the weight gradients too, "
                 "reduced during each backward; 3 the weights too, gathered from their owners at each fetch "
                 "(default: the plan's)")
      ->check(CLI::Range(int64_t{0}, plan::OptimizerSettings::kMaxZeroStage));
  app.add_option("--clip-grad", a.clip_grad,
                 "clip the global gradient norm to this (0: off; on, the offloaded optimizer reduces everything "
                 "before updating, without overlap)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--save", a.save_dir,
                 "write checkpoints into this directory (DIR/step-NNNNNNNN): every --save-every steps and after the "
                 "last");
  app.add_option("--save-every", a.save_every, "steps between checkpoints (default: after the last step only)")
      ->check(CLI::PositiveNumber);
  app.add_option("--keep", a.keep, "complete checkpoints kept, the newest")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--resume", a.resume,
                 "continue from this checkpoint (or the newest complete one in this --save directory) to step --steps; "
                 "the plan may have another grid, pipeline or optimizer layout");
  app.add_option("--collective-timeout", a.collective_timeout,
                 "seconds a collective or message may take before the job ends with an error naming its group (a "
                 "rank hangs or died); 0: wait forever")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = 0;
    if (rank == 0) code = app.exit(e);
    else code = e.get_exit_code() == 0 ? 0 : kExitUsage;
    return code == 0 ? 0 : kExitUsage;
  }
  runtime::set_compute_threads(a.threads);
  runtime::set_completion_timeout(std::chrono::milliseconds(static_cast<int64_t>(a.collective_timeout * 1000)));

  // Setup: every rank validates the same inputs; one agreed outcome, no hang.
  std::string setup_error;
  plan::Plan plan;
  std::unique_ptr<runtime::TokenSource> source;
  gpt::GptConfig cfg;
  runtime::ElementTypes types;
  runtime::LaunchInfo launch;
  std::optional<runtime::CheckpointManifest> resume;
  int setup_code = kExitUsage;
  try {
    launch = runtime::detect_launch(std::getenv);
    if (launch.launcher != "none" && (launch.size != world.size() || launch.rank != rank))
      throw InputError("axrun",
                       fmt::format("the launcher ({}) started task {} of {}, but MPI sees rank {} of {}",
                                   launch.launcher, launch.rank, launch.size, rank, world.size()),
                       "launcher environment",
                       "an MPI built with that launcher's support (under Slurm: srun --mpi=pmix, or mpirun "
                       "inside the allocation)");
    plan = plan::load_plan(a.plan_path);
    if (plan.grid.total() != world.size())
      throw InputError("axrun", fmt::format("plan {} needs {} ranks ({}) but the job has {}", a.plan_path, plan.grid.total(),
                                       plan.grid.to_string(), world.size()),
                  "MPI world size", fmt::format("mpirun -np {}", plan.grid.total()));
    cfg = gpt::GptConfig::from(plan.model);
    types = runtime::element_types(plan.precision, a.plan_path);
    cfg.dtype = types.compute;
    source = runtime::make_token_source(a.data, cfg.vocab, plan.batch.seqs, cfg.seq_len, a.seed);
    if (!a.resume.empty()) {
      resume = runtime::read_manifest(runtime::find_checkpoint(a.resume));
      if (resume->seed != a.seed)
        throw InputError("axrun", fmt::format("--seed {} differs from the checkpoint's {}", a.seed, resume->seed),
                         resume->dir + "/manifest.json: /seed",
                         "the same seed (the data of each step follows from it)");
      if (!resume->data.empty() && resume->data != source->identity())
        throw InputError("axrun",
                         fmt::format("the data ({}) differs from the checkpoint's ({})", source->identity(), resume->data),
                         resume->dir + "/manifest.json: /data",
                         resume->data == "synthetic" ? "no --data (the checkpointed run trained on synthetic tokens)"
                                                     : "a --data file of the content the checkpointed run read");
      if (resume->step >= a.steps)
        throw InputError("axrun", fmt::format("--steps {} is not past the checkpoint's step {}", a.steps, resume->step),
                         "--steps", "more steps than the checkpoint has done (--steps counts from the run's start)");
    }
  } catch (const Error& e) {
    setup_error = e.what();
    setup_code = exit_code(e);
  } catch (const std::exception& e) {
    setup_error = e.what();
    setup_code = kExitInternal;
  }
  int failed = setup_error.empty() ? 0 : 1, any_failed = 0, first_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed) {
    int mine = failed ? rank : world.size();
    MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == first_failed) std::cerr << "axrun: " << setup_error << "\n";
    int code = setup_code, worst = 0;  // the same exit code on every rank
    if (!failed) code = 0;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  }

  // How a waiting rank passes the time (idle_wait.hpp); auto: by the cores each rank has.
  const double cores_per_rank = a.wait == "auto" ? runtime::measure_cores_per_rank(world) : 0.0;
  runtime::set_wait_policy(a.wait == "auto" ? runtime::automatic_wait_policy(cores_per_rank, a.threads)
                                            : runtime::parse_wait_policy(a.wait, "--wait"));
  try {
    if (plan.strategy == plan::Strategy::L2L &&
        (!a.offload.empty() || a.zero >= 0 || a.bucket_elements > 0 || a.coarsening >= 0 || !a.pipeline_schedule.empty()))
      throw InputError("axrun", "an optimizer or pipeline option with an l2l plan", a.plan_path + ": /strategy",
                       "none of --offload-optimizer, --zero, --bucket-elements, --allreduce-coarsening, "
                       "--pipeline-schedule: L2L's parameter server holds Adam in the host tier, and it has no "
                       "pipeline");
    runtime::ProcessGrid grid(world, plan.grid, plan.placement_order);
    if (a.overlap_level >= 0) {
      const int64_t bucket = plan.overlap.bucket_bytes;
      plan.overlap = plan::OverlapSettings::level(a.overlap_level, plan.overlap.cache_all_gather_layers);
      plan.overlap.bucket_bytes = bucket;
    }
    auto set = [](const std::string& v, bool& field) {
      if (!v.empty()) field = v == "on";
    };
    set(a.async_ar, plan.overlap.async_input_grad_all_reduce);
    set(a.async_rs, plan.overlap.async_weight_grad_reduce_scatter);
    set(a.prefetch, plan.overlap.prefetch_all_gather);
    set(a.bucketed, plan.overlap.bucketed_data_parallel_all_reduce);
    set(a.checkpointing, plan.activation_checkpointing);
    const plan::OptimizerSettings planned_optimizer = plan.optimizer;
    set(a.offload, plan.optimizer.offload);
    if (a.bucket_elements > 0) plan.optimizer.bucket_elements = a.bucket_elements;
    if (a.coarsening >= 0) plan.optimizer.allreduce_coarsening = a.coarsening;
    if (a.zero >= 0) plan.optimizer.zero = a.zero;
    const bool memory_overridden = planned_optimizer.offload != plan.optimizer.offload ||
                                   planned_optimizer.zero != plan.optimizer.zero ||
                                   (plan.optimizer.offload && planned_optimizer.bucket_elements != plan.optimizer.bucket_elements);
    if (a.cache_layers >= 0) plan.overlap.cache_all_gather_layers = a.cache_layers;
    if (!a.pipeline_schedule.empty())
      plan.pipeline.schedule = plan::parse_pipeline_schedule(a.pipeline_schedule, "axrun", "--pipeline-schedule");
    std::unique_ptr<runtime::MpiProgressThread> progress;
    if (a.progress == "thread") progress = std::make_unique<runtime::MpiProgressThread>(std::chrono::microseconds(50));
    runtime::Tracer tracer(!a.trace_dir.empty());
    // Sharded initialization: every rank computes only its shards, bitwise the serial
    // model's of the seed (gpt::InitialWeights), never a full parameter.
    runtime::DeviceMemory::install();
    runtime::DeviceMemory::reset_peak();
    const auto init = gpt::InitialWeights::seeded(a.seed);
    const runtime::TrainerOptions trainer_options{a.lr, a.clip_grad};
    std::unique_ptr<gpt::GptStage> stage;  // the 4D strategy
    std::unique_ptr<gpt::GptL2L> l2l;      // L2L
    if (plan.strategy == plan::Strategy::L2L)
      l2l = std::make_unique<gpt::GptL2L>(plan, grid, cfg, init, trainer_options);
    else
      stage = std::make_unique<gpt::GptStage>(plan, grid, cfg, init, &tracer, trainer_options);
    // The peak of building the model (weights, and what the optimizer allocates up front).
    const int64_t init_peak = runtime::DeviceMemory::peak_bytes();
    int64_t worst_init_peak = 0;
    AXONN_CHECK(MPI_Reduce(&init_peak, &worst_init_peak, 1, MPI_INT64_T, MPI_MAX, 0, world.handle()));
    if (rank == 0) {
      int64_t serial_bytes = 0;
      for (const auto& l : gpt::parameter_layout(cfg)) {
        int64_t n = 1;
        for (int64_t d : l.shape) n *= d;
        serial_bytes += n * static_cast<int64_t>(c10::elementSize(cfg.dtype));
      }
      fmt::print("axrun: initialization peak {:.2f} MiB per rank (the most of any rank), the serial model's parameters "
                 "{:.2f} MiB ({:.1f}%)\n",
                 static_cast<double>(worst_init_peak) / kBytesPerMiB, static_cast<double>(serial_bytes) / kBytesPerMiB,
                 100.0 * static_cast<double>(worst_init_peak) / static_cast<double>(serial_bytes));
    }
    runtime::DeviceMemory::empty_cache();  // initialization's sizes do not recur in the steps
    runtime::DeviceMemory::set_budget(a.device_memory);
    auto train_step = [&](const at::Tensor& batch) { return l2l ? l2l->trainer.step(batch) : stage->trainer.step(batch); };
    auto held_at_step_start = [&] {  // this rank's device memory now, by what holds it
      if (l2l) return runtime::device_memory_at_step_start(l2l->trainer.parameters());
      const runtime::Optimizer& o = stage->trainer.optimizer();
      return runtime::device_memory_at_step_start(stage->trainer.parameters(), o.held_weights(), o.held_gradients());
    };
    const int64_t first_step = resume ? resume->step : 0;
    if (resume) {
      const topo::Coords coords = grid.layout().coords_of(rank);
      if (l2l) l2l->trainer.load_state(runtime::load_checkpoint(*resume, grid.grid(), coords, l2l->trainer.parameters()));
      else stage->trainer.load_state(runtime::load_checkpoint(*resume, grid.grid(), coords, stage->trainer.parameters()));
      runtime::DeviceMemory::empty_cache();  // the loader's sizes do not recur
      if (rank == 0)
        fmt::print("axrun: resumed from {} (step {}, written on grid {}{})\n", resume->dir, resume->step,
                   resume->grid.to_string(), resume->grid == plan.grid ? "" : "; re-sliced to this plan's grid");
    }
    const runtime::CheckpointRun checkpoint_run{a.seed, plan::plan_to_json(plan), source->identity()};
    const auto& o = plan.overlap;
    if (rank == 0)
      fmt::print("axrun: {} on {} ranks ({}), grid {}, {} sequences x {} tokens per step, {} micro-batch(es){}; {} "
                 "thread(s) per rank; {}; overlap: async dI all-reduce {}, async dW reduce-scatter {}, all-gather prefetch "
                 "{}, cache {} layers, bucketed data all-reduce {}; checkpointing {}\n",
                 plan.model.name, world.size(), launch.launcher == "none" ? "one process" : "launched by " + launch.launcher,
                 plan.grid.to_string(), plan.batch.seqs, cfg.seq_len, plan.microbatches(),
                 plan.grid.ginter == 1 ? ""
                                       : fmt::format(", pipeline {} (limit {}) over stages of {} units",
                                                     plan::pipeline_schedule_name(plan.pipeline.schedule),
                                                     plan.pipeline_limit(), fmt::join(plan.stage_units(), "/")),
                 a.threads,
                 plan.precision.mixed()
                     ? fmt::format("mixed precision: {} weights and activations, {} gradients, fp32 master and Adam",
                                   types.compute == at::kBFloat16 ? "bf16" : "fp32",
                                   types.gradients == at::kBFloat16 ? "bf16" : "fp32")
                     : std::string("fp32"),
                 o.async_input_grad_all_reduce, o.async_weight_grad_reduce_scatter, o.prefetch_all_gather,
                 o.cache_all_gather_layers, o.bucketed_data_parallel_all_reduce, plan.activation_checkpointing);
    if (rank == 0)
      fmt::print("axrun: a waiting rank {} between polls (--wait {}{})\n",
                 runtime::wait_policy() == runtime::WaitPolicy::Sleep ? "sleeps once its wait is long" : "yields its core",
                 a.wait, a.wait == "auto" ? fmt::format(": {:.2f} cores per rank", cores_per_rank) : "");
    if (rank == 0 && l2l)
      fmt::print("axrun: L2L: {} units relayed through the device one at a time, {} micro-batch(es) per visit, "
                 "stash on the {}, prefetch {}; fp32 master weights and Adam in the host tier, each unit's gradient "
                 "reduced over the {} replica(s) and applied as it arrives{}\n",
                 plan.model.num_units, plan.microbatches(), plan::stash_tier_name(plan.l2l.stash),
                 plan.l2l.prefetch ? "on" : "off", plan.grid.gdata,
                 a.clip_grad > 0 ? " (clipping on: the updates wait for the last unit's gradient)" : "");
    if (rank == 0 && plan.optimizer.zero > 0)
      fmt::print("axrun: ZeRO stage {}: Adam's state{}{} sharded over the {} data-parallel ranks; {}\n",
                 plan.optimizer.zero,
                 !plan.optimizer.offload        ? ""
                 : plan.optimizer.zero >= 2 ? ", master weights (host tier)"
                                            : " and master weights (host tier)",
                 plan.optimizer.zero >= 3   ? ", the weight gradients and the weights"
                 : plan.optimizer.zero >= 2 ? " and the weight gradients"
                                            : "",
                 plan.grid.gdata,
                 plan.optimizer.zero >= 3 ? "each fetch gathers a layer's weights from their owners, and each backward "
                                            "reduces its gradients to them"
                 : plan.optimizer.zero >= 2 ? "each backward reduces the weight gradients to their owners, and after it "
                                              "the weights are all-gathered"
                                            : "after the backward the gradients are reduce-scattered and the weights "
                                              "all-gathered");
    if (rank == 0 && plan.optimizer.offload && plan.optimizer.zero == 0)
      fmt::print("axrun: optimizer offloaded to the host tier, buckets of {} elements, data-parallel all-reduce in "
                 "chunks of {} bucket(s){}\n",
                 plan.optimizer.bucket_elements, plan.optimizer.allreduce_coarsening,
                 plan.optimizer.allreduce_coarsening == 0 ? " (no overlap)"
                 : a.clip_grad > 0 ? "; clipping on: every chunk is reduced before the first update (no overlap; --clip-grad 0 to overlap)"
                                   : ", each overlapped with the previous chunk's update");
    nlohmann::json steps = nlohmann::json::array();
    const bool live = a.log_every == 0 && ::isatty(STDOUT_FILENO);
    tools::ProgressLine progress_line(a.steps, live ? 0 : (a.log_every > 0 ? a.log_every : 10),
                                      static_cast<double>(plan.batch.seqs * cfg.seq_len));
    // Caught here, while the model and its collectives in flight are still alive: ending
    // the job must not wait for them (another rank may never complete them).
    int64_t peak_device = 0, peak_host = 0;  // this rank's, over the steps
    runtime::DeviceMemoryBreakdown held;     // this rank's device memory in its last step, by what held it
    runtime::OpProfile ops;
    int64_t profiled_steps = 0;
    try {
    for (int64_t step = first_step; step < a.steps; ++step) {
      maybe_inject_failure(rank, step);
      maybe_kill(rank, step);
      maybe_hang(rank, step);
      const at::Tensor batch = source->batch(step);
      runtime::DeviceMemory::reset_peak();
      runtime::HostMemory::reset_peak();
      held = held_at_step_start();
      const bool profile = !a.profile_ops_dir.empty() && (step > first_step || a.steps - first_step == 1);
      if (profile) ops.start();
      runtime::StepStats s = train_step(batch);
      if (profile) {
        ops.stop();
        ++profiled_steps;
      }
      const int64_t step_peak = runtime::DeviceMemory::peak_bytes();
      held.end_step(step_peak);
      peak_device = std::max(peak_device, step_peak);
      peak_host = std::max(peak_host, runtime::HostMemory::peak_bytes());
      steps.push_back({{"step", step}, {"loss", s.loss}, {"grad_norm", s.grad_norm}, {"batch_s", s.batch_s},
                       {"forward_s", s.forward_s}, {"backward_s", s.backward_s}, {"grad_sync_s", s.grad_sync_s},
                       {"optimizer_s", s.optimizer_s}, {"recv_wait_s", s.recv_wait_s},
                       {"optimizer_reduce_wait_s", s.optimizer_reduce_wait_s},
                       {"fetch_wait_s", s.fetch_wait_s}, {"copy_s", s.copy_s},
                       {"peak_device_bytes", step_peak}, {"live_device_bytes", runtime::DeviceMemory::live_bytes()},
                       {"reserved_device_bytes", runtime::DeviceMemory::reserved_bytes()},
                       {"peak_host_bytes", runtime::HostMemory::peak_bytes()},
                       {"live_host_bytes", runtime::HostMemory::live_bytes()},
                       {"resident_bytes", runtime::resident_bytes()},
                       {"breakdown", s.breakdown.to_json()}});
      if (rank == 0) progress_line.update(std::cout, step + 1, s);
      const int64_t done = step + 1;
      if (!a.save_dir.empty() && (done == a.steps || (a.save_every > 0 && done % a.save_every == 0))) {
        runtime::SaveOptions save;
        save.keep = a.keep;
        save.before_commit = kill_in_checkpoint(done);
        if (l2l)
          runtime::save_checkpoint(a.save_dir, done, checkpoint_run, grid, l2l->trainer.parameters(),
                                   l2l->trainer.state(), save);
        else
          runtime::save_checkpoint(a.save_dir, done, checkpoint_run, grid, stage->trainer.parameters(),
                                   stage->trainer.state(), save);
      }
    }
    } catch (const Error& e) {
      runtime::abort_job(e.what(), exit_code(e));
    } catch (const std::exception& e) {
      runtime::abort_job(e.what(), kExitInternal);
    }
    if (!a.trace_dir.empty()) {
      std::filesystem::create_directories(a.trace_dir);
      tracer.write_chrome_trace(a.trace_dir + "/rank" + std::to_string(rank) + ".json", rank);
    }
    if (!a.profile_ops_dir.empty()) {
      std::filesystem::create_directories(a.profile_ops_dir);
      const std::string path = a.profile_ops_dir + "/rank" + std::to_string(rank) + "-ops.json";
      write_file_atomically(path, ops.to_json(profiled_steps).dump(1) + "\n", "axrun");
      if (rank == 0) print_top_ops(ops, profiled_steps, path);
    }
    std::vector<int64_t> peaks(static_cast<size_t>(world.size())), host_peaks(peaks.size());
    AXONN_CHECK(MPI_Gather(&peak_device, 1, MPI_INT64_T, peaks.data(), 1, MPI_INT64_T, 0, world.handle()));
    AXONN_CHECK(MPI_Gather(&peak_host, 1, MPI_INT64_T, host_peaks.data(), 1, MPI_INT64_T, 0, world.handle()));
    const std::array<int64_t, 4> held_bytes = {held.parameter_bytes, held.gradient_bytes, held.other_resident_bytes,
                                               held.step_bytes};
    std::vector<int64_t> all_held(held_bytes.size() * peaks.size());
    AXONN_CHECK(MPI_Gather(held_bytes.data(), static_cast<int>(held_bytes.size()), MPI_INT64_T, all_held.data(),
                           static_cast<int>(held_bytes.size()), MPI_INT64_T, 0, world.handle()));
    if (rank == 0) {
      const auto worst = std::max_element(peaks.begin(), peaks.end());
      nlohmann::json memory = {{"counted", "every LibTorch tensor (axonn/runtime/device_memory.hpp)"},
                               {"budget_bytes", a.device_memory},
                               {"peak_bytes_per_rank", peaks},
                               {"peak_bytes", *worst},
                               {"host_peak_bytes_per_rank", host_peaks},
                               {"host_peak_bytes", *std::max_element(host_peaks.begin(), host_peaks.end())}};
      // The last step's device bytes by what held them, per rank (memory_breakdown.hpp).
      nlohmann::json by_kind = nlohmann::json::array();
      for (size_t r = 0; r < peaks.size(); ++r) {
        const int64_t* h = &all_held[r * held_bytes.size()];
        by_kind.push_back({{"parameter_bytes", h[0]}, {"gradient_bytes", h[1]}, {"other_resident_bytes", h[2]},
                           {"step_bytes", h[3]}});
      }
      memory["last_step_by_kind_per_rank"] = a.steps > first_step ? by_kind : nlohmann::json();  // null: no step ran
      std::string predicted;
      if (plan.prediction) {
        memory["predicted_bytes_per_gpu"] = plan.prediction->memory_bytes_per_gpu;
        memory["predicted_host_bytes_per_gpu"] = plan.prediction->host_memory_bytes_per_gpu;
        if (plan.prediction->memory_breakdown_bytes)
          memory["predicted_by_kind"] = plan::memory_prediction_to_json(*plan.prediction->memory_breakdown_bytes);
        predicted = fmt::format(", predicted {:.1f} MiB by the plan ({:+.1f}%)",
                                static_cast<double>(plan.prediction->memory_bytes_per_gpu) / kBytesPerMiB,
                                100.0 * (static_cast<double>(plan.prediction->memory_bytes_per_gpu) /
                                             static_cast<double>(*worst) - 1.0));
        if (memory_overridden) predicted += " (predicted for the plan's optimizer settings, which the options changed)";
      }
      fmt::print("axrun: peak device memory {:.1f} MiB (rank {}){}\n", static_cast<double>(*worst) / kBytesPerMiB,
                 worst - peaks.begin(), predicted);
      if (a.steps > first_step) {
        const int64_t* h = &all_held[static_cast<size_t>(worst - peaks.begin()) * held_bytes.size()];
        auto mib = [](int64_t b) { return static_cast<double>(b) / kBytesPerMiB; };
        fmt::print("axrun: its last step: parameters {:.1f} MiB, gradients {:.1f} MiB, the rest held between steps "
                   "{:.1f} MiB, and the step's own (activations, gathered weights, buffers) {:.1f} MiB\n",
                   mib(h[0]), mib(h[1]), mib(h[2]), mib(h[3]));
        // The same two parts as the planner's memory model splits them (its model state
        // is what lives between steps).
        if (plan.prediction && plan.prediction->memory_breakdown_bytes) {
          const plan::MemoryPrediction& pm = *plan.prediction->memory_breakdown_bytes;
          fmt::print("axrun: measured / predicted by the plan: held between steps {:.1f} / {:.1f} MiB, the step's own "
                     "{:.1f} / {:.1f} MiB\n",
                     mib(h[0] + h[1] + h[2]), mib(pm.held_between_steps()), mib(h[3]), mib(pm.step_own()));
        }
      }
      const int64_t host_peak = *std::max_element(host_peaks.begin(), host_peaks.end());
      if (host_peak > 0)
        fmt::print("axrun: peak host-tier memory {:.1f} MiB{}\n", static_cast<double>(host_peak) / kBytesPerMiB,
                   plan.prediction && plan.prediction->host_memory_bytes_per_gpu > 0
                       ? fmt::format(", predicted {:.1f} MiB by the plan",
                                     static_cast<double>(plan.prediction->host_memory_bytes_per_gpu) / kBytesPerMiB)
                       : std::string());
      const int blas_threads = runtime::blas_threads();  // -1: a BLAS without a pool of its own (null)
      nlohmann::json m = {{"plan", a.plan_path}, {"model", plan.model.name}, {"world_size", world.size()},
                          {"grid", topo::grid_to_json(plan.grid)}, {"mesh", topo::mesh_to_json(plan.mesh())},
                          {"launcher", launch.launcher},
                          {"threads_per_rank", a.threads},
                          {"wait_policy", runtime::to_string(runtime::wait_policy())},
                          {"blas_threads_per_rank", blas_threads > 0 ? nlohmann::json(blas_threads) : nlohmann::json()},
                          {"data", a.data.empty() ? "synthetic" : a.data},
                          {"device_memory", memory}, {"steps", steps}};
      write_file_atomically(a.measure, m.dump(2) + "\n", "axrun");
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), kExitInternal);
  }
  return 0;
}
