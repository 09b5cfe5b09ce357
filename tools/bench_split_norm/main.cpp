// bench_split_norm: the split layer norm's forward with its statistics in one all-reduce
// (runtime/split_layer_norm.hpp, since 2026-11-28) against the earlier form's two (the
// mean, then the centred variance), measured in one run on the same ranks, with the
// reductions alone beside them. The whole world is the group that splits the hidden
// columns (as X or Y does in a training step); each rank holds --columns of them.
//
//   tools/emulated_cluster.sh --nodes 2 --gpus-per-node 2 --rate 200mbit --
//       build/tools/bench_split_norm --rows 2048 --columns 128        (one line)
//
// Per form: the median over --repeats calls of the slowest rank's seconds (a barrier
// before each call), the forms taking turns call by call so that drift hits all alike.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <vector>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/split_layer_norm.hpp"

using namespace axonn;

namespace {

// The forward before 2026-11-28, kept here as the baseline: the mean's all-reduce, then
// the centred variance's.
at::Tensor two_call_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, int64_t hidden,
                            double eps, const runtime::SumOverGroup& sum) {
  const double H = static_cast<double>(hidden);
  at::Tensor mean = x.sum(-1, true).contiguous();
  sum(mean);
  mean.div_(H);
  at::Tensor xc = x - mean;
  at::Tensor var = (xc * xc).sum(-1, true).contiguous();
  sum(var);
  var.div_(H);
  return xc * (var + eps).rsqrt() * gamma + beta;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  int64_t rows = 2048, columns = 128;
  int repeats = 40;
  CLI::App app{"bench_split_norm: the split layer norm's forward, one all-reduce of its statistics against two"};
  app.add_option("--rows", rows, "rows (tokens of a micro-batch on one rank)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--columns", columns, "hidden columns per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed calls per form")->capture_default_str()->check(CLI::Range(3, 100000));
  CLI11_PARSE(app, argc, argv);
  runtime::set_compute_threads(1);
  try {
    const int64_t hidden = columns * world.size();
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(7 + world.rank()));
    const at::Tensor x = at::randn({rows, columns}, gen), gamma = at::randn({columns}, gen),
                     beta = at::randn({columns}, gen);
    const runtime::SumOverGroup sum = [&](at::Tensor& t) { runtime::all_reduce_now(world, t); };
    const runtime::SumOverGroup alone = [](at::Tensor&) {};
    at::Tensor stats = at::zeros({rows, 2}, at::kDouble), mean = at::zeros({rows, 1}), var = at::zeros({rows, 1});
    struct Form {
      const char* name;
      std::function<void()> run;
      std::vector<double> seconds;
    };
    std::vector<Form> forms{
        {"forward, one all-reduce (fp64 statistics)",
         [&] {
           runtime::SplitNormSaved s;
           runtime::split_layer_norm_forward(x, gamma, beta, hidden, 1e-5, sum, s);
         },
         {}},
        {"forward, two all-reduces (the earlier form)", [&] { two_call_forward(x, gamma, beta, hidden, 1e-5, sum); }, {}},
        {"its arithmetic alone (no reduction)",
         [&] {
           runtime::SplitNormSaved s;
           runtime::split_layer_norm_forward(x, gamma, beta, hidden, 1e-5, alone, s);
         },
         {}},
        {"the earlier form's arithmetic alone", [&] { two_call_forward(x, gamma, beta, hidden, 1e-5, alone); }, {}},
        {"the statistics' all-reduce alone: one of (rows, 2) fp64", [&] { sum(stats); }, {}},
        {"the statistics' all-reduces alone: two of (rows, 1) fp32",
         [&] {
           sum(mean);
           sum(var);
         },
         {}},
    };
    for (int r = -2; r < repeats; ++r)  // two untimed rounds first
      for (auto& f : forms) {
        world.barrier();
        const double start = now_s();
        f.run();
        at::Tensor t = at::full({1}, now_s() - start, at::kDouble);
        runtime::all_reduce_now(world, t, runtime::ReduceOp::Max);
        if (r >= 0) f.seconds.push_back(t.item<double>());
      }
    if (world.rank() == 0) {
      fmt::print("bench_split_norm: {} ranks split {} columns ({} each), {} rows; median of {} calls, slowest rank\n",
                 world.size(), hidden, columns, rows, repeats);
      for (const auto& f : forms) fmt::print("  {:<60} {:>9.3f} ms\n", f.name, 1e3 * median(f.seconds));
      auto ratio = [&](size_t a, size_t b) { return median(forms[a].seconds) / median(forms[b].seconds); };
      fmt::print("  ratio one / two: forward {:.3f}, the arithmetic alone {:.3f}, the reductions alone {:.3f}\n",
                 ratio(0, 1), ratio(2, 3), ratio(4, 5));
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), kExitInternal);
  }
  return 0;
}
