// The 3d mode's cost model (docs/model.md section 16): its grids, a layer's collectives
// (AxoNN's all-reduces split into a reduce-scatter and an all-gather on either side of
// the layer boundary), the pass order of the schedule IR, divisibility, and
// --tensor-mode 3d / all.
#include <gtest/gtest.h>

#include <algorithm>

#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/pass.hpp"
#include "axonn/schedule/schedule.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

topo::Grid three_d(topo::Grid g) {
  g.layout = topo::TensorLayout::ThreeD;
  return g;
}

}  // namespace

TEST(ThreeDModel, GridsAreTheCubes) {
  std::vector<std::string> got;
  for (const auto& g : enumerate_mode_grids("3d", 16)) got.push_back(g.to_string());
  EXPECT_EQ(got, (std::vector<std::string>{"gx=2 gy=2 gz=2 gdata=1 ginter=2 3d", "gx=2 gy=2 gz=2 gdata=2 ginter=1 3d"}));
  EXPECT_EQ(topo::parse_group_grid(topo::GroupMode::ThreeD, "8,2", "test", "--grid"), three_d({2, 2, 2, 2, 1}));
  EXPECT_THROW(topo::parse_group_grid(topo::GroupMode::ThreeD, "4,2", "test", "--grid"), InputError);
}

// Per layer, the all-reduces of AxoNN's 3D become a reduce-scatter and an all-gather of
// the same bytes: the forward output's over a (scattered after the matmul, its gradient
// gathered before the backward), the input gradient's over b (the input gathered before
// the matmul, dI scattered). Ring costs add up to the same time; the weight's are equal.
TEST(ThreeDModel, ALayersCollectivesSplitAxonnsAllReduces) {
  const AxisBandwidths bw{40e9, 30e9, 20e9, 10e9, 5e9};
  LayerCommSettings s;
  s.tokens = 4096;
  s.element_bytes = 2;
  s.latency_s.fill(1e-5);
  for (bool transposed : {false, true}) {
    model::Layer l;
    l.k = 1024;
    l.n = 4096;
    l.role = transposed ? model::LinearRole::Row : model::LinearRole::Column;
    const topo::Grid g{2, 4, 2, 1, 1};
    const LayerCollectives a = layer_collectives(l, g, bw, s), c = layer_collectives(l, three_d(g), bw, s);
    EXPECT_TRUE(c.gathers_input);
    EXPECT_DOUBLE_EQ(c.all_gather_s, a.all_gather_s);
    EXPECT_DOUBLE_EQ(c.reduce_scatter_s, a.reduce_scatter_s);
    EXPECT_NEAR(c.forward_all_reduce_s + c.output_grad_gather_s, a.forward_all_reduce_s, 1e-15);
    EXPECT_NEAR(c.input_gather_s + c.input_grad_all_reduce_s, a.input_grad_all_reduce_s, 1e-15);
    const plan::CommBreakdown one = comm_per_step(a, 2, 2, 1), three = comm_per_step(c, 2, 2, 1);
    EXPECT_NEAR(three.total(), one.total(), 1e-12);
    EXPECT_EQ(three.ar_x + three.ar_y, 0.0);
    EXPECT_NEAR(three.act_x, one.ar_x, 1e-12);
    EXPECT_NEAR(three.act_y, one.ar_y, 1e-12);
  }
}

TEST(ThreeDModel, ThePassGathersInputsAndOutputGradients) {
  model::Layer fc;
  fc.k = 32;
  fc.n = 64;
  schedule::PassSettings s;
  s.overlap = plan::OverlapSettings::synchronous();
  const auto layer = schedule::pass_layer(fc, false, 1, 0, topo::TensorLayout::ThreeD);
  using schedule::LayerOp;
  std::vector<LayerOp> fwd, bwd;
  for (const auto& i : schedule::pass_program(&layer, 1, s, schedule::PassKind::Forward)) fwd.push_back(i.op);
  for (const auto& i : schedule::pass_program(&layer, 1, s, schedule::PassKind::Backward)) bwd.push_back(i.op);
  EXPECT_EQ(fwd, (std::vector<LayerOp>{LayerOp::Fetch, LayerOp::InputGather, LayerOp::Forward, LayerOp::ForwardCollective}));
  EXPECT_EQ(bwd, (std::vector<LayerOp>{LayerOp::Fetch, LayerOp::OutputGradGather, LayerOp::BackwardInput,
                                       LayerOp::InputGradCollective, LayerOp::InputGradWait, LayerOp::BackwardWeight,
                                       LayerOp::ReduceScatter, LayerOp::WaitReduceScatters}));
}

TEST(ThreeDModel, RowsSplitByWholeSequences) {
  const auto m = model::load_model("gpt-tiny");
  const topo::Grid g = three_d({2, 2, 2, 1, 1});
  EXPECT_FALSE(plan::divisibility_problem(m, g, 8, 8));  // 4 sequences per Z-rank over 2 x 2
  const auto why = plan::divisibility_problem(m, g, 8, 4);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("gx*gy (3d)"), std::string::npos) << *why;
}

// Around the matmuls, 3d works on the rows it holds (docs/model.md section 16): the
// norm on the input's (1/Gb), the bias and GELU on the output's (1/Ga), attention on
// QKV's output rows (1/Gx of the Z-rank's sequences); the matmuls see AxoNN's rows.
TEST(ThreeDModel, ComputeAroundTheMatmulsIsOnTheRowsHeld) {
  const topo::Grid axonn{2, 4, 2, 1, 1};
  const topo::Grid cube = three_d(axonn);
  model::Layer fc1;  // column-parallel: a = X (2), b = Y (4)
  fc1.k = 64, fc1.n = 256, fc1.norm_before = true, fc1.gelu_after = true;
  ElementwiseRates r;
  r.terms[0] = {ElementwiseRates::Elements::Input, 1.0, 0.0};
  r.terms[1] = {ElementwiseRates::Elements::Output, 0.0, 1.0};
  r.count = 2;
  const ElementwiseTime ax = elementwise_s(r, fc1, axonn, 16, 32), cu = elementwise_s(r, fc1, cube, 16, 32);
  EXPECT_DOUBLE_EQ(ax.forward_s, 8.0 * 32 * 64 / 2);    // rows 16/2 sequences x 32, k/Gx columns
  EXPECT_DOUBLE_EQ(cu.forward_s, ax.forward_s / 4);     // the input's rows over b = Y
  EXPECT_DOUBLE_EQ(ax.backward_s, 8.0 * 32 * 256 / 4);  // n/Gy columns
  EXPECT_DOUBLE_EQ(cu.backward_s, ax.backward_s / 2);   // the output's rows over a = X
  EXPECT_EQ(forward_matmuls(fc1, cube, 16, 32)[0].m, forward_matmuls(fc1, axonn, 16, 32)[0].m);
  model::Layer fc2 = fc1;  // row-parallel: a = Y (4), b = X (2), so the splits swap
  fc2.k = 256, fc2.n = 64, fc2.role = model::LinearRole::Row;
  const ElementwiseTime ax2 = elementwise_s(r, fc2, axonn, 16, 32), cu2 = elementwise_s(r, fc2, cube, 16, 32);
  EXPECT_DOUBLE_EQ(ax2.forward_s, 8.0 * 32 * 256 / 4);  // k/Gy columns
  EXPECT_DOUBLE_EQ(cu2.forward_s, ax2.forward_s / 2);   // the input's rows over b = X
  EXPECT_DOUBLE_EQ(ax2.backward_s, 8.0 * 32 * 64 / 2);  // n/Gx columns
  EXPECT_DOUBLE_EQ(cu2.backward_s, ax2.backward_s / 4); // the output's rows over a = Y
  model::Layer attention;
  attention.kind = model::LayerKind::Attention;
  attention.heads = 8, attention.head_dim = 8;
  EXPECT_EQ(forward_matmuls(attention, axonn, 16, 32)[0].batch, 8 * 2);  // 16/Gz sequences x 8/Gy heads
  EXPECT_EQ(forward_matmuls(attention, cube, 16, 32)[0].batch, 4 * 2);   // and 1/Gx of the sequences
  r.terms[0] = {ElementwiseRates::Elements::Scores, 1.0, 0.0};
  r.count = 1;
  EXPECT_DOUBLE_EQ(elementwise_s(r, attention, cube, 16, 32).forward_s,
                   elementwise_s(r, attention, axonn, 16, 32).forward_s / 2);
  // Memory per row of the Z-rank: attention's copies and probabilities on 1/Gx of them,
  // GELU's output on the output's rows (1/Ga); the gathered input kept whole for dW.
  EXPECT_DOUBLE_EQ(layer_activations(attention, cube, 32).probs, layer_activations(attention, axonn, 32).probs / 2);
  EXPECT_DOUBLE_EQ(layer_activations(attention, cube, 32).copies, layer_activations(attention, axonn, 32).copies / 2);
  // fc1: input k/Gx = 32 kept whole, the norm's output on 1/Gb = 1/4 of the rows.
  EXPECT_DOUBLE_EQ(layer_activations(fc1, axonn, 32).norm_before, 32.0);
  EXPECT_DOUBLE_EQ(layer_activations(fc1, cube, 32).norm_before, 32.0 / 4);
  fc1.norm_before = false;
  EXPECT_DOUBLE_EQ(layer_activations(fc1, axonn, 32).saved, 64.0 / 2 + 256.0 / 4);
  EXPECT_DOUBLE_EQ(layer_activations(fc1, cube, 32).saved, 64.0 / 2 + 256.0 / 4 / 2);
}

TEST(ThreeDModel, RanksAloneOrWithEveryMode) {
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o;
  o.gpus = 64;
  o.batch_seqs = 64;
  const Ranking axonn = rank_candidates(m, t, o);
  o.tensor_modes = {"axonn3d", "3d"};
  const Ranking all = rank_candidates(m, t, o);
  o.tensor_modes = {"3d"};
  const Ranking three = rank_candidates(m, t, o);
  EXPECT_EQ(three.feasible.size() + three.rejected.size(), enumerate_mode_grids("3d", 64).size());
  ASSERT_FALSE(three.feasible.empty());
  for (const auto& e : three.feasible) {
    EXPECT_TRUE(e.grid.threed());
    EXPECT_EQ(strategy_label(e), "3d");
    EXPECT_EQ(e.comm.ar_x + e.comm.ar_y, 0.0);
    EXPECT_GT(e.comm.act_x + e.comm.act_y, 0.0);
  }
  EXPECT_EQ(all.feasible.size(), axonn.feasible.size() + three.feasible.size());
}
