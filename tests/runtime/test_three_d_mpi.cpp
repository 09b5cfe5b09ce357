// Colossal-AI's 3D tensor parallelism (the 3d layout, topo::Grid::threed) in the GPT
// against serial LibTorch under real mpirun (part of runtime_mpi_tests). The layout is
// defined on any (gx, gy, gz), Colossal-AI's cube l x l x l being the one the planner
// ranks: every grid of the world with gx * gy >= 2 is run in it (on 8 ranks the cube
// 2,2,2 and the grids with data parallelism or a pipeline). Loss and every gradient
// within rel. err 1e-5 of serial, synchronous and with every overlap plus activation
// checkpointing; 20 training steps follow the serial loss curve.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/runtime/tensor_ops.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;
using runtime::ProcessGrid;

namespace {

struct ThreeDCase {
  model::ModelDescription desc = model::model_from_json(
      nlohmann::json::parse(R"({"name": "gpt-3d", "family": "gpt", "num_layers": 2, "hidden": 32, "heads": 4,
          "seq_len": 8, "vocab": 64, "ffn_multiplier": 4})"),
      "gpt-3d");
  gpt::GptConfig cfg = gpt::GptConfig::from(desc);
  int64_t seqs = 16;
};

std::vector<plan::Plan> three_d_plans(const ThreeDCase& c, std::vector<std::string>* skipped) {
  std::vector<topo::Grid> grids;
  for (auto g : planner::enumerate_grids(g_world->size()))
    if (g.gx * g.gy >= 2) {
      g.layout = topo::TensorLayout::ThreeD;
      grids.push_back(g);
    }
  return plans_on(grids, c.desc, c.seqs, skipped);
}

}  // namespace

// The runtime's two sources of 3d's row split agree for every layout: the operator
// entry's row axes (the GPT's activation shapes, the loss) and the shared rules'
// splits_rows (the embedding's scatter, the vectors' sums, the planner's costs).
TEST(ThreeD, TheOperatorEntrysRowAxesAgreeWithTheLayoutRules) {
  for (auto layout : {topo::TensorLayout::Axonn3d, topo::TensorLayout::TwoD, topo::TensorLayout::ThreeD}) {
    const runtime::TensorOps& ops = runtime::tensor_ops(layout);
    const plan::LayoutRules& rules = plan::layout_rules(layout);
    EXPECT_EQ(ops.input_rows_split.has_value(), rules.splits_rows) << topo::layout_name(rules.layout);
    EXPECT_EQ(ops.output_rows_split.has_value(), rules.splits_rows) << topo::layout_name(rules.layout);
    if (rules.splits_rows) {  // the embedding scatters the stage input's rows over Y
      EXPECT_EQ(*ops.input_rows_split, topo::Axis::Y);
      EXPECT_EQ(*ops.output_rows_split, topo::Axis::X);
    }
  }
}

TEST(ThreeD, LossAndEveryGradientMatchSerialOnEveryLayout) {
  ThreeDCase c;
  std::vector<std::string> skipped;
  const auto plans = three_d_plans(c, &skipped);
  if (g_world->size() >= 2) {
    EXPECT_FALSE(plans.empty());
  }
  SerialStep ref(c.cfg, c.seqs, 41, 42);
  expect_plans_equal_serial(plans, skipped, c.cfg, ref, "3d", [&](const plan::Plan& p, gpt::GptStage& run) {
    // Between blocks a rank holds its 1/Gy of the Z-rank's rows (AxoNN: all of them).
    const int64_t seqs = p.batch.microbatch_seqs / p.grid.gz;
    EXPECT_EQ(run.model.activation_shape(seqs),
              (std::vector<int64_t>{seqs * c.cfg.seq_len / p.grid.gy, c.cfg.hidden / p.grid.gx}));
  });
}

TEST(ThreeD, TwentyTrainingStepsFollowTheSerialLossCurve) {
  ThreeDCase c;
  SerialRun ref(c.cfg, c.seqs, 43, 44);
  std::vector<std::string> skipped;
  size_t index = 0;
  for (const auto& p : three_d_plans(c, &skipped)) {
    if (!runs_curve(index++, describe_plan(p))) continue;
    ProcessGrid pg(*g_world, p.grid, p.placement_order);
    gpt::GptStage run(p, pg, c.cfg, ref.initial.named_parameters(), nullptr, SerialRun::options());
    EXPECT_LT(worst_loss_deviation(run, *ref.source, ref.losses), 1e-4) << describe_plan(p);
  }
  EXPECT_TRUE(ref.trained());
}
