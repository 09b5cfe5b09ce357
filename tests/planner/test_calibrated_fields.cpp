// Groups of calibrated fields swapped between calibrations (axonn/planner/calibrated_fields.hpp).
#include <cmath>

#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/calibrated_fields.hpp"

namespace axonn::planner {
namespace {

// A calibration whose every swappable field carries `v` (or a value made from it).
topo::Topology calibration(double v) {
  topo::Topology t;
  t.name = "cal";
  t.gpus_per_node = 4;
  t.num_nodes = 2;
  t.cores_per_rank = 0.25;
  t.collective_call_s = 1e-3;
  t.compute.matmul_table = {{128, 128, 128, 1, v * 1e-3}};
  t.compute.matmul_flops_per_s = v * 1e9;
  t.compute.matmul_overhead_s = v * 1e-6;
  t.compute.elementwise["gelu"] = {v * 1e-9, 2 * v * 1e-9};
  t.sync_wait = {{2, v / 10}, {8, v / 5}};
  t.waiting_share = {v / 10, v / 5};
  t.intra_node_bandwidth_bytes_per_s = v * 1e8;
  t.intra_node_table = {{1, 2, v * 2e8}};
  t.inter_node_bandwidth_bytes_per_s = v * 1e7;
  t.point_to_point = {v * 3e8, v * 3e7};
  t.collective_latency_s = v * 1e-5;
  t.intra_node_collective_latency_s = v * 3e-5;
  return t;
}

// Which groups of `t` hold the donor's values (calibration(2)) rather than the base's (calibration(1)).
std::vector<CalibratedField> from_donor(const topo::Topology& t) {
  std::vector<CalibratedField> d;
  if (t.compute.matmul_flops_per_s == 2e9 && t.compute.matmul_overhead_s == 2e-6 &&
      t.compute.matmul_table.at(0).seconds == 2e-3)
    d.push_back(CalibratedField::Matmuls);
  if (t.compute.elementwise.at("gelu").backward_s_per_element == 4e-9) d.push_back(CalibratedField::Elementwise);
  if (t.sync_wait.at(1).fraction == 0.4) d.push_back(CalibratedField::SyncWait);
  if (t.waiting_share.inter_node == 0.4) d.push_back(CalibratedField::WaitingShare);
  if (t.inter_node_bandwidth_bytes_per_s == 2e7 && t.intra_node_table.at(0).bytes_per_s == 4e8 &&
      t.intra_node_bandwidth_bytes_per_s == 2e8 && t.point_to_point.inter_node_bytes_per_s == 6e7)
    d.push_back(CalibratedField::Bandwidths);
  if (t.collective_latency_s == 2e-5 && t.intra_node_collective_latency_s == 6e-5)
    d.push_back(CalibratedField::Latency);
  return d;
}

TEST(CalibratedFields, EachGroupTakesOnlyItsOwnFieldsFromTheDonor) {
  const topo::Topology base = calibration(1), donor = calibration(2);
  EXPECT_TRUE(from_donor(base).empty());
  ASSERT_EQ(calibrated_fields().size(), 6u);
  for (CalibratedField f : calibrated_fields()) {
    const topo::Topology t = with_field_from(base, donor, f);
    EXPECT_EQ(from_donor(t), std::vector<CalibratedField>{f}) << field_name(f);
    EXPECT_EQ(t.name, "cal");
    EXPECT_EQ(t.collective_call_s, 1e-3);  // not a calibrated field: the base's
    EXPECT_EQ(t.cores_per_rank, 0.25);
  }
  EXPECT_STREQ(field_name(CalibratedField::SyncWait), "sync wait");
}

TEST(CalibratedFields, CalibrationsOfAnotherLayoutAreRefused) {
  topo::Topology other = calibration(2);
  other.gpus_per_node = 2, other.num_nodes = 4;
  try {
    with_field_from(calibration(1), other, CalibratedField::Latency);
    FAIL() << "a 4 x 2 donor for a 2 x 4 calibration was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[calibration-swap]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 nodes x 4 GPUs and one of 4 x 2"), std::string::npos) << e.what();
  }
}

TEST(CalibratedFields, PredictionsMoveByTheRootMeanSquareOfTheirLogRatios) {
  EXPECT_DOUBLE_EQ(rms_log_ratio({}, {}), 0.0);
  EXPECT_DOUBLE_EQ(rms_log_ratio({1, 2}, {1, 2}), 0.0);
  // ln(e) = 1 and ln(1) = 0: sqrt((1 + 0) / 2).
  EXPECT_NEAR(rms_log_ratio({1, 2}, {std::exp(1.0), 2}), std::sqrt(0.5), 1e-12);
  // Faster and slower by the same factor move alike.
  EXPECT_NEAR(rms_log_ratio({2, 2}, {1, 4}), std::log(2.0), 1e-12);
  EXPECT_THROW(rms_log_ratio({1, 2}, {1}), InternalError);
  EXPECT_THROW(rms_log_ratio({1}, {0}), InternalError);
}

}  // namespace
}  // namespace axonn::planner
