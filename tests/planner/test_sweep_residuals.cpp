// The model's error shared by several sweeps (axonn/planner/sweep_residuals.hpp): each
// sweep's scale and scaled MAPE, the systematic residuals with their standard errors,
// the split-half agreement and the feature means, all by hand; and what is refused.
#include <gtest/gtest.h>

#include <cmath>

#include "axonn/common/error.hpp"
#include "axonn/planner/statistics.hpp"
#include "axonn/planner/sweep_residuals.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

// Sweep 1: ln(m / p) = 0, 0.1, -0.1, 0 for a, b, c, d (median 0, scale 1).
// Sweep 2: ln(m / p) = 0.2, 0.4, 0.0 for a, b, c (median 0.2, scale e^0.2); no d.
std::vector<std::vector<SweepPoint>> two_sweeps() {
  const Feature one{"stages", "1"}, four{"stages", "4"}, x{"mode", "x"};
  return {{{"a", 1.0, 1.0, {one}},
           {"b", 1.0, std::exp(0.1), {four}},
           {"c", 1.0, std::exp(-0.1), {four, x}},
           {"d", 1.0, 1.0, {one}}},
          {{"a", 2.0, 2.0 * std::exp(0.2), {one}}, {"b", 1.0, std::exp(0.4), {four}}, {"c", 1.0, 1.0, {four, x}}}};
}

}  // namespace

TEST(Statistics, PearsonIsTheCorrelationOfTheValuesAndZeroForAConstant) {
  // x - mean = (-1, 0, 1), y - mean = (-7/3, -1/3, 8/3): 5 / (sqrt(2) sqrt(114) / 3).
  EXPECT_NEAR(pearson({1, 2, 3}, {2, 4, 7}), 5.0 / (std::sqrt(2.0) * std::sqrt(114.0) / 3.0), 1e-12);
  EXPECT_NEAR(pearson({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_EQ(pearson({1, 2, 3}, {5, 5, 5}), 0.0);
  EXPECT_NEAR(spearman({1, 2, 3}, {2, 4, 7}), 1.0, 1e-12);  // the ranks' Pearson
}

// Residuals: sweep 1 (0, 0.1, -0.1, 0), sweep 2 (0, 0.2, -0.2). Means over the sweeps
// that measured them: a 0, b 0.15, c -0.15 (d, in one sweep, has none). Standard errors:
// b and c sd(0.1, 0.2) / sqrt(2) = 0.05, a 0. RMS 0.12247 and 0.040825; beyond the
// noise sqrt(0.015 - 0.0016667) = 0.11547. MAPE of sweep 1: (0 + (1 - e^-0.1) +
// (e^0.1 - 1) + 0) / 4; of sweep 2 at scale e^0.2: (0 + (1 - e^-0.2) + (e^0.2 - 1)) / 3.
TEST(SweepResiduals, TakeOutEachSweepsScaleAndAverageWhatIsLeftOverTheSweeps) {
  const SweepResiduals r = sweep_residuals(two_sweeps());
  ASSERT_EQ(r.sweeps.size(), 2u);
  EXPECT_EQ(r.sweeps[0].configurations, 4u);
  EXPECT_NEAR(r.sweeps[0].scale, 1.0, 1e-12);
  const double mape1 = ((1 - std::exp(-0.1)) + (std::exp(0.1) - 1)) / 4;
  EXPECT_NEAR(r.sweeps[0].mape, mape1, 1e-12);
  EXPECT_NEAR(r.sweeps[0].scaled_mape, mape1, 1e-12);
  EXPECT_NEAR(r.sweeps[1].scale, std::exp(0.2), 1e-12);
  EXPECT_NEAR(r.sweeps[1].scaled_mape, ((1 - std::exp(-0.2)) + (std::exp(0.2) - 1)) / 3, 1e-12);
  // As scored: a 1 - e^-0.2 off, b 1 - e^-0.4, c exact.
  EXPECT_NEAR(r.sweeps[1].mape, ((1 - std::exp(-0.2)) + (1 - std::exp(-0.4))) / 3, 1e-12);

  ASSERT_EQ(r.configurations.size(), 3u);  // d left out; ascending: c, a, b
  EXPECT_EQ(r.configurations[0].name, "c");
  EXPECT_EQ(r.configurations[1].name, "a");
  EXPECT_EQ(r.configurations[2].name, "b");
  EXPECT_NEAR(r.configurations[0].mean, -0.15, 1e-12);
  EXPECT_NEAR(r.configurations[1].mean, 0.0, 1e-12);
  EXPECT_NEAR(r.configurations[2].mean, 0.15, 1e-12);
  EXPECT_NEAR(r.configurations[2].standard_error, 0.05, 1e-12);
  EXPECT_EQ(r.configurations[1].standard_error, 0.0);
  EXPECT_EQ(r.configurations[2].sweeps, 2u);
  EXPECT_NEAR(r.systematic_rms, std::sqrt(0.015), 1e-12);
  EXPECT_NEAR(r.standard_error_rms, std::sqrt(0.005 / 3), 1e-12);
  EXPECT_NEAR(r.beyond_noise_rms, std::sqrt(0.015 - 0.005 / 3), 1e-12);
  // Between sweeps (sample variance of two values: their difference squared over 2).
  // Measured logs less their medians: sweep 1 (0, 0.1, -0.1, 0); sweep 2 a ln 2 + 0.2,
  // b 0.4, c 0, median 0.4: (ln 2 - 0.2, 0, -0.4). Predicted: (0, 0, 0, 0) and (ln 2, 0, 0).
  const double da = std::log(2.0) - 0.2;
  EXPECT_NEAR(r.measured_between_sweeps, std::sqrt((da * da / 2 + 0.01 / 2 + 0.09 / 2) / 3), 1e-12);
  EXPECT_NEAR(r.predicted_between_sweeps, std::sqrt(std::log(2.0) * std::log(2.0) / 2 / 3), 1e-12);
  EXPECT_NEAR(r.residual_between_sweeps, std::sqrt((0 + 0.005 + 0.005) / 3), 1e-12);
  ASSERT_TRUE(r.split_half_pearson);  // (0, 0.1, -0.1) against (0, 0.2, -0.2)
  EXPECT_NEAR(*r.split_half_pearson, 1.0, 1e-12);

  // Features in the order first seen, the values of one feature together: stages 1
  // (a: 0), stages 4 (b, c: mean 0, se sd(0.15, -0.15) / sqrt(2) = 0.15), mode x (c).
  ASSERT_EQ(r.features.size(), 3u);
  EXPECT_EQ(r.features[0].feature, Feature("stages", "1"));
  EXPECT_EQ(r.features[0].configurations, 1u);
  EXPECT_EQ(r.features[1].feature, Feature("stages", "4"));
  EXPECT_EQ(r.features[1].configurations, 2u);
  EXPECT_NEAR(r.features[1].mean, 0.0, 1e-12);
  EXPECT_NEAR(r.features[1].standard_error, 0.15, 1e-12);
  EXPECT_EQ(r.features[2].feature, Feature("mode", "x"));
  EXPECT_NEAR(r.features[2].mean, -0.15, 1e-12);
}

// A residual that flips sign between the halves is noise: the split-half Pearson says so,
// and the standard errors cover the means.
TEST(SweepResiduals, AResidualThatFlipsBetweenSweepsIsNoise) {
  std::vector<std::vector<SweepPoint>> sweeps;
  for (int s = 0; s < 4; ++s) {
    const double sign = s % 2 ? -1.0 : 1.0;
    sweeps.push_back({{"a", 1.0, std::exp(0.1 * sign), {}},
                      {"b", 1.0, std::exp(-0.1 * sign), {}},
                      {"c", 1.0, std::exp(0.05 * sign), {}},
                      {"d", 1.0, 1.0, {}}});
  }
  const SweepResiduals r = sweep_residuals(sweeps);
  ASSERT_TRUE(r.split_half_pearson);
  EXPECT_LT(*r.split_half_pearson, -0.9);
  for (const auto& c : r.configurations) EXPECT_LE(std::abs(c.mean), c.standard_error + 1e-12) << c.name;
}

TEST(SweepResiduals, RefusesFewerThanTwoSweepsBadTimesRepeatsAndNothingShared) {
  auto s = two_sweeps();
  EXPECT_THROW(sweep_residuals({s[0]}), InputError);
  auto bad = s;
  bad[1][0].measured_s = 0;
  EXPECT_THROW(sweep_residuals(bad), InputError);
  auto twice = s;
  twice[1].push_back(twice[1][0]);
  EXPECT_THROW(sweep_residuals(twice), InputError);
  auto apart = s;  // only a in both
  apart[1][1].name = "e", apart[1][2].name = "f";
  try {
    sweep_residuals(apart);
    FAIL() << "one configuration in common was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[residuals]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 configuration(s) measured by two sweeps"), std::string::npos) << e.what();
  }
}
