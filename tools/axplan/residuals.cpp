// axplan residuals; see residuals.hpp.
#include "residuals.hpp"

#include <fmt/format.h>

#include <cmath>

#include "axonn/common/error.hpp"
#include "validation_report.hpp"

namespace axonn::tools {
namespace {

constexpr const char* kResidualsModule = "residuals";

std::string percent(double log_residual) { return fmt::format("{:+.1f}%", 100 * (std::exp(log_residual) - 1)); }
std::string plus_minus(double log_error) { return fmt::format("{:.1f}%", 100 * log_error); }

}  // namespace

planner::SweepResiduals residuals_of_reports(const std::vector<std::string>& paths) {
  std::vector<std::vector<planner::SweepPoint>> sweeps;
  std::optional<EarlierReport> first;
  for (const std::string& path : paths) {
    EarlierReport r = read_validation_report(path);
    if (first)
      require_same_sweep_settings(first->run, paths[0], r.run, path, kResidualsModule, false,
                                  "sweeps of one cluster (model, GPUs, batch, steps, overlap level, launcher)");
    std::vector<planner::SweepPoint> points;
    for (const auto& [name, c] : r.measured) {
      const ScoredConfig& s = r.scored.at(name);
      if (!(s.aware_batch_s > 0))
        throw InputError(kResidualsModule, fmt::format("configuration {} has no prediction", name),
                         path + ": configs[].predicted.placement_aware.batch_s", "a positive batch time (s)");
      points.push_back({name, s.aware_batch_s, c.measured_s,
                        {{"pipeline stages", std::to_string(s.stages)},
                         {"data-parallel ranks", std::to_string(s.data)},
                         {"tensor mode", s.mode}}});
    }
    sweeps.push_back(std::move(points));
    if (!first) first = std::move(r);
  }
  return planner::sweep_residuals(sweeps);
}

std::string residuals_summary(const std::vector<std::string>& paths, const planner::SweepResiduals& r) {
  std::string md = fmt::format(
      "# axplan residuals: {} sweeps\n\nA residual is ln(measured / predicted) less the sweep's median of it, "
      "shown as a percentage (+: the model predicts too fast). The sweep's scale, exp(median ln(measured / "
      "predicted)), is how far the machine's speed during the sweep differed from its calibration's.\n\n| sweep | "
      "configurations | MAPE | scale | MAPE at that scale |\n|---|---|---|---|---|\n",
      paths.size());
  for (size_t s = 0; s < r.sweeps.size(); ++s) {
    const auto& w = r.sweeps[s];
    md += fmt::format("| {} | {} | {:.1f}% | {:.3f} | {:.1f}% |\n", paths[s], w.configurations, 100 * w.mape, w.scale,
                      100 * w.scaled_mape);
  }
  md += fmt::format(
      "\n{} configurations measured by two sweeps or more. Their systematic residuals (each the mean over its "
      "sweeps) have an RMS of **{}**, their standard errors an RMS of {}: **{}** is the model's own error beyond "
      "that noise.",
      r.configurations.size(), plus_minus(r.systematic_rms), plus_minus(r.standard_error_rms),
      plus_minus(r.beyond_noise_rms));
  md += r.split_half_pearson
            ? fmt::format(" The sweeps at odd and at even positions agree on the residuals with Pearson **{:.2f}** "
                          "(1: the same pattern in both halves; 0: noise).\n",
                          *r.split_half_pearson)
            : std::string(" Too few configurations lie in both halves of the sweeps for a split-half agreement.\n");
  md += fmt::format(
      "\nBetween sweeps, one configuration moves by (RMS over the configurations of its standard deviation over "
      "the sweeps, relative to each sweep's median): measured {}, predicted {} (the calibration each sweep was "
      "predicted from), residual {}.\n",
      plus_minus(r.measured_between_sweeps), plus_minus(r.predicted_between_sweeps),
      plus_minus(r.residual_between_sweeps));
  md += "\n| feature | value | configurations | mean residual | standard error |\n|---|---|---|---|---|\n";
  for (const auto& f : r.features)
    md += fmt::format("| {} | {} | {} | {} | {} |\n", f.feature.first, f.feature.second, f.configurations,
                      percent(f.mean), plus_minus(f.standard_error));
  md += "\n| configuration | sweeps | systematic residual | standard error |\n|---|---|---|---|\n";
  for (const auto& c : r.configurations)
    md += fmt::format("| {} | {} | {} | {} |\n", c.name, c.sweeps, percent(c.mean), plus_minus(c.standard_error));
  return md;
}

int run_residuals(const std::vector<std::string>& paths, std::ostream& out) {
  out << residuals_summary(paths, residuals_of_reports(paths));
  return 0;
}

}  // namespace axonn::tools
