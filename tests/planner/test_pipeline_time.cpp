// The pipeline clock (axonn/planner/pipeline_time.hpp): hand-computed timelines, the
// closed form for equal stages, and schedules that must not deadlock.
#include <gtest/gtest.h>

#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/pipeline_time.hpp"

using namespace axonn;
using namespace axonn::planner;
using plan::PipelineSchedule;

namespace {

std::vector<StagePasses> equal_stages(int64_t g, double f, double b) {
  StagePasses p;
  p.forward_s = p.forward_compute_s = f;
  p.backward_s = p.last_backward_s = p.backward_compute_s = p.last_backward_compute_s = b;
  return std::vector<StagePasses>(static_cast<size_t>(g), p);
}

}  // namespace

TEST(PipelineTime, EqualStagesMatchTheClosedForm) {
  for (auto s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::MessageDriven})
    for (int64_t g : {2, 3, 4})
      for (int64_t m : {1, 2, 5, 8}) {
        const PipelineTime t = simulate_pipeline(equal_stages(g, 1.0, 2.0), 0.0, s, m, g);
        EXPECT_DOUBLE_EQ(t.batch_s, pipeline_batch_s(3.0, 0.0, m, g, 0.0))
            << plan::pipeline_schedule_name(s) << " G=" << g << " M=" << m;
        EXPECT_DOUBLE_EQ(t.compute_s, 3.0 * static_cast<double>(m));
      }
}

TEST(PipelineTime, GPipeByHandWithMessagesTailAndOptimizer) {
  // 2 stages, 2 micro-batches, forward 1, backward 2, messages 0.5, stage tails 0.25,
  // optimizer 1. Stage 0: F0 0-1 (send -> 1.5), F1 1-2 (link busy until 2.5).
  // Stage 1: F0 1.5-2.5, F1 2.5-3.5, B0 3.5-5.5 (grad -> 6), B1 5.5-7.5 (-> 8).
  // Stage 0: B0 6-8, B1 8-10, tail 10.25, optimizer 11.25.
  auto st = equal_stages(2, 1.0, 2.0);
  for (auto& p : st) p.tail_s = 0.25, p.optimizer_s = 1.0;
  std::vector<std::vector<SimulatedInstruction>> trace;
  const PipelineTime t = simulate_pipeline(st, 0.5, PipelineSchedule::GPipe, 2, 2, &trace);
  EXPECT_DOUBLE_EQ(t.batch_s, 11.25);
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[1][0].instruction.to_string(), "RecvActivation(0)");
  EXPECT_DOUBLE_EQ(trace[1][0].end_s, 1.5);
  EXPECT_DOUBLE_EQ(trace[0].back().end_s, 11.25);
  // Stage 0 idles 6 - 2 = 4 s waiting for the first gradient: 4 / 10 of its time before the tail.
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 0.4);
  // The simulated order is the program's.
  std::vector<schedule::StepInstruction> simulated;
  for (const auto& s : trace[1]) simulated.push_back(s.instruction);
  EXPECT_EQ(simulated, schedule::step_program(PipelineSchedule::GPipe, 1, 2, 2));
}

TEST(PipelineTime, EachBoundaryHasItsOwnMessageTime) {
  // 3 stages, 1 micro-batch, forward 1, backward 2, GPipe. Boundary 0 takes 0.5 s a
  // message, boundary 1 (inside a node, say) none: F 0-1, 1.5-2.5, 2.5-3.5; B 3.5-5.5,
  // 5.5-7.5, 8-10.
  const auto st = equal_stages(3, 1.0, 2.0);
  std::vector<std::vector<SimulatedInstruction>> trace;
  const PipelineTime t = simulate_pipeline(st, std::vector<double>{0.5, 0.0}, PipelineSchedule::GPipe, 1, 3, &trace);
  EXPECT_DOUBLE_EQ(t.batch_s, 10.0);
  EXPECT_DOUBLE_EQ(trace[2].front().end_s, 2.5);  // stage 2's activation came at once
  // 0.5 s on both boundaries: two more half seconds (forward and backward on boundary 1).
  EXPECT_DOUBLE_EQ(simulate_pipeline(st, 0.5, PipelineSchedule::GPipe, 1, 3).batch_s, 11.0);
  // Every schedule: one slow boundary costs less than two, more than none.
  for (auto s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::MessageDriven}) {
    const double one = simulate_pipeline(st, std::vector<double>{0.5, 0.0}, s, 4, 3).batch_s;
    EXPECT_LT(one, simulate_pipeline(st, 0.5, s, 4, 3).batch_s) << plan::pipeline_schedule_name(s);
    EXPECT_GT(one, simulate_pipeline(st, 0.0, s, 4, 3).batch_s) << plan::pipeline_schedule_name(s);
  }
}

TEST(PipelineTime, ASlowStageBoundsEveryScheduleAndNoneDeadlocks) {
  // Stage 1 is three times slower: every schedule takes at least its 9 s per micro-batch,
  // and none deadlocks with fewer micro-batches than stages (1) or a count the limit
  // does not divide (3, 5 with limit 2).
  auto st = equal_stages(4, 1.0, 2.0);
  st[1].forward_s = st[1].forward_compute_s = 3.0;
  st[1].backward_s = st[1].last_backward_s = st[1].backward_compute_s = st[1].last_backward_compute_s = 6.0;
  for (auto s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::MessageDriven})
    for (int64_t m : {1, 3, 5}) {
      const PipelineTime t = simulate_pipeline(st, 0.1, s, m, 2);
      EXPECT_GE(t.batch_s, 9.0 * static_cast<double>(m)) << plan::pipeline_schedule_name(s) << " M=" << m;
    }
  // One micro-batch goes down and back up the pipeline: 1 + 3 + 1 + 1 forward, 2 + 2 + 6 + 2
  // backward and six messages of 0.1 s, whatever the schedule.
  for (auto s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::MessageDriven})
    EXPECT_DOUBLE_EQ(simulate_pipeline(st, 0.1, s, 1, 2).batch_s, 18.6) << plan::pipeline_schedule_name(s);
  // Message-driven interleaves forwards and backwards where gpipe runs every forward
  // first: behind the slow stage it finishes earlier.
  EXPECT_LT(simulate_pipeline(st, 0.1, PipelineSchedule::MessageDriven, 3, 3).batch_s,
            simulate_pipeline(st, 0.1, PipelineSchedule::GPipe, 3, 3).batch_s);
}

TEST(PipelineTime, StagesOnOneLinkShareItDuringTheirTails) {
  // 2 stages, 1 micro-batch, forward 1, backward 2, gpipe: stage 1's backward ends at 4,
  // stage 0's at 6. Each tail: 6 s of data transfers with both stages' rings on the
  // link (eq. 10), 3 s alone, then 0.5 s of small collectives; optimizer 1 s.
  //   stage 1: alone 4-6 (1 s left), shared from 6: ends at 8, tail to 8.5, end 9.5;
  //   stage 0: shared 6-8 (1 s done), alone 8-10, tail to 10.5, end 11.5.
  auto st = equal_stages(2, 1.0, 2.0);
  for (auto& p : st) p.tail_link_s = 6.0, p.tail_s = 6.5, p.optimizer_s = 1.0, p.tail_link_stages = 2;
  std::vector<std::vector<SimulatedInstruction>> trace;
  PipelineScratch scratch;
  const PipelineTime t = simulate_pipeline(st, 0.0, PipelineSchedule::GPipe, 1, 2, &trace, &scratch);
  EXPECT_DOUBLE_EQ(t.batch_s, 11.5);
  EXPECT_DOUBLE_EQ(scratch.tail_s(0), 4.5);
  EXPECT_DOUBLE_EQ(scratch.tail_s(1), 4.5);
  int seen = 0;
  for (const auto& in : trace[0]) {
    if (in.instruction.op == schedule::StepOp::ReduceGradients) {
      EXPECT_DOUBLE_EQ(in.start_s, 6.0);
      EXPECT_DOUBLE_EQ(in.end_s, 10.5);
      ++seen;
    } else if (in.instruction.op == schedule::StepOp::OptimizerStep) {
      EXPECT_DOUBLE_EQ(in.start_s, 10.5);
      EXPECT_DOUBLE_EQ(in.end_s, 11.5);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
  // Each stage's rings on a link of their own (tail_link_stages 1): eq. 10's time, in full.
  for (auto& p : st) p.tail_link_stages = 1;
  EXPECT_DOUBLE_EQ(simulate_pipeline(st, 0.0, PipelineSchedule::GPipe, 1, 2).batch_s, 6.0 + 6.5 + 1.0);
  // Tails that do not overlap: 4 s of link time, 2 s alone; stage 1's runs 4-6, stage
  // 0's 6-8: each alone, half of eq. 10's time.
  for (auto& p : st) p.tail_link_s = 4.0, p.tail_s = 4.0, p.tail_link_stages = 2;
  EXPECT_DOUBLE_EQ(simulate_pipeline(st, 0.0, PipelineSchedule::GPipe, 1, 2).batch_s, 6.0 + 2.0 + 1.0);
  // Every schedule, 4 stages on one link, tails of 12 s (3 s alone) that start about
  // 2.1 s apart, so they overlap: stage 0, last to start, ends later than alone and
  // sooner than eq. 10's time.
  for (auto s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::MessageDriven}) {
    auto shared = equal_stages(4, 1.0, 2.0);
    for (auto& p : shared) p.tail_link_s = p.tail_s = 12.0, p.tail_link_stages = 4;
    auto own = shared;
    for (auto& p : own) p.tail_link_stages = 1;
    const double with = simulate_pipeline(shared, 0.1, s, 6, 4).batch_s, without = simulate_pipeline(own, 0.1, s, 6, 4).batch_s;
    EXPECT_LT(with, without) << plan::pipeline_schedule_name(s);
    EXPECT_GT(with, without - 12.0 + 3.0 + 0.1) << plan::pipeline_schedule_name(s);
  }
}

TEST(PipelineTime, ReusedWorkingMemoryGivesTheFreshResult) {
  // The planner keeps one PipelineScratch per thread across candidates of every size and
  // schedule: nothing of one simulation may leak into the next (clock, links, arrivals,
  // the message-driven rules and queue). Uneven stages and a message time make every
  // field count.
  PipelineScratch reused;
  int checked = 0;
  for (int64_t g : {5, 2, 4, 1, 3})
    for (auto s : {PipelineSchedule::MessageDriven, PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
      for (int64_t m : {7, 1, 4}) {
        auto st = equal_stages(g, 1.0, 2.0);
        for (int64_t i = 0; i < g; ++i) {
          auto& p = st[static_cast<size_t>(i)];
          p.forward_s = p.forward_compute_s = 1.0 + 0.25 * static_cast<double>(i % 3);
          p.last_backward_s = 2.5, p.tail_s = 0.125 * static_cast<double>(i), p.optimizer_s = 0.5;
        }
        const PipelineTime fresh = simulate_pipeline(st, 0.3, s, m, 2);
        const PipelineTime again = simulate_pipeline(st, 0.3, s, m, 2, nullptr, &reused);
        const std::string where = std::string(plan::pipeline_schedule_name(s)) + " G=" + std::to_string(g) +
                                  " M=" + std::to_string(m);
        EXPECT_EQ(fresh.batch_s, again.batch_s) << where;
        EXPECT_EQ(fresh.compute_s, again.compute_s) << where;
        EXPECT_EQ(fresh.bubble_fraction, again.bubble_fraction) << where;
        EXPECT_GT(fresh.batch_s, 0.0) << where;
        ++checked;
      }
  EXPECT_EQ(checked, 45);
}
