// The planner's evaluation of one grid as it was written first: every layer of every
// stage evaluated on its own, straight from docs/model.md. Kept as the reference the
// memoized, threaded planner (planner.cpp) is checked against: the same numbers, bit
// for bit, on every shipped model (test_planner_reference.cpp).
#include "reference_planner.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/layer_comm.hpp"

namespace axonn::test {

using namespace axonn::planner;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Evaluation reject(Evaluation e, Rejection why, std::string reason) {
  e.feasible = false;
  e.rejection = why;
  e.rejected_because = std::move(reason);
  return e;
}

}  // namespace

Evaluation reference_evaluate(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                    const PlannerOptions& o) {
  Evaluation e;
  e.grid = g;
  const bool paper = o.comm_model == CommModel::Paper;
  if (o.batch_seqs % g.gdata != 0)
    return reject(e, Rejection::Divisibility,
                  fmt::format("batch sequences={} is not divisible by gdata={}", o.batch_seqs, g.gdata));
  const int64_t per_group = o.batch_seqs / g.gdata;
  int64_t mb = paper ? per_group : (o.microbatch_seqs > 0 ? o.microbatch_seqs : planner::default_microbatch_seqs(per_group, g.gz, g.ginter));
  if (mb == 0)
    return reject(e, Rejection::Divisibility,
                  fmt::format("{} sequences per data-parallel group do not split into >= ginter={} "
                              "micro-batches of a multiple of gz={} sequences",
                              per_group, g.ginter, g.gz));
  if (auto why = plan::divisibility_problem(m, g, o.batch_seqs, mb))
    return reject(e, Rejection::Divisibility, *why);
  e.microbatch_seqs = mb;
  e.microbatches = per_group / mb;

  const AxisBandwidths bw =
      o.placement_aware
          ? placement_aware_bandwidths(t, g, o.order, paper ? BandwidthRule::Strict : BandwidthRule::Straddle)
          : placement_agnostic_bandwidths(t, g);

  LayerCommSettings ls;
  ls.tokens = mb * m.seq_len;
  ls.microbatches = paper ? 1 : e.microbatches;
  ls.element_bytes = paper ? 2 : o.precision.compute_bytes;
  ls.grad_reduce_bytes = paper ? 4 : o.precision.grad_reduce_bytes;
  ls.latency_s = paper ? 0.0 : t.collective_latency_s;

  // Optimization 4, as the runtime applies it (CommEngine::add_layer): under activation
  // checkpointing, the first N layers with weights inside checkpointed blocks keep their
  // gathered weight for the recompute.
  std::vector<bool> cached(m.layers.size(), false);
  if (!paper && o.activation_checkpointing) {
    int64_t n = 0;
    for (size_t i = 0; i < m.layers.size() && n < o.overlap.cache_all_gather_layers; ++i)
      if (m.layers[i].weight_elements() > 0 && m.layers[i].recomputed) cached[i] = true, ++n;
  }

  MemorySettings ms;
  ms.microbatch_seqs = mb;
  ms.inflight_microbatches = g.ginter == 1 ? 1 : std::min(e.microbatches, g.ginter);
  ms.activation_checkpointing = o.activation_checkpointing;
  ms.overlap = o.overlap;
  ms.precision = o.precision;

  StageSchedule schedule;
  schedule.activation_checkpointing = o.activation_checkpointing;
  schedule.overlap = o.overlap;
  schedule.microbatches = g.ginter == 1 ? e.microbatches : 1;

  const int64_t units_per_stage = m.num_units / g.ginter;
  size_t first = 0;
  for (int64_t stage = 0; stage < g.ginter; ++stage) {
    size_t last = first;
    while (last < m.layers.size() && m.layers[last].unit < (stage + 1) * units_per_stage) ++last;
    plan::CommBreakdown c;
    std::vector<LayerTimes> timeline;
    double stage_optimizer_s = 0;
    for (size_t i = first; i < last && !paper; ++i) {
      const auto& l = m.layers[i];
      LayerCommSettings s = ls;
      s.input_gradient = l.kind != model::LayerKind::Embedding;
      LayerTimes lt;
      const ElementwiseTime ew = elementwise_s(t, l, g, mb, m.seq_len);
      lt.forward_s = matmuls_s(t, forward_matmuls(l, g, mb, m.seq_len)) + ew.forward_s;
      lt.backward_input_s =
          (s.input_gradient ? matmuls_s(t, backward_input_matmuls(l, g, mb, m.seq_len)) : 0.0) + ew.backward_s;
      stage_optimizer_s += optimizer_s(t, l, g);
      lt.backward_weight_s = matmuls_s(t, backward_weight_matmuls(l, g, mb, m.seq_len));
      lt.comm = layer_collectives(l, g, bw, s);
      lt.recomputed = l.recomputed;
      lt.cached = cached[i];
      lt.gather_in_backward = l.kind != model::LayerKind::Embedding;
      lt.unit = l.unit;
      timeline.push_back(lt);
    }
    for (size_t i = first; i < last; ++i) {
      const auto& l = m.layers[i];
      if (paper && !(l.kind == model::LayerKind::Linear && l.in_block)) continue;
      LayerCommSettings s = ls;
      if (paper) {
        s.all_gathers = 2;
        s.forward_all_reduces = 2;
      } else {
        s.all_gathers = (cached[i] || l.kind == model::LayerKind::Embedding) ? 1 : 2;
        s.forward_all_reduces = (o.activation_checkpointing && l.recomputed) ? 2 : 1;
        s.input_gradient = l.kind != model::LayerKind::Embedding;
      }
      c += layer_comm(l, g, bw, s);
    }
    if (g.ginter > 1) {
      // One activation forward (unless last stage) and one gradient backward (unless
      // first) per micro-batch; each GPU sends its (rows/Gz) x (hidden/Gx) shard.
      const double bytes = static_cast<double>(ls.element_bytes) * static_cast<double>(mb * m.seq_len) *
                           static_cast<double>(m.hidden) / static_cast<double>(g.gx * g.gz);
      const int64_t sends = e.microbatches * ((stage < g.ginter - 1) + (stage > 0));
      c.p2p_pipe = static_cast<double>(sends) *
                   point_to_point_s(bytes,
                                    pipeline_p2p_bandwidth(t, g, o.order, o.placement_aware && !paper,
                                                           bw[static_cast<int>(topo::Axis::Pipe)]),
                                    ls.latency_s);
    }
    if (c.total() > e.comm.total() || stage == 0) e.comm = c;
    if (!paper) {
      // Ginter = 1: the whole step; else one micro-batch, and the stage's batch time is
      // its (M + Ginter - 1) slots, its data-parallel tail and its optimizer step.
      schedule.optimizer_s = g.ginter == 1 ? stage_optimizer_s : 0.0;
      const StageTime st = stage_time(timeline, schedule);
      const double p2p_mb = g.ginter > 1 ? c.p2p_pipe / static_cast<double>(e.microbatches) : 0.0;
      const double stage_batch_s =
          g.ginter == 1 ? st.batch_s
                        : pipeline_batch_s(st.batch_s - st.data_tail_s, p2p_mb, e.microbatches, g.ginter,
                                           st.data_tail_s) +
                              stage_optimizer_s;
      if (stage == 0 || stage_batch_s > e.batch_s) {
        e.batch_s = stage_batch_s;
        e.compute_s = g.ginter == 1 ? st.compute_s
                                    : st.compute_s * static_cast<double>(e.microbatches) + stage_optimizer_s;
      }
    }
    MemoryBreakdown mem = stage_memory(m, first, last, g, ms, cached);
    if (mem.total_bytes() > e.memory.total_bytes()) e.memory = mem;
    first = last;
  }
  e.comm_s = e.comm.total();
  if (!paper) e.exposed_comm_s = e.batch_s - e.compute_s;
  e.feasible = true;
  if (o.memory_limit && e.memory.total_bytes() > static_cast<double>(t.gpu_memory_bytes))
    return reject(e, Rejection::Memory,
                  fmt::format("memory {:.1f} GiB > {:.1f} GiB", e.memory.total_bytes() / kGiB,
                              static_cast<double>(t.gpu_memory_bytes) / kGiB));
  return e;
}

}  // namespace axonn::test
