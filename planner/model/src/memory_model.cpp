// Memory per GPU; see axonn/planner/memory_model.hpp and docs/model.md section 5.
#include "axonn/planner/memory_model.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "axonn/common/units.hpp"

namespace axonn::planner {

double activation_elems_per_row(const model::Layer& l, const topo::Grid& g, int64_t seq_len) {
  const double gx = static_cast<double>(g.gx), gy = static_cast<double>(g.gy);
  const double g_in = l.transposed ? gy : gx, g_out = l.transposed ? gx : gy;
  switch (l.kind) {
    case model::LayerKind::Linear:
      return static_cast<double>(l.k) / g_in + static_cast<double>(l.n) / g_out;
    case model::LayerKind::Embedding:
      return static_cast<double>(l.n) / g_out;  // the looked-up rows; the input is token ids
    case model::LayerKind::Attention:
      // scores and probabilities: heads/Gy x seq_len per row
      return 2.0 * static_cast<double>(l.heads) / gy * static_cast<double>(seq_len);
  }
  return 0.0;
}

std::string memory_over_limit(double bytes, double limit_bytes) {
  const bool small = limit_bytes < kBytesPerGiB;
  const double unit = small ? kBytesPerMiB : kBytesPerGiB;
  return fmt::format("{:.1f} {} > {:.1f} {}", bytes / unit, small ? "MiB" : "GiB", limit_bytes / unit, small ? "MiB" : "GiB");
}

MemoryBreakdown stage_memory(const model::ModelDescription& m, size_t first, size_t last,
                             const topo::Grid& g, const MemorySettings& s,
                             const std::vector<bool>& cached) {
  std::vector<MemoryLayer> view;
  for (size_t i = first; i < last; ++i) {
    const auto& l = m.layers[i];
    view.push_back({static_cast<double>(l.weight_elements()), activation_elems_per_row(l, g, m.seq_len), l.unit,
                    l.recomputed, cached[i]});
  }
  return stage_memory(view.data(), view.size(), m.hidden, m.seq_len, g, s);
}

MemoryBreakdown stage_memory(const MemoryLayer* layers, size_t count, int64_t hidden, int64_t seq_len,
                             const topo::Grid& g, const MemorySettings& s) {
  MemoryBreakdown mem;
  const double w = static_cast<double>(s.precision.compute_bytes);
  const double gxy = static_cast<double>(g.gx * g.gy), gz = static_cast<double>(g.gz);
  const double rows = static_cast<double>(s.microbatch_seqs * seq_len) / gz;

  double weights = 0, max_block = 0, sum_block = 0, cached_blocks = 0;
  double stored_per_row = 0;                    // activations kept for backward
  // Checkpointed units are contiguous runs of layers: track the current one.
  int64_t unit = -1, checkpointed_units = 0;
  double unit_per_row = 0, largest_unit = 0;  // transient working set of a recomputed unit
  for (size_t i = 0; i < count; ++i) {
    const MemoryLayer& l = layers[i];
    const double elems = l.weight_elements;
    weights += elems;
    const double block = elems / gxy;
    max_block = std::max(max_block, block);
    sum_block += block;
    if (l.cached) cached_blocks += block;
    const double act = l.activation_elems_per_row;
    if (s.activation_checkpointing && l.recomputed) {
      if (l.unit != unit) {
        largest_unit = std::max(largest_unit, unit_per_row);
        unit_per_row = 0;
        unit = l.unit;
        ++checkpointed_units;
      }
      unit_per_row += act;
    } else {
      stored_per_row += act;
    }
  }
  largest_unit = std::max(largest_unit, unit_per_row);
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
  if (g.gz > 1) {
    const double inflight = s.overlap.prefetch_all_gather ? 2.0 : 1.0;
    mem.gathered_weight_bytes = w * (inflight * max_block + cached_blocks);
    // ZeRO-2 bounds the reduce-scatters in flight (two, and the layer computing).
    const double async_blocks = s.optimizer.zero >= 2 ? std::min(sum_block, 3 * max_block) : sum_block;
    mem.unscattered_grad_bytes = w * (s.overlap.async_weight_grad_reduce_scatter ? async_blocks : max_block);
  }
  // ZeRO-2: up to two layers' gradients on their way to their owners.
  if (s.optimizer.zero >= 2 && g.gdata > 1) mem.unscattered_grad_bytes += wg * 2 * max_block / gz;
  // ZeRO-3: the shards gathered over data, each alive until its Z all-gather completes
  // (one, or with prefetch two); without Z the gathered shard is the block computed with.
  if (s.optimizer.zero >= 3 && g.gdata > 1) {
    const double inflight = g.gz > 1 && s.overlap.prefetch_all_gather ? 2.0 : 1.0;
    mem.gathered_weight_bytes += w * inflight * max_block / gz;
  }
  const double checkpoints_per_row =
      static_cast<double>(checkpointed_units) * static_cast<double>(hidden) / static_cast<double>(g.gx);
  mem.activation_bytes =
      w * rows * (static_cast<double>(s.inflight_microbatches) * (stored_per_row + checkpoints_per_row) +
                  largest_unit);
  return mem;
}

}  // namespace axonn::planner
