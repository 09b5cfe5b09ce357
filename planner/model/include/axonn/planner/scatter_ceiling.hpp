// How well a model can score against a sweep whose runs scatter (axplan validate and
// axplan compare-sweeps; docs/validation.md "What the scatter allows"): the validation
// statistics that a model exact in expectation would reach, drawn by simulation.
//
// Each measured configuration i has runs r_i1..r_in (batch times, s). The scatter is
// one relative standard deviation pooled over the configurations that ran at least
// twice:
//     sigma^2 = sum_i (n_i - 1) s_i^2 / mu_i^2  /  sum_i (n_i - 1)
// (mu_i and s_i the runs' mean and sample standard deviation). The runs' means lie
// further apart than the expected times do, by that scatter, so the expected times are
// taken as the means shrunk toward their geometric mean in log space (empirical Bayes):
//     t_i = exp(L + k (ln mu_i - L)),  k = max(0, 1 - sigma^2 mean_i(1/n_i) / var_i(ln mu_i))
// (L the mean of ln mu_i; k = 1 without scatter). One draw is a sweep measured again:
// each configuration's time m_i = t_i exp(sigma z_i / sqrt(n_i)), z_i standard normal,
// the scatter of a mean of n_i runs, log-normal so that no time is negative (for sigma
// of a few percent the same as normal). The exact model predicts t_i; each draw scores
// it as validate scores a model (statistics.hpp), and checks it against targets.
//
// An estimate, not a bound: one pooled sigma overstates the MAPE where configurations
// scatter unequally (sqrt of the mean square is at least the mean; the noise floor,
// validation.hpp's expected_noise_error, is the MAPE's unbiased figure), and moves the
// rank statistics either way; validate's measured time is the runs' median, which for
// three runs or more scatters more than their mean (for normal scatter). The normal
// draws come from std::normal_distribution, so the figures repeat with the same C++
// library (libstdc++ here) and seed.
//
// Example:
//   auto c = scatter_ceiling({{1.0, 1.1}, {1.5, 1.4}, {2.0, 2.2}}, 4000, 1);
//   c->spearman;    // near 1: the three are far apart beside the scatter
//   c->best_first;  // the share of draws in which the first stays the fastest
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace axonn::planner {

// What a sweep is asked to show (issue #16's acceptance for the emulated cluster by
// default): batch-time MAPE at most `mape`, Spearman at least `spearman`, top-5 overlap
// at least `top5` (fractions), and the measured best predicted first.
struct AcceptanceTargets {
  double mape = 0.05, spearman = 0.95, top5 = 0.8;
};

struct ScatterCeiling {
  size_t configurations = 0;  // measured configurations
  size_t draws = 0;
  double relative_sigma = 0;  // pooled standard deviation of one run / its configuration's mean
  double shrinkage = 1;       // k above: the share of the log-means' spread kept
  // Means over the draws of the exact model's statistics (fractions, not percent);
  // top-5 compares the first min(5, configurations).
  double mape = 0, spearman = 0, top5 = 0;
  double best_first = 0;  // share of the draws whose measured best the model ranks first
  // Shares of the draws in which the exact model meets each target, and all four.
  double meets_mape = 0, meets_spearman = 0, meets_top5 = 0, meets_all = 0;
};

// `runs_s`: each measured configuration's runs (s); every time must be positive and
// finite (validate refuses other measurements), else an InternalError.
// `runs_per_configuration` > 0 draws sweeps of that many runs of each configuration
// instead of as many as each had (how many repeats a target needs; the scatter is still
// pooled, and the expected times still shrunk, from runs_s as they are). nullopt with
// fewer than two configurations or none run twice (nothing to pool). `draws` > 0.
std::optional<ScatterCeiling> scatter_ceiling(const std::vector<std::vector<double>>& runs_s, size_t draws,
                                              uint64_t seed, size_t runs_per_configuration = 0,
                                              const AcceptanceTargets& targets = {});

}  // namespace axonn::planner
