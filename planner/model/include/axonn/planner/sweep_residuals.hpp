// Which configurations a model gets wrong the same way in every sweep (axplan residuals;
// docs/validation.md "The model's own error, over every sweep"): several validate sweeps
// of one cluster, each with its model predictions, split into what the sweeps share
// and what each sweep adds.
//
// For sweep s and configuration i, with predicted time p and measured time m (s), the
// log residual is
//     r_si = ln(m_si / p_si) - median_i ln(m_si / p_si),
// the error left once the sweep's own scale, exp(median ln(m / p)) (how much faster or
// slower the machine ran than its calibration said), is taken out. A configuration's
// systematic residual is the mean of its r_si over the sweeps that measured it, with
// the standard error sd / sqrt(n) (sample deviation over those sweeps). Over the
// configurations measured by at least two sweeps:
//   - the RMS of the systematic residuals, the RMS of their standard errors, and what
//     is left beyond that noise, sqrt(max(0, mean(mean_i^2) - mean(se_i^2))): the
//     model's own error, that no repeat of the sweeps averages away;
//   - the split-half agreement: the sweeps at even and at odd positions each give a
//     mean residual per configuration (those in both halves), and their Pearson
//     correlation says whether the pattern repeats (1) or is noise (0);
//   - how far one configuration moves between sweeps, relative to each sweep's median:
//     the square root of the mean over those configurations of the sample variance over
//     sweeps of ln m - median ln m (the machine), of ln p - median ln p (the
//     calibration each sweep was predicted from) and of r (both together);
//   - each feature value's mean over the configurations with it (a feature is what the
//     caller names: pipeline stages, data-parallel ranks, tensor mode), with the
//     standard error over those configurations' means.
// Each sweep's MAPE as scored, its scale and its MAPE with that scale applied to every
// prediction (what a calibration taken at the sweep's speed would have given) separate
// the error of the machine's speed from the error of the model's shape.
// Residuals are reported in log units; 100 (e^r - 1) is the percentage.
//
// Example:
//   auto r = sweep_residuals({{{"a", 1.0, 1.1, {}}, {"b", 2.0, 2.0, {}}},
//                             {{"a", 1.0, 1.2, {}}, {"b", 2.0, 2.2, {}}}});
//   r.sweeps[1].scale;            // about 1.15: the second sweep ran 15% slower than predicted
//   r.configurations[0].mean;     // b's (the lower) systematic residual
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace axonn::planner {

using Feature = std::pair<std::string, std::string>;  // (feature, value), e.g. ("pipeline stages", "4")

struct SweepPoint {
  std::string name;          // the configuration, the same in every sweep
  double predicted_s = 0;    // the model's batch time (s), positive
  double measured_s = 0;     // the measured batch time (s), positive
  std::vector<Feature> features;
};

struct SweepScale {
  size_t configurations = 0;
  double mape = 0;         // fraction, as scored
  double scale = 1;        // exp(median ln(measured / predicted))
  double scaled_mape = 0;  // fraction, with every prediction times scale
};

struct ConfigurationResidual {
  std::string name;
  std::vector<Feature> features;  // from the first sweep that measured it
  size_t sweeps = 0;
  double mean = 0;            // log units
  double standard_error = 0;  // log units; 0 with one sweep
};

struct FeatureResidual {
  Feature feature;
  size_t configurations = 0;
  double mean = 0;            // of the configurations' means, log units
  double standard_error = 0;  // over those means; 0 with one configuration
};

struct SweepResiduals {
  std::vector<SweepScale> sweeps;                     // in the order given
  std::vector<ConfigurationResidual> configurations;  // measured by two sweeps or more, ascending by mean
  std::vector<FeatureResidual> features;              // by feature, then value, as first seen
  double systematic_rms = 0, standard_error_rms = 0, beyond_noise_rms = 0;  // log units
  // Between sweeps, per configuration (log units): measured, predicted, residual.
  double measured_between_sweeps = 0, predicted_between_sweeps = 0, residual_between_sweeps = 0;
  std::optional<double> split_half_pearson;  // none with fewer than 3 configurations in both halves
};

// Needs two sweeps or more, each with two points or more of positive times and distinct
// names; InputError (module "residuals") otherwise, and when fewer than two
// configurations were measured by two sweeps.
SweepResiduals sweep_residuals(const std::vector<std::vector<SweepPoint>>& sweeps);

}  // namespace axonn::planner
