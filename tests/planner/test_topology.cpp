// Topology files, the grid and the rank layout.
#include <gtest/gtest.h>

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
