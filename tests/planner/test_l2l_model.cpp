// The planner's L2L (planner/l2l_model.hpp, docs/model.md section 12): the program on
// its clocks by hand (with and without prefetch and clipping; equation 4 without
// prefetch), memory constant in depth with the stash on the host and growing by one
// output per unit and micro-batch on the device, rejections, and the plan's l2l fields.
#include <gtest/gtest.h>

#include "axonn/plan/plan.hpp"
#include "axonn/planner/l2l_model.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

using namespace axonn;
using namespace axonn::planner;
using schedule::l2l_program;

namespace {

std::vector<L2LUnitCost> two_units() {
  L2LUnitCost c;
  c.forward_s = 1;
  c.backward_s = 2;
  c.fetch_s = 0.5;
  c.push_s = 0.5;
  c.reduce_s = 0.25;
  c.update_s = 0.25;
  return {c, c};
}

model::ModelDescription gpt(int layers) {
  nlohmann::json j = nlohmann::json::parse(R"({"name": "gpt-l2l", "family": "gpt", "hidden": 256, "heads": 8,
      "seq_len": 128, "vocab": 2048, "ffn_multiplier": 4})");
  j["num_layers"] = layers;
  return model::model_from_json(j, "gpt");
}

PlannerOptions options(int64_t gpus, int64_t seqs) {
  PlannerOptions o;
  o.gpus = gpus;
  o.batch_seqs = seqs;
  o.precision = plan::Precision::fp32();
  return o;
}

}  // namespace

TEST(L2LTime, TheProgramOnItsClocksByHand) {
  // Fetch(0) 0.5 (waited), two forwards to 2.5 while unit 1 arrives at 1.0; unit 0's
  // prefetch lands at 3.0; two backwards of 3 s to 8.5, push to 9.0; unit 0's backwards
  // to 14.5, push to 15.0. The server: 9.0 + 0.25 + 0.25, then 15.0 + 0.25 + 0.25.
  const L2LTime eager = l2l_step_time(l2l_program(2, 2, true), two_units(), /*clipping=*/false);
  EXPECT_DOUBLE_EQ(eager.batch_s, 15.5);
  EXPECT_DOUBLE_EQ(eager.compute_s, 14.0);
  EXPECT_DOUBLE_EQ(eager.fetch_wait_s, 0.5);
  EXPECT_DOUBLE_EQ(eager.server_tail_s, 1.0);
  // With clipping both updates follow the last reduction: 15.25 + 0.5.
  EXPECT_DOUBLE_EQ(l2l_step_time(l2l_program(2, 2, true), two_units(), true).batch_s, 15.75);
  // Without prefetch every fetch waits for its copy: equation 4 with one forward visit
  // fewer, (uC + X)(N - 1) + N(3uC + X) = 2.5 + 13 = 15.5, and the last unit's push and
  // server work (0.5 + 0.5) after it.
  const L2LTime serial = l2l_step_time(l2l_program(2, 2, false), two_units(), false);
  EXPECT_DOUBLE_EQ(serial.batch_s, 16.5);
  EXPECT_DOUBLE_EQ(serial.fetch_wait_s, 1.5);
}

TEST(L2LTime, EquationSixRatios) {
  EXPECT_DOUBLE_EQ(l2l_equation6_ratio(1, 1.0, 7.0), 1.0);
  EXPECT_DOUBLE_EQ(l2l_equation6_ratio(2, 1.0, 1.0), 2.0 * 6.0 / 10.0);
  // The paper's 1-GPU Table 4 (seed-spec B3): X/C = 1.53 gives 1.28 at u = 2, 1.48 at u = 4.
  EXPECT_NEAR(l2l_equation6_ratio(2, 1.0, 1.53), 1.277, 0.002);
  EXPECT_NEAR(l2l_equation6_ratio(4, 1.0, 1.53), 1.48, 0.01);
}

TEST(L2LEvaluate, HostStashKeepsDeviceMemoryConstantInDepthAndTheDeviceStashGrows) {
  const topo::Topology t = topo::load_topology("perlmutter");
  const PlannerOptions o = options(1, 16);
  L2LCandidate host{4, {plan::StashTier::Host, true}, true}, device{4, {plan::StashTier::Device, true}, true};
  const double h4 = evaluate_l2l(gpt(4), t, o, host).eval.memory.total_bytes();
  const double h16 = evaluate_l2l(gpt(16), t, o, host).eval.memory.total_bytes();
  EXPECT_GT(h4, 0);
  EXPECT_DOUBLE_EQ(h4, h16);
  // 12 more units' outputs, each 16 sequences x 128 tokens x 256 fp32 over the micro-batches.
  const double d4 = evaluate_l2l(gpt(4), t, o, device).eval.memory.total_bytes();
  const double d16 = evaluate_l2l(gpt(16), t, o, device).eval.memory.total_bytes();
  EXPECT_DOUBLE_EQ(d16 - d4, 12.0 * 16 * 128 * 256 * 4);
  // The host tier: 16 bytes per parameter, and the stash when it is there.
  const L2LEvaluation e = evaluate_l2l(gpt(4), t, o, host);
  double params = 0;
  for (const auto& l : gpt(4).layers) params += static_cast<double>(l.weight_elements());
  EXPECT_DOUBLE_EQ(e.eval.memory.host_bytes, 16 * params + 3.0 * 16 * 128 * 256 * 4);
  EXPECT_DOUBLE_EQ(evaluate_l2l(gpt(4), t, o, device).eval.memory.host_bytes, 16 * params);
  EXPECT_EQ(e.eval.grid, (topo::Grid{1, 1, 1, 1, 1}));
  EXPECT_EQ(e.eval.microbatch_seqs, 4);
  EXPECT_GT(e.time.batch_s, e.time.compute_s);  // the copies over the host link show
}

// Each unit's backward adds its layers' weight gradients into their buffers, as the
// 3D plans' passes do (docs/model.md section 7).
TEST(L2LEvaluate, AUnitsBackwardChargesTheGradientAccumulation) {
  topo::Topology t = topo::load_topology("dgx-h100");  // the roofline's 10 bytes per element
  topo::Topology fused = t;
  fused.compute.elementwise["grad_accumulate"] = {0, 0};
  const model::ModelDescription m = gpt(4);
  const PlannerOptions o = options(1, 16);
  const L2LCandidate s{4, {plan::StashTier::Host, true}, true};
  const L2LEvaluation with = evaluate_l2l(m, t, o, s), without = evaluate_l2l(m, fused, o, s);
  ASSERT_EQ(with.units.size(), without.units.size());
  double added = 0;
  for (size_t u = 0; u < with.units.size(); ++u) {
    EXPECT_NEAR(with.units[u].forward_s, without.units[u].forward_s, 1e-15);
    added += with.units[u].backward_s - without.units[u].backward_s;
  }
  double elements = 0;
  for (const auto& l : m.layers) elements += static_cast<double>(l.weight_elements());
  EXPECT_NEAR(added, elements * 10 / t.compute.memory_bytes_per_s, 1e-3 * added);
  EXPECT_GT(with.time.batch_s, without.time.batch_s);
}

TEST(L2LEvaluate, RejectsIndivisibleBatchesAndVisitsOverTheMemory) {
  topo::Topology t = topo::load_topology("perlmutter");
  L2LCandidate s{3, {plan::StashTier::Host, true}, true};
  const L2LEvaluation bad = evaluate_l2l(gpt(4), t, options(2, 16), s);
  EXPECT_FALSE(bad.eval.feasible);
  EXPECT_EQ(bad.eval.rejection, Rejection::Divisibility);
  s.microbatches = 2;
  t.gpu_memory_bytes = 1 << 20;
  const L2LEvaluation big = evaluate_l2l(gpt(4), t, options(2, 16), s);
  EXPECT_FALSE(big.eval.feasible);
  EXPECT_EQ(big.eval.rejection, Rejection::Memory);
  EXPECT_NE(big.eval.rejected_because.find("> 1.0 MiB"), std::string::npos) << big.eval.rejected_because;
}

TEST(L2LPlan, RoundTripsAndRefusesTensorOrPipelineGrids) {
  const topo::Topology t = topo::load_topology("perlmutter");
  const PlannerOptions o = options(2, 16);
  const L2LCandidate s{2, {plan::StashTier::Device, false}, true};
  const plan::Plan p = make_plan(gpt(4), t, o, evaluate_l2l(gpt(4), t, o, s).eval, 1, 1);
  nlohmann::json j = plan::plan_to_json(p);
  EXPECT_EQ(j["strategy"], "l2l");
  const plan::Plan back = plan::plan_from_json(j, "p.json");
  EXPECT_EQ(back.strategy, plan::Strategy::L2L);
  EXPECT_EQ(back.l2l.stash, plan::StashTier::Device);
  EXPECT_FALSE(back.l2l.prefetch);
  EXPECT_EQ(back.microbatches(), 2);
  plan::Plan on_tensor = p;
  on_tensor.grid.gx = 2;
  on_tensor.grid.gdata = 1;
  const nlohmann::json tensor = plan::plan_to_json(on_tensor);
  EXPECT_NE(test::error_of([&] { plan::plan_from_json(tensor, "p.json"); }).find("gx = gy = gz = ginter = 1"),
            std::string::npos);
  nlohmann::json stray = plan::plan_to_json(plan::plan_from_json(j, "p.json"));
  stray["strategy"] = "4d";
  EXPECT_NE(test::error_of([&] { plan::plan_from_json(stray, "p.json"); }).find("present while the strategy is 4d"),
            std::string::npos);
  nlohmann::json no_strategy = j;
  no_strategy.erase("strategy");
  no_strategy.erase("l2l");
  EXPECT_EQ(plan::plan_from_json(no_strategy, "p.json").strategy, plan::Strategy::FourD);  // plans written before L2L
}

TEST(Rank, L2LIsRankedBesideThe4DGridsAndChosenWhenNothingElseFits) {
  topo::Topology t = topo::load_topology("perlmutter");
  PlannerOptions o = options(2, 16);
  o.rank_l2l = true;
  const Ranking both = rank_candidates(gpt(16), t, o);
  size_t l2l = 0, fourd = 0;
  for (const auto& e : both.feasible) (e.strategy == plan::Strategy::L2L ? l2l : fourd) += 1;
  // Every u dividing a replica's 8 sequences (1, 2, 4, 8), each stash tier; and the grids.
  EXPECT_EQ(l2l, 8u);
  EXPECT_GT(fourd, 0u);
  for (size_t i = 1; i < both.feasible.size(); ++i) EXPECT_LE(both.feasible[i - 1].batch_s, both.feasible[i].batch_s);
  // A GPU too small for any 4D grid's model state, big enough for one unit's visit.
  t.gpu_memory_bytes = 48ll << 20;
  o.rank_4d = false;
  const double l2l_peak = rank_candidates(gpt(16), t, o).feasible.front().memory.total_bytes();
  o.rank_4d = true;
  const Ranking small = rank_candidates(gpt(16), t, o);
  ASSERT_FALSE(small.feasible.empty());
  for (const auto& e : small.feasible) EXPECT_EQ(e.strategy, plan::Strategy::L2L) << strategy_label(e);
  EXPECT_LE(small.feasible.front().memory.total_bytes(), static_cast<double>(t.gpu_memory_bytes));
  EXPECT_LE(l2l_peak, static_cast<double>(t.gpu_memory_bytes));
  bool rejected_4d = false;
  for (const auto& e : small.rejected) rejected_4d |= e.strategy == plan::Strategy::FourD && e.rejection == Rejection::Memory;
  EXPECT_TRUE(rejected_4d);
  const plan::Plan p = make_plan(gpt(16), t, o, small.feasible.front(), 1, static_cast<int64_t>(small.feasible.size()));
  EXPECT_EQ(p.strategy, plan::Strategy::L2L);
  EXPECT_FALSE(p.activation_checkpointing);
}
