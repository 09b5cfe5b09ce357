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
  pr.memory_breakdown_bytes = plan::MemoryPrediction{100, 0, 0, 20, 3, 0};
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
  ASSERT_TRUE(p.prediction->memory_breakdown_bytes.has_value());
  EXPECT_EQ(p.prediction->memory_breakdown_bytes->held_between_steps(), 100);
  EXPECT_EQ(p.prediction->memory_breakdown_bytes->step_own(), 23);
  EXPECT_EQ(plan::plan_to_json(p), plan::plan_to_json(sample()));
  const nlohmann::json j = plan::plan_to_json(p);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["mesh"], nlohmann::json::parse(R"([{"name": "x", "size": 2}, {"name": "y", "size": 2},
      {"name": "z", "size": 2}, {"name": "pipe", "size": 1}, {"name": "data", "size": 1}])"));
  EXPECT_EQ(j["tensor_layout"], "axonn3d");
  EXPECT_EQ(j["rank_layout"], "rank = x + size(x)*(y + size(y)*(z + size(z)*(pipe + size(pipe)*data)))");
  EXPECT_FALSE(j.contains("grid"));
}

namespace {
// A version 1 plan (the 5D grid's fields) of the same job.
nlohmann::json as_version_1(nlohmann::json j, const nlohmann::json& grid, const std::vector<std::string>& order,
                            const std::string& formula) {
  j["version"] = 1;
  for (const char* k : {"mesh", "tensor_layout"}) j.erase(k);
  j["grid"] = grid;
  j["placement_order"] = order;
  j["rank_layout"] = formula;
  return j;
}
}  // namespace

TEST(Plan, ReadsVersionOnePlansAndWritesTheMesh) {
  plan::Plan s = sample();
  s.placement_order = {topo::Axis::X, topo::Axis::Y, topo::Axis::Z, topo::Axis::Data, topo::Axis::Pipe};
  const nlohmann::json old = as_version_1(plan::plan_to_json(s), {{"gx", 2}, {"gy", 2}, {"gz", 2}, {"gdata", 1}, {"ginter", 1}},
                                          {"x", "y", "z", "data", "pipe"},
                                          "rank = x + gx*(y + gy*(z + gz*(data + gdata*pipe)))");
  const plan::Plan p = plan::plan_from_json(old, "old.json");
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.grid, (topo::Grid{2, 2, 2, 1, 1}));
  EXPECT_EQ(p.placement_order, s.placement_order);
  EXPECT_EQ(plan::plan_to_json(p), plan::plan_to_json(s));  // written again as version 2
  EXPECT_EQ(plan::plan_to_json(p)["mesh"][3]["name"], "data");
  // A version 1 sequence grid's data axis becomes the mesh's sequence and data axes.
  plan::Plan q = sample();
  q.grid = topo::Grid{1, 1, 1, 8, 1};
  q.grid.sequence = 2;
  q.batch = {8, 2};
  nlohmann::json seq = as_version_1(plan::plan_to_json(q),
                                    {{"gx", 1}, {"gy", 1}, {"gz", 1}, {"gdata", 8}, {"ginter", 1}, {"sequence", 2}},
                                    {"x", "y", "z", "pipe", "data"}, "rank = x + gx*(y + gy*(z + gz*(pipe + ginter*data)))");
  EXPECT_EQ(plan::plan_from_json(seq, "old.json").grid, q.grid);
  EXPECT_EQ(plan::plan_to_json(plan::plan_from_json(seq, "old.json"))["mesh"][4],
            (nlohmann::json{{"name", "sequence"}, {"size", 2}}));
  seq["grid"]["sequence"] = 3;
  auto msg = error_of([&] { plan::plan_from_json(seq, "old.json"); });
  EXPECT_NE(msg.find("sequence group of 3 does not divide gdata = 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("old.json: /grid/sequence"), std::string::npos) << msg;
  nlohmann::json bad = old;
  bad["rank_layout"] = "rank = x + gx*(y + gy*(z + gz*(pipe + ginter*data)))";
  EXPECT_NE(error_of([&] { plan::plan_from_json(bad, "old.json"); }).find("does not match placement_order"),
            std::string::npos);
}

TEST(Plan, TheMeshNamesTheSequenceGroupAndTheLayout) {
  plan::Plan s = sample();
  s.model = model::load_model("gpt-tiny");
  s.grid = topo::Grid{1, 1, 1, 8, 1};
  s.grid.sequence = 2;
  s.batch = {8, 2};
  nlohmann::json j = plan::plan_to_json(s);
  EXPECT_EQ(j["mesh"][4], (nlohmann::json{{"name", "sequence"}, {"size", 2}}));
  EXPECT_EQ(j["mesh"][5], (nlohmann::json{{"name", "data"}, {"size", 4}}));
  EXPECT_EQ(plan::plan_from_json(j, "p.json").grid, s.grid);
  nlohmann::json apart = j;  // the sequence members are the data axis's innermost
  std::swap(apart["mesh"][3], apart["mesh"][4]);  // x, y, z, sequence, pipe, data
  auto msg = error_of([&] { plan::plan_from_json(apart, "p.json"); });
  EXPECT_NE(msg.find("p.json: /mesh"), std::string::npos) << msg;
  EXPECT_NE(msg.find("right inside \"data\""), std::string::npos) << msg;

  s.grid = topo::Grid{1, 2, 2, 2, 1};
  s.grid.layout = topo::TensorLayout::TwoD;
  j = plan::plan_to_json(s);
  EXPECT_EQ(j["tensor_layout"], "2d");
  EXPECT_EQ(plan::plan_from_json(j, "p.json").grid, s.grid);
  j["tensor_layout"] = "2.5d";
  msg = error_of([&] { plan::plan_from_json(j, "p.json"); });
  EXPECT_NE(msg.find("p.json: /tensor_layout"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axonn3d, 2d, 3d"), std::string::npos) << msg;
  nlohmann::json both = plan::plan_to_json(sample());  // a sequence axis in the 2d layout
  both["tensor_layout"] = "2d";
  both["mesh"] = nlohmann::json::parse(R"([{"name": "x", "size": 1}, {"name": "y", "size": 2}, {"name": "z", "size": 2},
      {"name": "pipe", "size": 1}, {"name": "sequence", "size": 2}, {"name": "data", "size": 1}])");
  msg = error_of([&] { plan::plan_from_json(both, "p.json"); });
  EXPECT_NE(msg.find("the 2d layout with a sequence group"), std::string::npos) << msg;
  j["tensor_layout"] = "2d";
  j["mesh"][1]["size"] = 4;  // y = 4, z = 2: not a square
  j["mesh"][4]["size"] = 1;
  msg = error_of([&] { plan::plan_from_json(j, "p.json"); });
  EXPECT_NE(msg.find("gx = 1 and gy = gz"), std::string::npos) << msg;
}

TEST(Plan, RefusesInconsistentPlans) {
  auto j = plan::plan_to_json(sample());
  auto k = j;
  k["gpus"] = 16;
  auto msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("p.json: /mesh"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 8 ranks"), std::string::npos) << msg;
  k = j;
  std::swap(k["mesh"][0], k["mesh"][1]);  // y innermost: the formula still says x
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("rank_layout"), std::string::npos);
  for (const auto& [axes, what] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"name": "x", "size": 8}, {"name": "w", "size": 1}, {"name": "z", "size": 1},
               {"name": "pipe", "size": 1}, {"name": "data", "size": 1}])", "unknown mesh axis \"w\""},
           {R"([{"name": "x", "size": 8}, {"name": "x", "size": 1}, {"name": "z", "size": 1},
               {"name": "pipe", "size": 1}, {"name": "data", "size": 1}])", "axis \"x\" appears twice"},
           {R"([{"name": "x", "size": 8}, {"name": "y", "size": 1}, {"name": "z", "size": 1},
               {"name": "pipe", "size": 1}])", "lacks the axes data"},
           {R"([{"name": "x", "size": 8}, {"name": "y", "size": 1}, {"name": "z", "size": 1},
               {"name": "pipe", "size": 1}, {"name": "data", "size": 1}, {"name": "sequence", "size": 1}])",
            "does not place \"sequence\" right inside \"data\""},
           {R"([{"name": "x", "size": 1099511627776}, {"name": "y", "size": 2}])", "more than 2^40 ranks"},
           {R"([{"name": "x", "size": 8, "stride": 1}])", "unknown field: p.json: /mesh/0/stride"},
           {R"({"x": 8})", "p.json: /mesh"},
           {R"([{"name": "x", "size": 0}])", "/mesh/0/size"}}) {
    k = j;
    k["mesh"] = nlohmann::json::parse(axes);
    k["rank_layout"] = "rank = x";  // the mesh is checked first
    msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
  k = j;
  k.erase("tensor_layout");
  msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("p.json: /tensor_layout"), std::string::npos) << msg;
  k = j;
  k["mesh"][0]["size"] = 1;  // 4 heads over y = 8
  k["mesh"][1]["size"] = 8;
  k["mesh"][2]["size"] = 1;
  msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("heads=4 is not divisible by gy=8"), std::string::npos) << msg;
  k = j;
  k["overlap"]["prefetch"] = true;
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); }).find("unknown field: p.json: /overlap/prefetch"),
            std::string::npos);
  k = j;
  k["prediction"]["memory_breakdown_bytes"]["activations"] = -1;
  msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("p.json: /prediction/memory_breakdown_bytes/activations"), std::string::npos) << msg;
  k = j;
  k["prediction"]["memory_breakdown_bytes"]["weights"] = 1;
  EXPECT_NE(error_of([&] { plan::plan_from_json(k, "p.json"); })
                .find("unknown field: p.json: /prediction/memory_breakdown_bytes/weights"),
            std::string::npos);
  k = j;
  k["prediction"].erase("memory_breakdown_bytes");  // a plan written before the field
  EXPECT_FALSE(plan::plan_from_json(k, "p.json").prediction->memory_breakdown_bytes.has_value());
  k = j;
  k["version"] = 3;
  msg = error_of([&] { plan::plan_from_json(k, "p.json"); });
  EXPECT_NE(msg.find("unsupported plan version 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 or 2"), std::string::npos) << msg;
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
