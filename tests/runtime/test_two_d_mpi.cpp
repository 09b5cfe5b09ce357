// Colossal-AI's 2D tensor parallelism (the 2d layout, topo::Grid::summa) in the GPT
// against serial LibTorch under real mpirun (part of runtime_mpi_tests), in both of
// SUMMA's forms (2d: the collective form; 2d-broadcast: the paper's broadcasts, the
// weight never gathered): every layout of the world with a q x q tensor group (q >= 2: 4 ranks alone; on 8 with data
// parallelism or a pipeline of 2). Loss and every gradient within rel. err 1e-5 of
// serial, synchronous and with every overlap and activation checkpointing; the shards
// of sharded initialization equal the serial model's; 20 training steps follow the
// serial loss curve.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "axonn/gpt/gpt_stage.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;

namespace {

struct TwoDCase {
  model::ModelDescription desc = model::model_from_json(
      nlohmann::json::parse(R"({"name": "gpt-2d", "family": "gpt", "num_layers": 2, "hidden": 32, "heads": 4,
          "seq_len": 8, "vocab": 64, "ffn_multiplier": 4})"),
      "gpt-2d");
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  int64_t seqs = 8;
};

// Every grid of the world of the form 1,q,q,gdata,ginter with q >= 2, in the layout of
// `mode` (2d or 2d-broadcast).
std::vector<plan::Plan> two_d_plans(const TwoDCase& c, std::vector<std::string>* skipped, const std::string& mode) {
  return plans_on(planner::enumerate_mode_grids(mode, g_world->size()), c.desc, c.seqs, skipped);
}

const char* const kForms[] = {"2d", "2d-broadcast"};


}  // namespace

TEST(TwoD, LossAndEveryGradientMatchSerialOnEveryLayout) {
  TwoDCase c;
  SerialStep ref(c.cfg, c.seqs, 31, 32);
  for (const char* mode : kForms) {
    std::vector<std::string> skipped;
    const auto plans = two_d_plans(c, &skipped, mode);
    if (g_world->size() >= 4) {
      EXPECT_FALSE(plans.empty()) << mode;
    }
    for (const auto& p : plans) EXPECT_EQ(topo::layout_name(p.grid.layout), std::string(mode));
    expect_plans_equal_serial(plans, skipped, c.cfg, ref, mode, [&](const plan::Plan& p, gpt::GptStage& run) {
      // The activations between blocks are hidden blocks (2d), not AxoNN's full width at gx = 1.
      EXPECT_EQ(run.model.activation_shape(2), (std::vector<int64_t>{2 * c.cfg.seq_len, c.cfg.hidden / p.grid.gy}));
    });
  }
}

// Sharded initialization in the 2d layout: each rank's shards, computed from the seed
// alone, are bitwise those a serial model of that seed gives it.
TEST(TwoD, SeededShardsAreTheSerialModelsShards) {
  TwoDCase c;
  std::vector<std::string> skipped;
  gpt::SerialGpt serial(c.cfg, 7);
  for (const auto& p : two_d_plans(c, &skipped, "2d")) {
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptStage from_serial(p, pg, c.cfg, serial.named_parameters(), nullptr);
    gpt::GptStage seeded(p, pg, c.cfg, gpt::InitialWeights::seeded(7), nullptr);
    auto& a = from_serial.model.parameters();
    auto& b = seeded.model.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i].tensor, b[i].tensor)) << a[i].name;
  }
}

TEST(TwoD, TwentyTrainingStepsFollowTheSerialLossCurve) {
  TwoDCase c;
  SerialRun ref(c.cfg, c.seqs, 33, 34);
  std::vector<std::string> skipped;
  for (const char* mode : kForms)
    for (const auto& p : two_d_plans(c, &skipped, mode)) {
      ProcessGrid pg(*g_world, p.grid, p.placement_order);
      gpt::GptStage run(p, pg, c.cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
      EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4) << describe_plan(p);
    }
  EXPECT_TRUE(ref.trained());
}
