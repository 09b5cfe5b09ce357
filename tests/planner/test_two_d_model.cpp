// The 2d mode's cost model (docs/model.md section 15): its grids, the collectives of a
// layer in SUMMA's layout, the pass order of the schedule IR (the input's all-gather
// before the compute), compute and memory, divisibility, and --tensor-mode 2d / all; the
// broadcast form's memory (summa_broadcast_peak_bytes).
#include <gtest/gtest.h>

#include <algorithm>

#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/planner/summa_broadcast_memory.hpp"
#include "axonn/schedule/pass.hpp"
#include "axonn/schedule/schedule.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

topo::Grid two_d(int64_t q, int64_t gdata, int64_t ginter) {
  topo::Grid g{1, q, q, gdata, ginter};
  g.layout = topo::TensorLayout::TwoD;
  return g;
}

model::Layer linear(int64_t k, int64_t n, bool transposed) {
  model::Layer l;
  l.name = "fc";
  l.k = k;
  l.n = n;
  l.role = transposed ? model::LinearRole::Row : model::LinearRole::Column;
  return l;
}

}  // namespace

TEST(TwoDModel, GridsAreTheSquareTensorGroupsOnYAndZ) {
  std::vector<std::string> got, want;
  for (const auto& g : enumerate_mode_grids("2d", 16)) got.push_back(g.to_string());
  for (const auto& g : enumerate_grids(16))
    if (g.gx == 1 && g.gy == g.gz && g.gy >= 2) want.push_back(two_d(g.gy, g.gdata, g.ginter).to_string());
  EXPECT_EQ(got, want);
  // q = 2: gdata x ginter = 4 (1x4, 2x2, 4x1); q = 4: 1x1.
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(topo::parse_group_grid(topo::GroupMode::TwoD, "4,2", "test", "--grid"), two_d(2, 2, 1));
  EXPECT_THROW(topo::parse_group_grid(topo::GroupMode::TwoD, "8,1", "test", "--grid"), InputError);
  // Tesseract's 2.5D at depth d: t = d q^2, the depth a factor of the data axis.
  EXPECT_EQ(topo::parse_group_grid(topo::GroupMode::TwoD, "8,1", "test", "--grid", 2), two_d(2, 2, 1));
  EXPECT_EQ(topo::parse_group_grid(topo::GroupMode::TwoD, "8,3,2", "test", "--grid", 2), two_d(2, 6, 2));
  EXPECT_THROW(topo::parse_group_grid(topo::GroupMode::TwoD, "8,1", "test", "--grid", 4), InputError);
  EXPECT_THROW(topo::parse_group_grid(topo::GroupMode::TwoD, "8,1", "test", "--grid", 3), InputError);
}

// A linear layer, normal or transposed alike: W's k x n/q block over Z, the input
// [m/q, k] gathered over Y and its gradient reduce-scattered over Y (act_y), nothing
// over X; the embedding gathers nothing over Y.
TEST(TwoDModel, ALayerGathersItsInputOverYAndItsWeightOverZ) {
  const AxisBandwidths bw{1e9, 50e9, 20e9, 10e9, 5e9};  // x, y, z, pipe, data
  LayerCommSettings s;
  s.tokens = 4096;
  s.element_bytes = 2;
  s.grad_reduce_bytes = 4;
  s.latency_s.fill(1e-5);
  const int64_t q = 4, k = 1024, n = 4096;
  for (bool transposed : {false, true}) {
    const LayerCollectives c = layer_collectives(linear(k, n, transposed), two_d(q, 2, 1), bw, s);
    const double block = 2.0 * k * n / q, input = 2.0 * 4096 * k / q;
    EXPECT_DOUBLE_EQ(c.all_gather_s, ring_all_gather_s(q, block, 20e9, 1e-5));
    EXPECT_DOUBLE_EQ(c.reduce_scatter_s, ring_reduce_scatter_s(q, block, 20e9, 1e-5));
    EXPECT_DOUBLE_EQ(c.input_gather_s, ring_all_gather_s(q, input, 50e9, 1e-5));
    EXPECT_EQ(c.forward_all_reduce_s + c.output_grad_gather_s, 0.0);
    EXPECT_DOUBLE_EQ(c.input_grad_all_reduce_s, ring_reduce_scatter_s(q, input, 50e9, 1e-5));
    EXPECT_DOUBLE_EQ(c.data_bytes, 4.0 * k * n / (q * q));
    EXPECT_TRUE(c.gathers_input);
    const plan::CommBreakdown step = comm_per_step(c, 3, 2, 1);
    EXPECT_DOUBLE_EQ(step.act_y, 3 * (c.input_gather_s + c.input_grad_all_reduce_s));
    EXPECT_EQ(step.ar_x + step.ar_y + step.act_x, 0.0);
  }
  // A linear all-gather over Y and Z (LayerCommSettings::all_gather_slowdown): the
  // gathers take that many times as long, the reduce-scatters do not change.
  LayerCommSettings slow = s;
  slow.all_gather_slowdown[static_cast<int>(topo::Axis::Y)] = 2.0;
  slow.all_gather_slowdown[static_cast<int>(topo::Axis::Z)] = 1.5;
  const LayerCollectives c = layer_collectives(linear(k, n, false), two_d(q, 2, 1), bw, s),
                         d = layer_collectives(linear(k, n, false), two_d(q, 2, 1), bw, slow);
  EXPECT_DOUBLE_EQ(d.input_gather_s, ring_all_gather_s(q, 2.0 * 4096 * k / q, 50e9 / 2.0, 1e-5));
  EXPECT_DOUBLE_EQ(d.all_gather_s, ring_all_gather_s(q, 2.0 * k * n / q, 20e9 / 1.5, 1e-5));
  EXPECT_DOUBLE_EQ(d.reduce_scatter_s, c.reduce_scatter_s);
  EXPECT_DOUBLE_EQ(d.input_grad_all_reduce_s, c.input_grad_all_reduce_s);
  model::Layer embedding = linear(50000, k, true);
  embedding.kind = model::LayerKind::Embedding;
  s.input_gradient = false;
  const LayerCollectives e = layer_collectives(embedding, two_d(q, 2, 1), bw, s);
  EXPECT_EQ(e.input_gather_s + e.forward_all_reduce_s + e.input_grad_all_reduce_s, 0.0);
  EXPECT_GT(e.all_gather_s, 0.0);
}

// The schedule IR: in the 2d layout a layer's InputGather precedes its Forward and no
// collective follows it; AxoNN's order is unchanged.
TEST(TwoDModel, ThePassGathersTheInputBeforeTheCompute) {
  model::Layer emb = linear(64, 32, true), fc = linear(32, 64, false);
  emb.kind = model::LayerKind::Embedding;
  schedule::PassSettings s;
  s.overlap = plan::OverlapSettings::synchronous();
  using schedule::LayerOp;
  auto ops = [&](bool summa) {
    const auto layout = summa ? topo::TensorLayout::TwoD : topo::TensorLayout::Axonn3d;
    std::vector<schedule::PassLayer> layers{schedule::pass_layer(emb, false, 1, 0, layout),
                                            schedule::pass_layer(fc, false, 1, 0, layout)};
    std::vector<LayerOp> out;
    for (const auto& i : schedule::pass_program(layers.data(), layers.size(), s, schedule::PassKind::Forward))
      out.push_back(i.op);
    return out;
  };
  EXPECT_EQ(ops(true), (std::vector<LayerOp>{LayerOp::Fetch, LayerOp::Forward, LayerOp::Fetch, LayerOp::InputGather,
                                             LayerOp::Forward}));
  EXPECT_EQ(ops(false), (std::vector<LayerOp>{LayerOp::Fetch, LayerOp::Forward, LayerOp::ForwardCollective,
                                              LayerOp::Fetch, LayerOp::Forward, LayerOp::ForwardCollective}));
}

// A rank multiplies its gathered rows [m/q, k] by its k x n/q block; its saved input is
// the gathered one, its hidden checkpoints a 1/q block.
TEST(TwoDModel, ComputeAndMemoryOfARank) {
  const topo::Grid g = two_d(2, 1, 1);
  const auto mm = forward_matmuls(linear(64, 256, true), g, /*microbatch_seqs=*/4, /*seq_len=*/16);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0].m, 4 / 2 * 16);
  EXPECT_EQ(mm[0].k, 64);
  EXPECT_EQ(mm[0].n, 256 / 2);
  model::Layer qkv = linear(64, 192, false);
  qkv.norm_before = true;
  const LayerActivations a = layer_activations(qkv, g, 16);
  EXPECT_DOUBLE_EQ(a.saved, 64 + 64 / 2);  // the gathered input, the norm's output block
}

TEST(TwoDModel, RejectsWhatItCannotSplit) {
  const auto m = model::load_model("gpt-tiny");  // hidden 64, 4 heads, vocab 256
  EXPECT_FALSE(plan::divisibility_problem(m, two_d(2, 1, 1), 8, 8));
  const auto heads = plan::divisibility_problem(m, two_d(8, 1, 1), 8, 8);
  ASSERT_TRUE(heads);
  EXPECT_NE(heads->find("heads=4 is not divisible by gy=8"), std::string::npos) << *heads;
  topo::Grid bad{2, 2, 2, 1, 1};
  bad.layout = topo::TensorLayout::TwoD;
  const auto shape = plan::divisibility_problem(m, bad, 8, 8);
  ASSERT_TRUE(shape);
  EXPECT_NE(shape->find("the 2d layout"), std::string::npos) << *shape;
}

TEST(TwoDModel, RanksAloneOrWithEveryMode) {
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o;
  o.gpus = 32;
  o.batch_seqs = 16;
  const Ranking axonn = rank_candidates(m, t, o);
  o.tensor_modes = {"axonn3d", "2d"};
  const Ranking all = rank_candidates(m, t, o);
  o.tensor_modes = {"2d"};
  const Ranking two = rank_candidates(m, t, o);
  EXPECT_EQ(two.feasible.size() + two.rejected.size(), enumerate_mode_grids("2d", 32).size());
  ASSERT_FALSE(two.feasible.empty());
  for (const auto& e : two.feasible) {
    EXPECT_TRUE(e.grid.summa());
    EXPECT_EQ(strategy_label(e), "2d");
    EXPECT_GT(e.comm.act_y, 0.0);
    EXPECT_EQ(e.comm.ar_x + e.comm.ar_y, 0.0);
  }
  EXPECT_EQ(all.feasible.size(), axonn.feasible.size() + two.feasible.size());
  for (size_t i = 1; i < all.feasible.size(); ++i) EXPECT_LE(all.feasible[i - 1].batch_s, all.feasible[i].batch_s);
  // The same 1,q,q grid in AxoNN's layout is another candidate with another cost.
  const topo::Grid g = two.feasible.front().grid;
  topo::Grid axonn_g = g;
  axonn_g.layout = topo::TensorLayout::Axonn3d;
  auto it = std::find_if(axonn.feasible.begin(), axonn.feasible.end(), [&](const Evaluation& x) { return x.grid == axonn_g; });
  if (it != axonn.feasible.end()) {
    EXPECT_NE(it->batch_s, two.feasible.front().batch_s);
  }
}

// The header's example, moment by moment: the second layer's backward is the peak on 1,2,2;
// on 1,2,2,2 (2.5d, depth 2) the blocks' rows halve, the weights stay, and the first
// layer's backward (with the second's gradient) becomes the peak.
TEST(TwoDModel, BroadcastFormPeakIsTheLargestBackwardOverTheWeights) {
  model::ModelDescription m;
  m.name = "two-linear";
  m.layers = {linear(1024, 4096, false), linear(4096, 1024, true)};
  const double mib = 1024.0 * 1024.0;
  // Weights 4 + 4; layer 2's backward: inputs 0.5 + 2, dY 0.5, 3 x 2 (X-sized), 3 x 4 (W-sized).
  EXPECT_DOUBLE_EQ(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0), 29 * mib);
  // 2.5d, layer 1's backward: input 0.25, layer 2's dW 4, dY 1, 3 x 0.25, 3 x 4 (layer 2's
  // backward holds 16.5: 0.25 + 1, 0.25, 3 x 1, 3 x 4).
  EXPECT_DOUBLE_EQ(summa_broadcast_peak_bytes(m, two_d(2, 2, 1), 512, 4.0), (8 + 0.25 + 4 + 1 + 0.75 + 12) * mib);
  // Activations dominating (4096 tokens of 512 -> 2048 -> 512): still layer 2's backward,
  // 2 + (2 + 8) + 2 + 3 x 8 + 3 x 1.
  m.layers = {linear(512, 2048, false), linear(2048, 512, true)};
  EXPECT_DOUBLE_EQ(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 4096, 4.0), 41 * mib);
  // q = 3 (blocks of k/3 x n/3, 576 / 3 = 192 rows): 768 -> 3072 -> 768, A = 0.1875, 0.75
  // MiB, O = 0.75, 0.1875 MiB, B = 1, 1 MiB. Layer 2's backward: 0.9375 + 0.1875 + 3 x 0.75
  // + 3 x 1 = 6.375; layer 1's: 0.1875 + 1 + 0.75 + 3 x 0.1875 + 3 x 1 = 5.5.
  m.layers = {linear(768, 3072, false), linear(3072, 768, true)};
  EXPECT_DOUBLE_EQ(summa_broadcast_peak_bytes(m, two_d(3, 1, 1), 576, 4.0), (2 + 6.375) * mib);
  // One layer, 2-byte elements (R = 2048): A = 1, O = 4, B = 0.5 MiB; weights 0.5, input 1,
  // dY 4, 3 x 1, 3 x 0.5.
  m.layers = {linear(512, 2048, false)};
  EXPECT_DOUBLE_EQ(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 4096, 2.0), (0.5 + 1 + 4 + 3 + 1.5) * mib);
}

TEST(TwoDModel, BroadcastFormRefusesOtherGridsAndLayers) {
  model::ModelDescription m;
  m.name = "two-linear";
  m.layers = {linear(1024, 4096, false)};
  EXPECT_NO_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0));
  EXPECT_THROW(summa_broadcast_peak_bytes(m, topo::Grid{1, 2, 2, 1, 1}, 512, 4.0), InputError);  // not the 2d layout
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(1, 1, 1), 512, 4.0), InputError);            // q = 1: no SUMMA
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 2), 512, 4.0), InputError);            // a pipeline
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 511, 4.0), InputError);            // rows of unequal blocks
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 0, 4.0), InputError);              // no tokens
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 0.0), InputError);            // no element size
  m.layers = {linear(1024, 4096, false), linear(2048, 1024, true)};
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0), InputError);  // not a chain: 4096 -> 2048
  m.layers = {linear(1024, 4095, false)};
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0), InputError);  // n not split by q
  m.layers = {linear(1024, 4096, false)};
  m.layers[0].gelu_after = true;
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0), InputError);  // not a plain linear
  m.layers[0].gelu_after = false;
  m.layers[0].kind = model::LayerKind::Attention;
  EXPECT_THROW(summa_broadcast_peak_bytes(m, two_d(2, 1, 1), 512, 4.0), InputError);  // not a linear
}
