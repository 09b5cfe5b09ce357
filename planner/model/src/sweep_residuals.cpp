// The model's error shared by several sweeps; see axonn/planner/sweep_residuals.hpp.
#include "axonn/planner/sweep_residuals.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {
namespace {

constexpr const char* kResidualsModule = "residuals";

double rms(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v * v;
  return std::sqrt(sum / static_cast<double>(x.size()));
}

double standard_error(const std::vector<double>& x) {
  return x.size() < 2 ? 0.0 : sample_standard_deviation(x) / std::sqrt(static_cast<double>(x.size()));
}

// One sweep's log times and residuals by configuration name, each less its median.
struct Centred {
  std::map<std::string, double> measured, predicted, residual;
};

// Each sweep's centred logs, and its scale.
Centred residuals_of(const std::vector<SweepPoint>& sweep, size_t index, SweepScale& scale) {
  const std::string where = fmt::format("sweep {}", index + 1);
  if (sweep.size() < 2)
    throw InputError(kResidualsModule, fmt::format("{} configuration(s) measured", sweep.size()), where,
                     "at least two measured configurations");
  std::vector<double> logs, predicted, measured;
  std::set<std::string> names;
  for (const SweepPoint& p : sweep) {
    if (!(p.predicted_s > 0) || !(p.measured_s > 0) || !std::isfinite(p.predicted_s) || !std::isfinite(p.measured_s))
      throw InputError(kResidualsModule, fmt::format("{}: predicted {} s, measured {} s", p.name, p.predicted_s, p.measured_s),
                       where, "positive batch times");
    if (!names.insert(p.name).second)
      throw InputError(kResidualsModule, fmt::format("{} appears twice", p.name), where, "each configuration once");
    logs.push_back(std::log(p.measured_s / p.predicted_s));
    predicted.push_back(p.predicted_s), measured.push_back(p.measured_s);
  }
  const double centre = median(logs);
  scale.configurations = sweep.size();
  scale.mape = mape(predicted, measured);
  scale.scale = std::exp(centre);
  for (double& p : predicted) p *= scale.scale;
  scale.scaled_mape = mape(predicted, measured);
  std::vector<double> log_measured, log_predicted;
  for (size_t i = 0; i < sweep.size(); ++i)
    log_measured.push_back(std::log(measured[i])), log_predicted.push_back(std::log(sweep[i].predicted_s));
  const double centre_measured = median(log_measured), centre_predicted = median(log_predicted);
  Centred out;
  for (size_t i = 0; i < sweep.size(); ++i) {
    out.residual[sweep[i].name] = logs[i] - centre;
    out.measured[sweep[i].name] = log_measured[i] - centre_measured;
    out.predicted[sweep[i].name] = log_predicted[i] - centre_predicted;
  }
  return out;
}

// sqrt of the mean over `names` of the sample variance over sweeps of their values.
double between_sweeps(const std::vector<std::map<std::string, double>>& sweeps, const std::vector<std::string>& names) {
  std::vector<double> variances;
  for (const std::string& name : names) {
    std::vector<double> v;
    for (const auto& s : sweeps)
      if (auto it = s.find(name); it != s.end()) v.push_back(it->second);
    const double sd = sample_standard_deviation(v);
    variances.push_back(sd * sd);
  }
  return std::sqrt(mean(variances));
}

// Each configuration's mean residual over the sweeps whose index satisfies `take`.
template <typename Take>
std::map<std::string, double> means_over(const std::vector<std::map<std::string, double>>& residuals, Take take) {
  std::map<std::string, std::vector<double>> by_name;
  for (size_t s = 0; s < residuals.size(); ++s)
    if (take(s))
      for (const auto& [name, r] : residuals[s]) by_name[name].push_back(r);
  std::map<std::string, double> out;
  for (const auto& [name, r] : by_name) out[name] = mean(r);
  return out;
}

}  // namespace

SweepResiduals sweep_residuals(const std::vector<std::vector<SweepPoint>>& sweeps) {
  if (sweeps.size() < 2)
    throw InputError(kResidualsModule, fmt::format("{} sweep(s)", sweeps.size()), "the reports given",
                     "at least two sweeps of the same cluster");
  SweepResiduals out;
  std::vector<std::map<std::string, double>> residuals, measured, predicted;
  for (size_t s = 0; s < sweeps.size(); ++s) {
    SweepScale scale;
    Centred c = residuals_of(sweeps[s], s, scale);
    residuals.push_back(std::move(c.residual));
    measured.push_back(std::move(c.measured)), predicted.push_back(std::move(c.predicted));
    out.sweeps.push_back(scale);
  }

  // Configurations in the order first seen, with the features of the first sweep.
  std::vector<const SweepPoint*> first_seen;
  std::set<std::string> seen;
  for (const auto& sweep : sweeps)
    for (const SweepPoint& p : sweep)
      if (seen.insert(p.name).second) first_seen.push_back(&p);
  std::vector<double> means, errors;
  for (const SweepPoint* p : first_seen) {
    std::vector<double> r;
    for (const auto& sweep : residuals)
      if (auto it = sweep.find(p->name); it != sweep.end()) r.push_back(it->second);
    if (r.size() < 2) continue;
    ConfigurationResidual c;
    c.name = p->name, c.features = p->features, c.sweeps = r.size();
    c.mean = mean(r), c.standard_error = standard_error(r);
    means.push_back(c.mean), errors.push_back(c.standard_error);
    out.configurations.push_back(c);
  }
  if (out.configurations.size() < 2)
    throw InputError(kResidualsModule, fmt::format("{} configuration(s) measured by two sweeps or more", out.configurations.size()),
                     "the reports given", "at least two configurations measured by two sweeps or more");

  std::vector<std::string> kept;
  for (const ConfigurationResidual& c : out.configurations) kept.push_back(c.name);
  out.measured_between_sweeps = between_sweeps(measured, kept);
  out.predicted_between_sweeps = between_sweeps(predicted, kept);
  out.residual_between_sweeps = between_sweeps(residuals, kept);

  out.systematic_rms = rms(means);
  out.standard_error_rms = rms(errors);
  out.beyond_noise_rms = std::sqrt(std::max(0.0, out.systematic_rms * out.systematic_rms -
                                                     out.standard_error_rms * out.standard_error_rms));

  // Features, in the order first seen among the configurations kept.
  std::vector<Feature> order;
  std::map<Feature, std::vector<double>> by_feature;
  for (const ConfigurationResidual& c : out.configurations)
    for (const Feature& f : c.features) {
      if (!by_feature.count(f)) order.push_back(f);
      by_feature[f].push_back(c.mean);
    }
  std::map<std::string, size_t> feature_rank;  // each feature by its first value's place
  for (const Feature& f : order) feature_rank.emplace(f.first, feature_rank.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](const Feature& a, const Feature& b) { return feature_rank[a.first] < feature_rank[b.first]; });
  for (const Feature& f : order) {
    const auto& m = by_feature[f];
    out.features.push_back({f, m.size(), mean(m), standard_error(m)});
  }

  std::stable_sort(out.configurations.begin(), out.configurations.end(),
                   [](const ConfigurationResidual& a, const ConfigurationResidual& b) { return a.mean < b.mean; });

  const auto even = means_over(residuals, [](size_t s) { return s % 2 == 0; });
  const auto odd = means_over(residuals, [](size_t s) { return s % 2 == 1; });
  std::vector<double> x, y;
  for (const auto& [name, r] : even)
    if (auto it = odd.find(name); it != odd.end()) x.push_back(r), y.push_back(it->second);
  if (x.size() >= 3) out.split_half_pearson = pearson(x, y);
  return out;
}

}  // namespace axonn::planner
