// How well any model can score against a sweep whose runs scatter (axplan validate,
// docs/validation.md "What the scatter allows"): the validation statistics that a model
// exact in expectation would reach, drawn by simulation.
//
// Each measured configuration i has runs r_i1..r_in (batch times, s). Its expected time
// is taken as the runs' mean mu_i, and the scatter as one relative standard deviation
// pooled over the configurations that ran at least twice:
//     sigma^2 = sum_i (n_i - 1) s_i^2 / mu_i^2  /  sum_i (n_i - 1)
// (s_i the runs' sample standard deviation). One draw is a sweep measured again: each
// configuration's measured time m_i = mu_i exp(sigma z_i / sqrt(n_i)), z_i standard
// normal: the mean of n_i new runs, log-normal so that no time comes out negative (for
// sigma of a few percent the same as normal). The exact model predicts mu_i; the draw scores
// it as validate scores a model (statistics.hpp): MAPE, Spearman, top-5 overlap, and
// whether its first is the measured best. The ceiling is the mean over the draws.
//
// It is optimistic in two ways, so a model cannot be expected to beat it: the measured
// means spread the configurations further apart than their expected times are (by the
// same scatter), which makes the ranking look easier; and validate's measured time is
// the runs' median, which for three runs or more scatters more than their mean.
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

struct ScatterCeiling {
  size_t configurations = 0;  // measured configurations
  size_t draws = 0;
  double relative_sigma = 0;  // pooled standard deviation of one run / its configuration's mean
  // Means over the draws of the exact model's statistics (fractions, not percent).
  double mape = 0, spearman = 0, top5 = 0;
  double best_first = 0;  // share of the draws whose measured best the model ranks first
};

// `runs_s`: each measured configuration's runs (s, positive). `runs_per_configuration`
// > 0 draws sweeps of that many runs of each configuration instead of as many as each
// had (how many repeats a target would need; the scatter is still pooled from runs_s).
// nullopt with fewer than two configurations or none run twice (nothing to pool);
// throws InputError for an empty run list or a time that is not positive and finite,
// and for zero draws.
std::optional<ScatterCeiling> scatter_ceiling(const std::vector<std::vector<double>>& runs_s, size_t draws,
                                              uint64_t seed, size_t runs_per_configuration = 0);

}  // namespace axonn::planner
