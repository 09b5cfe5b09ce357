// The compute model (local matmul shapes and times) and the stage timeline, on
// hand-computed cases (docs/model.md sections 7 and 8).
#include <gtest/gtest.h>

#include "axonn/common/error.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/explain.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::planner {
namespace {

model::Layer linear(int64_t k, int64_t n, bool transposed) {
  model::Layer l;
  l.kind = model::LayerKind::Linear;
  l.k = k;
  l.n = n;
  l.role = transposed ? model::LinearRole::Row : model::LinearRole::Column;
  return l;
}

TEST(ComputeModel, LinearShapesFollowTheGrid) {
  // fc1 of gpt-bench (256 -> 1024, normal) on (2,2,2): rows 16*128/2, k/Gx, n/Gy.
  const topo::Grid g{2, 2, 2, 1, 1};
  EXPECT_EQ(forward_matmuls(linear(256, 1024, false), g, 16, 128), (std::vector<MatmulShape>{{1024, 128, 512, 1}}));
  EXPECT_EQ(backward_input_matmuls(linear(256, 1024, false), g, 16, 128),
            (std::vector<MatmulShape>{{1024, 512, 128, 1}}));
  EXPECT_EQ(backward_weight_matmuls(linear(256, 1024, false), g, 16, 128),
            (std::vector<MatmulShape>{{128, 1024, 512, 1}}));
  // fc2 (1024 -> 256, transposed) on Gx = 2, Gy = 4: k splits over Y, n over X.
  EXPECT_EQ(forward_matmuls(linear(1024, 256, true), topo::Grid{2, 4, 1, 1, 1}, 4, 128),
            (std::vector<MatmulShape>{{512, 256, 128, 1}}));
}

TEST(ComputeModel, AttentionHeadsSplitOverYAndSequencesOverZ) {
  model::Layer a;
  a.kind = model::LayerKind::Attention;
  a.heads = 8;
  a.head_dim = 32;
  // 16 sequences over Gz = 2, 8 heads over Gy = 2: 8 * 4 = 32 products each.
  const auto f = forward_matmuls(a, topo::Grid{2, 2, 2, 1, 1}, 16, 128);
  EXPECT_EQ(f, (std::vector<MatmulShape>{{128, 32, 128, 32}, {128, 128, 32, 32}}));
  EXPECT_DOUBLE_EQ(f[0].flops(), 2.0 * 32 * 128 * 32 * 128);
  EXPECT_EQ(backward_input_matmuls(a, topo::Grid{2, 2, 2, 1, 1}, 16, 128).size(), 3u);
  EXPECT_EQ(backward_weight_matmuls(a, topo::Grid{2, 2, 2, 1, 1}, 16, 128).size(), 1u);
}

TEST(ComputeModel, MatmulTimeUsesTheTableThenTheFit) {
  topo::Topology t;
  t.peak_flops_per_s = 1e12;
  const MatmulShape s{100, 200, 300, 1};  // 1.2e7 FLOP
  EXPECT_DOUBLE_EQ(matmul_s(t, s), 1.2e7 / 1e12);  // no calibration: peak, no overhead
  t.compute.matmul_flops_per_s = 1e10;
  t.compute.matmul_overhead_s = 1e-4;
  EXPECT_DOUBLE_EQ(matmul_s(t, s), 1e-4 + 1.2e-3);
  t.compute.matmul_table.push_back({100, 200, 300, 1, 0.5});
  EXPECT_DOUBLE_EQ(matmul_s(t, s), 0.5);
  EXPECT_DOUBLE_EQ(matmul_s(t, {100, 200, 300, 2}), 1e-4 + 2.4e-3);  // batch differs: the fit
}

StageSchedule schedule(int level, bool checkpointing = false, int64_t microbatches = 1) {
  StageSchedule s;
  s.overlap = plan::OverlapSettings::level(level, 0);
  s.activation_checkpointing = checkpointing;
  s.microbatches = microbatches;
  return s;
}

TEST(ComputeModel, ElementwiseWorkFollowsTheLayerFlags) {
  topo::Topology t;
  t.peak_flops_per_s = 1e12;
  t.compute.elementwise = {{"layer_norm", {1, 2}}, {"bias", {3, 4}}, {"gelu", {5, 6}}, {"softmax", {7, 8}},
                           {"adam", {9, 0}}};
  const auto m = model::load_model("gpt-bench");  // hidden 256, ffn 1024, 8 heads, seq 128
  const model::Layer* fc1 = nullptr;
  const model::Layer* att = nullptr;
  for (const auto& l : m.layers) {
    if (l.name == "block0.fc1") fc1 = &l;
    if (l.name == "block0.attention") att = &l;
  }
  ASSERT_TRUE(fc1 && att);
  EXPECT_TRUE(fc1->norm_before && fc1->bias && fc1->gelu_after && !fc1->residual_after);
  const topo::Grid g{2, 2, 2, 1, 1};
  // fc1 on (2,2,2), 16 sequences: rows 1024, input 1024*128 (layer norm), output 1024*512.
  const ElementwiseTime e = elementwise_s(t, *fc1, g, 16, 128);
  EXPECT_DOUBLE_EQ(e.forward_s, 131072.0 * 1 + 524288.0 * (3 + 5));
  EXPECT_DOUBLE_EQ(e.backward_s, 131072.0 * 2 + 524288.0 * (4 + 6));
  // attention: (16/2) sequences * (8/2) heads * 128 * 128 scores.
  EXPECT_DOUBLE_EQ(elementwise_s(t, *att, g, 16, 128).forward_s, 524288.0 * 7);
  EXPECT_DOUBLE_EQ(optimizer_s(t, *fc1, g), 256.0 * 1024 / 8 * 9);
  EXPECT_DOUBLE_EQ(gradient_accumulation_s(t, *fc1, g), 0.0);  // not measured, no bandwidth: free
  t.compute.elementwise["grad_accumulate"] = {11, 0};
  EXPECT_DOUBLE_EQ(gradient_accumulation_s(t, *fc1, g), 256.0 * 1024 / 8 * 11);  // the local shard's elements
  EXPECT_DOUBLE_EQ(gradient_accumulation_s(t, *att, g), 0.0);                      // no weight
  t.compute.elementwise.clear();  // not calibrated: no element-wise time
  EXPECT_DOUBLE_EQ(elementwise_s(t, *fc1, g, 16, 128).forward_s, 0.0);
}

// The runtime normalizes with LibTorch's fused kernel where the hidden dimension is whole
// and with separate passes where it is split over a group (runtime/split_layer_norm.hpp):
// the layer norm is charged layer_norm's or layer_norm_split's rates by the layout's
// hidden axis (AxoNN 3D and 3d: X; 2d: Y), and layer_norm's where the topology lacks the
// split form's.
TEST(ComputeModel, TheLayerNormIsChargedTheSplitFormWhereItsHiddenGroupIsSplit) {
  const auto m = model::load_model("gpt-bench");  // hidden 256, ffn 1024, seq 128
  const model::Layer* fc1 = nullptr;
  for (const auto& l : m.layers)
    if (l.name == "block0.fc1") fc1 = &l;
  ASSERT_TRUE(fc1 && fc1->norm_before);
  topo::Topology fused, split, norm_only;
  fused.peak_flops_per_s = split.peak_flops_per_s = norm_only.peak_flops_per_s = 1e12;
  fused.compute.elementwise = {{"layer_norm", {1, 2}}, {"bias", {3, 4}}, {"gelu", {5, 6}}};
  split.compute.elementwise = fused.compute.elementwise;
  split.compute.elementwise["layer_norm_split"] = {10, 20};
  norm_only.compute.elementwise = {{"layer_norm", {1, 2}}};
  auto grid = [](int64_t gx, int64_t gy, int64_t gz, int64_t gdata, topo::TensorLayout layout, int64_t sequence = 1) {
    topo::Grid g{gx, gy, gz, gdata, 1};
    g.layout = layout, g.sequence = sequence;
    return g;
  };
  using L = topo::TensorLayout;
  struct Case {
    topo::Grid g;
    bool hidden_split;
    double elements;  // the norm's input on one rank, by hand: rows x columns
  };
  const std::vector<Case> cases = {
      {grid(2, 2, 2, 1, L::Axonn3d), true, 1024.0 * 128},      // X = 2: rows 2048/Z, k/X
      {grid(1, 2, 2, 2, L::Axonn3d), false, 1024.0 * 256},     // X = 1: the fused kernel
      {grid(1, 8, 1, 1, L::Axonn3d), false, 2048.0 * 256},     // 1d: Y splits the weights, not the columns
      {grid(1, 1, 1, 2, L::Axonn3d, 2), false, 1024.0 * 256},  // sequence: half of each sequence's rows
      {grid(1, 2, 2, 1, L::TwoD), true, 1024.0 * 128},         // 2d: the block k/(X Y) of rows/Z
      {grid(1, 2, 2, 1, L::TwoDBroadcast), true, 1024.0 * 128},
      {grid(2, 2, 2, 1, L::ThreeD), true, 512.0 * 128},        // 3d: rows/(Z Y), k/X
  };
  for (const auto& c : cases) {
    // The layer norm's elements of this grid: the only term of norm_only, at 1 s each forward.
    const double elements = elementwise_s(norm_only, *fc1, c.g, 16, 128).forward_s;
    ASSERT_DOUBLE_EQ(elements, c.elements) << c.g.to_string();
    const ElementwiseTime a = elementwise_s(fused, *fc1, c.g, 16, 128), b = elementwise_s(split, *fc1, c.g, 16, 128);
    EXPECT_DOUBLE_EQ(b.forward_s - a.forward_s, c.hidden_split ? elements * (10 - 1) : 0.0) << c.g.to_string();
    EXPECT_DOUBLE_EQ(b.backward_s - a.backward_s, c.hidden_split ? elements * (20 - 2) : 0.0) << c.g.to_string();
  }
  // Not measured anywhere: the roofline's bytes, 24 and 42 per element split, 4 and 6 fused.
  topo::Topology roofline;
  roofline.peak_flops_per_s = 1e12;
  roofline.compute.memory_bytes_per_s = 1e9;
  const model::Layer norm_layer = [&] {
    model::Layer l = *fc1;
    l.bias = l.gelu_after = false;
    return l;
  }();
  for (const auto& c : cases) {
    const double elements = elementwise_s(norm_only, norm_layer, c.g, 16, 128).forward_s;
    const ElementwiseTime r = elementwise_s(roofline, norm_layer, c.g, 16, 128);
    EXPECT_DOUBLE_EQ(r.forward_s, elements * (c.hidden_split ? 24 : 4) / 1e9) << c.g.to_string();
    EXPECT_DOUBLE_EQ(r.backward_s, elements * (c.hidden_split ? 42 : 6) / 1e9) << c.g.to_string();
  }
}

// The gradient accumulation is charged once per backward pass: a step of M micro-batches
// on one stage costs M times each layer's, inside the passes' compute.
TEST(ComputeModel, GradientAccumulationIsChargedPerBackwardPass) {
  const auto m = model::load_model("gpt-bench");
  topo::Topology t = topo::load_topology("dgx-h100");  // measured element-wise costs, grad_accumulate not among them
  ASSERT_EQ(t.compute.elementwise.count("grad_accumulate"), 0u);
  const topo::Grid g{1, 2, 2, 1, 1};
  PlannerOptions o;
  o.gpus = 4;
  o.microbatch_seqs = 2;
  for (const int64_t batch : {int64_t{2}, int64_t{8}}) {  // 1 and 4 micro-batches
    o.batch_seqs = batch;
    topo::Topology fused = t;
    fused.compute.elementwise["grad_accumulate"] = {0, 0};  // fused into the dW product
    const Evaluation with = evaluate(m, t, g, o), without = evaluate(m, fused, g, o);
    ASSERT_TRUE(with.feasible && without.feasible) << with.rejected_because;
    double per_pass = 0;
    for (const auto& l : m.layers) per_pass += gradient_accumulation_s(t, l, g);
    // The roofline's 10 bytes per local weight element (the weights are split over 4).
    EXPECT_NEAR(per_pass, static_cast<double>(m.parameters()) / 4 * 10 / t.compute.memory_bytes_per_s,
                1e-3 * per_pass);
    EXPECT_NEAR(with.compute_s - without.compute_s, static_cast<double>(batch / 2) * per_pass, 1e-9) << batch;
    EXPECT_GT(with.batch_s, without.batch_s);
  }
  // ZeRO-2 and 3 add each pass's gradient into the owned block only: 1/Gdata of the
  // shard; ZeRO-1 (and none) into the whole shard.
  const topo::Grid dp{1, 2, 1, 2, 1};
  o.batch_seqs = 16;  // 4 micro-batches per data-parallel group
  topo::Topology fused = t;
  fused.compute.elementwise["grad_accumulate"] = {0, 0};
  double per_pass = 0;
  for (const auto& l : m.layers) per_pass += gradient_accumulation_s(t, l, dp);
  for (const int zero : {0, 1, 2, 3}) {
    o.optimizer.zero = zero;
    const Evaluation with = evaluate(m, t, dp, o), without = evaluate(m, fused, dp, o);
    ASSERT_TRUE(with.feasible && without.feasible) << with.rejected_because;
    EXPECT_NEAR(with.compute_s - without.compute_s, 4 * per_pass / (zero >= 2 ? 2 : 1), 1e-9) << zero;
  }
}

TEST(BatchTime, TheOptimizerEndsTheStep) {
  LayerTimes l;
  l.forward_s = 1;
  l.comm.data_all_reduce_s = 0.5;
  StageSchedule s = schedule(4);
  s.optimizer_s = 2;
  const StageTime st = stage_time({l}, s);
  EXPECT_DOUBLE_EQ(st.batch_s, 1 + 0.5 + 2);  // forward, the data all-reduce, then the optimizer
  EXPECT_DOUBLE_EQ(st.compute_s, 3);
}

TEST(BatchTime, InputGradientAllReduceHidesBehindWeightGradient) {
  LayerTimes l;
  l.forward_s = l.backward_input_s = l.backward_weight_s = 1;
  l.comm.forward_all_reduce_s = l.comm.input_grad_all_reduce_s = 0.5;
  const StageTime all = stage_time({l}, schedule(4));
  EXPECT_DOUBLE_EQ(all.batch_s, 3.5);  // 1 + 0.5 + 1 + max(1, 0.5)
  EXPECT_DOUBLE_EQ(all.compute_s, 3.0);
  EXPECT_DOUBLE_EQ(all.exposed_comm_s, 0.5);
  EXPECT_DOUBLE_EQ(stage_time({l}, schedule(0)).batch_s, 4.0);
}

TEST(BatchTime, PrefetchedAllGatherHidesBehindThePreviousLayer) {
  LayerTimes l;
  l.forward_s = 1;
  l.comm.all_gather_s = 0.5;
  l.gather_in_backward = false;
  l.unit = 0;
  LayerTimes l1 = l;
  l1.unit = 1;
  // layer 0: gather 0 -> 0.5, compute 0.5 -> 1.5; layer 1's gather issued at 0.5, done 1.0.
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(3)).batch_s, 2.5);
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(2)).batch_s, 3.0);
}

TEST(BatchTime, ReduceScattersQueueInOneFifo) {
  LayerTimes l;
  l.backward_input_s = l.backward_weight_s = 1;
  l.comm.reduce_scatter_s = 3;
  l.gather_in_backward = false;
  LayerTimes l1 = l;
  l1.unit = 1;
  // backward of layer 1: 0 -> 2, its RS 2 -> 5; layer 0: 2 -> 4, its RS 5 -> 8.
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(2)).batch_s, 8.0);
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(1)).batch_s, 10.0);  // waited for at once
}

TEST(BatchTime, DataParallelBucketsOverlapTheRestOfTheBackward) {
  LayerTimes l;
  l.backward_input_s = l.backward_weight_s = 1;
  l.comm.data_all_reduce_s = 1;
  l.comm.data_bytes = 10;
  l.gather_in_backward = false;
  LayerTimes l1 = l;
  l1.unit = 1;
  StageSchedule s = schedule(2);
  s.overlap.bucket_bytes = 10;  // one layer per bucket: layer 1's 2 -> 3 hides, layer 0's 4 -> 5
  const StageTime small = stage_time({l, l1}, s);
  EXPECT_DOUBLE_EQ(small.batch_s, 5.0);
  EXPECT_DOUBLE_EQ(small.data_tail_s, 1.0);
  s.overlap.bucket_bytes = 100;  // one bucket at the end
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, s).batch_s, 6.0);
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(1)).batch_s, 6.0);  // not bucketed
  s.data_all_reduce = false;
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, s).batch_s, 4.0);
  // Two micro-batches: the data all-reduce only after the last.
  s = schedule(2, false, 2);
  s.overlap.bucket_bytes = 10;
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, s).batch_s, 9.0);
}

TEST(BatchTime, CheckpointingRecomputesTheForward) {
  LayerTimes l;
  l.forward_s = l.backward_input_s = l.backward_weight_s = 1;
  l.comm.forward_all_reduce_s = 0.5;
  l.recomputed = true;
  EXPECT_DOUBLE_EQ(stage_time({l}, schedule(4, true)).batch_s, 5.0);   // 1.5 + 1.5 + 2
  EXPECT_DOUBLE_EQ(stage_time({l}, schedule(4, false)).batch_s, 3.5);  // 1.5 + 2
}

TEST(BatchTime, ABlocksRecomputeWaitsForItsFirstGather) {
  // Two blocks of one recomputed layer: forward 1, dI 1, dW 1, all-gather 0.5, prefetch on.
  // Forward: gather 0 -> 0.5, compute -> 1.5; the second gather hides; compute -> 2.5.
  // Backward, block 1: gather 2.5 -> 3 (not prefetched), recompute -> 4, dI, dW -> 6;
  // block 0 likewise from 6: 9.5 (a gather prefetched during block 1 would give 9).
  LayerTimes l;
  l.forward_s = l.backward_input_s = l.backward_weight_s = 1;
  l.comm.all_gather_s = 0.5;
  l.recomputed = true;
  LayerTimes l1 = l;
  l1.unit = 1;
  EXPECT_DOUBLE_EQ(stage_time({l, l1}, schedule(3, true)).batch_s, 9.5);
}

TEST(BatchTime, PipelineAddsTheBubble) {
  // 4 micro-batches over 2 stages: 5 slots of (1 s + 0.1 s p2p), then a 0.3 s data tail.
  EXPECT_DOUBLE_EQ(pipeline_batch_s(1.0, 0.1, 4, 2, 0.3), 5 * 1.1 + 0.3);
}

TEST(BatchTime, OneGpuBatchIsTheModelsFlopsAtPeak) {
  // gpt-tiny (hidden 64, 2 blocks, 4 heads, seq 16, vocab 256, ffn 256), 1 sequence, 1 GPU.
  // Forward FLOPs: blocks 2 * 16 tokens * 2 * (64*192 + 64*64 + 64*256 + 256*64) = 3145728,
  // LM head 16 * 2 * 64 * 256 = 524288, attention 2 blocks * 2 * (2 * 4 * 16*16*16) = 131072:
  // F = 3801088. Backward = 2F. Recompute (blocks) = 3145728 + 131072. Total 14680064.
  const auto m = model::load_model("gpt-tiny");
  topo::Topology t = topo::load_topology("perlmutter");
  t.peak_flops_per_s = 1e9;
  PlannerOptions o;
  o.gpus = 1;
  o.batch_seqs = 1;
  const Evaluation e = evaluate(m, t, topo::Grid{1, 1, 1, 1, 1}, o);
  ASSERT_TRUE(e.feasible);
  EXPECT_NEAR(e.compute_s, 14680064 / 1e9, 1e-15);
  EXPECT_DOUBLE_EQ(e.batch_s, e.compute_s);
  EXPECT_DOUBLE_EQ(e.exposed_comm_s, 0.0);
}

// A plan computes at its own precision's rate: where the topology has compute_bf16 (a
// CPU cluster calibrated in both dtypes), a mixed-precision plan's matmuls take its
// rate and an fp32 plan's take compute's; with none, both take compute's. The same
// one-GPU step as above, at 1 GFLOP/s in fp32 and 4 in bf16.
TEST(BatchTime, APlanComputesAtItsPrecisionsRate) {
  const auto m = model::load_model("gpt-tiny");
  topo::Topology t = topo::load_topology("perlmutter");
  t.peak_flops_per_s = 1e9;
  t.compute.matmul_flops_per_s = 1e9;
  PlannerOptions o;
  o.gpus = 1;
  o.batch_seqs = 1;
  auto compute_s = [&](const topo::Topology& at, plan::Precision p) {
    o.precision = p;
    const Evaluation e = evaluate(m, at, topo::Grid{1, 1, 1, 1, 1}, o);
    EXPECT_TRUE(e.feasible);
    return e.compute_s;
  };
  const double flops = 14680064;
  EXPECT_NEAR(compute_s(t, plan::Precision::bf16()), flops / 1e9, 1e-15);
  t.compute_bf16 = t.compute;
  t.compute_bf16->matmul_flops_per_s = 4e9;
  EXPECT_NEAR(compute_s(t, plan::Precision::bf16()), flops / 4e9, 1e-15);
  EXPECT_NEAR(compute_s(t, plan::Precision::bf16_gradients()), flops / 4e9, 1e-15);
  EXPECT_NEAR(compute_s(t, plan::Precision::fp32()), flops / 1e9, 1e-15);
}

TEST(BatchTime, FullModelRanksByBatchTime) {
  const auto m = model::load_model("gpt-bench");
  PlannerOptions o;
  o.gpus = 8;
  o.batch_seqs = 16;
  const Ranking r = rank_candidates(m, topo::load_topology("perlmutter"), o);
  ASSERT_GT(r.feasible.size(), 2u);
  for (size_t i = 1; i < r.feasible.size(); ++i) {
    EXPECT_LE(r.feasible[i - 1].batch_s, r.feasible[i].batch_s);
    EXPECT_NEAR(r.feasible[i].batch_s, r.feasible[i].compute_s + r.feasible[i].exposed_comm_s, 1e-12);
    EXPECT_GE(r.feasible[i].exposed_comm_s, -1e-12);
  }
}

TEST(TopologyCompute, MeasuredFieldsRoundTripAndAreChecked) {
  topo::Topology t = topo::load_topology("perlmutter");
  t.compute.matmul_flops_per_s = 2e10;
  t.compute.matmul_overhead_s = 3e-6;
  t.compute.matmul_table.push_back({64, 32, 16, 4, 1e-4});
  t.point_to_point = {5e9, 4e7};
  t.compute.elementwise["gelu"] = {2e-9, 3e-9};
  const topo::Topology back = topo::topology_from_json(topo::topology_to_json(t), "round trip");
  EXPECT_DOUBLE_EQ(back.compute.matmul_flops_per_s, 2e10);
  EXPECT_DOUBLE_EQ(back.compute.matmul_overhead_s, 3e-6);
  ASSERT_EQ(back.compute.matmul_table.size(), 1u);
  EXPECT_EQ(back.compute.matmul_table[0].batch, 4);
  EXPECT_DOUBLE_EQ(back.point_to_point.inter_node_bytes_per_s, 4e7);
  EXPECT_DOUBLE_EQ(back.compute.elementwise.at("gelu").backward_s_per_element, 3e-9);
  nlohmann::json j = topo::topology_to_json(t);
  nlohmann::json op = j;
  op["compute"]["elementwise_s_per_element"]["softmaxx"] = {{"forward", 1e-9}};
  try {
    topo::topology_from_json(op, "op.json");
    ADD_FAILURE() << "unknown operation accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("softmaxx"), std::string::npos) << e.what();
  }
  // Adam and the gradient accumulation have no backward: a nonzero one is refused.
  for (const std::string forward_only : {"adam", "grad_accumulate"}) {
    nlohmann::json acc = j;
    acc["compute"]["elementwise_s_per_element"][forward_only] = {{"forward", 1e-9}, {"backward", 0.0}};
    EXPECT_DOUBLE_EQ(
        topo::topology_from_json(acc, "acc.json").compute.elementwise.at(forward_only).forward_s_per_element, 1e-9);
    acc["compute"]["elementwise_s_per_element"][forward_only]["backward"] = 1e-9;
    try {
      topo::topology_from_json(acc, "acc.json");
      ADD_FAILURE() << "a backward for " << forward_only << " accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("acc.json"), std::string::npos) << what;
      EXPECT_NE(what.find(forward_only + " has no backward"), std::string::npos) << what;
    }
  }
  j["compute"]["matmul_table"][0]["flops"] = 1;
  try {
    topo::topology_from_json(j, "bad.json");
    ADD_FAILURE() << "unknown field accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: /compute/matmul_table/0/flops"), std::string::npos) << e.what();
  }
}


TEST(BatchTime, OffloadedOptimizerPhaseOverlapsChunks) {
  // 4 chunks of all-reduce 1 s and update 2 s in all: 0.25 + 3 * max(0.25, 0.5) + 0.5.
  EXPECT_DOUBLE_EQ(axonn::planner::offloaded_optimizer_phase_s(1, 2, 4, true), 0.25 + 3 * 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(axonn::planner::offloaded_optimizer_phase_s(1, 2, 4, false), 3);
  EXPECT_DOUBLE_EQ(axonn::planner::offloaded_optimizer_phase_s(1, 2, 1, true), 3);  // one chunk: nothing beside it
  // Many chunks: the longer of the two, plus one chunk of the other.
  EXPECT_NEAR(axonn::planner::offloaded_optimizer_phase_s(3, 1, 1000, true), 3 + 0.001, 1e-12);
  // Each chunk's all-reduce also pays a per-call 0.1 s: a = 0.35, u = 0.5; not overlapped,
  // every call pays it.
  EXPECT_DOUBLE_EQ(axonn::planner::offloaded_optimizer_phase_s(1, 2, 4, true, 0.1), 0.35 + 3 * 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(axonn::planner::offloaded_optimizer_phase_s(1, 2, 4, false, 0.1), 3.4);
  // With it, the finest chunking is no longer best (the paper's k = 1 against k = 2-4):
  // A = U = 1 s, 10 ms per call: 100 chunks 2.01 s, 10 chunks 1.20 s, 1 chunk 2.01 s.
  using axonn::planner::offloaded_optimizer_phase_s;
  EXPECT_NEAR(offloaded_optimizer_phase_s(1, 1, 100, true, 0.01), 2.01, 1e-12);
  EXPECT_NEAR(offloaded_optimizer_phase_s(1, 1, 10, true, 0.01), 1.2, 1e-12);
  EXPECT_NEAR(offloaded_optimizer_phase_s(1, 1, 1, true, 0.01), 2.01, 1e-12);
}

// explain's passes of one micro-batch are the layers' costs summed as the clock runs them:
// on one GPU (no communication) the forward is every forward, the backward every dI and
// dW, plus, with activation checkpointing, the recomputed layers' forwards.
TEST(ComputeModel, ExplainedPassesSumTheLayersOfOneMicroBatch) {
  const auto m = model::load_model("gpt-bench");
  const topo::Topology t = topo::load_topology("dgx-h100");
  PlannerOptions o;
  o.gpus = 1;
  o.batch_seqs = 8;
  o.microbatch_seqs = 2;
  for (const bool checkpointing : {false, true}) {
    o.activation_checkpointing = checkpointing;
    const Explanation x = explain(m, t, topo::Grid{1, 1, 1, 1, 1}, o);
    ASSERT_TRUE(x.evaluation.feasible) << x.evaluation.rejected_because;
    ASSERT_EQ(x.stages.size(), 1u);
    double forward = 0, backward = 0, recompute = 0, optimizer = 0;
    for (const auto& l : x.layers) {
      const double n = static_cast<double>(l.count);
      forward += n * l.costs.forward_s;
      backward += n * (l.costs.backward_input_s + l.costs.backward_weight_s);
      optimizer += n * l.optimizer_s;
      if (l.name.rfind("block", 0) == 0) recompute += n * l.costs.forward_s;  // GPT blocks are checkpointed
    }
    const StagePasses& p = x.stages[0];
    EXPECT_NEAR(p.forward_s, forward, 1e-12) << checkpointing;
    EXPECT_NEAR(p.forward_compute_s, forward, 1e-12);
    EXPECT_NEAR(p.backward_s, backward + (checkpointing ? recompute : 0.0), 1e-12) << checkpointing;
    EXPECT_NEAR(p.last_backward_s, p.backward_s, 1e-12);
    EXPECT_NEAR(p.optimizer_s, optimizer, 1e-12);
    // 4 micro-batches, then the optimizer: the batch time.
    EXPECT_NEAR(x.evaluation.batch_s, 4 * (p.forward_s + p.backward_s) + p.optimizer_s, 1e-12);
    EXPECT_GT(recompute, 0.0);
  }
  // Over 2 GPUs of a Y group the passes also wait for all-reduces: busy exceeds the
  // compute inside, which is still the layers' sums.
  o.gpus = 2;
  o.activation_checkpointing = true;
  const Explanation x = explain(m, t, topo::Grid{1, 2, 1, 1, 1}, o);
  ASSERT_TRUE(x.evaluation.feasible) << x.evaluation.rejected_because;
  ASSERT_EQ(x.stages.size(), 1u);
  double forward = 0, backward = 0;
  for (const auto& l : x.layers) {
    const double n = static_cast<double>(l.count);
    forward += n * l.costs.forward_s;
    backward += n * (l.costs.backward_input_s + l.costs.backward_weight_s) +
                (l.name.rfind("block", 0) == 0 ? n * l.costs.forward_s : 0.0);
  }
  const StagePasses& p = x.stages[0];
  EXPECT_NEAR(p.forward_compute_s, forward, 1e-12);
  EXPECT_NEAR(p.backward_compute_s, backward, 1e-12);
  EXPECT_NEAR(p.last_backward_compute_s, backward, 1e-12);
  EXPECT_GT(p.forward_s, p.forward_compute_s);
  EXPECT_GT(p.backward_s, p.backward_compute_s);
}

}  // namespace
}  // namespace axonn::planner
