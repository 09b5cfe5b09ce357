// Calibrations pooled by median (axonn/planner/calibration_pool.hpp): every measured
// quantity by its key over the calibrations that have it, by hand; the base fields
// taken from the first; calibrations of different clusters refused.
#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/calibration_pool.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

topo::Topology calibration(double scale) {
  topo::Topology t;
  t.name = "one";
  t.gpus_per_node = 4, t.num_nodes = 2, t.gpu_memory_bytes = 1 << 30, t.peak_flops_per_s = 1e12;
  t.cores_per_rank = 0.25;
  t.host_link_bytes_per_s = 5e9;
  t.intra_node_bandwidth_bytes_per_s = 1e9 * scale;
  t.intra_node_table = {{1, 2, 1e9 * scale}, {1, 4, 2e9 * scale}};
  t.inter_node_bandwidth_bytes_per_s = 2e7 * scale;
  t.collective_latency_s = 1e-4 * scale;
  t.point_to_point = {3e9 * scale, 2.5e7 * scale};
  t.compute.matmul_flops_per_s = 1e10 * scale;
  t.compute.matmul_overhead_s = 1e-3 * scale;
  t.compute.matmul_table = {{64, 64, 64, 1, 1e-4 * scale}, {128, 64, 64, 2, 3e-4 * scale}};
  t.compute.elementwise["gelu"] = {2e-9 * scale, 3e-9 * scale};
  t.sync_wait = {{2, 0.01 * scale}, {4, 0.1 * scale}};
  t.compute_bf16 = t.compute;  // bf16 kernels 3 times as fast
  t.compute_bf16->matmul_flops_per_s *= 3;
  for (auto& m : t.compute_bf16->matmul_table) m.seconds /= 3;
  return t;
}

}  // namespace

// Scales 1, 2 and 4: each quantity's median is the scale-2 value, wherever it is.
// A fourth file without the (1, 4) entry, point-to-point, one shape and the group of 4's
// sync wait pools those over the three that have them; its extra entries stand alone.
TEST(CalibrationPool, EachMeasuredQuantityIsTheMedianOfTheCalibrationsThatHaveIt) {
  const topo::Topology a = calibration(1), b = calibration(4), c = calibration(2);
  const topo::Topology p = pooled_calibration({a, b, c}, {"a.json", "b.json", "c.json"}, "pooled");
  const topo::Topology two = calibration(2);
  EXPECT_EQ(p.name, "pooled");
  EXPECT_NE(p.description.find("the median of 3 calibrations"), std::string::npos) << p.description;
  EXPECT_NE(p.description.find("a.json, b.json, c.json"), std::string::npos) << p.description;
  EXPECT_DOUBLE_EQ(p.intra_node_bandwidth_bytes_per_s, two.intra_node_bandwidth_bytes_per_s);
  ASSERT_EQ(p.intra_node_table.size(), 2u);
  EXPECT_DOUBLE_EQ(p.intra_bandwidth(1, 4), two.intra_bandwidth(1, 4));
  EXPECT_DOUBLE_EQ(p.inter_node_bandwidth_bytes_per_s, two.inter_node_bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(p.collective_latency_s, two.collective_latency_s);
  EXPECT_DOUBLE_EQ(p.point_to_point.inter_node_bytes_per_s, two.point_to_point.inter_node_bytes_per_s);
  EXPECT_DOUBLE_EQ(p.compute.matmul_flops_per_s, two.compute.matmul_flops_per_s);
  EXPECT_DOUBLE_EQ(p.compute.matmul_overhead_s, two.compute.matmul_overhead_s);
  ASSERT_EQ(p.compute.matmul_table.size(), 2u);
  EXPECT_DOUBLE_EQ(p.compute.matmul_table[1].seconds, 6e-4);
  EXPECT_EQ(p.compute.matmul_table[1].batch, 2);
  EXPECT_DOUBLE_EQ(p.compute.elementwise.at("gelu").forward_s_per_element, 4e-9);
  EXPECT_DOUBLE_EQ(p.compute.elementwise.at("gelu").backward_s_per_element, 6e-9);
  EXPECT_DOUBLE_EQ(p.sync_wait_fraction(4), 0.2);
  ASSERT_TRUE(p.compute_bf16.has_value());  // pooled alike, apart from compute
  EXPECT_DOUBLE_EQ(p.compute_bf16->matmul_flops_per_s, 3 * two.compute.matmul_flops_per_s);
  EXPECT_DOUBLE_EQ(p.compute_bf16->matmul_table[1].seconds, 2e-4);
  EXPECT_DOUBLE_EQ(p.compute_bf16->elementwise.at("gelu").forward_s_per_element, 4e-9);
  EXPECT_DOUBLE_EQ(p.host_link_bytes_per_s, 5e9);  // the first's
  EXPECT_DOUBLE_EQ(p.cores_per_rank, 0.25);

  topo::Topology d = calibration(100);
  d.intra_node_table = {{1, 2, 1e11}, {2, 2, 7e8}};
  d.point_to_point = {};  // not measured: left out of the pool
  d.compute.matmul_table = {{64, 64, 64, 1, 1e-2}, {256, 64, 64, 1, 5e-4}};
  d.sync_wait = {{2, 1.0}, {8, 0.3}};
  const topo::Topology q = pooled_calibration({a, b, c, d}, {"a", "b", "c", "d"}, "q");
  EXPECT_DOUBLE_EQ(q.intra_bandwidth(1, 4), 2e9 * 2);     // a, b, c only
  EXPECT_DOUBLE_EQ(q.intra_bandwidth(1, 2), (2e9 + 4e9) / 2);  // 1, 2, 4, 100 (x 1e9): (2 + 4) / 2
  EXPECT_DOUBLE_EQ(q.intra_bandwidth(2, 2), 7e8);         // d's alone
  EXPECT_DOUBLE_EQ(q.point_to_point.intra_node_bytes_per_s, 6e9);  // a, b, c
  ASSERT_EQ(q.compute.matmul_table.size(), 3u);
  EXPECT_DOUBLE_EQ(q.compute.matmul_table[1].seconds, 6e-4);  // 128 x 64 x 64: a, b, c
  EXPECT_EQ(q.compute.matmul_table[2].m, 256);
  ASSERT_EQ(q.sync_wait.size(), 3u);  // by ranks, ascending
  EXPECT_EQ(q.sync_wait[2].ranks, 8);
  EXPECT_DOUBLE_EQ(q.sync_wait_fraction(4), 0.2);  // a, b, c
  topo::Topology fp32_only = calibration(2);
  fp32_only.compute_bf16.reset();  // one calibration without bf16 kernels: the pool has none
  EXPECT_FALSE(pooled_calibration({a, b, fp32_only}, {"a", "b", "f"}, "f").compute_bf16.has_value());
}

TEST(CalibrationPool, RefusesOneCalibrationAndCalibrationsOfDifferentClusters) {
  const topo::Topology a = calibration(1);
  EXPECT_THROW(pooled_calibration({a}, {"a.json"}, "p"), InputError);
  topo::Topology other = calibration(1);
  other.num_nodes = 4, other.gpus_per_node = 2;
  try {
    pooled_calibration({a, other}, {"a.json", "other.json"}, "p");
    FAIL() << "calibrations of 2 x 4 and 4 x 2 were pooled";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[pool-calibrations]"), std::string::npos) << what;
    EXPECT_NE(what.find("other.json: gpus_per_node"), std::string::npos) << what;
  }
  topo::Topology dedicated = calibration(1);
  dedicated.cores_per_rank = 1;
  EXPECT_THROW(pooled_calibration({a, dedicated}, {"a", "b"}, "p"), InputError);
}
