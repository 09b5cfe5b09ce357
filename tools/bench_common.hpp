// What the runtime benchmarks share: the --grid argument, the plan they train under, and
// who drives MPI progress (--progress).
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"
#include "axonn/gpt/gpt.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/process_grid.hpp"

namespace axonn::tools {

// "gx,gy,gz,gdata[,ginter]" (topo::parse_grid) whose product is the number of ranks.
inline topo::Grid parse_bench_grid(const std::string& text, int ranks) {
  const topo::Grid g = topo::parse_grid(text, "bench", "--grid " + text);
  if (g.total() != ranks)
    throw InputError("bench", "grid product " + std::to_string(g.total()), "--grid " + text,
                "the number of ranks, " + std::to_string(ranks));
  return g;
}

// The largest of `v` over the ranks of `world` (the slowest rank's time, the fullest
// rank's memory), on every rank.
inline double max_over_ranks(runtime::MpiCommunicator& world, double v) {
  at::Tensor t = at::full({1}, v, at::kDouble);
  runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);
  return t.item<double>();
}

// A tensor mode's grid over every rank of a measurement tool.
struct ModeGrid {
  std::string name;
  topo::Grid grid;
};

// Colossal-AI's modes that fit `n` ranks, each on all of them, in this order: 1d 1,n,1;
// 2d 1,q,q (n = q^2) and its broadcast form; 2.5d 1,2,2 with depth n/4 (n/4 >= 2) and
// its broadcast form; 3d l,l,l (n = l^3).
inline std::vector<ModeGrid> colossal_mode_grids(int64_t n, const std::string& module) {
  const std::string t = std::to_string(n) + ",1,1";
  std::vector<ModeGrid> out = {{"1d", topo::parse_group_grid(topo::GroupMode::OneD, t, module, "1d")}};
  auto summa = [&](const std::string& name, int64_t depth) {  // both forms of SUMMA's grid
    topo::Grid g = topo::parse_group_grid(topo::GroupMode::TwoD, t, module, name, depth);
    out.push_back({name, g});
    g.layout = topo::TensorLayout::TwoDBroadcast;
    out.push_back({name + " broadcast", g});
  };
  if (topo::exact_root(n, 2) >= 2) summa("2d", 1);
  if (n % 4 == 0 && n / 4 >= 2) summa(fmt::format("2.5d d={}", n / 4), n / 4);
  if (topo::exact_root(n, 3) >= 2) out.push_back({"3d", topo::parse_group_grid(topo::GroupMode::ThreeD, t, module, "3d")});
  return out;
}

// A plan for `model` on `grid`: `seqs` sequences per step, one micro-batch per group.
inline plan::Plan bench_plan(const model::ModelDescription& model, const topo::Grid& grid, int64_t seqs) {
  plan::Plan p;
  p.model = model;
  p.grid = grid;
  p.gpus = grid.total();
  p.batch = {seqs, seqs / grid.gdata};
  return p;
}

// --model, --grid and --seqs: what a benchmark trains.
struct BenchGptArgs {
  std::string model = "gpt-bench", grid;
  int64_t seqs = 8;
  void add_options(CLI::App& app) {
    app.add_option("--model", model, "model description")->capture_default_str();
    app.add_option("--grid", grid, "gx,gy,gz,gdata")->capture_default_str();
    app.add_option("--seqs", seqs, "sequences per step")->capture_default_str();
  }
};

// The GPT a benchmark trains on every rank of `world`: --model on --grid, --seqs random
// sequences per step, the same initial weights everywhere (seed 1).
struct BenchGpt {
  topo::Grid grid;
  model::ModelDescription desc;
  gpt::GptConfig cfg;
  plan::Plan plan;
  runtime::ProcessGrid pg;
  std::unique_ptr<runtime::TokenSource> source;
  gpt::SerialGpt weights;

  BenchGpt(runtime::Communicator& world, const BenchGptArgs& a)
      : grid(parse_bench_grid(a.grid, world.size())),
        desc(model::load_model(a.model)),
        cfg(gpt::GptConfig::from(desc)),
        plan(bench_plan(desc, grid, a.seqs)),
        pg(world, grid, topo::default_order()),
        source(runtime::make_token_source("", cfg.vocab, a.seqs, cfg.seq_len, 1)),
        weights(cfg, 1) {}
};

// --progress thread|poll and --progress-interval-us: a background thread polls MPI, or
// the runtime polls at layer boundaries.
// --steps and --warmup: how many steps a benchmark measures per variant ("per level",
// "per schedule", ...), after how many unmeasured ones.
struct BenchSteps {
  int steps = 10, warmup = 2;

  void add_options(CLI::App& app, const std::string& per) {
    const std::string suffix = per.empty() ? "" : " " + per;
    app.add_option("--steps", steps, "measured steps" + suffix)->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--warmup", warmup, "unmeasured steps" + suffix + " first")->capture_default_str();
  }
  bool measured(int step) const { return step >= warmup; }
  int total() const { return warmup + steps; }
};

struct BenchProgress {
  std::string mode = "thread";
  int interval_us = 50;
  std::unique_ptr<runtime::MpiProgressThread> thread;

  void add_options(CLI::App& app) {
    app.add_option("--progress", mode, "who drives MPI progress: a background thread, or polls at layer boundaries")
        ->check(CLI::IsMember({"thread", "poll"}))
        ->capture_default_str();
    app.add_option("--progress-interval-us", interval_us, "the progress thread's sleep between polls")
        ->capture_default_str();
  }
  // After parsing.
  void start() {
    if (mode == "thread") thread = std::make_unique<runtime::MpiProgressThread>(std::chrono::microseconds(interval_us));
  }
  std::string describe() const {
    return thread && thread->active() ? fmt::format("thread every {} us", interval_us) : "polled at layer boundaries";
  }
};

}  // namespace axonn::tools
