// The plan format: round trip and validation.
#include <gtest/gtest.h>

#include <fstream>

#include "axonn/plan/divisibility.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

using namespace axonn;
using axonn::test::error_of;
using axonn::test::write_temp;

namespace {
plan::Plan sample() {
  plan::Plan p;
  p.model = model::load_model("gpt-tiny");
  p.topology = topo::load_topology("perlmutter");
  p.gpus = 8;
  p.grid = {2, 2, 2, 1, 1};
  p.batch = {4, 4};
  p.overlap.cache_all_gather_layers = 3;
  p.optimizer.offload = true;
  p.optimizer.bucket_elements = 1000;
  p.optimizer.allreduce_coarsening = 2;
  p.optimizer.zero = 1;
  plan::Prediction pr;
  pr.comm_model = "full";
  pr.comm_s = 0.5;
  pr.comm_breakdown_s.ag_z = 0.25;
  pr.comm_breakdown_s.ar_x = 0.25;
  pr.memory_bytes_per_gpu = 123;
  pr.rank = 1;
  pr.candidates_ranked = 7;
  p.prediction = pr;
  return p;
}
}  // namespace

TEST(Plan, RoundTripsAndWritesAtomically) {
  auto path = write_temp("plan.json", "");
  plan::save_plan(sample(), path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto p = plan::load_plan(path);
  EXPECT_EQ(p.grid, (topo::Grid{2, 2, 2, 1, 1}));
  EXPECT_EQ(p.model.name, "gpt-tiny");
  EXPECT_EQ(p.overlap.cache_all_gather_layers, 3);
  EXPECT_TRUE(p.optimizer.offload);
  EXPECT_EQ(p.optimizer.bucket_elements, 1000);
  EXPECT_EQ(p.optimizer.allreduce_coarsening, 2);
  EXPECT_EQ(p.optimizer.zero, 1);
  ASSERT_TRUE(p.prediction.has_value());
  EXPECT_DOUBLE_EQ(p.prediction->comm_breakdown_s.total(), 0.5);
  EXPECT_EQ(plan::plan_to_json(p), plan::plan_to_json(sample()));
  EXPECT_EQ(plan::plan_to_json(p)["rank_layout"], "rank = x + gx*(y + gy*(z + gz*(pipe + ginter*data)))");
}

TEST(Plan, RefusesInconsistentPlans) {
  auto j = plan::plan_to_json(sample());
  auto k = j;
  k["gpus"] = 16;
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("grid product 8"), std::string::npos);
  k = j;
  k["placement_order"] = {"y", "x", "z", "pipe", "data"};
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("rank_layout"), std::string::npos);
  k = j;
  k["grid"] = {{"gx", 1}, {"gy", 8}, {"gz", 1}, {"gdata", 1}, {"ginter", 1}};  // 4 heads over 8
  auto msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("heads=4 is not divisible by gy=8"), std::string::npos) << msg;
  k = j;
  k["overlap"]["prefetch"] = true;
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("unknown field: p.json: /overlap/prefetch"),
            std::string::npos);
  k = j;
  k["version"] = 2;
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("unsupported plan version"), std::string::npos);
  k = j;
  k["optimizer"]["zero"] = 4;
  msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("p.json: /optimizer/zero"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0, 1, 2 or 3"), std::string::npos) << msg;
  k["optimizer"]["zero"] = 3;
  EXPECT_EQ(plan::plan_from_json(k, "p.json").optimizer.zero, 3);
  k = j;
  k["optimizer"].erase("zero");  // plans written before ZeRO
  EXPECT_EQ(plan::plan_from_json(k, "p.json").optimizer.zero, 0);
}

TEST(Divisibility, FirstProblemInWords) {
  auto m = model::load_model("gpt-20b");
  EXPECT_FALSE(plan::divisibility_problem(m, {2, 2, 2, 2, 2}, 16, 4).has_value());
  EXPECT_EQ(*plan::divisibility_problem(m, {3, 1, 1, 1, 1}, 16, 16),
            "layer embedding: n=7168 is not divisible by gx=3");
  // Stages may hold different numbers of units (32 blocks on 3 stages), but at least one.
  EXPECT_FALSE(plan::divisibility_problem(m, {1, 1, 1, 1, 3}, 15, 5).has_value());
  EXPECT_EQ(*plan::divisibility_problem(model::load_model("gpt-tiny"), {1, 1, 1, 1, 4}, 16, 4),
            "pipeline units (layers)=2 are fewer than ginter=4");
  EXPECT_EQ(*plan::divisibility_problem(m, {1, 1, 4, 1, 1}, 16, 2), "micro-batch sequences=2 is not divisible by gz=4");
}
