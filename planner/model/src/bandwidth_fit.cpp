// Latency/bandwidth least squares; see axonn/planner/bandwidth_fit.hpp.
#include "axonn/planner/bandwidth_fit.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

#include "axonn/common/error.hpp"

namespace axonn::planner {

CollectiveSample all_gather_sample(int p, double bytes, double seconds) {
  return {static_cast<double>(p - 1), static_cast<double>(p - 1) / p * bytes, seconds};
}

CollectiveSample all_reduce_sample(int p, double bytes, double seconds) {
  return {2.0 * (p - 1), 2.0 * (p - 1) / p * bytes, seconds};
}

BandwidthFit fit_latency_bandwidth(const std::vector<CollectiveSample>& samples, const FitQuantities& what) {
  const auto n = static_cast<Eigen::Index>(samples.size());
  double lo = 0, hi = 0;
  if (n > 0) {
    auto [mn, mx] = std::minmax_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
      return a.bytes_moved < b.bytes_moved;
    });
    lo = mn->bytes_moved;
    hi = mx->bytes_moved;
  }
  if (n < 2 || lo == hi)
    throw InputError("calibrate",
                     std::string("too few distinct values of ") + what.size + " to fit (" + std::to_string(n) +
                         " samples)",
                     what.fit, std::string("at least two samples of different ") + what.size);
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd t(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    A(i, 0) = samples[static_cast<size_t>(i)].steps;
    A(i, 1) = samples[static_cast<size_t>(i)].bytes_moved;
    t(i) = samples[static_cast<size_t>(i)].seconds;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(t);
  if (x(0) < 0) {  // no negative latency: bandwidth alone
    x(0) = 0;
    x(1) = A.col(1).dot(t) / A.col(1).squaredNorm();
  }
  if (!(x(1) > 0))
    throw InputError("calibrate", std::string("fitted time per unit of ") + what.size + " is not positive", what.fit,
                     std::string("times that grow with ") + what.size);
  BandwidthFit f;
  f.alpha_s = x(0);
  f.beta_bytes_per_s = 1.0 / x(1);
  const Eigen::VectorXd fitted = A * x;
  const double ss_res = (t - fitted).squaredNorm(), ss_tot = (t.array() - t.mean()).matrix().squaredNorm();
  f.r2 = ss_tot == 0 ? 1.0 : 1.0 - ss_res / ss_tot;
  f.max_relative_error = ((fitted - t).array().abs() / t.array()).maxCoeff();
  return f;
}

}  // namespace axonn::planner
