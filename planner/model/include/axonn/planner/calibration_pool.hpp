// Several calibrations of one cluster pooled into one topology (axplan pool-calibrations;
// docs/validation.md "The model's own error, over every sweep"): every measured quantity
// the median of the calibrations that measured it.
//
// On ranks that share cores one calibration moves each configuration's prediction by
// 5-7% (the same model, calibrations hours apart), and that noise does not follow the
// machine's speed during a later sweep but adds to the error. The median of several
// calibrations keeps what they agree on.
//
// Pooled, each by its key where it has one (median over the calibrations that have the
// key; std::median of two is their mean):
//   - the intra-node fallback and each (ip, p) entry of the intra-node table, the
//     inter-node bandwidth, the collective latency;
//   - point-to-point inside and across nodes (over the calibrations that measured it,
//     non-zero);
//   - compute: the matmul rate (non-zero) and overhead, each measured shape's seconds
//     by (m, k, n, batch), each element-wise operation's forward and backward;
//   - each group size's sync-wait fraction.
// Taken from the first and required equal in all (else InputError naming the source and
// the field, module "pool-calibrations"): GPUs per node, nodes, GPU memory, peak FLOP/s,
// cores per rank, the non-blocking all-gather's algorithm. The host link, the memory
// bandwidth and the per-call cost come from the first.
//
// Example:
//   Topology t = pooled_calibration({load_topology("a.json"), load_topology("b.json")},
//                                   {"a.json", "b.json"}, "pooled");
#pragma once

#include <string>
#include <vector>

#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// `sources` names each topology in errors and in the description (same length); two or more.
topo::Topology pooled_calibration(const std::vector<topo::Topology>& calibrations,
                                  const std::vector<std::string>& sources, const std::string& name);

}  // namespace axonn::planner
