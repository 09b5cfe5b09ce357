// Choosing what `axplan validate` runs and comparing predictions with measurements
// (axonn/planner/validation.hpp), with hand-made rankings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "axonn/common/load_average.hpp"
#include "axonn/plan/collective_kind.hpp"
#include "axonn/planner/validation.hpp"
#include "validation_report.hpp"
#include "test_util.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

Evaluation candidate(int64_t gx, int64_t ginter, double batch_s) {
  Evaluation e;
  e.grid = topo::Grid{gx, 1, 1, 8 / (gx * ginter), ginter};
  e.feasible = true;
  e.batch_s = batch_s;
  return e;
}

// Aware ranking: (2,1,1,4,1) 1 s, (1,1,1,4,2) 2 s, (4,1,1,2,1) 3 s, (8,1,1,1,1) 4 s;
// the agnostic one lists the same grids in another order.
std::vector<ValidationConfig> four_configs() {
  Ranking aware, agnostic;
  aware.feasible = {candidate(2, 1, 1), candidate(1, 2, 2), candidate(4, 1, 3), candidate(8, 1, 4)};
  agnostic.feasible = {candidate(8, 1, 10), candidate(4, 1, 20), candidate(2, 1, 30), candidate(1, 2, 40)};
  return validation_configs(aware, agnostic, [](const topo::Grid& g) { return g.ginter == 1; }, "no pipeline");
}

}  // namespace

TEST(Validation, ConfigsPairTheTwoModelsAndMarkWhatCannotRun) {
  const auto c = four_configs();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].name, "2x1x1x4x1");
  EXPECT_EQ(c[0].aware_rank, 1);
  EXPECT_EQ(c[0].agnostic_rank, 3);
  EXPECT_EQ(c[0].agnostic.batch_s, 30);
  EXPECT_EQ(c[1].status, RunStatus::NotRunnable);
  EXPECT_EQ(c[1].reason, "no pipeline");
  EXPECT_EQ(c[3].agnostic_rank, 1);
}

TEST(Validation, SelectionTakesTheTopAndASeededSample) {
  const auto c = four_configs();
  EXPECT_EQ(select_for_validation(c, 0, 0, 1), (std::vector<size_t>{0, 2, 3}));  // every runnable one
  const auto s = select_for_validation(c, 1, 1, 7);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], 0u);
  EXPECT_TRUE(s[1] == 2 || s[1] == 3);
  EXPECT_EQ(select_for_validation(c, 1, 1, 7), s);  // the same seed, the same sample
  EXPECT_EQ(select_for_validation(c, 5, 0, 1).size(), 3u);
}

TEST(Validation, MeasuredTimeIsTheMedianAfterTheWarmUpStep) {
  EXPECT_DOUBLE_EQ(measured_batch_s({9.0, 1.0, 3.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(measured_batch_s({9.0, 1.0, 2.0}), 1.5);
  EXPECT_DOUBLE_EQ(measured_batch_s({4.0}), 4.0);
}

TEST(Validation, StatisticsOverTheMeasuredOnly) {
  auto c = four_configs();
  // measured: 1.1 s, 3.3 s, 4.4 s: the aware model orders them right, the agnostic reversed
  for (size_t i : {0, 2, 3}) c[i].status = RunStatus::Measured, c[i].measured_s = 1.1 * static_cast<double>(i + 1);
  c[2].measured_s = 3.3, c[3].measured_s = 4.4;
  const ValidationStatistics s = compare_with_measurements(c);
  EXPECT_EQ(s.measured, 3u);
  EXPECT_DOUBLE_EQ(s.aware.spearman, 1.0);
  EXPECT_DOUBLE_EQ(s.agnostic.spearman, -1.0);
  EXPECT_EQ(s.aware.best_rank, 1u);
  EXPECT_EQ(s.agnostic.best_rank, 3u);
  EXPECT_NEAR(s.aware.mape, (0.1 / 1.1 + 0.3 / 3.3 + 0.4 / 4.4) / 3, 1e-12);
  c[2].status = c[3].status = RunStatus::Failed;
  EXPECT_NE(test::error_of([&] { compare_with_measurements(c); }).find("1 configuration(s) measured"), std::string::npos);
}

TEST(Validation, ComputeScaledByTheProbesMovesOnlyTheComputeTerm) {
  auto c = four_configs();
  // Measured 2.0 s and 3.0 s; predicted 1.5 s (compute 1.0) and 3.6 s (compute 2.0).
  for (size_t i : {0, 1}) c[i].status = RunStatus::Measured;
  c[0].measured_s = 2.0, c[0].aware.batch_s = 1.5, c[0].aware.compute_s = 1.0;
  c[1].measured_s = 3.0, c[1].aware.batch_s = 3.6, c[1].aware.compute_s = 2.0;
  EXPECT_NEAR(score_with_compute_scaled(c, 1.0).mape, compare_with_measurements(c).aware.mape, 1e-12);
  // At 1.2 the first predicts 1.7 s (15% low), the second 4.0 s (33% high); at 0.8, 1.3 and 3.2.
  EXPECT_NEAR(score_with_compute_scaled(c, 1.2).mape, (0.3 / 2.0 + 1.0 / 3.0) / 2, 1e-12);
  EXPECT_NEAR(score_with_compute_scaled(c, 0.8).mape, (0.7 / 2.0 + 0.2 / 3.0) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(score_with_compute_scaled(c, 0.8).spearman, 1.0);
  EXPECT_NE(test::error_of([&] { score_with_compute_scaled(c, 0.0); }).find("a ratio above 0"), std::string::npos);
  c[1].status = RunStatus::Failed;
  EXPECT_NE(test::error_of([&] { score_with_compute_scaled(c, 1.1); }).find("1 configuration(s) measured"),
            std::string::npos);
}

namespace {

// One candidate of each tensor mode on 8 GPUs, with the aware and agnostic times equal.
std::vector<ValidationConfig> mode_configs() {
  auto with = [](topo::Grid g, double batch_s) {
    Evaluation e;
    e.grid = g;
    e.feasible = true;
    e.batch_s = batch_s;
    return e;
  };
  topo::Grid seq{1, 1, 1, 8, 1}, two_d{1, 2, 2, 2, 1}, three_d{2, 2, 2, 1, 1};
  seq.sequence = 2;
  two_d.layout = topo::TensorLayout::TwoD;
  three_d.layout = topo::TensorLayout::ThreeD;
  Ranking r;
  r.feasible = {with({2, 2, 2, 1, 1}, 1), with(three_d, 2), with({1, 8, 1, 1, 1}, 3), with(two_d, 4), with(seq, 5),
                with({1, 1, 8, 1, 1}, 6), with({1, 4, 1, 2, 1}, 7)};
  return validation_configs(r, r, [](const topo::Grid&) { return true; }, "");
}

// A report measured before the ring's waits were traced has no p2p_seq: its rescore
// writes null again (not a measured 0 s, which a second rescore would read as one).
TEST(ValidationReport, ARingWithoutMeasurementStaysUnmeasuredInTheReport) {
  ValidationConfig c;
  c.status = RunStatus::Measured;
  c.name = "seq2-1x1x1x8x1";
  c.aware.grid = topo::Grid{1, 1, 1, 8, 1};
  c.aware.grid.sequence = 2;
  c.agnostic = c.aware;
  c.aware.batch_s = 1.5, c.aware.compute_s = 0.8, c.aware.comm_s = 0.7;
  c.aware.comm.ar_data = 0.5, c.aware.comm.p2p_seq = 0.2;
  c.measured_s = 1.0, c.runs_s = {1.0}, c.steps_s = {1.0, 1.0};
  c.measured_comm_s = {{"ar_data", 0.4}};
  c.unmeasured_terms = {"p2p_seq"};  // as read from a report with null there
  EXPECT_FALSE(term_measured(c, "p2p_seq"));
  EXPECT_TRUE(term_measured(c, "ar_data"));
  EXPECT_FALSE(term_measured(c, "p2p_pipe"));
  const tools::ValidationRun run;
  nlohmann::json j = tools::validation_report_json(run, {c}, std::nullopt);
  const nlohmann::json& ring = j["configs"][0]["comm_by_term"]["p2p_seq"];
  EXPECT_TRUE(ring["measured_busy_s"].is_null()) << ring.dump();
  EXPECT_DOUBLE_EQ(ring["predicted_s"].get<double>(), 0.2);
  EXPECT_FALSE(j["configs"][0]["error_parts"].contains("p2p_seq"));
  c.unmeasured_terms.clear();
  c.measured_comm_s["p2p_seq"] = 0.1;  // measured since: a number and a part of its own
  j = tools::validation_report_json(run, {c}, std::nullopt);
  EXPECT_DOUBLE_EQ(j["configs"][0]["comm_by_term"]["p2p_seq"]["measured_busy_s"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(j["configs"][0]["error_parts"]["p2p_seq"]["measured_s"].get<double>(), 0.1);
}

}  // namespace

TEST(Validation, EachConfigurationNamesItsTensorMode) {
  const auto c = mode_configs();
  std::vector<std::string> modes, names;
  for (const auto& x : c) modes.push_back(x.mode), names.push_back(x.name);
  EXPECT_EQ(modes, (std::vector<std::string>{"axonn3d", "3d", "1d", "2d", "sequence", "axonn3d", "1d"}));
  // Grids that equal each other but for the layout get different names (they are run apart).
  EXPECT_EQ(names, (std::vector<std::string>{"2x2x2x1x1", "3d-2x2x2x1x1", "1x8x1x1x1", "2d-1x2x2x2x1",
                                             "seq2-1x1x1x8x1", "1x1x8x1x1", "1x4x1x2x1"}));
}

TEST(Validation, PerModeSelectionTakesTheTopOfEachMode) {
  const auto c = mode_configs();
  // Top 1 overall: the best only; per mode: the best of each of the five modes.
  EXPECT_EQ(select_for_validation(c, 1, 0, 1), (std::vector<size_t>{0}));
  EXPECT_EQ(select_for_validation(c, 1, 0, 1, true), (std::vector<size_t>{0, 1, 2, 3, 4}));
  // Top 2 per mode: the second axonn3d and 1d grids join.
  EXPECT_EQ(select_for_validation(c, 2, 0, 1, true), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  // The sample draws from the rest.
  const auto s = select_for_validation(c, 1, 1, 3, true);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_TRUE(s[5] == 5 || s[5] == 6);
}

TEST(Validation, StatisticsPerTensorMode) {
  auto c = mode_configs();
  // axonn3d: predicted 1, 6 measured 2, 3 (ranked right, MAPE (1/2 + 3/3)/2);
  // 1d: predicted 3, 7 measured 8, 4 (ranked wrong); 2d alone: MAPE only.
  const std::vector<std::pair<size_t, double>> measured = {{0, 2}, {5, 3}, {2, 8}, {6, 4}, {3, 4}};
  for (const auto& [i, t] : measured) c[i].status = RunStatus::Measured, c[i].measured_s = t;
  const ValidationStatistics s = compare_with_measurements(c);
  EXPECT_EQ(s.measured, 5u);
  ASSERT_EQ(s.modes.size(), 3u);
  EXPECT_EQ(s.modes[0].mode, "axonn3d");
  EXPECT_EQ(s.modes[0].measured, 2u);
  EXPECT_TRUE(s.modes[0].ranked);
  EXPECT_DOUBLE_EQ(s.modes[0].aware.spearman, 1.0);
  EXPECT_NEAR(s.modes[0].aware.mape, (0.5 + 1.0) / 2, 1e-12);
  EXPECT_EQ(s.modes[1].mode, "1d");
  EXPECT_DOUBLE_EQ(s.modes[1].aware.spearman, -1.0);
  EXPECT_EQ(s.modes[1].aware.best_rank, 2u);
  EXPECT_EQ(s.modes[2].mode, "2d");
  EXPECT_EQ(s.modes[2].measured, 1u);
  EXPECT_FALSE(s.modes[2].ranked);
  EXPECT_DOUBLE_EQ(s.modes[2].aware.mape, 0.0);  // predicted 4, measured 4
}

// validate --repeats (issue #16): each configuration's spread over its runs, and the
// median of those beside the MAPE.
TEST(Validation, RunSpreadIsTheRangeOverTheMedianAndItsMedianIsReported) {
  EXPECT_DOUBLE_EQ(run_spread({}), 0.0);
  EXPECT_DOUBLE_EQ(run_spread({2.0}), 0.0);
  EXPECT_NEAR(run_spread({1.0, 1.2, 0.9}), 0.3, 1e-12);
  EXPECT_NEAR(run_spread({2.0, 2.5}), 0.5 / 2.25, 1e-12);
  auto c = four_configs();
  c[0].runs_s = {1.0, 1.1}, c[2].runs_s = {3.0, 3.6, 3.3}, c[3].runs_s = {4.0};  // spreads 0.095, 0.182, 0
  for (size_t i : {0, 2, 3}) c[i].status = RunStatus::Measured, c[i].measured_s = 1.0 + static_cast<double>(i);
  c[1].runs_s = {1.0, 9.0};  // not measured: not counted
  EXPECT_NEAR(compare_with_measurements(c).median_spread, 0.1 / 1.05, 1e-12);
}

// The MAPE that the runs' scatter alone gives, per configuration run at least twice,
// averaged over those. Known answers: two runs, |a - b| / 2 over their mean; three, the
// mean's expected error sqrt(2 / (3 pi)) sigma with sigma = s / c4(3), c4(3) = sqrt(pi) / 2.
TEST(Validation, NoiseFloorIsTheExpectedErrorOfTheRunsMeanAveragedOverRepeatedConfigurations) {
  const double pi = std::acos(-1.0);
  EXPECT_DOUBLE_EQ(expected_noise_error({}), 0.0);
  EXPECT_DOUBLE_EQ(expected_noise_error({2.0}), 0.0);
  EXPECT_DOUBLE_EQ(expected_noise_error({2.0, 2.0}), 0.0);
  const double two = 0.05 / 1.05;                                                  // {1.0, 1.1}
  const double three = std::sqrt(2.0 / (3 * pi)) * 0.3 / (std::sqrt(pi) / 2) / 3.3;  // {3.0, 3.6, 3.3}: s = 0.3
  EXPECT_NEAR(expected_noise_error({1.0, 1.1}), two, 1e-12);
  EXPECT_NEAR(expected_noise_error({1.1, 1.0}), two, 1e-12);
  EXPECT_NEAR(expected_noise_error({3.0, 3.6, 3.3}), three, 1e-12);
  auto c = four_configs();
  c[0].runs_s = {1.0, 1.1}, c[2].runs_s = {3.0, 3.6, 3.3}, c[3].runs_s = {4.0};  // c[3] ran once: not counted
  for (size_t i : {0, 2, 3}) c[i].status = RunStatus::Measured, c[i].measured_s = 1.0 + static_cast<double>(i);
  c[1].runs_s = {1.0, 9.0};  // not measured: not counted
  EXPECT_NEAR(compare_with_measurements(c).noise_floor_mape, (two + three) / 2, 1e-12);
  for (auto& d : c) d.runs_s.resize(std::min<size_t>(d.runs_s.size(), 1));
  EXPECT_DOUBLE_EQ(compare_with_measurements(c).noise_floor_mape, 0.0);  // none ran twice
}

TEST(LoadAverage, ReadsTheThreeAveragesOrNothing) {
  const std::string path = test::write_temp("loadavg", "0.52 1.25 2.00 3/411 12345\n");
  const auto l = read_load_average(path);
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->one_min, 0.52);
  EXPECT_DOUBLE_EQ(l->five_min, 1.25);
  EXPECT_DOUBLE_EQ(l->fifteen_min, 2.0);
  EXPECT_GE(l->cores, 1u);
  EXPECT_NE(describe(*l).find("load average 0.52 / 1.25 / 2.00 (1 / 5 / 15 min) on"), std::string::npos);
  EXPECT_FALSE(read_load_average("/nonexistent/loadavg").has_value());
  EXPECT_FALSE(read_load_average(test::write_temp("garbage", "not a number\n")).has_value());
}

// Every collective kind has one name that parses back, and a term the planner's
// breakdown has (or none: the small collectives).
TEST(CollectiveKind, NamesRoundTripAndMapToBreakdownTerms) {
  std::vector<std::string> terms;
  for (const plan::BreakdownTerm& t : plan::kBreakdownTerms) terms.push_back(t.name);
  std::set<std::string> names;
  for (int i = 0; i < plan::kNumCollectiveKinds; ++i) {
    const auto k = static_cast<plan::CollectiveKind>(i);
    const std::string name = plan::collective_kind_name(k);
    EXPECT_TRUE(names.insert(name).second) << name;
    ASSERT_TRUE(plan::parse_collective_kind(name).has_value()) << name;
    EXPECT_EQ(*plan::parse_collective_kind(name), k);
    const std::string term = plan::breakdown_term(k);
    // Every kind is predicted by a term of the breakdown: the small ones too.
    EXPECT_TRUE(std::find(terms.begin(), terms.end(), term) != terms.end()) << name << " -> " << term;
  }
  EXPECT_EQ(std::string(plan::breakdown_term(plan::CollectiveKind::RsY)), "act_y");
  EXPECT_EQ(std::string(plan::breakdown_term(plan::CollectiveKind::RsData)), "ar_data");
  EXPECT_EQ(std::string(plan::breakdown_term(plan::CollectiveKind::ArXNorm)), "small");
  EXPECT_EQ(std::string(plan::breakdown_term(plan::CollectiveKind::ArZData)), "small");
  EXPECT_TRUE(plan::term_is_traced("small"));
  EXPECT_FALSE(plan::parse_collective_kind("ar_w").has_value());
  EXPECT_TRUE(plan::term_is_traced("act_x"));
  EXPECT_FALSE(plan::term_is_traced("p2p_pipe"));
  // Each term of the breakdown's JSON is one kBreakdownTerms names, and back.
  plan::CommBreakdown b{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  double sum = 0;
  for (const auto& t : terms) sum += predicted_term_s(b, t);
  EXPECT_DOUBLE_EQ(sum, b.total());
  EXPECT_DOUBLE_EQ(predicted_term_s(b, "act_x"), 8.0);
  EXPECT_DOUBLE_EQ(predicted_term_s(b, "small"), 11.0);
  EXPECT_DOUBLE_EQ(predicted_term_s(b, "summa"), 12.0);
  EXPECT_DOUBLE_EQ(predicted_term_s(b, kUnknownKind), 0.0);
  // SUMMA's four moves are one term, measured by their waits; every other kind by its span.
  for (auto k : {plan::CollectiveKind::BcY, plan::CollectiveKind::RdY, plan::CollectiveKind::BcZ,
                 plan::CollectiveKind::RdZ}) {
    EXPECT_EQ(std::string(plan::breakdown_term(k)), "summa");
    EXPECT_TRUE(plan::measured_by_wait(k));
  }
  int by_wait = 0;
  for (int i = 0; i < plan::kNumCollectiveKinds; ++i) {
    const auto k = static_cast<plan::CollectiveKind>(i);
    by_wait += plan::measured_by_wait(k);
    EXPECT_EQ(plan::measured_by_wait(k), plan::term_measured_by_wait(plan::breakdown_term(k))) << i;
  }
  EXPECT_EQ(by_wait, 4);
  EXPECT_TRUE(plan::term_measured_by_wait("summa"));
  EXPECT_FALSE(plan::term_measured_by_wait("act_y"));
  EXPECT_FALSE(plan::term_measured_by_wait("p2p_seq"));  // traced as its waits already
}

// validate counts SUMMA's moves by their waits and sets them beside the exposed moves the
// model predicts; every other kind by its busy span beside the term in full.
TEST(Validation, SummasMovesAreMeasuredByTheirWaitsBesideTheExposedMoves) {
  EXPECT_DOUBLE_EQ(measured_kind_s("bc_y", 0.9, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(measured_kind_s("rd_z", 0.9, 0.2), 0.2);
  EXPECT_DOUBLE_EQ(measured_kind_s("ag_y", 0.9, 0.1), 0.9);
  EXPECT_DOUBLE_EQ(measured_kind_s("bcast_q", 0.9, 0.1), 0.9);  // unknown: its span
  ValidationConfig c;
  c.status = RunStatus::Measured;
  c.aware.grid = topo::Grid{1, 2, 2, 2, 1, 1, topo::TensorLayout::TwoDBroadcast};
  c.aware.batch_s = 2.0;
  c.aware.comm.summa = 0.8, c.aware.summa_exposed_s = 0.3, c.aware.comm.ag_z = 0.1;
  EXPECT_DOUBLE_EQ(predicted_term_s(c.aware, "summa"), 0.3);
  EXPECT_DOUBLE_EQ(predicted_term_s(c.aware, "ag_z"), 0.1);
  c.measured_s = 2.2;
  c.measured_comm_s = comm_by_term({{"bc_y", measured_kind_s("bc_y", 1.5, 0.2)},
                                    {"rd_z", measured_kind_s("rd_z", 0.7, 0.15)},
                                    {"ag_z", measured_kind_s("ag_z", 0.12, 0.12)}});
  const auto parts = error_parts(c);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].part, "ag_z");
  EXPECT_EQ(parts[1].part, "summa");
  EXPECT_DOUBLE_EQ(parts[1].predicted_s, 0.3);
  EXPECT_NEAR(parts[1].measured_s, 0.35, 1e-12);
  // The rest of the step keeps the products the moves' spans covered: 2.2 - 0.12 - 0.35.
  EXPECT_EQ(parts[2].part, kComputeRest);
  EXPECT_NEAR(parts[2].measured_s, 1.73, 1e-12);
  EXPECT_NEAR(parts[2].predicted_s, 2.0 - 0.1 - 0.3, 1e-12);
  // With a pipeline, the bubble is what the compute and the exposed communication leave:
  // the moves' hidden 0.5 s is in neither, so the compute part predicts compute_s.
  c.aware.grid.ginter = 2;
  c.aware.compute_s = 1.2, c.aware.comm_s = 0.9;  // ag_z 0.1 + summa 0.8
  c.measured_pipeline_wait_s = 0.4;
  const auto piped = error_parts(c);
  ASSERT_EQ(piped.size(), 4u);
  EXPECT_EQ(piped[2].part, kPipelineWait);
  EXPECT_NEAR(piped[2].predicted_s, 2.0 - 1.2 - (0.9 - 0.8 + 0.3), 1e-12);
  EXPECT_EQ(piped[3].part, kComputeRest);
  EXPECT_NEAR(piped[3].predicted_s, 1.2, 1e-12);
}

// A report measured before SUMMA's moves were a term of their own summed their spans into
// act_y, ag_z and rs_z: read back for a rescore, those terms stay unmeasured (the rest of
// the step) rather than set against predictions that no longer hold the moves.
TEST(ValidationReport, SummasMovesInAnOlderReportStayInTheRest) {
  ValidationConfig c;
  c.status = RunStatus::Measured;
  c.mode = "2d-broadcast";
  c.name = "2db-1x2x2x2x1";
  c.aware.grid = topo::Grid{1, 2, 2, 2, 1, 1, topo::TensorLayout::TwoDBroadcast};
  c.agnostic = c.aware;
  c.aware.batch_s = 2.0, c.aware.compute_s = 1.0, c.aware.comm_s = 0.9;
  c.aware.comm.ar_data = 0.5, c.aware.comm.summa = 0.4, c.aware.summa_exposed_s = 0.1;
  c.measured_s = 2.4, c.runs_s = {2.4}, c.steps_s = {2.4, 2.4};
  c.measured_comm_s = {{"ar_data", 0.6}, {"summa", 0.3}};
  tools::ValidationRun run;
  run.model = run.model_file = "gpt-bench", run.gpus = 8, run.batch_seqs = 16, run.steps = 2;
  nlohmann::json j = tools::validation_report_json(run, {c}, std::nullopt);
  EXPECT_DOUBLE_EQ(j["configs"][0]["predicted"]["placement_aware"]["summa_exposed_s"].get<double>(), 0.1);
  const tools::EarlierReport now = tools::read_validation_report(test::write_temp("new.json", j.dump()));
  const ValidationConfig& fresh = now.measured.at(c.name);
  EXPECT_DOUBLE_EQ(fresh.measured_comm_s.at("summa"), 0.3);
  EXPECT_TRUE(fresh.unmeasured_terms.empty());
  // The same configuration as an older report wrote it: the moves' spans in act_y and ag_z.
  auto& terms = j["configs"][0]["comm_by_term"];
  terms.erase("summa");
  terms["act_y"] = {{"predicted_s", 0.2}, {"measured_busy_s", 0.8}};
  terms["ag_z"] = {{"predicted_s", 0.1}, {"measured_busy_s", 0.5}};
  const tools::EarlierReport old = tools::read_validation_report(test::write_temp("old.json", j.dump()));
  ValidationConfig read = old.measured.at(c.name);
  EXPECT_EQ(read.measured_comm_s.count("act_y") + read.measured_comm_s.count("ag_z"), 0u);
  EXPECT_DOUBLE_EQ(read.measured_comm_s.at("ar_data"), 0.6);
  for (const char* term : {"summa", "act_y", "ag_z", "rs_z"}) EXPECT_EQ(read.unmeasured_terms.count(term), 1u) << term;
  read.aware = c.aware;  // as the rescore predicts it again
  for (const ErrorPart& p : error_parts(read)) EXPECT_TRUE(p.part == "ar_data" || p.part == kComputeRest) << p.part;
}

// The kernel probes travel with the report (a rescore reads them back), and the report
// scores the aware model with its compute scaled by their mean matmul ratio; a failed
// probe is left out of the ratio, a malformed one is refused by name.
TEST(ValidationReport, KernelProbesAndWaitPoliciesAreReadBackAndProbesScaleTheComputeInADiagnostic) {
  std::vector<ValidationConfig> configs(3);
  const double measured[] = {2.0, 3.0, 4.0}, predicted[] = {1.5, 3.6, 3.9}, compute[] = {1.0, 2.0, 1.0};
  for (size_t i = 0; i < configs.size(); ++i) {
    ValidationConfig& c = configs[i];
    c.status = RunStatus::Measured, c.mode = "axonn3d", c.name = std::to_string(i + 1) + "x1x1x1x1";
    c.aware.grid = topo::Grid{static_cast<int64_t>(i + 1), 1, 1, 1, 1};
    c.aware.batch_s = predicted[i], c.aware.compute_s = compute[i];
    c.agnostic = c.aware;
    c.measured_s = measured[i], c.runs_s = {measured[i]}, c.steps_s = {measured[i], measured[i]};
  }
  tools::ValidationRun run;
  run.model = run.model_file = "gpt-bench", run.gpus = 8, run.batch_seqs = 16, run.steps = 2;
  run.kernel_probes = {{"before the sweep", "", 130, 9, 0.9, 1.1}, {"after round 1", "timed out", 0, 0, 0, 0},
                       {"after round 2", "", 130, 9, 0.7, 0.8}};
  run.wait_policies = {{"sleep", 5}, {"yield", 1}};
  ASSERT_TRUE(tools::probes_compute_ratio(run.kernel_probes).has_value());
  EXPECT_DOUBLE_EQ(*tools::probes_compute_ratio(run.kernel_probes), 0.8);
  EXPECT_FALSE(tools::probes_compute_ratio({{"before the sweep", "timed out", 0, 0, 0, 0}}).has_value());
  const auto stats = compare_with_measurements(configs);
  nlohmann::json j = tools::validation_report_json(run, configs, stats);
  // At 0.8: predictions 1.3, 3.2, 3.7 s.
  const double scaled_mape = (0.7 / 2.0 + 0.2 / 3.0 + 0.3 / 4.0) / 3;
  const auto& scaled = j["statistics"]["placement_aware_compute_scaled_by_probes"];
  EXPECT_DOUBLE_EQ(scaled["compute_ratio"].get<double>(), 0.8);
  EXPECT_NEAR(scaled["mape"].get<double>(), scaled_mape, 1e-12);
  EXPECT_NE(tools::validation_summary(run, configs, stats).find("(0.80; "), std::string::npos);
  const tools::EarlierReport back = tools::read_validation_report(test::write_temp("probes.json", j.dump()));
  ASSERT_EQ(back.run.kernel_probes.size(), 3u);
  EXPECT_EQ(back.run.kernel_probes[1].note, "timed out");
  EXPECT_DOUBLE_EQ(back.run.kernel_probes[2].matmul_ratio, 0.7);
  EXPECT_EQ(back.run.kernel_probes[2].shapes, 130u);
  EXPECT_EQ(back.run.wait_policies, run.wait_policies);
  EXPECT_NE(tools::validation_summary(run, configs, stats).find("sleep in 5 runs, yield in 1 runs"), std::string::npos);
  {
    nlohmann::json bad = j;
    bad["wait_policies"]["sleep"] = 0;
    const std::string why =
        test::error_of([&] { tools::read_validation_report(test::write_temp("bad-wait.json", bad.dump())); });
    EXPECT_NE(why.find("wait_policies"), std::string::npos) << why;
  }
  j["kernel_probes"][2]["matmul_ratio"] = -1;
  const std::string e = test::error_of([&] { tools::read_validation_report(test::write_temp("bad.json", j.dump())); });
  EXPECT_NE(e.find("matmul_ratio"), std::string::npos) << e;
}

// A step's busy seconds by kind, summed by term; the median over steps.
TEST(Validation, MeasuredCommunicationIsSummedByTermAndItsMedianTaken) {
  const CommByTerm one = comm_by_term({{"ag_y", 0.5}, {"rs_y", 0.25}, {"ar_x", 1.0}, {"ar_x_norm", 0.1},
                                       {"ar_y_loss", 0.2}, {"bcast_q", 0.05}});
  EXPECT_DOUBLE_EQ(one.at("act_y"), 0.75);
  EXPECT_DOUBLE_EQ(one.at("ar_x"), 1.0);
  EXPECT_NEAR(one.at("small"), 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(one.at(kUnknownKind), 0.05);
  EXPECT_EQ(one.count("ar_y"), 0u);
  const CommByTerm m = median_by_term({one, comm_by_term({{"ar_x", 3.0}}), comm_by_term({{"ar_x", 2.0}})});
  EXPECT_DOUBLE_EQ(m.at("ar_x"), 2.0);
  EXPECT_DOUBLE_EQ(m.at("act_y"), 0.0);  // in one step of three
}

// The error of a measured configuration cut into parts that sum to measured - predicted,
// and their shares over the sweep (hand-worked numbers in the comments).
TEST(Validation, ErrorPartsSumToTheErrorAndTheBudgetRanksThem) {
  ValidationConfig pipe;  // 2 stages: bubble = 2.0 - 1.0 - 0.6 = 0.4, waited for with p2p_pipe 0.3
  pipe.status = RunStatus::Measured;
  pipe.aware.grid = topo::Grid{1, 2, 2, 1, 2};
  pipe.aware.batch_s = 2.0, pipe.aware.compute_s = 1.0, pipe.aware.comm_s = 0.6;
  pipe.aware.comm.ag_z = 0.2, pipe.aware.comm.ar_y = 0.1, pipe.aware.comm.p2p_pipe = 0.3;
  pipe.measured_s = 2.5, pipe.measured_pipeline_wait_s = 0.9;
  pipe.measured_comm_s = {{"ag_z", 0.3}, {"ar_y", 0.1}, {"small", 0.05}};
  pipe.measured_calls = {{"ag_z", 4}, {"ar_y", 2}, {"small", 5}};
  const auto parts = error_parts(pipe);
  ASSERT_EQ(parts.size(), 5u);
  const std::vector<std::string> names = {"ag_z", "ar_y", "small", kPipelineWait, kComputeRest};
  double error = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].part, names[i]);
    error += parts[i].measured_s - parts[i].predicted_s;
  }
  EXPECT_NEAR(error, 0.5, 1e-12);  // 2.5 - 2.0
  EXPECT_NEAR(parts[3].predicted_s, 0.7, 1e-12);  // bubble 0.4 + p2p_pipe 0.3
  EXPECT_NEAR(parts[4].predicted_s, 1.0, 1e-12);  // 2.0 - 0.2 - 0.1 - 0.7
  EXPECT_NEAR(parts[4].measured_s, 1.15, 1e-12);  // 2.5 - 0.3 - 0.1 - 0.05 - 0.9
  EXPECT_EQ(parts[0].calls, 4.0);
  EXPECT_EQ(parts[3].calls, 0.0);  // the pipeline's wait is not a collective

  ValidationConfig flat;  // no pipeline; a report without the ring's p2p_seq: it stays in compute
  flat.unmeasured_terms = {"p2p_seq"};
  flat.status = RunStatus::Measured;
  flat.aware.grid = topo::Grid{1, 1, 1, 8, 1};
  flat.aware.batch_s = 1.5, flat.aware.compute_s = 0.8, flat.aware.comm_s = 0.7;
  flat.aware.comm.ar_data = 0.5, flat.aware.comm.p2p_seq = 0.2;
  flat.measured_s = 1.0, flat.measured_comm_s = {{"ar_data", 0.4}}, flat.measured_calls = {{"ar_data", 2}};
  const auto flat_parts = error_parts(flat);
  ASSERT_EQ(flat_parts.size(), 2u);  // no pipeline_wait
  EXPECT_EQ(flat_parts[1].part, kComputeRest);
  EXPECT_NEAR(flat_parts[1].predicted_s, 1.0, 1e-12);  // compute 0.8 + p2p_seq 0.2
  EXPECT_NEAR(flat_parts[1].measured_s, 0.6, 1e-12);
  ValidationConfig ring = flat;  // the ring's waits measured: a part of their own
  ring.unmeasured_terms.clear();
  ring.measured_comm_s["p2p_seq"] = 0.1, ring.measured_calls["p2p_seq"] = 12;
  const auto ring_parts = error_parts(ring);
  ASSERT_EQ(ring_parts.size(), 3u);
  EXPECT_EQ(ring_parts[1].part, "p2p_seq");
  EXPECT_NEAR(ring_parts[1].predicted_s, 0.2, 1e-12);
  EXPECT_NEAR(ring_parts[1].measured_s, 0.1, 1e-12);
  EXPECT_EQ(ring_parts[1].calls, 12.0);
  EXPECT_NEAR(ring_parts[2].predicted_s, 0.8, 1e-12);  // compute alone
  EXPECT_NEAR(ring_parts[2].measured_s, 0.5, 1e-12);

  ValidationConfig skipped = flat;
  skipped.status = RunStatus::Failed;
  const auto budget = error_budget({pipe, flat, skipped});
  // Shares: compute (0.15/2.5 - 0.4/1) / 2 = -0.17, |.| 0.23; ar_data -0.1/2 = -0.05;
  // pipeline_wait 0.2/2.5/2 = 0.04; ag_z 0.1/2.5/2 = 0.02; small 0.01; ar_y 0.
  const std::vector<std::string> order = {kComputeRest, "ar_data", kPipelineWait, "ag_z", "small", "ar_y"};
  ASSERT_EQ(budget.size(), order.size());
  double mean = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(budget[i].part, order[i]);
    mean += budget[i].mean_share;
  }
  EXPECT_NEAR(budget[0].mean_share, -0.17, 1e-12);
  EXPECT_NEAR(budget[0].mean_abs_share, 0.23, 1e-12);
  EXPECT_NEAR(budget[0].predicted_s, 2.0, 1e-12);
  EXPECT_NEAR(budget[2].mean_abs_share, 0.04, 1e-12);
  EXPECT_NEAR(budget[1].excess_per_call_s(), -0.05, 1e-12);  // ar_data: (0.4 - 0.5) / 2 calls
  EXPECT_NEAR(budget[3].excess_per_call_s(), 0.025, 1e-12);  // ag_z: (0.3 - 0.2) / 4 calls
  EXPECT_EQ(budget[0].excess_per_call_s(), 0.0);              // compute has no calls
  EXPECT_NEAR(mean, (0.5 / 2.5 - 0.5 / 1.0) / 2, 1e-12);  // the mean signed batch-time error
}
