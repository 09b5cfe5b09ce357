// axplan compare-sweeps: how far the same validate sweep, run twice, agrees with itself
// (docs/validation.md, "What the scatter allows").
//
//   axplan compare-sweeps A/report.json B/report.json
//
// A's measured batch times are scored as if they were a model's predictions of B's,
// over the configurations both measured (MAPE, Spearman, Kendall, B's best ranked by A,
// top-5 overlap), beside what a model exact in expectation would reach on each sweep
// (planner::scatter_ceiling, with the share of simulated sweeps that meet issue #16's
// targets) and on B with 2, 4, 8 and 16 runs of each configuration. Prints markdown.
// Some targets cannot be met on both sweeps by one set of predictions when the sweeps
// are too far apart: a top-5 overlap of 0.8 with each needs their fives to share 3, the
// measured best first in both needs the same best. InputError (exit 2, module
// `compare-sweeps`) when the two differ in model, GPUs, batch, steps, overlap level,
// launcher (the cluster's layout), tensor modes or --search-order, or share fewer than
// two measured configurations.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "axonn/planner/scatter_ceiling.hpp"
#include "axonn/planner/validation.hpp"

namespace axonn::tools {

struct SweepScatter {
  std::string path;
  int64_t repeats = 1;
  double noise_floor_mape = 0;                     // mean expected_noise_error (0: run once)
  std::optional<planner::ScatterCeiling> ceiling;  // over the configurations in common
  // The same with more runs of each configuration: (runs, ceiling); B's only.
  std::vector<std::pair<size_t, planner::ScatterCeiling>> with_more_runs;
};
struct SweepComparison {
  SweepScatter a, b;
  std::vector<std::string> common;  // configurations measured in both, by name
  planner::ModelStatistics a_predicts_b;
};

SweepComparison compare_sweeps(const std::string& path_a, const std::string& path_b);
std::string sweep_comparison_summary(const SweepComparison& c);
// Prints the summary; returns 0 (bad input throws InputError).
int run_compare_sweeps(const std::string& path_a, const std::string& path_b, std::ostream& out);

}  // namespace axonn::tools
