// The 2d-broadcast mode's cost model (docs/model.md section 15, "The broadcast form"):
// its grids and --grid, the pass program (no weight fetched or reduce-scattered for a
// linear layer, its dW handed over as ReducedGradient), one step's moves and what the
// passes leave exposed, by hand; the breakdown's terms, compute as q block products,
// memory per row, the ZeRO-3 refusal, the ranking beside 2d, and the one-way bandwidth
// of the moves.
#include <gtest/gtest.h>

#include <algorithm>

#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/pass.hpp"
#include "axonn/schedule/schedule.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;
using schedule::LayerOp;

namespace {

topo::Grid grid(int64_t q, int64_t gdata, int64_t ginter, topo::TensorLayout layout) {
  topo::Grid g{1, q, q, gdata, ginter};
  g.layout = layout;
  return g;
}
topo::Grid broadcast(int64_t q, int64_t gdata = 1, int64_t ginter = 1) {
  return grid(q, gdata, ginter, topo::TensorLayout::TwoDBroadcast);
}

model::Layer linear(int64_t k, int64_t n) {
  model::Layer l;
  l.name = "fc";
  l.k = k;
  l.n = n;
  return l;
}

std::vector<LayerOp> ops_of(const std::vector<schedule::LayerInstruction>& program) {
  std::vector<LayerOp> out;
  for (const auto& i : program) out.push_back(i.op);
  return out;
}

}  // namespace

TEST(TwoDBroadcastModel, GridsAreTwoDsInTheBroadcastLayout) {
  const auto two = enumerate_mode_grids("2d", 16), bc = enumerate_mode_grids("2d-broadcast", 16);
  ASSERT_EQ(two.size(), bc.size());
  for (size_t i = 0; i < two.size(); ++i) {
    topo::Grid g = two[i];
    g.layout = topo::TensorLayout::TwoDBroadcast;
    EXPECT_EQ(bc[i], g);
    EXPECT_TRUE(bc[i].summa());
    EXPECT_EQ(std::string(plan::tensor_mode_of(bc[i]).name), "2d-broadcast");
    EXPECT_EQ(std::string(plan::tensor_mode_of(two[i]).name), "2d");
  }
  EXPECT_EQ(plan::tensor_mode_tag(broadcast(2)), "2db");
  EXPECT_EQ(broadcast(2, 2).to_string(), "gx=1 gy=2 gz=2 gdata=2 ginter=1 2d-broadcast");
  EXPECT_EQ(topo::parse_layout("2d-broadcast", "test", "layout"), topo::TensorLayout::TwoDBroadcast);
  const plan::TensorMode& m = plan::find_tensor_mode("2d-broadcast", "test", "--tensor-mode");
  EXPECT_TRUE(m.in_all);
  EXPECT_TRUE(m.takes_depth);
  ASSERT_TRUE(m.grid_layout.has_value());
  EXPECT_EQ(*m.grid_layout, topo::TensorLayout::TwoDBroadcast);
  // The 2d layout's shape rule holds for it too.
  topo::Grid bad{2, 2, 2, 1, 1};
  bad.layout = topo::TensorLayout::TwoDBroadcast;
  ASSERT_TRUE(topo::grid_problem(bad).has_value());
  EXPECT_NE(topo::grid_problem(bad)->what.find("the 2d-broadcast layout"), std::string::npos);
}

// A linear layer has no Prefetch, Fetch or ReduceScatter: its forward is one Forward,
// its backward BackwardInput, BackwardWeight and ReducedGradient (no dI collective);
// the embedding is still gathered and reduce-scattered, and the buckets hold both.
TEST(TwoDBroadcastModel, ThePassFetchesOnlyTheEmbedding) {
  model::Layer emb = linear(64, 32), fc1 = linear(32, 64), fc2 = linear(64, 32);
  emb.kind = model::LayerKind::Embedding;
  const auto layout = topo::TensorLayout::TwoDBroadcast;
  std::vector<schedule::PassLayer> layers{schedule::pass_layer(emb, false, 1, 0, layout),
                                          schedule::pass_layer(fc1, false, 1, 0, layout),
                                          schedule::pass_layer(fc2, false, 1, 0, layout)};
  EXPECT_FALSE(layers[0].local_weight);
  EXPECT_TRUE(layers[1].local_weight && layers[2].local_weight);
  schedule::PassSettings s;
  s.overlap = plan::OverlapSettings::level(4, 0);  // prefetch, caching, async reductions, buckets
  s.overlap.bucket_bytes = 1;                      // a bucket per layer
  for (auto& l : layers) l.grad_bytes = 8;
  EXPECT_EQ(ops_of(schedule::pass_program(layers.data(), layers.size(), s, schedule::PassKind::Forward)),
            (std::vector<LayerOp>{LayerOp::Prefetch, LayerOp::Fetch, LayerOp::Forward, LayerOp::Forward,
                                  LayerOp::Forward}));
  EXPECT_EQ(ops_of(schedule::pass_program(layers.data(), layers.size(), s, schedule::PassKind::LastBackward)),
            (std::vector<LayerOp>{LayerOp::BackwardInput, LayerOp::BackwardWeight, LayerOp::ReducedGradient,
                                  LayerOp::BucketAllReduce, LayerOp::BackwardInput, LayerOp::BackwardWeight,
                                  LayerOp::ReducedGradient, LayerOp::BucketAllReduce, LayerOp::BackwardWeight,
                                  LayerOp::ReduceScatter, LayerOp::BucketAllReduce, LayerOp::WaitReduceScatters}));
  // With recomputation nothing is fetched for the linear layers either.
  s.checkpointing = true;
  for (auto& l : layers) l.recomputed = true;
  schedule::mark_cached(layers.data(), layers.size(), 4);
  EXPECT_FALSE(layers[1].cached);
  for (const auto& i : schedule::pass_program(layers.data(), layers.size(), s, schedule::PassKind::Backward))
    if (i.op == LayerOp::Fetch || i.op == LayerOp::Prefetch || i.op == LayerOp::ReduceScatter) {
      EXPECT_EQ(i.layer, 0);
    }
}

// One step's moves: the input block [m/q, k/q] along Y, the weight block [k/q, n/q]
// along Z, each a broadcast and (backward) a reduce; nothing gathered; the breakdown
// counts q of each per pass (the forward's n_fwd times).
TEST(TwoDBroadcastModel, OneStepMovesOneBlockOfEach) {
  const AxisBandwidths bw{1e9, 50e9, 20e9, 10e9, 5e9};  // x, y, z, pipe, data
  LayerCommSettings s;
  s.tokens = 4096;
  s.element_bytes = 2;
  s.grad_reduce_bytes = 4;
  s.latency_s.fill(1e-5);
  const int64_t q = 4, k = 1024, n = 4096;
  const LayerCollectives c = layer_collectives(linear(k, n), broadcast(q, 2), bw, s);
  const double input = 2.0 * 4096 * k / (q * q), weight = 2.0 * k * n / (q * q);
  EXPECT_EQ(c.summa_steps, q);
  EXPECT_DOUBLE_EQ(c.summa_input_broadcast_s, input / 50e9 + 3e-5);
  EXPECT_DOUBLE_EQ(c.summa_weight_broadcast_s, weight / 20e9 + 3e-5);
  EXPECT_DOUBLE_EQ(c.summa_input_reduce_s, ring_reduce_s(q, input, 50e9, 1e-5));
  EXPECT_DOUBLE_EQ(c.summa_weight_reduce_s, ring_reduce_s(q, weight, 20e9, 1e-5));
  EXPECT_EQ(c.all_gather_s + c.reduce_scatter_s + c.input_gather_s + c.input_grad_all_reduce_s, 0.0);
  EXPECT_FALSE(c.gathers_input);
  EXPECT_DOUBLE_EQ(c.data_bytes, 4.0 * k * n / (q * q));
  const plan::CommBreakdown step = comm_per_step(c, 3, 2, 2);  // 3 micro-batches, recomputed
  // SUMMA's moves in full are the term `summa` (validate measures it by its waits), none
  // of them in the terms of the collective forms.
  EXPECT_DOUBLE_EQ(step.summa, 3 * q *
                                   (3 * (c.summa_input_broadcast_s + c.summa_weight_broadcast_s) +
                                    c.summa_input_reduce_s + c.summa_weight_reduce_s));
  EXPECT_EQ(step.ag_z + step.rs_z + step.ar_x + step.ar_y + step.act_x + step.act_y, 0.0);
  // The embedding is 2d's.
  model::Layer embedding = linear(50000, k);
  embedding.kind = model::LayerKind::Embedding;
  s.input_gradient = false;
  const LayerCollectives e = layer_collectives(embedding, broadcast(q, 2), bw, s);
  EXPECT_EQ(e.summa_steps, 0);
  EXPECT_DOUBLE_EQ(e.all_gather_s, ring_all_gather_s(q, 2.0 * 50000 * k / q, 20e9, 1e-5));
}

// What the passes leave exposed, by hand: forward B + (q-1) max(0, B - c/q); backward
// q (Bw + max(Rx - cw/q, Bx + Rw)).
TEST(TwoDBroadcastModel, ExposedMovesByHand) {
  LayerCollectives c;
  c.summa_steps = 2;
  c.summa_input_broadcast_s = 0.001;
  c.summa_weight_broadcast_s = 0.002;
  c.summa_input_reduce_s = 0.004;
  c.summa_weight_reduce_s = 0.0005;
  // B = 3 ms: products of 2 ms a step hide 2 of the second step's 3; of 8 ms, all of it.
  EXPECT_DOUBLE_EQ(summa_forward_exposed_s(c, 0.004), 0.003 + 0.001);
  EXPECT_DOUBLE_EQ(summa_forward_exposed_s(c, 0.016), 0.003);
  // dI's reduce (4 ms) beside the input's broadcast, dW's product (1 ms) and dW's
  // reduce: max(4 - 1, 1 + 0.5) = 3 ms, plus the weight's broadcast, twice.
  EXPECT_DOUBLE_EQ(summa_backward_exposed_s(c, 0.002), 2 * (0.002 + 0.003));
  // A long dW product hides dI's reduce: max(4 - 5, 1.5) = 1.5.
  EXPECT_DOUBLE_EQ(summa_backward_exposed_s(c, 0.010), 2 * (0.002 + 0.0015));
  c.summa_steps = 0;
  EXPECT_EQ(summa_forward_exposed_s(c, 1.0) + summa_backward_exposed_s(c, 1.0), 0.0);
}

// The clock charges them (and 2q, 4q calls of the fixed cost) in Forward and
// BackwardInput, and a ReducedGradient joins its bucket at once.
TEST(TwoDBroadcastModel, TheClockChargesTheExposedMoves) {
  LayerTimes l;
  l.forward_s = 0.010;
  l.backward_input_s = 0.010;
  l.backward_weight_s = 0.010;
  l.comm.summa_steps = 2;
  l.summa_forward_exposed_s = 0.003;
  l.summa_backward_exposed_s = 0.005;
  l.comm.data_all_reduce_s = 0.020;
  l.comm.sync_call_s = 0.0001;
  schedule::PassLayer p;
  p.local_weight = true;
  p.grad_bytes = 8;
  const LayerCosts* costs[] = {&l};
  schedule::PassSettings s;
  s.overlap = plan::OverlapSettings::synchronous();
  s.overlap.bucketed_data_parallel_all_reduce = true;
  s.overlap.bucket_bytes = 1;
  std::vector<double> scratch;
  const PassTime f = simulate_pass(&p, costs, 1, s, schedule::PassKind::Forward, scratch);
  EXPECT_DOUBLE_EQ(f.duration_s, 0.010 + 0.003 + 4 * 0.0001);
  const PassTime b = simulate_pass(&p, costs, 1, s, schedule::PassKind::LastBackward, scratch);
  EXPECT_DOUBLE_EQ(b.duration_s, 0.020 + 0.005 + 8 * 0.0001);
  EXPECT_DOUBLE_EQ(b.data_done_s, b.duration_s + 0.020);  // the bucket starts at the pass's end
}

// q products of blocks per pass: [m/q, k/q] x [k/q, n/q], a batch of q; the same FLOPs
// as 2d's one product. Memory keeps the input block and holds three at the backward.
TEST(TwoDBroadcastModel, ComputeAndMemoryOfARank) {
  const topo::Grid b = broadcast(2), c = grid(2, 1, 1, topo::TensorLayout::TwoD);
  const auto mm = forward_matmuls(linear(64, 256), b, 4, 16);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0].m, 4 / 2 * 16);
  EXPECT_EQ(mm[0].k, 64 / 2);
  EXPECT_EQ(mm[0].n, 256 / 2);
  EXPECT_EQ(mm[0].batch, 2);
  const auto two = forward_matmuls(linear(64, 256), c, 4, 16);
  EXPECT_EQ(mm[0].k * mm[0].batch, two[0].k);
  const auto dw = backward_weight_matmuls(linear(64, 256), b, 4, 16);
  EXPECT_EQ(dw[0].m * dw[0].batch, 64);
  model::Layer qkv = linear(64, 192);
  qkv.norm_before = true;
  const LayerActivations a = layer_activations(qkv, b, 16);
  EXPECT_DOUBLE_EQ(a.saved, 64 / 2 + 64 / 2);  // the input block, the norm's output block
  EXPECT_DOUBLE_EQ(a.backward_at_input, 192 / 2 + 3 * 64 / 2);
  EXPECT_DOUBLE_EQ(layer_activations(qkv, c, 16).saved, 64 + 64 / 2);
}

// Ranked beside 2d, with the same grids; ZeRO-3 refused with its reason.
TEST(TwoDBroadcastModel, RanksBesideTwoDAndRefusesZeroThree) {
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o;
  o.gpus = 32;
  o.batch_seqs = 16;
  o.tensor_modes = {"2d-broadcast"};
  const Ranking bc = rank_candidates(m, t, o);
  EXPECT_EQ(bc.feasible.size() + bc.rejected.size(), enumerate_mode_grids("2d-broadcast", 32).size());
  ASSERT_FALSE(bc.feasible.empty());
  for (const auto& e : bc.feasible) {
    EXPECT_EQ(e.grid.layout, topo::TensorLayout::TwoDBroadcast);
    EXPECT_EQ(strategy_label(e), "2d-broadcast");
    // SUMMA's moves in full, and what of them the passes leave exposed: less than in full.
    EXPECT_GT(e.comm.summa, 0.0);
    EXPECT_GT(e.summa_exposed_s, 0.0);
    EXPECT_LT(e.summa_exposed_s, e.comm.summa);
  }
  o.optimizer.zero = 3;  // refused with data parallelism; without it ZeRO-3 shards nothing
  const Ranking zero = rank_candidates(m, t, o);
  for (const auto& e : zero.feasible) EXPECT_EQ(e.grid.gdata, 1) << e.grid.to_string();
  EXPECT_TRUE(std::any_of(zero.rejected.begin(), zero.rejected.end(), [](const Evaluation& e) {
    return e.rejected_because.find("ZeRO-3") != std::string::npos;
  }));
  // Only the broadcast form has them.
  o.optimizer.zero = 0;
  o.tensor_modes = {"2d"};
  const Ranking two = rank_candidates(m, t, o);
  ASSERT_FALSE(two.feasible.empty());
  for (const auto& e : two.feasible) EXPECT_EQ(e.comm.summa + e.summa_exposed_s, 0.0);
}

// SUMMA's moves run at the one-way rate of their links: measured point-to-point
// bandwidth inside a node, across nodes shared by the groups whose roots send at once;
// the ring bandwidth where nothing was measured (on a full-duplex link, the same).
TEST(TwoDBroadcastModel, MovesUseTheOneWayBandwidth) {
  topo::Topology t = topo::load_topology("perlmutter");
  t.gpus_per_node = 2;
  t.num_nodes = 2;
  const topo::Grid g = broadcast(2);
  const topo::PlacementOrder order = topo::default_order();  // x, y, z, pipe, data: Y in a node, Z across
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, order, true, 7e6, topo::Axis::Z), 7e6);  // nothing measured
  t.point_to_point = {60e6, 50e6};
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, order, true, 7e6, topo::Axis::Y), 60e6);
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, order, true, 7e6, topo::Axis::Z), 50e6 / 2);  // 2 roots per node
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, order, false, 7e6, topo::Axis::Y), 50e6);     // agnostic
  // Z inside: the order z, y, ...: Z in a node, Y across with 2 roots sending at once.
  const topo::PlacementOrder zy = topo::parse_order("z,y,x,pipe,data", "test", "--order");
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, zy, true, 7e6, topo::Axis::Z), 60e6);
  EXPECT_DOUBLE_EQ(one_way_group_bandwidth(t, g, zy, true, 7e6, topo::Axis::Y), 25e6);
  // The layer's moves take it (LayerCommSettings::one_way_bytes_per_s), its ring terms do not.
  LayerCommSettings s;
  s.tokens = 64;
  s.element_bytes = 4;
  s.one_way_bytes_per_s[static_cast<int>(topo::Axis::Y)] = 60e6;
  const AxisBandwidths bw{1e9, 10e6, 10e6, 1e9, 1e9};
  const LayerCollectives c = layer_collectives(linear(32, 64), g, bw, s);
  EXPECT_DOUBLE_EQ(c.summa_input_broadcast_s, 4.0 * 64 * 32 / 4 / 60e6);
  EXPECT_DOUBLE_EQ(c.summa_weight_broadcast_s, 4.0 * 32 * 64 / 4 / 10e6);  // Z unset: its ring bandwidth
}

// Time-sliced ranks (cores_per_rank below 1; docs/model.md section 2, "Tensor rings out
// of step"): the moves of an axis whose groups cross nodes with another replica's roots
// sending through the same link meet that replica's moves only for their share of the
// passes, so they lie between one group alone on the link (the inter-node rate doubled:
// 2 roots per node) and eq. 10's every group at once. Groups joined by an inner tensor
// axis (in step), an axis inside a node and dedicated cores keep eq. 10.
TEST(TwoDBroadcastModel, MovesOfTimeSlicedRanksCrossTheLinkOutOfStep) {
  const auto m = model::load_model("gpt-125m");
  topo::Topology dedicated = topo::load_topology("perlmutter");
  dedicated.gpus_per_node = 2;
  dedicated.num_nodes = 4;
  dedicated.peak_flops_per_s = 2e13;  // compute between the moves
  dedicated.point_to_point = {60e9, 5e9};
  topo::Topology sliced = dedicated, alone = dedicated;
  sliced.cores_per_rank = 0.25;
  alone.point_to_point.inter_node_bytes_per_s *= 2;
  PlannerOptions o;
  o.gpus = 8;
  o.batch_seqs = 8;
  // The data axis innermost: both replicas' Y and Z moves cross each link, out of step.
  for (const char* order : {"data,x,y,z,pipe", "data,z,y,x,pipe"}) {
    o.order = topo::parse_order(order, "test", "--order");
    const Evaluation e = evaluate(m, dedicated, broadcast(2, 2), o), s = evaluate(m, sliced, broadcast(2, 2), o),
                     a = evaluate(m, alone, broadcast(2, 2), o);
    ASSERT_TRUE(e.feasible && s.feasible && a.feasible) << order << e.rejected_because;
    EXPECT_LT(a.comm.summa, s.comm.summa) << order;
    EXPECT_LT(s.comm.summa, e.comm.summa) << order;
    EXPECT_LT(s.summa_exposed_s, e.summa_exposed_s) << order;  // the exposed moves from the mixed ones
    EXPECT_LE(a.summa_exposed_s, s.summa_exposed_s) << order;
    EXPECT_LT(s.batch_s, e.batch_s) << order;
  }
  // The default order: Z's two rings on a link are the Y pair's, in step; nothing changes.
  // Nor on nodes of 4, where both axes stay inside a node.
  o.order = topo::default_order();
  for (int gpn : {2, 4}) {
    for (topo::Topology* t : {&dedicated, &sliced}) t->gpus_per_node = gpn, t->num_nodes = 8 / gpn;
    const Evaluation e = evaluate(m, dedicated, broadcast(2, 2), o), s = evaluate(m, sliced, broadcast(2, 2), o);
    ASSERT_TRUE(e.feasible && s.feasible);
    EXPECT_DOUBLE_EQ(s.comm.summa, e.comm.summa) << gpn;
    EXPECT_DOUBLE_EQ(s.batch_s, e.batch_s) << gpn;
  }
}

// The weight-sized buffers of a stage: its linear layers' three SUMMA blocks (the
// largest's, 1/Gz of the Gx*Gy block) beside the embedding's table, which is gathered
// and reduce-scattered over Z as in 2d; a chain without segments walks the blocks at
// each layer instead.
TEST(TwoDBroadcastModel, AStageHoldsSummasBlocksAndTheGatheredEmbedding) {
  model::ModelDescription m;
  m.name = "embedding-and-linear";
  m.hidden = 32;
  m.seq_len = 8;
  model::Layer emb = linear(64, 32), fc = linear(32, 128);
  emb.kind = model::LayerKind::Embedding;
  m.layers = {emb, fc};
  MemorySettings s;
  s.precision = plan::Precision::fp32();
  s.overlap = plan::OverlapSettings::synchronous();  // no prefetch: one gathered table
  s.activation_checkpointing = false;
  s.optimizer_phase = false;  // the passes' buffers, not the optimizer's
  const std::vector<bool> cached(2, false);
  const MemoryBreakdown b = stage_memory(m, 0, 2, broadcast(2), s, cached);
  // Gx*Gy = 2: the table's block 64 x 32 / 2 = 1024, the linear's 32 x 128 / 2 = 2048.
  EXPECT_DOUBLE_EQ(b.gathered_weight_bytes, 4.0 * 1024 + 4.0 * 3 * 2048 / 2);
  EXPECT_DOUBLE_EQ(b.unscattered_grad_bytes, 4.0 * 1024);
  // 2d gathers both and leaves both un-scattered.
  const MemoryBreakdown c = stage_memory(m, 0, 2, grid(2, 1, 1, topo::TensorLayout::TwoD), s, cached);
  EXPECT_DOUBLE_EQ(c.gathered_weight_bytes, 4.0 * 2048);
  EXPECT_DOUBLE_EQ(c.unscattered_grad_bytes, 4.0 * 2048);
  // A chain without segments: the table is a bound, the linear's blocks are placed at
  // its backward by the walk, which is the peak here.
  s.chain = true;
  EXPECT_DOUBLE_EQ(stage_memory(m, 0, 2, broadcast(2), s, cached).gathered_weight_bytes, 4.0 * 1024 + 4.0 * 3 * 2048 / 2);
}
