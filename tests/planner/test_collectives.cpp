// Ring collective formulas (docs/model.md section 1) against hand-computed values.
#include <gtest/gtest.h>

#include "axonn/planner/collectives.hpp"

using namespace axonn::planner;

TEST(Collectives, AllGatherAndReduceScatterAreOneRingPass) {
  // (p-1)/p * B / beta = 3/4 * 1e9 / 100e9 = 7.5 ms
  EXPECT_DOUBLE_EQ(ring_all_gather_s(4, 1e9, 100e9), 7.5e-3);
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(4, 1e9, 100e9), 7.5e-3);
  // p = 2: 1/2 * 2e6 / 1e9 = 1 ms
  EXPECT_DOUBLE_EQ(ring_all_gather_s(2, 2e6, 1e9), 1e-3);
}

TEST(Collectives, AllReduceIsTwoRingPasses) {
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(4, 1e9, 100e9), 1.5e-2);
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(8, 8e6, 7e9), 2.0 * 7.0 / 8.0 * 8e6 / 7e9);
}

TEST(Collectives, GroupOfOneCostsNothing) {
  EXPECT_EQ(ring_all_gather_s(1, 1e9, 1e9, 1.0), 0.0);
  EXPECT_EQ(ring_reduce_scatter_s(1, 1e9, 1e9, 1.0), 0.0);
  EXPECT_EQ(ring_all_reduce_s(1, 1e9, 1e9, 1.0), 0.0);
}

TEST(Collectives, LatencyIsPaidPerRingStep) {
  // 3 steps of 10 us on top of 7.5 ms; the all-reduce pays twice.
  EXPECT_DOUBLE_EQ(ring_all_gather_s(4, 1e9, 100e9, 1e-5), 7.5e-3 + 3e-5);
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(4, 1e9, 100e9, 1e-5), 1.5e-2 + 6e-5);
  EXPECT_DOUBLE_EQ(point_to_point_s(1e6, 1e9, 1e-5), 1e-3 + 1e-5);
}

TEST(Collectives, BroadcastAndReduceCarryTheBufferOnceAlongTheRing) {
  // 1e9 / 100e9 = 10 ms whatever p, plus 3 hops of 10 us on 4 members.
  EXPECT_DOUBLE_EQ(ring_broadcast_s(4, 1e9, 100e9), 1e-2);
  EXPECT_DOUBLE_EQ(ring_broadcast_s(4, 1e9, 100e9, 1e-5), 1e-2 + 3e-5);
  EXPECT_DOUBLE_EQ(ring_reduce_s(8, 1e9, 100e9, 1e-5), 1e-2 + 7e-5);
  EXPECT_EQ(ring_broadcast_s(1, 1e9, 1e9, 1.0), 0.0);
  EXPECT_EQ(ring_reduce_s(1, 1e9, 1e9, 1.0), 0.0);
}

TEST(Collectives, RingSelfAttentionCountsItsShifts) {
  // 4 members, chunks of 1 MB at 1 GB/s (1 ms each), 10 us per message:
  // forward 2*3 messages of 1 MB; backward 3 (K, V) + 4 (dK, dV) messages of 2 MB.
  EXPECT_DOUBLE_EQ(ring_self_attention_forward_s(4, 1e6, 1e9, 1e-5), 6 * (1e-3 + 1e-5));
  EXPECT_DOUBLE_EQ(ring_self_attention_backward_s(4, 1e6, 1e9, 1e-5), 7 * (2e-3 + 1e-5));
  EXPECT_EQ(ring_self_attention_forward_s(1, 1e6, 1e9, 1.0), 0.0);
  EXPECT_EQ(ring_self_attention_backward_s(1, 1e6, 1e9, 1.0), 0.0);
}

// The linear all-gather of Open MPI's non-blocking collectives (topo::AllGatherAlgorithm):
// the bytes on a node's link against a ring's, by hand.
TEST(Collectives, ALinearAllGatherPutsMoreBytesOnTheNodesLink) {
  using axonn::topo::AllGatherAlgorithm;
  // 8 members on 2 nodes of 4: each of a node's 4 sends its 1/8 to the other 4: 2 B.
  EXPECT_DOUBLE_EQ(all_gather_link_bytes(AllGatherAlgorithm::Linear, 8, 4), 2.0);
  EXPECT_DOUBLE_EQ(all_gather_link_bytes(AllGatherAlgorithm::Ring, 8, 4), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Linear, 8, 4), 16.0 / 7.0);
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Linear, 4, 2), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Linear, 8, 2), 12.0 / 7.0);  // 4 nodes of 2
  // One member per node, or the whole group in one node: as a ring.
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Linear, 2, 1), 1.0);
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Linear, 4, 4), 1.0);
  EXPECT_DOUBLE_EQ(all_gather_slowdown(AllGatherAlgorithm::Ring, 8, 4), 1.0);
}
