// Each tensor layout's costs; see axonn/planner/layout_costs.hpp.
#include "axonn/planner/layout_costs.hpp"

#include <array>

#include "axonn/common/error.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/layer_comm.hpp"

namespace axonn::planner {
namespace {

using topo::Axis;

// The latency per ring step of the group along `a`, seconds.
double alpha(const LayerCommSettings& s, Axis a) { return axis_latency(s.latency_s, a); }

// What every layout's formulas read: a layer's sizes in bytes and elements.
struct Sizes {
  double k, n, m, w, gz;
  Sizes(const model::Layer& l, const topo::Grid& g, const LayerCommSettings& s)
      : k(static_cast<double>(l.k)),
        n(static_cast<double>(l.n)),
        m(static_cast<double>(s.tokens)),
        w(static_cast<double>(s.element_bytes)),
        gz(static_cast<double>(g.gz)) {}
};

// The bandwidth a ring all-gather over axis `a` would need to take the time the
// cluster's algorithm takes (LayerCommSettings::all_gather_slowdown).
double all_gather_bw(const AxisBandwidths& bw, const LayerCommSettings& s, Axis a) {
  return axis_bandwidth(bw, a) / s.all_gather_slowdown[static_cast<int>(a)];
}

// AxoNN's 3D (docs/model.md section 3): W's block over a and b, chunks over Z; the
// forward's partial output all-reduced over a, dI over b.
void axonn3d_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                         const LayerCommSettings& s, LayerCollectives& c) {
  const Sizes z(l, g, s);
  const double ga = static_cast<double>(g.size(c.a)), gb = static_cast<double>(g.size(c.b));
  const double weight_block_bytes = z.w * z.k * z.n / (ga * gb);
  c.all_gather_s = ring_all_gather_s(g.gz, weight_block_bytes, all_gather_bw(bw, s, Axis::Z), alpha(s, Axis::Z));
  c.reduce_scatter_s = ring_reduce_scatter_s(g.gz, weight_block_bytes, axis_bandwidth(bw, Axis::Z), alpha(s, Axis::Z));
  c.forward_all_reduce_s =
      ring_all_reduce_s(g.size(c.a), z.w * z.m * z.n / (gb * z.gz), axis_bandwidth(bw, c.a), alpha(s, c.a));
  c.input_grad_all_reduce_s =
      s.input_gradient
          ? ring_all_reduce_s(g.size(c.b), z.w * z.m * z.k / (ga * z.gz), axis_bandwidth(bw, c.b), alpha(s, c.b))
          : 0.0;
  c.data_bytes = static_cast<double>(s.grad_reduce_bytes) * z.k * z.n / (ga * gb * z.gz);
  c.data_all_reduce_s = ring_all_reduce_s(g.gdata, c.data_bytes, axis_bandwidth(bw, Axis::Data), alpha(s, Axis::Data));
}

// Colossal-AI's 3D (section 16): AxoNN's weights, and the rows AxoNN replicates over b
// (the input) and a (the output) split there.
void threed_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                        const LayerCommSettings& s, LayerCollectives& c) {
  axonn3d_collectives(l, g, bw, s, c);
  const Sizes z(l, g, s);
  const double ga = static_cast<double>(g.size(c.a)), gb = static_cast<double>(g.size(c.b));
  c.gathers_input = true;
  const double input_bytes = z.w * z.m * z.k / (ga * z.gz), output_bytes = z.w * z.m * z.n / (gb * z.gz);
  c.forward_all_reduce_s = ring_reduce_scatter_s(g.size(c.a), output_bytes, axis_bandwidth(bw, c.a), alpha(s, c.a));
  c.output_grad_gather_s = ring_all_gather_s(g.size(c.a), output_bytes, all_gather_bw(bw, s, c.a), alpha(s, c.a));
  if (l.kind != model::LayerKind::Embedding) {
    c.input_gather_s = ring_all_gather_s(g.size(c.b), input_bytes, all_gather_bw(bw, s, c.b), alpha(s, c.b));
    c.input_grad_all_reduce_s = ring_reduce_scatter_s(g.size(c.b), input_bytes, axis_bandwidth(bw, c.b), alpha(s, c.b));
  }
}

// Colossal-AI's 2D, SUMMA's layout (section 15): W's k x n/q block gathered over Z; the
// input [m/q, k] gathered over Y, dI reduce-scattered there.
void summa_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                       const LayerCommSettings& s, LayerCollectives& c) {
  const Sizes z(l, g, s);
  c.a = c.b = Axis::Y;
  c.gathers_input = true;
  const double q = static_cast<double>(g.gy), block_bytes = z.w * z.k * z.n / q;
  c.all_gather_s = ring_all_gather_s(g.gz, block_bytes, all_gather_bw(bw, s, Axis::Z), alpha(s, Axis::Z));
  c.reduce_scatter_s = ring_reduce_scatter_s(g.gz, block_bytes, axis_bandwidth(bw, Axis::Z), alpha(s, Axis::Z));
  const double input_bytes = z.w * z.m * z.k / z.gz;
  if (l.kind != model::LayerKind::Embedding) {
    c.input_gather_s = ring_all_gather_s(g.gy, input_bytes, all_gather_bw(bw, s, Axis::Y), alpha(s, Axis::Y));
    c.input_grad_all_reduce_s = ring_reduce_scatter_s(g.gy, input_bytes, axis_bandwidth(bw, Axis::Y), alpha(s, Axis::Y));
  }
  c.data_bytes = static_cast<double>(s.grad_reduce_bytes) * z.k * z.n / (q * z.gz);
  c.data_all_reduce_s = ring_all_reduce_s(g.gdata, c.data_bytes, axis_bandwidth(bw, Axis::Data), alpha(s, Axis::Data));
}

// SUMMA's broadcast form (section 15, "The broadcast form"): no gathers; q steps each
// moving the input's block [m/q, k/q] along Y and the weight's [k/q, n/q] along Z. The
// embedding is gathered and reduce-scattered over Z as in 2d.
void summa_broadcast_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                                 const LayerCommSettings& s, LayerCollectives& c) {
  if (l.kind == model::LayerKind::Embedding) {
    summa_collectives(l, g, bw, s, c);
    return;
  }
  const Sizes z(l, g, s);
  c.a = c.b = Axis::Y;
  const double q = static_cast<double>(g.gy), q2 = q * q;
  const double input_block = z.w * z.m * z.k / (z.gz * q), weight_block = z.w * z.k * z.n / q2;
  auto one_way = [&](Axis a) {
    const double v = s.one_way_bytes_per_s[static_cast<int>(a)];
    return v > 0 ? v : axis_bandwidth(bw, a);
  };
  const double y_bw = one_way(Axis::Y), z_bw = one_way(Axis::Z);
  c.summa_steps = g.gy;
  c.summa_input_broadcast_s = ring_broadcast_s(g.gy, input_block, y_bw, alpha(s, Axis::Y));
  c.summa_weight_broadcast_s = ring_broadcast_s(g.gz, weight_block, z_bw, alpha(s, Axis::Z));
  c.summa_input_reduce_s = s.input_gradient ? ring_reduce_s(g.gy, input_block, y_bw, alpha(s, Axis::Y)) : 0.0;
  c.summa_weight_reduce_s = ring_reduce_s(g.gz, weight_block, z_bw, alpha(s, Axis::Z));
  c.data_bytes = static_cast<double>(s.grad_reduce_bytes) * z.k * z.n / q2;
  c.data_all_reduce_s = ring_all_reduce_s(g.gdata, c.data_bytes, axis_bandwidth(bw, Axis::Data), alpha(s, Axis::Data));
}

// The sequence mode's ring self-attention (section 13): one member's chunk of K (its
// tokens x the heads' widths on it) shifted round the sequence group, forward and
// backward (V with it, and dK, dV back).
void ring_attention(const model::Layer& l, const topo::Grid& g, const LayerCommSettings& s, LayerCollectives& c) {
  const double chunk_bytes = static_cast<double>(s.element_bytes) * static_cast<double>(s.tokens) *
                             static_cast<double>(l.heads * l.head_dim) / static_cast<double>(g.gy * g.gz);
  c.ring_forward_s = ring_self_attention_forward_s(g.sequence, chunk_bytes, s.sequence_bw, s.sequence_latency_s);
  c.ring_backward_s = ring_self_attention_backward_s(g.sequence, chunk_bytes, s.sequence_bw, s.sequence_latency_s);
}

}  // namespace

const LayoutCosts& layout_costs(const topo::Grid& g) {
  static const LayoutCosts sequence = [] {
    LayoutCosts e = layout_costs(topo::TensorLayout::Axonn3d);
    e.attention = ring_attention;
    return e;
  }();
  if (g.sequence == 1) return layout_costs(g.layout);
  AXONN_ASSERT(g.layout == topo::TensorLayout::Axonn3d);  // a sequence group keeps AxoNN's layout (divisibility)
  return sequence;
}

const LayoutCosts& layout_costs(topo::TensorLayout layout) {
  using topo::TensorLayout;
  // Indexed by topo::TensorLayout; built on first use, after the shared entries.
  static const std::array<LayoutCosts, 4> entries = {{
      {&plan::layout_rules(TensorLayout::Axonn3d), true, std::nullopt, axonn3d_collectives, nullptr},
      {&plan::layout_rules(TensorLayout::TwoD), false, Axis::Y, summa_collectives, nullptr},
      {&plan::layout_rules(TensorLayout::ThreeD), true, std::nullopt, threed_collectives, nullptr},
      {&plan::layout_rules(TensorLayout::TwoDBroadcast), false, std::nullopt, summa_broadcast_collectives, nullptr},
  }};
  const auto i = static_cast<size_t>(layout);
  AXONN_ASSERT(i < entries.size() && entries[i].rules->layout == layout);
  return entries[i];
}

}  // namespace axonn::planner
