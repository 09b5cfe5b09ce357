// axplan compare-sweeps; see compare_sweeps.hpp.
#include "compare_sweeps.hpp"

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "validation_report.hpp"

namespace axonn::tools {
namespace {

constexpr const char* kModule = "compare-sweeps";

SweepScatter scatter_of(const std::string& path, const ValidationRun& run,
                        const std::vector<std::vector<double>>& runs) {
  SweepScatter w;
  w.path = path, w.repeats = run.repeats;
  w.ceiling = planner::scatter_ceiling(runs, planner::kCeilingDraws, planner::kCeilingSeed);
  w.noise_floor_mape = planner::noise_floor_mape(runs);
  return w;
}

}  // namespace

SweepComparison compare_sweeps(const std::string& path_a, const std::string& path_b) {
  const EarlierReport a = read_validation_report(path_a), b = read_validation_report(path_b);
  require_same_sweep_settings(a.run, path_a, b.run, path_b, kModule, true,
                              "two runs of the same sweep (model, GPUs, batch, steps, overlap level, launcher, tensor "
                              "modes, search order)");

  SweepComparison c;
  std::vector<double> ta, tb;
  std::vector<std::vector<double>> runs_a, runs_b;  // read_validation_report gives each its runs
  for (const auto& [name, ca] : a.measured) {
    const auto it = b.measured.find(name);
    if (it == b.measured.end()) continue;
    c.common.push_back(name);
    ta.push_back(ca.measured_s), tb.push_back(it->second.measured_s);
    runs_a.push_back(ca.runs_s), runs_b.push_back(it->second.runs_s);
  }
  if (c.common.size() < 2)
    throw InputError(kModule, fmt::format("{} configuration(s) measured in both", c.common.size()),
                     path_a + " and " + path_b, "at least two configurations measured in both sweeps");
  c.a_predicts_b = planner::score_prediction(ta, tb);
  c.a = scatter_of(path_a, a.run, runs_a);
  c.b = scatter_of(path_b, b.run, runs_b);
  if (c.b.ceiling)
    for (size_t runs : {2, 4, 8, 16})
      c.b.with_more_runs.emplace_back(
          runs, *planner::scatter_ceiling(runs_b, planner::kCeilingDraws, planner::kCeilingSeed, runs));
  return c;
}

std::string sweep_comparison_summary(const SweepComparison& c) {
  const auto& s = c.a_predicts_b;
  std::string md = fmt::format(
      "# axplan compare-sweeps: {} as the prediction of {}\n\n{} configurations measured in both. A's measured "
      "batch times are scored as validate scores a model's predictions of B's: what a model as good as running "
      "the sweep again would show.\n\n| statistic | A predicting B |\n|---|---|\n",
      c.a.path, c.b.path, c.common.size());
  md += fmt::format("| batch-time MAPE | {:.1f}% |\n| Spearman rank correlation | {:.3f} |\n| Kendall tau-b | {:.3f} "
                    "|\n| B's measured best, ranked by A | {} |\n| top-5 overlap | {:.2f} |\n",
                    100 * s.mape, s.spearman, s.kendall, s.best_rank, s.top5);
  const planner::AcceptanceTargets t;
  md += fmt::format(
      "\nEach sweep's own scatter, over the same configurations: the MAPE its runs' scatter alone gives (noise "
      "floor), and what a model exact in expectation would reach (scatter_ceiling: {} simulated sweeps from the "
      "runs' pooled scatter; means over them, then the share of them in which it meets MAPE <= {:.0f}%, Spearman >= "
      "{:.2f}, top-5 >= {:.1f}, and all four with the best first).\n\n| sweep | runs each | noise floor | scatter per "
      "run | exact model: MAPE | Spearman | top-5 overlap | best first | meets MAPE | Spearman | top-5 | all four "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      planner::kCeilingDraws, 100 * t.mape, t.spearman, t.top5);
  const auto shares = [](const planner::ScatterCeiling& e) {
    return fmt::format("{:.0f}% | {:.0f}% | {:.0f}% | {:.0f}%", 100 * e.meets_mape, 100 * e.meets_spearman,
                       100 * e.meets_top5, 100 * e.meets_all);
  };
  for (const SweepScatter* w : {&c.a, &c.b})
    md += w->ceiling ? fmt::format("| {} | {} | {:.1f}% | {:.1f}% | {} | {} |\n", w->path, w->repeats,
                                   100 * w->noise_floor_mape, 100 * w->ceiling->relative_sigma,
                                   ceiling_values(*w->ceiling, " | "), shares(*w->ceiling))
                     : fmt::format("| {} | {} | - | - | - | - | - | - | - | - | - | - |\n", w->path, w->repeats);
  if (!c.b.with_more_runs.empty()) {
    md += "\nThe exact model on B's configurations, were each run more often (B's scatter per run and shrunk "
          "means; the 2-run means' own scatter stays in the expected times, so the figures grow more optimistic "
          "with the runs):\n\n| runs of each configuration | MAPE | Spearman | top-5 overlap | best first | meets "
          "MAPE | Spearman | top-5 | all four |\n|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& [runs, ceiling] : c.b.with_more_runs)
      md += fmt::format("| {} | {} | {} |\n", runs, ceiling_values(ceiling, " | "), shares(ceiling));
  }
  return md;
}

int run_compare_sweeps(const std::string& path_a, const std::string& path_b, std::ostream& out) {
  out << sweep_comparison_summary(compare_sweeps(path_a, path_b));
  return 0;
}

}  // namespace axonn::tools
