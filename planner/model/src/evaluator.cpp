// The memoized evaluation of grids; see evaluator.hpp and docs/model.md.
#include "evaluator.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/units.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/planner/layout_costs.hpp"

namespace axonn::planner {
namespace {

Evaluation reject(Evaluation e, Rejection why, std::string reason) {
  e.feasible = false;
  e.rejection = why;
  e.rejected_because = std::move(reason);
  return e;
}

// ZeRO-3: how many times a micro-batch's passes gather a layer's weights over the data
// group: at every fetch that all-gathers over Z (a cached fetch reuses the gathered
// block), at every fetch when Gz = 1; once for the embedding (its backward reads no
// weight); never for layers without weights.
int64_t zero3_fetches(const model::Layer& l, const schedule::PassLayer& pl, const topo::Grid& g) {
  if (l.weight_elements() == 0) return 0;
  if (l.kind == model::LayerKind::Embedding) return 1;
  return (pl.cached && g.gz > 1) ? 1 : 2;
}

// The data group's all-gather against a ring's (a linear all-gather across nodes;
// LayerCommSettings::all_gather_slowdown): ZeRO's all-gathers are half an all-reduce.
double data_all_gather_slowdown(const LayerCommSettings& ls) {
  return ls.all_gather_slowdown[static_cast<int>(topo::Axis::Data)];
}

// One all-gather of a layer's Z-shard over the data group: half the ring all-reduce of
// its gradient (`layer_all_reduce_s`, in grad_reduce_bytes per element), in weight bytes.
double zero3_gather_s(double layer_all_reduce_s, const LayerCommSettings& ls) {
  return 0.5 * layer_all_reduce_s * static_cast<double>(ls.element_bytes) / static_cast<double>(ls.grad_reduce_bytes) *
         data_all_gather_slowdown(ls);
}

// Everything of a layer the model reads, except its name and pipeline unit.
auto class_key(const model::Layer& l) {
  return std::make_tuple(l.kind, l.k, l.n, l.role, l.heads, l.head_dim, l.in_block, l.recomputed, l.bias,
                         l.norm_before, l.gelu_after, l.residual_after, l.loss_after);
}

// A layer's tensor collectives (ring-model ones: not SUMMA's moves, the small ones or the
// sequence ring) in one micro-batch's passes over axis `a` (`forwards` forward passes: 2
// where checkpointing recomputes it), every axis when `a` is empty: the sum of `f` of
// each one's time, so seconds for f(t) = t and calls for f(t) = (t > 0). The weight is
// gathered once per forward and once for the backward (an embedding's once), as with no
// all-gather cache.
template <class F>
double tensor_collectives(const LayerCollectives& c, std::optional<topo::Axis> a, double forwards, bool embedding,
                          F f) {
  double s = 0;
  if (!a || *a == topo::Axis::Z) s += (embedding ? 1.0 : 2.0) * f(c.all_gather_s) + f(c.reduce_scatter_s);
  if (!a || c.a == *a) s += forwards * f(c.forward_all_reduce_s) + f(c.output_grad_gather_s);
  if (!a || c.b == *a) s += f(c.input_grad_all_reduce_s) + forwards * f(c.input_gather_s);
  return s;
}
double tensor_collectives_s(const LayerCollectives& c, std::optional<topo::Axis> a, double forwards, bool embedding) {
  return tensor_collectives(c, a, forwards, embedding, [](double t) { return t; });
}
// SUMMA's moves (2d-broadcast) over axis `a` in one micro-batch's passes, in full,
// hidden or not (docs/model.md section 15): per step the X block's broadcast over Y and
// the W block's over Z in each forward and again in the backward, and their reduces.
double summa_moves_s(const LayerCollectives& c, topo::Axis a, double forwards) {
  const double q = static_cast<double>(c.summa_steps);
  if (a == topo::Axis::Y) return q * ((forwards + 1.0) * c.summa_input_broadcast_s + c.summa_input_reduce_s);
  if (a == topo::Axis::Z) return q * ((forwards + 1.0) * c.summa_weight_broadcast_s + c.summa_weight_reduce_s);
  return 0.0;
}
double tensor_collective_calls(const LayerCollectives& c, double forwards, bool embedding) {
  return tensor_collectives(c, std::nullopt, forwards, embedding, [](double t) { return t > 0 ? 1.0 : 0.0; });
}
// The layer's other blocking calls in those passes: the sequence ring and the small
// collectives (each pays the topology's fixed cost per call).
double ring_and_small_calls(const LayerCollectives& c, double forwards) {
  return forwards * static_cast<double>((c.ring_forward_s > 0) + c.small_forward_calls) +
         static_cast<double>((c.ring_backward_s > 0) + c.small_backward_calls);
}

}  // namespace

std::vector<int64_t> balanced_stage_units(const std::vector<double>& unit_weight, int64_t stages) {
  const auto units = static_cast<int64_t>(unit_weight.size());
  AXONN_ASSERT(stages >= 1 && units >= stages);
  // How many stages of at most `cap` each the greedy packing needs (stopping at stages + 1).
  auto stages_for = [&](double cap) {
    int64_t used = 1;
    double load = 0;
    for (double w : unit_weight) {
      if (load > 0 && load + w > cap) {
        if (++used > stages) return used;  // too many already: how many more does not matter
        load = 0;
      }
      load += w;
    }
    return used;
  };
  double lo = *std::max_element(unit_weight.begin(), unit_weight.end()), hi = 0;
  for (double w : unit_weight) hi += w;
  for (int it = 0; it < 60 && hi - lo > 1e-12 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    (stages_for(mid) <= stages ? hi : lo) = mid;
  }
  // Pack greedily under `hi`, leaving at least one unit for every later stage.
  std::vector<int64_t> out;
  double load = 0;
  int64_t count = 0;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t stages_left = stages - static_cast<int64_t>(out.size());
    const bool must_close = units - u == stages_left - 1 && count > 0;
    if (count > 0 && (load + unit_weight[static_cast<size_t>(u)] > hi || must_close) &&
        static_cast<int64_t>(out.size()) < stages - 1) {
      out.push_back(count);
      load = 0;
      count = 0;
    }
    load += unit_weight[static_cast<size_t>(u)];
    ++count;
  }
  out.push_back(count);
  return out;
}

Evaluator::Evaluator(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
                     Sharing sharing)
    : m_(m),
      own_(topology_for_precision(t, o.precision.compute_bytes)),
      t_(own_ ? *own_ : t),
      o_(o),
      matmul_(t_),
      chain_(is_chain(m)) {
  std::map<std::pair<decltype(class_key(model::Layer{})), size_t>, int32_t> index;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const model::Layer& l = m.layers[i];
    const auto key = std::make_pair(class_key(l), sharing == Sharing::None ? i : 0);
    auto [it, added] = index.emplace(key, static_cast<int32_t>(classes_.size()));
    if (added) classes_.push_back({&l, 0, elementwise_rates(t_, l)});
    ++classes_[it->second].count;
    class_of_.push_back(it->second);
  }
}

Evaluation Evaluator::evaluate(const topo::Grid& g, Scratch& sc,
                               std::vector<std::vector<SimulatedInstruction>>* trace) const {
  return evaluate(g, o_.order, sc, trace);
}

Evaluation Evaluator::evaluate(const topo::Grid& g, const topo::PlacementOrder& order, Scratch& sc,
                               std::vector<std::vector<SimulatedInstruction>>* trace) const {
  const auto& m = m_;
  const auto& t = t_;
  const auto& o = o_;
  Evaluation e;
  e.grid = g;
  e.order = order;
  e.optimizer = o.optimizer;
  const bool paper = o.comm_model == CommModel::Paper;
  if (o.batch_seqs % g.replicas() != 0)
    return reject(e, Rejection::Divisibility,
                  g.sequence > 1 ? fmt::format("batch sequences={} is not divisible by replicas={} (gdata={} / sequence={})",
                                               o.batch_seqs, g.replicas(), g.gdata, g.sequence)
                                 : fmt::format("batch sequences={} is not divisible by gdata={}", o.batch_seqs, g.gdata));
  // Sequences per replica; with sequence parallelism each member runs its chunk of each.
  const int64_t per_group = o.batch_seqs / g.replicas();
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
  if (!o.stage_units.empty() && g.ginter > 1) {
    int64_t sum = 0;
    for (int64_t u : o.stage_units) sum += u < 1 ? m.num_units + 1 : u;
    if (static_cast<int64_t>(o.stage_units.size()) != g.ginter || sum != m.num_units)
      return reject(e, Rejection::Divisibility,
                    fmt::format("--stage-units has {} stages of {} units in all; ginter={} of the model's {}",
                                o.stage_units.size(), sum, g.ginter, m.num_units));
  }
  if (o.optimizer.zero >= 3 && g.gdata > 1 && plan::layout_rules(g.layout).linear_weight_local)
    return reject(e, Rejection::Divisibility,
                  "ZeRO-3 gathers each weight over the data group at its fetch, and the 2d-broadcast layout's linear "
                  "layers have no fetch: SUMMA broadcasts the rank's own block (--zero 0, 1 or 2, or --tensor-mode 2d)");
  if (o.optimizer.zero >= 3 && g.ginter > 1 && g.gdata > 1 && o.pipeline_schedule == plan::PipelineSchedule::MessageDriven)
    return reject(e, Rejection::Divisibility,
                  "ZeRO-3 gathers weights over the data group in every pass, and the message-driven pipeline orders "
                  "a replica's passes by message arrival (--pipeline-schedule 1f1b or gpipe)");
  e.microbatch_seqs = mb;
  e.microbatches = per_group / mb;

  const AxisBandwidths bw =
      o.placement_aware
          ? placement_aware_bandwidths(t, g, order, paper ? BandwidthRule::Strict : BandwidthRule::Straddle)
          : placement_agnostic_bandwidths(t, g);

  LayerCommSettings ls;
  ls.tokens = mb * m.seq_len / g.sequence;
  ls.microbatches = paper ? 1 : e.microbatches;
  ls.element_bytes = paper ? 2 : o.precision.compute_bytes;
  ls.grad_reduce_bytes = paper ? 4 : o.precision.grad_reduce_bytes;
  if (!paper)
    ls.latency_s = o.placement_aware
                       ? placement_aware_latencies(t, g, order, BandwidthRule::Straddle)
                       : placement_agnostic_latencies(t);
  ls.small_collectives = !paper;
  if (o.placement_aware && !paper && !t.nonblocking.rings()) {  // the cluster's non-ring all-gather
    const auto per_node = members_per_node(t, g, order, BandwidthRule::Straddle);
    for (int i = 0; i < topo::kNumAxes; ++i)
      ls.all_gather_slowdown[i] =
          all_gather_slowdown(t.nonblocking.all_gather, g.size(static_cast<topo::Axis>(i)), per_node[i]);
  }
  if (plan::layout_rules(g.layout).linear_weight_local && !paper)  // SUMMA's broadcasts and reduces
    for (topo::Axis a : {topo::Axis::Y, topo::Axis::Z})
      ls.one_way_bytes_per_s[static_cast<int>(a)] =
          one_way_group_bandwidth(t, g, order, o.placement_aware, axis_bandwidth(bw, a), a);
  const double sync_wait_fraction = paper ? 0.0 : t.sync_wait_fraction(g.gx * g.gy * g.gz * g.sequence);
  const double sync_call_s = paper ? 0.0 : t.collective_call_s;
  // The data group's first collective of a step waits for its last member too (docs/model.md
  // section 8, "The data group's wait"): f of the number of its members that keep their own
  // pace (a sequence group's members keep one: its rings join them in every layer) times
  // the stage's compute before its tail, since no collective joins them in between.
  const int64_t data_paces = g.gdata / std::max<int64_t>(1, g.sequence);
  const double data_sync_wait_fraction = paper || data_paces < 2 ? 0.0 : t.sync_wait_fraction(data_paces);
  // The sequence group's ring: the data axis's innermost members, eq. 10 with the data
  // axis's ip. Of the rings sharing a node's link, those of other pipeline stages are
  // not in step with it: the bandwidth is that left by its own stage's, and the other
  // stages' share is added below, once the compute they alternate with is known.
  int64_t ring_stages = 1;
  if (g.sequence > 1) {
    const int64_t ip = topo::RankLayout(g, order).inner_size(topo::Axis::Data);
    if (o.placement_aware) {
      ring_stages = stages_sharing_data_link(t, g, order, g.sequence);
      ls.sequence_bw = group_bandwidth(t, ip, g.sequence, BandwidthRule::Straddle) * static_cast<double>(ring_stages);
      if (!paper) ls.sequence_latency_s = group_latency(t, ip, g.sequence, BandwidthRule::Straddle);
    } else {
      ls.sequence_bw = axis_bandwidth(bw, topo::Axis::Data);
      ls.sequence_latency_s = axis_latency(ls.latency_s, topo::Axis::Data);
    }
  }

  // Each distinct layer once.
  const size_t nc = classes_.size();
  sc.costs.resize(nc);
  sc.optimizer_s.resize(nc);
  sc.activation_per_row.resize(nc);
  if (sc.pass.size() < m.layers.size()) {
    sc.pass.resize(m.layers.size());
    sc.pass_costs.resize(m.layers.size());
    sc.memory.resize(m.layers.size());
  }
  const double accumulation_share = o.optimizer.zero >= 2 ? 1.0 / static_cast<double>(g.gdata) : 1.0;
  // Time-sliced ranks (docs/model.md section 2, "Tensor rings out of step"): of eq. 10's
  // min(gpn, ip) rings of a tensor axis across nodes, those of other stages or replicas
  // (an order placing the pipeline or data axis inside this one) drift out of step with
  // this group's; those joined to it by inner tensor axes stay in step
  // (tensor_rings_on_link). The collectives are costed both with the link to the rings in
  // step (alone_bw) and under eq. 10, and mixed below. drifting_blocks: the blocks of
  // rings in step on the link for such an axis, 0 for the others.
  // SUMMA's one-way moves (2d-broadcast) over such an axis are mixed the same way: eq.
  // 10's count divides their one-way bandwidth (one_way_group_bandwidth) as it does the
  // ring's.
  std::array<int64_t, topo::kNumAxes> drifting_blocks{};
  AxisBandwidths alone_bw = bw;
  LayerCommSettings alone_ls = ls;
  if (o.placement_aware && !paper && t.ranks_time_sliced()) {
    for (topo::Axis a : {topo::Axis::X, topo::Axis::Y, topo::Axis::Z}) {
      const int64_t blocks = tensor_rings_on_link(t, g, order, a).blocks();
      if (blocks <= 1) continue;
      drifting_blocks[static_cast<int>(a)] = blocks;
      alone_bw[static_cast<int>(a)] = axis_bandwidth(bw, a) * static_cast<double>(blocks);
      alone_ls.one_way_bytes_per_s[static_cast<int>(a)] *= static_cast<double>(blocks);  // 0 stays 0
    }
  }
  const bool any_out_of_step =
      std::any_of(drifting_blocks.begin(), drifting_blocks.end(), [](int64_t r) { return r > 0; });
  if (any_out_of_step) sc.alone.resize(nc), sc.summa_products.resize(nc);
  sc.out_of_step_share.fill(0.0);
  for (size_t c = 0; c < nc; ++c) {
    const model::Layer& l = *classes_[c].layer;
    LayerCommSettings s = ls;
    s.input_gradient = l.kind != model::LayerKind::Embedding;
    LayerCosts& costs = sc.costs[c];
    costs = LayerCosts{};  // the scratch holds the previous candidate's (another layout's fields too)
    double forward_matmul_s = 0, weight_matmul_s = 0;  // the products SUMMA's moves overlap
    if (!paper) {
      const ElementwiseTime ew = elementwise_s(classes_[c].rates, l, g, mb, m.seq_len);
      forward_matmul_s = matmul_.sum(forward_matmul_list(l, g, mb, m.seq_len));
      weight_matmul_s = matmul_.sum(backward_weight_matmul_list(l, g, mb, m.seq_len));
      costs.forward_s = forward_matmul_s + ew.forward_s;
      costs.backward_input_s =
          (s.input_gradient ? matmul_.sum(backward_input_matmul_list(l, g, mb, m.seq_len)) : 0.0) + ew.backward_s;
      // dW, then its addition into the gradient buffer (once per backward pass); under
      // ZeRO-2/3 into the owned block only, after the data reduce-scatter (section 11).
      costs.backward_weight_s =
          weight_matmul_s + gradient_accumulation_s(classes_[c].rates, l, g) * accumulation_share;
      sc.optimizer_s[c] = optimizer_s(classes_[c].rates, l, g);
    }
    costs.comm = layer_collectives(l, g, bw, s);
    if (any_out_of_step) {
      alone_ls.input_gradient = s.input_gradient;
      sc.alone[c] = layer_collectives(l, g, alone_bw, alone_ls);
      sc.summa_products[c] = {forward_matmul_s, weight_matmul_s};
    }
    if (costs.comm.summa_steps > 0) {  // 2d-broadcast: its moves beside its products
      costs.summa_forward_exposed_s = summa_forward_exposed_s(costs.comm, forward_matmul_s);
      costs.summa_backward_exposed_s = summa_backward_exposed_s(costs.comm, weight_matmul_s);
    }
    costs.comm.sync_wait_fraction = sync_wait_fraction;
    costs.comm.sync_call_s = sync_call_s;
    sc.activation_per_row[c] = layer_activations(l, g, m.seq_len);
  }
  if (any_out_of_step) {
    // Per axis, over a micro-batch's passes through the model (from the eq. 10 costs of
    // every axis, so that no axis's share depends on another's): its transfers alone on
    // the link, and the rest of the passes (compute, the sync wait and each blocking
    // call's fixed cost, the other axes' collectives, the small ones, SUMMA's exposed
    // moves, the sequence ring, and the axis's own latency, which eq. 10 does not
    // change). Each of its collectives then pays the other rings for their share.
    std::array<double, topo::kNumAxes>& share = sc.out_of_step_share;
    for (topo::Axis a : {topo::Axis::X, topo::Axis::Y, topo::Axis::Z}) {
      const int64_t blocks = drifting_blocks[static_cast<int>(a)];
      if (blocks == 0) continue;
      double alone_s = 0, eq10_s = 0, rest_s = 0;
      for (size_t i = 0; i < m.layers.size(); ++i) {
        const size_t c = static_cast<size_t>(class_of_[i]);
        const LayerCosts& k = sc.costs[c];
        const LayerCollectives& lc = k.comm;
        const bool embedding = m.layers[i].kind == model::LayerKind::Embedding;
        const double forwards = o.activation_checkpointing && m.layers[i].recomputed ? 2.0 : 1.0;
        const double rings_s = tensor_collectives_s(lc, a, forwards, embedding);
        // SUMMA's moves over the axis count in full, as if they blocked (like the rings);
        // what the model leaves of the layer's exposed moves beyond them stays in the rest.
        const double moves_s = summa_moves_s(lc, a, forwards);
        const double mine = rings_s + moves_s;
        const double compute = forwards * k.forward_s + k.backward_input_s + k.backward_weight_s;
        const double calls = tensor_collective_calls(lc, forwards, embedding) + ring_and_small_calls(lc, forwards);
        const double summa_exposed_s = forwards * k.summa_forward_exposed_s + k.summa_backward_exposed_s;
        alone_s += tensor_collectives_s(sc.alone[c], a, forwards, embedding) + summa_moves_s(sc.alone[c], a, forwards);
        eq10_s += mine;
        rest_s += compute * (1.0 + lc.sync_wait_fraction) + calls * lc.sync_call_s +
                  tensor_collectives_s(lc, std::nullopt, forwards, embedding) - rings_s +
                  forwards * (lc.small_forward_s + lc.ring_forward_s) + lc.small_backward_s + lc.ring_backward_s +
                  std::max(0.0, summa_exposed_s - moves_s);
      }
      // Eq. 10 moves the same bytes `blocks` times as slowly as the rings in
      // step alone: the difference is transfer time alone, what is left of alone_s the
      // latency.
      const double transfers_s = (eq10_s - alone_s) / static_cast<double>(blocks - 1);
      const double latency_s = std::max(0.0, alone_s - transfers_s);
      share[static_cast<int>(a)] =
          out_of_step_share(transfers_s, static_cast<double>(blocks - 1), rest_s + latency_s);
    }
    for (topo::Axis a : {topo::Axis::X, topo::Axis::Y, topo::Axis::Z}) {
      if (drifting_blocks[static_cast<int>(a)] == 0) continue;
      const double d = share[static_cast<int>(a)];
      for (size_t c = 0; c < nc; ++c) {
        LayerCollectives& e = sc.costs[c].comm;
        const LayerCollectives& alone = sc.alone[c];
        auto mix = [d](double& v, double v_alone) { v = v_alone + d * (v - v_alone); };
        if (a == topo::Axis::Z) mix(e.all_gather_s, alone.all_gather_s), mix(e.reduce_scatter_s, alone.reduce_scatter_s);
        if (e.a == a) mix(e.forward_all_reduce_s, alone.forward_all_reduce_s), mix(e.output_grad_gather_s, alone.output_grad_gather_s);
        if (e.b == a) mix(e.input_grad_all_reduce_s, alone.input_grad_all_reduce_s), mix(e.input_gather_s, alone.input_gather_s);
        if (a == topo::Axis::Y)
          mix(e.summa_input_broadcast_s, alone.summa_input_broadcast_s), mix(e.summa_input_reduce_s, alone.summa_input_reduce_s);
        if (a == topo::Axis::Z)
          mix(e.summa_weight_broadcast_s, alone.summa_weight_broadcast_s),
              mix(e.summa_weight_reduce_s, alone.summa_weight_reduce_s);
      }
    }
    for (size_t c = 0; c < nc; ++c) {  // SUMMA's exposed moves, from the mixed ones
      LayerCosts& k = sc.costs[c];
      if (k.comm.summa_steps <= 0) continue;
      k.summa_forward_exposed_s = summa_forward_exposed_s(k.comm, sc.summa_products[c].first);
      k.summa_backward_exposed_s = summa_backward_exposed_s(k.comm, sc.summa_products[c].second);
    }
  }
  if (ring_stages > 1) {
    // The other stages' rings on the link (docs/model.md section 13): each on it for its
    // transfers' share of a micro-batch's passes through the model; the rest of those
    // passes (compute, the small collectives, each shift's latency and each blocking
    // call's fixed cost) leaves the link to others.
    const double forward_latency_s =
        static_cast<double>(ring_self_attention_forward_shifts(g.sequence)) * ls.sequence_latency_s;
    const double backward_latency_s =
        static_cast<double>(ring_self_attention_backward_shifts(g.sequence)) * ls.sequence_latency_s;
    double transfers_s = 0, rest_s = 0;
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const LayerCosts& k = sc.costs[static_cast<size_t>(class_of_[i])];
      const LayerCollectives& lc = k.comm;
      const double forwards = o.activation_checkpointing && m.layers[i].recomputed ? 2.0 : 1.0;
      const double f_latency = lc.ring_forward_s > 0 ? forward_latency_s : 0.0;
      const double b_latency = lc.ring_backward_s > 0 ? backward_latency_s : 0.0;
      const double calls = ring_and_small_calls(lc, forwards);
      transfers_s += forwards * (lc.ring_forward_s - f_latency) + (lc.ring_backward_s - b_latency);
      rest_s += forwards * (k.forward_s + lc.small_forward_s + f_latency) + k.backward_input_s + k.backward_weight_s +
                lc.small_backward_s + b_latency + calls * lc.sync_call_s;
    }
    if (transfers_s > 0) {
      // A stage runs its passes for M of the M + S - 1 micro-batch slots of a pipelined
      // step (the rest is its fill and drain), so the other stages' rings are on the
      // link for that share of the passes' share.
      const double mbs = static_cast<double>(e.microbatches);
      const double passes_share = mbs / (mbs + static_cast<double>(g.ginter - 1));
      const double others = static_cast<double>(ring_stages - 1) * passes_share;
      const double factor = staggered_ring_s(transfers_s, others, rest_s) / transfers_s;
      for (LayerCosts& k : sc.costs) {  // the transfers slow down, not the latency
        if (k.comm.ring_forward_s > 0)
          k.comm.ring_forward_s = forward_latency_s + factor * (k.comm.ring_forward_s - forward_latency_s);
        if (k.comm.ring_backward_s > 0)
          k.comm.ring_backward_s = backward_latency_s + factor * (k.comm.ring_backward_s - backward_latency_s);
      }
    }
  }

  // The pipeline: units per stage (given, else balanced by predicted busy time), and
  // the checkpoint interval.
  if (g.ginter == 1) {
    e.stage_units.assign(1, m.num_units);
  } else if (!o.stage_units.empty()) {
    e.stage_units = o.stage_units;
  } else {
    sc.unit_weight.assign(static_cast<size_t>(m.num_units), 0.0);
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const LayerCosts& k = sc.costs[static_cast<size_t>(class_of_[i])];
      const double recompute = o.activation_checkpointing && m.layers[i].recomputed ? 2.0 : 1.0;
      sc.unit_weight[static_cast<size_t>(m.layers[i].unit)] +=
          recompute * (k.forward_s + k.comm.input_gather_s + k.comm.forward_all_reduce_s + k.summa_forward_exposed_s) +
          k.backward_input_s + k.backward_weight_s + k.summa_backward_exposed_s;
    }
    e.stage_units = balanced_stage_units(sc.unit_weight, g.ginter);
  }
  e.checkpoint_interval = o.checkpoint_interval > 0
                              ? o.checkpoint_interval
                              : schedule::axonn_checkpoint_interval(m.num_units / g.ginter, m.num_units);
  const int64_t limit = o.pipeline_limit > 0 ? o.pipeline_limit : g.ginter;
  // The stages whose data all-reduces cross one node's link (docs/model.md section 10).
  const int64_t data_link_stages =
      o.placement_aware && !paper && g.gdata > 1 ? stages_sharing_data_link(t, g, order, g.gdata) : 1;

  MemorySettings ms;
  ms.microbatch_seqs = mb;
  ms.activation_checkpointing = o.activation_checkpointing;
  ms.overlap = o.overlap;
  ms.precision = o.precision;
  ms.optimizer = o.optimizer;
  ms.chain = chain_;

  schedule::PassSettings ps;
  ps.overlap = o.overlap;
  ps.checkpointing = o.activation_checkpointing;
  ps.data_parallel = schedule::data_parallel_in_backward(g, o.optimizer);

  // One message across each stage boundary (a boundary inside a node is faster): each
  // GPU sends its (rows/Gz) x (hidden/Gx) shard of the activation (forward) or of its
  // gradient (backward).
  sc.link_s.resize(static_cast<size_t>(g.ginter - 1));
  if (g.ginter > 1) {
    const double message_bytes = static_cast<double>(ls.element_bytes) * static_cast<double>(ls.tokens) *
                                 static_cast<double>(m.hidden) /
                                 static_cast<double>(layout_costs(g.layout).activation_shards(g) * g.gz);
    for (int64_t b = 0; b + 1 < g.ginter; ++b)
      sc.link_s[static_cast<size_t>(b)] =
          point_to_point_s(message_bytes,
                           pipeline_p2p_bandwidth(t, g, order, o.placement_aware && !paper,
                                                  axis_bandwidth(bw, topo::Axis::Pipe), b),
                           paper ? 0.0
                                 : t.collective_latency(o.placement_aware &&
                                                        !pipeline_boundary_crosses_nodes(t, g, order, b)));
  }

  // A stage whose layers are those of the one before it (the same classes, the same
  // pass roles) has its passes and, with as many micro-batches in flight, its memory.
  auto same_as = [&](size_t first, size_t previous, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (class_of_[first + i] != class_of_[previous + i] || !(sc.pass[first + i] == sc.pass[previous + i]))
        return false;
    return true;
  };
  size_t memory_previous = 0, memory_previous_n = 0;
  int64_t memory_previous_inflight = -1;
  MemoryBreakdown memory_previous_stage;

  sc.stages.resize(static_cast<size_t>(g.ginter));
  sc.step_small_s.resize(static_cast<size_t>(g.ginter));
  size_t comm_stage = 0;  // the stage whose breakdown e.comm is
  int64_t small_calls = 0;
  int64_t first_unit = 0;
  size_t first = 0;
  for (int64_t stage = 0; stage < g.ginter; ++stage) {
    const int64_t units = e.stage_units[static_cast<size_t>(stage)];
    size_t last = first;
    while (last < m.layers.size() && m.layers[last].unit < first_unit + units) ++last;
    const size_t n = last - first;
    plan::CommBreakdown c;
    double zero3_gathers = 0;  // ZeRO-3: the data all-gathers of the weights, per step
    double vectors = 0;        // the vectors' gradient elements on one GPU
    double summa_exposed = 0;  // 2d-broadcast: SUMMA's exposed moves, per step
    for (size_t i = first; i < last; ++i) {
      const model::Layer& l = m.layers[i];
      sc.pass[i] = schedule::pass_layer(l, o.activation_checkpointing, e.checkpoint_interval, first_unit, g.layout);
      sc.pass[i].grad_bytes = schedule::gradient_shard_bytes(l, g, ls.grad_reduce_bytes);
    }
    schedule::mark_cached(sc.pass.data() + first, n, paper ? 0 : o.overlap.cache_all_gather_layers);
    for (size_t i = first; i < last; ++i) {
      const model::Layer& l = m.layers[i];
      const int32_t k = class_of_[i];
      const schedule::PassLayer& pl = sc.pass[i];
      sc.pass_costs[i] = &sc.costs[static_cast<size_t>(k)];
      sc.memory[i] = {static_cast<double>(l.weight_elements()), &sc.activation_per_row[static_cast<size_t>(k)],
                      pl.segment, l.recomputed, pl.cached, pl.grad_bytes, pl.local_weight};
      vectors += sc.costs[static_cast<size_t>(k)].comm.vector_elements;
      if (paper && !(l.kind == model::LayerKind::Linear && l.in_block)) continue;
      const bool embedding = l.kind == model::LayerKind::Embedding;
      const int64_t all_gathers = paper ? 2 : ((pl.cached || embedding) ? 1 : 2);
      const int64_t forward_all_reduces = paper ? 2 : ((o.activation_checkpointing && l.recomputed) ? 2 : 1);
      const LayerCollectives& lc = sc.costs[static_cast<size_t>(k)].comm;
      c += comm_per_step(lc, ls.microbatches, all_gathers, forward_all_reduces);
      const LayerCosts& kc = sc.costs[static_cast<size_t>(k)];
      summa_exposed += static_cast<double>(ls.microbatches) *
                       (static_cast<double>(forward_all_reduces) * kc.summa_forward_exposed_s + kc.summa_backward_exposed_s);
      if (stage == 0)
        small_calls += ls.microbatches * (forward_all_reduces * lc.small_forward_calls + lc.small_backward_calls);
      if (o.optimizer.zero >= 3)
        zero3_gathers += static_cast<double>(ls.microbatches * zero3_fetches(l, pl, g)) *
                         zero3_gather_s(sc.costs[static_cast<size_t>(k)].comm.data_all_reduce_s, ls);
    }
    // ZeRO-2 reduce-scatters every micro-batch's gradients (half an all-reduce each) and
    // all-gathers once: (M + 1)/2 all-reduces' worth; ZeRO-3 gathers each layer's
    // weights in every pass that fetches it instead (docs/model.md section 11).
    // ZeRO-1 reduce-scatters and all-gathers once. The all-gathers take the data group's
    // slowdown (1 for a ring).
    const double gather = data_all_gather_slowdown(ls);
    if (o.optimizer.zero >= 3) c.ar_data = 0.5 * static_cast<double>(ls.microbatches) * c.ar_data + zero3_gathers;
    else if (o.optimizer.zero >= 2) c.ar_data *= 0.5 * (static_cast<double>(ls.microbatches) + gather);
    else if (o.optimizer.zero == 1) c.ar_data *= 0.5 * (1.0 + gather);
    // The small collectives the stage issues once per step, after its last backward.
    const StepCollectives once =
        paper ? StepCollectives{}
              : step_small_collectives(vectors, ls.grad_reduce_bytes, g, bw, ls.latency_s, o.optimizer);
    sc.step_small_s[static_cast<size_t>(stage)] = once.seconds;
    c.small += once.seconds;
    if (stage == 0) small_calls += once.calls;
    if (g.ginter > 1) {
      // One activation forward (unless last stage) and one gradient backward (unless
      // first) per micro-batch.
      const double next_s = stage < g.ginter - 1 ? sc.link_s[static_cast<size_t>(stage)] : 0.0;
      const double previous_s = stage > 0 ? sc.link_s[static_cast<size_t>(stage - 1)] : 0.0;
      c.p2p_pipe = static_cast<double>(e.microbatches) * (next_s + previous_s);
    }
    if (c.total() > e.comm.total() || stage == 0)
      e.comm = c, e.summa_exposed_s = summa_exposed, comm_stage = static_cast<size_t>(stage);
    ms.inflight_microbatches =
        schedule::inflight_microbatches(o.pipeline_schedule, stage, g.ginter, e.microbatches, limit);
    ms.final_stage = stage == g.ginter - 1;
    const bool reuse = stage > 0 && n == memory_previous_n && ms.inflight_microbatches == memory_previous_inflight &&
                       !ms.final_stage && same_as(first, memory_previous, n);
    const MemoryBreakdown mem =
        reuse ? memory_previous_stage : stage_memory(sc.memory.data() + first, n, m.hidden, m.seq_len, g, ms);
    memory_previous = first, memory_previous_n = n, memory_previous_inflight = ms.inflight_microbatches;
    memory_previous_stage = mem;
    if (mem.total_bytes() > e.memory.total_bytes()) e.memory = mem;
    first = last;
    first_unit += units;
  }
  e.comm_s = e.comm.total();
  e.small_calls = small_calls;
  // Over the memory limit: rejected before its time is simulated.
  if (o.memory_limit && e.memory.total_bytes() > static_cast<double>(t.gpu_memory_bytes))
    return reject(e, Rejection::Memory,
                  "memory " + memory_over_limit(e.memory.total_bytes(), static_cast<double>(t.gpu_memory_bytes)));

  // Passes (same_as, above): a GPT's inner stages are simulated once.
  first = 0;
  first_unit = 0;
  size_t previous = 0, previous_n = 0;
  for (int64_t stage = 0; stage < g.ginter && !paper; ++stage) {
    const int64_t units = e.stage_units[static_cast<size_t>(stage)];
    size_t last = first;
    while (last < m.layers.size() && m.layers[last].unit < first_unit + units) ++last;
    const size_t n = last - first;
    const bool repeat = stage > 0 && n == previous_n && same_as(first, previous, n);
    previous = first;
    previous_n = n;
    if (repeat) {
      sc.stages[static_cast<size_t>(stage)] = sc.stages[static_cast<size_t>(stage - 1)];
      first = last;
      first_unit += units;
      continue;
    }
    double stage_optimizer_s = 0;
    for (size_t i = first; i < last; ++i) stage_optimizer_s += sc.optimizer_s[static_cast<size_t>(class_of_[i])];
    {
      auto run = [&](schedule::PassKind kind) {
        return simulate_pass(sc.pass.data() + first, sc.pass_costs.data() + first, n, ps, kind, sc.prefetch_done);
      };
      const PassTime f = run(schedule::PassKind::Forward), b = run(schedule::PassKind::Backward),
                     lb = run(schedule::PassKind::LastBackward);
      StagePasses& sp = sc.stages[static_cast<size_t>(stage)];
      sp.forward_s = f.duration_s;
      sp.backward_s = b.duration_s;
      sp.last_backward_s = lb.duration_s;
      sp.forward_compute_s = f.compute_s;
      sp.backward_compute_s = b.compute_s;
      sp.last_backward_compute_s = lb.compute_s;
      const double mbs = static_cast<double>(e.microbatches);
      sp.sync_wait_s = mbs * f.sync_wait_s + (mbs - 1) * b.sync_wait_s + lb.sync_wait_s;
      const double fifo_exposed = std::max(0.0, lb.data_done_s - lb.duration_s);  // the FIFO after the pass
      sp.tail_link_s = fifo_exposed + lb.unbucketed_data_s;
      sp.tail_s = sp.tail_link_s + sc.step_small_s[static_cast<size_t>(stage)];
      if (data_sync_wait_fraction > 0 && o.optimizer.zero < 2) {
        // The step's first data collective: the reducer's first bucket (its FIFO ends that
        // much later), its unbucketed all-reduce, or the optimizer phase's first collective
        // (ZeRO-1, offloaded). ZeRO-2 and 3 reduce inside the passes: not charged.
        const double wait =
            data_sync_wait_fraction * (mbs * f.compute_s + (mbs - 1) * b.compute_s + lb.compute_s);
        const bool fifo = !o.optimizer.reduces_data_parallel() && lb.data_done_s > 0;
        sp.tail_s += fifo ? std::max(0.0, lb.data_done_s + wait - lb.duration_s) - fifo_exposed : wait;
        sp.sync_wait_s += wait;
      }
      sp.tail_link_stages = data_link_stages;
      sp.optimizer_s = stage_optimizer_s;
      if (o.optimizer.reduces_data_parallel()) {  // docs/model.md section 11
        // The stage's data all-reduce as section 3 costs it, one collective per layer;
        // the optimizer phase issues its own collectives (chunks, or one reduce-scatter
        // and one all-gather), so each layer's latency term is taken out and each of
        // those collectives pays one.
        const double per_call = ring_all_reduce_s(g.gdata, 0.0, 1.0, axis_latency(ls.latency_s, topo::Axis::Data));
        double local = 0, allreduce = 0, reduced_layers = 0;
        for (size_t i = first; i < last; ++i) {
          local += static_cast<double>(m.layers[i].weight_elements()) / static_cast<double>(g.gx * g.gy * g.gz);
          const double layer_s = sc.costs[static_cast<size_t>(class_of_[i])].comm.data_all_reduce_s;
          if (g.gdata > 1 && layer_s > 0) {
            allreduce += layer_s - per_call;
            reduced_layers += 1;
          }
        }
        // Adam on the owned block: 1/Gdata of the elements under ZeRO. Offloaded, each
        // step moves its master and two moments (12 bytes per element) in and out.
        const double share = o.optimizer.zero > 0 ? 1.0 / static_cast<double>(g.gdata) : 1.0;
        const double copies =
            o.optimizer.offload && t.host_link_bytes_per_s > 0 ? 24 * share * local / t.host_link_bytes_per_s : 0;
        const double update = share * stage_optimizer_s + copies;
        if (o.optimizer.zero >= 2) {
          // Each backward pass reduce-scatters its layers' gradients (one call each,
          // counted exposed); the phase updates, then all-gathers: the halves of the ring.
          const double reduce_scatter = 0.5 * (allreduce + reduced_layers * per_call);
          sp.backward_s += reduce_scatter;
          sp.last_backward_s += reduce_scatter;
          if (o.optimizer.zero >= 3) {
            // No all-gather after the update: each fetch gathers its layer, blocking
            // (exposed): the forward's one per layer, the backward's the rest.
            double forward = 0, backward = 0;
            for (size_t i = first; i < last; ++i) {
              const int64_t fetches = zero3_fetches(m.layers[i], sc.pass[i], g);
              const double one = zero3_gather_s(sc.costs[static_cast<size_t>(class_of_[i])].comm.data_all_reduce_s, ls);
              forward += fetches > 0 ? one : 0.0;
              backward += static_cast<double>(std::max<int64_t>(0, fetches - 1)) * one;
            }
            sp.forward_s += forward;
            sp.backward_s += backward;
            sp.last_backward_s += backward;
          } else {
            const double gather = allreduce * data_all_gather_slowdown(ls);
            sp.tail_link_s += 0.5 * gather;
            sp.tail_s += 0.5 * (gather + per_call);
          }
        } else if (o.optimizer.zero > 0) {
          // Reduce-scatter, update, all-gather: the ring all-reduce's two halves, in turn.
          const double halves = 0.5 * allreduce * (1.0 + data_all_gather_slowdown(ls));
          sp.tail_link_s += halves;
          sp.tail_s += halves + per_call;
        } else {  // the offloaded phase: its transfers keep eq. 10's count
          const int64_t k = o.optimizer.allreduce_coarsening;
          const auto chunks =
              k > 0 ? static_cast<int64_t>(std::ceil(local / static_cast<double>(k * o.optimizer.bucket_elements))) : 1;
          sp.tail_s += offloaded_optimizer_phase_s(allreduce, update, chunks, k > 0, per_call) - update;  // exposed
        }
        sp.optimizer_s = update;
      }
    }
    first = last;
    first_unit += units;
  }
  if (!paper) {
    e.comm.sync_wait = sc.stages[comm_stage].sync_wait_s;
    e.comm_s = e.comm.total();
    if (g.ginter == 1 && !trace) {  // one stage: its micro-batches one after another
      const StagePasses& p = sc.stages[0];
      const double mbs = static_cast<double>(e.microbatches);
      e.batch_s = (mbs - 1) * (p.forward_s + p.backward_s) + p.forward_s + p.last_backward_s + p.tail_s + p.optimizer_s;
      e.compute_s = mbs * p.forward_compute_s + (mbs - 1) * p.backward_compute_s + p.last_backward_compute_s +
                    p.optimizer_s;
    } else {
      const bool lend = o.placement_aware && t.ranks_time_sliced() && t.waiting_share.measured();
      double speedup = 1;
      if (lend) {
        sc.boundary_share.resize(static_cast<size_t>(g.ginter - 1));
        for (int64_t b = 0; b + 1 < g.ginter; ++b)
          sc.boundary_share[static_cast<size_t>(b)] =
              t.waiting_share.of(pipeline_boundary_crosses_nodes(t, g, order, b));
        speedup = lent_core_speedup(sc.stages, sc.link_s, sc.boundary_share, t.cores_per_rank, o.pipeline_schedule,
                                    e.microbatches, limit, sc.lent, sc.pipeline);
      }
      const std::vector<StagePasses>& stages = speedup > 1 ? sc.lent : sc.stages;
      const PipelineTime pt =
          simulate_pipeline(stages, sc.link_s, o.pipeline_schedule, e.microbatches, limit, trace, &sc.pipeline);
      e.lent_core_speedup = speedup;
      e.batch_s = pt.batch_s;
      e.compute_s = pt.compute_s;
      e.bubble_fraction = pt.bubble_fraction;
      if (data_link_stages > 1) {  // the breakdown's stage: its data transfers as shared
        const StagePasses& p = sc.stages[comm_stage];
        const double saved = p.tail_s - sc.pipeline.tail_s(static_cast<int64_t>(comm_stage));
        e.comm.ar_data = std::max(0.0, e.comm.ar_data - saved);
        e.comm_s = e.comm.total();
      }
    }
  }
  if (!paper) e.exposed_comm_s = e.batch_s - e.compute_s;
  e.feasible = true;
  return e;
}

std::vector<schedule::PassLayer> Evaluator::stage_pass_layers(const Evaluation& e, const Scratch& s,
                                                             int64_t stage) const {
  const auto layouts = schedule::stage_layouts(m_, e.stage_units);
  const auto& l = layouts[static_cast<size_t>(stage)];
  return {s.pass.begin() + static_cast<long>(l.first_layer), s.pass.begin() + static_cast<long>(l.last_layer)};
}

}  // namespace axonn::planner
