// Collective latency by placement (docs/model.md section 1): calibrate's latency rounds
// (small all-reduces of pairs inside a node and across nodes, beside other ranks'
// compute) turned into the topology's two latencies, and pooled.
#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/calibration_pool.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

namespace axonn::planner {
namespace {

// The latency rounds (docs/model.md section 1): per ring step, half the median loaded
// all-reduce of the pairs (2 ring steps) inside a node and across nodes; the alone
// rounds beside it; without rounds of a placement, the bandwidth fits' median alpha.
TEST(LatencyRounds, CalibrateWritesEachPlacementsLoadedLatency) {
  topo::ClusterMeasurements m = test::four_ranks_two_nodes();  // one group across: alpha 1e-4 / 3 steps
  const topo::Topology base = topo::load_topology("perlmutter");
  const CalibratedCluster without = calibrated_topology(base, m, "mine", "test");
  EXPECT_LT(without.topology.intra_node_collective_latency_s, 0);
  EXPECT_NEAR(without.topology.collective_latency_s, 1e-4 / 3, 1e-12);
  EXPECT_TRUE(without.latencies.empty());
  // Inside a node: loaded 4, 6, 10 ms (median 6 -> 3 ms per step), alone 1 ms (0.5);
  // across: loaded 2, 3 ms (median 2.5 -> 1.25 ms per step).
  m.latencies = {{false, true, 4e-3, 0}, {false, false, 1e-3, 0}, {true, true, 2e-3, 0}, {false, true, 10e-3, 1},
                 {true, true, 3e-3, 1}, {false, true, 6e-3, 2}};
  const CalibratedCluster c = calibrated_topology(base, m, "mine", "test");
  EXPECT_NEAR(c.topology.intra_node_collective_latency_s, 3e-3, 1e-15);
  EXPECT_NEAR(c.topology.collective_latency_s, 1.25e-3, 1e-15);
  ASSERT_EQ(c.latencies.size(), 2u);
  EXPECT_FALSE(c.latencies[0].across_nodes);
  EXPECT_NEAR(c.latencies[0].alone_s, 0.5e-3, 1e-15);
  EXPECT_NEAR(c.latencies[0].lowest_s, 2e-3, 1e-15);
  EXPECT_NEAR(c.latencies[0].highest_s, 5e-3, 1e-15);
  EXPECT_EQ(c.latencies[0].rounds, 3);
  EXPECT_EQ(c.latencies[1].alone_s, 0.0);  // none timed alone
  EXPECT_NE(c.topology.description.find("latency per ring step"), std::string::npos) << c.topology.description;
  EXPECT_THROW(fit_latency({{false, false, 1e-3, 0}}, false), InternalError);
  // Pooled: each placement's median over the calibrations that have it.
  topo::Topology a = c.topology, b = c.topology, d = without.topology;
  b.intra_node_collective_latency_s = 5e-3;
  const topo::Topology p = pooled_calibration({a, b, d}, {"a", "b", "d"}, "pooled");
  EXPECT_NEAR(p.intra_node_collective_latency_s, 4e-3, 1e-15);  // of 3 and 5 ms
}

}  // namespace
}  // namespace axonn::planner
