// The tensor-mode registry (plan/tensor_mode.hpp): each mode owns its own candidates,
// the modes ranked together do not overlap, aliases add nothing, and the ranking takes
// the registry's order whatever the order of the names.
#include <gtest/gtest.h>

#include <set>

#include "axonn/common/error.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/layout_costs.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/schedule.hpp"
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
  EXPECT_EQ(o.tensor_modes, (std::vector<std::string>{"axonn3d", "sequence", "2d", "2d-broadcast", "3d"}));
  select_tensor_modes(o, "2.5d", "--tensor-mode");
  EXPECT_EQ(o.tensor_modes, (std::vector<std::string>{"2.5d"}));
  EXPECT_NE(std::string(test::error_of([&] { select_tensor_modes(o, "4d", "--tensor-mode"); })).find("or all"),
            std::string::npos);
  EXPECT_NE(std::string(test::error_of([] { plan::find_tensor_mode("4d", "axplan", "--tensor-mode"); }))
                .find("axonn3d, 1d, sequence, 2d, 2d-broadcast, 2.5d, 3d"),
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

// The planner's layout entries (layout_costs.hpp): the modes' grids use all four
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
  EXPECT_EQ(seen.size(), 4u);  // axonn3d, 2d, 2d-broadcast and 3d layouts all met
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
  // A grid's entry: its layout's, or with a sequence group the sequence entry, AxoNN's
  // with the ring as the attention's collectives (the only entry that has them).
  topo::Grid sequence{1, 1, 1, 4, 1};
  sequence.sequence = 2;
  const LayoutCosts& ring = layout_costs(sequence);
  EXPECT_EQ(&layout_costs(two_d), &summa);
  EXPECT_EQ(&layout_costs(topo::Grid{1, 1, 1, 4, 1}), &axonn);
  EXPECT_NE(&ring, &axonn);
  EXPECT_EQ(ring.rules, axonn.rules);
  EXPECT_EQ(ring.collectives, axonn.collectives);
  EXPECT_TRUE(ring.swaps(row));
  ASSERT_NE(ring.attention, nullptr);
  EXPECT_EQ(axonn.attention, nullptr);
  EXPECT_EQ(summa.attention, nullptr);
  EXPECT_EQ(cube.attention, nullptr);
  model::Layer attention;
  attention.kind = model::LayerKind::Attention;
  attention.heads = 4;
  attention.head_dim = 8;
  LayerCommSettings s;
  s.tokens = 64;
  s.element_bytes = 4;
  s.sequence_bw = 1e9;
  LayerCollectives c;
  ring.attention(attention, sequence, s, c);
  // One chunk: 64 tokens x 32 columns x 4 bytes. 2 members (docs/model.md section 1):
  // forward 2(p-1) = 2 shifts of it, backward 2p-1 = 3 shifts of twice it.
  const double chunk_s = 64.0 * 32 * 4 / 1e9;
  EXPECT_DOUBLE_EQ(c.ring_forward_s, 2 * chunk_s);
  EXPECT_DOUBLE_EQ(c.ring_backward_s, 3 * 2 * chunk_s);
  // layer_collectives takes a sequence grid's attention costs from that entry.
  const LayerCollectives routed = layer_collectives(attention, sequence, AxisBandwidths{}, s);
  EXPECT_DOUBLE_EQ(routed.ring_forward_s, 2 * chunk_s);
  EXPECT_DOUBLE_EQ(routed.ring_backward_s, 3 * 2 * chunk_s);
}

// The layouts' shared entries (plan/layout_rules.hpp): the schedule's instructions,
// divisibility and the hidden axis come from them, the same for planner and runtime.
TEST(LayoutRules, TheInstructionsAndTheDivisibilityOfEachLayoutComeFromItsEntry) {
  using topo::Axis;
  using topo::TensorLayout;
  model::Layer linear, embedding;
  linear.k = 16;
  linear.n = 12;
  embedding.kind = model::LayerKind::Embedding;
  embedding.k = 12;
  embedding.n = 16;
  const std::vector<std::tuple<TensorLayout, Axis, bool, bool, bool>> expected = {
      // layout, hidden axis, input gathered, forward collective, dO gathered
      {TensorLayout::Axonn3d, Axis::X, false, true, false},
      {TensorLayout::TwoD, Axis::Y, true, false, false},
      {TensorLayout::ThreeD, Axis::X, true, true, true},
      {TensorLayout::TwoDBroadcast, Axis::Y, false, false, false}};
  for (const auto& [layout, hidden, gathers, forward, grad_gather] : expected) {
    const plan::LayoutRules& r = plan::layout_rules(layout);
    EXPECT_EQ(r.layout, layout);
    EXPECT_EQ(r.hidden_axis, hidden) << topo::layout_name(r.layout);
    EXPECT_EQ(&layout_costs(layout).rules->hidden_axis, &r.hidden_axis) << "the planner's entry points to it";
    const schedule::PassLayer l = schedule::pass_layer(linear, false, 1, 0, layout);
    EXPECT_EQ(l.gathers_input, gathers) << topo::layout_name(r.layout);
    EXPECT_EQ(l.forward_collective, forward) << topo::layout_name(r.layout);
    EXPECT_EQ(l.gathers_output_grad, grad_gather) << topo::layout_name(r.layout);
    EXPECT_FALSE(schedule::pass_layer(embedding, false, 1, 0, layout).gathers_input) << topo::layout_name(r.layout) << ": tokens";
    // Only 2d-broadcast keeps a linear layer's weight local; never an embedding's.
    EXPECT_EQ(l.local_weight, layout == TensorLayout::TwoDBroadcast) << topo::layout_name(r.layout);
    EXPECT_FALSE(schedule::pass_layer(embedding, false, 1, 0, layout).local_weight) << topo::layout_name(r.layout);
  }
  // Divisibility through the entries: 2d's q x q shape and its blocks k/q x n/q, 3d's
  // rows split by whole sequences, AxoNN's blocks otherwise.
  topo::Grid two_d{2, 2, 2, 1, 1};
  two_d.layout = TensorLayout::TwoD;
  const model::ModelDescription m = model::load_model("gpt-tiny");
  auto why = plan::batch_divisibility_problem(m, two_d, 8, 8);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("q x q grid"), std::string::npos) << *why;
  two_d.gx = 1;
  EXPECT_FALSE(plan::batch_divisibility_problem(m, two_d, 8, 8).has_value());
  model::Layer odd = linear;
  odd.k = 3;  // AxoNN on 1,2,2: a 3 x 2 block, split over Z; 2d: k = 3 not in q = 2 blocks
  odd.n = 4;
  EXPECT_TRUE(plan::layer_divides(odd, topo::Grid{1, 2, 2, 1, 1}));
  EXPECT_FALSE(plan::layer_divides(odd, two_d));
  EXPECT_EQ(plan::layer_divisibility_problem(odd, two_d), "layer : k=3 is not divisible by q (2d)=2");
  odd.n = 2;  // a 3 x 1 block: not split over Z = 2
  EXPECT_EQ(plan::layer_divisibility_problem(odd, topo::Grid{1, 2, 2, 1, 1}),
            "layer : local weight block=3 is not divisible by gz=2");
  topo::Grid cube{2, 2, 2, 1, 1};
  cube.layout = TensorLayout::ThreeD;
  EXPECT_TRUE(plan::batch_divisibility_problem(m, cube, 8, 2).has_value());  // 1 sequence per Z-rank, 4 ranks
  EXPECT_FALSE(plan::batch_divisibility_problem(m, cube, 8, 8).has_value());
  EXPECT_FALSE(plan::batch_divisibility_problem(m, topo::Grid{2, 2, 2, 1, 1}, 8, 2).has_value());  // AxoNN's
}

}  // namespace
}  // namespace axonn::planner
