// Roofline fit of measured matmuls; see axonn/planner/matmul_fit.hpp.
#include "axonn/planner/matmul_fit.hpp"

#include <Eigen/Dense>

#include <cmath>
#include <string>

#include "axonn/common/error.hpp"
#include "axonn/planner/compute_model.hpp"

namespace axonn::planner {
namespace {

MatmulShape shape_of(const topo::MatmulTiming& t) { return {t.m, t.k, t.n, t.batch}; }

// Least squares of sum_i ((overhead + side_i) / t_i - 1)^2, side_i = flops_i * x on the
// compute side and bytes_i / bw on the memory side; returns {overhead, x}.
Eigen::Vector2d solve(const std::vector<topo::MatmulTiming>& measured, const std::vector<bool>& memory_side,
                      double bw) {
  const auto n = static_cast<Eigen::Index>(measured.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& m = measured[static_cast<size_t>(i)];
    const MatmulShape s = shape_of(m);
    A(i, 0) = 1.0 / m.seconds;
    A(i, 1) = memory_side[static_cast<size_t>(i)] ? 0.0 : s.flops() / m.seconds;
    b(i) = memory_side[static_cast<size_t>(i)] ? 1.0 - matmul_bytes(s) / bw / m.seconds : 1.0;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(b);
  if (x(0) < 0) {  // no negative overhead: the rate alone
    x(0) = 0;
    x(1) = A.col(1).dot(b) / A.col(1).squaredNorm();
  }
  return x;
}

}  // namespace

MatmulFit fit_matmul_roofline(const std::vector<topo::MatmulTiming>& measured, double memory_bytes_per_s,
                              const std::string& where) {
  if (!(memory_bytes_per_s >= 0) || !std::isfinite(memory_bytes_per_s))
    throw InputError("planner", "memory bandwidth " + std::to_string(memory_bytes_per_s) + " bytes/s", where,
                     "a finite bandwidth >= 0 (0: no memory side)");
  for (size_t i = 0; i < measured.size(); ++i) {
    const auto& m = measured[i];
    if (!(m.seconds > 0) || !std::isfinite(m.seconds) || m.m < 1 || m.k < 1 || m.n < 1 || m.batch < 1)
      throw InputError("planner",
                       "product " + std::to_string(i) + " (" + std::to_string(m.m) + " x " + std::to_string(m.k) +
                           " x " + std::to_string(m.n) + ", batch " + std::to_string(m.batch) + ") in " +
                           std::to_string(m.seconds) + " s",
                       where, "positive sizes and a finite time > 0 for every product");
  }
  // Whether the memory side of the max is the larger at `rate`.
  auto memory_bound_at = [&](const topo::MatmulTiming& m, double rate) {
    const MatmulShape s = shape_of(m);
    return memory_bytes_per_s > 0 && matmul_bytes(s) / memory_bytes_per_s > s.flops() / rate;
  };
  std::vector<bool> memory_side(measured.size(), false);
  MatmulFit f;
  for (size_t round = 0;; ++round) {
    size_t compute = 0;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < measured.size(); ++i) {
      if (memory_side[i]) continue;
      const double flops = shape_of(measured[i]).flops();
      lo = compute == 0 ? flops : std::min(lo, flops);
      hi = compute == 0 ? flops : std::max(hi, flops);
      ++compute;
    }
    if (compute < 2 || lo == hi)
      throw InputError("planner", std::to_string(compute) + " compute-bound products to fit", where,
                       "at least two compute-bound products of different FLOPs");
    const Eigen::Vector2d x = solve(measured, memory_side, memory_bytes_per_s);
    if (!(x(1) > 0))
      throw InputError("planner", "fitted time per FLOP is not positive", where, "times that grow with FLOPs");
    f.overhead_s = x(0);
    f.rate_flops_per_s = 1.0 / x(1);
    std::vector<bool> next(measured.size(), false);
    for (size_t i = 0; i < measured.size(); ++i) next[i] = memory_bound_at(measured[i], f.rate_flops_per_s);
    if (next == memory_side) break;
    // Sides can swap back and forth between two fits; stop after a bounded number.
    if (round == 2 * measured.size()) {
      f.settled = false;
      break;
    }
    memory_side = next;
    ++f.refits;
  }
  // The fitted model's times, by the model's own function (section 7).
  topo::Topology fitted;
  fitted.compute.matmul_flops_per_s = f.rate_flops_per_s;
  fitted.compute.matmul_overhead_s = f.overhead_s;
  fitted.compute.memory_bytes_per_s = memory_bytes_per_s;
  const MatmulTimes times(fitted);
  double sum = 0;
  for (const auto& m : measured) {
    f.memory_bound += memory_bound_at(m, f.rate_flops_per_s);
    sum += std::abs(times(shape_of(m)) / m.seconds - 1.0);
  }
  f.mape = sum / static_cast<double>(measured.size());
  return f;
}

}  // namespace axonn::planner
