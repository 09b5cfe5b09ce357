// Per-layer communication time; see axonn/planner/layer_comm.hpp and docs/model.md section 3.
#include "axonn/planner/layer_comm.hpp"

#include "axonn/planner/collectives.hpp"

namespace axonn::planner {

plan::CommBreakdown layer_comm(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                               const LayerCommSettings& s) {
  plan::CommBreakdown c;
  if (l.kind == model::LayerKind::Attention) return c;
  using topo::Axis;
  // "a" splits W's rows (and reduces the forward output), "b" splits W's columns
  // (and reduces the backward input gradient). Normal: a = X, b = Y; transposed: swapped.
  const Axis a = l.transposed ? Axis::Y : Axis::X;
  const Axis b = l.transposed ? Axis::X : Axis::Y;
  const double ga = static_cast<double>(g.size(a)), gb = static_cast<double>(g.size(b));
  const double gz = static_cast<double>(g.gz);
  const double k = static_cast<double>(l.k), n = static_cast<double>(l.n);
  const double m = static_cast<double>(s.tokens), w = static_cast<double>(s.element_bytes);
  const double mb = static_cast<double>(s.microbatches);
  const auto bw_of = [&](Axis x) { return bw[static_cast<int>(x)]; };

  const double weight_block_bytes = w * k * n / (ga * gb);
  c.ag_z = mb * static_cast<double>(s.all_gathers) *
           ring_all_gather_s(g.gz, weight_block_bytes, bw_of(Axis::Z), s.latency_s);
  c.rs_z = mb * ring_reduce_scatter_s(g.gz, weight_block_bytes, bw_of(Axis::Z), s.latency_s);

  const double fwd = mb * static_cast<double>(s.forward_all_reduces) *
                     ring_all_reduce_s(g.size(a), w * m * n / (gb * gz), bw_of(a), s.latency_s);
  const double bwd = s.input_gradient
                         ? mb * ring_all_reduce_s(g.size(b), w * m * k / (ga * gz), bw_of(b), s.latency_s)
                         : 0.0;
  (a == Axis::X ? c.ar_x : c.ar_y) += fwd;
  (b == Axis::X ? c.ar_x : c.ar_y) += bwd;

  c.ar_data = ring_all_reduce_s(g.gdata, static_cast<double>(s.grad_reduce_bytes) * k * n / (ga * gb * gz),
                                bw_of(Axis::Data), s.latency_s);
  return c;
}

}  // namespace axonn::planner
