// The passes' peak of the memory model (docs/model.md section 5), worked by hand on
// gpt-bench (4 blocks, hidden 256, 8 heads, seq 128, vocab 2048, ffn 1024) in fp32.
// The same configurations are measured by the counting allocator in
// tools/measure_memory.sh (docs/performance.md): 60.0, 15.5 and 16.0 MiB above the live
// bytes are what axrun measures, to 0.5 MiB.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "axonn/common/units.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::planner {
namespace {

struct BenchCase {
  model::ModelDescription m = model::load_model("gpt-bench");
  MemorySettings s;
  BenchCase() {
    s.precision = plan::Precision::fp32();
    s.activation_checkpointing = true;
  }
  MemoryBreakdown at(const topo::Grid& g, int64_t microbatch_seqs) {
    s.microbatch_seqs = microbatch_seqs;
    return stage_memory(m, 0, m.layers.size(), g, s, std::vector<bool>(m.layers.size(), false));
  }
};

// What each layer keeps, per row: the linears their input (plus the norm before them),
// fc1 its GELU input, attention the q, k, v copies and the probabilities (8 x 128).
TEST(MemoryModel, WhatEachLayerKeeps) {
  const auto m = model::load_model("gpt-bench");
  const topo::Grid one{1, 1, 1, 1, 1}, tensor{2, 4, 1, 1, 1};
  int checked = 0;  // the layers named below exist: each is checked
  for (const auto& l : m.layers) {
    checked += l.name == "block0.qkv" || l.name == "block0.attention" || l.name == "block0.attn_out" ||
               l.name == "block0.fc1" || l.name == "block0.fc2" || l.name == "lm_head" || l.name == "embedding";
    const LayerActivations a = layer_activations(l, one, m.seq_len);
    if (l.name == "block0.qkv") { EXPECT_EQ(a.saved, 256 + 256); }
    if (l.name == "block0.attention") { EXPECT_EQ(a.saved, 3 * 256 + 8 * 128); }
    if (l.name == "block0.attn_out") { EXPECT_EQ(a.saved, 256); }
    if (l.name == "block0.fc1") { EXPECT_EQ(a.saved, 256 + 256 + 1024); }
    if (l.name == "block0.fc2") { EXPECT_EQ(a.saved, 1024); }
    if (l.name == "lm_head") { EXPECT_EQ(a.logits, 2048); }
    if (l.name == "embedding") { EXPECT_EQ(a.saved, 0); }
    // Sharded: the hidden width over Gx, the columns and heads over Gy.
    const LayerActivations t = layer_activations(l, tensor, m.seq_len);
    if (l.name == "block0.fc1") { EXPECT_EQ(t.saved, 128 + 128 + 256); }
    if (l.name == "block0.attention") { EXPECT_EQ(t.saved, 3 * 64 + 2 * 128); }
    if (l.name == "lm_head") { EXPECT_EQ(t.logits, 512); }
  }
  EXPECT_EQ(checked, 7);
}

// One rank, batch 16 (2048 rows): the loss is the peak. Four checkpoints (256 each), the
// head's input and its norm's (2 x 256), 4 bytes per element; then three fp32 copies of
// the 2048 logits: 12 MiB + 48 MiB.
TEST(MemoryModel, OneRankPeaksAtTheLoss) {
  BenchCase c;
  const MemoryBreakdown mem = c.at({1, 1, 1, 1, 1}, 16);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 2048 * (4 * 256 + 2 * 256) + 12.0 * 2048 * 2048);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 60 * kBytesPerMiB);
  EXPECT_EQ(mem.bucket_bytes, 0.0);
  // bf16 activations halve everything but the fp32 loss: 6 + 48 MiB.
  c.s.precision = plan::Precision::bf16();
  EXPECT_DOUBLE_EQ(c.at({1, 1, 1, 1, 1}, 16).activation_bytes, 54 * kBytesPerMiB);
}

// ZeRO-1 on 4 data-parallel ranks, 4 sequences (512 rows): the last block's backward is
// the peak, at its fc2's dW. Per row: 3 checkpoints not yet consumed, the block's input,
// output and arriving gradient (3 x 256), what the block keeps (16 x 256 + 1024, less the
// checkpoint its first norm keeps: 256), fc2's dI (1024); plus fc2's dW (1024 x 256).
TEST(MemoryModel, DataParallelPeaksInTheLastBlocksBackward) {
  BenchCase c;
  c.s.optimizer.zero = 1;
  const MemoryBreakdown mem = c.at({1, 1, 1, 4, 1}, 4);
  const double per_row = 3 * 256 + 3 * 256 + (16 * 256 + 1024 - 256) + 1024;
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 512 * per_row + 4.0 * 1024 * 256);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 15.5 * kBytesPerMiB);
  EXPECT_EQ(mem.bucket_bytes, 0.0);  // ZeRO reduces in the optimizer phase
}

// Plain data parallelism: every gradient goes through a bucket's flat buffer in the
// backward, and none is freed before the step's reduction: after the backward, 16 MiB
// (4M fp32 gradients, in one bucket under the 25 MB default) and 2.5 MiB more than any
// pass holds.
TEST(MemoryModel, BucketsOutliveTheBackward) {
  BenchCase c;
  const MemoryBreakdown mem = c.at({1, 1, 1, 4, 1}, 4);
  // The last bucket closes in the embedding's backward: its table gradient (2048 x 256)
  // and the gradient arriving at it (512 x 256) are alive.
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * (2048 * 256 + 512 * 256));
  EXPECT_DOUBLE_EQ(mem.bucket_bytes, 4.0 * (2 * 2048 * 256 + 4 * (3 * 256 * 256 + 256 * 256 + 2 * 256 * 1024)));
  EXPECT_DOUBLE_EQ(mem.bucket_bytes, 16 * kBytesPerMiB);
  // Unbucketed, the gradients are all-reduced in place: the passes' peak is the block's.
  c.s.overlap.bucketed_data_parallel_all_reduce = false;
  EXPECT_EQ(c.at({1, 1, 1, 4, 1}, 4).bucket_bytes, 0.0);
  EXPECT_DOUBLE_EQ(c.at({1, 1, 1, 4, 1}, 4).activation_bytes, 15.5 * kBytesPerMiB);
}

// Many heads: the softmax's backward (three copies of the probabilities) overtakes fc2's.
TEST(MemoryModel, AttentionPeaksWhenTheProbabilitiesDominate) {
  BenchCase c;
  c.m.heads = 64;  // 64 x 128 probabilities per row, 32x the hidden width
  for (auto& l : c.m.layers)
    if (l.kind == model::LayerKind::Attention) l.heads = 64, l.head_dim = 4;
  c.s.optimizer.zero = 1;
  const MemoryBreakdown mem = c.at({1, 1, 1, 4, 1}, 4);
  // Per row: 3 checkpoints, the block's input, output, arriving gradient and the
  // residual's pending gradient (4 x 256), what qkv keeps less the checkpoint (256), the
  // q, k, v copies (768) and three copies of 64 x 128 probabilities.
  const double per_row = 3 * 256 + 4 * 256 + 256 + 768 + 3 * 64 * 128;
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 512 * per_row);
}

// ZeRO-1 on 4 ranks of gpt-bench-12 in bf16 with fp32 gradients: the optimizer phase is
// the peak. The reduce-scattered block of the owned gradients (fp32, a quarter of the
// 10.5M weights) and the gradient norm's fp64 copy and square of the largest parameter
// (the 2048 x 256 embedding or head): 10 + 8 MiB, above the loss's 15.5.
TEST(MemoryModel, ZeroOnePeaksInTheOptimizerPhase) {
  BenchCase c;
  const std::string path = ::testing::TempDir() + "gpt-bench-12.json";
  std::ofstream(path) << R"({"name": "gpt-bench-12", "family": "gpt", "num_layers": 12, "hidden": 256,
                            "heads": 8, "seq_len": 128, "vocab": 2048, "ffn_multiplier": 4})";
  c.m = model::load_model(path);
  c.s.precision = plan::Precision::bf16();
  c.s.optimizer.zero = 1;
  const MemoryBreakdown mem = c.at({1, 1, 1, 4, 1}, 4);
  const double weights = 12.0 * (3 * 256 * 256 + 256 * 256 + 2 * 256 * 1024) + 2 * 2048 * 256;
  EXPECT_DOUBLE_EQ(mem.optimizer_bytes, 4.0 * weights / 4 + 16.0 * 2048 * 256);
  EXPECT_EQ(mem.activation_bytes, 0.0);
  EXPECT_EQ(mem.bucket_bytes, 0.0);
  // ZeRO-2 keeps no such block (its sink holds the owned gradients): the loss is the peak.
  c.s.optimizer.zero = 2;
  EXPECT_EQ(c.at({1, 1, 1, 4, 1}, 4).optimizer_bytes, 0.0);
}

// GPipe on 4 stages, one sequence per micro-batch (128 rows): the last stage (block 3
// and the head) runs all 16 forwards first, so 15 micro-batches wait for their
// backward, each with its checkpoint (256), its loss's graph (what the head keeps, 512,
// and the log-softmax output, 2048 fp32 logits). The message-driven and 1F1B last
// stages run each backward right after its forward: one micro-batch in flight.
TEST(MemoryModel, GPipesLastStageKeepsEveryLossGraph) {
  BenchCase c;
  EXPECT_EQ(schedule::inflight_microbatches(plan::PipelineSchedule::GPipe, 3, 4, 16, 4), 16);
  EXPECT_EQ(schedule::inflight_microbatches(plan::PipelineSchedule::OneFOneB, 3, 4, 16, 4), 1);
  EXPECT_EQ(schedule::inflight_microbatches(plan::PipelineSchedule::MessageDriven, 3, 4, 16, 4), 1);
  EXPECT_EQ(schedule::inflight_microbatches(plan::PipelineSchedule::MessageDriven, 0, 4, 16, 4), 4);
  size_t first = 0;
  while (c.m.layers[first].unit < 3) ++first;
  auto last_stage = [&](int64_t inflight) {
    c.s.inflight_microbatches = inflight;
    c.s.microbatch_seqs = 1;
    return stage_memory(c.m, first, c.m.layers.size(), {1, 1, 1, 1, 4}, c.s,
                        std::vector<bool>(c.m.layers.size(), false));
  };
  // The peak: the first backward of block 3, under the 15 waiting micro-batches (2816
  // per row each: 256 + 512 + 2048), its input, output and arriving gradient (768), what
  // it keeps less the checkpoint (4864), fc2's dI (1024), 4 bytes per element, and fc2's
  // dW. Alone, the stage peaks in the optimizer phase instead (the head's 16 * 524288).
  const MemoryBreakdown gpipe = last_stage(16), one = last_stage(1);
  EXPECT_DOUBLE_EQ(gpipe.activation_bytes, 4.0 * 128 * (15 * 2816 + 768 + 4864 + 1024) + 4.0 * 1024 * 256);
  EXPECT_EQ(one.activation_bytes, 0.0);
  EXPECT_DOUBLE_EQ(one.optimizer_bytes, 16.0 * 2048 * 256);
}


// A chain (docs/model.md section 5, "a chain"): Colossal-AI's two Linear layers, fc1
// H x F then fc2 F x H (AxoNN's transposed half), fp32, nothing recomputed, one stage,
// `rows` tokens in sequences of 64. tools/measure_two_linear runs the same under the
// counting allocator (a CI test holds every mode within 5%); the totals below are its
// measured step peaks, and the parts are what its allocation trace showed.
struct TwoLinear {
  model::ModelDescription m;
  MemorySettings s;
  TwoLinear(int64_t hidden, int64_t ffn, int64_t rows) {
    m = model::model_from_json(
        nlohmann::json{{"name", "two-linear"},
                       {"family", "explicit"},
                       {"seq_len", 64},
                       {"hidden", hidden},
                       {"layers",
                        {{{"type", "linear"}, {"name", "fc1"}, {"k", hidden}, {"n", ffn}},
                         {{"type", "linear"}, {"name", "fc2"}, {"k", ffn}, {"n", hidden}, {"role", "row"}}}}},
        "two-linear");
    s.precision = plan::Precision::fp32();
    s.activation_checkpointing = false;
    s.microbatch_seqs = rows / 64;
    s.chain = is_chain(m);
    s.final_stage = true;
  }
  MemoryBreakdown at(topo::Grid g, topo::TensorLayout layout = topo::TensorLayout::Axonn3d) {
    g.layout = layout;
    MemorySettings settings = s;
    settings.microbatch_seqs = s.microbatch_seqs / g.gdata;  // the batch splits over the replicas
    return stage_memory(m, 0, m.layers.size(), g, settings, std::vector<bool>(m.layers.size(), false));
  }
};

TEST(MemoryModel, OnlyModelsWithoutAResidualStreamAreChains) {
  EXPECT_FALSE(is_chain(model::load_model("gpt-bench")));
  EXPECT_TRUE(is_chain(model::load_model("bert-large")));  // explicit: a list of layers
  EXPECT_TRUE(is_chain(TwoLinear(512, 2048, 4096).m));
}

// 1d on 8 ranks (1,8,1), H 512, F 2048, 4096 rows: the peak is fc2's dW. Per row: fc1
// keeps its input (512), fc2 its input (2048/8); fc2's backward holds its output's
// gradient (512) and its dI (256); plus fc2's dW block (2048 x 512 / 8). Model state 16
// bytes x 128Ki elements. Measured: 28.50 MiB.
TEST(MemoryModel, AChainIsWalkedLayerByLayer) {
  TwoLinear c(512, 2048, 4096);
  const MemoryBreakdown mem = c.at({1, 8, 1, 1, 1});
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 4096 * (512 + 256 + 512 + 256) + 4.0 * 2048 * 512 / 8);
  EXPECT_DOUBLE_EQ(mem.model_state_bytes, 16.0 * 2 * 512 * 2048 / 8);
  EXPECT_DOUBLE_EQ(mem.total_bytes(), 28.5 * kBytesPerMiB);
  // The same layers as a stage that sends its output on keep that output and its send
  // buffer (2 x 512 per row) until the step ends.
  c.s.final_stage = false;
  EXPECT_DOUBLE_EQ(c.at({1, 8, 1, 1, 1}).activation_bytes, mem.activation_bytes + 4.0 * 4096 * 2 * 512);
}

// 2d on 4 ranks (1,2,2), H 1024, F 4096, 512 rows (256 per Z rank): the peak is fc2's
// dW. Weights gathered over Z: fc2's and fc1's, prefetched (8 MiB each); fc2's dW block
// (4096 x 512) and its reduce-scattered half pending (12 MiB); per row fc1's gathered
// input (1024), fc2's (4096), the output gradient (512), dI (4096) and its scattered
// block over Y (2048). Measured: 71.50 MiB.
TEST(MemoryModel, AChainsZTermsAreWalkedInTime) {
  TwoLinear c(1024, 4096, 512);
  const MemoryBreakdown mem = c.at({1, 2, 2, 1, 1}, topo::TensorLayout::TwoD);
  EXPECT_DOUBLE_EQ(mem.gathered_weight_bytes, 16 * kBytesPerMiB);
  EXPECT_DOUBLE_EQ(mem.unscattered_grad_bytes, 12 * kBytesPerMiB);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 256 * (1024 + 4096 + 512 + 4096 + 2048));
  EXPECT_DOUBLE_EQ(mem.total_bytes(), 71.5 * kBytesPerMiB);
  // Without optimization 2's wait at the pass's end, fc2's reduce-scatter is waited for
  // at once and fc1's dW moment (8 + 4 MiB, fc1's weight only, less activations) is
  // below fc2's: the same peak.
  c.s.overlap.async_weight_grad_reduce_scatter = false;
  EXPECT_DOUBLE_EQ(c.at({1, 2, 2, 1, 1}, topo::TensorLayout::TwoD).total_bytes(), 71.5 * kBytesPerMiB);
}

// 2d on 4 ranks, H 512, F 2048, 4096 rows (2048 per Z rank): the activations dominate
// and the peak is fc2's dI, laid out for its reduce-scatter in a transposed copy (two
// [rows, 2048]) before any dW exists. Measured: 66.00 MiB.
TEST(MemoryModel, TwoDsInputGradientCopyCanBeThePeak) {
  TwoLinear c(512, 2048, 4096);
  const MemoryBreakdown mem = c.at({1, 2, 2, 1, 1}, topo::TensorLayout::TwoD);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 4.0 * 2048 * (512 + 2048 + 256 + 2 * 2048));
  EXPECT_DOUBLE_EQ(mem.unscattered_grad_bytes, 0.0);
  EXPECT_DOUBLE_EQ(mem.total_bytes(), 66 * kBytesPerMiB);
}

}  // namespace
}  // namespace axonn::planner
