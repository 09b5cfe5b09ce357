// The sync wait (docs/model.md section 8): a blocking collective waits for its group's
// last member, a fraction of the compute since the group's previous collective. The
// topology's field, calibrate's fit and the pass clock, on hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>

#include "axonn/common/error.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

namespace axonn::planner {
namespace {

TEST(SyncWait, TopologyLooksUpTheLargestGroupNotAboveAndRoundTrips) {
  topo::Topology t = topo::load_topology("perlmutter");
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(8), 0.0);  // not measured: none
  t.sync_wait = {{2, 0.1}, {4, 0.25}};
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(1), 0.0);
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(2), 0.1);
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(3), 0.1);
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(4), 0.25);
  EXPECT_DOUBLE_EQ(t.sync_wait_fraction(16), 0.25);
  const topo::Topology back = topo::topology_from_json(topo::topology_to_json(t), "round trip");
  ASSERT_EQ(back.sync_wait.size(), 2u);
  EXPECT_EQ(back.sync_wait[1].ranks, 4);
  EXPECT_DOUBLE_EQ(back.sync_wait[1].fraction, 0.25);

  auto error_of = [](const nlohmann::json& j) {
    try {
      topo::topology_from_json(j, "bad.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = topo::topology_to_json(t);
  j["sync_wait"][0]["ranks"] = 1;
  EXPECT_NE(error_of(j).find("bad.json: /sync_wait/0/ranks"), std::string::npos) << error_of(j);
  j = topo::topology_to_json(t);
  j["sync_wait"][1]["ranks"] = 2;  // not ascending
  EXPECT_NE(error_of(j).find("ascending"), std::string::npos) << error_of(j);
  j = topo::topology_to_json(t);
  j["sync_wait"][0]["fraction"] = -0.5;
  EXPECT_NE(error_of(j).find("/sync_wait/0/fraction"), std::string::npos) << error_of(j);
}

TEST(SyncWait, EachBlockingCollectiveWaitsForTheComputeSinceThePreviousOne) {
  LayerTimes l;
  l.forward_s = l.backward_input_s = l.backward_weight_s = 1;
  l.comm.forward_all_reduce_s = l.comm.input_grad_all_reduce_s = 0.5;
  l.comm.sync_wait_fraction = 0.2;
  StageSchedule s;
  s.activation_checkpointing = false;
  s.overlap = plan::OverlapSettings::synchronous();
  // forward 1, wait 0.2 * 1 + AR 0.5; dI 1, wait 0.2 * 1 + AR 0.5; dW 1 (no collective after it)
  const StageTime st = stage_time({l}, s);
  EXPECT_DOUBLE_EQ(st.batch_s, 1 + 0.2 + 0.5 + 1 + 0.2 + 0.5 + 1);
  EXPECT_DOUBLE_EQ(st.compute_s, 3.0);
  EXPECT_DOUBLE_EQ(st.sync_wait_s, 0.4);
  // Two layers: the second layer's forward all-reduce waits for its own forward only.
  LayerTimes two = l;
  two.forward_s = 3;
  const StageTime both = stage_time({l, two}, s);
  EXPECT_DOUBLE_EQ(both.sync_wait_s, 0.2 * 1 + 0.2 * 3 + 0.2 * 1 + 0.2 * (1 + 1));
  // No collective (a group of one): no wait.
  LayerTimes alone;
  alone.forward_s = 2;
  alone.comm.sync_wait_fraction = 0.2;
  EXPECT_DOUBLE_EQ(stage_time({alone}, s).sync_wait_s, 0.0);
  EXPECT_DOUBLE_EQ(stage_time({alone}, s).batch_s, 2.0);
}

TEST(SyncWait, EachBlockingCollectiveAlsoPaysTheFixedCostOfACall) {
  LayerTimes l;
  l.forward_s = l.backward_input_s = l.backward_weight_s = 1;
  l.comm.forward_all_reduce_s = l.comm.input_grad_all_reduce_s = 0.5;
  l.comm.sync_wait_fraction = 0.2;
  l.comm.sync_call_s = 0.05;
  StageSchedule s;
  s.activation_checkpointing = false;
  s.overlap = plan::OverlapSettings::synchronous();
  // The example above with 0.05 s more at each of its two all-reduces.
  const StageTime st = stage_time({l}, s);
  EXPECT_DOUBLE_EQ(st.batch_s, 4.4 + 2 * 0.05);
  EXPECT_DOUBLE_EQ(st.sync_wait_s, 0.4 + 2 * 0.05);
  // Without the fraction, the calls alone.
  l.comm.sync_wait_fraction = 0;
  EXPECT_DOUBLE_EQ(stage_time({l}, s).sync_wait_s, 2 * 0.05);
  EXPECT_DOUBLE_EQ(stage_time({l}, s).batch_s, 4.0 + 2 * 0.05);
  // A group of one has no collective, so no call.
  LayerTimes alone;
  alone.forward_s = 2;
  alone.comm.sync_call_s = 0.05;
  EXPECT_DOUBLE_EQ(stage_time({alone}, s).batch_s, 2.0);
}

using test::four_ranks_two_nodes;

TEST(SyncWait, CalibrateFitsTheFractionPerGroupSize) {
  topo::ClusterMeasurements m = four_ranks_two_nodes();
  for (double compute : {0.001, 0.004, 0.016}) {
    m.sync_waits.push_back({2, compute, 5e-5 + 0.1 * compute, 0});
    m.sync_waits.push_back({4, compute, 5e-5 + 0.3 * compute, 0});
  }
  m.nonblocking.all_gather = topo::AllGatherAlgorithm::Linear;  // the MPI backend's
  const CalibratedCluster c = calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
  EXPECT_EQ(c.topology.nonblocking.all_gather, topo::AllGatherAlgorithm::Linear);  // carried into the topology
  ASSERT_EQ(c.topology.sync_wait.size(), 2u);
  EXPECT_EQ(c.topology.sync_wait[0].ranks, 2);
  EXPECT_NEAR(c.topology.sync_wait[0].fraction, 0.1, 1e-9);
  EXPECT_NEAR(c.topology.sync_wait[1].fraction, 0.3, 1e-9);
  ASSERT_EQ(c.sync_waits[1].rounds.size(), 1u);  // one round: its fraction is every summary
  EXPECT_NEAR(c.sync_waits[1].fraction, 0.3, 1e-9);
  EXPECT_DOUBLE_EQ(c.sync_waits[1].start_fraction, c.sync_waits[1].fraction);
  EXPECT_DOUBLE_EQ(c.sync_waits[1].end_fraction, c.sync_waits[1].fraction);
  EXPECT_DOUBLE_EQ(c.sync_waits[1].lowest, c.sync_waits[1].highest);
  ASSERT_TRUE(c.sync_waits[1].rounds[0].fit.has_value());
  EXPECT_NEAR(c.sync_waits[1].rounds[0].fit->alpha_s, 5e-5, 1e-9);
  EXPECT_NEAR(c.sync_waits[1].rounds[0].fit->r2, 1.0, 1e-9);

  // Waits that fall as the bursts grow: no fit, fraction 0, and the reason.
  topo::ClusterMeasurements flat = four_ranks_two_nodes();
  flat.sync_waits = {{2, 0.001, 3e-4, 0}, {2, 0.01, 1e-4, 0}};
  const CalibratedCluster f = calibrated_topology(topo::load_topology("perlmutter"), flat, "mine", "test");
  ASSERT_EQ(f.topology.sync_wait.size(), 1u);
  EXPECT_DOUBLE_EQ(f.topology.sync_wait[0].fraction, 0.0);
  ASSERT_EQ(f.sync_waits[0].rounds.size(), 1u);
  EXPECT_FALSE(f.sync_waits[0].rounds[0].fit.has_value());
  EXPECT_FALSE(f.sync_waits[0].rounds[0].note.empty());
}

TEST(SyncWait, CalibrateWritesTheMeanOverRoundsAndDescribesItsHalvesAndRange) {
  // Five rounds of a group of 4, fitted one by one: fractions 0.05, 0.4, 0.08, 0.1 and
  // a round whose waits fall (no fit, 0); the samples arrive interleaved by round.
  topo::ClusterMeasurements m = four_ranks_two_nodes();
  const std::vector<double> fractions = {0.05, 0.4, 0.08, 0.1};
  for (double compute : {0.002, 0.008, 0.032}) {
    for (size_t r = 0; r < fractions.size(); ++r)
      m.sync_waits.push_back({4, compute, 1e-4 + fractions[r] * compute, static_cast<int64_t>(r)});
    m.sync_waits.push_back({4, compute, 1e-3 - compute / 100, 4});
  }
  const CalibratedCluster c = calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
  ASSERT_EQ(c.sync_waits.size(), 1u);
  const SyncWaitFit& w = c.sync_waits[0];
  ASSERT_EQ(w.rounds.size(), 5u);
  for (size_t r = 0; r < fractions.size(); ++r) {
    EXPECT_EQ(w.rounds[r].round, static_cast<int64_t>(r));
    EXPECT_NEAR(w.rounds[r].fraction(), fractions[r], 1e-9);
  }
  EXPECT_FALSE(w.rounds[4].fit.has_value());
  EXPECT_DOUBLE_EQ(w.rounds[4].fraction(), 0.0);
  // the mean of {0.05, 0.4, 0.08, 0.1, 0}; of the first 2 rounds (5 / 2, as calibrate
  // runs them at the start) and of the last 3; the range
  EXPECT_NEAR(w.fraction, 0.126, 1e-9);
  EXPECT_NEAR(w.start_fraction, 0.225, 1e-9);
  EXPECT_NEAR(w.end_fraction, 0.06, 1e-9);
  EXPECT_DOUBLE_EQ(w.lowest, 0.0);
  EXPECT_NEAR(w.highest, 0.4, 1e-9);
  ASSERT_EQ(c.topology.sync_wait.size(), 1u);
  EXPECT_NEAR(c.topology.sync_wait[0].fraction, 0.126, 1e-9);
  EXPECT_NE(c.topology.description.find("4 ranks 0.126 (0.225, 0.060; 0.000-0.400)"), std::string::npos)
      << c.topology.description;
}

TEST(SyncWait, TheEvaluatorChargesTheTensorGroupsFraction) {
  const model::ModelDescription m = model::load_model("gpt-bench");
  topo::Topology t = topo::load_topology("perlmutter");
  const PlannerOptions o = test::eight_ranks_synchronous();
  const topo::Grid tensor{2, 2, 1, 2, 1}, data{1, 1, 1, 8, 1};
  const Evaluation before = evaluate(m, t, tensor, o), data_before = evaluate(m, t, data, o);
  t.sync_wait = {{4, 0.3}};  // none for 2 ranks: the tensor grid's data group of 2 waits nothing
  const Evaluation after = evaluate(m, t, tensor, o), data_after = evaluate(m, t, data, o);
  ASSERT_TRUE(before.feasible && after.feasible);
  EXPECT_EQ(before.comm.sync_wait, 0.0);
  // The tensor group has 4 ranks: 0.3 of the compute before each collective, at most
  // 0.3 of all compute (the optimizer's and the last dW's precede none).
  EXPECT_GT(after.comm.sync_wait, 0.1 * after.compute_s);
  EXPECT_LE(after.comm.sync_wait, 0.3 * after.compute_s + 1e-12);
  EXPECT_NEAR(after.batch_s, before.batch_s + after.comm.sync_wait, 1e-9 * after.batch_s);
  EXPECT_DOUBLE_EQ(after.comm_s, after.comm.total());
  EXPECT_DOUBLE_EQ(after.compute_s, before.compute_s);
  // Pure data parallelism has no tensor group; its data group's wait is the next test's.
  EXPECT_EQ(data_before.comm.sync_wait, 0.0);
  const double data_wait = data_after.comm.sync_wait;
  // The fixed cost of a call: a whole number of calls more on the tensor grid (at
  // least one per layer and pass), none on the data-parallel one; the field round-trips.
  t.collective_call_s = 0.01;
  const Evaluation called = evaluate(m, t, tensor, o);
  const double calls = (called.comm.sync_wait - after.comm.sync_wait) / 0.01;
  EXPECT_NEAR(calls, std::round(calls), 1e-6);
  EXPECT_GE(calls, static_cast<double>(m.layers.size()));
  EXPECT_NEAR(called.batch_s, after.batch_s + 0.01 * calls, 1e-9 * called.batch_s);
  EXPECT_NEAR(evaluate(m, t, data, o).batch_s, data_before.batch_s + data_wait, 1e-12 * data_before.batch_s);  // no call cost
  EXPECT_EQ(topo::topology_from_json(topo::topology_to_json(t), "round trip").collective_call_s, 0.01);
  // The paper's model has no sync wait; with the overlaps on, the charges still raise
  // the batch time (some of them move a collective's end behind compute instead).
  PlannerOptions paper = o;
  paper.comm_model = CommModel::Paper;
  EXPECT_EQ(evaluate(m, t, tensor, paper).comm.sync_wait, 0.0);
  PlannerOptions overlapped = o;
  overlapped.overlap = plan::OverlapSettings::level(4, 0);
  t.collective_call_s = 0;
  const double without = evaluate(m, t, tensor, overlapped).batch_s;
  t.collective_call_s = 0.01;
  const Evaluation with = evaluate(m, t, tensor, overlapped);
  EXPECT_GT(with.batch_s, without);
  EXPECT_LE(with.batch_s - without, with.comm.sync_wait + 1e-9);
}

TEST(SyncWait, TheDataGroupsFirstCollectiveWaitsForTheStepsCompute) {
  // docs/model.md section 8, "The data group's wait": f(Gdata) times the stage's compute
  // before its tail, once per step. perlmutter has no compute model, so no element-wise
  // cost and a free optimizer: the compute before the tail is all of compute_s.
  const model::ModelDescription m = model::load_model("gpt-bench");
  topo::Topology t = topo::load_topology("perlmutter");
  const PlannerOptions o = test::eight_ranks_synchronous();
  const topo::Grid data{1, 1, 1, 8, 1}, four{2, 1, 1, 4, 1}, pipeline{1, 1, 1, 4, 2};
  auto with = [&](const std::vector<topo::SyncWaitEntry>& f, const topo::Grid& g, const PlannerOptions& p) {
    t.sync_wait = f;
    return evaluate(m, t, g, p);
  };
  const Evaluation none = with({}, data, o), charged = with({{8, 0.2}}, data, o);
  ASSERT_TRUE(none.feasible && charged.feasible);
  EXPECT_NEAR(charged.comm.sync_wait, 0.2 * none.compute_s, 1e-12 * none.compute_s);
  EXPECT_NEAR(charged.batch_s, none.batch_s + 0.2 * none.compute_s, 1e-12 * none.batch_s);  // the unbucketed tail
  EXPECT_DOUBLE_EQ(charged.compute_s, none.compute_s);
  EXPECT_DOUBLE_EQ(charged.comm_s, charged.comm.total());
  // The entry of the data group's size, else the largest below it: 4 data ranks take
  // 4's; their tensor group of 2 has no entry and waits nothing.
  const Evaluation four_none = with({}, four, o), four_charged = with({{4, 0.1}, {8, 0.5}}, four, o);
  EXPECT_NEAR(four_charged.comm.sync_wait, 0.1 * four_none.compute_s, 1e-12 * four_none.compute_s);
  // Each pipeline stage's tail waits for its own stage's compute: the batch grows, by
  // no more than the largest stage's charge.
  const Evaluation pipe_none = with({}, pipeline, o), pipe_charged = with({{4, 0.2}}, pipeline, o);
  EXPECT_GT(pipe_charged.batch_s, pipe_none.batch_s);
  EXPECT_LE(pipe_charged.batch_s, pipe_none.batch_s + 0.2 * pipe_none.compute_s + 1e-12);
  // Bucketed all-reduces: the FIFO ends that much later, so the batch grows by no more.
  PlannerOptions bucketed = o;
  bucketed.overlap = plan::OverlapSettings::level(4, 0);
  const Evaluation b_none = with({}, data, bucketed), b_charged = with({{8, 0.2}}, data, bucketed);
  EXPECT_GT(b_charged.batch_s, b_none.batch_s);
  EXPECT_LE(b_charged.batch_s, b_none.batch_s + 0.2 * b_none.compute_s + 1e-12);
  // ZeRO-1 waits in its tail (reduce-scatter first); ZeRO-2 reduces inside the passes and
  // is not charged.
  PlannerOptions zero1 = o, zero2 = o;
  zero1.optimizer.zero = 1;
  zero2.optimizer.zero = 2;
  EXPECT_NEAR(with({{8, 0.2}}, data, zero1).batch_s, with({}, data, zero1).batch_s + 0.2 * none.compute_s,
              1e-12 * none.batch_s);
  EXPECT_DOUBLE_EQ(with({{8, 0.2}}, data, zero2).batch_s, with({}, data, zero2).batch_s);
  // The paper model charges nothing.
  PlannerOptions paper = o;
  paper.comm_model = CommModel::Paper;
  EXPECT_EQ(with({{8, 0.2}}, data, paper).comm.sync_wait, 0.0);
}

}  // namespace
}  // namespace axonn::planner
