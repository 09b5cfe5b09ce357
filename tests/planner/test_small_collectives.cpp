// The small collectives (docs/model.md section 8, "Small collectives"): the layer norms'
// row statistics, the loss's reductions, 3d's vector gradients and the once-per-step
// all-reduces, on hand-computed cases; the pass clock charges a call cost per call; the
// evaluator counts the calls of a GPT step. (validate_test.sh checks the count against
// the runtime's.)
#include <gtest/gtest.h>

#include "axonn/model/model_description.hpp"
#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::planner {
namespace {

const AxisLatencies kAlpha{1e-4, 1e-4, 1e-4, 1e-4, 1e-4};  // every group's latency per ring step, s

// fc1 of docs/model.md's example: k = 1024, n = 4096, a norm before it and a bias;
// m = 4096 tokens, fp32, every group alpha = 100 us and 1 GB/s.
struct Fixture {
  AxisBandwidths bw{1e9, 1e9, 1e9, 1e9, 1e9};
  LayerCommSettings s;
  model::Layer fc1;
  Fixture() {
    s.tokens = 4096;
    s.element_bytes = 4;
    s.latency_s.fill(1e-4);
    s.small_collectives = true;
    fc1.k = 1024;
    fc1.n = 4096;
    fc1.norm_before = fc1.bias = true;
  }
};

TEST(SmallCollectives, LayerNormStatisticsByHand) {
  Fixture f;
  const topo::Grid g{2, 2, 2, 1, 1};  // AxoNN 3D: rows = 4096 / Gz = 2048, hidden group X of 2
  const LayerCollectives c = layer_collectives(f.fc1, g, f.bw, f.s);
  // One call of two fp64 statistics per row: t_AR(2, 16 * 2048 B) = 2 x 100 us + 32768 B / 1 GB/s
  EXPECT_NEAR(c.small_forward_s, 2e-4 + 32768 / 1e9, 1e-15);
  EXPECT_EQ(c.small_forward_calls, 1);
  EXPECT_NEAR(c.small_backward_s, 2e-4 + 16384 / 1e9, 1e-15);  // both sums in one call
  EXPECT_EQ(c.small_backward_calls, 1);
  // In bf16 the forward's statistics are still fp64, the backward's sums bf16.
  LayerCommSettings bf16 = f.s;
  bf16.element_bytes = 2;
  const LayerCollectives h = layer_collectives(f.fc1, g, f.bw, bf16);
  EXPECT_NEAR(h.small_forward_s, c.small_forward_s, 1e-15);
  EXPECT_NEAR(h.small_backward_s, 2e-4 + 8192 / 1e9, 1e-15);
  // The vectors on one GPU: gain and shift 1024 / Gx each, the bias 4096 / Gy.
  EXPECT_DOUBLE_EQ(c.vector_elements, 2 * 512.0 + 2048.0);
  // Per step: n_fwd forwards and one backward per micro-batch.
  EXPECT_NEAR(comm_per_step(c, 3, 2, 2).small, 3 * (2 * c.small_forward_s + c.small_backward_s), 1e-15);
  // The large collectives are those of section 3, unchanged.
  LayerCommSettings large = f.s;
  large.small_collectives = false;
  const LayerCollectives without = layer_collectives(f.fc1, g, f.bw, large);
  EXPECT_EQ(without.small_forward_s + without.small_backward_s + without.vector_elements, 0.0);
  EXPECT_EQ(without.small_forward_calls + without.small_backward_calls, 0);
  EXPECT_DOUBLE_EQ(without.forward_all_reduce_s, c.forward_all_reduce_s);
  EXPECT_DOUBLE_EQ(without.all_gather_s, c.all_gather_s);
}

TEST(SmallCollectives, OneMemberGroupsIssueNothingAndTheLossReducesOverY) {
  Fixture f;
  const topo::Grid one_d{1, 4, 1, 2, 1};  // Megatron's 1D: the hidden group X has one member
  EXPECT_EQ(layer_collectives(f.fc1, one_d, f.bw, f.s).small_forward_calls, 0);
  model::Layer head = f.fc1;
  head.n = 256;
  head.bias = false;
  head.loss_after = true;
  const LayerCollectives c = layer_collectives(head, one_d, f.bw, f.s);
  // Over Y (4 members): the row maximum, one float per row, then the sum of exponentials
  // and the target logit in one call: t_AR(4, 4 * 4096 B) + t_AR(4, 8 * 4096 B).
  EXPECT_EQ(c.small_forward_calls, 2);
  EXPECT_NEAR(c.small_forward_s, ring_all_reduce_s(4, 4 * 4096.0, 1e9, 1e-4) + ring_all_reduce_s(4, 8 * 4096.0, 1e9, 1e-4),
              1e-15);
  EXPECT_EQ(c.small_backward_calls, 0);
  // In bf16 the loss still reduces fp32 logits: the same 4 bytes per row.
  LayerCommSettings bf16 = f.s;
  bf16.element_bytes = 2;
  EXPECT_NEAR(layer_collectives(head, one_d, f.bw, bf16).small_forward_s, c.small_forward_s, 1e-15);
  // Attention and embeddings have none.
  model::Layer attention;
  attention.kind = model::LayerKind::Attention;
  attention.heads = 4;
  attention.head_dim = 16;
  const LayerCollectives a = layer_collectives(attention, topo::Grid{2, 2, 1, 1, 1}, f.bw, f.s);
  EXPECT_EQ(a.small_forward_calls + a.small_backward_calls, 0);
}

TEST(SmallCollectives, TheThreeDLayoutSumsVectorsOverTheOtherRows) {
  Fixture f;
  topo::Grid g{2, 2, 2, 1, 1};
  g.layout = topo::TensorLayout::ThreeD;
  const LayerCollectives c = layer_collectives(f.fc1, g, f.bw, f.s);
  // The input's rows are also split over b = Y: 4096 / 2 / 2 = 1024 rows per statistic.
  EXPECT_NEAR(c.small_forward_s, ring_all_reduce_s(2, 16 * 1024.0, 1e9, 1e-4), 1e-15);
  // Backward: the norm's one, the bias (2048 entries) over a = X, gain and shift (512
  // each) over b = Y in one call.
  EXPECT_EQ(c.small_backward_calls, 1 + 1 + 1);
  EXPECT_NEAR(c.small_backward_s,
              ring_all_reduce_s(2, 8 * 1024.0, 1e9, 1e-4) + ring_all_reduce_s(2, 4 * 2048.0, 1e9, 1e-4) +
                  ring_all_reduce_s(2, 2 * 4 * 512.0, 1e9, 1e-4),
              1e-15);
}

TEST(SmallCollectives, OncePerStepTheVectorsAndTheLoss) {
  const AxisBandwidths bw{1e9, 1e9, 5e8, 2e8, 1e8};  // Z 0.5, pipe 0.2, data 0.1 GB/s
  const topo::Grid g{1, 1, 2, 2, 2};
  const StepCollectives s = step_small_collectives(1000, 4, g, bw, kAlpha);
  // Over Z x data (4 members, at the slower data group's 0.1 GB/s): the vectors' 4000 B
  // and the loss's 8 B; the loss over the pipeline (2 members).
  EXPECT_EQ(s.calls, 3);
  EXPECT_NEAR(s.seconds,
              ring_all_reduce_s(4, 4000, 1e8, 1e-4) + ring_all_reduce_s(4, 8, 1e8, 1e-4) +
                  ring_all_reduce_s(2, 8, 2e8, 1e-4),
              1e-15);
  EXPECT_EQ(step_small_collectives(1000, 4, topo::Grid{2, 2, 1, 1, 1}, bw, kAlpha).calls, 0);  // one replica
  topo::Grid three_d{2, 2, 2, 1, 1};
  three_d.layout = topo::TensorLayout::ThreeD;
  EXPECT_EQ(step_small_collectives(0, 4, three_d, bw, kAlpha).calls, 2);  // the loss over Z, and over X
  // ZeRO: the optimizer phase reduce-scatters and all-gathers the vectors (the same
  // seconds as one all-reduce, two calls); offloaded, in chunks of k x bsize elements.
  plan::OptimizerSettings zero;
  zero.zero = 1;
  const StepCollectives z = step_small_collectives(1000, 4, g, bw, kAlpha, zero);
  EXPECT_EQ(z.calls, 4);
  EXPECT_NEAR(z.seconds, s.seconds, 1e-15);
  plan::OptimizerSettings offload;
  offload.offload = true;
  offload.allreduce_coarsening = 2;
  offload.bucket_elements = 300;  // chunks of 600: 1000 elements in 2
  const StepCollectives o = step_small_collectives(1000, 4, g, bw, kAlpha, offload);
  EXPECT_EQ(o.calls, 4);
  EXPECT_NEAR(o.seconds, 2 * ring_all_reduce_s(4, 2000, 1e8, 1e-4) + ring_all_reduce_s(4, 8, 1e8, 1e-4) +
                             ring_all_reduce_s(2, 8, 2e8, 1e-4),
              1e-15);
}

TEST(SmallCollectives, EachGroupPaysItsOwnLatency) {
  const AxisBandwidths bw{1e9, 1e9, 5e8, 2e8, 1e8};
  // X and Z inside a node (1 ms per ring step), the pipeline and data across (3 ms, 5 ms
  // to tell them apart).
  const AxisLatencies alpha{1e-3, 1e-3, 1e-3, 3e-3, 5e-3};
  topo::Grid g{2, 1, 2, 2, 2};
  g.layout = topo::TensorLayout::ThreeD;
  const StepCollectives s = step_small_collectives(1000, 4, g, bw, alpha);
  // Over Z x data: the data group's latency (it spans Z's); the loss over X: X's; over
  // the pipeline: the pipeline's.
  EXPECT_EQ(s.calls, 4);
  EXPECT_NEAR(s.seconds,
              ring_all_reduce_s(4, 4000, 1e8, 5e-3) + ring_all_reduce_s(4, 8, 1e8, 5e-3) +
                  ring_all_reduce_s(2, 8, 1e9, 1e-3) + ring_all_reduce_s(2, 8, 2e8, 3e-3),
              1e-15);
  // Without a data group, Z x data is Z alone, at Z's latency.
  const topo::Grid z_only{1, 1, 2, 1, 1};
  EXPECT_NEAR(step_small_collectives(0, 4, z_only, bw, alpha).seconds, ring_all_reduce_s(2, 8, 5e8, 1e-3), 1e-15);
}

TEST(SmallCollectives, ThePassClockChargesEachCall) {
  LayerTimes l;
  l.forward_s = l.backward_input_s = 1;
  l.comm.small_forward_s = 0.01, l.comm.small_forward_calls = 2;
  l.comm.small_backward_s = 0.02, l.comm.small_backward_calls = 1;
  l.comm.sync_call_s = 0.1;
  StageSchedule s;
  s.activation_checkpointing = false;
  s.overlap = plan::OverlapSettings::synchronous();
  s.data_all_reduce = false;
  const StageTime st = stage_time({l}, s);
  EXPECT_DOUBLE_EQ(st.batch_s, 1 + 0.01 + 2 * 0.1 + 1 + 0.02 + 0.1);
  EXPECT_DOUBLE_EQ(st.sync_wait_s, 3 * 0.1);
}

// gpt-tiny (2 blocks) on Gx = 2: each block's two norms (1 forward call each, again in
// the recompute, and 1 backward), the final norm's 1 + 1; the loss has Gy = 1.
TEST(SmallCollectives, TheEvaluatorCountsAStepsCalls) {
  const model::ModelDescription m = model::load_model("gpt-tiny");
  const topo::Topology t = topo::load_topology("perlmutter");
  PlannerOptions o;
  o.gpus = 4;
  o.batch_seqs = 8;
  o.memory_limit = false;
  const Evaluation e = evaluate(m, t, topo::Grid{2, 1, 1, 2, 1}, o);
  ASSERT_TRUE(e.feasible);
  const int64_t per_microbatch = 2 * 2 * (2 * 1 + 1) + (1 + 1);
  EXPECT_EQ(e.small_calls, e.microbatches * per_microbatch + 2);  // + the vectors and the loss over data
  EXPECT_GT(e.comm.small, 0.0);
  // The 3d layout on 2 x 2 x 2: per block, each norm's 2 x 1 + 1 and its gain and shift
  // over Y (1), each of the 4 biases over its rows' group (1); the head's norm 1 + 1 + 1
  // and the loss's 2; once per step the vectors and the loss over Z, and the loss over X.
  topo::Grid cube{2, 2, 2, 1, 1};
  cube.layout = topo::TensorLayout::ThreeD;
  const Evaluation c = evaluate(m, t, cube, o);
  ASSERT_TRUE(c.feasible);
  EXPECT_EQ(c.small_calls, c.microbatches * (2 * (2 * (3 + 1) + 4) + (3 + 2)) + 3);
  // A pipeline's first stage: its blocks' norms, no head; the loss over the pipeline.
  const Evaluation p2 = evaluate(m, t, topo::Grid{2, 1, 1, 1, 2}, o);
  ASSERT_TRUE(p2.feasible);
  ASSERT_EQ(p2.stage_units.size(), 2u);
  EXPECT_EQ(p2.small_calls, p2.microbatches * p2.stage_units[0] * 2 * (2 * 1 + 1) + 1);
  PlannerOptions paper = o;
  paper.comm_model = CommModel::Paper;
  const Evaluation p = evaluate(m, t, topo::Grid{2, 1, 1, 2, 1}, paper);
  EXPECT_EQ(p.small_calls, 0);
  EXPECT_EQ(p.comm.small, 0.0);
}

}  // namespace
}  // namespace axonn::planner
