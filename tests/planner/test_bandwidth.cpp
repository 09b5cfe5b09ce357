// Placement-aware bandwidth (eq. 10, docs/model.md section 2) on the paper's examples.
#include <gtest/gtest.h>

#include <cmath>

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
