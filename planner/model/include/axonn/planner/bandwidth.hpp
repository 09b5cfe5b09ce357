// The bandwidth each process group sees (docs/model.md section 2).
//
// Placement-aware (the 4D paper's eq. 10): take the groups in placement order; for
// the group at level i, ip = product of the sizes of the groups placed inside it,
// p = its size, gpn = GPUs per node:
//     beta_i = beta_intra(ip, p)            if ip * p <= gpn   (the group stays in a node)
//            = beta_inter / min(gpn, ip)    otherwise          (ip rings share the NICs)
// Rule::Strict applies eq. 10 exactly (the paper, --comm-model paper). Rule::Straddle
// (--comm-model full) also treats a group as crossing nodes when gpn is not a multiple
// of ip*p, because then some copies of the group straddle a node boundary (e.g. groups
// of 3 on 4-GPU nodes); for powers of two the two rules agree.
// Placement-agnostic: every group gets beta_inter.
//
// Example (Perlmutter, gx=2, gy=2, gz=8, order x,y,z,pipe,data):
//   X: ip=1, p=2 -> beta_intra(1,2) = 76 GB/s;   Y: ip=2, p=2 -> beta_intra(2,2) = 76 GB/s
//   Z: ip=4, p=8 -> 59.52 / min(4, 4) = 14.88 GB/s
#pragma once

#include <array>

#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

enum class BandwidthRule { Strict, Straddle };

// Bandwidth (bytes/s) per axis, indexed by topo::Axis. An axis of size 1 gets +inf
// (it never communicates). For the pipeline axis it is the bandwidth of the
// point-to-point messages between neighbouring stages.
using AxisBandwidths = std::array<double, topo::kNumAxes>;
// The bandwidth of the group along `a`, bytes/s.
inline double axis_bandwidth(const AxisBandwidths& bw, topo::Axis a) { return bw[static_cast<int>(a)]; }

// Eq. 10 for one group: `ip` ranks between members, `p` members.
double group_bandwidth(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule);

AxisBandwidths placement_aware_bandwidths(const topo::Topology& t, const topo::Grid& g,
                                          const topo::PlacementOrder& order, BandwidthRule rule);
AxisBandwidths placement_agnostic_bandwidths(const topo::Topology& t, const topo::Grid& g);

// Bandwidth of one pipeline send between adjacent stages, bytes/s. With measured
// point-to-point bandwidths (calibrate): intra_node if the pipeline group stays in a
// node, else inter_node shared by the min(gpus_per_node, ip) pairs crossing the link
// at once (inter_node alone when placement-agnostic). Without them: `ring_bw`, the
// pipeline group's ring bandwidth.
double pipeline_p2p_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                              bool placement_aware, double ring_bw);

}  // namespace axonn::planner
