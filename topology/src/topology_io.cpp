// Reading and writing topology JSON; see axonn/topology/topology_io.hpp.
#include "axonn/topology/topology_io.hpp"

#include "axonn/common/data_path.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"

namespace axonn::topo {

namespace {

// A "compute" object (or "compute_bf16", the same fields).
ComputeThroughput read_compute(ObjectReader cr) {
  ComputeThroughput c;
  c.matmul_flops_per_s = cr.positive_number("matmul_flops_per_s");
  c.matmul_overhead_s = cr.non_negative_number_or("matmul_overhead_s", 0.0);
  c.memory_bytes_per_s = cr.non_negative_number_or("memory_bytes_per_s", 0.0);
  if (cr.has("matmul_table"))
    for (auto& e : cr.object_array("matmul_table")) {
      c.matmul_table.push_back(MatmulTiming{e.positive_int("m"), e.positive_int("k"), e.positive_int("n"),
                                            e.positive_int_or("batch", 1), e.positive_number("seconds")});
      e.finish();
    }
  if (cr.has("elementwise_s_per_element")) {
    ObjectReader er = cr.object("elementwise_s_per_element");
    for (const auto& name : elementwise_op_names()) {
      if (!er.has(name)) continue;
      ObjectReader op = er.object(name);
      const double backward = op.non_negative_number_or("backward", 0.0);
      if (elementwise_forward_only(name) && backward != 0)
        op.fail("backward", std::to_string(backward), "0 or absent: " + name + " has no backward");
      c.elementwise[name] = {op.non_negative_number("forward"), backward};
      op.finish();
    }
    er.finish();
  }
  cr.finish();
  return c;
}

nlohmann::json compute_json(const ComputeThroughput& c) {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& e : c.matmul_table)
    table.push_back({{"m", e.m}, {"k", e.k}, {"n", e.n}, {"batch", e.batch}, {"seconds", e.seconds}});
  nlohmann::json j = {{"matmul_flops_per_s", c.matmul_flops_per_s},
                      {"matmul_overhead_s", c.matmul_overhead_s},
                      {"matmul_table", table}};
  if (c.memory_bytes_per_s > 0) j["memory_bytes_per_s"] = c.memory_bytes_per_s;
  if (!c.elementwise.empty()) {
    nlohmann::json ew = nlohmann::json::object();
    for (const auto& [name, cost] : c.elementwise)
      ew[name] = {{"forward", cost.forward_s_per_element}, {"backward", cost.backward_s_per_element}};
    j["elementwise_s_per_element"] = ew;
  }
  return j;
}

}  // namespace

Topology topology_from_json(const nlohmann::json& j, const std::string& origin) {
  ObjectReader r(j, origin, "topology");
  Topology t;
  t.name = r.string("name");
  t.description = r.string_or("description", "");
  t.gpus_per_node = r.positive_int_at_most("gpus_per_node", int64_t{1} << 16);
  t.num_nodes = r.positive_int_at_most("num_nodes", int64_t{1} << 24);
  t.gpu_memory_bytes = r.positive_int("gpu_memory_bytes");
  t.peak_flops_per_s = r.positive_number("peak_flops_per_s");
  t.inter_node_bandwidth_bytes_per_s = r.positive_number("inter_node_bandwidth_bytes_per_s");
  t.collective_latency_s = r.non_negative_number_or("collective_latency_s", 0.0);
  t.intra_node_collective_latency_s = r.non_negative_number_or("intra_node_collective_latency_s", -1.0);
  t.collective_call_s = r.non_negative_number_or("collective_call_s", 0.0);
  t.host_link_bytes_per_s = r.non_negative_number_or("host_link_bytes_per_s", 0.0);
  t.cores_per_rank = r.non_negative_number_or("cores_per_rank", 0.0);

  // Either one number, or {"fallback": number, "table": [{"ip", "p", "bytes_per_s"}]}.
  const std::string key = "intra_node_bandwidth_bytes_per_s";
  const auto& intra = r.raw(key);
  if (intra.is_number()) {
    t.intra_node_bandwidth_bytes_per_s = r.positive_number(key);
  } else if (intra.is_object()) {
    ObjectReader ir = r.object(key);
    t.intra_node_bandwidth_bytes_per_s = ir.positive_number("fallback");
    for (auto& e : ir.object_array("table")) {
      // Each at most gpus_per_node (<= 2^16), so that ip*p cannot overflow.
      IntraBandwidthEntry entry{e.positive_int_at_most("ip", t.gpus_per_node),
                                e.positive_int_at_most("p", t.gpus_per_node), e.positive_number("bytes_per_s")};
      e.finish();
      if (entry.ip * entry.p > t.gpus_per_node)
        e.fail("p", "group does not fit in a node (ip*p = " + std::to_string(entry.ip * entry.p) + ")",
               "ip*p <= gpus_per_node = " + std::to_string(t.gpus_per_node));
      for (const auto& prev : t.intra_node_table)
        if (prev.ip == entry.ip && prev.p == entry.p)
          e.fail("p", "duplicate (ip, p) entry", "each (ip, p) at most once");
      t.intra_node_table.push_back(entry);
    }
    ir.finish();
  } else {
    r.fail(key, "wrong type (found " + intra.dump() + ")",
           "a number (bytes/s) or an object {\"fallback\": ..., \"table\": [...]}");
  }
  if (r.has("compute")) t.compute = read_compute(r.object("compute"));
  if (r.has("compute_bf16")) t.compute_bf16 = read_compute(r.object("compute_bf16"));
  if (r.has("point_to_point_bytes_per_s")) {
    ObjectReader pr = r.object("point_to_point_bytes_per_s");
    t.point_to_point.intra_node_bytes_per_s = pr.positive_number("intra_node");
    t.point_to_point.inter_node_bytes_per_s = pr.positive_number("inter_node");
    pr.finish();
  }
  if (r.has("nonblocking_collectives")) {
    ObjectReader nr = r.object("nonblocking_collectives");
    t.nonblocking.all_gather = nr.one_of("all_gather", {"ring", "linear"}) == "linear" ? AllGatherAlgorithm::Linear
                                                                                      : AllGatherAlgorithm::Ring;
    nr.finish();
  }
  if (r.has("waiting_rank_share")) {
    ObjectReader wr = r.object("waiting_rank_share");
    for (const auto& [key, value] : {std::pair{"intra_node", &t.waiting_share.intra_node},
                                     std::pair{"inter_node", &t.waiting_share.inter_node}}) {
      if (!wr.has(key)) continue;
      *value = wr.non_negative_number(key);
      if (*value > 1) wr.fail(key, "a share of " + std::to_string(*value), "a fraction from 0 to 1");
    }
    wr.finish();
    if (!t.waiting_share.measured())
      r.fail("waiting_rank_share", "an object with neither share", "\"intra_node\", \"inter_node\" or both");
  }
  if (r.has("sync_wait"))
    for (auto& e : r.object_array("sync_wait")) {
      SyncWaitEntry entry{e.positive_int_at_most("ranks", int64_t{1} << 40), e.non_negative_number("fraction")};
      e.finish();
      if (entry.ranks < 2) e.fail("ranks", "a group of one rank waits for nobody", "an integer >= 2");
      if (!t.sync_wait.empty() && t.sync_wait.back().ranks >= entry.ranks)
        e.fail("ranks", "not after the previous entry's " + std::to_string(t.sync_wait.back().ranks),
               "entries in ascending order of ranks, each once");
      t.sync_wait.push_back(entry);
    }
  r.finish();
  return t;
}

nlohmann::json topology_to_json(const Topology& t) {
  nlohmann::json j;
  j["name"] = t.name;
  if (!t.description.empty()) j["description"] = t.description;
  j["gpus_per_node"] = t.gpus_per_node;
  j["num_nodes"] = t.num_nodes;
  j["gpu_memory_bytes"] = t.gpu_memory_bytes;
  j["peak_flops_per_s"] = t.peak_flops_per_s;
  if (t.intra_node_table.empty()) {
    j["intra_node_bandwidth_bytes_per_s"] = t.intra_node_bandwidth_bytes_per_s;
  } else {
    nlohmann::json table = nlohmann::json::array();
    for (const auto& e : t.intra_node_table)
      table.push_back({{"ip", e.ip}, {"p", e.p}, {"bytes_per_s", e.bytes_per_s}});
    j["intra_node_bandwidth_bytes_per_s"] = {{"fallback", t.intra_node_bandwidth_bytes_per_s},
                                             {"table", table}};
  }
  j["inter_node_bandwidth_bytes_per_s"] = t.inter_node_bandwidth_bytes_per_s;
  j["collective_latency_s"] = t.collective_latency_s;
  if (t.intra_node_collective_latency_s >= 0) j["intra_node_collective_latency_s"] = t.intra_node_collective_latency_s;
  if (t.collective_call_s > 0) j["collective_call_s"] = t.collective_call_s;
  if (t.host_link_bytes_per_s > 0) j["host_link_bytes_per_s"] = t.host_link_bytes_per_s;
  if (t.cores_per_rank > 0) j["cores_per_rank"] = t.cores_per_rank;
  if (t.compute.matmul_flops_per_s > 0) j["compute"] = compute_json(t.compute);
  if (t.compute_bf16) j["compute_bf16"] = compute_json(*t.compute_bf16);
  if (t.point_to_point.intra_node_bytes_per_s > 0 && t.point_to_point.inter_node_bytes_per_s > 0)
    j["point_to_point_bytes_per_s"] = {{"intra_node", t.point_to_point.intra_node_bytes_per_s},
                                       {"inter_node", t.point_to_point.inter_node_bytes_per_s}};
  if (t.waiting_share.measured()) {
    j["waiting_rank_share"] = nlohmann::json::object();
    if (t.waiting_share.intra_node >= 0) j["waiting_rank_share"]["intra_node"] = t.waiting_share.intra_node;
    if (t.waiting_share.inter_node >= 0) j["waiting_rank_share"]["inter_node"] = t.waiting_share.inter_node;
  }
  if (!t.nonblocking.rings()) j["nonblocking_collectives"] = {{"all_gather", "linear"}};
  if (!t.sync_wait.empty()) {
    j["sync_wait"] = nlohmann::json::array();
    for (const auto& e : t.sync_wait) j["sync_wait"].push_back({{"ranks", e.ranks}, {"fraction", e.fraction}});
  }
  return j;
}

Topology load_topology(const std::string& name_or_path) {
  std::string path = resolve_data_file("topology", "topology/clusters", name_or_path);
  return topology_from_json(read_json_file("topology", path), path);
}

nlohmann::json grid_to_json(const Grid& g) {
  nlohmann::json j = {{"gx", g.gx}, {"gy", g.gy}, {"gz", g.gz}, {"gdata", g.gdata}, {"ginter", g.ginter}};
  if (g.sequence != 1) j["sequence"] = g.sequence;  // absent: 1 (grids written before it)
  if (g.layout != TensorLayout::Axonn3d) j["layout"] = layout_name(g.layout);  // absent: AxoNN's 3D
  return j;
}

nlohmann::json mesh_to_json(const Mesh& m) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& a : m.axes()) j.push_back({{"name", a.name}, {"size", a.size}});
  return j;
}

Mesh mesh_from_json(ObjectReader& r, const std::string& key) {
  std::vector<MeshAxis> axes;
  for (auto& a : r.object_array(key)) {
    MeshAxis axis;
    axis.name = a.string("name");
    axis.size = a.positive_int("size");
    a.finish();
    axes.push_back(std::move(axis));
  }
  if (auto p = mesh_problem(axes))
    r.fail(key, *p, "an array of {\"name\": string, \"size\": positive integer}, innermost axis first, each name once");
  return Mesh(std::move(axes));
}

Grid grid_from_json(ObjectReader r) {
  // At most 2^40 ranks in all (a cluster's bound: 2^24 nodes of 2^16 GPUs), checked
  // axis by axis so that the product never overflows.
  constexpr int64_t kMaxRanks = int64_t{1} << 40;
  int64_t total = 1;
  auto axis = [&](const char* key) {
    const int64_t v = r.positive_int_at_most(key, kMaxRanks);
    if (v > kMaxRanks / total) r.fail(key, "makes the grid larger than 2^40 ranks", "a grid of at most 2^40 ranks");
    total *= v;
    return v;
  };
  Grid g;
  g.gx = axis("gx");
  g.gy = axis("gy");
  g.gz = axis("gz");
  g.gdata = axis("gdata");
  g.ginter = axis("ginter");
  if (r.has("sequence")) g.sequence = r.positive_int_at_most("sequence", kMaxRanks);
  if (r.has("layout")) g.layout = parse_layout(r.one_of("layout", {"2d", "3d", "2d-broadcast"}), "topology", "layout");
  if (auto p = grid_problem(g)) r.fail(p->field, p->what, p->expected);  // absent layout: AxoNN's 3D
  r.finish();
  return g;
}

}  // namespace axonn::topo
