// The tensor-mode registry (plan/tensor_mode.hpp): each mode owns its own candidates,
// the modes ranked together do not overlap, aliases add nothing, and the ranking takes
// the registry's order whatever the order of the names.
#include <gtest/gtest.h>

#include <set>

#include "axonn/common/error.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/layout_costs.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

namespace axonn::planner {
namespace {

TEST(TensorModeRegistry, EachModeOwnsItsCandidatesAndTheRankedTogetherDoNotOverlap) {
  std::set<std::string> seen;  // grids of the modes ranked together, by text
  for (const auto& mode : plan::tensor_modes()) {
    const std::vector<topo::Grid> grids = enumerate_mode_grids(mode.name, 64);
    ASSERT_FALSE(grids.empty()) << mode.name;
    for (const auto& g : grids) {
      // Every candidate is named by its mode, or by the mode it lies within (1d, 2.5d).
      const std::string owner = plan::tensor_mode_of(g).name;
      const bool axonn3d_names_1d = std::string(mode.name) == "axonn3d" && owner == "1d";
      const bool within = mode.within != nullptr && owner == mode.within;
      if (!axonn3d_names_1d && !within) {
        EXPECT_EQ(owner, mode.name) << g.to_string();
      }
      if (mode.in_all) {
        EXPECT_TRUE(seen.insert(g.to_string()).second) << "twice: " << g.to_string();
      }
    }
  }
  PlannerOptions o;
  select_tensor_modes(o, "all", "--tensor-mode");
  EXPECT_EQ(o.tensor_modes, (std::vector<std::string>{"axonn3d", "sequence", "2d", "3d"}));
  select_tensor_modes(o, "2.5d", "--tensor-mode");
  EXPECT_EQ(o.tensor_modes, (std::vector<std::string>{"2.5d"}));
  EXPECT_NE(std::string(test::error_of([&] { select_tensor_modes(o, "4d", "--tensor-mode"); })).find("or all"),
            std::string::npos);
  EXPECT_NE(std::string(test::error_of([] { plan::find_tensor_mode("4d", "axplan", "--tensor-mode"); }))
                .find("axonn3d, 1d, sequence, 2d, 2.5d, 3d"),
            std::string::npos);
}

std::vector<std::string> ranked(const std::vector<std::string>& modes) {
  PlannerOptions o;
  o.gpus = 16;
  o.batch_seqs = 16;
  o.tensor_modes = modes;
  const Ranking r = rank_candidates(model::load_model("gpt-bench"), topo::load_topology("perlmutter"), o);
  std::vector<std::string> out;
  for (const auto& list : {r.feasible, r.rejected})
    for (const auto& e : list) out.push_back(e.grid.to_string() + " " + std::to_string(e.batch_s));
  return out;
}

TEST(TensorModeRegistry, AliasesAddNothingAndTheOrderOfNamesDoesNotMatter) {
  EXPECT_EQ(ranked({"2.5d"}), ranked({"2d"}));
  EXPECT_EQ(ranked({"2d", "2.5d"}), ranked({"2d"}));           // each 2d grid once
  EXPECT_EQ(ranked({"axonn3d", "1d"}), ranked({"axonn3d"}));   // 1d's grids are axonn3d's
  EXPECT_EQ(ranked({"3d", "axonn3d", "sequence"}), ranked({"axonn3d", "sequence", "3d"}));
  EXPECT_NE(std::string(test::error_of([] { ranked({"axonn3d", "bogus"}); })).find("bogus"), std::string::npos);
}

// The planner's layout entries (layout_costs.hpp): the modes' grids use all three
// layouts, and what each entry's properties do to a row-parallel layer and the stage's
// activations, by hand.
TEST(LayoutCosts, EveryModesGridsHaveTheirLayoutsEntry) {
  model::Layer row;
  row.k = 16;
  row.n = 8;
  row.role = model::LinearRole::Row;
  std::set<int> seen;
  for (const auto& mode : plan::tensor_modes()) {
    std::vector<topo::Grid> grids;
    for (const topo::Grid& g : {topo::Grid{1, 2, 2, 2, 1}, topo::Grid{2, 2, 2, 1, 1}, topo::Grid{1, 4, 1, 2, 1},
                                topo::Grid{1, 1, 1, 8, 1}})
      mode.candidates(g, grids);
    for (const topo::Grid& g : grids) seen.insert(static_cast<int>(g.layout));
  }
  EXPECT_EQ(seen.size(), 3u);  // axonn3d, 2d and 3d layouts all met
  topo::Grid two_d{1, 2, 2, 1, 1}, three_d{2, 2, 2, 1, 1};
  two_d.layout = topo::TensorLayout::TwoD;
  three_d.layout = topo::TensorLayout::ThreeD;
  const LayoutCosts &axonn = layout_costs(topo::TensorLayout::Axonn3d), &summa = layout_costs(two_d.layout),
                    &cube = layout_costs(three_d.layout);
  EXPECT_TRUE(axonn.swaps(row));
  EXPECT_FALSE(summa.swaps(row));  // 2d: every layer is a normal one
  EXPECT_TRUE(cube.swaps(row));
  // The activation between layers: hidden over X (AxoNN), over Y (2d), over X and its
  // rows over Y (3d); 2d's norm works on a 1/Gy block of the input.
  EXPECT_EQ(axonn.activation_shards(topo::Grid{2, 2, 2, 1, 1}), 2);
  EXPECT_EQ(summa.activation_shards(two_d), 2);
  EXPECT_EQ(cube.activation_shards(three_d), 4);
  EXPECT_EQ(summa.input_block_split(two_d), 2);
  EXPECT_EQ(axonn.input_block_split(topo::Grid{2, 2, 2, 1, 1}), 1);
}

}  // namespace
}  // namespace axonn::planner
