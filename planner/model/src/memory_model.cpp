// Memory per GPU; see axonn/planner/memory_model.hpp and docs/model.md section 5.
#include "axonn/planner/memory_model.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "axonn/common/units.hpp"
#include "axonn/planner/layout_costs.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::planner {

LayerActivations layer_activations(const model::Layer& l, const topo::Grid& g, int64_t seq_len) {
  const LayoutCosts& layout = layout_costs(g.layout);
  const double gx = static_cast<double>(g.gx), gy = static_cast<double>(g.gy);
  const bool swap = layout.swaps(l);
  const double g_in = swap ? gy : gx, g_out = swap ? gx : gy;
  LayerActivations a;
  switch (l.kind) {
    case model::LayerKind::Linear: {
      // SUMMA's broadcast form (2d-broadcast) keeps its input block, k/q of each row.
      const double in = static_cast<double>(l.k) / (layout.rules->linear_weight_local ? gy : g_in),
                   out = static_cast<double>(l.n) / g_out;
      a.input_grad = in;
      // Where the input is gathered (2d), the norm's output is the block held; where
      // rows are split (3d), the input's rows held, before their gather over b.
      const double block = static_cast<double>(layout.input_block_split(g));
      a.norm_before = l.norm_before ? in / block / static_cast<double>(layout.input_row_split(l, g)) : 0.0;
      // Where rows are split (3d), GELU runs on the output's rows after their
      // reduce-scatter over a.
      a.saved = in + a.norm_before + (l.gelu_after ? out / static_cast<double>(layout.output_row_split(l, g)) : 0.0);
      a.logits = l.loss_after ? out : 0.0;
      // Its backward: the output gradient (made contiguous) and dI. Where the input is
      // gathered (2d, over Y), dI is laid out for its reduce-scatter in a transposed copy
      // (both alive), then the scattered block ([rows, k/Gy]) is kept through the dW;
      // where rows are split (3d), the output gradient's rows arrive split over the
      // input's axis and are gathered, and dI's rows are scattered over the output's.
      a.backward_at_input = a.backward_at_weight = out + in;
      // SUMMA's broadcast form: dY, and three input-sized blocks at the last step (dI
      // from its own step, the received input block, the step's dI product).
      if (layout.rules->linear_weight_local) a.backward_at_input = a.backward_at_weight = out + 3 * in;
      if (layout.input_gathered_over) a.backward_at_input += in, a.backward_at_weight += in / block;
      if (layout.rules->splits_rows) {
        a.backward_at_weight += out / g_in + in / g_out;
        a.backward_at_input = a.backward_at_weight;
      }
      break;
    }
    case model::LayerKind::Embedding:  // keeps token indices only; its output is the first checkpoint
      a.backward_at_input = a.backward_at_weight =
          static_cast<double>(l.n) / static_cast<double>(layout.activation_shards(g));
      break;
    case model::LayerKind::Attention: {
      // Where rows are split (3d), on QKV's output rows: 1/Gx of the Z-rank's.
      const double rows_held = 1.0 / static_cast<double>(layout.attention_row_split(g));
      a.copies = 3.0 * static_cast<double>(l.heads * l.head_dim) / gy * rows_held;
      a.probs = static_cast<double>(l.heads) / gy * static_cast<double>(seq_len) * rows_held;
      a.saved = a.copies + a.probs;
      // The output gradient, dq, dk, dv, and the probabilities' gradient and result.
      a.backward_at_input = a.backward_at_weight = a.copies / 3.0 + a.copies + 2.0 * a.probs;
      break;
    }
  }
  return a;
}

plan::MemoryPrediction memory_prediction(const MemoryBreakdown& b) {
  auto bytes = [](double v) { return static_cast<int64_t>(v); };
  return {bytes(b.model_state_bytes), bytes(b.gathered_weight_bytes), bytes(b.unscattered_grad_bytes),
          bytes(b.activation_bytes),  bytes(b.bucket_bytes),          bytes(b.optimizer_bytes)};
}

std::string memory_over_limit(double bytes, double limit_bytes) {
  const bool small = limit_bytes < kBytesPerGiB;
  const double unit = small ? kBytesPerMiB : kBytesPerGiB;
  return fmt::format("{:.1f} {} > {:.1f} {}", bytes / unit, small ? "MiB" : "GiB", limit_bytes / unit, small ? "MiB" : "GiB");
}

bool is_chain(const model::ModelDescription& m) {
  return std::none_of(m.layers.begin(), m.layers.end(), [](const model::Layer& l) { return l.residual_after; });
}

MemoryBreakdown stage_memory(const model::ModelDescription& m, size_t first, size_t last,
                             const topo::Grid& g, const MemorySettings& s,
                             const std::vector<bool>& cached) {
  std::vector<LayerActivations> acts;
  for (size_t i = first; i < last; ++i) acts.push_back(layer_activations(m.layers[i], g, m.seq_len));
  std::vector<MemoryLayer> view;
  for (size_t i = first; i < last; ++i) {
    const auto& l = m.layers[i];
    view.push_back({static_cast<double>(l.weight_elements()), &acts[i - first], l.unit, l.recomputed, cached[i],
                    schedule::gradient_shard_bytes(l, g, s.precision.grad_reduce_bytes),
                    schedule::pass_layer(l, false, 1, 0, g.layout).local_weight});
  }
  return stage_memory(view.data(), view.size(), m.hidden, m.seq_len, g, s);
}

namespace {

// The passes' peak (docs/model.md section 5): activations and data-parallel buckets at
// the time the step's passes hold the most.
struct PassPeak {
  double activation_bytes = 0;
  double bucket_bytes = 0;
  double in_flight_grad_bytes = 0;  // ZeRO-2's gradients on their way to their owners
  double gathered_bytes = 0;        // ZeRO-3's weights gathered over data
  double total() const { return activation_bytes + bucket_bytes + in_flight_grad_bytes + gathered_bytes; }
  void at_least(double activations, double buckets, double in_flight = 0, double gathered = 0) {
    if (activations + buckets + in_flight + gathered > total()) *this = {activations, buckets, in_flight, gathered};
  }
};

// One pass over a stage's layers: its weights and what passes_peak() needs of them.
struct StageShape {
  double weights = 0, max_block = 0, cached_blocks = 0;  // elements, blocks of Gx*Gy
  // The largest and the sum of the blocks gathered over Z (every weighted layer's but
  // 2d-broadcast's linear ones), and the largest of those never gathered.
  double fetched_max_block = 0, fetched_sum_block = 0, local_max_block = 0;
  bool last_stage = false;
  double segments = 0;       // checkpointed segments
  double kept_whole = 0;     // per row: what the layers outside segments keep
  double kept_whole_input_grad = 0, kept_whole_weight = 0;
  double logits = 0, head = 0;  // the loss's logits per row, what the head layer keeps
};

StageShape stage_shape(const MemoryLayer* layers, size_t count, const topo::Grid& g, bool checkpointing) {
  StageShape sh;
  const double gxy = static_cast<double>(g.gx * g.gy);
  int64_t segment = -1;
  for (size_t i = 0; i < count; ++i) {
    const MemoryLayer& l = layers[i];
    const double block = l.weight_elements / gxy;
    sh.weights += l.weight_elements;
    sh.max_block = std::max(sh.max_block, block);
    if (l.local_weight) {
      sh.local_max_block = std::max(sh.local_max_block, block);
    } else {
      sh.fetched_max_block = std::max(sh.fetched_max_block, block);
      sh.fetched_sum_block += block;
    }
    if (l.cached) sh.cached_blocks += block;
    if (l.act->logits > 0) sh.last_stage = true, sh.logits = l.act->logits, sh.head = l.act->saved;
    if (checkpointing && l.recomputed) {
      if (l.unit != segment) segment = l.unit, sh.segments += 1;
    } else if (l.act->logits == 0) {
      sh.kept_whole += l.act->saved;
      sh.kept_whole_input_grad = std::max(sh.kept_whole_input_grad, l.act->input_grad);
      sh.kept_whole_weight = std::max(sh.kept_whole_weight, block);
    }
  }
  return sh;
}

// Whether passes_peak walks the Gz > 1 weights and dW in time: a chain without segments.
bool z_walked(const MemorySettings& s, const StageShape& sh, const topo::Grid& g) {
  return s.chain && sh.segments == 0 && g.gz > 1 && !layout_costs(g.layout).rules->linear_weight_local;
}
// The same chain in SUMMA's broadcast form (2d-broadcast): each layer's three
// weight-sized blocks are walked at its own backward instead.
bool summa_walked(const MemorySettings& s, const StageShape& sh, const topo::Grid& g) {
  return s.chain && sh.segments == 0 && g.gz > 1 && layout_costs(g.layout).rules->linear_weight_local;
}

// Walks the backward pass of the step's last micro-batch, layer by layer in reverse, as
// the runtime runs it: the loss first (the last stage), then each checkpointed segment
// recomputed and back-propagated, then the layers kept whole. Per row, in elements of the
// activation type (w bytes): a segment's input checkpoint `hx` = hidden/Gx, its output
// and the gradient arriving at it (hx each) while its backward runs, and:
//   at its last linear's backward: everything the segment keeps, that layer's dI, and
//     its dW (a weight block, w bytes, when Gz = 1; the un-scattered dW term otherwise)
//   at its last attention's softmax backward: what the layers before it keep, the q, k,
//     v copies (dV in place of V), three copies of the probabilities (kept, their
//     gradient, the result) and the residual's pending gradient (hx)
// With Gx = 1 a segment's first layer norm keeps the checkpoint itself (not counted
// twice). The loss: the checkpoints, the LM head's input and its norm's (what the head
// layer keeps; with Gx = 1 the norm's is the last block's output), three fp32 copies of the logits
// (log-softmax output, its gradient, the logits' gradient). The other in-flight
// micro-batches keep their checkpoints (and, not on the last stage, the stage's output
// and its send buffer: 2 hx). Buckets: each data-parallel bucket's flat buffer, from the
// layer that fills it (reverse order, `bucket_bytes` of gradients) to the step's end.
// ZeRO-2 and 3 (`sink_bytes` per gradient element, 0 otherwise): each layer's gradient,
// once computed, is reduce-scattered over data to its owners, two layers in flight (the
// runtime's kSinkDepth): its gradient (block/Gz elements) and, on the rank owning them,
// the summed elements (all of the layer's when they fall in one rank's `owned` range).
// At a segment's peak the two layers handed over just before are in flight, and at its
// last linear's that layer's own as it is handed over.
// `gathered` (bytes per weight element): ZeRO-3 with Gz = 1 gathers each layer's weight
// over data at each fetch; a recomputed segment keeps its layers' gathered weights for
// their backward (the segment's weights during its backward), a layer outside segments
// only while it computes (none at the loss: the head's forward weight is gone by then).
PassPeak passes_peak(const MemoryLayer* layers, size_t count, const StageShape& sh, int64_t hidden, int64_t seq_len,
                     const topo::Grid& g, const MemorySettings& s, double sink_bytes, double owned, double gathered) {
  const double w = static_cast<double>(s.precision.compute_bytes);
  const double gxy = static_cast<double>(g.gx * g.gy);
  // Tokens of a micro-batch on this GPU (a chunk of each sequence with sequence parallelism).
  const double rows = static_cast<double>(s.microbatch_seqs * seq_len) / static_cast<double>(g.gz * g.sequence);
  // Where rows are split (3d), the rows between layers are split over Y as well (per
  // row of the stage: 1/Gy).
  const double hx = static_cast<double>(hidden) / static_cast<double>(layout_costs(g.layout).activation_shards(g));
  const bool checkpointing = s.activation_checkpointing;
  auto segmented = [&](const MemoryLayer& l) { return checkpointing && l.recomputed; };
  const bool last_stage = sh.last_stage;
  const double segments = sh.segments, kept_whole = sh.kept_whole, logits = sh.logits;
  const double kept_whole_input_grad = sh.kept_whole_input_grad, kept_whole_weight = sh.kept_whole_weight;

  // Without checkpointing every layer keeps its saved tensors (the stage's input is
  // kept by the first layer norm).
  const double stage_output = last_stage || s.final_stage ? 0.0 : 2 * hx;
  const double per_microbatch = segments * hx + kept_whole + stage_output;
  // The last stage's other micro-batches wait for their backward with their loss's
  // graph: what the head keeps and the log-softmax output (one fp32 copy of the logits).
  const double waiting = static_cast<double>(std::max<int64_t>(s.inflight_microbatches - 1, 0));
  const double others = waiting * (per_microbatch + sh.head + 4.0 / w * logits);

  const double gz = static_cast<double>(g.gz);
  auto handed = [&](double weight_elements) {  // one layer's reduction in flight, bytes
    const double block = weight_elements / gxy / gz;
    return sink_bytes * (block + std::min(block, owned));
  };
  const double largest_handed = handed(sh.max_block * gxy);

  PassPeak peak;
  const double loss_bytes = 4.0;  // the loss works on fp32 logits in every precision
  const double gz_weight_grad = g.gz == 1 ? 1.0 : 0.0;  // Gz > 1: in the un-scattered dW term
  if (last_stage) peak.at_least(w * rows * (others + per_microbatch + sh.head) + loss_bytes * rows * 3 * logits, 0);
  // Without checkpointing: the largest layer's backward on top of everything kept.
  if (!checkpointing && !s.chain)
    peak.at_least(w * rows * (others + per_microbatch + hx + kept_whole_input_grad) +
                      gz_weight_grad * w * kept_whole_weight,
                  0, 2 * largest_handed, gathered * kept_whole_weight);

  // The reverse walk: buckets fill, segments run their backward.
  const bool buckets = s.overlap.bucketed_data_parallel_all_reduce && g.gdata > 1 && !s.optimizer.reduces_data_parallel();
  double issued = 0, filling = 0;
  double seg_saved = 0, seg_after_attention = 0, seg_last_input_grad = 0, seg_last_weight = 0, seg_weights = 0;
  double attention_copies = 0, attention_probs = 0;
  double recent = 0, latest = 0;                    // the last two layers handed over, bytes
  double at_last_linear = 0, at_attention = 0;     // in flight at the segment's two peaks
  bool seg_open = false, seen_attention = false, seen_linear = false;
  double segments_left = segments;
  double kept_after = 0;  // a chain: what the layers kept whole after this one kept
  // A chain without segments with Gz > 1: the gathered weights and the Z reduce-scatters'
  // buffers are walked in time here (stage_memory leaves its whole-pass bounds out).
  const bool z_exact = z_walked(s, sh, g), summa_exact = summa_walked(s, sh, g);
  double z_pending = 0;  // bytes of the Z reduce-scatters pending at this point of the walk
  for (size_t r = count; r-- > 0;) {
    const MemoryLayer& l = layers[r];
    if (buckets && l.weight_elements > 0) {
      filling += l.grad_bytes;
      if (filling >= static_cast<double>(s.overlap.bucket_bytes)) issued += filling, filling = 0;
    }
    const double in_flight_before = recent + latest;
    if (l.weight_elements > 0) recent = latest, latest = handed(l.weight_elements);
    if (!segmented(l) && s.chain && l.act->logits == 0) {
      // A chain's layer kept whole, at its backward's two moments: what it and the layers
      // before it keep (those after it are freed), what its backward holds computing dI,
      // then computing dW with the dW. Walked exactly (no segments): with Gz > 1 its
      // gathered weight and the one prefetched for the layer before it, and the Z
      // reduce-scatters of dW (the un-scattered block and its 1/Gz result) of this layer
      // and, with optimization 2, of the layers after it, pending to the pass's end.
      const double block = l.weight_elements / gxy;
      const double kept = others + segments_left * hx + stage_output + kept_whole - kept_after;
      double weights_here = 0, own_dw = gz_weight_grad * w * block, z_dw = 0;
      if (z_exact) {
        size_t before = r;
        while (before > 0 && layers[before - 1].weight_elements == 0) --before;
        const bool prefetched = s.overlap.prefetch_all_gather && before > 0 && !layers[before - 1].cached;
        weights_here = w * (sh.cached_blocks + (l.cached ? 0.0 : block) +
                            (prefetched ? layers[before - 1].weight_elements / gxy : 0.0));
        own_dw = w * block * (1 + 1 / gz);
        z_dw = z_pending;
        if (l.weight_elements > 0 && s.overlap.async_weight_grad_reduce_scatter) z_pending += own_dw;
      }
      // SUMMA's last backward step: the received weight block, the step's dW product and
      // this rank's dW, each 1/Gz of the Gx*Gy block.
      if (summa_exact && l.local_weight) weights_here = 3 * w * block / gz;
      const double zero_in_flight = in_flight_before + handed(l.weight_elements);
      peak.at_least(w * rows * (kept + l.act->backward_at_input), issued, in_flight_before + z_dw,
                    gathered * block + weights_here);
      peak.at_least(w * rows * (kept + l.act->backward_at_weight) + (z_exact ? 0.0 : own_dw), issued,
                    zero_in_flight + z_dw + (z_exact ? own_dw : 0.0), gathered * block + weights_here);
      kept_after += l.act->saved;
    }
    if (!segmented(l)) continue;
    if (!seg_open) {
      seg_open = true;
      seg_saved = seg_after_attention = seg_last_input_grad = seg_last_weight = seg_weights = 0;
      seen_attention = seen_linear = false;
    }
    seg_saved += l.act->saved;
    seg_weights += l.weight_elements / gxy;
    if (!seen_linear && l.act->input_grad > 0) {
      seen_linear = true;
      seg_last_input_grad = l.act->input_grad;
      seg_last_weight = l.weight_elements / gxy;
      at_last_linear = in_flight_before + handed(l.weight_elements);  // its own, as it is handed over
    }
    if (!seen_attention) {
      if (l.act->probs > 0) {
        seen_attention = true;
        attention_copies = l.act->copies;
        attention_probs = l.act->probs;
        at_attention = in_flight_before;
      } else {
        seg_after_attention += l.act->saved;
      }
    }
    if (r > 0 && segmented(layers[r - 1]) && layers[r - 1].unit == l.unit) continue;
    // The segment's first layer: its norm (Gx = 1) keeps the checkpoint, counted once.
    const double shared = g.gx == 1 ? l.act->norm_before : 0.0;
    segments_left -= 1;
    const double earlier = others + segments_left * hx + stage_output;  // checkpoints not yet consumed
    const double around = 3 * hx;  // its input checkpoint, its output, the gradient arriving
    peak.at_least(w * rows * (earlier + around + seg_saved - shared + seg_last_input_grad) +
                      gz_weight_grad * w * seg_last_weight,
                  issued, at_last_linear, gathered * seg_weights);
    if (seen_attention) {
      const double before = seg_saved - seg_after_attention - attention_copies - attention_probs - shared;
      peak.at_least(w * rows * (earlier + around + hx + before + attention_copies + 3 * attention_probs), issued,
                    at_attention, gathered * seg_weights);
    }
    seg_open = false;
  }
  // After the backward: every bucket (the last one partial) until the reduction ends,
  // the last closing while the stage's input gradient (hx per row) and, on the first
  // stage, the embedding's table gradient (a weight block, w bytes) are still alive.
  if (buckets && count > 0) {
    const MemoryLayer& first = layers[0];
    const bool embedding = first.weight_elements > 0 && first.act->input_grad == 0;
    peak.at_least(w * rows * hx + (embedding ? gz_weight_grad * w * first.weight_elements / gxy : 0.0),
                  issued + filling, z_pending);
  }
  return peak;
}

}  // namespace

MemoryBreakdown stage_memory(const MemoryLayer* layers, size_t count, int64_t hidden, int64_t seq_len,
                             const topo::Grid& g, const MemorySettings& s) {
  MemoryBreakdown mem;
  const double w = static_cast<double>(s.precision.compute_bytes);
  const double gxy = static_cast<double>(g.gx * g.gy), gz = static_cast<double>(g.gz);
  const StageShape sh = stage_shape(layers, count, g, s.activation_checkpointing);
  const double weights = sh.weights, max_block = sh.max_block,
               cached_blocks = sh.cached_blocks;
  const double phi = weights / (gxy * gz);
  // Weights (w bytes): every element. Gradients (wg bytes): every element, the owned
  // block under ZeRO-2. The optimizer's state (the master in mixed precision, Adam's
  // moments): the block this rank owns, 1/Gdata of them under ZeRO (docs/model.md
  // section 5). Working sets of bsize elements: offloaded, master, moments and fp32
  // gradient; mixed precision on the device, the fp32 gradient.
  const double wg = static_cast<double>(s.precision.grad_reduce_bytes);
  const double owned = s.optimizer.zero > 0 ? phi / static_cast<double>(g.gdata) : phi;
  const double grads = s.optimizer.zero >= 2 ? owned : phi;
  const double weights_held = s.optimizer.zero >= 3 ? owned : phi;  // ZeRO-3 shards the weights too
  const double bucket = std::min(static_cast<double>(s.optimizer.bucket_elements), owned);
  if (s.optimizer.offload) {
    mem.model_state_bytes = w * weights_held + wg * grads + 16 * bucket;
    mem.host_bytes = 12 * owned;
  } else {
    mem.model_state_bytes = w * weights_held + wg * grads +
                            (static_cast<double>(s.precision.state_bytes_per_param) - w - wg) * owned +
                            (s.precision.mixed() ? 4 * bucket : 0.0);
  }
  if (g.gz > 1 && !z_walked(s, sh, g)) {
    // The layers gathered over Z (every weighted layer but 2d-broadcast's linear ones).
    const double fetched_max = sh.fetched_max_block, fetched_sum = sh.fetched_sum_block;
    const double inflight = s.overlap.prefetch_all_gather ? 2.0 : 1.0;
    mem.gathered_weight_bytes = w * (inflight * fetched_max + cached_blocks);
    // ZeRO-2 bounds the reduce-scatters in flight (two, and the layer computing).
    const double async_blocks = s.optimizer.zero >= 2 ? std::min(fetched_sum, 3 * fetched_max) : fetched_sum;
    mem.unscattered_grad_bytes = w * (s.overlap.async_weight_grad_reduce_scatter ? async_blocks : fetched_max);
    // SUMMA's broadcast form gathers none of its linear weights: at a backward's last
    // step a rank holds three weight-sized blocks of the layer (the received one, the
    // step's dW product, its own dW), a 1/Gz share of the Gx*Gy block (docs/model.md
    // section 15); a chain without segments walks them at each layer (passes_peak), a
    // stage of blocks takes the largest layer's for the whole pass.
    if (!summa_walked(s, sh, g)) mem.gathered_weight_bytes += w * 3 * sh.local_max_block / gz;
  }
  // ZeRO-2 and 3: two layers' gradients on their way to their owners, in the backward.
  const double sink_bytes = s.optimizer.zero >= 2 && g.gdata > 1 ? wg : 0.0;
  // ZeRO-3: the blocks gathered over data. With Z, 1/Gz of each, alive until its Z
  // all-gather completes (one, or with prefetch two); without, the block computed with,
  // which a recomputed segment keeps for its backward (passes_peak).
  double gathered = 0;
  if (s.optimizer.zero >= 3 && g.gdata > 1) {
    if (g.gz > 1) mem.gathered_weight_bytes += w * (s.overlap.prefetch_all_gather ? 2.0 : 1.0) * max_block / gz;
    else gathered = w;
  }
  const PassPeak peak = passes_peak(layers, count, sh, hidden, seq_len, g, s, sink_bytes, owned, gathered);
  mem.activation_bytes = peak.activation_bytes;
  mem.bucket_bytes = peak.bucket_bytes;
  mem.unscattered_grad_bytes += peak.in_flight_grad_bytes;
  mem.gathered_weight_bytes += peak.gathered_bytes;
  // The optimizer phase: the passes' buffers are gone. ZeRO-1 reduce-scatters the
  // gradients into a new block of the owned elements (ZeRO-2's sink already holds
  // them); the gradient norm copies each parameter (its owned part) to fp64 and squares
  // it, 16 bytes per element of the largest.
  const double largest = s.optimizer.zero > 0 && g.gdata > 1 ? std::min(max_block / gz, owned) : max_block / gz;
  const double optimizer = (s.optimizer.zero == 1 && g.gdata > 1 ? wg * owned : 0.0) +
                           16 * largest;
  if (s.optimizer_phase &&
      optimizer > mem.gathered_weight_bytes + mem.unscattered_grad_bytes + mem.activation_bytes + mem.bucket_bytes) {
    mem.gathered_weight_bytes = mem.unscattered_grad_bytes = mem.activation_bytes = mem.bucket_bytes = 0;
    mem.optimizer_bytes = optimizer;
  }
  return mem;
}

}  // namespace axonn::planner
