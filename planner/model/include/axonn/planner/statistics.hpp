// How well predicted batch times rank and match measured ones (axplan validate;
// docs/validation.md). Pure functions over equal-length vectors.
//
//   pearson       sum (x - mean x)(y - mean y) / (|x - mean x| |y - mean y|); 0 when either is constant
//   spearman      Pearson correlation of the ranks (ties get their average rank)
//   kendall_tau_b (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y))
//   mape          mean of |predicted - measured| / measured
//   top_k_overlap |best k by prediction  ∩  best k by measurement| / k  (best = least time;
//                 1 = the same k configurations)
//   predicted_rank_of_measured_best   1-based rank, by prediction, of the fastest measured
//   mean, sample_standard_deviation (n - 1 in the denominator; 0 for fewer than 2 values)
//
// Example:
//   spearman({1, 2, 3}, {10, 30, 20});        // 0.5
//   kendall_tau_b({1, 2, 3}, {10, 30, 20});   // 1/3
#pragma once

#include <cstddef>
#include <vector>

namespace axonn::planner {

std::vector<double> average_ranks(const std::vector<double>& x);  // 1-based, ties averaged
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);
double mape(const std::vector<double>& predicted, const std::vector<double>& measured);
double top_k_overlap(const std::vector<double>& predicted, const std::vector<double>& measured, size_t k);
size_t predicted_rank_of_measured_best(const std::vector<double>& predicted, const std::vector<double>& measured);
// Throw InternalError for an empty sample.
double mean(const std::vector<double>& x);
double sample_standard_deviation(const std::vector<double>& x);

}  // namespace axonn::planner
