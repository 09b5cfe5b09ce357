// Waiting stages lend their cores (docs/model.md section 10): on time-sliced ranks a
// pipeline stage that waits takes only a share of a computing rank's cores, so the
// others compute faster. The pipeline term, the evaluator's use of it, the topology's
// field and calibrate's fit, on hand-computed cases.
#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/calibration_pool.hpp"
#include "axonn/planner/pipeline_time.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

namespace axonn::planner {
namespace {

using plan::PipelineSchedule;

std::vector<StagePasses> two_stages_all_compute() {
  StagePasses p;
  p.forward_s = p.forward_compute_s = 1;
  p.backward_s = p.last_backward_s = p.backward_compute_s = p.last_backward_compute_s = 2;
  return {p, p};
}

double speedup_of(const std::vector<StagePasses>& stages, std::vector<double> shares, double cores_per_rank,
                  std::vector<StagePasses>* lent_out = nullptr) {
  std::vector<StagePasses> lent;
  PipelineScratch scratch;
  const std::vector<double> links(stages.size() - 1, 0.0);
  const double s = lent_core_speedup(stages, links, shares, cores_per_rank, PipelineSchedule::GPipe, 2, 2, lent,
                                     scratch);
  if (lent_out) *lent_out = lent;
  return s;
}

TEST(LentCores, GPipeByHandTheBubbleCostsNothingWhenWaitingRanksTakeNothing) {
  // The header's example: the span is 9; stage 0 waits 3 (2 to 5), stage 1 waits 1 and 2
  // after its last backward (7 to 9): f = (3/9 + 3/9) / 2 = 1/3, speedup 1.5.
  std::vector<StagePasses> lent;
  EXPECT_NEAR(speedup_of(two_stages_all_compute(), {0.0}, 0.25, &lent), 1.5, 1e-12);
  EXPECT_NEAR(lent[0].forward_s, 2.0 / 3, 1e-12);
  EXPECT_NEAR(lent[1].last_backward_compute_s, 4.0 / 3, 1e-12);
  // The sped-up step: the passes' 12 units of work on the two stages' cores.
  const PipelineTime t = simulate_pipeline(lent, 0.0, PipelineSchedule::GPipe, 2, 2);
  EXPECT_NEAR(t.batch_s, 6.0, 1e-12);
  EXPECT_NEAR(simulate_pipeline(two_stages_all_compute(), 0.0, PipelineSchedule::GPipe, 2, 2).batch_s, 9.0, 1e-12);
}

TEST(LentCores, AStagesDataTailLendsNothing) {
  // Stage 1's tail of 2 fills the time it would wait after its last backward: at a
  // speedup s (compute unit c = 1/s) stage 1 ends its backwards at 7c and its tail at
  // 7c + 2 >= the span 9c; it waits only c (its first forward), stage 0 3c, so
  // f = (1/3 + 1/9) / 2 = 2/9 at every s and the speedup is 9/7 (1.5 without the tail).
  auto stages = two_stages_all_compute();
  stages[1].tail_s = 2;
  EXPECT_NEAR(speedup_of(stages, {0.0}, 0.25), 9.0 / 7, 1e-9);
}

TEST(LentCores, TheShareTheCapAndWhatIsNotCompute) {
  // Waiting ranks as hungry as computing ones lend nothing; half as hungry, half the
  // freed third: f = 1/6, 1.2 (uniform scaling keeps the waits' fractions: the fixed point).
  std::vector<StagePasses> lent;
  EXPECT_DOUBLE_EQ(speedup_of(two_stages_all_compute(), {1.0}, 0.25, &lent), 1.0);
  EXPECT_DOUBLE_EQ(lent[0].backward_s, 2.0);
  EXPECT_NEAR(speedup_of(two_stages_all_compute(), {0.5}, 0.25), 1.2, 1e-12);
  // At most a whole core each: 0.8 cores per rank caps it at 1.25.
  EXPECT_NEAR(speedup_of(two_stages_all_compute(), {0.0}, 0.8), 1.25, 1e-12);
  // A pass's communication is not sped up: forward 1.5 of which 1 compute.
  auto stages = two_stages_all_compute();
  for (auto& p : stages) p.forward_s = 1.5;
  const double s = speedup_of(stages, {0.0}, 0.25, &lent);
  EXPECT_GT(s, 1.0);
  EXPECT_NEAR(lent[0].forward_s, 0.5 + 1.0 / s, 1e-12);
  EXPECT_NEAR(lent[0].forward_compute_s, 1.0 / s, 1e-12);
  // One stage: nothing waits for a message.
  EXPECT_DOUBLE_EQ(speedup_of({two_stages_all_compute()[0]}, {}, 0.25), 1.0);
}

TEST(LentCores, ABoundaryCrossesANodeByThePipelinesPlacement) {
  const topo::Topology t = topo::load_topology("perlmutter");  // 4 GPUs per node
  const topo::PlacementOrder order = topo::default_order();
  // 1,1,2,1,4 on 8: stages of 2 ranks, two per node: only boundary 1 crosses.
  const topo::Grid two_per_node{1, 1, 2, 1, 4};
  EXPECT_FALSE(pipeline_boundary_crosses_nodes(t, two_per_node, order, 0));
  EXPECT_TRUE(pipeline_boundary_crosses_nodes(t, two_per_node, order, 1));
  EXPECT_FALSE(pipeline_boundary_crosses_nodes(t, two_per_node, order, 2));
  // 1,1,4,1,2: a stage fills a node: every boundary crosses.
  EXPECT_TRUE(pipeline_boundary_crosses_nodes(t, topo::Grid{1, 1, 4, 1, 2}, order, 0));
}

TEST(LentCores, TheEvaluatorLendsOnlyOnTimeSlicedPipelinesWithAMeasuredShare) {
  const model::ModelDescription m = model::load_model("gpt-bench");
  topo::Topology t = topo::load_topology("perlmutter");
  t.num_nodes = 2;
  const PlannerOptions o = test::eight_ranks_synchronous();
  const topo::Grid pipeline{1, 1, 2, 1, 4}, data{1, 1, 1, 8, 1};
  t.cores_per_rank = 0.25;
  const Evaluation unmeasured = evaluate(m, t, pipeline, o);
  ASSERT_TRUE(unmeasured.feasible);
  EXPECT_DOUBLE_EQ(unmeasured.lent_core_speedup, 1.0);
  t.waiting_share = {1.0, 1.0};  // as hungry as computing: the same prediction
  const Evaluation hungry = evaluate(m, t, pipeline, o);
  EXPECT_DOUBLE_EQ(hungry.lent_core_speedup, 1.0);
  EXPECT_DOUBLE_EQ(hungry.batch_s, unmeasured.batch_s);
  t.waiting_share = {0.0, 1.0};  // boundaries 0 and 2 lend fully, 1 not
  const Evaluation lending = evaluate(m, t, pipeline, o);
  EXPECT_GT(lending.lent_core_speedup, 1.0);
  EXPECT_LE(lending.lent_core_speedup, 4.0);
  EXPECT_LT(lending.batch_s, unmeasured.batch_s);
  EXPECT_NEAR(lending.compute_s, unmeasured.compute_s / lending.lent_core_speedup, 1e-9 * unmeasured.compute_s);
  t.waiting_share = {0.0, 0.0};  // every boundary lends: faster still
  EXPECT_GT(evaluate(m, t, pipeline, o).lent_core_speedup, lending.lent_core_speedup);
  // No pipeline, dedicated cores or the placement-agnostic model: nothing lent.
  const Evaluation data_lending = evaluate(m, t, data, o);
  t.waiting_share = {};
  EXPECT_DOUBLE_EQ(data_lending.batch_s, evaluate(m, t, data, o).batch_s);
  t.waiting_share = {0.0, 0.0};
  PlannerOptions agnostic = o;
  agnostic.placement_aware = false;
  EXPECT_DOUBLE_EQ(evaluate(m, t, pipeline, agnostic).lent_core_speedup, 1.0);
  t.cores_per_rank = 1;
  EXPECT_DOUBLE_EQ(evaluate(m, t, pipeline, o).lent_core_speedup, 1.0);
}

TEST(LentCores, TheTopologyFieldReadsWritesAndRefusesBadShares) {
  topo::Topology t = topo::load_topology("perlmutter");
  EXPECT_FALSE(t.waiting_share.measured());
  EXPECT_DOUBLE_EQ(t.waiting_share.of(false), 1.0);  // not measured: nothing lent
  EXPECT_FALSE(topo::topology_to_json(t).contains("waiting_rank_share"));
  t.waiting_share = {0.25, -1};  // inside a node only (a calibration on one node)
  EXPECT_DOUBLE_EQ(t.waiting_share.of(false), 0.25);
  EXPECT_DOUBLE_EQ(t.waiting_share.of(true), 1.0);
  nlohmann::json j = topo::topology_to_json(t);
  EXPECT_FALSE(j["waiting_rank_share"].contains("inter_node"));
  const topo::Topology back = topo::topology_from_json(j, "round trip");
  EXPECT_DOUBLE_EQ(back.waiting_share.intra_node, 0.25);
  EXPECT_DOUBLE_EQ(back.waiting_share.inter_node, -1.0);
  auto error_of = [](const nlohmann::json& bad) {
    return test::error_of([&] { topo::topology_from_json(bad, "bad.json"); });
  };
  j["waiting_rank_share"]["intra_node"] = 1.5;
  EXPECT_NE(error_of(j).find("bad.json: /waiting_rank_share/intra_node"), std::string::npos) << error_of(j);
  EXPECT_NE(error_of(j).find("a fraction from 0 to 1"), std::string::npos) << error_of(j);
  j["waiting_rank_share"] = nlohmann::json::object();
  EXPECT_NE(error_of(j).find("neither share"), std::string::npos) << error_of(j);
  j["waiting_rank_share"] = {{"intra", 0.5}};
  EXPECT_NE(error_of(j).find("intra"), std::string::npos) << error_of(j);
}

TEST(LentCores, CalibrateFitsTwiceTheMedianRatioLessOneAndThePoolTakesTheMedian) {
  // Ratios 0.5, 0.75, 1.2: median 0.75, share 2 * 0.75 - 1 = 0.5; the rounds' range
  // clamped to [0, 1].
  const WaitingShareFit f = fit_waiting_share({0.5, 1.2, 0.75}, true);
  EXPECT_DOUBLE_EQ(f.share, 0.5);
  EXPECT_DOUBLE_EQ(f.lowest, 0.0);
  EXPECT_DOUBLE_EQ(f.highest, 1.0);
  EXPECT_EQ(f.rounds, 3);
  EXPECT_THROW(fit_waiting_share({}, false), InternalError);
  topo::ClusterMeasurements m = test::four_ranks_two_nodes();
  m.waiting_shares = {{false, 0.6, 0}, {true, 1.0, 0}, {false, 0.7, 1}, {true, 0.9, 1}, {false, 0.65, 2}};
  const CalibratedCluster c = calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
  EXPECT_NEAR(c.topology.waiting_share.intra_node, 0.3, 1e-12);  // 2 * 0.65 - 1
  EXPECT_NEAR(c.topology.waiting_share.inter_node, 0.9, 1e-12);  // 2 * 0.95 - 1
  ASSERT_EQ(c.waiting_shares.size(), 2u);
  EXPECT_FALSE(c.waiting_shares[0].across_nodes);
  EXPECT_NE(c.topology.description.find("a waiting rank's share of the cores"), std::string::npos)
      << c.topology.description;
  // Pooled: the median of the calibrations that measured each kind.
  topo::Topology a = c.topology, b = c.topology, d = c.topology;
  b.waiting_share = {0.1, -1};
  d.waiting_share = {0.5, 0.5};
  const topo::Topology p = pooled_calibration({a, b, d}, {"a", "b", "d"}, "pooled");
  EXPECT_NEAR(p.waiting_share.intra_node, 0.3, 1e-12);
  EXPECT_NEAR(p.waiting_share.inter_node, 0.7, 1e-12);  // of 0.9 and 0.5
}

}  // namespace
}  // namespace axonn::planner
