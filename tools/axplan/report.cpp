// Printing ranked candidates; see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <fmt/ostream.h>

#include "axonn/common/units.hpp"
#include "axonn/planner/memory_model.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::tools {
namespace {

size_t shown(size_t n, size_t top) { return top == 0 ? n : std::min(n, top); }

// One CSV field in quotes, a quote inside it doubled (RFC 4180): reasons name the
// model's layers, whose names are the user's.
std::string csv_quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// Which of the topology's kernel times the predictions use, where it has two.
void print_compute_source(std::ostream& out, const ReportContext& c) {
  if (c.bf16_kernels) fmt::print(out, "compute: the topology's kernels timed in bf16 (compute_bf16), the plan's precision\n");
}

}  // namespace

nlohmann::json evaluation_to_json(const planner::Evaluation& e) {
  const auto& c = e.comm;
  nlohmann::json j = topo::grid_to_json(e.grid);
  // The ranks' layout as a plan writes it (version 2's "mesh", innermost first); a
  // candidate rejected for an inconsistent grid has none.
  if (!topo::grid_problem(e.grid)) j["mesh"] = topo::mesh_to_json(topo::grid_mesh(e.grid, e.order));
  j["strategy"] = plan::strategy_name(e.strategy);
  if (e.strategy == plan::Strategy::FourD)
    j["tensor_mode"] = planner::tensor_mode_name(e.grid);
  if (e.strategy == plan::Strategy::L2L)
    j["l2l"] = {{"stash", plan::stash_tier_name(e.l2l.stash)}, {"prefetch", e.l2l.prefetch}};
  if (!e.rejected_because.empty()) j["rejected_because"] = e.rejected_because;
  if (e.microbatches > 0) {
    j["microbatch_seqs"] = e.microbatch_seqs;
    j["microbatches"] = e.microbatches;
    j["comm_s"] = e.comm_s;
    if (e.grid.ginter > 1) {
      j["stage_units"] = e.stage_units;
      j["checkpoint_interval"] = e.checkpoint_interval;
      if (e.batch_s > 0) j["bubble_fraction"] = e.bubble_fraction;
    }
    if (e.batch_s > 0) {
      j["batch_s"] = e.batch_s;
      j["compute_s"] = e.compute_s;
      j["exposed_comm_s"] = e.exposed_comm_s;
    }
    j["comm_breakdown_s"] = plan::breakdown_to_json(c);
    if (e.summa_exposed_s > 0) j["summa_exposed_s"] = e.summa_exposed_s;
    j["optimizer"] = plan::optimizer_label(e.optimizer);
    j["memory_bytes_per_gpu"] = static_cast<int64_t>(e.memory.total_bytes());
    j["memory_breakdown_bytes"] = plan::memory_prediction_to_json(planner::memory_prediction(e.memory));
    if (e.memory.host_bytes > 0) j["host_memory_bytes_per_gpu"] = static_cast<int64_t>(e.memory.host_bytes);
  }
  return j;
}

void print_ranking(std::ostream& out, Format f, const ReportContext& c, const planner::Ranking& r,
                   size_t top, bool show_rejected) {
  const size_t n = shown(r.feasible.size(), top);
  if (f == Format::Json) {
    nlohmann::json j;
    j["model"] = c.model;
    j["topology"] = c.topology;
    j["gpus"] = c.gpus;
    j["batch_seqs"] = c.batch_seqs;
    j["batch_tokens"] = c.batch_seqs * c.seq_len;
    j["comm_model"] = planner::comm_model_name(c.comm_model);
    j["placement_aware"] = c.placement_aware;
    j["placement_order"] = c.order;
    j["candidates_feasible"] = r.feasible.size();
    j["candidates_rejected"] = r.rejected.size();
    j["candidates"] = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      auto e = evaluation_to_json(r.feasible[i]);
      e["rank"] = i + 1;
      if (c.order_searched) e["placement_order"] = topo::order_to_string(r.feasible[i].order);
      j["candidates"].push_back(e);
    }
    if (show_rejected) {
      j["rejected"] = nlohmann::json::array();
      for (const auto& e : r.rejected) j["rejected"].push_back(evaluation_to_json(e));
    }
    out << j.dump(2) << "\n";
    return;
  }
  if (f == Format::Csv) {
    out << "rank,gx,gy,gz,gdata,ginter,microbatch_seqs,batch_s,compute_s,exposed_comm_s,comm_s,ag_z_s,rs_z_s,ar_x_s,ar_y_s,ar_data_s,"
           "p2p_pipe_s,memory_bytes_per_gpu,rejected_because,optimizer,strategy,sequence,p2p_seq_s,act_x_s,act_y_s,sync_wait_s,"
           "small_s,summa_s,summa_exposed_s"
        << (c.order_searched ? ",placement_order" : "") << "\n";
    auto row = [&](const planner::Evaluation& e, const std::string& rank) {
      const auto& b = e.comm;
      fmt::print(out,
                 "{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.0f},{},{},"
                 "{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}{}\n",
                 rank, e.grid.gx, e.grid.gy, e.grid.gz, e.grid.gdata, e.grid.ginter, e.microbatch_seqs, e.batch_s,
                 e.compute_s, e.exposed_comm_s, e.comm_s, b.ag_z,
                 b.rs_z, b.ar_x, b.ar_y, b.ar_data, b.p2p_pipe, e.memory.total_bytes(), csv_quoted(e.rejected_because),
                 plan::optimizer_label(e.optimizer), csv_quoted(planner::strategy_label(e)), e.grid.sequence, b.p2p_seq, b.act_x, b.act_y,
                 b.sync_wait, b.small, b.summa, e.summa_exposed_s, c.order_searched ? "," + csv_quoted(topo::order_to_string(e.order)) : "");
    };
    for (size_t i = 0; i < n; ++i) row(r.feasible[i], std::to_string(i + 1));
    if (show_rejected)
      for (const auto& e : r.rejected) row(e, "");
    return;
  }
  fmt::print(out, "{} on {} GPUs of {}, batch {} x {} tokens; comm model {}, {}; placement {}\n", c.model, c.gpus,
             c.topology, c.batch_seqs, c.seq_len, planner::comm_model_name(c.comm_model),
             c.placement_aware ? "placement-aware" : "placement-agnostic",
             c.order_searched ? "searched per grid, " + c.order + " first" : c.order);
  print_compute_source(out, c);
  fmt::print(out, "{} feasible, {} rejected; showing {}\n\n", r.feasible.size(), r.rejected.size(), n);
  const bool full = c.comm_model == planner::CommModel::Full;
  if (full)
    out << "batch = predicted batch time = compute + exposed communication (and pipeline bubble); comm = all\n"
           "communication, hidden or not, split by collective (seconds per step)"
        << (c.strategies_ranked ? "; 2d's and 3d's all-gathers and\nreduce-scatters of activations are in ar_x and ar_y, "
                                  "SUMMA's broadcasts and reduces (2d-broadcast) in ar_y,\nsequence parallelism's ring in p2p"
                                : "")
        << "\n\n";
  const bool options = c.memory_options_searched;
  const bool strategies = c.strategies_ranked;
  const std::string header = fmt::format(
      "{:>4}  {:>4} {:>4} {:>4} {:>5} {:>6}  {:>4}  {}{:>9}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {:>9}{}{}{}", "rank", "gx",
      "gy", "gz", "gdata", "ginter", "mb",
      full ? fmt::format("{:>9}  {:>9}  {:>9}  ", "batch (s)", "compute", "exposed") : "", "comm (s)", "ag_z",
      "rs_z", "ar_x", "ar_y", "ar_data", "p2p", "mem (GiB)", options ? fmt::format("  {:<13}", "optimizer") : "",
      strategies ? fmt::format("  {:<22}", "strategy") : "", c.order_searched ? fmt::format("  {:<16}", "order") : "");
  out << header << "\n" << std::string(header.size(), '-') << "\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& e = r.feasible[i];
    const auto& b = e.comm;
    fmt::print(out, "{:>4}  {:>4} {:>4} {:>4} {:>5} {:>6}  {:>4}  {}{:>9.4f}  {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f}  {:>9.2f}{}{}{}\n",
               i + 1, e.grid.gx, e.grid.gy, e.grid.gz, e.grid.gdata, e.grid.ginter, e.microbatch_seqs,
               full ? fmt::format("{:>9.4f}  {:>9.4f}  {:>9.4f}  ", e.batch_s, e.compute_s, e.exposed_comm_s) : "",
               e.comm_s,
               b.ag_z, b.rs_z, b.ar_x + b.act_x, b.ar_y + b.act_y + b.summa, b.ar_data, b.p2p_pipe + b.p2p_seq, e.memory.total_bytes() / kBytesPerGiB,
               options ? fmt::format("  {:<13}", plan::optimizer_label(e.optimizer)) : "",
               strategies ? fmt::format("  {:<22}", planner::strategy_label(e)) : "",
               c.order_searched ? fmt::format("  {:<16}", topo::order_to_string(e.order)) : "");
  }
  if (show_rejected && !r.rejected.empty()) {
    out << "\nrejected:\n";
    for (const auto& e : r.rejected)
      fmt::print(out, "  {:>4} {:>4} {:>4} {:>5} {:>6}  {}{}\n", e.grid.gx, e.grid.gy, e.grid.gz, e.grid.gdata,
                 e.grid.ginter, strategies ? planner::strategy_label(e) + ": " : "", e.rejected_because);
  }
}

void print_explanation(std::ostream& out, const ReportContext& c, const planner::Explanation& x) {
  const auto& e = x.evaluation;
  fmt::print(out, "{} on {} GPUs of {}, batch {} x {} tokens; comm model {}, {}; placement {}\n", c.model, c.gpus,
             c.topology, c.batch_seqs, c.seq_len, planner::comm_model_name(c.comm_model),
             c.placement_aware ? "placement-aware" : "placement-agnostic", c.order);
  print_compute_source(out, c);
  fmt::print(out, "grid {}: {}\n\n", e.grid.to_string(),
             e.feasible ? "feasible" : "rejected: " + e.rejected_because);
  fmt::print(out, "{:<6} {:>5} {:>5}  {:<13} {:>14}\n", "group", "size", "ip", "where", "bandwidth");
  for (int i = 0; i < topo::kNumAxes; ++i) {
    const auto& a = x.axes[i];
    fmt::print(out, "{:<6} {:>5} {:>5}  {:<13} {:>14}\n", topo::axis_name(static_cast<topo::Axis>(i)), a.size, a.ip,
               a.size == 1 ? "-" : a.inside_node ? "inside a node" : "across nodes",
               a.size == 1 ? "-" : fmt::format("{:.2f} GB/s", a.bandwidth_bytes_per_s / 1e9));
  }
  for (int i = 0; i < topo::kNumAxes; ++i)
    if (x.axes[i].out_of_step_share > 0)
      fmt::print(out,
                 "{}: time-sliced ranks, its rings across nodes out of step; the other rings on its link for {:.0f}% "
                 "of the passes, not eq. 10's all of them (docs/model.md section 2)\n",
                 topo::axis_name(static_cast<topo::Axis>(i)), 100 * x.axes[i].out_of_step_share);
  if (x.layers.empty()) return;
  fmt::print(out, "\n{} micro-batch(es) of {} sequences; per micro-batch and occurrence, milliseconds:\n",
             e.microbatches, e.microbatch_seqs);
  const std::string header =
      fmt::format("{:<22} {:<9} {:>5}  {:>9} {:>9} {:>9}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}", "layer (first)",
                  "kind", "count", "forward", "dI", "dW (+acc)", "AG z", "RS z", "AR fwd", "AR dI", "AR data", "small");
  out << header << "\n" << std::string(header.size(), '-') << "\n";
  for (const auto& l : x.layers) {
    const auto& k = l.costs;
    fmt::print(out,
               "{:<22} {:<9} {:>5}  {:>9.4f} {:>9.4f} {:>9.4f}  {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f}\n",
               l.name, l.kind, l.count, k.forward_s * 1e3, k.backward_input_s * 1e3, k.backward_weight_s * 1e3,
               k.comm.all_gather_s * 1e3, k.comm.reduce_scatter_s * 1e3, k.comm.forward_all_reduce_s * 1e3,
               k.comm.input_grad_all_reduce_s * 1e3, k.comm.data_all_reduce_s * 1e3,
               (k.comm.small_forward_s + k.comm.small_backward_s) * 1e3);
  }
  // 2d-broadcast: SUMMA's moves are inside the computes, not in the columns above.
  if (std::any_of(x.layers.begin(), x.layers.end(), [](const auto& l) { return l.costs.comm.summa_steps > 0; })) {
    fmt::print(out, "\nSUMMA's moves (2d-broadcast), milliseconds of one step's, and what a pass leaves exposed:\n");
    const std::string summa = fmt::format("{:<22} {:>5}  {:>9} {:>9} {:>9} {:>9}  {:>11} {:>11}", "layer (first)",
                                          "steps", "bcast in", "bcast W", "reduce dI", "reduce dW", "fwd exposed",
                                          "bwd exposed");
    out << summa << "\n" << std::string(summa.size(), '-') << "\n";
    for (const auto& l : x.layers) {
      const auto& k = l.costs;
      if (k.comm.summa_steps == 0) continue;
      fmt::print(out, "{:<22} {:>5}  {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}  {:>11.4f} {:>11.4f}\n", l.name,
                 k.comm.summa_steps, k.comm.summa_input_broadcast_s * 1e3, k.comm.summa_weight_broadcast_s * 1e3,
                 k.comm.summa_input_reduce_s * 1e3, k.comm.summa_weight_reduce_s * 1e3, k.summa_forward_exposed_s * 1e3,
                 k.summa_backward_exposed_s * 1e3);
    }
  }
  if (e.small_calls > 0)
    fmt::print(out, "small = the layer norm's, the loss's and 3d's vector all-reduces of one forward and backward; "
                    "per step, with the vectors' and the loss's all-reduces after the backward: {} calls on the first "
                    "stage, {:.4g} s on the stage with the most communication\n",
               e.small_calls, e.comm.small);
  if (!x.stages.empty()) {
    // Consecutive stages with the same passes share a row.
    fmt::print(out, "\npasses of one micro-batch, milliseconds busy (compute inside); the optimizer per step:\n");
    fmt::print(out, "{:<9} {:>20} {:>20} {:>20} {:>10}\n", "stage", "forward", "backward", "last backward", "optimizer");
    auto same = [](const planner::StagePasses& a, const planner::StagePasses& b) {
      return a.forward_s == b.forward_s && a.backward_s == b.backward_s && a.last_backward_s == b.last_backward_s &&
             a.forward_compute_s == b.forward_compute_s && a.backward_compute_s == b.backward_compute_s &&
             a.last_backward_compute_s == b.last_backward_compute_s && a.optimizer_s == b.optimizer_s;
    };
    auto pass = [](double busy, double compute) { return fmt::format("{:.3f} ({:.3f})", busy * 1e3, compute * 1e3); };
    for (size_t i = 0; i < x.stages.size();) {
      size_t j = i + 1;
      while (j < x.stages.size() && same(x.stages[j], x.stages[i])) ++j;
      const auto& p = x.stages[i];
      fmt::print(out, "{:<9} {:>20} {:>20} {:>20} {:>10.3f}\n", j - i == 1 ? fmt::format("{}", i) : fmt::format("{}-{}", i, j - 1),
                 pass(p.forward_s, p.forward_compute_s), pass(p.backward_s, p.backward_compute_s),
                 pass(p.last_backward_s, p.last_backward_compute_s), p.optimizer_s * 1e3);
      i = j;
    }
  }
  const auto& m = e.memory;
  fmt::print(out, "\nmemory per GPU {:.2f} GiB: model state {:.2f}, gathered weights {:.2f}, un-scattered gradients "
                  "{:.2f}, activations {:.2f}, data-parallel buckets {:.2f}, optimizer phase {:.2f}\n",
             m.total_bytes() / kBytesPerGiB, m.model_state_bytes / kBytesPerGiB, m.gathered_weight_bytes / kBytesPerGiB,
             m.unscattered_grad_bytes / kBytesPerGiB, m.activation_bytes / kBytesPerGiB, m.bucket_bytes / kBytesPerGiB,
             m.optimizer_bytes / kBytesPerGiB);
  if (e.grid.ginter > 1)
    fmt::print(out, "pipeline {}: units per stage {}, checkpoint interval {}; the slowest stage waits for messages "
                    "{:.1f}% of its time\n",
               plan::pipeline_schedule_name(c.pipeline_schedule), fmt::join(e.stage_units, ","), e.checkpoint_interval,
               100 * e.bubble_fraction);
  if (e.lent_core_speedup > 1)
    fmt::print(out, "waiting stages lend their cores (time-sliced ranks): the stages compute {:.2f}x faster than "
                    "with every rank computing\n",
               e.lent_core_speedup);
  if (e.batch_s > 0)
    fmt::print(out, "batch time {:.4f} s = compute {:.4f} s + exposed communication {:.4f} s; all communication "
                    "{:.4f} s\n",
               e.batch_s, e.compute_s, e.exposed_comm_s, e.comm_s);
  else
    fmt::print(out, "communication {:.4f} s per step\n", e.comm_s);
}

}  // namespace axonn::tools
