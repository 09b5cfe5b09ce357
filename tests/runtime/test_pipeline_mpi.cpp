// Pipelines against serial LibTorch, and the runtime against the planner's schedule,
// under real mpirun (part of runtime_mpi_tests: 1, 2, 4 and 8 ranks).
//
//  - every schedule (message-driven, 1f1b, gpipe) on every grid with Ginter in {2, 4, 8}
//    that fits the world, alone and with X/Y/Z tensor and data parallelism: the loss and
//    every gradient equal serial LibTorch's, and 20 Adam steps follow its loss curve
//    (each grid under one schedule, in turn);
//  - the same with waiting ranks sleeping between polls (axrun --wait sleep);
//  - fewer micro-batches than stages, a count the message-driven limit does not divide,
//    uneven stages and AxoNN's checkpoint interval;
//  - for every grid of the 8-rank sweep (gpt-bench, 16 sequences), the step and the
//    passes each rank runs are the instructions the planner simulated, in its order.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "axonn/planner/planner.hpp"
#include "axonn/planner/simulated_schedule.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/topology/topology_io.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using plan::PipelineSchedule;
using runtime::ProcessGrid;

namespace {

const std::vector<PipelineSchedule> kSchedules = {PipelineSchedule::MessageDriven, PipelineSchedule::OneFOneB,
                                                  PipelineSchedule::GPipe};

// A GPT of `blocks` small blocks (8: 8 stages hold one block each).
model::ModelDescription small_gpt(int blocks) {
  nlohmann::json j = nlohmann::json::parse(R"({"name": "gpt-small", "family": "gpt", "hidden": 32, "heads": 4,
      "seq_len": 8, "vocab": 64, "ffn_multiplier": 4})");
  j["num_layers"] = blocks;
  return model::model_from_json(j, "small_gpt");
}

struct PipeCase {
  model::ModelDescription desc = small_gpt(8);
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  int64_t seqs = 16;
};

// The pipeline grids of the world that divide the model and the batch, with the
// micro-batch of the default rule (at least Ginter micro-batches).
std::vector<std::pair<topo::Grid, int64_t>> pipeline_grids(const PipeCase& c) {
  std::vector<std::pair<topo::Grid, int64_t>> out;
  for (const auto& g : planner::enumerate_grids(g_world->size())) {
    if (g.ginter < 2 || c.seqs % g.gdata != 0) continue;
    const int64_t mb = planner::default_microbatch_seqs(c.seqs / g.gdata, g.gz, g.ginter);
    if (mb > 0 && !plan::divisibility_problem(c.desc, g, c.seqs, mb)) out.push_back({g, mb});
  }
  return out;
}

// Every overlap on, activation checkpointing, small buckets.
plan::Plan pipeline_plan(const PipeCase& c, const topo::Grid& g, int64_t mb, PipelineSchedule s) {
  plan::Plan p = test_plan(c.desc, g, c.seqs, mb);
  p.overlap = plan::OverlapSettings{};
  p.overlap.cache_all_gather_layers = 2;
  p.overlap.bucket_bytes = 4000;
  p.activation_checkpointing = true;
  p.pipeline.schedule = s;
  return p;
}

std::string describe(const plan::Plan& p) {
  return p.grid.to_string() + " " + plan::pipeline_schedule_name(p.pipeline.schedule) + ", " +
         std::to_string(p.microbatches()) + " micro-batches, limit " + std::to_string(p.pipeline_limit()) +
         ", interval " + std::to_string(p.checkpoint_interval) + ", stages " +
         std::to_string(p.stage_units().front()) + "..";
}

// The loss and this rank's stage's gradients against serial LibTorch.
void expect_serial(const plan::Plan& p, const PipeCase& c, gpt::SerialGpt& serial, const at::Tensor& batch,
                   const at::Tensor& serial_loss) {
  ProcessGrid pg(*g_world, p.grid, p.placement_order);
  gpt::GptStage run(p, pg, c.cfg, serial.named_parameters(), nullptr);
  const double loss = run.trainer.gradients(batch).loss;
  EXPECT_LT(std::abs(loss - serial_loss.item<double>()) / serial_loss.item<double>(), 1e-5) << describe(p);
  EXPECT_LT(worst_gradient_error(run.model, serial), 1e-5) << describe(p);
  EXPECT_FALSE(run.model.parameters().empty()) << describe(p);
}

size_t feasible_without_pipeline(const model::ModelDescription& m, const topo::Topology& t,
                                 const planner::PlannerOptions& o) {
  size_t n = 0;
  for (const auto& e : planner::rank_candidates(m, t, o).feasible) n += e.grid.ginter == 1;
  return n;
}

}  // namespace

TEST(Pipeline, EveryScheduleOnEveryGridMatchesSerial) {
  PipeCase c;
  SerialStep ref(c.cfg, c.seqs, 21, 22);
  auto& [serial, batch, serial_loss] = ref;
  const auto grids = pipeline_grids(c);
  if (g_world->size() == 1) {
    EXPECT_TRUE(grids.empty());
  }
  for (const auto& [g, mb] : grids)
    for (auto s : kSchedules) {
      plan::Plan p = pipeline_plan(c, g, mb, s);
      expect_serial(p, c, serial, batch, serial_loss);
      // Uneven stages (the first holding more) and AxoNN's checkpoint interval.
      if (g.ginter < c.desc.num_units) {
        p.pipeline.stage_units.assign(static_cast<size_t>(g.ginter), 1);
        p.pipeline.stage_units.front() += c.desc.num_units - g.ginter;
        p.checkpoint_interval = schedule::axonn_checkpoint_interval(c.desc.num_units / g.ginter, c.desc.num_units);
        expect_serial(p, c, serial, batch, serial_loss);
      }
    }
}

// A waiting stage that sleeps between polls (axrun --wait sleep) leaves the cores to the
// stages computing; it must not change a number: every grid, message-driven (whose
// choice of the next message depends on arrival order) and 1f1b.
TEST(Pipeline, SleepingWaitsChangeNoNumber) {
  PipeCase c;
  SerialStep ref(c.cfg, c.seqs, 21, 22);
  auto& [serial, batch, serial_loss] = ref;
  ScopedWaitPolicy sleeping(runtime::WaitPolicy::Sleep);
  for (const auto& [g, mb] : pipeline_grids(c))
    for (auto s : {PipelineSchedule::MessageDriven, PipelineSchedule::OneFOneB})
      expect_serial(pipeline_plan(c, g, mb, s), c, serial, batch, serial_loss);
}

TEST(Pipeline, FewerMicroBatchesThanStagesAndALimitThatDoesNotDivide) {
  PipeCase c;
  SerialStep ref(c.cfg, c.seqs, 23, 24);
  auto& [serial, batch, serial_loss] = ref;
  for (const auto& [g, mb] : pipeline_grids(c)) {
    if (g.ginter < 4) continue;
    const int64_t per_group = c.seqs / g.gdata;
    for (auto s : kSchedules) {
      plan::Plan one = pipeline_plan(c, g, per_group, s);  // one micro-batch, 4 or 8 stages
      expect_serial(one, c, serial, batch, serial_loss);
      if ((per_group / 4) % g.gz != 0) continue;
      plan::Plan odd = pipeline_plan(c, g, per_group / 4, s);  // 4 micro-batches, at most 3 in flight
      odd.pipeline.limit = 3;
      expect_serial(odd, c, serial, batch, serial_loss);
    }
  }
}

// Six blocks on four stages (2, 2, 1, 1 by default: the count need not divide), with
// whatever the rest of the world adds (X, Y, Z or data), every schedule.
TEST(Pipeline, SixBlocksOnFourStages) {
  PipeCase c;
  c.desc = small_gpt(6);
  c.cfg = gpt::GptConfig::from(c.desc);
  SerialStep ref(c.cfg, c.seqs, 27, 28);
  auto& [serial, batch, serial_loss] = ref;
  int ran = 0;
  for (const auto& [g, mb] : pipeline_grids(c)) {
    if (g.ginter != 4) continue;
    for (auto s : kSchedules) {
      plan::Plan p = pipeline_plan(c, g, mb, s);
      EXPECT_EQ(p.stage_units(), (std::vector<int64_t>{2, 2, 1, 1})) << describe(p);
      expect_serial(p, c, serial, batch, serial_loss);
      ++ran;
    }
  }
  EXPECT_EQ(ran > 0, g_world->size() % 4 == 0) << "no 4-stage grid ran on " << g_world->size() << " ranks";
}

// 20 Adam steps with clipping: pipeline plans follow the serial loss curve.
TEST(Pipeline, TwentyTrainingStepsFollowTheSerialLossCurve) {
  PipeCase c;
  SerialRun ref(c.cfg, c.seqs, 25, 26);
  // Each grid under one schedule, taking them in turn, so every schedule trains, and
  // every grid (on 8 ranks every third one: runs_curve) (EveryScheduleOnEveryGridMatchesSerial
  // checks every pair's gradients). The turn moves one schedule further every three grids,
  // so that the grids runs_curve keeps on 8 ranks (turns 0, 3, 6, ...) still take all three.
  size_t turn = 0;
  for (const auto& [g, mb] : pipeline_grids(c)) {
    const plan::Plan p = pipeline_plan(c, g, mb, kSchedules[(turn + turn / kCurveShare) % kSchedules.size()]);
    if (!runs_curve(turn++, describe(p))) continue;
    ProcessGrid pg(*g_world, g, p.placement_order);
    gpt::GptStage run(p, pg, c.cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
    EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4) << describe(p);
  }
  EXPECT_TRUE(ref.trained());
}

// The planner simulates, the runtime runs: the same instructions in the same order, on
// every grid the 8-rank validation sweep measures (gpt-bench, batch 16), for the
// schedules with a fixed order. The model is gpt-bench's shape at a quarter of its
// widths (the same grids divide it; the test checks), so that the sweep runs quickly.
TEST(Schedule, TheRuntimeRunsTheInstructionsThePlannerSimulated) {
  const auto desc = model::model_from_json(nlohmann::json::parse(R"({"name": "gpt-bench-small", "family": "gpt",
      "num_layers": 4, "hidden": 64, "heads": 8, "seq_len": 16, "vocab": 256, "ffn_multiplier": 4})"),
                                           "gpt-bench-small");
  const gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  topo::Topology t = topo::load_topology("perlmutter");
  t.num_nodes = std::max<int64_t>(1, g_world->size() / 4);
  t.gpus_per_node = g_world->size() / t.num_nodes;
  planner::PlannerOptions o;
  o.gpus = g_world->size();
  o.batch_seqs = 16;
  o.precision = plan::Precision::fp32();
  o.overlap = plan::OverlapSettings::level(4, 0);
  o.overlap.cache_all_gather_layers = 2;
  o.overlap.bucket_bytes = 300000;  // several buckets
  o.memory_limit = false;
  auto feasible = [&](const model::ModelDescription& m) {
    std::vector<std::string> grids;
    for (const auto& e : planner::rank_candidates(m, t, o).feasible) grids.push_back(e.grid.to_string());
    std::sort(grids.begin(), grids.end());
    return grids;
  };
  EXPECT_EQ(feasible(desc), feasible(model::load_model("gpt-bench")));
  gpt::SerialGpt weights(cfg, 3);
  at::Tensor batch = runtime::make_token_source("", cfg.vocab, o.batch_seqs, cfg.seq_len, 4)->batch(0);
  size_t compared = 0;
  for (auto schedule : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe}) {
    o.pipeline_schedule = schedule;
    for (const auto& g : planner::enumerate_grids(o.gpus)) {
      const planner::Evaluation e = planner::evaluate(desc, t, g, o);
      if (!e.feasible) continue;
      if (schedule == PipelineSchedule::GPipe && g.ginter == 1) continue;  // the same program
      const auto simulated = planner::simulated_schedule(desc, t, g, o);
      const plan::Plan p = planner::make_plan(desc, t, o, e, 1, 1);
      ProcessGrid pg(*g_world, g, p.placement_order);
      gpt::GptStage run(p, pg, cfg, weights.named_parameters(), nullptr, {}, /*keep_history=*/true);
      run.trainer.step(batch);
      const auto& sim = simulated[static_cast<size_t>(pg.coord(topo::Axis::Pipe))];
      const std::string where = describe(p);
      // The step.
      std::vector<schedule::StepInstruction> planned;
      for (const auto& i : sim.steps) planned.push_back(i.instruction);
      EXPECT_EQ(run.trainer.executed(), planned) << where;
      // The passes, in the order of the step.
      const auto& layers = run.engine.schedule().layers;
      ASSERT_EQ(layers.size(), sim.layers.size()) << where;
      for (size_t i = 0; i < layers.size(); ++i) {
        EXPECT_EQ(layers[i].grad_bytes, sim.layers[i].grad_bytes) << where << " layer " << i;
        EXPECT_EQ(layers[i].cached, sim.layers[i].cached) << where << " layer " << i;
        EXPECT_EQ(layers[i].segment, sim.layers[i].segment) << where << " layer " << i;
      }
      std::vector<schedule::LayerInstruction> flat;
      for (const auto& i : planned) {
        const auto& program = i.op == schedule::StepOp::Forward ? sim.forward
                              : i.microbatch == p.microbatches() - 1 ? sim.last_backward
                                                                     : sim.backward;
        if (i.op == schedule::StepOp::Forward || i.op == schedule::StepOp::Backward)
          flat.insert(flat.end(), program.begin(), program.end());
      }
      const auto& ran = run.engine.recorder().history();
      for (bool buckets : {false, true}) {
        const auto want = runtime::PassRecorder::comparable(flat, sim.layers, buckets);
        const auto got = runtime::PassRecorder::comparable(ran, sim.layers, buckets);
        EXPECT_EQ(got.size(), want.size()) << where;
        for (size_t k = 0; k < std::min(want.size(), got.size()); ++k)
          if (!(want[k] == got[k])) {
            ADD_FAILURE() << where << (buckets ? " bucket " : " instruction ") << k << ": ran " << got[k].to_string()
                          << ", planned " << want[k].to_string();
            break;
          }
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * feasible(desc).size() - feasible_without_pipeline(desc, t, o));
}
