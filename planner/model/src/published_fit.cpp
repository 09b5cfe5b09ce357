// The compute model fitted to published runs; see axonn/planner/published_fit.hpp.
#include "axonn/planner/published_fit.hpp"

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {
namespace {

// The minimum of f on [lo, hi] by golden-section search (f unimodal there), to a
// bracket `tolerance` wide.
double golden_minimum(const std::function<double(double)>& f, double lo, double hi, double tolerance) {
  const double r = (std::sqrt(5.0) - 1.0) / 2.0;  // 0.618...
  double a = lo, b = hi;
  double c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  while (b - a > tolerance) {
    if (fc <= fd) {
      b = d, d = c, fd = fc;
      c = b - r * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + r * (b - a), fd = f(d);
    }
  }
  return fc <= fd ? c : d;
}

}  // namespace

double megatron_step_flops(int64_t batch_seqs, int64_t seq_len, int64_t layers, int64_t hidden, int64_t vocab) {
  const double B = static_cast<double>(batch_seqs), s = static_cast<double>(seq_len);
  const double l = static_cast<double>(layers), h = static_cast<double>(hidden), V = static_cast<double>(vocab);
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double megatron_parameters(int64_t seq_len, int64_t layers, int64_t hidden, int64_t vocab) {
  const double s = static_cast<double>(seq_len), l = static_cast<double>(layers);
  const double h = static_cast<double>(hidden), V = static_cast<double>(vocab);
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

topo::Topology with_compute(const topo::Topology& base, double efficiency, double overhead_s) {
  topo::Topology t = base;
  t.compute.matmul_flops_per_s = efficiency * base.peak_flops_per_s;
  t.compute.matmul_overhead_s = overhead_s;
  return t;
}

std::vector<RunPrediction> predict_runs(const topo::Topology& t, const PlannerOptions& o,
                                        const std::vector<PublishedRun>& runs, const std::vector<size_t>& fitted) {
  std::vector<RunPrediction> out;
  out.reserve(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const PublishedRun& r = runs[i];
    PlannerOptions ro = o;
    ro.gpus = r.grid.total();
    ro.batch_seqs = r.batch_seqs;
    ro.microbatch_seqs = r.microbatch_seqs;
    ro.memory_limit = false;
    const Evaluation e = evaluate(r.model, t, r.grid, ro);
    if (e.rejection == Rejection::Divisibility)
      throw InputError("planner", "published run " + r.name + " does not divide: " + e.rejected_because,
                       "grid " + r.grid.to_string(), "a grid, batch and micro-batch that divide the model");
    RunPrediction p;
    p.name = r.name;
    p.measured_s = r.measured_step_s;
    p.predicted_s = e.batch_s;
    p.memory_bytes = e.memory.total_bytes();
    for (size_t f : fitted) p.fitted = p.fitted || f == i;
    out.push_back(p);
  }
  return out;
}

double mean_abs_error(const std::vector<RunPrediction>& p, bool fitted) {
  std::vector<double> predicted, measured;
  for (const auto& r : p)
    if (r.fitted == fitted) predicted.push_back(r.predicted_s), measured.push_back(r.measured_s);
  return predicted.empty() ? 0.0 : mape(predicted, measured);
}

ComputeFit fit_compute(const topo::Topology& base, const PlannerOptions& o, const std::vector<PublishedRun>& runs,
                       const std::vector<size_t>& fit_rows, bool fit_overhead) {
  if (fit_rows.empty())
    throw InputError("planner", "no runs to fit on", "--fit-rows", "1 to 3 row numbers of the runs file");
  std::vector<PublishedRun> fitted;
  for (size_t i : fit_rows) {
    if (i >= runs.size())
      throw InputError("planner", fmt::format("row {} of {} runs", i + 1, runs.size()), "--fit-rows",
                       fmt::format("row numbers from 1 to {}", runs.size()));
    fitted.push_back(runs[i]);
  }
  auto loss = [&](double efficiency, double overhead_s) {
    double sum = 0;
    for (const auto& p : predict_runs(with_compute(base, efficiency, overhead_s), o, fitted, {}))
      sum += p.error() * p.error();
    return sum;
  };
  auto best_efficiency = [&](double overhead_s) {
    return golden_minimum([&](double e) { return loss(e, overhead_s); }, 0.05, 1.0, 1e-4);
  };
  ComputeFit fit;
  fit.matmul_overhead_s =
      fit_overhead ? golden_minimum([&](double ov) { return loss(best_efficiency(ov), ov); }, 0.0, 1e-3, 1e-7) : 0.0;
  fit.efficiency = best_efficiency(fit.matmul_overhead_s);
  constexpr double kEdge = 1e-3;  // of the interval's width
  fit.at_bound = fit.efficiency < 0.05 + kEdge * 0.95 || fit.efficiency > 1.0 - kEdge * 0.95 ||
                 (fit_overhead && fit.matmul_overhead_s > 1e-3 * (1.0 - kEdge));
  fit.runs = predict_runs(with_compute(base, fit.efficiency, fit.matmul_overhead_s), o, runs, fit_rows);
  fit.fitted_mape = mean_abs_error(fit.runs, true);
  fit.held_out_mape = mean_abs_error(fit.runs, false);
  return fit;
}

}  // namespace axonn::planner
