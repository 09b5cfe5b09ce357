// The sequence mode's cost model (docs/model.md section 13): its grids, its ring in the
// layer's collectives, compute and memory of a member, divisibility, and the ranking of
// --tensor-mode sequence / all.
#include <gtest/gtest.h>

#include <algorithm>

#include "axonn/planner/collectives.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

topo::Grid sequence_grid(int64_t t, int64_t replicas, int64_t ginter) {
  topo::Grid g{1, 1, 1, t * replicas, ginter};
  g.sequence = t;
  return g;
}

PlannerOptions sequence_options(int64_t gpus, int64_t seqs) {
  PlannerOptions o;
  o.gpus = gpus;
  o.batch_seqs = seqs;
  return o;
}

}  // namespace

TEST(SequenceModel, GridsAreTheDataAxisSplitByEachGroupSize) {
  std::vector<std::string> got;
  for (const auto& g : enumerate_mode_grids("sequence", 8)) got.push_back(g.to_string());
  // (1,1,1,gdata,ginter) in enumerate_grids' order, each sequence group >= 2 dividing gdata.
  std::vector<std::string> want;
  for (const auto& g : enumerate_grids(8))
    if (g.gx * g.gy * g.gz == 1)
      for (int64_t n : {2, 4, 8})
        if (g.gdata % n == 0) want.push_back(sequence_grid(n, g.gdata / n, g.ginter).to_string());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.size(), 6u);  // gdata 8: 2, 4, 8; gdata 4: 2, 4; gdata 2: 2
  EXPECT_EQ(sequence_grid(4, 2, 1).replicas(), 2);
}

TEST(SequenceModel, AttentionPaysTheRingAndNothingElse) {
  model::Layer attention;
  attention.kind = model::LayerKind::Attention;
  attention.heads = 16;
  attention.head_dim = 64;
  AxisBandwidths bw{1e9, 1e9, 1e9, 1e9, 1e9};
  LayerCommSettings s;
  s.tokens = 4 * 512;  // a member's rows: 4 sequences of a 2048-token sequence split over 4
  s.element_bytes = 2;
  s.sequence_latency_s = 1e-5;  // the ring's own latency, not an axis's
  s.latency_s.fill(1e-3);
  s.sequence_bw = 50e9;
  const double chunk = 2.0 * 4 * 512 * 16 * 64;  // w * tokens * heads * head_dim bytes
  const LayerCollectives c = layer_collectives(attention, sequence_grid(4, 2, 1), bw, s);
  EXPECT_DOUBLE_EQ(c.ring_forward_s, 6 * (chunk / 50e9 + 1e-5));       // 2(t-1) shifts of C
  EXPECT_DOUBLE_EQ(c.ring_backward_s, 7 * (2 * chunk / 50e9 + 1e-5));  // (2t-1) shifts of 2C
  EXPECT_EQ(c.forward_all_reduce_s + c.input_grad_all_reduce_s + c.all_gather_s + c.data_all_reduce_s, 0.0);
  // Per step: 3 micro-batches, the forward twice (recompute).
  const plan::CommBreakdown step = comm_per_step(c, 3, 2, 2);
  EXPECT_DOUBLE_EQ(step.p2p_seq, 3 * (2 * c.ring_forward_s + c.ring_backward_s));
  EXPECT_DOUBLE_EQ(step.total(), step.p2p_seq);
  // Without a sequence group attention costs nothing, as before.
  EXPECT_EQ(layer_comm(attention, topo::Grid{1, 1, 1, 8, 1}, bw, s).total(), 0.0);
}

TEST(SequenceModel, AMemberComputesItsQueriesAgainstEveryKey) {
  model::Layer attention;
  attention.kind = model::LayerKind::Attention;
  attention.heads = 8;
  attention.head_dim = 64;
  const auto seq = forward_matmuls(attention, sequence_grid(4, 1, 1), 2, 1024);
  ASSERT_EQ(seq.size(), 2u);
  // Q K^T: [256 x 64] [64 x 1024]; P V: [256 x 1024] [1024 x 64]; batch 2 sequences x 8 heads.
  EXPECT_EQ(seq[0].m, 256);
  EXPECT_EQ(seq[0].n, 1024);
  EXPECT_EQ(seq[1].k, 1024);
  EXPECT_EQ(seq[0].batch, 16);
  model::Layer fc;
  fc.k = 512;
  fc.n = 2048;
  EXPECT_EQ(forward_matmuls(fc, sequence_grid(4, 1, 1), 2, 1024)[0].m, 2 * 256);  // a member's rows
}

TEST(SequenceModel, ComputeAndMemoryAreADataParallelRanksWithTheSameTokens) {
  // gpt-20b on 32 GPUs, 32 sequences: a member of a sequence group of 4 (8 replicas of 4
  // sequences) holds the tokens of one sequence of 2048, as a rank of plain data
  // parallelism over 32 with 1 sequence does. Linear layers and attention do the same
  // work, so compute and memory agree; the sequence grid also pays its ring.
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o = sequence_options(32, 32);
  o.memory_limit = false;
  const Evaluation dp = evaluate(m, t, topo::Grid{1, 1, 1, 32, 1}, o);
  const Evaluation seq = evaluate(m, t, sequence_grid(4, 8, 1), o);
  ASSERT_TRUE(dp.feasible) << dp.rejected_because;
  ASSERT_TRUE(seq.feasible) << seq.rejected_because;
  EXPECT_NEAR(seq.compute_s / dp.compute_s, 1.0, 0.05);
  EXPECT_NEAR(seq.memory.activation_bytes / dp.memory.activation_bytes, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(seq.memory.total_bytes() - seq.memory.activation_bytes,
                   dp.memory.total_bytes() - dp.memory.activation_bytes);
  EXPECT_EQ(dp.comm.p2p_seq, 0.0);
  EXPECT_GT(seq.comm.p2p_seq, 0.0);
  EXPECT_GT(seq.batch_s, dp.batch_s);  // the same work plus the ring (modeled as exposed)
}

TEST(SequenceModel, OtherStagesRingsShareTheLinkWhileTheirStagesAreNotComputing) {
  // gpt-bench on 2 nodes of 4, grid 1,1,1,2,4 with sequence 2: each node's link carries
  // the rings of the 4 stages (docs/model.md section 13). With no compute between their
  // transfers the other 3 are there whenever their stages run their passes, M of the
  // M + 3 slots of the step (M micro-batches); with compute that dwarfs them, the ring
  // runs as if alone. The bandwidths, and so the ring alone, are the same.
  const auto m = model::load_model("gpt-bench");
  PlannerOptions o = sequence_options(8, 16);
  o.memory_limit = false;
  double microbatches = 0;
  auto ring_with_flops = [&](double flops_per_s) {
    topo::Topology t = topo::load_topology("perlmutter");
    t.peak_flops_per_s = flops_per_s;
    const Evaluation e = evaluate(m, t, sequence_grid(2, 1, 4), o);
    EXPECT_TRUE(e.feasible) << e.rejected_because;
    microbatches = static_cast<double>(e.microbatches);
    return e.comm.p2p_seq;
  };
  const double instant = ring_with_flops(1e30), slow = ring_with_flops(1e3);
  const double real = ring_with_flops(topo::load_topology("perlmutter").peak_flops_per_s);
  ASSERT_GT(microbatches, 1);
  EXPECT_NEAR(instant / slow, 1.0 + 3.0 * microbatches / (microbatches + 3.0), 1e-3);
  // Alone, the ring has its stage's share of the link, here all of it (one ring per
  // stage on a node): what the placement-agnostic model, beta_inter for every group,
  // charges it.
  PlannerOptions agnostic = o;
  agnostic.placement_aware = false;
  topo::Topology t1 = topo::load_topology("perlmutter");
  t1.peak_flops_per_s = 1e3;
  EXPECT_NEAR(slow / evaluate(m, t1, sequence_grid(2, 1, 4), agnostic).comm.p2p_seq, 1.0, 1e-6);
  EXPECT_GT(real, slow * 1.0001);
  EXPECT_LT(real, instant * 0.9999);
  // Without a pipeline nothing changes with the compute.
  topo::Topology t = topo::load_topology("perlmutter");
  const double alone = evaluate(m, t, sequence_grid(4, 2, 1), o).comm.p2p_seq;
  t.peak_flops_per_s = 1e30;
  EXPECT_DOUBLE_EQ(evaluate(m, t, sequence_grid(4, 2, 1), o).comm.p2p_seq, alone);
}

TEST(SequenceModel, RejectsWhatItCannotSplit) {
  const auto m = model::load_model("gpt-20b");  // seq_len 2048
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o = sequence_options(24, 24);
  o.memory_limit = false;
  const Evaluation three = evaluate(m, t, sequence_grid(3, 8, 1), o);
  EXPECT_FALSE(three.feasible);
  EXPECT_NE(three.rejected_because.find("sequence length=2048 is not divisible by the sequence group=3"),
            std::string::npos)
      << three.rejected_because;
  o = sequence_options(32, 6);  // 6 sequences over 8 replicas
  o.memory_limit = false;
  const Evaluation batch = evaluate(m, t, sequence_grid(4, 8, 1), o);
  EXPECT_FALSE(batch.feasible);
  EXPECT_NE(batch.rejected_because.find("replicas=8"), std::string::npos) << batch.rejected_because;
  topo::Grid tensor{2, 1, 1, 16, 1};
  tensor.sequence = 2;
  const Evaluation mixed = evaluate(m, t, tensor, sequence_options(32, 32));
  EXPECT_NE(mixed.rejected_because.find("needs gx = gy = gz = 1"), std::string::npos) << mixed.rejected_because;
}

TEST(SequenceModel, TensorModesRankAloneOrTogether) {
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o = sequence_options(32, 16);
  const Ranking axonn = rank_candidates(m, t, o);
  o.tensor_modes = {"axonn3d", "sequence"};
  const Ranking all = rank_candidates(m, t, o);
  o.tensor_modes = {"sequence"};
  const Ranking seq = rank_candidates(m, t, o);
  // Sequence grids: 32 GPUs = gdata x ginter, a group of 2 or more dividing gdata.
  EXPECT_EQ(seq.feasible.size() + seq.rejected.size(), enumerate_mode_grids("sequence", 32).size());
  for (const auto& r : {seq.feasible, seq.rejected})
    for (const auto& e : r) EXPECT_GT(e.grid.sequence, 1) << e.grid.to_string();
  EXPECT_EQ(all.feasible.size(), axonn.feasible.size() + seq.feasible.size());
  EXPECT_EQ(all.rejected.size(), axonn.rejected.size() + seq.rejected.size());
  for (size_t i = 1; i < all.feasible.size(); ++i) EXPECT_LE(all.feasible[i - 1].batch_s, all.feasible[i].batch_s);
  // The default ranking has no sequence grid, and every axonn3d candidate keeps its time.
  for (const auto& e : axonn.feasible) {
    EXPECT_EQ(e.grid.sequence, 1);
    auto it = std::find_if(all.feasible.begin(), all.feasible.end(), [&](const Evaluation& x) { return x.grid == e.grid; });
    ASSERT_NE(it, all.feasible.end());
    EXPECT_EQ(it->batch_s, e.batch_s);
  }
  ASSERT_FALSE(seq.feasible.empty());
  EXPECT_EQ(strategy_label(seq.feasible.front()), "sequence " + std::to_string(seq.feasible.front().grid.sequence));
}

// Megatron's 1D is AxoNN's 3D on 1,t,1: the same grids, costs and label "1d".
TEST(OneDModel, IsAxonn3dOnTheYAxisAlone) {
  const auto m = model::load_model("gpt-20b");
  const auto t = topo::load_topology("perlmutter");
  PlannerOptions o = sequence_options(32, 16);
  const Ranking axonn = rank_candidates(m, t, o);
  o.tensor_modes = {"1d"};
  const Ranking one_d = rank_candidates(m, t, o);
  EXPECT_EQ(one_d.feasible.size() + one_d.rejected.size(), enumerate_mode_grids("1d", 32).size());
  ASSERT_FALSE(one_d.feasible.empty());
  for (const auto& e : one_d.feasible) {
    EXPECT_EQ(e.grid.gx * e.grid.gz, 1);
    EXPECT_GT(e.grid.gy, 1);
    EXPECT_EQ(strategy_label(e), "1d");
    auto it = std::find_if(axonn.feasible.begin(), axonn.feasible.end(), [&](const Evaluation& x) { return x.grid == e.grid; });
    ASSERT_NE(it, axonn.feasible.end()) << e.grid.to_string();
    EXPECT_EQ(it->batch_s, e.batch_s);
    EXPECT_EQ(strategy_label(*it), "1d");  // labeled so in every ranking
  }
  // Column-parallel, then row-parallel: a pair's forward all-reduce is over Y, its
  // backward's too, and nothing goes over X or Z.
  const Evaluation& best = one_d.feasible.front();
  EXPECT_EQ(best.comm.ar_x + best.comm.ag_z + best.comm.rs_z, 0.0);
  EXPECT_GT(best.comm.ar_y, 0.0);
  EXPECT_EQ(strategy_label(evaluate(m, t, topo::Grid{2, 2, 1, 8, 1}, sequence_options(32, 16))), "4d");
}
