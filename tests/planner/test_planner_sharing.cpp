// The planner costs each distinct layer once per candidate and spreads candidates over
// threads. Against the evaluation of every layer on its own (evaluate_layer_by_layer):
// on every shipped model, several clusters, GPU counts and option sets (paper and full
// model, placement-aware and agnostic, checkpointing on and off, the all-gather cache,
// a fixed micro-batch, a calibrated topology with a matmul table and element-wise
// costs), every grid's evaluation (the sequence mode's grids too) is the same, bit for
// bit, and the ranking does not depend on the thread count. (When the sharing was introduced, `axplan rank --format
// json --show-rejected` printed byte-identical output to the previous per-layer
// planner on 216 model/cluster/size/option combinations: docs/performance.md.)
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "axonn/common/data_path.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

using namespace axonn;
using namespace axonn::planner;

namespace {

// Every number of an evaluation, by name.
std::vector<std::pair<const char*, double>> numbers(const Evaluation& e) {
  const auto& c = e.comm;
  const auto& m = e.memory;
  return {{"gx", double(e.grid.gx)}, {"gy", double(e.grid.gy)}, {"gz", double(e.grid.gz)},
          {"gdata", double(e.grid.gdata)}, {"ginter", double(e.grid.ginter)}, {"feasible", double(e.feasible)},
          {"rejection", double(static_cast<int>(e.rejection))}, {"microbatch_seqs", double(e.microbatch_seqs)},
          {"microbatches", double(e.microbatches)}, {"ag_z", c.ag_z}, {"rs_z", c.rs_z}, {"ar_x", c.ar_x},
          {"ar_y", c.ar_y}, {"ar_data", c.ar_data}, {"p2p_pipe", c.p2p_pipe}, {"p2p_seq", c.p2p_seq},
          {"act_x", c.act_x}, {"act_y", c.act_y}, {"small", c.small}, {"sync_wait", c.sync_wait}, {"summa", c.summa},
          {"summa_exposed_s", e.summa_exposed_s}, {"comm_s", e.comm_s},
          {"batch_s", e.batch_s}, {"compute_s", e.compute_s}, {"exposed_comm_s", e.exposed_comm_s},
          {"model_state_bytes", m.model_state_bytes}, {"gathered_weight_bytes", m.gathered_weight_bytes},
          {"unscattered_grad_bytes", m.unscattered_grad_bytes}, {"activation_bytes", m.activation_bytes},
          {"bucket_bytes", m.bucket_bytes}};
}

void expect_same(const Evaluation& a, const Evaluation& b, const std::string& where) {
  EXPECT_EQ(a.rejected_because, b.rejected_because) << where;
  const auto x = numbers(a), y = numbers(b);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].second, y[i].second) << where << ": " << x[i].first;
}

// Perlmutter with what calibrate adds: a latency, a matmul fit, a table holding some of
// gpt-tiny's shapes, element-wise costs and point-to-point bandwidths.
topo::Topology calibrated() {
  topo::Topology t = topo::load_topology("perlmutter");
  t.name = "calibrated";
  t.collective_latency_s = 2e-5;
  t.compute.matmul_flops_per_s = 3e10;
  t.compute.matmul_overhead_s = 1e-5;
  t.compute.matmul_table = {{512, 64, 192, 1, 1.5e-4}, {512, 64, 256, 1, 2e-4}, {64, 512, 64, 1, 9e-5}};
  double rate = 1e-9;
  for (const auto& op : topo::elementwise_op_names()) t.compute.elementwise[op] = {rate, 2 * rate}, rate *= 1.5;
  t.point_to_point = {40e9, 10e9};
  t.nonblocking.all_gather = topo::AllGatherAlgorithm::Linear;  // calibrate's for the MPI backend
  return t;
}

struct Variant {
  std::string name;
  PlannerOptions options;
};

std::vector<Variant> variants(int64_t gpus, int64_t batch) {
  PlannerOptions base;
  base.gpus = gpus;
  base.batch_seqs = batch;
  std::vector<Variant> v = {{"full", base}};
  PlannerOptions o = base;
  o.comm_model = CommModel::Paper;
  v.push_back({"paper", o});
  o = base;
  o.placement_aware = false;
  v.push_back({"agnostic", o});
  o = base;
  o.activation_checkpointing = false;
  o.overlap = plan::OverlapSettings::synchronous();
  v.push_back({"no checkpointing, synchronous", o});
  o = base;
  o.overlap.cache_all_gather_layers = 5;
  o.precision = plan::Precision::fp32();
  o.order = topo::parse_order("z,x,y,data,pipe", "test", "order");
  v.push_back({"cache 5, fp32, order z,x,y,data,pipe", o});
  o = base;
  o.microbatch_seqs = 2;
  o.memory_limit = false;
  v.push_back({"micro-batch 2, no memory limit", o});
  return v;
}

}  // namespace

TEST(PlannerSharing, EveryGridOfEveryShippedModelEqualsTheLayerByLayerEvaluation) {
  const std::vector<topo::Topology> clusters = {topo::load_topology("perlmutter"), topo::load_topology("frontier"),
                                                calibrated()};
  size_t compared = 0, feasible = 0;
  for (const auto& name : list_data_names("model_zoo/models")) {
    const model::ModelDescription m = model::load_model(name);
    for (const auto& t : clusters)
      for (int64_t gpus : {8, 32}) {
        for (const auto& v : variants(gpus, 64)) {
          std::vector<topo::Grid> grids = enumerate_grids(gpus);
          for (const auto& g : enumerate_mode_grids("sequence", gpus)) grids.push_back(g);  // the ring
          for (const auto& g : grids) {
            if (v.options.comm_model == CommModel::Paper && g.ginter != 1) continue;
            const std::string where = name + " on " + t.name + ", " + v.name + ", grid " + g.to_string();
            const Evaluation fast = evaluate(m, t, g, v.options);
            expect_same(fast, evaluate_layer_by_layer(m, t, g, v.options), where);
            ++compared;
            feasible += fast.feasible;
          }
        }
      }
  }
  EXPECT_GT(compared, 20000u);
  EXPECT_GT(feasible, 2000u);  // not only rejections
}

TEST(PlannerSharing, RankingDoesNotDependOnTheThreadCount) {
  const model::ModelDescription m = model::load_model("gpt-80b");
  const topo::Topology t = topo::load_topology("frontier");
  PlannerOptions o;
  o.gpus = 16384;
  o.batch_seqs = 8192;
  o.threads = 1;
  const Ranking one = rank_candidates(m, t, o);
  o.threads = 4;
  const Ranking four = rank_candidates(m, t, o);
  ASSERT_EQ(one.feasible.size(), four.feasible.size());
  ASSERT_EQ(one.rejected.size(), four.rejected.size());
  ASSERT_GT(one.feasible.size(), 100u);
  for (size_t i = 0; i < one.feasible.size(); ++i)
    expect_same(one.feasible[i], four.feasible[i], "feasible #" + std::to_string(i));
  for (size_t i = 0; i < one.rejected.size(); ++i)
    expect_same(one.rejected[i], four.rejected[i], "rejected #" + std::to_string(i));
  // and the threaded ranking holds the layer-by-layer evaluation of every grid
  for (size_t i = 0; i < one.feasible.size(); i += 37)
    expect_same(four.feasible[i], evaluate_layer_by_layer(m, t, four.feasible[i].grid, o), "layer by layer");
}

// One thread keeps one Scratch across every candidate of every tensor mode: a candidate
// of one layout must not see what the previous one (another layout) left there. Each
// ranked candidate equals its grid evaluated alone, with a fresh Scratch. (2d-broadcast's
// exposed SUMMA times once stayed in the scratch and were charged to the 3d candidate
// ranked after it: 5.27 s where alone it is 3.09 s.)
TEST(PlannerSharing, EveryModeRankedTogetherEqualsEachCandidateAlone) {
  auto where = [](const topo::Topology& t, int64_t gpus, const topo::Grid& g) {
    return fmt::format("cores per rank {}, {} GPUs, grid {}", t.cores_per_rank, gpus, g.to_string());
  };
  const model::ModelDescription m = model::load_model("gpt-bench");
  topo::Topology sliced = calibrated();
  sliced.cores_per_rank = 0.25;  // time-sliced ranks: other replicas' tensor rings out of step (sc.alone in use)
  for (const topo::Topology& t : {calibrated(), sliced})
  for (int64_t gpus : {8, 16}) {
    PlannerOptions o;
    o.gpus = gpus;
    o.batch_seqs = 16;
    o.threads = 1;
    o.precision = plan::Precision::fp32();
    o.overlap = plan::OverlapSettings::level(0, 0);
    // time-sliced: the data axis innermost, so that tensor rings of other replicas share links
    if (t.ranks_time_sliced()) o.order = topo::parse_order("data,x,y,z,pipe", "test", "--order");
    select_tensor_modes(o, "all", "test");
    const Ranking r = rank_candidates(m, t, o);
    std::set<std::string> modes;
    for (const auto& e : r.feasible) modes.insert(topo::layout_name(e.grid.layout));
    EXPECT_EQ(modes.size(), 4u) << gpus << " GPUs: axonn3d, 2d, 2d-broadcast and 3d";
    // and the layer-by-layer evaluation agrees (with time-sliced ranks too)
    for (size_t i = 0; i < r.feasible.size(); i += 7)
      expect_same(r.feasible[i], evaluate_layer_by_layer(m, t, r.feasible[i].grid, o),
                  "layer by layer, " + where(t, gpus, r.feasible[i].grid));
    ASSERT_GT(r.feasible.size(), 20u);
    size_t out_of_step = 0;  // candidates the time-sliced ranks change
    for (const auto& e : r.feasible) {
      expect_same(e, evaluate(m, t, e.grid, o), where(t, gpus, e.grid));
      if (t.ranks_time_sliced()) out_of_step += evaluate(m, calibrated(), e.grid, o).batch_s != e.batch_s;  // same order
    }
    for (const auto& e : r.rejected) expect_same(e, evaluate(m, t, e.grid, o), "rejected, " + where(t, gpus, e.grid));
    if (t.ranks_time_sliced()) {
      EXPECT_GT(out_of_step, 5u) << gpus << " GPUs";
    }
  }
}
