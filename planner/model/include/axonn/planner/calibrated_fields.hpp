// The quantities `axplan calibrate` measures, in groups, and a calibration with one group
// taken from another calibration of the same cluster (axplan calibration-swap;
// docs/validation.md "A second 4 x 2 sweep on the new machine, and what moves the
// predictions"). Two calibrations of one emulated cluster taken minutes apart can move
// a configuration's prediction by more than its runs move its measurement; swapping one
// group at a time says which measured quantity does it.
//
// The groups (Topology fields):
//   - matmuls: compute.matmul_table, matmul_flops_per_s, matmul_overhead_s;
//   - element-wise: compute.elementwise (seconds per element, by operation);
//   - sync wait: sync_wait (each group size's fraction);
//   - waiting share: waiting_share (inside a node, across nodes);
//   - bandwidths: the intra-node fallback and table, the inter-node bandwidth, the
//     point-to-point bandwidths;
//   - latency: collective_latency_s, intra_node_collective_latency_s.
// Everything else (name, layout, memory, peak FLOP/s, cores per rank, the per-call cost)
// stays the base's.
//
// Example:
//   Topology t = with_field_from(load_topology("e.json"), load_topology("c.json"), CalibratedField::SyncWait);
#pragma once

#include <vector>

#include "axonn/topology/topology.hpp"

namespace axonn::planner {

enum class CalibratedField { Matmuls, Elementwise, SyncWait, WaitingShare, Bandwidths, Latency };

// Every group, in the order above.
const std::vector<CalibratedField>& calibrated_fields();
// "matmuls", "element-wise", "sync wait", "waiting share", "bandwidths", "latency".
const char* field_name(CalibratedField f);

// `base` with group `f` taken from `donor`. InputError (module "calibration-swap") unless
// the two describe the same layout (GPUs per node, nodes).
topo::Topology with_field_from(const topo::Topology& base, const topo::Topology& donor, CalibratedField f);

// How far predictions `after` moved from `before` (equal lengths, positive): the root
// mean square over the entries of ln(after / before); 0 for none. A move of 0.05 is
// about 5% per entry.
double rms_log_ratio(const std::vector<double>& before, const std::vector<double>& after);

}  // namespace axonn::planner
