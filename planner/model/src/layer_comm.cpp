// Per-layer communication time; see axonn/planner/layer_comm.hpp and docs/model.md section 3.
#include "axonn/planner/layer_comm.hpp"

#include "axonn/planner/collectives.hpp"

namespace axonn::planner {

LayerCollectives layer_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                                   const LayerCommSettings& s) {
  LayerCollectives c;
  if (l.kind == model::LayerKind::Attention) {
    if (g.sequence > 1) {  // one member's chunk of K: its tokens x the heads' widths on it
      const double chunk_bytes = static_cast<double>(s.element_bytes) * static_cast<double>(s.tokens) *
                                 static_cast<double>(l.heads * l.head_dim) / static_cast<double>(g.gy * g.gz);
      c.ring_forward_s = ring_self_attention_forward_s(g.sequence, chunk_bytes, s.sequence_bw, s.latency_s);
      c.ring_backward_s = ring_self_attention_backward_s(g.sequence, chunk_bytes, s.sequence_bw, s.latency_s);
    }
    return c;
  }
  using topo::Axis;
  // "a" splits W's rows (and reduces the forward output), "b" splits W's columns
  // (and reduces the backward input gradient). Normal: a = X, b = Y; transposed: swapped.
  c.a = l.swaps_xy() ? Axis::Y : Axis::X;
  c.b = l.swaps_xy() ? Axis::X : Axis::Y;
  const double ga = static_cast<double>(g.size(c.a)), gb = static_cast<double>(g.size(c.b));
  const double gz = static_cast<double>(g.gz);
  const double k = static_cast<double>(l.k), n = static_cast<double>(l.n);
  const double m = static_cast<double>(s.tokens), w = static_cast<double>(s.element_bytes);
  const auto bw_of = [&](Axis x) { return bw[static_cast<int>(x)]; };

  if (g.summa()) {  // 2d: W's k x n/q block gathered over Z; the input [m/q, k] gathered over Y
    c.a = c.b = Axis::Y;
    c.gathers_input = true;
    const double q = static_cast<double>(g.gy), block_bytes = w * k * n / q;
    c.all_gather_s = ring_all_gather_s(g.gz, block_bytes, bw_of(Axis::Z), s.latency_s);
    c.reduce_scatter_s = ring_reduce_scatter_s(g.gz, block_bytes, bw_of(Axis::Z), s.latency_s);
    const double input_bytes = w * m * k / gz;
    if (l.kind != model::LayerKind::Embedding) {
      c.input_gather_s = ring_all_gather_s(g.gy, input_bytes, bw_of(Axis::Y), s.latency_s);
      c.input_grad_all_reduce_s = ring_reduce_scatter_s(g.gy, input_bytes, bw_of(Axis::Y), s.latency_s);
    }
    c.data_bytes = static_cast<double>(s.grad_reduce_bytes) * k * n / (q * gz);
    c.data_all_reduce_s = ring_all_reduce_s(g.gdata, c.data_bytes, bw_of(Axis::Data), s.latency_s);
    return c;
  }
  const double weight_block_bytes = w * k * n / (ga * gb);
  c.all_gather_s = ring_all_gather_s(g.gz, weight_block_bytes, bw_of(Axis::Z), s.latency_s);
  c.reduce_scatter_s = ring_reduce_scatter_s(g.gz, weight_block_bytes, bw_of(Axis::Z), s.latency_s);
  c.forward_all_reduce_s = ring_all_reduce_s(g.size(c.a), w * m * n / (gb * gz), bw_of(c.a), s.latency_s);
  c.input_grad_all_reduce_s =
      s.input_gradient ? ring_all_reduce_s(g.size(c.b), w * m * k / (ga * gz), bw_of(c.b), s.latency_s) : 0.0;
  c.data_bytes = static_cast<double>(s.grad_reduce_bytes) * k * n / (ga * gb * gz);
  c.data_all_reduce_s = ring_all_reduce_s(g.gdata, c.data_bytes, bw_of(Axis::Data), s.latency_s);
  if (g.threed()) {  // 3d: the rows AxoNN replicates over b (input) and a (output) are split there
    c.gathers_input = true;
    const double input_bytes = w * m * k / (ga * gz), output_bytes = w * m * n / (gb * gz);
    c.forward_all_reduce_s = ring_reduce_scatter_s(g.size(c.a), output_bytes, bw_of(c.a), s.latency_s);
    c.output_grad_gather_s = ring_all_gather_s(g.size(c.a), output_bytes, bw_of(c.a), s.latency_s);
    if (l.kind != model::LayerKind::Embedding) {
      c.input_gather_s = ring_all_gather_s(g.size(c.b), input_bytes, bw_of(c.b), s.latency_s);
      c.input_grad_all_reduce_s = ring_reduce_scatter_s(g.size(c.b), input_bytes, bw_of(c.b), s.latency_s);
    }
  }
  return c;
}

plan::CommBreakdown layer_comm(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                               const LayerCommSettings& s) {
  return comm_per_step(layer_collectives(l, g, bw, s), s.microbatches, s.all_gathers, s.forward_all_reduces);
}

}  // namespace axonn::planner
