// The memoized evaluation of grids; see evaluator.hpp and docs/model.md.
#include "evaluator.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/layer_comm.hpp"

namespace axonn::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Evaluation reject(Evaluation e, Rejection why, std::string reason) {
  e.feasible = false;
  e.rejection = why;
  e.rejected_because = std::move(reason);
  return e;
}

// Everything of a layer the model reads, except its name and pipeline unit.
auto class_key(const model::Layer& l) {
  return std::make_tuple(l.kind, l.k, l.n, l.transposed, l.heads, l.head_dim, l.in_block, l.recomputed, l.bias,
                         l.norm_before, l.gelu_after, l.residual_after, l.loss_after);
}

}  // namespace

Evaluator::Evaluator(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
                     Sharing sharing)
    : m_(m), t_(t), o_(o), matmul_(t) {
  std::map<std::pair<decltype(class_key(model::Layer{})), size_t>, int32_t> index;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const model::Layer& l = m.layers[i];
    const auto key = std::make_pair(class_key(l), sharing == Sharing::None ? i : 0);
    auto [it, added] = index.emplace(key, static_cast<int32_t>(classes_.size()));
    if (added) classes_.push_back({&l, 0, elementwise_rates(t, l)});
    ++classes_[it->second].count;
    class_of_.push_back(it->second);
  }
  // Optimization 4, as the runtime applies it (CommEngine::add_layer): under activation
  // checkpointing, the first N layers with weights inside checkpointed blocks keep their
  // gathered weight for the recompute.
  cached_.assign(m.layers.size(), false);
  if (o.comm_model != CommModel::Paper && o.activation_checkpointing) {
    int64_t n = 0;
    for (size_t i = 0; i < m.layers.size() && n < o.overlap.cache_all_gather_layers; ++i)
      if (m.layers[i].weight_elements() > 0 && m.layers[i].recomputed) cached_[i] = true, ++n;
  }
}

Evaluation Evaluator::evaluate(const topo::Grid& g, Scratch& sc) const {
  const auto& m = m_;
  const auto& t = t_;
  const auto& o = o_;
  Evaluation e;
  e.grid = g;
  const bool paper = o.comm_model == CommModel::Paper;
  if (o.batch_seqs % g.gdata != 0)
    return reject(e, Rejection::Divisibility,
                  fmt::format("batch sequences={} is not divisible by gdata={}", o.batch_seqs, g.gdata));
  const int64_t per_group = o.batch_seqs / g.gdata;
  const int64_t mb =
      paper ? per_group : (o.microbatch_seqs > 0 ? o.microbatch_seqs : default_microbatch_seqs(per_group, g.gz, g.ginter));
  if (mb == 0)
    return reject(e, Rejection::Divisibility,
                  fmt::format("{} sequences per data-parallel group do not split into >= ginter={} "
                              "micro-batches of a multiple of gz={} sequences",
                              per_group, g.ginter, g.gz));
  if (auto why = plan::batch_divisibility_problem(m, g, o.batch_seqs, mb))
    return reject(e, Rejection::Divisibility, *why);
  for (const auto& c : classes_)  // the first failing class holds the first failing layer
    if (!plan::layer_divides(*c.layer, g))
      return reject(e, Rejection::Divisibility, plan::layer_divisibility_problem(*c.layer, g));
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

  // Each distinct layer once.
  const size_t nc = classes_.size();
  sc.costs.resize(nc);
  sc.optimizer_s.resize(nc);
  sc.activation_per_row.resize(nc);
  if (sc.stage.size() < m.layers.size()) sc.stage.resize(m.layers.size());
  if (sc.memory.size() < m.layers.size()) sc.memory.resize(m.layers.size());
  for (size_t c = 0; c < nc; ++c) {
    const model::Layer& l = *classes_[c].layer;
    LayerCommSettings s = ls;
    s.input_gradient = l.kind != model::LayerKind::Embedding;
    LayerCosts& costs = sc.costs[c];
    if (!paper) {
      const ElementwiseTime ew = elementwise_s(classes_[c].rates, l, g, mb, m.seq_len);
      costs.forward_s = matmul_.sum(forward_matmul_list(l, g, mb, m.seq_len)) + ew.forward_s;
      costs.backward_input_s =
          (s.input_gradient ? matmul_.sum(backward_input_matmul_list(l, g, mb, m.seq_len)) : 0.0) + ew.backward_s;
      costs.backward_weight_s = matmul_.sum(backward_weight_matmul_list(l, g, mb, m.seq_len));
      sc.optimizer_s[c] = optimizer_s(classes_[c].rates, l, g);
    }
    costs.comm = layer_collectives(l, g, bw, s);
    sc.activation_per_row[c] = activation_elems_per_row(l, g, m.seq_len);
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
    double stage_optimizer_s = 0;
    size_t n = 0;
    for (size_t i = first; i < last; ++i, ++n) {
      const model::Layer& l = m.layers[i];
      const int32_t k = class_of_[i];
      const bool embedding = l.kind == model::LayerKind::Embedding;
      if (!paper) {
        stage_optimizer_s += sc.optimizer_s[k];
        sc.stage[n] = {&sc.costs[k], LayerRole{l.recomputed, static_cast<bool>(cached_[i]), !embedding, l.unit}};
      }
      sc.memory[n] = {static_cast<double>(l.weight_elements()), sc.activation_per_row[k], l.unit, l.recomputed,
                      static_cast<bool>(cached_[i])};
      if (paper && !(l.kind == model::LayerKind::Linear && l.in_block)) continue;
      const int64_t all_gathers = paper ? 2 : ((cached_[i] || embedding) ? 1 : 2);
      const int64_t forward_all_reduces = paper ? 2 : ((o.activation_checkpointing && l.recomputed) ? 2 : 1);
      if (l.kind != model::LayerKind::Attention)
        c += comm_per_step(sc.costs[k].comm, ls.microbatches, all_gathers, forward_all_reduces);
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
      const StageTime st = stage_time(sc.stage.data(), n, schedule);
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
    const MemoryBreakdown mem = stage_memory(sc.memory.data(), n, m.hidden, m.seq_len, g, ms);
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

}  // namespace axonn::planner
