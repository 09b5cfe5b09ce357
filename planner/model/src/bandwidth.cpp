// Process-group bandwidths; see axonn/planner/bandwidth.hpp and docs/model.md section 2.
#include "axonn/planner/bandwidth.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "axonn/common/error.hpp"

namespace axonn::planner {

bool group_inside_node(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule) {
  const int64_t gpn = t.gpus_per_node;
  return ip * p <= gpn && (rule == BandwidthRule::Strict || gpn % (ip * p) == 0);
}

double group_bandwidth(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule) {
  if (p <= 1) return std::numeric_limits<double>::infinity();
  if (group_inside_node(t, ip, p, rule)) return t.intra_bandwidth(ip, p);
  return t.inter_node_bandwidth_bytes_per_s / static_cast<double>(std::min(t.gpus_per_node, ip));
}

double group_latency(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule) {
  return t.collective_latency(group_inside_node(t, ip, p, rule));
}

int64_t stages_sharing_data_link(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                                 int64_t members) {
  const topo::RankLayout layout(g, order);
  const int64_t ip = layout.inner_size(topo::Axis::Data), pipe_stride = layout.inner_size(topo::Axis::Pipe);
  const int64_t gpn = t.gpus_per_node, p = members;
  if (p <= 1 || group_inside_node(t, ip, p, BandwidthRule::Straddle) || g.ginter <= 1) return 1;
  if (pipe_stride >= ip) return 1;  // the pipeline outside the data axis: one stage's rings
  // The rings on the link are those of min(gpn, ip) consecutive ranks of one data member;
  // the pipeline coordinate steps every pipe_stride of them. The blocks of consecutive
  // stages are a node's only where nodes hold whole stage groups and either whole
  // pipelines or an equal share of one; elsewhere (e.g. 6 GPUs per node, stages of 2
  // ranks, 4 stages: a node holds stages 3, 0 and 1) eq. 10's count stands.
  const int64_t pipeline = pipe_stride * g.ginter;  // ranks from stage 0 to the last, once
  const bool aligned = gpn % pipe_stride == 0 && (gpn >= pipeline ? gpn % pipeline == 0 : pipeline % gpn == 0);
  if (!aligned) return 1;
  return std::clamp<int64_t>(std::min(gpn, ip) / pipe_stride, 1, g.ginter);
}

LinkRings tensor_rings_on_link(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                               topo::Axis a) {
  const topo::RankLayout layout(g, order);
  const int64_t p = g.size(a), ip = layout.inner_size(a);
  if (p <= 1 || group_inside_node(t, ip, p, BandwidthRule::Straddle)) return {};
  LinkRings out;
  out.rings = std::min(t.gpus_per_node, ip);
  // A node holds `rings` consecutive positions of the axes inside `a` (innermost first,
  // mixed radix): of each inner axis the part that fits in what the axes before it left.
  // The rings in step are the tensor axes' part of them.
  int64_t left = out.rings;
  for (topo::Axis b : order) {
    if (b == a || left <= 1) break;
    const int64_t covered = std::gcd(g.size(b), left);
    if (b == topo::Axis::X || b == topo::Axis::Y || b == topo::Axis::Z) out.in_step *= covered;
    left /= covered;
  }
  return out;
}

double staggered_ring_s(double alone_s, double others, double rest_s) {
  if (others <= 0 || alone_s <= 0 || std::isinf(rest_s)) return alone_s;
  const double a = alone_s, k = others, c = std::max(rest_s, 0.0);
  const double b = c - a * (1.0 + k);
  // The positive root of R^2 + b R - a c = 0, in the form that does not cancel: with
  // b > 0 (compute dominates) -b + sqrt(b^2 + 4ac) loses every digit as c grows.
  const double root = std::sqrt(b * b + 4.0 * a * c);
  return b > 0 ? 2.0 * a * c / (b + root) : (root - b) / 2.0;
}

double out_of_step_share(double alone_s, double others, double rest_s) {
  if (alone_s <= 0 || others <= 0 || !(rest_s > 0)) return 1.0;
  const double r = staggered_ring_s(alone_s, others, rest_s);
  return r / (r + rest_s);
}

void shared_link_ends(const double* start_s, const double* alone_s, size_t n, double* end_s) {
  for (size_t i = 0; i < n; ++i) AXONN_ASSERT(std::isfinite(start_s[i]) && !std::isnan(alone_s[i]));
  constexpr double kDone = -1;  // left[i] of a flow that has ended
  std::vector<double> left(alone_s, alone_s + n);  // work left, in seconds of the link alone
  size_t ended = 0;
  double t = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    t = std::min(t, start_s[i]);
    if (left[i] <= 0) left[i] = kDone, end_s[i] = start_s[i], ++ended;  // no work: ends at its start
  }
  while (ended < n) {
    size_t active = 0;  // on the link now: started by t, not ended
    double least = std::numeric_limits<double>::infinity(), next_start = least;
    for (size_t i = 0; i < n; ++i) {
      if (left[i] == kDone) continue;
      if (start_s[i] > t) next_start = std::min(next_start, start_s[i]);
      else ++active, least = std::min(least, left[i]);
    }
    if (active == 0) {  // an idle link until the next flow starts
      t = next_start;
      continue;
    }
    const double share = static_cast<double>(active);
    const bool an_end = least * share <= next_start - t;  // the next event: an end, or a start
    const double moved = an_end ? least : (next_start - t) / share;
    const double now = t;
    t = an_end ? t + least * share : next_start;
    for (size_t i = 0; i < n; ++i) {
      if (left[i] == kDone || start_s[i] > now) continue;
      if (an_end && left[i] <= least) left[i] = kDone, end_s[i] = t, ++ended;
      else left[i] -= moved;
    }
  }
}

AxisBandwidths placement_aware_bandwidths(const topo::Topology& t, const topo::Grid& g,
                                          const topo::PlacementOrder& order, BandwidthRule rule) {
  AxisBandwidths bw{};
  int64_t ip = 1;
  for (topo::Axis a : order) {
    const int64_t p = g.size(a);
    bw[static_cast<int>(a)] = group_bandwidth(t, ip, p, rule);
    ip *= p;
  }
  return bw;
}

namespace {

// Of the groups {b + ip j}, the members on one node of the group and node where the
// link carries the most, m (p - m) (a linear all-gather's bytes): for shapes whose
// groups split unevenly (ip not dividing gpn, or ip p neither dividing nor a multiple of
// it), by walking one period of groups.
int64_t busiest_members_per_node(int64_t gpn, int64_t ip, int64_t p) {
  if (ip >= gpn) return 1;  // consecutive members a node or more apart
  if (gpn % ip == 0 && (gpn % (ip * p) == 0 || (ip * p) % gpn == 0)) return std::min(p, gpn / ip);
  const int64_t block = ip * p, period = std::lcm(gpn, block);
  int64_t best = 1, best_volume = 0;
  for (int64_t start = 0; start < period; start += block)
    for (int64_t b = start; b < start + ip; ++b) {
      std::map<int64_t, int64_t> on_node;  // node -> members of the group {b + ip j}
      for (int64_t j = 0; j < p; ++j) ++on_node[(b + ip * j) / gpn];
      for (const auto& [node, m] : on_node)
        if (m * (p - m) > best_volume) best = m, best_volume = m * (p - m);
    }
  return best;
}

}  // namespace

std::array<int64_t, topo::kNumAxes> members_per_node(const topo::Topology& t, const topo::Grid& g,
                                                     const topo::PlacementOrder& order, BandwidthRule rule) {
  std::array<int64_t, topo::kNumAxes> m{};
  const int64_t gpn = t.gpus_per_node;
  int64_t ip = 1;
  for (topo::Axis a : order) {
    const int64_t p = g.size(a);
    m[static_cast<int>(a)] = group_inside_node(t, ip, p, rule) ? p : busiest_members_per_node(gpn, ip, p);
    ip *= p;
  }
  return m;
}

AxisBandwidths placement_agnostic_bandwidths(const topo::Topology& t, const topo::Grid& g) {
  AxisBandwidths bw{};
  for (int i = 0; i < topo::kNumAxes; ++i)
    bw[i] = g.size(static_cast<topo::Axis>(i)) > 1 ? t.inter_node_bandwidth_bytes_per_s
                                                   : std::numeric_limits<double>::infinity();
  return bw;
}

AxisLatencies placement_aware_latencies(const topo::Topology& t, const topo::Grid& g,
                                        const topo::PlacementOrder& order, BandwidthRule rule) {
  const topo::RankLayout layout(g, order);
  AxisLatencies latency{};
  for (int i = 0; i < topo::kNumAxes; ++i) {
    const auto a = static_cast<topo::Axis>(i);
    latency[i] = group_latency(t, layout.inner_size(a), g.size(a), rule);
  }
  return latency;
}

AxisLatencies placement_agnostic_latencies(const topo::Topology& t) {
  AxisLatencies latency{};
  latency.fill(t.collective_latency(false));
  return latency;
}

double one_way_group_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                               bool placement_aware, double ring_bw, topo::Axis a) {
  const auto& p2p = t.point_to_point;
  if (p2p.intra_node_bytes_per_s <= 0 || p2p.inter_node_bytes_per_s <= 0) return ring_bw;
  if (!placement_aware) return p2p.inter_node_bytes_per_s;
  const auto per_node = members_per_node(t, g, order, BandwidthRule::Straddle);
  if (per_node[static_cast<int>(a)] == g.size(a)) return p2p.intra_node_bytes_per_s;
  const int64_t ip = topo::RankLayout(g, order).inner_size(a);
  return p2p.inter_node_bytes_per_s / static_cast<double>(std::min<int64_t>(t.gpus_per_node, ip));
}

namespace {
// The ranks of the axes placed inside the pipeline's (one stage's block of consecutive ranks).
int64_t ranks_inside_pipe(const topo::Grid& g, const topo::PlacementOrder& order) {
  int64_t ip = 1;
  for (topo::Axis a : order) {
    if (a == topo::Axis::Pipe) break;
    ip *= g.size(a);
  }
  return ip;
}
}  // namespace

bool pipeline_boundary_crosses_nodes(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                                     int64_t boundary) {
  const int64_t ip = ranks_inside_pipe(g, order);
  const int64_t gpn = t.gpus_per_node, outer = g.total() / (ip * g.ginter);
  if (gpn % ip != 0) return true;  // a stage spans whole nodes (or straddles them)
  // k stages per node, node-aligned: stage block j = s + Ginter o ends a node where
  // (j + 1) is a multiple of k, for any replica o of the pipeline.
  const int64_t k = gpn / ip;
  for (int64_t o = 0; o < std::min(outer, k); ++o)
    if ((boundary + 1 + g.ginter * o) % k == 0) return true;
  return false;
}

double pipeline_p2p_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                              bool placement_aware, double ring_bw, int64_t boundary) {
  const auto& p2p = t.point_to_point;
  if (p2p.intra_node_bytes_per_s <= 0 || p2p.inter_node_bytes_per_s <= 0) return ring_bw;
  if (!placement_aware) return p2p.inter_node_bytes_per_s;
  if (!pipeline_boundary_crosses_nodes(t, g, order, boundary)) return p2p.intra_node_bytes_per_s;
  const int64_t ip = ranks_inside_pipe(g, order);
  return p2p.inter_node_bytes_per_s / static_cast<double>(std::min(t.gpus_per_node, ip));
}

}  // namespace axonn::planner
