// Topology files, the grid and the rank layout.
#include <gtest/gtest.h>

#include <fstream>

#include "axonn/common/data_path.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology_io.hpp"
#include "test_util.hpp"

using namespace axonn;
using axonn::test::error_of;
using axonn::test::write_temp;

TEST(Topology, ShippedClustersLoad) {
  auto names = list_data_names("topology/clusters");
  for (const char* want : {"perlmutter", "frontier", "summit", "dgx-h100"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& n : names) {
    auto t = topo::load_topology(n);
    EXPECT_EQ(t.name, n);
    EXPECT_GT(t.total_gpus(), 0);
  }
  auto s = topo::load_topology("summit");
  EXPECT_EQ(s.gpus_per_node, 6);
  EXPECT_DOUBLE_EQ(s.intra_bandwidth(1, 2), 50e9);
  EXPECT_DOUBLE_EQ(s.inter_node_bandwidth_bytes_per_s, 12.5e9);
  EXPECT_EQ(s.gpu_memory_bytes, 16LL << 30);
}

TEST(Topology, RoundTripsThroughJson) {
  auto t = topo::load_topology("frontier");
  auto u = topo::topology_from_json(topo::topology_to_json(t), "roundtrip");
  EXPECT_EQ(u.intra_node_table.size(), 6u);
  EXPECT_DOUBLE_EQ(u.intra_bandwidth(4, 2), 36e9);
  EXPECT_EQ(topo::topology_to_json(u), topo::topology_to_json(t));
}

namespace {
nlohmann::json base() {
  return nlohmann::json::parse(R"({"name": "t", "gpus_per_node": 4, "num_nodes": 2,
    "gpu_memory_bytes": 1000, "peak_flops_per_s": 1e12,
    "intra_node_bandwidth_bytes_per_s": 1e11, "inter_node_bandwidth_bytes_per_s": 1e10})");
}
}  // namespace

TEST(Topology, BadInputNamesFileFieldAndExpectation) {
  auto j = base();
  j["gpn"] = 4;
  EXPECT_NE(error_of([&] { topo::topology_from_json(j, "c.json"); }).find("unknown field: c.json: /gpn"),
            std::string::npos);
  j = base();
  j.erase("num_nodes");
  EXPECT_NE(error_of([&] { topo::topology_from_json(j, "c.json"); }).find("missing field: c.json: /num_nodes"),
            std::string::npos);
  j = base();
  j["gpus_per_node"] = -4;
  auto msg = error_of([&] { topo::topology_from_json(j, "c.json"); });
  EXPECT_NE(msg.find("/gpus_per_node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an integer from 1 to 65536"), std::string::npos) << msg;
  j = base();
  j["inter_node_bandwidth_bytes_per_s"] = 0;
  EXPECT_NE(error_of([&] { topo::topology_from_json(j, "c.json"); }).find("expected a number > 0"),
            std::string::npos);
  j = base();
  j["intra_node_bandwidth_bytes_per_s"] = {{"fallback", 1e11}, {"table", {{{"ip", 2}, {"p", 4}, {"bytes_per_s", 1e9}}}}};
  EXPECT_NE(error_of([&] { topo::topology_from_json(j, "c.json"); }).find("does not fit in a node"),
            std::string::npos);
  j = base();
  j["intra_node_bandwidth_bytes_per_s"] = "fast";
  EXPECT_NE(error_of([&] { topo::topology_from_json(j, "c.json"); }).find("wrong type"), std::string::npos);
}

TEST(Topology, MalformedFileAndUnknownName) {
  auto path = write_temp("broken.json", "{\"name\": \"x\", \"gpus_per_node\": 4,,}");
  auto msg = error_of([&] { topo::load_topology(path); });
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 1"), std::string::npos) << msg;
  msg = error_of([&] { topo::load_topology("no-such-cluster"); });
  EXPECT_NE(msg.find("perlmutter"), std::string::npos) << msg;  // lists what is shipped
}

TEST(Grid, DefaultRankLayoutHasXInnermost) {
  topo::RankLayout L(topo::Grid{2, 2, 2, 1, 1}, topo::default_order());
  EXPECT_EQ(L.group_ranks(0, topo::Axis::X), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(L.group_ranks(0, topo::Axis::Y), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(L.group_ranks(5, topo::Axis::Z), (std::vector<int64_t>{1, 5}));
  // rank = x + Gx*(y + Gy*(z + Gz*(pipe + Ginter*data)))
  topo::RankLayout M(topo::Grid{2, 3, 2, 2, 2}, topo::default_order());
  for (int64_t r = 0; r < 48; ++r) {
    auto c = M.coords_of(r);
    EXPECT_EQ(c[0] + 2 * (c[1] + 3 * (c[2] + 2 * (c[3] + 2 * c[4]))), r);
    EXPECT_EQ(M.rank_of(c), r);
  }
}

TEST(Grid, OtherOrdersAndParsing) {
  auto order = topo::parse_order("data,z,y,x,pipe", "test", "here");
  topo::RankLayout L(topo::Grid{2, 1, 2, 2, 1}, order);
  EXPECT_EQ(L.stride(topo::Axis::Data), 1);
  EXPECT_EQ(L.stride(topo::Axis::Z), 2);
  EXPECT_EQ(L.stride(topo::Axis::X), 4);
  EXPECT_EQ(L.group_ranks(0, topo::Axis::X), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(topo::order_to_string(order), "data,z,y,x,pipe");
  EXPECT_NE(error_of([] { topo::parse_order("x,y,z,data", "t", "w"); }).find("too few"), std::string::npos);
  EXPECT_NE(error_of([] { topo::parse_order("x,x,z,pipe,data", "t", "w"); }).find("repeated"), std::string::npos);
  EXPECT_NE(error_of([] { topo::parse_order("x,y,w,pipe,data", "t", "w"); }).find("unknown axis"), std::string::npos);
}

TEST(Mesh, GroupsAreTheRanksThatDifferOnlyOnTheirAxes) {
  const topo::Mesh m({{"x", 2}, {"pipe", 3}, {"data", 2}});
  EXPECT_EQ(m.total(), 12);
  EXPECT_EQ(m.stride("pipe"), 2);
  EXPECT_EQ(m.stride("data"), 6);
  EXPECT_EQ(m.size("y"), 1);  // an axis the mesh lacks
  EXPECT_EQ(m.group_ranks(7, {"pipe"}), (std::vector<int64_t>{7, 9, 11}));
  EXPECT_EQ(m.group_ranks(7, {"x", "data"}), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(m.group_ranks(7, {"data", "x", "data"}), (std::vector<int64_t>{0, 1, 6, 7}));  // named twice
  EXPECT_EQ(m.group_ranks(7, {"y"}), (std::vector<int64_t>{7}));  // absent: a group of one
  EXPECT_EQ(m.group_root(11, {"pipe", "x"}), 6);
  for (int64_t r = 0; r < m.total(); ++r) {
    const auto c = m.coords_of(r);
    EXPECT_EQ(c[0] + 2 * (c[1] + 3 * c[2]), r);
    EXPECT_EQ(m.rank_of(c), r);
  }
  EXPECT_EQ(m.to_string(), "x=2 pipe=3 data=2");
  EXPECT_EQ(*topo::mesh_problem({{"x", 2}, {"x", 1}}), "axis \"x\" appears twice");
  EXPECT_EQ(*topo::mesh_problem({{"", 2}}), "axis 0 has no name");
  EXPECT_EQ(*topo::mesh_problem({{"x", 0}}), "axis \"x\" has size 0 (below 1)");
  EXPECT_EQ(*topo::mesh_problem({{"x", int64_t{1} << 30}, {"y", int64_t{1} << 20}}),
            "the mesh has more than 2^40 ranks");
  EXPECT_FALSE(topo::mesh_problem({}).has_value());
}

// The grid's layout is its mesh's, the sequence group its own mesh axis, and the 5D
// formula of every order still holds: a sequence group changes no rank's coordinates.
TEST(Mesh, AGridsMeshKeepsItsFiveDimensionalLayout) {
  topo::Grid g{2, 1, 2, 6, 2};
  g.sequence = 3;
  for (const char* text : {"x,y,z,pipe,data", "data,z,y,x,pipe", "pipe,data,x,y,z"}) {
    const auto order = topo::parse_order(text, "test", "here");
    const topo::RankLayout L(g, order);
    std::vector<std::string> names;
    for (const auto& a : L.mesh().axes()) names.push_back(a.name);
    std::vector<std::string> expected;
    for (auto a : order) {
      if (a == topo::Axis::Data) expected.push_back("sequence");
      expected.push_back(topo::axis_name(a));
    }
    EXPECT_EQ(names, expected) << text;
    EXPECT_EQ(L.mesh().size("sequence"), 3);
    EXPECT_EQ(L.mesh().size("data"), 2);
    topo::Coords stride{};  // the 5D formula's strides
    int64_t inner = 1;
    for (auto a : order) {
      stride[static_cast<int>(a)] = inner;
      inner *= g.size(a);
    }
    for (int i = 0; i < topo::kNumAxes; ++i) EXPECT_EQ(L.stride(static_cast<topo::Axis>(i)), stride[i]) << text;
    for (int64_t r = 0; r < g.total(); ++r) {
      const auto c = L.coords_of(r);
      int64_t rank = 0;
      for (int i = 0; i < topo::kNumAxes; ++i) rank += c[i] * stride[i];
      EXPECT_EQ(rank, r) << text;
      EXPECT_EQ(L.rank_of(c), r);
    }
    // The data group holds the sequence members and the replicas, by data coordinate;
    // the sequence group the members of one replica.
    const auto data = L.group_ranks(7, topo::Axis::Data);
    ASSERT_EQ(data.size(), 6u);
    for (size_t i = 0; i < data.size(); ++i) {
      auto c = L.coords_of(7);
      c[static_cast<int>(topo::Axis::Data)] = static_cast<int64_t>(i);
      EXPECT_EQ(data[i], L.rank_of(c)) << text;
    }
    const auto seq = L.mesh().group_ranks(0, {"sequence"});
    ASSERT_EQ(seq.size(), 3u);
    for (size_t i = 0; i < seq.size(); ++i) EXPECT_EQ(L.coords_of(seq[i])[static_cast<int>(topo::Axis::Data)], int64_t(i));
    const auto back = topo::grid_of_mesh(L.mesh(), g.layout, "test", "here");
    EXPECT_EQ(back.grid, g);
    EXPECT_EQ(back.order, order);
  }
  EXPECT_EQ(topo::mesh_axes(g, topo::Axis::Data), (std::vector<std::string>{"sequence", "data"}));
  EXPECT_EQ(topo::mesh_axes(g, topo::Axis::X), (std::vector<std::string>{"x"}));
}

TEST(Topology, TheNonblockingAllGathersAlgorithmReadsAndWrites) {
  auto j = base();
  EXPECT_TRUE(topo::topology_from_json(j, "t.json").nonblocking.rings());  // absent: a ring
  EXPECT_FALSE(topo::topology_to_json(topo::topology_from_json(j, "t.json")).contains("nonblocking_collectives"));
  j["nonblocking_collectives"] = {{"all_gather", "linear"}};
  const auto t = topo::topology_from_json(j, "t.json");
  EXPECT_EQ(t.nonblocking.all_gather, topo::AllGatherAlgorithm::Linear);
  EXPECT_EQ(topo::topology_to_json(t)["nonblocking_collectives"], j["nonblocking_collectives"]);
  j["nonblocking_collectives"]["all_gather"] = "tree";
  auto msg = error_of([&] { topo::topology_from_json(j, "t.json"); });
  EXPECT_NE(msg.find("t.json: /nonblocking_collectives/all_gather"), std::string::npos) << msg;
  EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
  j["nonblocking_collectives"] = {{"all_gather", "ring"}, {"reduce_scatter", "ring"}};
  msg = error_of([&] { topo::topology_from_json(j, "t.json"); });
  EXPECT_NE(msg.find("/nonblocking_collectives/reduce_scatter"), std::string::npos) << msg;
}

// remove_tree deletes a directory with everything under it, removes a symbolic link
// without following it, and takes a missing path as done.
TEST(RemoveTree, DeletesATreeButNotWhatItsLinksPointTo) {
  namespace fs = std::filesystem;
  const fs::path root = test::scratch_dir() / "remove_tree";
  const fs::path outside = test::scratch_dir() / "remove_tree_keep.txt";
  fs::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "f.txt") << "x";
  std::ofstream(root / "top.txt") << "y";
  std::ofstream(outside) << "kept";
  fs::create_symlink(outside, root / "a" / "link");
  fs::create_directory_symlink(test::scratch_dir(), root / "dirlink");
  std::error_code ec;
  remove_tree(root.string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(fs::exists(test::scratch_dir()));
  remove_tree(root.string(), ec);  // already gone
  EXPECT_FALSE(ec) << ec.message();
  remove_tree(outside.string(), ec);  // a plain file
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(outside));
}

// A path under a file (ENOTDIR) is missing, as for std::filesystem::remove_all.
TEST(RemoveTree, APathUnderAFileIsMissing) {
  const std::filesystem::path file = test::scratch_dir() / "remove_tree_file";
  std::ofstream(file) << "x";
  std::error_code ec;
  remove_tree((file / "below").string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(std::filesystem::exists(file));
}

// The host cores per rank (calibrate's): optional, written only where measured, never
// negative; below 1 the ranks are time-sliced.
TEST(Topology, TheHostCoresPerRankReadAndWrite) {
  auto j = base();
  topo::Topology t = topo::topology_from_json(j, "c.json");
  EXPECT_EQ(t.cores_per_rank, 0.0);
  EXPECT_FALSE(t.ranks_time_sliced());
  EXPECT_FALSE(topo::topology_to_json(t).contains("cores_per_rank"));
  j["cores_per_rank"] = 0.25;
  t = topo::topology_from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(t.cores_per_rank, 0.25);
  EXPECT_TRUE(t.ranks_time_sliced());
  EXPECT_DOUBLE_EQ(topo::topology_from_json(topo::topology_to_json(t), "roundtrip").cores_per_rank, 0.25);
  j["cores_per_rank"] = 1;
  EXPECT_FALSE(topo::topology_from_json(j, "c.json").ranks_time_sliced());
  j["cores_per_rank"] = -1;
  const std::string msg = error_of([&] { topo::topology_from_json(j, "c.json"); });
  EXPECT_NE(msg.find("c.json: /cores_per_rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected a number >= 0"), std::string::npos) << msg;
}

TEST(Topology, TheIntraNodeLatencyReadsAndWritesAndDefaultsToTheOne) {
  auto j = base();
  j["collective_latency_s"] = 1e-5;
  topo::Topology t = topo::topology_from_json(j, "c.json");
  EXPECT_LT(t.intra_node_collective_latency_s, 0);  // not set: one latency for every group
  EXPECT_DOUBLE_EQ(t.collective_latency(true), 1e-5);
  EXPECT_DOUBLE_EQ(t.collective_latency(false), 1e-5);
  EXPECT_FALSE(topo::topology_to_json(t).contains("intra_node_collective_latency_s"));
  j["intra_node_collective_latency_s"] = 3e-5;
  t = topo::topology_from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(t.collective_latency(true), 3e-5);
  EXPECT_DOUBLE_EQ(t.collective_latency(false), 1e-5);
  EXPECT_DOUBLE_EQ(
      topo::topology_from_json(topo::topology_to_json(t), "roundtrip").intra_node_collective_latency_s, 3e-5);
  j["intra_node_collective_latency_s"] = 0;  // measured 0 inside a node: not the across-node one
  EXPECT_DOUBLE_EQ(topo::topology_from_json(j, "c.json").collective_latency(true), 0.0);
  j["intra_node_collective_latency_s"] = -1;
  const std::string msg = error_of([&] { topo::topology_from_json(j, "c.json"); });
  EXPECT_NE(msg.find("c.json: /intra_node_collective_latency_s"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected a number >= 0"), std::string::npos) << msg;
}

// The schema (topology/schema/topology.schema.json, docs/formats.md) names every field the
// writer emits: a topology with every optional field set, written, walks the schema's
// objects without a key the schema leaves out (where it forbids other properties).
namespace {
void expect_in_schema(const nlohmann::json& schema, const nlohmann::json& node, const nlohmann::json& value,
                      const std::string& path) {
  const nlohmann::json* s = &node;
  while (s->contains("$ref")) {  // "#/$defs/NAME"
    const std::string ref = (*s)["$ref"];
    s = &schema["$defs"][ref.substr(ref.rfind('/') + 1)];
  }
  if (value.is_object()) {
    const bool closed = s->contains("additionalProperties") && (*s)["additionalProperties"] == false;
    for (const auto& [key, v] : value.items()) {
      if (s->contains("properties") && (*s)["properties"].contains(key))
        expect_in_schema(schema, (*s)["properties"][key], v, path + "." + key);
      else
        EXPECT_FALSE(closed) << path + "." + key << " is written but not in the schema";
    }
  } else if (value.is_array() && s->contains("items")) {
    for (const auto& v : value) expect_in_schema(schema, (*s)["items"], v, path + "[]");
  }
}
}  // namespace

TEST(Topology, EveryFieldTheWriterEmitsIsInTheSchema) {
  topo::Topology t = topo::load_topology("dgx-h100");
  t.collective_call_s = 0.001;
  t.intra_node_collective_latency_s = 2e-5;
  t.host_link_bytes_per_s = 25e9;
  t.cores_per_rank = 0.25;
  t.compute.matmul_table.push_back({128, 256, 512, 2, 1e-3});
  for (const auto& op : topo::elementwise_op_names())
    t.compute.elementwise[op] = {1e-9, topo::elementwise_forward_only(op) ? 0.0 : 2e-9};
  t.compute_bf16 = t.compute;
  t.compute_bf16->matmul_table.back().seconds = 4e-4;
  t.point_to_point = {1e10, 1e9};
  t.sync_wait = {{2, 0.01}, {8, 0.1}};
  t.waiting_share = {0.4, 1.0};
  t.nonblocking.all_gather = topo::AllGatherAlgorithm::Linear;
  const nlohmann::json written = topo::topology_to_json(t);
  for (const char* key : {"collective_call_s", "intra_node_collective_latency_s", "host_link_bytes_per_s", "cores_per_rank", "sync_wait",
                          "waiting_rank_share", "point_to_point_bytes_per_s", "nonblocking_collectives", "compute_bf16"})
    ASSERT_TRUE(written.contains(key)) << key;
  // compute_bf16 reads back as written, beside compute; a plan of 2-byte elements takes it
  const topo::Topology back = topo::topology_from_json(written, "written");
  ASSERT_TRUE(back.compute_bf16.has_value());
  EXPECT_EQ(back.compute_bf16->matmul_table.back().seconds, 4e-4);
  EXPECT_EQ(back.compute.matmul_table.back().seconds, 1e-3);
  EXPECT_EQ(back.compute_bf16->elementwise.size(), topo::elementwise_op_names().size());
  EXPECT_EQ(&back.compute_for(2), &*back.compute_bf16);
  EXPECT_EQ(&back.compute_for(4), &back.compute);
  ASSERT_EQ(written["compute"]["elementwise_s_per_element"].size(), topo::elementwise_op_names().size());
  std::ifstream f(resolve_data_file("test", "topology/schema", "topology.schema"));
  const nlohmann::json schema = nlohmann::json::parse(f);
  expect_in_schema(schema, schema, written, "");
}
