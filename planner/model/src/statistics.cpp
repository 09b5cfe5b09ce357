// Rank and error statistics; see axonn/planner/statistics.hpp.
#include "axonn/planner/statistics.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "axonn/common/error.hpp"
#include "axonn/common/mean.hpp"

namespace axonn::planner {
namespace {

void require_pair(const std::vector<double>& x, const std::vector<double>& y) {
  AXONN_ASSERT(x.size() == y.size());
}

std::vector<size_t> order_of(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  return idx;
}

}  // namespace

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> idx = order_of(x);
  std::vector<double> r(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  require_pair(x, y);
  if (x.size() < 2) return 0.0;
  Eigen::Map<const Eigen::VectorXd> a(x.data(), static_cast<Eigen::Index>(x.size())),
      b(y.data(), static_cast<Eigen::Index>(y.size()));
  const Eigen::VectorXd da = a.array() - a.mean(), db = b.array() - b.mean();
  const double den = da.norm() * db.norm();
  return den == 0 ? 0.0 : da.dot(db) / den;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  require_pair(x, y);
  return pearson(average_ranks(x), average_ranks(y));
}

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  require_pair(x, y);
  double concordant = 0, discordant = 0, ties_x = 0, ties_y = 0;
  const size_t n = x.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) {
        ties_x += 1;
        ties_y += 1;
      } else if (dx == 0) {
        ties_x += 1;
      } else if (dy == 0) {
        ties_y += 1;
      } else if ((dx > 0) == (dy > 0)) {
        concordant += 1;
      } else {
        discordant += 1;
      }
    }
  const double n0 = static_cast<double>(n) * static_cast<double>(n - 1) / 2.0;
  const double den = std::sqrt((n0 - ties_x) * (n0 - ties_y));
  return den == 0 ? 0.0 : (concordant - discordant) / den;
}

double mape(const std::vector<double>& predicted, const std::vector<double>& measured) {
  require_pair(predicted, measured);
  if (predicted.empty()) return 0.0;
  double sum = 0;
  for (size_t i = 0; i < predicted.size(); ++i) sum += std::abs(predicted[i] - measured[i]) / measured[i];
  return sum / static_cast<double>(predicted.size());
}

double top_k_overlap(const std::vector<double>& predicted, const std::vector<double>& measured, size_t k) {
  require_pair(predicted, measured);
  k = std::min(k, predicted.size());
  if (k == 0) return 0.0;
  auto p = order_of(predicted), m = order_of(measured);
  std::vector<size_t> a(p.begin(), p.begin() + static_cast<long>(k)), b(m.begin(), m.begin() + static_cast<long>(k));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<size_t> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  return static_cast<double>(common.size()) / static_cast<double>(k);
}

size_t predicted_rank_of_measured_best(const std::vector<double>& predicted, const std::vector<double>& measured) {
  require_pair(predicted, measured);
  AXONN_ASSERT(!predicted.empty());
  const size_t best = order_of(measured).front();
  auto p = order_of(predicted);
  return static_cast<size_t>(std::find(p.begin(), p.end(), best) - p.begin()) + 1;
}

double mean(const std::vector<double>& x) { return axonn::mean(x); }

double sample_standard_deviation(const std::vector<double>& x) {
  const double m = mean(x);
  if (x.size() < 2) return 0;
  const Eigen::Map<const Eigen::VectorXd> v(x.data(), static_cast<Eigen::Index>(x.size()));
  return std::sqrt((v.array() - m).matrix().squaredNorm() / static_cast<double>(x.size() - 1));
}

}  // namespace axonn::planner
