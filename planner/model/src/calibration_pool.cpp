// Calibrations pooled by median; see axonn/planner/calibration_pool.hpp.
#include "axonn/planner/calibration_pool.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include <algorithm>
#include <map>
#include <tuple>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"

namespace axonn::planner {
namespace {

constexpr const char* kPoolModule = "pool-calibrations";

// Values collected under a key over the calibrations, in the order first seen.
template <typename Key>
class Pool {
 public:
  void add(const Key& k, double v) {
    if (!values_.count(k)) order_.push_back(k);
    values_[k].push_back(v);
  }
  const std::vector<Key>& keys() const { return order_; }
  double median_of(const Key& k) const { return median(values_.at(k)); }

 private:
  std::vector<Key> order_;
  std::map<Key, std::vector<double>> values_;
};

// The median of the non-zero values (0 = not measured); 0 when none is.
double median_of_measured(const std::vector<double>& v) {
  std::vector<double> measured;
  for (double x : v)
    if (x != 0) measured.push_back(x);
  return measured.empty() ? 0.0 : median(measured);
}

// The compute parts, pooled: each matmul shape's time, each operation's costs and the
// fitted rate (of those that measured one) and overhead, their medians.
topo::ComputeThroughput pooled_compute(const std::vector<const topo::ComputeThroughput*>& computes) {
  std::vector<double> rate, overhead;
  Pool<std::tuple<int64_t, int64_t, int64_t, int64_t>> shapes;
  Pool<std::pair<std::string, bool>> elementwise;  // (operation, backward)
  for (const topo::ComputeThroughput* c : computes) {
    rate.push_back(c->matmul_flops_per_s);
    overhead.push_back(c->matmul_overhead_s);
    for (const auto& m : c->matmul_table) shapes.add({m.m, m.k, m.n, m.batch}, m.seconds);
    for (const auto& [op, cost] : c->elementwise) {
      elementwise.add({op, false}, cost.forward_s_per_element);
      elementwise.add({op, true}, cost.backward_s_per_element);
    }
  }
  topo::ComputeThroughput out = *computes.front();
  out.matmul_flops_per_s = median_of_measured(rate);
  out.matmul_overhead_s = median(overhead);
  out.matmul_table.clear();
  for (const auto& k : shapes.keys())
    out.matmul_table.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), shapes.median_of(k)});
  out.elementwise.clear();
  for (const auto& k : elementwise.keys()) {
    auto& cost = out.elementwise[k.first];
    (k.second ? cost.backward_s_per_element : cost.forward_s_per_element) = elementwise.median_of(k);
  }
  return out;
}

}  // namespace

topo::Topology pooled_calibration(const std::vector<topo::Topology>& calibrations,
                                  const std::vector<std::string>& sources, const std::string& name) {
  AXONN_ASSERT(calibrations.size() == sources.size());
  if (calibrations.size() < 2)
    throw InputError(kPoolModule, fmt::format("{} calibration(s)", calibrations.size()), "the topologies given",
                     "two or more calibrations of one cluster");
  const topo::Topology& first = calibrations[0];
  for (size_t i = 1; i < calibrations.size(); ++i) {
    const topo::Topology& t = calibrations[i];
    const auto same = [&](const char* field, const auto& a, const auto& b) {
      if (a != b)
        throw InputError(kPoolModule, fmt::format("{} is {} in {} but {} in {}", field, b, sources[i], a, sources[0]),
                         sources[i] + ": " + field, "calibrations of one cluster (the same value in every file)");
    };
    same("gpus_per_node", first.gpus_per_node, t.gpus_per_node);
    same("num_nodes", first.num_nodes, t.num_nodes);
    same("gpu_memory_bytes", first.gpu_memory_bytes, t.gpu_memory_bytes);
    same("peak_flops_per_s", first.peak_flops_per_s, t.peak_flops_per_s);
    same("cores_per_rank", first.cores_per_rank, t.cores_per_rank);
    same("nonblocking_collectives.all_gather", first.nonblocking.rings(), t.nonblocking.rings());
  }

  topo::Topology out = first;
  out.name = name;
  out.description = fmt::format("the median of {} calibrations, quantity by quantity: {}", calibrations.size(),
                                fmt::join(sources, ", "));
  std::vector<double> fallback, inter, latency, intra_latency, p2p_intra, p2p_inter, wait_intra, wait_inter;
  Pool<std::pair<int64_t, int64_t>> intra;
  Pool<int64_t> sync;
  for (const topo::Topology& t : calibrations) {
    fallback.push_back(t.intra_node_bandwidth_bytes_per_s);
    inter.push_back(t.inter_node_bandwidth_bytes_per_s);
    latency.push_back(t.collective_latency_s);
    if (t.intra_node_collective_latency_s >= 0) intra_latency.push_back(t.intra_node_collective_latency_s);
    p2p_intra.push_back(t.point_to_point.intra_node_bytes_per_s);
    p2p_inter.push_back(t.point_to_point.inter_node_bytes_per_s);
    for (const auto& e : t.intra_node_table) intra.add({e.ip, e.p}, e.bytes_per_s);
    for (const auto& s : t.sync_wait) sync.add(s.ranks, s.fraction);
    if (t.waiting_share.intra_node >= 0) wait_intra.push_back(t.waiting_share.intra_node);
    if (t.waiting_share.inter_node >= 0) wait_inter.push_back(t.waiting_share.inter_node);
  }
  out.intra_node_bandwidth_bytes_per_s = median(fallback);
  out.inter_node_bandwidth_bytes_per_s = median(inter);
  out.collective_latency_s = median(latency);
  out.intra_node_collective_latency_s = intra_latency.empty() ? -1.0 : median(intra_latency);
  out.point_to_point = {median_of_measured(p2p_intra), median_of_measured(p2p_inter)};
  std::vector<const topo::ComputeThroughput*> computes, bf16;
  for (const topo::Topology& t : calibrations) {
    computes.push_back(&t.compute);
    if (t.compute_bf16) bf16.push_back(&*t.compute_bf16);
  }
  out.compute = pooled_compute(computes);
  out.compute_bf16.reset();  // pooled where every calibration timed bf16
  if (bf16.size() == calibrations.size()) out.compute_bf16 = pooled_compute(bf16);
  out.waiting_share = {wait_intra.empty() ? -1.0 : median(wait_intra), wait_inter.empty() ? -1.0 : median(wait_inter)};

  out.intra_node_table.clear();
  for (const auto& k : intra.keys()) out.intra_node_table.push_back({k.first, k.second, intra.median_of(k)});
  out.sync_wait.clear();
  for (int64_t ranks : sync.keys()) out.sync_wait.push_back({ranks, sync.median_of(ranks)});
  std::sort(out.sync_wait.begin(), out.sync_wait.end(),
            [](const topo::SyncWaitEntry& a, const topo::SyncWaitEntry& b) { return a.ranks < b.ranks; });
  return out;
}

}  // namespace axonn::planner
