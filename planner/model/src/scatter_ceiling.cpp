// The statistics an exact model reaches under a sweep's scatter; see
// axonn/planner/scatter_ceiling.hpp.
#include "axonn/planner/scatter_ceiling.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {

std::optional<ScatterCeiling> scatter_ceiling(const std::vector<std::vector<double>>& runs_s, size_t draws,
                                              uint64_t seed, size_t runs_per_configuration) {
  if (draws == 0) throw InputError("validate", "0 draws", "scatter_ceiling", "at least one draw");
  std::vector<double> expected;
  double pooled = 0, degrees = 0;  // sum of (n - 1) s^2 / mu^2, and of n - 1
  for (size_t i = 0; i < runs_s.size(); ++i) {
    const auto& runs = runs_s[i];
    if (runs.empty())
      throw InputError("validate", fmt::format("configuration {} has no runs", i), "scatter_ceiling",
                       "one or more runs per measured configuration");
    for (double r : runs)
      if (!(std::isfinite(r) && r > 0))
        throw InputError("validate", fmt::format("configuration {} has a run of {} s", i, r), "scatter_ceiling",
                         "positive, finite batch times");
    expected.push_back(mean(runs));
    if (runs.size() < 2) continue;
    const double n = static_cast<double>(runs.size()), s = sample_standard_deviation(runs);
    pooled += (n - 1) * s * s / (expected.back() * expected.back());
    degrees += n - 1;
  }
  if (expected.size() < 2 || degrees == 0) return std::nullopt;

  ScatterCeiling c;
  c.configurations = expected.size();
  c.draws = draws;
  c.relative_sigma = std::sqrt(pooled / degrees);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> measured(expected.size());
  for (size_t d = 0; d < draws; ++d) {
    for (size_t i = 0; i < expected.size(); ++i)
      measured[i] =
          expected[i] * std::exp(c.relative_sigma * normal(rng) /
                                 std::sqrt(static_cast<double>(runs_per_configuration > 0 ? runs_per_configuration
                                                                                          : runs_s[i].size())));
    c.mape += mape(expected, measured);
    c.spearman += spearman(expected, measured);
    c.top5 += top_k_overlap(expected, measured, 5);
    c.best_first += predicted_rank_of_measured_best(expected, measured) == 1 ? 1.0 : 0.0;
  }
  const double n = static_cast<double>(draws);
  c.mape /= n, c.spearman /= n, c.top5 /= n, c.best_first /= n;
  return c;
}

}  // namespace axonn::planner
