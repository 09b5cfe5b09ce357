// The statistics an exact model reaches under a sweep's scatter; see
// axonn/planner/scatter_ceiling.hpp.
#include "axonn/planner/scatter_ceiling.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {

std::optional<ScatterCeiling> scatter_ceiling(const std::vector<std::vector<double>>& runs_s, size_t draws,
                                              uint64_t seed, size_t runs_per_configuration,
                                              const AcceptanceTargets& targets) {
  if (draws == 0) throw InternalError("planner", "0 draws", "scatter_ceiling", "at least one draw");
  std::vector<double> log_mean, inverse_runs;  // per configuration: ln mu_i, 1 / n_i
  double pooled = 0, degrees = 0;              // sum of (n - 1) s^2 / mu^2, and of n - 1
  for (size_t i = 0; i < runs_s.size(); ++i) {
    const auto& runs = runs_s[i];
    const bool valid = !runs.empty() && std::all_of(runs.begin(), runs.end(), [](double r) {
      return std::isfinite(r) && r > 0;
    });
    if (!valid)
      throw InternalError("planner", fmt::format("configuration {} of {} has runs {}", i, runs_s.size(),
                                                 fmt::join(runs, ", ")),
                          "scatter_ceiling", "one or more positive, finite batch times per configuration");
    const double mu = mean(runs), n = static_cast<double>(runs.size());
    log_mean.push_back(std::log(mu));
    inverse_runs.push_back(1 / n);
    if (runs.size() < 2) continue;
    const double s = sample_standard_deviation(runs);
    pooled += (n - 1) * s * s / (mu * mu);
    degrees += n - 1;
  }
  if (log_mean.size() < 2 || degrees == 0) return std::nullopt;

  ScatterCeiling c;
  c.configurations = log_mean.size();
  c.draws = draws;
  c.relative_sigma = std::sqrt(pooled / degrees);
  const double spread = sample_standard_deviation(log_mean), centre = mean(log_mean);
  const double noise = c.relative_sigma * c.relative_sigma * mean(inverse_runs);
  c.shrinkage = spread > 0 ? std::max(0.0, 1 - noise / (spread * spread)) : 1.0;
  std::vector<double> expected, measured(log_mean.size());
  for (double l : log_mean) expected.push_back(std::exp(centre + c.shrinkage * (l - centre)));

  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (size_t d = 0; d < draws; ++d) {
    for (size_t i = 0; i < expected.size(); ++i) {
      const double n = runs_per_configuration > 0 ? static_cast<double>(runs_per_configuration)
                                                  : static_cast<double>(runs_s[i].size());
      measured[i] = expected[i] * std::exp(c.relative_sigma * normal(rng) / std::sqrt(n));
    }
    const double e = mape(expected, measured), rho = spearman(expected, measured),
                 top = top_k_overlap(expected, measured, 5);
    const bool first = predicted_rank_of_measured_best(expected, measured) == 1;
    c.mape += e, c.spearman += rho, c.top5 += top, c.best_first += first;
    const bool m = e <= targets.mape, s = rho >= targets.spearman, t = top >= targets.top5;
    c.meets_mape += m, c.meets_spearman += s, c.meets_top5 += t, c.meets_all += m && s && t && first;
  }
  for (double* v : {&c.mape, &c.spearman, &c.top5, &c.best_first, &c.meets_mape, &c.meets_spearman, &c.meets_top5,
                    &c.meets_all})
    *v /= static_cast<double>(draws);
  return c;
}

}  // namespace axonn::planner
