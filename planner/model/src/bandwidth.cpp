// Process-group bandwidths; see axonn/planner/bandwidth.hpp and docs/model.md section 2.
#include "axonn/planner/bandwidth.hpp"

#include <algorithm>
#include <limits>

namespace axonn::planner {

double group_bandwidth(const topo::Topology& t, int64_t ip, int64_t p, BandwidthRule rule) {
  if (p <= 1) return std::numeric_limits<double>::infinity();
  const int64_t gpn = t.gpus_per_node;
  bool inside_node = ip * p <= gpn;
  if (rule == BandwidthRule::Straddle) inside_node = inside_node && gpn % (ip * p) == 0;
  if (inside_node) return t.intra_bandwidth(ip, p);
  return t.inter_node_bandwidth_bytes_per_s / static_cast<double>(std::min(gpn, ip));
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

AxisBandwidths placement_agnostic_bandwidths(const topo::Topology& t, const topo::Grid& g) {
  AxisBandwidths bw{};
  for (int i = 0; i < topo::kNumAxes; ++i)
    bw[i] = g.size(static_cast<topo::Axis>(i)) > 1 ? t.inter_node_bandwidth_bytes_per_s
                                                   : std::numeric_limits<double>::infinity();
  return bw;
}

double pipeline_p2p_bandwidth(const topo::Topology& t, const topo::Grid& g, const topo::PlacementOrder& order,
                              bool placement_aware, double ring_bw) {
  const auto& p2p = t.point_to_point;
  if (p2p.intra_node_bytes_per_s <= 0 || p2p.inter_node_bytes_per_s <= 0) return ring_bw;
  if (!placement_aware) return p2p.inter_node_bytes_per_s;
  int64_t ip = 1;
  for (topo::Axis a : order) {
    if (a == topo::Axis::Pipe) break;
    ip *= g.size(a);
  }
  const int64_t span = ip * g.ginter, gpn = t.gpus_per_node;
  if (span <= gpn && gpn % span == 0) return p2p.intra_node_bytes_per_s;
  return p2p.inter_node_bytes_per_s / static_cast<double>(std::min(gpn, ip));
}

}  // namespace axonn::planner
