// Sequence parallelism against serial LibTorch under real mpirun (part of
// runtime_mpi_tests: 1, 2, 4 and 8 ranks):
//  - ring self-attention (runtime/ring_attention.hpp): the sequence split over the whole
//    world, and over groups of 2 (several sequence groups side by side, each with its own
//    data, as with data parallelism). Causal and not; outputs and the gradients of Q, K
//    and V within rel. err 1e-5 of the serial attention on the whole sequence;
//  - the sequence mode's runtime entry (tensor_ops(grid)): the ring and the sequence
//    group for a grid with a sequence group, causal attention and the tensor group else;
//  - the GPT in the sequence mode (Grid::sequence) on every layout of the world: loss
//    and every gradient within 1e-5 of serial, with and without activation
//    checkpointing, and 20 training steps on the serial loss curve.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <optional>

#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/runtime/attention.hpp"
#include "axonn/runtime/ring_attention.hpp"
#include "axonn/runtime/tensor_ops.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;

namespace {

struct Attention {
  at::Tensor out, dq, dk, dv;
};

// softmax(Q K^T / sqrt(d) + mask) V on the whole sequence, and its gradients for `dout`.
Attention serial_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
                           bool causal) {
  at::Tensor qs = q.clone().requires_grad_(), ks = k.clone().requires_grad_(), vs = v.clone().requires_grad_();
  at::Tensor scores = at::matmul(qs, ks.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(q.size(2))));
  if (causal) {
    const int64_t len = q.size(1);
    scores = scores.masked_fill(at::ones({len, len}, q.options().dtype(at::kBool)).triu(1), -INFINITY);
  }
  at::Tensor out = at::matmul(at::softmax(scores, -1), vs);
  out.backward(dout);
  return {out.detach(), qs.grad(), ks.grad(), vs.grad()};
}

// Every member of `group` holds chunk group.rank() of a sequence drawn from `seed`.
void expect_ring_equals_serial(runtime::Communicator& group, uint64_t seed, bool causal) {
  const int64_t members = group.size(), chunk = 3, heads_batch = 6, head_dim = 8, len = members * chunk;
  torch::manual_seed(seed);
  const at::Tensor q = at::randn({heads_batch, len, head_dim}), k = at::randn({heads_batch, len, head_dim}),
                   v = at::randn({heads_batch, len, head_dim}), dout = at::randn({heads_batch, len, head_dim});
  const Attention ref = serial_attention(q, k, v, dout, causal);

  auto mine = [&](const at::Tensor& t) { return t.narrow(1, group.rank() * chunk, chunk).contiguous(); };
  at::Tensor ql = mine(q).requires_grad_(), kl = mine(k).requires_grad_(), vl = mine(v).requires_grad_();
  runtime::Tracer tracer;
  tracer.begin_step();
  at::Tensor out = runtime::ring_self_attention(group, ql, kl, vl, causal, &tracer);
  out.backward(mine(dout));
  const runtime::OverlapBreakdown traced = tracer.end_step();
  const std::string where = "member " + std::to_string(group.rank()) + " of " + std::to_string(members) +
                            (causal ? ", causal" : ", not causal");
  // Every shift's wait is a p2p_seq span: 2(N-1) forward (K, V), N-1 + N backward.
  const auto ring = traced.by_kind.find("p2p_seq");
  if (members == 1) {
    EXPECT_EQ(ring, traced.by_kind.end()) << where;
  } else {
    ASSERT_NE(ring, traced.by_kind.end()) << where;
    EXPECT_EQ(ring->second.count, 2 * (members - 1) + 2 * members - 1) << where;
    EXPECT_GE(ring->second.busy_s, 0.0) << where;
  }
  EXPECT_LT(relative_error(out, mine(ref.out)), 1e-5) << where;
  EXPECT_LT(relative_error(ql.grad(), mine(ref.dq)), 1e-5) << where;
  EXPECT_LT(relative_error(kl.grad(), mine(ref.dk)), 1e-5) << where;
  EXPECT_LT(relative_error(vl.grad(), mine(ref.dv)), 1e-5) << where;
  // The chunks received never land in the inputs (which autograd saved for backward).
  EXPECT_TRUE(ql.equal(mine(q)) && kl.equal(mine(k)) && vl.equal(mine(v))) << where;
}

}  // namespace

TEST(RingSelfAttention, EqualsSerialAttentionOverTheWorld) {
  for (bool causal : {true, false}) expect_ring_equals_serial(*g_world, 31, causal);
}

TEST(RingSelfAttention, EqualsSerialAttentionInGroupsOfTwo) {
  if (g_world->size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  const int group_index = g_world->rank() / 2;
  auto group = g_world->split(group_index, g_world->rank(), "sequence");
  ASSERT_EQ(group->size(), 2);
  // Each group its own sequence, as data-parallel replicas have.
  for (bool causal : {true, false}) expect_ring_equals_serial(*group, 100 + group_index, causal);
}

TEST(RingSelfAttention, CausalMaskUsesGlobalPositions) {
  // Every member holds a query (the first of its chunk) that the mask keeps from a key
  // it sees unmasked, so the two results differ on every member.
  const int64_t members = g_world->size(), chunk = 2;
  torch::manual_seed(7);
  const at::Tensor full = at::randn({1, members * chunk, 4});
  const at::Tensor mine = full.narrow(1, g_world->rank() * chunk, chunk).contiguous();
  const at::Tensor masked = runtime::ring_self_attention(*g_world, mine, mine, mine, true);
  const at::Tensor open = runtime::ring_self_attention(*g_world, mine, mine, mine, false);
  // The first query of the first member sees only itself: its output is its own value.
  if (g_world->rank() == 0) {
    EXPECT_LT(relative_error(masked[0][0], mine[0][0]), 1e-6);
  }
  EXPECT_GT(relative_error(masked, open), 1e-3);
}

TEST(RingSelfAttention, RefusesMismatchedShapes) {
  const at::Tensor a = at::zeros({2, 3, 4}), b = at::zeros({2, 3, 5});
  try {
    runtime::ring_self_attention(*g_world, a, b, a, true);
    FAIL() << "accepted mismatched shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ring_self_attention"), std::string::npos) << e.what();
  }
}

// The sequence mode's runtime entry (runtime/tensor_ops.hpp): a grid with a sequence
// group gets the ring as its attention and the sequence group as its lockstep group,
// other grids causal attention and the tensor group. The packed ring attention on each
// member's chunk of positions is causal attention on the whole sequence.
TEST(Sequence, TheGridsEntryRunsTheRingOverItsSequenceGroup) {
  const int64_t n = g_world->size();
  if (n < 2) GTEST_SKIP() << "no sequence group on one rank";
  topo::Grid g{1, 1, 1, n, 1};
  g.sequence = n;
  ProcessGrid pg(*g_world, g, topo::default_order());
  const topo::Grid without{1, 1, 1, n, 1};  // named: g++ 13 warns of a reference from a call on a temporary
  const runtime::TensorOps &ring = runtime::tensor_ops(g), &plain = runtime::tensor_ops(without);
  EXPECT_EQ(&plain, &runtime::tensor_ops(topo::TensorLayout::Axonn3d));
  EXPECT_NE(ring.attention, plain.attention);
  EXPECT_EQ(ring.linear, plain.linear);  // AxoNN's operators otherwise
  EXPECT_EQ(&ring.lockstep_group(pg), &pg.sequence());
  EXPECT_EQ(&plain.lockstep_group(pg), &pg.tensor());
  EXPECT_EQ(pg.sequence().size(), n);

  const int64_t chunk = 3, heads = 2, width = 8, len = n * chunk;
  torch::manual_seed(41);
  const at::Tensor qkv = at::randn({2, len, 3 * width});
  const at::Tensor whole = runtime::causal_attention(qkv, heads);
  const at::Tensor mine =
      runtime::sequence_attention(pg.sequence(), qkv.narrow(1, pg.sequence().rank() * chunk, chunk).contiguous(),
                                  heads, nullptr);
  EXPECT_LT(relative_error(mine, whole.narrow(1, pg.sequence().rank() * chunk, chunk)), 1e-5);
}

// The sequence mode in the GPT: every layout of the world with a sequence group of 2 or
// more (gx = gy = gz = 1; with data parallelism and pipelines where ranks allow).
namespace {

struct SequenceCase {
  model::ModelDescription desc = model::model_from_json(
      nlohmann::json::parse(R"({"name": "gpt-seq", "family": "gpt", "num_layers": 4, "hidden": 32, "heads": 4,
          "seq_len": 16, "vocab": 64, "ffn_multiplier": 4})"),
      "gpt-seq");
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  int64_t seqs = 8;
};

std::vector<plan::Plan> sequence_plans(const SequenceCase& c, std::vector<std::string>* skipped) {
  return plans_on(planner::enumerate_mode_grids("sequence", g_world->size()), c.desc, c.seqs, skipped);
}

}  // namespace

TEST(Sequence, LossAndEveryGradientMatchSerialOnEveryLayout) {
  SequenceCase c;
  std::vector<std::string> skipped;
  const auto plans = sequence_plans(c, &skipped);
  if (g_world->size() > 1) {
    EXPECT_FALSE(plans.empty());
  }
  SerialStep ref(c.cfg, c.seqs, 5, 3);
  // With checkpointing the recompute runs the ring again.
  expect_plans_equal_serial(plans, skipped, c.cfg, ref, "sequence", [](const plan::Plan&, gpt::GptStage&) {});
}

TEST(Sequence, TwentyTrainingStepsFollowTheSerialLossCurve) {
  SequenceCase c;
  SerialRun ref(c.cfg, c.seqs, 25, 26);
  std::vector<std::string> skipped;
  for (const auto& p : sequence_plans(c, &skipped)) {
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptStage run(p, pg, c.cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
    EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4) << describe_plan(p);
  }
  EXPECT_TRUE(ref.trained());
}
