// The schedule IR (axonn/schedule/): pass programs, step programs, the message-driven
// rule, stage layouts and AxoNN's checkpoint-interval rule, against hand-written lists.
#include <gtest/gtest.h>

#include "axonn/model/model_description.hpp"
#include "axonn/schedule/schedule.hpp"
#include "test_util.hpp"

using namespace axonn;
using namespace axonn::schedule;

namespace {

std::string listing(const std::vector<LayerInstruction>& p) {
  std::string s;
  for (const auto& i : p) s += (s.empty() ? "" : " ") + i.to_string();
  return s;
}

std::string listing(const std::vector<StepInstruction>& p) {
  std::string s;
  for (const auto& i : p) s += (s.empty() ? "" : " ") + i.to_string();
  return s;
}

// embedding (unit 0), one recomputed block of (linear, attention, linear) (unit 0), head (unit 0)
std::vector<PassLayer> small_stage(bool checkpointing) {
  PassLayer emb, lin, att, head;
  emb.input_gradient = emb.weight_in_backward = false;
  lin.recomputed = checkpointing;
  att.weighted = false;
  att.recomputed = checkpointing;
  for (auto* l : {&emb, &lin, &att, &head}) l->grad_bytes = 10;
  att.grad_bytes = 0;
  return {emb, lin, att, lin, head};
}

PassSettings settings(int level, bool checkpointing) {
  PassSettings s;
  s.overlap = plan::OverlapSettings::level(level, 0);
  s.overlap.bucket_bytes = 20;
  s.checkpointing = checkpointing;
  return s;
}

}  // namespace

TEST(SchedulePass, ForwardPrefetchesTheNextWeightedLayer) {
  const auto layers = small_stage(false);
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), settings(4, false), PassKind::Forward)),
            "Prefetch(0) Fetch(0, prefetched) Prefetch(1) Forward(0) ForwardCollective(0) "
            "Fetch(1, prefetched) Prefetch(3) Forward(1) ForwardCollective(1) Forward(2) "
            "Fetch(3, prefetched) Prefetch(4) Forward(3) ForwardCollective(3) "
            "Fetch(4, prefetched) Forward(4) ForwardCollective(4)");
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), settings(0, false), PassKind::Forward)),
            "Fetch(0, gather) Forward(0) ForwardCollective(0) Fetch(1, gather) Forward(1) ForwardCollective(1) "
            "Forward(2) Fetch(3, gather) Forward(3) ForwardCollective(3) Fetch(4, gather) Forward(4) "
            "ForwardCollective(4)");
}

TEST(SchedulePass, BackwardWithoutCheckpointingReGathersAndBucketsTheLastMicroBatch) {
  const auto layers = small_stage(false);
  // Level 4: prefetch the previous weight; dI all-reduce waited for after dW and the
  // reduce-scatter; buckets of 20 bytes = two layers (the embedding reads no weight).
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), settings(4, false), PassKind::LastBackward)),
            "Prefetch(4) Fetch(4, prefetched) Prefetch(3) BackwardInput(4) InputGradCollective(4) BackwardWeight(4) "
            "ReduceScatter(4) InputGradWait(4) "
            "Fetch(3, prefetched) Prefetch(1) BackwardInput(3) InputGradCollective(3) BackwardWeight(3) "
            "ReduceScatter(3) InputGradWait(3) BucketAllReduce(3, 2 layers) "
            "BackwardInput(2) BackwardWeight(2) "
            "Fetch(1, prefetched) BackwardInput(1) InputGradCollective(1) BackwardWeight(1) ReduceScatter(1) "
            "InputGradWait(1) BackwardWeight(0) ReduceScatter(0) BucketAllReduce(0, 2 layers) WaitReduceScatters(-1)");
  // Not the last micro-batch: no buckets. Level 0: the dI all-reduce waited for at once.
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), settings(0, false), PassKind::Backward)),
            "Fetch(4, gather) BackwardInput(4) InputGradCollective(4) InputGradWait(4) BackwardWeight(4) "
            "ReduceScatter(4) Fetch(3, gather) BackwardInput(3) InputGradCollective(3) InputGradWait(3) "
            "BackwardWeight(3) ReduceScatter(3) BackwardInput(2) BackwardWeight(2) Fetch(1, gather) "
            "BackwardInput(1) InputGradCollective(1) InputGradWait(1) BackwardWeight(1) ReduceScatter(1) "
            "BackwardWeight(0) ReduceScatter(0) WaitReduceScatters(-1)");
}

TEST(SchedulePass, CheckpointingRecomputesTheBlockAfterTheHeadsBackward) {
  auto layers = small_stage(true);
  mark_cached(layers.data(), layers.size(), 1);  // the block's first linear keeps its weight
  auto s = settings(4, true);
  s.overlap.cache_all_gather_layers = 1;
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), s, PassKind::Forward)).substr(0, 58),
            "Prefetch(0) Fetch(0, prefetched) Prefetch(1) Forward(0) Fo");
  const std::string fwd = listing(pass_program(layers.data(), layers.size(), s, PassKind::Forward));
  EXPECT_NE(fwd.find("Fetch(1, prefetched, keep)"), std::string::npos) << fwd;
  // The head (not recomputed) first, then the block: its recompute takes layer 1 from
  // the cache and prefetches layer 3; then the block's backward with the recompute's
  // weights (no fetch), then the embedding.
  EXPECT_EQ(listing(pass_program(layers.data(), layers.size(), s, PassKind::Backward)),
            "Prefetch(4) Fetch(4, prefetched) BackwardInput(4) InputGradCollective(4) BackwardWeight(4) "
            "ReduceScatter(4) InputGradWait(4) "
            "Fetch(1, cached) Prefetch(3) Forward(1) ForwardCollective(1) Forward(2) Fetch(3, prefetched) Forward(3) "
            "ForwardCollective(3) "
            "BackwardInput(3) InputGradCollective(3) BackwardWeight(3) ReduceScatter(3) InputGradWait(3) "
            "BackwardInput(2) BackwardWeight(2) "
            "BackwardInput(1) InputGradCollective(1) BackwardWeight(1) ReduceScatter(1) InputGradWait(1) "
            "BackwardWeight(0) ReduceScatter(0) WaitReduceScatters(-1)");
}

TEST(ScheduleStep, GPipeAndOneFOneBPrograms) {
  EXPECT_EQ(listing(step_program(plan::PipelineSchedule::GPipe, 1, 2, 2)),
            "RecvActivation(0) Forward(0) RecvActivation(1) Forward(1) Backward(0) SendGradient(0) Backward(1) "
            "SendGradient(1) ReduceGradients OptimizerStep");
  EXPECT_EQ(listing(step_program(plan::PipelineSchedule::OneFOneB, 0, 2, 3)),
            "Forward(0) SendActivation(0) Forward(1) SendActivation(1) RecvGradient(0) Backward(0) Forward(2) "
            "SendActivation(2) RecvGradient(1) Backward(1) RecvGradient(2) Backward(2) ReduceGradients OptimizerStep");
  // Fewer micro-batches than stages: the warm-up stops at M.
  EXPECT_EQ(listing(step_program(plan::PipelineSchedule::OneFOneB, 0, 4, 1)),
            "Forward(0) SendActivation(0) RecvGradient(0) Backward(0) ReduceGradients OptimizerStep");
  // One stage: plain gradient accumulation under every schedule.
  for (auto s : {plan::PipelineSchedule::GPipe, plan::PipelineSchedule::OneFOneB, plan::PipelineSchedule::MessageDriven})
    EXPECT_EQ(listing(step_program(s, 0, 1, 2)), "Forward(0) Backward(0) Forward(1) Backward(1) ReduceGradients OptimizerStep");
  EXPECT_NE(test::error_of([] { step_program(plan::PipelineSchedule::MessageDriven, 0, 2, 2); }).find("no fixed order"),
            std::string::npos);
}

TEST(ScheduleStep, MessageDrivenFollowsArrivals) {
  std::vector<StepInstruction> out;
  MessageDrivenStage first(0, 3, 5, 2);  // 5 micro-batches, at most 2 in flight
  first.start(out);
  EXPECT_EQ(listing(out), "Forward(0) SendActivation(0) Forward(1) SendActivation(1)");
  out.clear();
  first.on_gradient(0, out);  // a backward frees a slot: inject micro-batch 2
  EXPECT_EQ(listing(out), "Backward(0) Forward(2) SendActivation(2)");
  MessageDrivenStage middle(1, 3, 5, 2), last(2, 3, 5, 2);
  out.clear();
  middle.start(out);
  EXPECT_TRUE(out.empty());
  middle.on_activation(0, out);
  middle.on_activation(1, out);  // two forwards back to back: what arrived
  middle.on_gradient(0, out);
  EXPECT_EQ(listing(out), "Forward(0) SendActivation(0) Forward(1) SendActivation(1) Backward(0) SendGradient(0)");
  out.clear();
  last.on_activation(0, out);  // the last stage runs the backward at once
  EXPECT_EQ(listing(out), "Forward(0) Backward(0) SendGradient(0)");
  EXPECT_FALSE(last.expects_gradient());
  EXPECT_NE(test::error_of([&] { last.on_activation(2, out); }).find("micro-batch 1 next"), std::string::npos);
}

TEST(ScheduleLayout, StagesAndTheCheckpointRule) {
  EXPECT_EQ(plan::stage_units_or_even({}, 6, 4), (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(plan::stage_units_or_even({3, 1}, 4, 2), (std::vector<int64_t>{3, 1}));
  const auto m = model::load_model("gpt-tiny");  // 2 blocks: embedding + 5 + 5 layers + head
  const auto l = stage_layouts(m, {1, 1});
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].first_layer, 0u);
  EXPECT_EQ(l[0].last_layer, 6u);  // embedding and block 0
  EXPECT_EQ(l[1].first_layer, 6u);
  EXPECT_EQ(l[1].last_layer, m.layers.size());  // block 1 and the head
  EXPECT_EQ(m.layers[l[1].last_layer - 1].name, "lm_head");
  // seed-spec A5: N = 48 blocks: Ginter 6 -> 8, 12 -> 4, 24 -> 2; N = 96: 24 -> 4, 48 -> 2.
  EXPECT_EQ(axonn_checkpoint_interval(8, 48), 8);
  EXPECT_EQ(axonn_checkpoint_interval(4, 48), 4);
  EXPECT_EQ(axonn_checkpoint_interval(2, 48), 2);
  EXPECT_EQ(axonn_checkpoint_interval(4, 96), 4);
  EXPECT_EQ(axonn_checkpoint_interval(2, 96), 2);
  EXPECT_EQ(axonn_checkpoint_interval(16, 16), 4);
}

TEST(ScheduleLayout, BuildScheduleOfAPlanStage) {
  plan::Plan p;
  p.model = model::load_model("gpt-tiny");
  p.grid = topo::Grid{2, 1, 2, 1, 2};
  p.gpus = 8;
  p.batch = {8, 2};  // 4 micro-batches
  p.pipeline.schedule = plan::PipelineSchedule::OneFOneB;
  const StageSchedule s = build_schedule(p, 1);
  EXPECT_TRUE(s.last_stage());
  EXPECT_EQ(s.microbatches, 4);
  EXPECT_EQ(s.layer_index("lm_head"), static_cast<int64_t>(s.layers.size()) - 1);
  EXPECT_EQ(s.layer_index("block0.qkv"), -1);
  EXPECT_EQ(s.layer_names.front(), "block1.qkv");
  // 4 bytes * 64 * 192 / (2 * 1 * 2) for block 1's qkv
  EXPECT_DOUBLE_EQ(s.layers.front().grad_bytes, 4.0 * 64 * 192 / 4);
  EXPECT_EQ(s.steps, step_program(plan::PipelineSchedule::OneFOneB, 1, 2, 4));
  EXPECT_TRUE(build_schedule(p, 0, plan::PipelineSchedule::MessageDriven).steps.empty());
}
