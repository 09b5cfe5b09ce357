// L2L's cost; see axonn/planner/l2l_model.hpp and docs/model.md section 12.
#include "axonn/planner/l2l_model.hpp"

#include <algorithm>

#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/collectives.hpp"
#include "axonn/planner/compute_model.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::planner {

using schedule::L2LOp;

L2LTime l2l_step_time(const std::vector<schedule::L2LInstruction>& program, const std::vector<L2LUnitCost>& units,
                      bool clipping) {
  L2LTime out;
  double now = 0, link_in = 0, link_out = 0, server = 0;
  std::vector<double> arrives(units.size(), -1);  // when a unit's copy reaches the device
  std::vector<std::pair<double, size_t>> pushed;  // (when it reached the host, unit), in push order
  auto copy = [&](size_t l) {
    link_in = std::max(link_in, now) + units[l].fetch_s;
    arrives[l] = link_in;
  };
  for (const auto& in : program) {
    const auto l = static_cast<size_t>(std::max(in.unit, 0));
    switch (in.op) {
      case L2LOp::Prefetch: copy(l); break;
      case L2LOp::Fetch:
        if (arrives[l] < 0) copy(l);
        out.fetch_wait_s += std::max(0.0, arrives[l] - now);
        now = std::max(now, arrives[l]);
        arrives[l] = -1;
        break;
      case L2LOp::Forward:
        now += units[l].forward_s;
        out.compute_s += units[l].forward_s;
        break;
      case L2LOp::Backward:
        now += units[l].forward_s + units[l].backward_s;
        out.compute_s += units[l].forward_s + units[l].backward_s;
        break;
      case L2LOp::Release: break;
      case L2LOp::Push:
        link_out = std::max(link_out, now) + units[l].push_s;
        pushed.emplace_back(link_out, l);
        break;
      case L2LOp::WaitUpdates: {
        // The server, in push order: each unit's reduction, then (without clipping) its
        // update; with clipping the updates follow the last reduction.
        for (const auto& [at, unit] : pushed) {
          server = std::max(server, at) + units[unit].reduce_s;
          if (!clipping) server += units[unit].update_s;
        }
        if (clipping)
          for (const auto& p : pushed) server += units[p.second].update_s;
        out.server_tail_s = std::max(0.0, server - now);
        now = std::max(now, server);
        break;
      }
    }
  }
  out.batch_s = now;
  return out;
}

double l2l_equation6_ratio(int64_t u, double forward_s, double transfer_s) {
  const double uu = static_cast<double>(u);
  return uu * (4 * forward_s + 2 * transfer_s) / (4 * uu * forward_s + 2 * transfer_s);
}

L2LEvaluation evaluate_l2l(const model::ModelDescription& m, const topo::Topology& topology, const PlannerOptions& o,
                           const L2LCandidate& s) {
  const auto own = topology_for_precision(topology, o.precision.compute_bytes);  // the plan's precision's compute
  const topo::Topology& t = own ? *own : topology;
  L2LEvaluation r;
  Evaluation& e = r.eval;
  e.strategy = plan::Strategy::L2L;
  e.l2l = s.settings;
  e.microbatches = s.microbatches;
  e.grid = topo::Grid{1, 1, 1, o.gpus, 1};
  e.order = o.order;
  const int64_t per_replica = o.batch_seqs / o.gpus;
  if (o.batch_seqs % o.gpus != 0 || s.microbatches < 1 || per_replica % s.microbatches != 0) {
    e.rejection = Rejection::Divisibility;
    e.rejected_because = "batch " + std::to_string(o.batch_seqs) + " over " + std::to_string(o.gpus) +
                         " replicas of " + std::to_string(s.microbatches) + " micro-batches does not divide";
    return r;
  }
  e.microbatch_seqs = per_replica / s.microbatches;
  e.stage_units = {m.num_units};
  const int64_t N = m.num_units, M = s.microbatches, mb = e.microbatch_seqs;
  const auto layouts = schedule::stage_layouts(m, std::vector<int64_t>(static_cast<size_t>(N), 1));
  const MatmulTimes matmul(t);
  const double w = static_cast<double>(o.precision.compute_bytes);
  const double link = t.host_link_bytes_per_s;  // 0: not modeled (copies free)
  const double data_bw = placement_aware_bandwidths(t, e.grid, o.order, BandwidthRule::Strict)[static_cast<int>(topo::Axis::Data)];
  const double data_latency_s =
      axis_latency(placement_aware_latencies(t, e.grid, o.order, BandwidthRule::Strict), topo::Axis::Data);
  MemorySettings ms;
  ms.microbatch_seqs = mb;
  ms.inflight_microbatches = 1;
  ms.activation_checkpointing = false;
  ms.overlap = o.overlap;
  ms.precision = o.precision;
  ms.optimizer_phase = false;
  ms.chain = is_chain(m);
  const double out_bytes = static_cast<double>(mb * m.seq_len * m.hidden) * w;  // one unit's output, one micro-batch
  double params = 0, device_peak = 0;
  std::vector<double> unit_weights;
  for (const auto& lay : layouts) {
    L2LUnitCost c;
    double elements = 0, adam_s = 0;
    for (size_t i = lay.first_layer; i < lay.last_layer; ++i) {
      const model::Layer& l = m.layers[i];
      const ElementwiseRates rates = elementwise_rates(t, l);  // looked up once for the three uses
      const ElementwiseTime ew = elementwise_s(rates, l, e.grid, mb, m.seq_len);
      c.forward_s += matmul.sum(forward_matmul_list(l, e.grid, mb, m.seq_len)) + ew.forward_s;
      c.backward_s += matmul.sum(backward_input_matmul_list(l, e.grid, mb, m.seq_len)) +
                      matmul.sum(backward_weight_matmul_list(l, e.grid, mb, m.seq_len)) + ew.backward_s +
                      gradient_accumulation_s(rates, l, e.grid);  // dW into the unit's gradient, each micro-batch
      elements += static_cast<double>(l.weight_elements());
      adam_s += optimizer_s(rates, l, e.grid);
    }
    c.fetch_s = link > 0 ? w * elements / link : 0;
    c.push_s = c.fetch_s;  // the gradient, in the compute type, the other way
    c.reduce_s = ring_all_reduce_s(o.gpus, 4 * elements, data_bw, data_latency_s);
    c.update_s = adam_s;
    r.units.push_back(c);
    unit_weights.push_back(elements);
    params += elements;
  }
  const std::vector<bool> not_cached(m.layers.size(), false);
  for (int64_t l = 0; l < N; ++l) {
    const auto& lay = layouts[static_cast<size_t>(l)];
    const double act = stage_memory(m, lay.first_layer, lay.last_layer, e.grid, ms, not_cached).activation_bytes;
    const double weights = unit_weights[static_cast<size_t>(l)];
    const double prefetched = s.settings.prefetch && l > 0 ? unit_weights[static_cast<size_t>(l - 1)] : 0;
    const bool last = l == N - 1;
    // At micro-batch k's backward: the unit's gradients exist from k = 1 on; the output
    // gradients are M (handed back, or already made) on the other units, k on the last;
    // the device stash still holds the earlier units' outputs but the ones taken (k + 1).
    // Each term is linear in k >= 1, so k = 0, 1 and M - 1 bound it.
    for (const int64_t k : {int64_t{0}, std::min<int64_t>(1, M - 1), M - 1}) {
      const double grads = k >= 1 ? weights : 0;
      const double outs = last ? static_cast<double>(k) : static_cast<double>(M);
      const double stash = s.settings.stash == plan::StashTier::Device && l > 0 ? static_cast<double>(l * M - 1 - k) : 0;
      const double bytes = w * (weights + prefetched + grads) + act + (outs + stash) * out_bytes;
      device_peak = std::max(device_peak, bytes);
    }
  }
  e.memory.model_state_bytes = 0;
  e.memory.activation_bytes = device_peak;
  e.memory.host_bytes = 16 * params + (s.settings.stash == plan::StashTier::Host ? static_cast<double>((N - 1) * M) * out_bytes : 0);
  r.time = l2l_step_time(schedule::l2l_program(N, M, s.settings.prefetch), r.units, s.clipping);
  e.batch_s = r.time.batch_s;
  e.compute_s = r.time.compute_s;
  e.exposed_comm_s = e.batch_s - e.compute_s;
  e.feasible = true;
  if (o.memory_limit && device_peak > static_cast<double>(t.gpu_memory_bytes)) {
    e.feasible = false;
    e.rejection = Rejection::Memory;
    e.rejected_because = "memory " + memory_over_limit(device_peak, static_cast<double>(t.gpu_memory_bytes));
  }
  return r;
}

}  // namespace axonn::planner
