// Enumeration, evaluation and ranking (docs/model.md sections 3-6).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

using namespace axonn;
using namespace axonn::planner;
using axonn::test::error_of;

TEST(Enumerate, CountsAreOrderedFactorizationsIntoFive) {
  // Number of ordered 5-tuples with product G: prod over primes p^a of C(a+4, 4).
  EXPECT_EQ(enumerate_grids(1).size(), 1u);
  EXPECT_EQ(enumerate_grids(7).size(), 5u);     // C(5,4)
  EXPECT_EQ(enumerate_grids(8).size(), 35u);    // C(7,4)
  EXPECT_EQ(enumerate_grids(12).size(), 75u);   // C(6,4) * C(5,4)
  EXPECT_EQ(enumerate_grids(32).size(), 126u);  // C(9,4)
  EXPECT_EQ(enumerate_grids(16384).size(), 3060u);  // C(18,4)
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> seen;
  for (const auto& g : enumerate_grids(12)) {
    EXPECT_EQ(g.total(), 12);
    EXPECT_TRUE(seen.insert({g.gx, g.gy, g.gz, g.gdata, g.ginter}).second);
  }
}

namespace {

// One block holding a single normal layer k=1024 -> n=4096; seq 1024.
model::ModelDescription one_layer_model() {
  return model::model_from_json(nlohmann::json::parse(R"({"name": "one", "family": "explicit",
      "seq_len": 1024, "hidden": 1024,
      "layers": [{"type": "block", "layers": [{"type": "linear", "k": 1024, "n": 4096}]}]})"),
                                "one.json");
}

PlannerOptions options(int64_t gpus, int64_t batch_seqs, CommModel model = CommModel::Full) {
  PlannerOptions o;
  o.gpus = gpus;
  o.batch_seqs = batch_seqs;
  o.comm_model = model;
  return o;
}

topo::Topology four_per_node() {
  topo::Topology t;
  t.name = "test";
  t.gpus_per_node = 4;
  t.num_nodes = 8;
  t.gpu_memory_bytes = 1LL << 40;
  t.peak_flops_per_s = 1e15;
  t.intra_node_bandwidth_bytes_per_s = 100e9;
  t.inter_node_bandwidth_bytes_per_s = 10e9;
  return t;
}

}  // namespace

// A cluster whose non-blocking all-gather is linear (topology "nonblocking_collectives"):
// the Z all-gathers that cross nodes take m (p - m) / (p - 1) times a ring's, nothing
// else changes, and neither the paper model nor the placement-agnostic one sees it.
TEST(Evaluate, ALinearAllGatherSlowsOnlyTheAllGathersAcrossNodes) {
  PlannerOptions o = options(8, 16);
  topo::Topology ring = four_per_node(), linear = four_per_node();
  linear.nonblocking.all_gather = topo::AllGatherAlgorithm::Linear;
  for (const auto& [grid, slowdown] : std::vector<std::pair<topo::Grid, double>>{
           {topo::Grid{1, 1, 8, 1, 1}, 16.0 / 7.0},  // 4 of the 8 on each node
           {topo::Grid{1, 2, 4, 1, 1}, 4.0 / 3.0},   // 2 of the 4
           {topo::Grid{2, 2, 2, 1, 1}, 1.0},         // one per node
           {topo::Grid{1, 1, 4, 2, 1}, 1.0}}) {      // inside a node
    const auto r = evaluate(one_layer_model(), ring, grid, o), l = evaluate(one_layer_model(), linear, grid, o);
    ASSERT_TRUE(r.feasible && l.feasible) << grid.to_string();
    EXPECT_NEAR(l.comm.ag_z, r.comm.ag_z * slowdown, 1e-12 * r.comm.ag_z) << grid.to_string();
    EXPECT_DOUBLE_EQ(l.comm.rs_z, r.comm.rs_z) << grid.to_string();
    EXPECT_DOUBLE_EQ(l.comm.ar_data, r.comm.ar_data) << grid.to_string();
    if (slowdown > 1) {
      EXPECT_GT(l.batch_s, r.batch_s) << grid.to_string();
    }
  }
  // ZeRO's all-gathers over the data group: ZeRO-1 reduce-scatters (a ring) and
  // all-gathers once, half an all-reduce each.
  PlannerOptions zero = options(8, 16);
  zero.optimizer.zero = 1;
  const topo::Grid data{1, 1, 1, 8, 1};  // 4 of the 8 on each node
  const auto zr = evaluate(one_layer_model(), ring, data, zero), zl = evaluate(one_layer_model(), linear, data, zero);
  ASSERT_TRUE(zr.feasible && zl.feasible);
  EXPECT_NEAR(zl.comm.ar_data, zr.comm.ar_data * 0.5 * (1.0 + 16.0 / 7.0), 1e-12 * zr.comm.ar_data);
  const PlannerOptions paper = options(8, 16, CommModel::Paper);
  EXPECT_DOUBLE_EQ(evaluate(one_layer_model(), linear, topo::Grid{1, 1, 8, 1, 1}, paper).comm.ag_z,
                   evaluate(one_layer_model(), ring, topo::Grid{1, 1, 8, 1, 1}, paper).comm.ag_z);
  PlannerOptions agnostic = options(8, 16);
  agnostic.placement_aware = false;
  EXPECT_DOUBLE_EQ(evaluate(one_layer_model(), linear, topo::Grid{1, 1, 8, 1, 1}, agnostic).comm.ag_z,
                   evaluate(one_layer_model(), ring, topo::Grid{1, 1, 8, 1, 1}, agnostic).comm.ag_z);
}

TEST(Evaluate, PaperModeOneLayerByHand) {
  PlannerOptions o = options(32, 16, CommModel::Paper);
  // grid (2,4,2,2,1), m = 16*1024/2 = 8192. Eq. 10: X (ip 1, p 2) 100 GB/s;
  // Y (ip 2, p 4) 10/2 = 5 GB/s; Z (ip 8, p 2) 10/4 = 2.5 GB/s; data (ip 16) 2.5 GB/s.
  auto e = evaluate(one_layer_model(), four_per_node(), topo::Grid{2, 4, 2, 2, 1}, o);
  ASSERT_TRUE(e.feasible) << e.rejected_because;
  EXPECT_DOUBLE_EQ(e.comm.ag_z, 2 * 0.5 * 1048576 / 2.5e9);         // 2 all-gathers of 1 MiB
  EXPECT_DOUBLE_EQ(e.comm.rs_z, 0.5 * 1048576 / 2.5e9);
  EXPECT_DOUBLE_EQ(e.comm.ar_x, 2 * (2 * 0.5 * 8388608 / 100e9));  // 2 forward all-reduces
  EXPECT_DOUBLE_EQ(e.comm.ar_y, 2 * 0.75 * 4194304 / 5e9);
  EXPECT_DOUBLE_EQ(e.comm.ar_data, 2 * 0.5 * 1048576 / 2.5e9);      // fp32 gradients
  EXPECT_NEAR(e.comm_s, 2.47463936e-3, 1e-15);
}

// Time-sliced ranks (topology cores_per_rank below 1; docs/model.md section 2, "Tensor
// rings out of step"): a tensor axis whose groups cross nodes with rings of other stages
// or replicas on the link (an order placing the data or pipeline axis inside it) pays
// those rings only for their share of the passes, so its collectives lie between its
// own stage's rings alone on the link and eq. 10's every ring at once. Rings joined by
// inner tensor axes stay in step (eq. 10), as do groups with one ring per node, groups
// inside a node, the data all-reduce, dedicated cores, the paper model and the
// placement-agnostic one.
TEST(Evaluate, TensorRingsOfTimeSlicedRanksCrossTheLinkOutOfStep) {
  topo::Topology dedicated = four_per_node();
  dedicated.peak_flops_per_s = 2e11;  // compute between the collectives
  topo::Topology sliced = dedicated, own_core = dedicated;
  sliced.cores_per_rank = 0.25;
  own_core.cores_per_rank = 1.0;
  PlannerOptions o = options(8, 16);
  // The data axis innermost: Z's 4 rings on a node's link are 4 replicas' (1,1,2,4,1)
  // or 2 replicas' X pairs (2,1,2,2,1: Z's ip is 4).
  o.order = topo::parse_order("data,x,y,z,pipe", "test", "--order");
  for (const auto& [g, in_step] : {std::pair{topo::Grid{1, 1, 2, 4, 1}, 1.0}, std::pair{topo::Grid{2, 1, 2, 2, 1}, 2.0}}) {
    const auto e = evaluate(one_layer_model(), dedicated, g, o), s = evaluate(one_layer_model(), sliced, g, o);
    ASSERT_TRUE(e.feasible && s.feasible) << g.to_string();
    // latency 0: the rings in step alone move 4 / in_step times as fast as eq. 10's
    EXPECT_LT(s.comm.ag_z, e.comm.ag_z) << g.to_string();
    EXPECT_GT(s.comm.ag_z, e.comm.ag_z * in_step / 4) << g.to_string();
    EXPECT_NEAR(s.comm.rs_z / e.comm.rs_z, s.comm.ag_z / e.comm.ag_z, 1e-12) << g.to_string();  // one share per axis
    EXPECT_DOUBLE_EQ(s.comm.ar_data, e.comm.ar_data) << g.to_string();  // the data all-reduce keeps eq. 10
    EXPECT_LT(s.batch_s, e.batch_s) << g.to_string();
  }
  o.order = topo::default_order();
  for (const topo::Grid& g : {topo::Grid{1, 4, 2, 1, 1},     // Z: 4 rings per node, joined by Y
                              topo::Grid{2, 2, 2, 1, 1},     // joined by X and Y
                              topo::Grid{1, 1, 8, 1, 1},     // one Z ring per node
                              topo::Grid{1, 2, 2, 2, 1},     // tensor groups inside a node, data across
                              topo::Grid{1, 1, 1, 8, 1}}) {  // data alone
    const auto e = evaluate(one_layer_model(), dedicated, g, o), s = evaluate(one_layer_model(), sliced, g, o);
    ASSERT_TRUE(e.feasible && s.feasible) << g.to_string();
    EXPECT_DOUBLE_EQ(s.batch_s, e.batch_s) << g.to_string();
    EXPECT_DOUBLE_EQ(s.comm.ag_z, e.comm.ag_z) << g.to_string();
  }
  o.order = topo::parse_order("data,x,y,z,pipe", "test", "--order");
  const topo::Grid g{1, 1, 2, 4, 1};
  EXPECT_DOUBLE_EQ(evaluate(one_layer_model(), own_core, g, o).batch_s, evaluate(one_layer_model(), dedicated, g, o).batch_s);
  PlannerOptions agnostic = o;
  agnostic.placement_aware = false;
  EXPECT_DOUBLE_EQ(evaluate(one_layer_model(), sliced, g, agnostic).batch_s,
                   evaluate(one_layer_model(), dedicated, g, agnostic).batch_s);
  PlannerOptions paper = options(8, 16, CommModel::Paper);
  paper.order = o.order;
  EXPECT_DOUBLE_EQ(evaluate(one_layer_model(), sliced, g, paper).comm_s, evaluate(one_layer_model(), dedicated, g, paper).comm_s);
}

// Which of eq. 10's rings on a node's link run in step with a tensor group's: those its
// inner tensor axes join, up to the first pipeline or data axis of more than one member.
TEST(Bandwidth, TensorRingsOnALinkAreInStepWhereInnerTensorAxesJoinThem) {
  topo::Topology t = four_per_node();
  auto rings = [&](const topo::Grid& g, const char* order, topo::Axis a) {
    const LinkRings r = tensor_rings_on_link(t, g, topo::parse_order(order, "test", "--order"), a);
    return std::pair{r.rings, r.in_step};
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(rings({1, 4, 2, 1, 1}, "x,y,z,pipe,data", topo::Axis::Z), (P{4, 4}));  // Y joins them
  EXPECT_EQ(rings({1, 4, 2, 1, 1}, "x,y,z,pipe,data", topo::Axis::Y), (P{1, 1}));  // inside a node
  EXPECT_EQ(rings({1, 1, 8, 1, 1}, "x,y,z,pipe,data", topo::Axis::Z), (P{1, 1}));  // one ring per node
  EXPECT_EQ(rings({1, 1, 2, 4, 1}, "data,x,y,z,pipe", topo::Axis::Z), (P{4, 1}));  // 4 replicas'
  EXPECT_EQ(rings({1, 2, 2, 2, 1}, "data,x,y,z,pipe", topo::Axis::Z), (P{4, 2}));  // 2 replicas' Y pairs
  EXPECT_EQ(rings({2, 1, 2, 2, 1}, "data,x,y,z,pipe", topo::Axis::Z), (P{4, 2}));  // their X pairs
  EXPECT_EQ(rings({2, 1, 2, 2, 1}, "x,data,y,z,pipe", topo::Axis::Z), (P{4, 2}));  // X pairs of 2 replicas
  EXPECT_EQ(rings({2, 1, 2, 1, 2}, "x,pipe,z,y,data", topo::Axis::Z), (P{4, 2}));  // of 2 stages
  EXPECT_EQ(rings({1, 1, 2, 1, 4}, "pipe,x,y,z,data", topo::Axis::Z), (P{4, 1}));
  EXPECT_EQ(tensor_rings_on_link(t, {2, 1, 2, 2, 1}, topo::parse_order("x,data,y,z,pipe", "test", "--order"),
                                 topo::Axis::Z).blocks(), 2);
}

TEST(Evaluate, PlacementAgnosticUsesInterNodeBandwidthEverywhere) {
  PlannerOptions o = options(32, 16, CommModel::Paper);
  o.placement_aware = false;
  auto e = evaluate(one_layer_model(), four_per_node(), topo::Grid{2, 4, 2, 2, 1}, o);
  EXPECT_DOUBLE_EQ(e.comm.ar_x, 2 * (2 * 0.5 * 8388608 / 10e9));
  EXPECT_DOUBLE_EQ(e.comm.ar_y, 2 * 0.75 * 4194304 / 10e9);
}

// Pipeline stages whose data all-reduces cross one node's link share it by how their
// tails overlap (docs/model.md section 10). On nodes of 4, grid 1,1,1,2,4 puts the 4
// stages of a data member on one node. The comparison: 1-GPU nodes with a quarter of
// the link, where eq. 10 gives the data group the same bandwidth but each link carries
// one stage's ring (and equal point-to-point rates, so the pipelines run alike).
TEST(Evaluate, PipelineStagesOnOneNodeShareTheLinkByTheirTails) {
  const auto m = model::model_from_json(nlohmann::json::parse(R"({"name": "four", "family": "explicit",
      "seq_len": 256, "hidden": 1024, "layers": [
      {"type": "block", "layers": [{"type": "linear", "k": 1024, "n": 4096}]},
      {"type": "block", "layers": [{"type": "linear", "k": 1024, "n": 4096}]},
      {"type": "block", "layers": [{"type": "linear", "k": 1024, "n": 4096}]},
      {"type": "block", "layers": [{"type": "linear", "k": 1024, "n": 4096}]}]})"),
                                        "four.json");
  topo::Topology on_one = four_per_node(), apart = four_per_node();
  apart.gpus_per_node = 1;
  apart.num_nodes = 32;
  apart.inter_node_bandwidth_bytes_per_s /= 4;
  for (topo::Topology* t : {&on_one, &apart}) t->point_to_point = {10e9, 10e9};
  const topo::Grid g{1, 1, 1, 2, 4};
  for (int zero : {0, 1}) {
    PlannerOptions o = options(8, 16);
    o.overlap.bucketed_data_parallel_all_reduce = false;  // the whole all-reduce in the tail
    o.optimizer.zero = zero;
    const Evaluation shared = evaluate(m, on_one, g, o), alone = evaluate(m, apart, g, o);
    ASSERT_TRUE(shared.feasible && alone.feasible) << shared.rejected_because << alone.rejected_because;
    EXPECT_GT(alone.comm.ar_data, 0.0) << "ZeRO-" << zero;
    // Less than eq. 10's time, more than alone (a quarter of it).
    EXPECT_LT(shared.comm.ar_data, alone.comm.ar_data) << "ZeRO-" << zero;
    EXPECT_GT(shared.comm.ar_data, alone.comm.ar_data / 4) << "ZeRO-" << zero;
    EXPECT_LT(shared.batch_s, alone.batch_s) << "ZeRO-" << zero;
    EXPECT_GE(shared.batch_s, alone.batch_s - 0.75 * alone.comm.ar_data) << "ZeRO-" << zero;
  }
}

TEST(Evaluate, RejectsWithReasons) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(24, 16);
  auto e = evaluate(m, t, topo::Grid{3, 1, 8, 1, 1}, o);
  EXPECT_FALSE(e.feasible);
  EXPECT_EQ(e.rejection, Rejection::Divisibility);
  EXPECT_NE(e.rejected_because.find("not divisible by gx=3"), std::string::npos) << e.rejected_because;
  e = evaluate(m, t, topo::Grid{1, 1, 1, 3, 8}, o);
  EXPECT_NE(e.rejected_because.find("gdata=3"), std::string::npos) << e.rejected_because;
  o.gpus = 32;
  o.batch_seqs = 32;
  e = evaluate(m, t, topo::Grid{1, 1, 1, 32, 1}, o);  // the whole model on every GPU
  EXPECT_EQ(e.rejection, Rejection::Memory);
  EXPECT_NE(e.rejected_because.find("> 40.0 GiB"), std::string::npos) << e.rejected_because;
  // model state alone: 18 bytes per parameter (bf16 weights, fp32 gradients, master and
  // Adam, Megatron-LM's mixed precision), unsharded, and one fp32 gradient bucket
  EXPECT_DOUBLE_EQ(e.memory.model_state_bytes, 18.0 * static_cast<double>(m.parameters()) + 4.0 * (1 << 22));
  o.batch_seqs = 16;
  e = evaluate(m, t, topo::Grid{1, 1, 1, 1, 32}, o);
  EXPECT_NE(e.rejected_because.find("sequences per data-parallel group"), std::string::npos) << e.rejected_because;
}

TEST(Evaluate, ModelStateIsShardedOverTensorAndPipelineGroups) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16);
  auto e = evaluate(m, t, topo::Grid{2, 2, 4, 2, 1}, o);
  EXPECT_DOUBLE_EQ(e.memory.model_state_bytes, 18.0 * static_cast<double>(m.parameters()) / 16.0 + 4.0 * (1 << 22));
  EXPECT_GT(e.memory.gathered_weight_bytes, 0.0);
  auto no_z = evaluate(m, t, topo::Grid{4, 4, 1, 2, 1}, o);
  EXPECT_EQ(no_z.memory.gathered_weight_bytes, 0.0);  // nothing to gather without Z
  EXPECT_EQ(no_z.comm.ag_z, 0.0);
}

TEST(Evaluate, FullModelPipelineAndCache) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16);
  auto flat = evaluate(m, t, topo::Grid{2, 2, 2, 4, 1}, o);
  EXPECT_EQ(flat.comm.p2p_pipe, 0.0);
  EXPECT_EQ(flat.microbatches, 1);
  auto piped = evaluate(m, t, topo::Grid{2, 2, 2, 1, 4}, o);
  ASSERT_GT(piped.microbatches, 0) << piped.rejected_because;
  EXPECT_GE(piped.microbatches, 4);  // the default rule fills the pipeline
  EXPECT_GT(piped.comm.p2p_pipe, 0.0);
  o.overlap.cache_all_gather_layers = 1000;
  auto cached = evaluate(m, t, topo::Grid{2, 2, 2, 4, 1}, o);
  EXPECT_LT(cached.comm.ag_z, flat.comm.ag_z);
  EXPECT_GT(cached.memory.gathered_weight_bytes, flat.memory.gathered_weight_bytes);
}

TEST(Rank, SortedFeasibleAndPaperModeHasNoPipeline) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16, CommModel::Paper);
  auto r = rank_candidates(m, t, o);
  ASSERT_FALSE(r.feasible.empty());
  EXPECT_EQ(r.feasible.size() + r.rejected.size(), 56u);  // ginter = 1: C(8,3) 4-tuples of 32
  for (size_t i = 1; i < r.feasible.size(); ++i) EXPECT_LE(r.feasible[i - 1].comm_s, r.feasible[i].comm_s);
  for (const auto& e : r.feasible) {
    EXPECT_EQ(e.grid.ginter, 1);
    EXPECT_LE(e.memory.total_bytes(), static_cast<double>(t.gpu_memory_bytes));
  }
  // The placement-agnostic model ranks differently (the point of the paper's Fig. 7).
  o.placement_aware = false;
  auto a = rank_candidates(m, t, o);
  ASSERT_EQ(a.feasible.size(), r.feasible.size());
  bool differ = false;
  for (size_t i = 0; i < 5; ++i) differ |= !(a.feasible[i].grid == r.feasible[i].grid);
  EXPECT_TRUE(differ);
}

TEST(Rank, RequestErrorsAndInfeasibility) {
  auto m = model::load_model("gpt-80b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(4, 4);
  auto r = rank_candidates(m, t, o);
  EXPECT_TRUE(r.feasible.empty());
  auto why = explain_infeasible(r, t);
  EXPECT_NE(why.find("smallest memory per GPU is"), std::string::npos) << why;
  EXPECT_NE(why.find("> 40.0 GiB"), std::string::npos) << why;
  o.gpus = 100000;
  EXPECT_NE(error_of([&] { rank_candidates(m, t, o); }).find("exceeds topology 'perlmutter'"), std::string::npos);
  o.gpus = 6;
  EXPECT_NE(error_of([&] { rank_candidates(m, t, o); }).find("whole nodes"), std::string::npos);
  o.gpus = 4;
  o.batch_seqs = 0;
  EXPECT_NE(error_of([&] { rank_candidates(m, t, o); }).find("at least one sequence"), std::string::npos);
}

// AxoNN 2022 section V: with the optimizer offloaded the device keeps 4 bytes per
// parameter (bf16 weights and gradients) and a 16 * bsize working set; the host tier the
// 12 bytes of fp32 master weights and moments. A grid rejected for its 16 bytes per
// parameter (and one fp32 gradient bucket) fits with the offload.
TEST(Evaluate, OffloadedOptimizerKeepsFourBytesPerParameterAndTheWorkingSet) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16);
  o.precision = plan::Precision::bf16_gradients();  // the paper's: bf16 gradients
  const topo::Grid g{2, 2, 4, 2, 1};
  const double phi = static_cast<double>(m.parameters()) / 16.0;
  const Evaluation base = evaluate(m, t, g, o);
  o.optimizer.offload = true;
  o.optimizer.bucket_elements = 1 << 22;
  const Evaluation off = evaluate(m, t, g, o);
  EXPECT_DOUBLE_EQ(off.memory.model_state_bytes, 4.0 * phi + 16.0 * (1 << 22));
  EXPECT_DOUBLE_EQ(off.memory.host_bytes, 12.0 * phi);
  EXPECT_EQ(base.memory.host_bytes, 0.0);
  EXPECT_DOUBLE_EQ(base.memory.model_state_bytes, 16.0 * phi + 4.0 * (1 << 22));
  // The paper's measured 4x (its "5x" counts a whole fp32 gradient copy in the baseline,
  // which the runtime keeps one bucket of).
  EXPECT_GT(base.memory.model_state_bytes / off.memory.model_state_bytes, 3.9);
  // The same gathered weights; the data-parallel buckets leave the backward pass (the
  // optimizer reduces in its chunks), so the passes' peak is activations only, no more
  // than the baseline's activations and buckets together.
  EXPECT_DOUBLE_EQ(off.memory.gathered_weight_bytes, base.memory.gathered_weight_bytes);
  EXPECT_GT(base.memory.bucket_bytes, 0.0);
  EXPECT_EQ(off.memory.bucket_bytes, 0.0);
  EXPECT_GE(off.memory.activation_bytes, base.memory.activation_bytes);
  EXPECT_LE(off.memory.activation_bytes, base.memory.activation_bytes + base.memory.bucket_bytes);
  // 16 bytes per parameter do not fit 40 GB at 8-way sharding; 4 do.
  const topo::Grid small{2, 2, 2, 4, 1};
  o.optimizer.offload = false;
  const Evaluation rejected = evaluate(m, t, small, o);
  EXPECT_EQ(rejected.rejection, Rejection::Memory) << rejected.rejected_because;
  o.optimizer.offload = true;
  const Evaluation fits = evaluate(m, t, small, o);
  EXPECT_TRUE(fits.feasible) << fits.rejected_because;
  // The working set never exceeds the stage's parameters (the runtime sizes it so).
  o.optimizer.bucket_elements = int64_t{1} << 40;
  EXPECT_DOUBLE_EQ(evaluate(m, t, g, o).memory.model_state_bytes, 20.0 * phi);
}

// What the ZeRO tests share: gpt-20b on 32 Perlmutter GPUs, grid 2,2,2,4,1, bf16
// gradients (ZeRO's own accounting); phi parameters per GPU (sharded over Gx*Gy*Gz = 8),
// and the fp32 gradient bucket of mixed precision (the default 4M elements), bytes.
struct ZeroCase {
  model::ModelDescription m = model::load_model("gpt-20b");
  topo::Topology t = topo::load_topology("perlmutter");
  PlannerOptions o = with_bf16_gradients(options(32, 16));
  topo::Grid g{2, 2, 2, 4, 1};
  double phi = static_cast<double>(m.parameters()) / 8.0, gdata = 4, bucket = 4.0 * (1 << 22);
  static PlannerOptions with_bf16_gradients(PlannerOptions o) {
    o.precision = plan::Precision::bf16_gradients();
    return o;
  }
};

// ZeRO-1 (docs/model.md section 5): the weights and gradients stay whole, Adam's state
// and the fp32 master (offloaded: in the host tier) are 1/Gdata; bf16 gradients here,
// so ZeRO's 4 + 12/Gdata bytes per parameter (plus one fp32 gradient bucket). The
// data-parallel all-reduce moves into the optimizer phase (reduce-scatter, all-gather),
// and Adam runs on the block only.
TEST(Evaluate, ZeroOneShardsAdamStateOverTheDataGroup) {
  ZeroCase c;
  const auto& [m, t, g] = std::tie(c.m, c.t, c.g);
  PlannerOptions& o = c.o;
  const double phi = c.phi, gdata = c.gdata, bucket = c.bucket;
  const Evaluation base = evaluate(m, t, g, o);
  o.optimizer.zero = 1;
  const Evaluation zero = evaluate(m, t, g, o);
  EXPECT_DOUBLE_EQ(base.memory.model_state_bytes, 16.0 * phi + bucket);
  EXPECT_DOUBLE_EQ(zero.memory.model_state_bytes, 4.0 * phi + 12.0 * phi / gdata + bucket);
  o.precision = plan::Precision::bf16();  // Megatron-LM's distributed optimizer: 6 + 12/Gdata
  EXPECT_DOUBLE_EQ(evaluate(m, t, g, o).memory.model_state_bytes, 6.0 * phi + 12.0 * phi / gdata + bucket);
  o.precision = plan::Precision::bf16_gradients();
  // No buckets in the backward pass (the optimizer reduce-scatters): activations only.
  EXPECT_EQ(zero.memory.bucket_bytes, 0.0);
  EXPECT_LE(zero.memory.activation_bytes, base.memory.activation_bytes + base.memory.bucket_bytes);
  EXPECT_EQ(zero.comm.ar_data, base.comm.ar_data);  // reduce-scatter + all-gather: the ring all-reduce's volume
  // Moved out of the backward, where it overlapped: all of it is exposed now.
  EXPECT_GE(zero.exposed_comm_s, zero.comm.ar_data);
  EXPECT_LT(base.exposed_comm_s, zero.exposed_comm_s);
  o.optimizer.offload = true;
  o.optimizer.bucket_elements = 1 << 22;
  const Evaluation both = evaluate(m, t, g, o);
  EXPECT_DOUBLE_EQ(both.memory.model_state_bytes, 4.0 * phi + 16.0 * (1 << 22));
  EXPECT_DOUBLE_EQ(both.memory.host_bytes, 12.0 * phi / gdata);
  // ZeRO-2: the gradients are sharded too (the paper's 2*Psi + 14*Psi/N), two layers'
  // gradients in flight, and the reduce-scatter moves into the backward: same volume,
  // more of it exposed.
  o.optimizer.offload = false;
  o.optimizer.zero = 2;
  const Evaluation two = evaluate(m, t, g, o);
  EXPECT_DOUBLE_EQ(two.memory.model_state_bytes, 2.0 * phi + 14.0 * phi / gdata + bucket);
  // Optimization 2 keeps the pass's un-scattered dW; ZeRO-2 bounds them (three layers)
  // and adds two layers' gradients on their way to their owners: less here.
  EXPECT_LT(two.memory.unscattered_grad_bytes, zero.memory.unscattered_grad_bytes);
  EXPECT_GT(two.memory.unscattered_grad_bytes, 0);
  EXPECT_LT(two.memory.total_bytes(), zero.memory.total_bytes());
  EXPECT_EQ(two.comm.ar_data, base.comm.ar_data);
  EXPECT_DOUBLE_EQ(two.batch_s, zero.batch_s);  // one micro-batch and no latency: the same halves, in turn
  // Two micro-batches: each backward reduce-scatters (DeepSpeed's stage 2), ZeRO-1 once.
  o.microbatch_seqs = 2;
  o.memory_limit = false;
  const Evaluation two_mb = evaluate(m, t, g, o);
  o.optimizer.zero = 1;
  const Evaluation one_mb = evaluate(m, t, g, o);
  ASSERT_TRUE(two_mb.feasible) << two_mb.rejected_because;
  EXPECT_EQ(two_mb.microbatches, 2);
  EXPECT_NEAR(two_mb.batch_s - one_mb.batch_s, 0.5 * one_mb.comm.ar_data, 1e-9 * one_mb.batch_s);
  EXPECT_DOUBLE_EQ(two_mb.comm.ar_data, 1.5 * one_mb.comm.ar_data);  // (M + 1)/2 all-reduces' worth
  o.microbatch_seqs = 0;
  o.memory_limit = true;
  o.optimizer.zero = 2;
  o.optimizer.offload = true;
  EXPECT_DOUBLE_EQ(evaluate(m, t, g, o).memory.model_state_bytes, 2.0 * phi + 2.0 * phi / gdata + 16.0 * (1 << 22));
  // One data-parallel rank: nothing to shard.
  o.optimizer.zero = 1;
  o.optimizer.offload = false;
  const topo::Grid alone{2, 2, 8, 1, 1};
  EXPECT_DOUBLE_EQ(evaluate(m, t, alone, o).memory.model_state_bytes,
                   16.0 * static_cast<double>(m.parameters()) / 32.0 + bucket);
}

// ZeRO-3 (docs/model.md sections 5 and 11): the weights are sharded too, ZeRO's 16*Psi/N
// with bf16 gradients (plus the fp32 gradient bucket); each fetch gathers its layer's
// shard over data (prefetched with the Z all-gather: two in flight), exposed, in
// weight bytes; no all-gather after the update. The message-driven pipeline with
// several replicas is refused (its passes run in message order), 1F1B is not.
TEST(Evaluate, ZeroThreeShardsTheWeightsAndGathersThemAtEachFetch) {
  ZeroCase c;
  const auto& [m, t, g] = std::tie(c.m, c.t, c.g);
  PlannerOptions& o = c.o;
  const double phi = c.phi, gdata = c.gdata, bucket = c.bucket;
  o.optimizer.zero = 2;
  const Evaluation two = evaluate(m, t, g, o);
  o.optimizer.zero = 3;
  const Evaluation three = evaluate(m, t, g, o);
  ASSERT_TRUE(three.feasible) << three.rejected_because;
  EXPECT_DOUBLE_EQ(three.memory.model_state_bytes, 16.0 * phi / gdata + bucket);
  // The gathered shards: the largest layer's block (k*n / (Gx*Gy)) / Gz, two in flight
  // with prefetch, 2 bytes each.
  double max_block = 0;
  for (const auto& l : m.layers) max_block = std::max(max_block, static_cast<double>(l.weight_elements()) / 4.0);
  ASSERT_TRUE(o.overlap.prefetch_all_gather);
  EXPECT_DOUBLE_EQ(three.memory.gathered_weight_bytes - two.memory.gathered_weight_bytes, 2.0 * 2.0 * max_block / 2.0);
  EXPECT_LT(three.memory.total_bytes(), two.memory.total_bytes());
  // More data-parallel traffic (every pass gathers), all of it exposed: slower.
  EXPECT_GT(three.comm.ar_data, two.comm.ar_data);
  EXPECT_GT(three.batch_s, two.batch_s);
  // Pipelines: message-driven refused with replicas, 1F1B runs.
  const topo::Grid piped{2, 2, 2, 2, 2};
  const Evaluation refused = evaluate(m, t, piped, o);
  EXPECT_FALSE(refused.feasible);
  EXPECT_NE(refused.rejected_because.find("message-driven"), std::string::npos) << refused.rejected_because;
  o.pipeline_schedule = plan::PipelineSchedule::OneFOneB;
  o.memory_limit = false;
  EXPECT_TRUE(evaluate(m, t, piped, o).feasible) << evaluate(m, t, piped, o).rejected_because;
}

// --search-memory-options: each grid is also tried offloaded, with ZeRO-1, 2 and 3
// (Gdata > 1), each alone and offloaded; the best is kept, so no grid gets slower or is lost, the grids that 18
// bytes per parameter kept out come in, and the plan carries the option chosen.
TEST(Search, MemoryOptionsAdmitGridsAndNeverSlowOne) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16);
  EXPECT_EQ(memory_options(o, topo::Grid{2, 2, 2, 4, 1}).size(), 1u);
  const Ranking plain = rank_candidates(m, t, o);
  o.search_memory_options = true;
  EXPECT_EQ(memory_options(o, topo::Grid{2, 2, 2, 4, 1}).size(), 8u);
  EXPECT_EQ(memory_options(o, topo::Grid{2, 2, 8, 1, 1}).size(), 2u);  // nothing to shard
  const Ranking searched = rank_candidates(m, t, o);
  EXPECT_GT(searched.feasible.size(), plain.feasible.size());
  for (const Evaluation& p : plain.feasible) {
    auto it = std::find_if(searched.feasible.begin(), searched.feasible.end(),
                           [&](const Evaluation& s) { return s.grid == p.grid; });
    ASSERT_NE(it, searched.feasible.end()) << p.grid.to_string();
    EXPECT_LE(it->batch_s, p.batch_s) << p.grid.to_string();
    EXPECT_EQ(p.optimizer.offload, false);
  }
  // A grid plain Adam cannot fit (18 bytes per parameter at 8-way sharding) comes in
  // with an option that moves or shards Adam's state, and its plan says which.
  const topo::Grid small{2, 2, 2, 4, 1};
  EXPECT_TRUE(std::none_of(plain.feasible.begin(), plain.feasible.end(), [&](const Evaluation& e) { return e.grid == small; }));
  auto it = std::find_if(searched.feasible.begin(), searched.feasible.end(), [&](const Evaluation& e) { return e.grid == small; });
  ASSERT_NE(it, searched.feasible.end());
  EXPECT_TRUE(it->optimizer.reduces_data_parallel()) << plan::optimizer_label(it->optimizer);
  const plan::Plan p = make_plan(m, t, o, *it, 1, 1);
  EXPECT_EQ(plan::optimizer_label(p.optimizer), plan::optimizer_label(it->optimizer));
  // Its prediction carries the memory model's parts, for axrun to set its measured
  // parts beside: they are the evaluation's and add up to the total (whole bytes each).
  ASSERT_TRUE(p.prediction && p.prediction->memory_breakdown_bytes);
  const plan::MemoryPrediction& pm = *p.prediction->memory_breakdown_bytes;
  EXPECT_EQ(pm.model_state, static_cast<int64_t>(it->memory.model_state_bytes));
  EXPECT_EQ(pm.activations, static_cast<int64_t>(it->memory.activation_bytes));
  EXPECT_GT(pm.held_between_steps(), 0);
  EXPECT_GT(pm.step_own(), 0);
  EXPECT_NEAR(static_cast<double>(pm.held_between_steps() + pm.step_own()),
              static_cast<double>(p.prediction->memory_bytes_per_gpu), 6.0);
  // The single-grid evaluation searches alike.
  const Evaluation one = evaluate(m, t, small, o);
  EXPECT_EQ(plan::optimizer_label(one.optimizer), plan::optimizer_label(it->optimizer));
  EXPECT_EQ(one.batch_s, it->batch_s);
}

// The data-parallel all-reduce leaves the backward for the optimizer phase, where k
// chunks overlap the updates: the batch time falls with k > 0 as far as the model says.
TEST(Evaluate, OffloadMovesTheDataAllReduceIntoTheOptimizerPhase) {
  auto m = model::load_model("gpt-20b");
  auto t = topo::load_topology("perlmutter");
  PlannerOptions o = options(32, 16);
  o.optimizer.offload = true;
  const topo::Grid g{2, 2, 2, 4, 1};
  o.optimizer.allreduce_coarsening = 0;
  const Evaluation serial_phase = evaluate(m, t, g, o);
  o.optimizer.allreduce_coarsening = 4;
  const Evaluation overlapped = evaluate(m, t, g, o);
  EXPECT_LT(overlapped.batch_s, serial_phase.batch_s);
  EXPECT_EQ(overlapped.comm.ar_data, serial_phase.comm.ar_data);  // the same volume, moved
  EXPECT_GT(overlapped.comm.ar_data, 0.0);
}

// --search-order (issue #16): the orders tried for a grid are the arrangements of its
// axes of size 2 or more, the fixed order first.
TEST(PlacementOrders, OneOrderPerArrangementOfTheAxesThatPlaceRanks) {
  const auto base = topo::default_order();
  EXPECT_EQ(placement_orders(topo::Grid{1, 1, 1, 8, 1}, base).size(), 1u);
  EXPECT_EQ(placement_orders(topo::Grid{1, 4, 2, 1, 1}, base).size(), 2u);
  EXPECT_EQ(placement_orders(topo::Grid{1, 2, 2, 2, 1}, base).size(), 6u);
  const topo::Grid all{2, 2, 2, 2, 2};
  const auto orders = placement_orders(all, base);
  ASSERT_EQ(orders.size(), 120u);
  EXPECT_EQ(orders.front(), base);
  EXPECT_EQ(std::set<topo::PlacementOrder>(orders.begin(), orders.end()).size(), 120u);
  // Axes of size 1 keep their slots; the others are permuted among theirs, and each
  // order lays the ranks out differently (the X group of rank 0 differs or another axis's).
  const topo::Grid g{1, 2, 1, 2, 2};
  const auto some = placement_orders(g, base);
  ASSERT_EQ(some.size(), 6u);
  std::set<std::vector<std::vector<int64_t>>> layouts;
  for (const auto& o : some) {
    EXPECT_EQ(o[0], topo::Axis::X);
    EXPECT_EQ(o[2], topo::Axis::Z);
    const topo::RankLayout l(g, o);
    std::vector<std::vector<int64_t>> groups;
    for (auto a : {topo::Axis::Y, topo::Axis::Pipe, topo::Axis::Data}) groups.push_back(l.group_ranks(0, a));
    layouts.insert(groups);
  }
  EXPECT_EQ(layouts.size(), 6u);
}

// Summit, 6 GPUs per node, BERT-large on 12: with the fixed order the best grid keeps
// the pipeline inside a node; searching finds data parallelism inside each node and
// the two pipeline stages across nodes, predicted faster. Every grid's searched time is
// at most its fixed-order time, the searched order evaluated as a fixed one gives the
// same numbers, and the plan carries it.
TEST(SearchOrder, NeverSlowerAndFindsDataParallelismInsideSummitsNodes) {
  const auto m = model::load_model("bert-large");
  const auto t = topo::load_topology("summit");
  PlannerOptions fixed = options(12, 96);
  PlannerOptions searched = fixed;
  searched.search_order = true;
  const Ranking rf = rank_candidates(m, t, fixed), rs = rank_candidates(m, t, searched);
  ASSERT_FALSE(rf.feasible.empty());
  ASSERT_EQ(rs.feasible.size(), rf.feasible.size());
  for (const auto& e : rf.feasible) EXPECT_EQ(e.order, fixed.order);
  int improved = 0;
  for (const auto& s : rs.feasible) {
    const auto f = std::find_if(rf.feasible.begin(), rf.feasible.end(), [&](const Evaluation& e) {
      return e.grid.to_string() == s.grid.to_string();
    });
    ASSERT_NE(f, rf.feasible.end()) << s.grid.to_string();
    EXPECT_LE(s.batch_s, f->batch_s) << s.grid.to_string();
    if (s.batch_s < f->batch_s) {
      ++improved;
      EXPECT_NE(s.order, fixed.order) << s.grid.to_string();
    } else {
      EXPECT_EQ(s.order, fixed.order) << s.grid.to_string() << ": ties keep the fixed order";
    }
    PlannerOptions again = fixed;
    again.order = s.order;
    EXPECT_EQ(evaluate(m, t, s.grid, again).batch_s, s.batch_s) << s.grid.to_string();
  }
  EXPECT_GT(improved, 0);
  const Evaluation& best = rs.feasible.front();
  EXPECT_LT(best.batch_s, 0.9 * rf.feasible.front().batch_s);
  EXPECT_EQ(best.grid.to_string(), (topo::Grid{1, 1, 1, 6, 2}).to_string());
  EXPECT_EQ(topo::order_to_string(best.order), "x,y,z,data,pipe");
  EXPECT_EQ(make_plan(m, t, searched, best, 1, 1).placement_order, best.order);
  // the placement-agnostic model gives every order the same time: nothing is searched
  PlannerOptions agnostic = searched;
  agnostic.placement_aware = false;
  for (const auto& e : rank_candidates(m, t, agnostic).feasible) EXPECT_EQ(e.order, fixed.order);
}
