// From measurements to a topology; see axonn/planner/calibration.hpp.
#include "axonn/planner/calibration.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/planner/statistics.hpp"
#include "axonn/planner/validation.hpp"

namespace axonn::planner {
namespace {

// Each kernel's median over `rounds` (of `m`'s shapes) into `matmuls` and `elementwise`,
// and the rounds' sums and spread into `out`.
void combine_kernel_rounds(const topo::ClusterMeasurements& m, const std::vector<topo::KernelRound>& rounds,
                           std::vector<topo::MatmulTiming>& matmuls,
                           std::map<std::string, topo::ElementwiseCost>& elementwise, KernelFits& out) {
  for (const auto& r : rounds) {
    if (r.matmul_s.size() != m.matmuls.size() || r.elementwise.size() != rounds.front().elementwise.size())
      throw InternalError("calibrate",
                          fmt::format("kernel round {} timed {} matmuls and {} element-wise operations", r.round,
                                      r.matmul_s.size(), r.elementwise.size()),
                          "ClusterMeasurements::kernel_rounds",
                          fmt::format("{} and {}, as the shapes and the first round", m.matmuls.size(),
                                      rounds.front().elementwise.size()));
    KernelRoundSums sums{r.round, 0, 0};
    for (double t : r.matmul_s) sums.matmul_s += t;
    for (const auto& [op, cost] : r.elementwise)
      sums.elementwise_s_per_element += cost.forward_s_per_element + cost.backward_s_per_element;
    out.kernel_rounds.push_back(sums);
  }
  for (size_t i = 0; i < matmuls.size(); ++i) {
    std::vector<double> t;
    for (const auto& r : rounds) t.push_back(r.matmul_s[i]);
    matmuls[i].seconds = median(t);
  }
  elementwise.clear();
  for (const auto& [op, first] : rounds.front().elementwise) {
    std::vector<double> forward, backward;
    for (const auto& r : rounds) {
      const auto it = r.elementwise.find(op);
      if (it == r.elementwise.end())
        throw InternalError("calibrate", fmt::format("kernel round {} has no '{}'", r.round, op),
                            "ClusterMeasurements::kernel_rounds", "the first round's operations in every round");
      forward.push_back(it->second.forward_s_per_element);
      backward.push_back(it->second.backward_s_per_element);
    }
    elementwise[op] = {median(forward), median(backward)};
  }
  std::vector<double> mm, ew;
  for (const auto& s : out.kernel_rounds) mm.push_back(s.matmul_s), ew.push_back(s.elementwise_s_per_element);
  out.matmul_round_spread = run_spread(mm);  // the same (max - min) / median as a configuration's runs
  out.elementwise_round_spread = run_spread(ew);
}

// A compute part from the kernels of `m` timed in `rounds` (the table, the fit or the
// aggregate rate, the element-wise costs; rounds combined; none: m's own kernel times).
topo::ComputeThroughput compute_from(const topo::ClusterMeasurements& m, const std::vector<topo::KernelRound>& rounds,
                                     KernelFits& out) {
  topo::ComputeThroughput c;
  std::vector<topo::MatmulTiming> matmuls = m.matmuls;
  c.elementwise = m.elementwise;
  if (!rounds.empty()) combine_kernel_rounds(m, rounds, matmuls, c.elementwise, out);
  if (!matmuls.empty()) {
    std::vector<CollectiveSample> flops_samples;
    for (const auto& t : matmuls) {
      flops_samples.push_back({1, MatmulShape{t.m, t.k, t.n, t.batch}.flops(), t.seconds});
      c.matmul_table.push_back(t);
    }
    try {
      out.matmul = fit_latency_bandwidth(flops_samples, kMatmulFit);
      c.matmul_flops_per_s = out.matmul->beta_bytes_per_s;
      c.matmul_overhead_s = out.matmul->alpha_s;
    } catch (const Error& e) {
      // Times that do not grow with FLOPs (noise): the table still holds every shape;
      // shapes outside it get the aggregate rate.
      double flops = 0, seconds = 0;
      for (const auto& s : flops_samples) flops += s.bytes_moved, seconds += s.seconds;
      c.matmul_flops_per_s = flops / seconds;
      out.matmul_note = e.what();
    }
  }
  return c;
}

// The compute parts of out.topology from the kernels of `m`: fp32's, and bf16's where
// calibrate timed them (the optimizer's fp32 update and gradient accumulation as timed).
void calibrate_compute(const topo::ClusterMeasurements& m, CalibratedCluster& out) {
  out.topology.compute = compute_from(m, m.kernel_rounds, out);
  out.topology.compute_bf16.reset();
  out.bf16.reset();
  if (!m.bf16_kernel_rounds.empty()) {
    out.bf16.emplace();
    out.topology.compute_bf16 = compute_from(m, m.bf16_kernel_rounds, *out.bf16);
  }
}

// The kernel rounds' spread appended to out.topology's description (two rounds or more).
void describe_kernel_rounds(CalibratedCluster& out) {
  if (out.kernel_rounds.size() > 1)
    out.topology.description += fmt::format(
        "; kernels timed in {} rounds, each kernel's median taken; spread of the rounds' sums, (max - min) / median: "
        "matmuls {:.1f}%, element-wise {:.1f}%",
        out.kernel_rounds.size(), 100 * out.matmul_round_spread, 100 * out.elementwise_round_spread);
}

}  // namespace

CalibratedCluster calibrated_topology(const topo::Topology& base, const topo::ClusterMeasurements& m,
                                      const std::string& name, const std::string& description) {
  CalibratedCluster out;
  topo::Topology& c = out.topology;
  c = base;
  c.collective_call_s = 0;  // fitted to a sweep, not measured: a new calibration starts without it
  c.name = name;
  c.description = description;
  c.gpus_per_node = m.gpus_per_node;
  c.num_nodes = m.world / m.gpus_per_node;
  c.intra_node_table.clear();

  std::map<std::pair<int64_t, int64_t>, std::vector<CollectiveSample>> samples;
  std::map<std::pair<int64_t, int64_t>, bool> inside;
  for (const auto& t : m.collectives) {
    const int p = static_cast<int>(t.p);
    samples[{t.ip, t.p}].push_back(t.op == topo::CollectiveOp::AllReduce ? all_reduce_sample(p, t.bytes, t.seconds)
                                                                          : all_gather_sample(p, t.bytes, t.seconds));
    inside[{t.ip, t.p}] = t.inside_node;
  }
  std::vector<double> alphas;
  double inter = 0, intra_fallback = 0;
  for (const auto& [key, s] : samples) {
    GroupFit g{key.first, key.second, inside[key], fit_latency_bandwidth(s)};
    alphas.push_back(g.fit.alpha_s);
    if (g.inside_node) {
      c.intra_node_table.push_back({g.ip, g.p, g.fit.beta_bytes_per_s});
      if (g.ip == 1 && g.p == 2) intra_fallback = g.fit.beta_bytes_per_s;
    } else if (g.ip == 1 && g.p == m.world) {
      inter = g.fit.beta_bytes_per_s;
    }
    out.groups.push_back(g);
  }
  if (inter == 0)
    throw InputError("calibrate", "no ring spans the nodes", "--gpus-per-node", "more than one node");
  c.inter_node_bandwidth_bytes_per_s = inter;
  if (intra_fallback > 0) c.intra_node_bandwidth_bytes_per_s = intra_fallback;
  c.collective_latency_s = median(alphas);

  std::vector<CollectiveSample> p2p_intra, p2p_inter;
  for (const auto& t : m.point_to_point) (t.inside_node ? p2p_intra : p2p_inter).push_back({1, t.bytes, t.seconds});
  if (!p2p_intra.empty() && !p2p_inter.empty()) {
    out.point_to_point_intra = fit_latency_bandwidth(p2p_intra);
    out.point_to_point_inter = fit_latency_bandwidth(p2p_inter);
    c.point_to_point = {out.point_to_point_intra->beta_bytes_per_s, out.point_to_point_inter->beta_bytes_per_s};
  }

  c.nonblocking = m.nonblocking;
  c.cores_per_rank = m.cores_per_rank;
  calibrate_compute(m, out);

  std::map<int64_t, std::map<int64_t, std::vector<CollectiveSample>>> waits;  // by p, then round
  for (const auto& w : m.sync_waits) waits[w.p][w.round].push_back({1, w.compute_s, w.wait_s});
  c.sync_wait.clear();
  for (const auto& [p, rounds] : waits) {
    SyncWaitFit f;
    f.p = p;
    std::vector<double> fractions;
    for (const auto& [round, s] : rounds) {
      SyncWaitRoundFit r;
      r.round = round;
      try {
        r.fit = fit_latency_bandwidth(s, kSyncWaitFit);
      } catch (const Error& e) {  // waits that do not grow with the compute: none
        r.note = e.what();
      }
      fractions.push_back(r.fraction());
      f.rounds.push_back(r);
    }
    const auto middle = fractions.begin() + static_cast<long>(fractions.size() / 2);
    f.fraction = mean(fractions);
    f.start_fraction = fractions.size() > 1 ? mean(std::vector<double>(fractions.begin(), middle)) : f.fraction;
    f.end_fraction = mean(std::vector<double>(middle, fractions.end()));
    f.lowest = *std::min_element(fractions.begin(), fractions.end());
    f.highest = *std::max_element(fractions.begin(), fractions.end());
    c.sync_wait.push_back({p, f.fraction});
    out.sync_waits.push_back(f);
  }
  if (!out.sync_waits.empty()) {
    c.description += "; sync wait per s of compute, mean over rounds (first half, second half; range):";
    for (const auto& f : out.sync_waits)
      c.description += fmt::format(" {} ranks {:.3f} ({:.3f}, {:.3f}; {:.3f}-{:.3f})", f.p, f.fraction,
                                   f.start_fraction, f.end_fraction, f.lowest, f.highest);
  }
  for (const bool across : {false, true}) {
    std::vector<double> ratios;
    for (const auto& w : m.waiting_shares)
      if (w.across_nodes == across) ratios.push_back(w.ratio);
    if (ratios.empty()) continue;
    out.waiting_shares.push_back(fit_waiting_share(ratios, across));
    (across ? c.waiting_share.inter_node : c.waiting_share.intra_node) = out.waiting_shares.back().share;
  }
  if (!out.waiting_shares.empty()) {
    c.description += "; a waiting rank's share of the cores, median over rounds (range):";
    for (const auto& f : out.waiting_shares)
      c.description += fmt::format(" {} {:.2f} ({:.2f}-{:.2f})", f.across_nodes ? "across nodes" : "inside a node",
                                   f.share, f.lowest, f.highest);
  }
  for (const bool across : {false, true}) {
    const bool measured = std::any_of(m.latencies.begin(), m.latencies.end(),
                                      [&](const topo::LatencyTiming& l) { return l.loaded && l.across_nodes == across; });
    if (!measured) continue;
    out.latencies.push_back(fit_latency(m.latencies, across));
    (across ? c.collective_latency_s : c.intra_node_collective_latency_s) = out.latencies.back().loaded_s;
  }
  if (!out.latencies.empty()) {
    c.description += "; latency per ring step, median over rounds of small all-reduces beside other ranks' compute "
                     "(alone; loaded range):";
    for (const auto& f : out.latencies)
      c.description += fmt::format(" {} {:.0f} us ({:.0f}; {:.0f}-{:.0f})", f.across_nodes ? "across nodes" : "inside a node",
                                   1e6 * f.loaded_s, 1e6 * f.alone_s, 1e6 * f.lowest_s, 1e6 * f.highest_s);
  }
  describe_kernel_rounds(out);
  return out;
}

LatencyFit fit_latency(const std::vector<topo::LatencyTiming>& rounds, bool across_nodes) {
  std::vector<double> loaded, alone;  // per ring step: a pair's all-reduce is 2
  for (const auto& r : rounds)
    if (r.across_nodes == across_nodes) (r.loaded ? loaded : alone).push_back(r.seconds / 2);
  if (loaded.empty())
    throw InternalError("calibrate", "no loaded latency rounds", across_nodes ? "across nodes" : "inside a node",
                        "at least one round");
  LatencyFit f;
  f.across_nodes = across_nodes;
  f.loaded_s = median(loaded);
  f.alone_s = alone.empty() ? 0.0 : median(alone);
  f.lowest_s = *std::min_element(loaded.begin(), loaded.end());
  f.highest_s = *std::max_element(loaded.begin(), loaded.end());
  f.rounds = static_cast<int64_t>(loaded.size());
  return f;
}

WaitingShareFit fit_waiting_share(const std::vector<double>& ratios, bool across_nodes) {
  if (ratios.empty())
    throw InternalError("calibrate", "no waiting-share rounds", across_nodes ? "across nodes" : "inside a node",
                        "at least one round");
  auto share = [](double r) { return std::clamp(2 * r - 1, 0.0, 1.0); };
  WaitingShareFit f;
  f.across_nodes = across_nodes;
  f.share = share(median(ratios));
  f.lowest = share(*std::min_element(ratios.begin(), ratios.end()));
  f.highest = share(*std::max_element(ratios.begin(), ratios.end()));
  f.rounds = static_cast<int64_t>(ratios.size());
  return f;
}

CalibratedCluster kernel_topology(const topo::Topology& base, const topo::ClusterMeasurements& m,
                                  const std::string& name, const std::string& description) {
  CalibratedCluster out;
  topo::Topology& c = out.topology;
  c = base;
  c.name = name;
  c.description = description;
  if (m.gpus_per_node > 0 && (c.gpus_per_node != m.gpus_per_node || c.num_nodes != m.world / m.gpus_per_node)) {
    c.gpus_per_node = m.gpus_per_node;
    c.num_nodes = m.world / m.gpus_per_node;
    c.intra_node_table.clear();  // base's groups inside its nodes need not fit these nodes
  }
  if (m.cores_per_rank > 0) c.cores_per_rank = m.cores_per_rank;
  calibrate_compute(m, out);
  describe_kernel_rounds(out);
  return out;
}

KernelTimeRatio kernel_time_ratio(const topo::ComputeThroughput& topology, const topo::ComputeThroughput& probe) {
  KernelTimeRatio r;
  double calibrated_s = 0, probed_s = 0;
  for (const auto& p : probe.matmul_table)
    for (const auto& t : topology.matmul_table)
      if (t.m == p.m && t.k == p.k && t.n == p.n && t.batch == p.batch) {
        calibrated_s += t.seconds, probed_s += p.seconds, ++r.shapes;
        break;
      }
  if (calibrated_s > 0) r.matmul = probed_s / calibrated_s;
  double calibrated_e = 0, probed_e = 0;
  for (const auto& [op, p] : probe.elementwise)
    if (const auto it = topology.elementwise.find(op); it != topology.elementwise.end()) {
      calibrated_e += it->second.forward_s_per_element + it->second.backward_s_per_element;
      probed_e += p.forward_s_per_element + p.backward_s_per_element;
      ++r.operations;
    }
  if (calibrated_e > 0) r.elementwise = probed_e / calibrated_e;
  return r;
}

std::vector<MatmulShape> model_matmul_shapes(const model::ModelDescription& m, int64_t gpus, int64_t batch_seqs) {
  if (batch_seqs < 1)
    throw InputError("calibrate", "no batch size for the model's shapes", "--batch-seqs", "an integer >= 1");
  std::vector<MatmulShape> shapes;
  auto add = [&](const std::vector<MatmulShape>& v) {
    for (const auto& s : v)
      if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
  };
  std::vector<topo::Grid> grids;  // of every mode ranked together (axonn3d's include 1d's)
  for (const auto& mode : plan::tensor_modes())
    if (mode.in_all)
      for (const auto& g : enumerate_mode_grids(mode.name, gpus)) grids.push_back(g);
  for (const auto& g : grids) {
    if (g.ginter != 1 || batch_seqs % g.replicas() != 0) continue;
    const int64_t mb = batch_seqs / g.replicas();
    if (plan::divisibility_problem(m, g, batch_seqs, mb)) continue;
    for (const auto& l : m.layers) {
      add(forward_matmuls(l, g, mb, m.seq_len));
      add(backward_input_matmuls(l, g, mb, m.seq_len));
      add(backward_weight_matmuls(l, g, mb, m.seq_len));
    }
  }
  return shapes;
}

std::map<std::string, topo::ElementwiseShape> elementwise_shapes(const model::ModelDescription& m) {
  const int64_t h = m.hidden, ffn = m.ffn_hidden > 0 ? m.ffn_hidden : h, vocab = m.vocab > 0 ? m.vocab : h;
  const std::map<std::string, int64_t> width = {{"bias", ffn},           {"layer_norm", h}, {"gelu", ffn},
                                                {"residual", h},         {"softmax", m.seq_len},
                                                {"attention_layout", h},
                                                {"cross_entropy", vocab}, {"adam", 1024},
                                                {"grad_accumulate", 1024},
                                                {"layer_norm_split", std::max<int64_t>(1, h / 2)}};
  std::map<std::string, topo::ElementwiseShape> out;
  for (const auto& op : topo::elementwise_op_names()) {
    const int64_t w = width.at(op), rows = std::max<int64_t>(1, (int64_t{1} << 20) / w);
    out[op] = {op == "softmax" ? rows / w * w : rows, w, op == "attention_layout" ? std::max<int64_t>(1, m.heads) : 1};
  }
  return out;
}

}  // namespace axonn::planner
