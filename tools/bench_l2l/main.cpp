// bench_l2l: L2L's throughput against the micro-batches per unit visit, u = 1, 2, 4, 8
// (seed 001's Table 4 and equation 6), measured in one run.
//
//   mpirun -np 1 bench_l2l [--model gpt-bench] [--seq-len 16] [--microbatch-seqs 1] [--u 1,2,4,8]
//                          [--prefetch off] [--steps 5] [--warmup 1]
//
// As in the paper the micro-batch is fixed (b sequences) and u grows the device batch to
// u x b per replica. Every u trains its own copy of the same model (fp32, data
// parallelism over the ranks, the stash on the host); the variants take turns step by
// step, so that drift in the machine's speed hits all of them alike. Per u: the median
// step of the slowest rank, samples per second and their ratio to u = 1; the forward
// compute C of one unit and micro-batch (forward visits' time / ((N - 1) u)) and the
// copy X of one unit's weights (copy time / (2N - 1) fetches), measured in that run; and
// two predictions of the ratio from u = 1's measurements: equation 6 (C and X only:
// backward = 2C, nothing overlapped) and the planner's program clock (l2l_step_time with
// the measured forward, backward, copy, push and server times per unit; with --prefetch
// on the copies overlap the compute). Push and the server's work are per step, not per
// micro-batch, which equation 6 leaves out (the paper assumes them hidden).
// --seq-len shortens the sequences: a unit's compute shrinks with the tokens, its
// weights do not, so X/C grows towards the paper's PCIe-bound 1.5.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sstream>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/gpt/gpt_l2l.hpp"
#include "axonn/planner/l2l_model.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "bench_common.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  std::string model_name = "gpt-bench", us_text = "1,2,4,8", prefetch = "off";
  int64_t seq_len = 0, microbatch_seqs = 1;
  tools::BenchSteps bench_steps;
  bench_steps.steps = 5;
  bench_steps.warmup = 1;
  CLI::App app{"bench_l2l: L2L's samples/s at u = 1, 2, 4, 8 micro-batches per visit, beside equation 6"};
  app.add_option("--model", model_name, "model description")->capture_default_str();
  app.add_option("--seq-len", seq_len, "tokens per sequence (0: the model's)")->check(CLI::NonNegativeNumber);
  app.add_option("--microbatch-seqs", microbatch_seqs, "b: sequences per micro-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--u", us_text, "micro-batches per visit, comma-separated")->capture_default_str();
  app.add_option("--prefetch", prefetch, "copy the next unit while this one computes")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  bench_steps.add_options(app, "per u");
  CLI11_PARSE(app, argc, argv);
  runtime::set_compute_threads(1);
  try {
    std::vector<int64_t> us;
    std::stringstream ss(us_text);
    for (std::string item; std::getline(ss, item, ',');) us.push_back(std::stoll(item));
    if (us.empty() || us.front() != 1)
      throw InputError("bench_l2l", "u list " + us_text, "--u", "a list starting with 1 (the ratios' base)");
    model::ModelDescription desc = model::load_model(model_name);
    if (seq_len > 0) {
      nlohmann::json j = desc.source;
      j["seq_len"] = seq_len;
      desc = model::model_from_json(j, model_name + " (--seq-len)");
    }
    const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
    const topo::Grid grid{1, 1, 1, world.size(), 1};
    runtime::ProcessGrid pg(world, grid, topo::default_order());
    gpt::SerialGpt weights(cfg, 1);
    const int64_t N = desc.num_units;
    struct Variant {
      int64_t u;
      plan::Plan plan;
      std::unique_ptr<runtime::TokenSource> source;
      std::unique_ptr<gpt::GptL2L> run;
      std::vector<double> step_s, forward_s, backward_s, copy_s, push_s, server_s;
    };
    std::vector<Variant> vs;
    for (int64_t u : us) {
      Variant v;
      v.u = u;
      v.plan = tools::bench_plan(desc, grid, u * microbatch_seqs * world.size());
      v.plan.batch.microbatch_seqs = microbatch_seqs;
      v.plan.precision = plan::Precision::fp32();
      v.plan.strategy = plan::Strategy::L2L;
      v.plan.l2l = {plan::StashTier::Host, prefetch == "on"};
      v.source = runtime::make_token_source("", cfg.vocab, v.plan.batch.seqs, cfg.seq_len, 1);
      v.run = std::make_unique<gpt::GptL2L>(v.plan, pg, cfg, weights.named_parameters(),
                                            runtime::TrainerOptions{1e-3, 0.0});
      vs.push_back(std::move(v));
    }
    for (int s = 0; s < bench_steps.total(); ++s)
      for (auto& v : vs) {
        const runtime::StepStats st = v.run->trainer.step(v.source->batch(s));
        at::Tensor t =
            at::tensor({st.batch_s, st.forward_s, st.backward_s, st.copy_s, st.push_s, st.server_s}, at::kDouble);
        runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);  // the slowest rank
        if (!bench_steps.measured(s)) continue;
        v.step_s.push_back(t[0].item<double>());
        v.forward_s.push_back(t[1].item<double>());
        v.backward_s.push_back(t[2].item<double>());
        v.copy_s.push_back(t[3].item<double>());
        v.push_s.push_back(t[4].item<double>());
        v.server_s.push_back(t[5].item<double>());
      }
    if (world.rank() == 0) {
      // u = 1's per-unit costs: C from the forward visits (N - 1 units), the backward
      // visits' time less their recompute (N units), X from the 2N - 1 fetches.
      // A variant's per-unit costs: C, the backward less its recompute, X, push, server.
      auto costs = [&](const Variant& v) {
        const double u = static_cast<double>(v.u), n = static_cast<double>(N);
        const double c = median(v.forward_s) / ((n - 1) * u);
        return planner::L2LUnitCost{c, median(v.backward_s) / (n * u) - c, median(v.copy_s) / (2 * n - 1),
                                    median(v.push_s) / n, 0, median(v.server_s) / n};
      };
      auto clock = [&](int64_t u, const planner::L2LUnitCost& c) {
        const std::vector<planner::L2LUnitCost> units(static_cast<size_t>(N), c);
        return planner::l2l_step_time(schedule::l2l_program(N, u, prefetch == "on"), units, false).batch_s;
      };
      const Variant& one = vs.front();
      const planner::L2LUnitCost base_costs = costs(one);
      const double C = base_costs.forward_s, B = base_costs.backward_s, X = base_costs.fetch_s, P = base_costs.push_s,
                   S = base_costs.update_s;
      const double base = static_cast<double>(microbatch_seqs) / median(one.step_s);
      fmt::print("bench_l2l: {} ({} units, hidden {}, {} tokens per sequence), {} rank(s), micro-batch {} sequence(s), "
                 "stash on the host, prefetch {}, median of {} steps per u (slowest rank)\n",
                 desc.name, N, cfg.hidden, cfg.seq_len, world.size(), microbatch_seqs, prefetch, bench_steps.steps);
      fmt::print("u = 1: C = {:.3f} ms (forward of one unit and micro-batch), backward {:.3f} ms (= {:.2f} C), "
                 "X = {:.3f} ms (one unit's weights to the device), X/C = {:.2f}; per unit and step: push {:.3f} ms, "
                 "server (all-reduce and Adam on the host) {:.3f} ms\n",
                 C * 1e3, B * 1e3, B / C, X * 1e3, X / C, P * 1e3, S * 1e3);
      fmt::print("u = 1 on the program's clock: {:.2f} ms per step, measured {:.2f} ms\n", clock(1, base_costs) * 1e3,
                 median(one.step_s) * 1e3);
      fmt::print("{:>3}  {:>10}  {:>12}  {:>10}  {:>7}  {:>7}  {:>12}  {:>12}  {:>14}\n", "u", "step (ms)", "samples/s",
                 "vs u = 1", "C (ms)", "X (ms)", "equation 6", "step clock", "clock, u's C");
      for (const auto& v : vs) {
        const double rate = static_cast<double>(v.u * microbatch_seqs * world.size()) / median(v.step_s) /
                            static_cast<double>(world.size());
        const double c = costs(v).forward_s, x = costs(v).fetch_s;
        fmt::print("{:>3}  {:>10.2f}  {:>12.1f}  {:>10.3f}  {:>7.3f}  {:>7.3f}  {:>12.3f}  {:>12.3f}  {:>14.3f}\n", v.u,
                   median(v.step_s) * 1e3, rate * world.size(), rate / base, c * 1e3, x * 1e3,
                   planner::l2l_equation6_ratio(v.u, C, X),
                   static_cast<double>(v.u) * clock(1, base_costs) / clock(v.u, base_costs),
                   static_cast<double>(v.u) * clock(1, base_costs) / clock(v.u, costs(v)));
      }
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), 2);
  }
  return 0;
}
