// Calibrate's kernel rounds (axonn/planner/calibration.hpp): every kernel timed in
// several rounds spread over the calibration; the topology takes each kernel's median
// over the rounds, and the rounds' sums and their spread say how far the machine's
// rate moved meanwhile. Hand-computed cases.
#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

namespace axonn::planner {
namespace {

// Two nodes of 2 with a ring over all 4 (calibrate's minimum) and two matmul shapes.
topo::ClusterMeasurements two_nodes_two_shapes() {
  topo::ClusterMeasurements m = test::four_ranks_two_nodes();
  m.matmuls = {{64, 64, 64, 1, 0.0}, {128, 128, 128, 1, 0.0}};
  return m;
}

TEST(KernelRounds, EachKernelTakesItsMedianOverTheRoundsAndTheSpreadOfTheirSumsIsDescribed) {
  topo::ClusterMeasurements m = two_nodes_two_shapes();
  // Three rounds; the second ran while the machine was slow. The small shape's times
  // 1, 3, 2 ms (median 2), the large one's 8, 10, 14 ms (median 10); layer_norm forward
  // 4, 6, 5 ns/element and backward 5, 7, 4 (medians 5 and 5).
  m.kernel_rounds = {{0, {1e-3, 8e-3}, {{"layer_norm", {4e-9, 5e-9}}}},
                     {1, {3e-3, 10e-3}, {{"layer_norm", {6e-9, 7e-9}}}},
                     {2, {2e-3, 14e-3}, {{"layer_norm", {5e-9, 4e-9}}}}};
  const CalibratedCluster c = calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
  const auto& table = c.topology.compute.matmul_table;
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[1].m, 128);
  // each shape's own median: the median round by sums (round 1, 13 ms) has 3 ms for the first
  EXPECT_DOUBLE_EQ(table[0].seconds, 2e-3);
  EXPECT_DOUBLE_EQ(table[1].seconds, 10e-3);
  const auto& ln = c.topology.compute.elementwise.at("layer_norm");
  EXPECT_DOUBLE_EQ(ln.forward_s_per_element, 5e-9);
  EXPECT_DOUBLE_EQ(ln.backward_s_per_element, 5e-9);
  // The rounds' sums: matmuls 9, 13, 16 ms (spread (16 - 9) / 13); element-wise 9, 13, 9 ns.
  ASSERT_EQ(c.kernel_rounds.size(), 3u);
  EXPECT_EQ(c.kernel_rounds[1].round, 1);
  EXPECT_NEAR(c.kernel_rounds[1].matmul_s, 13e-3, 1e-15);
  EXPECT_NEAR(c.kernel_rounds[1].elementwise_s_per_element, 13e-9, 1e-20);
  EXPECT_NEAR(c.matmul_round_spread, 7.0 / 13.0, 1e-12);
  EXPECT_NEAR(c.elementwise_round_spread, 4.0 / 9.0, 1e-12);
  EXPECT_NE(c.topology.description.find("kernels timed in 3 rounds"), std::string::npos) << c.topology.description;
  EXPECT_NE(c.topology.description.find("matmuls 53.8%, element-wise 44.4%"), std::string::npos)
      << c.topology.description;
}

TEST(KernelRounds, WithoutRoundsTheTimesAreTakenAsTheyCame) {
  topo::ClusterMeasurements m = two_nodes_two_shapes();
  m.matmuls[0].seconds = 1e-3, m.matmuls[1].seconds = 8e-3;
  m.elementwise["gelu"] = {3e-9, 4e-9};
  const CalibratedCluster c = calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
  EXPECT_DOUBLE_EQ(c.topology.compute.matmul_table[1].seconds, 8e-3);
  EXPECT_DOUBLE_EQ(c.topology.compute.elementwise.at("gelu").backward_s_per_element, 4e-9);
  EXPECT_TRUE(c.kernel_rounds.empty());
  EXPECT_DOUBLE_EQ(c.matmul_round_spread, 0.0);
  EXPECT_EQ(c.topology.description.find("kernels timed in"), std::string::npos);
}

TEST(KernelRounds, ARoundThatTimedOtherKernelsIsAnInternalError) {
  topo::ClusterMeasurements m = two_nodes_two_shapes();
  m.kernel_rounds = {{0, {1e-3, 8e-3}, {{"gelu", {3e-9, 4e-9}}}}, {1, {1e-3}, {{"gelu", {3e-9, 4e-9}}}}};
  try {
    calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test");
    FAIL() << "a round with one matmul of two was accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel round 1 timed 1 matmuls"), std::string::npos) << e.what();
  }
  m.kernel_rounds[1] = {1, {1e-3, 8e-3}, {{"bias", {3e-9, 4e-9}}}};
  EXPECT_THROW(calibrated_topology(topo::load_topology("perlmutter"), m, "mine", "test"), InternalError);
}

TEST(KernelRounds, AKernelsOnlyProbeKeepsTheBaseCollectivesAndMeasuresTheCompute) {
  const topo::Topology base = topo::load_topology("perlmutter");  // nodes of 4
  ASSERT_EQ(base.gpus_per_node, 4);
  topo::ClusterMeasurements m;  // calibrate --kernels-only on all of base's ranks: no collective timed
  m.world = base.total_gpus();
  m.gpus_per_node = 4;
  m.cores_per_rank = 0.25;
  m.matmuls = {{64, 64, 64, 1, 0.0}, {128, 128, 128, 1, 0.0}};
  m.kernel_rounds = {{0, {1e-3, 8e-3}, {{"gelu", {3e-9, 4e-9}}}}};
  const CalibratedCluster c = kernel_topology(base, m, "probe", "kernels only");
  EXPECT_EQ(c.topology.num_nodes, base.num_nodes);
  EXPECT_EQ(c.topology.gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(c.topology.cores_per_rank, 0.25);
  EXPECT_DOUBLE_EQ(c.topology.inter_node_bandwidth_bytes_per_s, base.inter_node_bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(c.topology.collective_latency_s, base.collective_latency_s);
  ASSERT_EQ(c.topology.compute.matmul_table.size(), 2u);
  EXPECT_DOUBLE_EQ(c.topology.compute.matmul_table[1].seconds, 8e-3);
  EXPECT_DOUBLE_EQ(c.topology.compute.elementwise.at("gelu").forward_s_per_element, 3e-9);
  EXPECT_EQ(c.topology.description, "kernels only");  // one round: no spread to describe
  EXPECT_EQ(c.topology.intra_node_table.size(), base.intra_node_table.size());  // the same nodes: kept
  // On nodes of 2, base's table (groups of up to 4 inside a node) is dropped.
  m.gpus_per_node = 2;
  ASSERT_FALSE(base.intra_node_table.empty());
  const CalibratedCluster two = kernel_topology(base, m, "probe", "kernels only");
  EXPECT_EQ(two.topology.num_nodes, 2 * base.num_nodes);
  EXPECT_TRUE(two.topology.intra_node_table.empty());
  EXPECT_NO_THROW(topo::topology_from_json(topo::topology_to_json(two.topology), "probe"));
  // calibrated_topology refuses the same measurements: no ring spans the nodes
  EXPECT_THROW(calibrated_topology(base, m, "probe", "kernels only"), InputError);
}

TEST(KernelRounds, AProbeComparesTheKernelsBothTablesHold) {
  topo::ComputeThroughput calibrated, probe;
  calibrated.matmul_table = {{64, 64, 64, 1, 2e-3}, {128, 128, 128, 1, 6e-3}, {32, 32, 32, 4, 1e-3}};
  calibrated.elementwise = {{"gelu", {3e-9, 5e-9}}, {"bias", {1e-9, 1e-9}}};
  // The probe: the first two shapes (1 and 5 ms, in the other order), one it alone has,
  // GELU at 2 + 4 ns and an operation the topology lacks.
  probe.matmul_table = {{128, 128, 128, 1, 5e-3}, {64, 64, 64, 1, 1e-3}, {16, 16, 16, 1, 9.0}};
  probe.elementwise = {{"gelu", {2e-9, 4e-9}}, {"softmax", {9.0, 9.0}}};
  const KernelTimeRatio r = kernel_time_ratio(calibrated, probe);
  EXPECT_EQ(r.shapes, 2u);
  EXPECT_EQ(r.operations, 1u);
  EXPECT_NEAR(r.matmul, 6e-3 / 8e-3, 1e-12);
  EXPECT_NEAR(r.elementwise, 6e-9 / 8e-9, 1e-12);
  const KernelTimeRatio none = kernel_time_ratio(calibrated, topo::ComputeThroughput{});
  EXPECT_EQ(none.shapes, 0u);
  EXPECT_DOUBLE_EQ(none.matmul, 0.0);
  EXPECT_DOUBLE_EQ(none.elementwise, 0.0);
}

}  // namespace
}  // namespace axonn::planner
