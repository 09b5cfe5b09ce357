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

// Whether eq. 10 keeps a group of `p` members `ip` ranks apart inside one node
// (Rule::Straddle: also gpus_per_node a multiple of ip p).
bool group_inside_node(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule);

// Eq. 10 for one group: `ip` ranks between members, `p` members.
double group_bandwidth(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule);
// Its latency per ring step, seconds: the topology's intra-node latency where the group
// stays inside a node (group_inside_node), its across-node one otherwise.
double group_latency(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule);

AxisBandwidths placement_aware_bandwidths(const topo::Topology& t, const topo::Grid& g,
                                          const topo::PlacementOrder& order, BandwidthRule rule);
AxisBandwidths placement_agnostic_bandwidths(const topo::Topology& t, const topo::Grid& g);

// Latency (alpha) per ring step of each axis's group, seconds, indexed by topo::Axis
// (docs/model.md section 1): the topology's intra-node latency where eq. 10 keeps the
// group inside a node (group_inside_node), its across-node latency otherwise; the
// placement-agnostic model puts every group across nodes. One latency for every group
// where the topology has no intra-node one.
// Example (2 nodes of 4, intra 2 ms, across 1 ms, grid 2,2,2,1,1, order x,y,z,pipe,data):
//   X, Y: 2e-3 (ip p = 2, 4);  Z: 1e-3 (ip p = 8)
using AxisLatencies = std::array<double, topo::kNumAxes>;
inline double axis_latency(const AxisLatencies& l, topo::Axis a) { return l[static_cast<int>(a)]; }
AxisLatencies placement_aware_latencies(const topo::Topology& t, const topo::Grid& g,
                                        const topo::PlacementOrder& order, BandwidthRule rule);
AxisLatencies placement_agnostic_latencies(const topo::Topology& t);

// The members of each axis's group that share a node (placement-aware): the group's
// size where `rule` keeps it inside a node, else min(p, gpn / ip) where ip divides the
// node (and ip p divides it or spans whole nodes), else, for groups that split unevenly
// (e.g. 4 consecutive ranks on nodes of 6: 2 + 2), the node share with the most link
// traffic, m (p - m), over the groups. What a linear all-gather's link volume depends on
// (collectives.hpp).
// Example (2 nodes of 4, grid 1,1,8,1,1): Z has 4 members per node; grid 1,2,4,1,1: 2.
std::array<int64_t, topo::kNumAxes> members_per_node(const topo::Topology& t, const topo::Grid& g,
                                                     const topo::PlacementOrder& order, BandwidthRule rule);

// The pipeline stages whose rings over the data axis's `members` innermost members (the
// sequence group's ring self-attention: `g.sequence`; the data-parallel all-reduce:
// `g.gdata`) share one node's link: eq. 10 puts min(gpn, ip) rings on it, and where the
// pipeline axis is placed inside the data axis those belong to `stages` different
// stages, min(gpn, ip) / stages of each, consecutive stages in blocks of `stages`. 1
// where the group stays in a node, the pipeline axis is placed outside the data axis,
// or the nodes do not hold such blocks (a node boundary inside a stage's ranks, or
// nodes holding different mixes of stages: eq. 10's count then stands). (Placement-
// aware, the straddle rule.)
// Example (4 nodes of 2, grid 1,1,1,4,2 with sequence 2, order x,y,z,pipe,data): the
// ring joins data members 0 and 1, on nodes 0 and 1; each node holds stage 0 and
// stage 1 of its data member: 2 rings share its link, one per stage: 2.
int64_t stages_sharing_data_link(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                                 int64_t members);

// The rings a tensor axis's groups put on one node's link, and how many of them run in
// step with each other (placement-aware, the straddle rule; docs/model.md section 2,
// "Tensor rings out of step"). Eq. 10 counts `rings` = min(gpn, ip) on the link where the
// groups cross nodes. The groups that differ from this one only in the coordinates of
// tensor axes placed inside it are the same stage's and replica's: the layers'
// collectives over those axes join them again and again, so their rings run in step
// (`in_step`, this one's included). The groups that differ in a pipeline or data
// coordinate (an order placing those axes inside this one) are joined by nothing inside
// the passes; on time-sliced ranks they drift apart. Of the node's `rings` consecutive
// positions of the inner axes, `in_step` is the tensor axes' part; it divides `rings`;
// both are 1 for a group inside a node or of one member.
// Examples (4 nodes of 2): grid 1,2,2,2,1, order x,y,z,pipe,data: Z crosses nodes with
// 2 rings per link, both in step (the Y pair beside it); order data,x,y,z,pipe with
// grid 1,1,2,2,1: Z's 2 rings belong to the two replicas, 1 in step. (Nodes of 4, order
// data,x,y,z,pipe, grid 2,1,2,2,1: 4 rings, 2 replicas' X pairs, 2 in step.)
struct LinkRings {
  int64_t rings = 1;    // eq. 10's count, min(gpn, ip)
  int64_t in_step = 1;  // those joined to this group by inner tensor axes, itself included
  int64_t blocks() const { return rings / in_step; }  // groups of rings that drift apart
};
LinkRings tensor_rings_on_link(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                               topo::Axis a);

// The time of a ring's transfers on a link that rings of other pipeline stages also
// cross (docs/model.md section 13), seconds. `alone_s`: their time with the link shared
// only by the rings of their own stage, which run in lockstep with them (the shifts'
// latency apart). The other stages run alike but not in step: each keeps the link busy
// for the fraction d = R / (R + rest_s) of the time it runs its passes, R being the
// transfers' time and `rest_s` the rest of those passes (compute, latency, fixed costs). `others`: the other stages' rings
// on the link, each weighted by the share of the step its stage runs its passes
// (the pipeline's fill and drain excluded). The link then carries on average
// 1 + others d rings per ring of the stage:
//     R = alone_s * (1 + others * R / (R + rest_s))
// whose positive root, with a = alone_s and k = others, is
//     R = (a (1 + k) - rest_s + sqrt((rest_s - a (1 + k))^2 + 4 a rest_s)) / 2
// It runs from alone_s (rest_s >> R: the other rings are rarely on the link) to
// (1 + others) alone_s (rest_s = 0: with others = stages - 1, eq. 10's every ring at
// once).
double staggered_ring_s(double alone_s, double others, double rest_s);

// The share of the time that the other rings on a link, out of step with one tensor
// group's (time-sliced ranks; docs/model.md section 2, "Tensor rings out of step"), are
// on it: d = R / (R + rest_s), R = staggered_ring_s(alone_s, others, rest_s).
// `alone_s`: the group's transfers in a micro-batch's passes with the link to
// themselves (no latency); `others`: eq. 10's other rings on the link; `rest_s`: the
// rest of those passes (latency included). A collective of the group then takes
// alone + d (eq10 - alone), its transfers R in all. 1 (eq. 10) when nothing else is in
// the passes, or nothing is shared.
// Example: transfers 1 s alone, 2 other rings, rest 2 s: R = 2 s, d = 0.5.
double out_of_step_share(double alone_s, double others, double rest_s);

// Flows on one link that share it equally while they overlap (processor sharing;
// docs/model.md section 10): flow i starts at start_s[i] and would take alone_s[i]
// with the link to itself; with n flows on the link each moves at 1/n of that rate.
// Writes each flow's end to end_s[i], seconds. A flow of no work ends at its start.
// Example: flows (0 s, 2 s) and (1 s, 1 s): alone until 1 s, then halves: the second
// ends at 3 s, the first with 0 s left at 3 s too: ends 3 s and 3 s.
void shared_link_ends(const double* start_s, const double* alone_s, size_t n, double* end_s);

// Bandwidth of one pipeline send across `boundary` (between stages boundary and
// boundary + 1), bytes/s. With measured point-to-point bandwidths (calibrate):
// intra_node where every pair of ranks on that boundary shares a node, else inter_node
// shared by the min(gpus_per_node, ip) pairs crossing the link at once (inter_node alone
// when placement-agnostic). Without them: `ring_bw`, the pipeline group's ring
// bandwidth. Stage s holds the ranks i + ip (s + Ginter o) (i < ip: the axes placed
// inside the pipeline, o: those outside it). Where a node holds whole stages (ip divides
// gpus_per_node), a boundary crosses only where a node ends; where a stage spans whole
// nodes, every boundary crosses; other shapes count as crossing.
// Example: 2 nodes of 4, ip = 2, 4 stages: stages 0-1 and 2-3 share nodes, so
// boundaries 0 and 2 are intra_node and boundary 1 is inter_node / 2.
double pipeline_p2p_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                              bool placement_aware, double ring_bw, int64_t boundary);

// Whether pipeline boundary `boundary` (between stages b and b + 1) crosses a node, by
// pipeline_p2p_bandwidth's placement rule above (every boundary where a stage spans
// whole nodes or straddles them).
bool pipeline_boundary_crosses_nodes(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                                     int64_t boundary);

// One-way bandwidth of a broadcast or a reduce over the group of axis `a` (SUMMA's
// steps in the 2d-broadcast layout), bytes/s. A step's root sends its block down a
// chain, each link carrying it one way, while a ring's collectives load both ways of
// every link at once. With measured point-to-point bandwidths (calibrate's one-way
// times): intra_node where the group stays in a node, else inter_node shared by the
// min(gpus_per_node, ip) groups whose step roots send through one node's link at once
// (inter_node alone when placement-agnostic). Without them: `ring_bw`, the group's ring
// bandwidth, which on a full-duplex link is its one-way rate. Where every flow shares
// one capacity (the loopback emulator of tools/limited_network.sh) a ring's calibrated
// bandwidth is that capacity over its concurrent flows (a quarter on 4 ranks), so the
// distinction matters there.
// Example: 2 nodes of 2, grid 1,2,2 (2d-broadcast), measured inter_node 50 MB/s: Y
// (ip 1) stays in a node (intra_node); Z (ip 2) crosses, 2 groups' roots at once: 25 MB/s.
double one_way_group_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                               bool placement_aware, double ring_bw, topo::Axis a);

}  // namespace axonn::planner
