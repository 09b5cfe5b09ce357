// Per-layer communication time; see axonn/planner/layer_comm.hpp and docs/model.md section 3.
#include "axonn/planner/layer_comm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "axonn/planner/collectives.hpp"
#include "axonn/planner/layout_costs.hpp"

namespace axonn::planner {
namespace {

using topo::Axis;

// The large collectives: the attention core's (the ring of the sequence entry, section
// 13) or a weighted layer's, by the grid's entry (layout_costs.hpp).
LayerCollectives large_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                                   const LayerCommSettings& s, const LayoutCosts& layout) {
  LayerCollectives c;
  if (l.kind == model::LayerKind::Attention) {
    if (layout.attention) layout.attention(l, g, s, c);
    return c;
  }
  // "a" splits W's rows (and reduces the forward output), "b" splits W's columns
  // (and reduces the backward input gradient). Normal: a = X, b = Y; swapped: the reverse.
  c.a = layout.swaps(l) ? Axis::Y : Axis::X;
  c.b = layout.swaps(l) ? Axis::X : Axis::Y;
  layout.collectives(l, g, bw, s, c);
  return c;
}

// The small collectives of a linear layer (docs/model.md section 8, "Small
// collectives"): the runtime's layer norm, cross-entropy and 3d vector functions
// (runtime/src/tensor_parallel.cpp), latency-bound all-reduces of a few bytes per row.
// The split layer norm's forward statistics are fp64 whatever the element type
// (runtime/src/split_layer_norm.cpp).
constexpr double kNormStatisticBytes = 8;

void add_small_collectives(LayerCollectives& c, const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                           const LayerCommSettings& s, const LayoutCosts& layout) {
  if (!s.small_collectives || l.kind != model::LayerKind::Linear) return;
  const double w = static_cast<double>(s.element_bytes);
  // Rows of the input and of the output on one GPU: the micro-batch's tokens over Z;
  // a layout splitting rows (3d) also splits the input's over b and the output's over a.
  const double rows = static_cast<double>(s.tokens) / static_cast<double>(g.gz);
  const double in_rows = rows / static_cast<double>(layout.input_row_split(l, g));
  const double out_rows = rows / static_cast<double>(layout.output_row_split(l, g));
  const Axis hidden = layout.rules->hidden_axis;
  const int64_t h = g.size(hidden);
  auto all_reduce = [&](Axis over, double bytes) {
    return ring_all_reduce_s(g.size(over), bytes, axis_bandwidth(bw, over), axis_latency(s.latency_s, over));
  };
  // The norm's elements on one GPU (its input's hidden block) and the bias's (the
  // output's columns).
  const double norm = l.norm_before ? static_cast<double>(l.k) / static_cast<double>(h) : 0.0;
  const double bias = l.bias ? static_cast<double>(l.n) / static_cast<double>(g.size(c.b)) : 0.0;
  if (l.norm_before && h > 1) {  // sum and sum of squares in one (fp64); in the backward both sums in one
    c.small_forward_s += all_reduce(hidden, 2.0 * kNormStatisticBytes * in_rows);
    c.small_forward_calls += 1;
    c.small_backward_s += all_reduce(hidden, 2.0 * w * in_rows);
    c.small_backward_calls += 1;
  }
  if (l.loss_after && g.gy > 1) {  // the row maximum; the sum of exponentials and the target logit (fp32 at least)
    const double logit = std::max(w, 4.0);
    c.small_forward_s += all_reduce(Axis::Y, logit * out_rows) + all_reduce(Axis::Y, 2.0 * logit * out_rows);
    c.small_forward_calls += 2;
  }
  if (layout.rules->splits_rows) {  // a vector's gradient over the group holding its other rows
    if (l.bias && g.size(c.a) > 1) {
      c.small_backward_s += all_reduce(c.a, w * bias);
      c.small_backward_calls += 1;
    }
    if (l.norm_before && g.size(c.b) > 1) {  // gain and shift, in one
      c.small_backward_s += all_reduce(c.b, 2.0 * w * norm);
      c.small_backward_calls += 1;
    }
  }
  c.vector_elements = 2.0 * norm + bias;
}

}  // namespace

double summa_forward_exposed_s(const LayerCollectives& c, double compute_s) {
  if (c.summa_steps <= 0) return 0.0;
  const double q = static_cast<double>(c.summa_steps);
  const double step = c.summa_input_broadcast_s + c.summa_weight_broadcast_s;
  return step + (q - 1.0) * std::max(0.0, step - compute_s / q);
}

double summa_backward_exposed_s(const LayerCollectives& c, double weight_compute_s) {
  if (c.summa_steps <= 0) return 0.0;
  const double q = static_cast<double>(c.summa_steps);
  return q * (c.summa_weight_broadcast_s + std::max(c.summa_input_reduce_s - weight_compute_s / q,
                                                    c.summa_input_broadcast_s + c.summa_weight_reduce_s));
}

LayerCollectives layer_collectives(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                                   const LayerCommSettings& s) {
  const LayoutCosts& layout = layout_costs(g);
  LayerCollectives c = large_collectives(l, g, bw, s, layout);
  add_small_collectives(c, l, g, bw, s, layout);
  return c;
}

StepCollectives step_small_collectives(double vector_elements, int64_t grad_bytes, const topo::Grid& g,
                                       const AxisBandwidths& bw, const AxisLatencies& latency,
                                       const plan::OptimizerSettings& optimizer) {
  constexpr double kLossBytes = 8;  // the loss sum, a double
  StepCollectives out;
  auto add = [&](int64_t p, double seconds) {
    if (p <= 1) return;
    out.seconds += seconds;
    ++out.calls;
  };
  constexpr double kNone = std::numeric_limits<double>::infinity();
  const int64_t z_data = g.gz * g.gdata;
  const double z_data_beta = std::min(g.gz > 1 ? axis_bandwidth(bw, Axis::Z) : kNone,
                                      g.gdata > 1 ? axis_bandwidth(bw, Axis::Data) : kNone);
  const double latency_s = axis_latency(latency, g.gdata > 1 ? Axis::Data : Axis::Z);
  if (vector_elements > 0) {
    const double bytes = vector_elements * static_cast<double>(grad_bytes);
    if (optimizer.zero > 0) {  // the optimizer phase: reduce-scatter, update, all-gather
      add(z_data, ring_reduce_scatter_s(z_data, bytes, z_data_beta, latency_s));
      add(z_data, ring_all_gather_s(z_data, bytes, z_data_beta, latency_s));
    } else {
      // Offloaded, in chunks of k buckets (k = 0: one); else the reducer's one call.
      const double width = static_cast<double>(optimizer.allreduce_coarsening * optimizer.bucket_elements);
      const int64_t chunks =
          optimizer.offload && width > 0 ? static_cast<int64_t>(std::ceil(vector_elements / width)) : 1;
      for (int64_t c = 0; c < chunks; ++c)
        add(z_data, ring_all_reduce_s(z_data, bytes / static_cast<double>(chunks), z_data_beta, latency_s));
    }
  }
  add(z_data, ring_all_reduce_s(z_data, kLossBytes, z_data_beta, latency_s));
  if (plan::layout_rules(g.layout).splits_rows)  // the logits' rows over X
    add(g.gx, ring_all_reduce_s(g.gx, kLossBytes, axis_bandwidth(bw, Axis::X), axis_latency(latency, Axis::X)));
  add(g.ginter,
      ring_all_reduce_s(g.ginter, kLossBytes, axis_bandwidth(bw, Axis::Pipe), axis_latency(latency, Axis::Pipe)));
  return out;
}

plan::CommBreakdown layer_comm(const model::Layer& l, const topo::Grid& g, const AxisBandwidths& bw,
                               const LayerCommSettings& s) {
  return comm_per_step(layer_collectives(l, g, bw, s), s.microbatches, s.all_gathers, s.forward_all_reduces);
}

}  // namespace axonn::planner
