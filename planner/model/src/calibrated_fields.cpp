// Groups of calibrated fields, swapped between calibrations; see
// axonn/planner/calibrated_fields.hpp.
#include "axonn/planner/calibrated_fields.hpp"

#include <cmath>

#include <fmt/format.h>

#include "axonn/common/error.hpp"

namespace axonn::planner {

const std::vector<CalibratedField>& calibrated_fields() {
  static const std::vector<CalibratedField> all = {CalibratedField::Matmuls,      CalibratedField::Elementwise,
                                                   CalibratedField::SyncWait,     CalibratedField::WaitingShare,
                                                   CalibratedField::Bandwidths,   CalibratedField::Latency};
  return all;
}

const char* field_name(CalibratedField f) {
  switch (f) {
    case CalibratedField::Matmuls: return "matmuls";
    case CalibratedField::Elementwise: return "element-wise";
    case CalibratedField::SyncWait: return "sync wait";
    case CalibratedField::WaitingShare: return "waiting share";
    case CalibratedField::Bandwidths: return "bandwidths";
    case CalibratedField::Latency: return "latency";
  }
  throw InternalError("calibration-swap", "an unknown field group", "field_name", "a CalibratedField");
}

namespace {

void copy_matmuls(const topo::ComputeThroughput& from, topo::ComputeThroughput& to) {
  to.matmul_table = from.matmul_table;
  to.matmul_flops_per_s = from.matmul_flops_per_s;
  to.matmul_overhead_s = from.matmul_overhead_s;
}

}  // namespace

topo::Topology with_field_from(const topo::Topology& base, const topo::Topology& donor, CalibratedField f) {
  if (base.gpus_per_node != donor.gpus_per_node || base.num_nodes != donor.num_nodes)
    throw InputError("calibration-swap",
                     fmt::format("a calibration of {} nodes x {} GPUs and one of {} x {}", base.num_nodes,
                                 base.gpus_per_node, donor.num_nodes, donor.gpus_per_node),
                     "gpus_per_node, num_nodes", "two calibrations of the same cluster");
  topo::Topology t = base;
  switch (f) {
    case CalibratedField::Matmuls:  // in each dtype the donor timed
      copy_matmuls(donor.compute, t.compute);
      if (donor.compute_bf16 && t.compute_bf16) copy_matmuls(*donor.compute_bf16, *t.compute_bf16);
      break;
    case CalibratedField::Elementwise:
      t.compute.elementwise = donor.compute.elementwise;
      if (donor.compute_bf16 && t.compute_bf16) t.compute_bf16->elementwise = donor.compute_bf16->elementwise;
      break;
    case CalibratedField::SyncWait: t.sync_wait = donor.sync_wait; break;
    case CalibratedField::WaitingShare: t.waiting_share = donor.waiting_share; break;
    case CalibratedField::Bandwidths:
      t.intra_node_bandwidth_bytes_per_s = donor.intra_node_bandwidth_bytes_per_s;
      t.intra_node_table = donor.intra_node_table;
      t.inter_node_bandwidth_bytes_per_s = donor.inter_node_bandwidth_bytes_per_s;
      t.point_to_point = donor.point_to_point;
      break;
    case CalibratedField::Latency:
      t.collective_latency_s = donor.collective_latency_s;
      t.intra_node_collective_latency_s = donor.intra_node_collective_latency_s;
      break;
  }
  return t;
}

double rms_log_ratio(const std::vector<double>& before, const std::vector<double>& after) {
  if (before.size() != after.size())
    throw InternalError("calibration-swap", fmt::format("{} and {} predictions", before.size(), after.size()),
                        "rms_log_ratio", "as many after as before");
  if (before.empty()) return 0.0;
  double sum = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (!(before[i] > 0) || !(after[i] > 0))
      throw InternalError("calibration-swap", fmt::format("prediction {} is {} and {}", i, before[i], after[i]),
                          "rms_log_ratio", "positive times");
    const double l = std::log(after[i] / before[i]);
    sum += l * l;
  }
  return std::sqrt(sum / static_cast<double>(before.size()));
}

}  // namespace axonn::planner
