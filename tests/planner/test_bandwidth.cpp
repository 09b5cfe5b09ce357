// Placement-aware bandwidth (eq. 10, docs/model.md section 2) on the paper's examples.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "axonn/planner/bandwidth.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;
using topo::Axis;

namespace {
double at(const AxisBandwidths& bw, Axis a) { return axis_bandwidth(bw, a); }
const topo::Topology& perlmutter() {
  static topo::Topology t = topo::load_topology("perlmutter");
  return t;
}
}  // namespace

TEST(Bandwidth, EightGpusOnTwoNodesOfFour) {
  // Gx=Gy=Gz=2 on 2 x 4 GPUs: X (ip=1,p=2) and Y (ip=2,p=2) stay in a node,
  // Z (ip=4,p=2) crosses nodes with 4 rings sharing the NICs: 59.52/4 GB/s.
  auto bw = placement_aware_bandwidths(perlmutter(), topo::Grid{2, 2, 2, 1, 1}, topo::default_order(),
                                       BandwidthRule::Strict);
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 76e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Y), 76e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Z), 59.52e9 / 4);
  EXPECT_TRUE(std::isinf(at(bw, Axis::Data)));
  EXPECT_TRUE(std::isinf(at(bw, Axis::Pipe)));
}

TEST(Bandwidth, OneGroupOfEightAcrossTwoNodesGetsTheWholeLink) {
  // Fig. 5: a single ring over 8 GPUs (ip = 1): beta = beta_inter.
  auto bw = placement_aware_bandwidths(perlmutter(), topo::Grid{8, 1, 1, 1, 1}, topo::default_order(),
                                       BandwidthRule::Strict);
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 59.52e9);
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 1, 8, BandwidthRule::Strict), 59.52e9);
}

TEST(Bandwidth, TwoSimultaneousRingsShareTheInterNodeLink) {
  // Fig. 6: Gx=2, Gy=4 on 2 x 4 GPUs: two Y rings (ip = 2) cross the nodes at once.
  auto bw = placement_aware_bandwidths(perlmutter(), topo::Grid{2, 4, 1, 1, 1}, topo::default_order(),
                                       BandwidthRule::Strict);
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 76e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Y), 59.52e9 / 2);
}

TEST(Bandwidth, SharingIsBoundedByGpusPerNode) {
  // ip = 16 rings cannot share more than gpn = 4 ways.
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 16, 2, BandwidthRule::Strict), 59.52e9 / 4);
}

TEST(Bandwidth, IntraNodeTableAndFallback) {
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 1, 4, BandwidthRule::Strict), 225e9);
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 1, 3, BandwidthRule::Strict), 76e9);  // fallback
  auto frontier = topo::load_topology("frontier");
  auto bw = placement_aware_bandwidths(frontier, topo::Grid{2, 2, 2, 1, 1}, topo::default_order(),
                                       BandwidthRule::Strict);
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 129e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Y), 50e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Z), 36e9);
}

TEST(Bandwidth, StraddleRuleCatchesGroupsThatCrossNodeBoundaries) {
  // Groups of 3 on 4-GPU nodes: ranks 3,4,5 span two nodes. Eq. 10 says intra;
  // the straddle rule says inter.
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 1, 3, BandwidthRule::Strict), 76e9);
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 1, 3, BandwidthRule::Straddle), 59.52e9);
  // Powers of two: both rules agree.
  EXPECT_DOUBLE_EQ(group_bandwidth(perlmutter(), 2, 2, BandwidthRule::Straddle), 76e9);
}

TEST(Bandwidth, PlacementOrderChangesWhichGroupCrossesNodes) {
  // Same grid, Z innermost: Z (ip=1,p=2) in a node, X (ip=2,p=2) in a node, Y (ip=4) crosses.
  auto order = topo::parse_order("z,x,y,pipe,data", "test", "order");
  auto bw = placement_aware_bandwidths(perlmutter(), topo::Grid{2, 2, 2, 1, 1}, order, BandwidthRule::Strict);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Z), 76e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 76e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Y), 59.52e9 / 4);
}

TEST(Bandwidth, AgnosticUsesOneBandwidth) {
  auto bw = placement_agnostic_bandwidths(perlmutter(), topo::Grid{2, 2, 2, 1, 1});
  EXPECT_DOUBLE_EQ(at(bw, Axis::X), 59.52e9);
  EXPECT_DOUBLE_EQ(at(bw, Axis::Z), 59.52e9);
  EXPECT_TRUE(std::isinf(at(bw, Axis::Data)));
}

TEST(Bandwidth, RingsOfOtherPipelineStagesOnTheLink) {
  auto seq = [](int64_t t, int64_t gdata, int64_t ginter) {
    topo::Grid g{1, 1, 1, gdata, ginter};
    g.sequence = t;
    return g;
  };
  // The sequence group's rings: the data axis's `sequence` innermost members.
  auto rings = [](const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& o) {
    return stages_sharing_data_link(t, g, o, g.sequence);
  };
  topo::Topology four_by_two = perlmutter();
  four_by_two.gpus_per_node = 2;
  // 4 nodes of 2, grid 1,1,1,4,2, sequence 2: each node holds both stages of one data
  // member, and its two rings, one per stage, cross its link.
  EXPECT_EQ(rings(four_by_two, seq(2, 4, 2), topo::default_order()), 2);
  // 2 nodes of 4, grid 1,1,1,2,4: the 4 stages of a data member on each node.
  EXPECT_EQ(rings(perlmutter(), seq(2, 2, 4), topo::default_order()), 4);
  // 4 nodes of 2, grid 1,1,1,2,4: a node holds 2 of a data member's 4 stages.
  EXPECT_EQ(rings(four_by_two, seq(2, 2, 4), topo::default_order()), 2);
  // The pipeline placed outside the data axis: a ring of 8 crosses two nodes of 4, and
  // the rings on a link are one stage's.
  const auto data_inside = topo::parse_order("x,y,z,data,pipe", "test", "order");
  EXPECT_EQ(rings(perlmutter(), seq(8, 8, 2), data_inside), 1);
  // No pipeline; a ring inside a node (1,1,1,2,2 on nodes of 4: ip * t = 4).
  EXPECT_EQ(rings(perlmutter(), seq(4, 8, 1), topo::default_order()), 1);
  EXPECT_EQ(rings(perlmutter(), seq(2, 2, 2), topo::default_order()), 1);
  // Not a sequence grid.
  EXPECT_EQ(rings(four_by_two, topo::Grid{1, 1, 1, 4, 2}, topo::default_order()), 1);
  // The data all-reduce's rings, over all of the data axis: 4 nodes of 2, grid
  // 1,1,1,4,2: each node holds both stages of one data member; 2 nodes of 4, grid
  // 1,1,1,2,4: all 4 stages of one; the data axis inside the pipeline: one stage's.
  EXPECT_EQ(stages_sharing_data_link(four_by_two, topo::Grid{1, 1, 1, 4, 2}, topo::default_order(), 4), 2);
  EXPECT_EQ(stages_sharing_data_link(perlmutter(), topo::Grid{1, 1, 1, 2, 4}, topo::default_order(), 2), 4);
  EXPECT_EQ(stages_sharing_data_link(perlmutter(), topo::Grid{1, 1, 1, 2, 4}, data_inside, 2), 1);
  // A data group inside a node: no link.
  EXPECT_EQ(stages_sharing_data_link(perlmutter(), topo::Grid{1, 1, 1, 2, 2}, topo::default_order(), 2), 1);
  // Nodes that do not hold blocks of stages keep eq. 10's count. 6 GPUs per node, grid
  // 2,1,1,3,4 (stages of 2 ranks, 8 ranks from stage 0 to 3): node 0 holds stages 0-2
  // of data member 0, node 1 stage 3 of it and stages 0-1 of the next.
  topo::Topology six = perlmutter();
  six.gpus_per_node = 6;
  EXPECT_EQ(stages_sharing_data_link(six, topo::Grid{2, 1, 1, 3, 4}, topo::default_order(), 3), 1);
  // On the same nodes, 3 stages of one rank: every node holds stages 0-2 twice.
  EXPECT_EQ(stages_sharing_data_link(six, topo::Grid{1, 1, 1, 4, 3}, topo::default_order(), 4), 3);
  // 3 stages on nodes of 2 (order x,pipe,y,data): node 1 holds stage 2 of one pipeline
  // and stage 0 of the next.
  const auto pipe_then_y = topo::parse_order("x,pipe,y,z,data", "test", "order");
  EXPECT_EQ(stages_sharing_data_link(four_by_two, topo::Grid{1, 2, 1, 2, 3}, pipe_then_y, 2), 1);
  // With 2 stages it tiles: each node holds stages 0 and 1 of one y coordinate.
  EXPECT_EQ(stages_sharing_data_link(four_by_two, topo::Grid{1, 2, 1, 2, 2}, pipe_then_y, 2), 2);
}

TEST(Bandwidth, FlowsShareALinkWhileTheyOverlap) {
  auto ends = [](std::vector<double> start, std::vector<double> alone) {
    std::vector<double> end(start.size(), -1.0);
    shared_link_ends(start.data(), alone.data(), start.size(), end.data());
    return end;
  };
  // The header's example: alone until 1 s, then at half rate: both end at 3 s.
  auto e = ends({0.0, 1.0}, {2.0, 1.0});
  EXPECT_DOUBLE_EQ(e[0], 3.0);
  EXPECT_DOUBLE_EQ(e[1], 3.0);
  // Together from the start (eq. 10's case): n flows of a each end at n a.
  e = ends({0.0, 0.0, 0.0, 0.0}, {0.25, 0.25, 0.25, 0.25});
  for (double x : e) EXPECT_DOUBLE_EQ(x, 1.0);
  // Apart: each alone.
  e = ends({0.0, 5.0}, {1.0, 2.0});
  EXPECT_DOUBLE_EQ(e[0], 1.0);
  EXPECT_DOUBLE_EQ(e[1], 7.0);
  // Staggered like a pipeline's tails (the last stage first): 3 flows of 1 s starting
  // 0.5 s apart, by hand:
  //   0.0-0.5: {2}          flow 2 -> 0.5 left
  //   0.5-1.0: {2, 1}       flow 2 -> 0.25, flow 1 -> 0.75
  //   1.0-1.75: {2, 1, 0}   flow 2 ends at 1.75; flows 1, 0 -> 0.5, 0.75
  //   1.75-2.75: {1, 0}     flow 1 ends at 2.75; flow 0 -> 0.25
  //   2.75-3.0: {0}         flow 0 ends at 3.0
  e = ends({1.0, 0.5, 0.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(e[2], 1.75, 1e-12);
  EXPECT_NEAR(e[1], 2.75, 1e-12);
  EXPECT_NEAR(e[0], 3.0, 1e-12);
  // (The link is busy from 0 to 3 s: three flows of 1 s.) A flow of no work ends at its start, and does not slow the others.
  e = ends({0.0, 0.5}, {1.0, 0.0});
  EXPECT_DOUBLE_EQ(e[0], 1.0);
  EXPECT_DOUBLE_EQ(e[1], 0.5);
}

TEST(Bandwidth, AStaggeredRingRunsBetweenAloneAndEveryRingAtOnce) {
  // R = a (1 + k R / (R + rest)): with a = 1, one other ring (k = 1) and rest = 1,
  // R = (1 + sqrt 5) / 2, the golden ratio.
  const double r = staggered_ring_s(1.0, 1.0, 1.0);
  EXPECT_NEAR(r, (1.0 + std::sqrt(5.0)) / 2.0, 1e-12);
  EXPECT_NEAR(r, 1.0 * (1.0 + r / (r + 1.0)), 1e-12);  // the fixed point
  // Nothing else to do: 3 other stages' rings always on the link (eq. 10's 4 rings).
  EXPECT_NEAR(staggered_ring_s(0.3, 3.0, 0.0), 4 * 0.3, 1e-12);
  // Mostly compute: the other rings are rarely there.
  EXPECT_NEAR(staggered_ring_s(0.3, 3.0, 1e9), 0.3, 1e-6);
  // Compute that dwarfs the ring by 19 orders of magnitude: still the ring alone (the
  // textbook root cancels to 0 there), and infinite compute too.
  EXPECT_NEAR(staggered_ring_s(1e-4, 3.0, 1e15) / 1e-4, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(staggered_ring_s(1e-4, 3.0, std::numeric_limits<double>::infinity()), 1e-4);
  // No other ring, or no ring: unchanged.
  EXPECT_DOUBLE_EQ(staggered_ring_s(0.3, 0.0, 1.0), 0.3);
  EXPECT_DOUBLE_EQ(staggered_ring_s(0.0, 3.0, 1.0), 0.0);
  // It grows with the other rings and falls with the compute between transfers.
  EXPECT_LT(staggered_ring_s(0.3, 1.0, 1.0), staggered_ring_s(0.3, 3.0, 1.0));
  EXPECT_GT(staggered_ring_s(0.3, 3.0, 1.0), staggered_ring_s(0.3, 3.0, 2.0));
}

TEST(Bandwidth, OutOfStepRingsAreOnTheLinkForTheirShareOfThePasses) {
  // The header's example: transfers 1 s alone, 2 other rings, rest 2 s: R = 2 s,
  // d = R / (R + rest) = 0.5, and R = alone (1 + others d).
  EXPECT_NEAR(out_of_step_share(1.0, 2.0, 2.0), 0.5, 1e-12);
  // The fixed point for any input: R = a (1 + k d) with d = R / (R + rest).
  for (const auto& [a, k, rest] : std::vector<std::tuple<double, double, double>>{
           {0.2, 3.0, 1.5}, {1.0, 1.0, 0.1}, {0.01, 3.0, 10.0}}) {
    const double d = out_of_step_share(a, k, rest), r = a * (1.0 + k * d);
    EXPECT_GT(d, 0.0);
    EXPECT_LT(d, 1.0);
    EXPECT_NEAR(d, r / (r + rest), 1e-12) << a << " " << k << " " << rest;
  }
  // Nothing else in the passes: the rings are always on the link (eq. 10).
  EXPECT_DOUBLE_EQ(out_of_step_share(1.0, 3.0, 0.0), 1.0);
  // No other ring, or nothing to move: eq. 10 stands (the share does not matter).
  EXPECT_DOUBLE_EQ(out_of_step_share(1.0, 0.0, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(out_of_step_share(0.0, 3.0, 2.0), 1.0);
  // More compute between the transfers: the other rings are there less often.
  EXPECT_GT(out_of_step_share(1.0, 3.0, 1.0), out_of_step_share(1.0, 3.0, 5.0));
}

TEST(Bandwidth, APipelineBoundaryCrossesTheLinkOnlyWhereANodeEnds) {
  topo::Topology t = perlmutter();  // 4 GPUs per node
  t.point_to_point = {4e9, 2e7};
  const auto order = topo::default_order();
  const double intra = 4e9, ring = 1e9;
  auto bw = [&](const topo::Topology& top, const topo::Grid& g, int64_t b, bool aware = true) {
    return pipeline_p2p_bandwidth(top, g, order, aware, ring, b);
  };
  // 2 nodes of 4, grid 1,2,1,1,4: stages 0-1 on node 0, 2-3 on node 1. Only boundary 1
  // crosses, its 2 pairs sharing the link.
  const topo::Grid y2_pipe4{1, 2, 1, 1, 4};
  EXPECT_DOUBLE_EQ(bw(t, y2_pipe4, 0), intra);
  EXPECT_DOUBLE_EQ(bw(t, y2_pipe4, 1), 2e7 / 2);
  EXPECT_DOUBLE_EQ(bw(t, y2_pipe4, 2), intra);
  // Placement-agnostic: every boundary at the inter-node rate.
  EXPECT_DOUBLE_EQ(bw(t, y2_pipe4, 0, false), 2e7);
  // 4 nodes of 2: a stage per node, every boundary crosses.
  topo::Topology four_by_two = t;
  four_by_two.gpus_per_node = 2;
  for (int64_t b = 0; b < 3; ++b) EXPECT_DOUBLE_EQ(bw(four_by_two, y2_pipe4, b), 2e7 / 2) << b;
  // A pipeline of 8 single-rank stages on 2 nodes of 4: boundary 3 alone crosses, alone
  // on the link.
  const topo::Grid pipe8{1, 1, 1, 1, 8};
  for (int64_t b = 0; b < 7; ++b) EXPECT_DOUBLE_EQ(bw(t, pipe8, b), b == 3 ? 2e7 : intra) << b;
  // Whole pipelines inside a node (1,1,1,4,2: two per node): never crosses.
  EXPECT_DOUBLE_EQ(bw(t, topo::Grid{1, 1, 1, 4, 2}, 0), intra);
  // Nodes of 6, grid 1,2,1,3,2: 3 stages per node; replica 1's stages (ranks 4-5, 6-7)
  // straddle the end of node 0, so boundary 0 crosses for it.
  topo::Topology six = t;
  six.gpus_per_node = 6;
  EXPECT_DOUBLE_EQ(bw(six, topo::Grid{1, 2, 1, 3, 2}, 0), 2e7 / 2);
  // A stage wider than a node (1,8,1,1,2 on nodes of 4): crosses, 4 pairs on the link.
  EXPECT_DOUBLE_EQ(bw(t, topo::Grid{1, 8, 1, 1, 2}, 0), 2e7 / 4);
  // No measured point-to-point bandwidths: the pipeline group's ring bandwidth.
  EXPECT_DOUBLE_EQ(bw(perlmutter(), y2_pipe4, 0), ring);
}

TEST(Bandwidth, MembersOfEachGroupOnANode) {
  topo::Topology t = perlmutter();  // 4 GPUs per node
  const auto order = topo::default_order();
  auto m = members_per_node(t, topo::Grid{1, 1, 8, 1, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::Z)], 4);
  m = members_per_node(t, topo::Grid{1, 2, 4, 1, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::Y)], 2);  // inside a node: the whole group
  EXPECT_EQ(m[static_cast<int>(Axis::Z)], 2);  // ip = 2: 2 of its 4 on each node
  m = members_per_node(t, topo::Grid{2, 2, 2, 1, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::Z)], 1);  // ip = 4: one per node
  EXPECT_EQ(m[static_cast<int>(Axis::Data)], 1);
  // Nodes of 6 (Summit): groups of 4 consecutive ranks split 4 + 0 or 2 + 2, the latter
  // the busier link; groups of 8 split 6 + 2 or 4 + 4.
  const topo::Topology summit = topo::load_topology("summit");
  ASSERT_EQ(summit.gpus_per_node, 6);
  m = members_per_node(summit, topo::Grid{4, 1, 1, 3, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::X)], 2);
  m = members_per_node(summit, topo::Grid{8, 1, 1, 3, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::X)], 4);
  m = members_per_node(summit, topo::Grid{2, 1, 1, 3, 1}, order, BandwidthRule::Straddle);
  EXPECT_EQ(m[static_cast<int>(Axis::X)], 2);  // 2 divides 6: inside
}

TEST(Latency, GroupsInsideANodePayTheIntraNodeLatency) {
  // 2 x 4 GPUs, 2 ms per ring step inside a node, 1 ms across: grid 2,2,2 puts X
  // (ip p = 2) and Y (4) inside a node and Z (8) across; the agnostic model puts
  // every group across.
  topo::Topology t = perlmutter();
  t.collective_latency_s = 1e-3;
  t.intra_node_collective_latency_s = 2e-3;
  const topo::Grid g{2, 2, 2, 1, 1};
  const AxisLatencies aware = placement_aware_latencies(t, g, topo::default_order(), BandwidthRule::Straddle);
  EXPECT_DOUBLE_EQ(axis_latency(aware, Axis::X), 2e-3);
  EXPECT_DOUBLE_EQ(axis_latency(aware, Axis::Y), 2e-3);
  EXPECT_DOUBLE_EQ(axis_latency(aware, Axis::Z), 1e-3);
  // Z innermost: Z (ip p = 2) inside, X (4) inside, Y (8) across.
  const AxisLatencies z_first = placement_aware_latencies(
      t, g, topo::parse_order("z,x,y,pipe,data", "test", "order"), BandwidthRule::Straddle);
  EXPECT_DOUBLE_EQ(axis_latency(z_first, Axis::Z), 2e-3);
  EXPECT_DOUBLE_EQ(axis_latency(z_first, Axis::Y), 1e-3);
  for (double l : placement_agnostic_latencies(t)) EXPECT_DOUBLE_EQ(l, 1e-3);
  // Without an intra-node latency, one latency for every group.
  t.intra_node_collective_latency_s = -1;
  for (double l : placement_aware_latencies(t, g, topo::default_order(), BandwidthRule::Straddle))
    EXPECT_DOUBLE_EQ(l, 1e-3);
}
