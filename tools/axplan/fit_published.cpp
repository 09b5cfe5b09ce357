// axplan fit-published; see fit_published.hpp.
#include "fit_published.hpp"

#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/data_path.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"
#include "axonn/common/median.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::tools {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A row checked against the paper's own arithmetic (a mistyped digit shows here):
// parameters within 0.06 B or 0.5% of eq. 2 (the table rounds to 0.1 B), aggregate
// within 0.5% of gpus x per-GPU, percentage within 0.6 points of per-GPU / peak.
void check_row(ObjectReader& r, double params_b, double eq2_b, double aggregate_pflops, double gpus_x_tflops,
               double percent, double per_gpu_percent) {
  if (std::abs(params_b - eq2_b) > std::max(0.06, 0.005 * eq2_b))
    r.fail("params_billion", fmt::format("{} differs from eq. 2's {:.2f} for these shapes", params_b, eq2_b),
           "the parameter count of heads, hidden and layers (within rounding)");
  if (std::abs(aggregate_pflops * 1000.0 / gpus_x_tflops - 1.0) > 0.005)
    r.fail("aggregate_pflops", fmt::format("{} differs from gpus x tflops_per_gpu = {:.1f} PFLOP/s", aggregate_pflops,
                                           gpus_x_tflops / 1000.0),
           "the product within 0.5%");
  if (std::abs(percent - per_gpu_percent) > 0.6)
    r.fail("percent_of_peak", fmt::format("{} differs from tflops_per_gpu / peak = {:.1f}%", percent, per_gpu_percent),
           "the same percentage (within rounding)");
}

std::vector<size_t> parse_rows(const std::string& text, size_t count) {
  std::vector<size_t> rows;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long row = 0;
    try {
      row = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || row < 1 || static_cast<size_t>(row) > count)
      throw InputError("axplan", "bad row \"" + item + "\"", "--fit-rows " + text,
                       fmt::format("row numbers from 1 to {}, separated by commas", count));
    for (size_t r : rows)
      if (r == static_cast<size_t>(row - 1))
        throw InputError("axplan", "row " + item + " twice", "--fit-rows " + text, "each row once");
    rows.push_back(static_cast<size_t>(row - 1));
  }
  if (rows.empty() || rows.size() > 3 || rows.size() >= count)
    throw InputError("axplan", fmt::format("{} rows to fit on", rows.size()), "--fit-rows " + text,
                     fmt::format("1 to 3 rows, fewer than the {} runs", count));
  return rows;
}

// Every choice of k of n indices, in lexicographic order.
std::vector<std::vector<size_t>> choices(size_t n, size_t k) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> c(k);
  for (size_t i = 0; i < k; ++i) c[i] = i;
  while (true) {
    out.push_back(c);
    size_t i = k;
    while (i > 0 && c[i - 1] == n - k + i - 1) --i;
    if (i == 0) return out;
    ++c[i - 1];
    for (size_t j = i; j < k; ++j) c[j] = c[j - 1] + 1;
  }
}

std::string rows_text(const std::vector<size_t>& rows) {
  std::string s;
  for (size_t r : rows) s += (s.empty() ? "" : ",") + std::to_string(r + 1);
  return s;
}

}  // namespace

PublishedRuns read_published_runs(const std::string& name_or_path) {
  const std::string path = resolve_data_file("axplan", "model_zoo/published", name_or_path);
  const nlohmann::json j = read_json_file("axplan", path);
  ObjectReader r(j, path, "axplan");
  if (r.string("format") != "axonn-published-runs")
    r.fail("format", "not a runs file", "\"axonn-published-runs\"");
  if (r.integer("version") != 1) r.fail("version", "unknown version", "1");
  PublishedRuns p;
  p.name = r.string("name");
  p.source = r.string("source");
  p.notes = r.string_or("notes", "");
  p.topology = r.string("topology");
  p.peak_flops_per_s = r.positive_number("peak_flops_per_s");
  const int64_t seq_len = r.positive_int_at_most("seq_len", int64_t{1} << 24);
  const int64_t vocab = r.positive_int_at_most("vocab", int64_t{1} << 24);

  ObjectReader s = r.object("settings");
  planner::PlannerOptions& o = p.options;
  const int64_t microbatch = s.non_negative_int_or("microbatch_seqs", 1);  // 0: the planner's rule
  o.pipeline_schedule =
      plan::parse_pipeline_schedule(s.string_or("pipeline_schedule", "1f1b"), "axplan", s.where("pipeline_schedule"));
  o.order = topo::parse_order(s.string_or("order", "x,y,z,pipe,data"), "axplan", s.where("order"));
  const int64_t overlap = s.non_negative_int_or("overlap_level", 0);
  if (overlap > 4) s.fail("overlap_level", std::to_string(overlap), "an overlap level from 0 to 4");
  o.overlap = plan::OverlapSettings::level(static_cast<int>(overlap), 0);
  o.precision = s.one_of("grad_precision", {"fp32", "bf16"}) == "fp32" ? plan::Precision::bf16()
                                                                        : plan::Precision::bf16_gradients();
  o.checkpoint_interval = s.positive_int_or("checkpoint_interval", 1);
  s.finish();

  for (auto& row : r.object_array("runs")) {
    const std::string origin = fmt::format("{} (runs[{}])", path, p.runs.size());
    const std::string name = row.string("name");
    const int64_t heads = row.positive_int_at_most("heads", int64_t{1} << 20);
    const int64_t hidden = row.positive_int_at_most("hidden", int64_t{1} << 24);
    const int64_t layers = row.positive_int_at_most("layers", int64_t{1} << 20);
    const int64_t t = row.positive_int_at_most("tensor", int64_t{1} << 20);
    const int64_t pipe = row.positive_int_at_most("pipeline", int64_t{1} << 20);
    const int64_t gpus = row.positive_int_at_most("gpus", int64_t{1} << 24);
    const int64_t batch = row.positive_int_at_most("batch_seqs", int64_t{1} << 30);
    const double tflops = row.positive_number("tflops_per_gpu");
    if (gpus % (t * pipe) != 0)
      row.fail("gpus", fmt::format("{} GPUs with tensor {} x pipeline {}", gpus, t, pipe),
               "a multiple of tensor x pipeline (the rest is data parallelism)");
    const int64_t data = gpus / (t * pipe);
    if (batch % data != 0 || (microbatch > 0 && (batch / data) % microbatch != 0))
      row.fail("batch_seqs", fmt::format("{} sequences over {} data-parallel groups in micro-batches of {}", batch, data,
                                         microbatch),
               "a multiple of the data-parallel groups, each group's share a multiple of settings.microbatch_seqs");
    check_row(row, row.positive_number("params_billion"), planner::megatron_parameters(seq_len, layers, hidden, vocab) / 1e9,
              row.positive_number("aggregate_pflops"), static_cast<double>(gpus) * tflops,
              row.positive_number("percent_of_peak"), tflops * 1e12 / p.peak_flops_per_s * 100.0);
    row.finish();
    const nlohmann::json model = {{"name", name},   {"family", "gpt"}, {"num_layers", layers}, {"hidden", hidden},
                                  {"heads", heads}, {"seq_len", seq_len}, {"vocab", vocab}, {"ffn_multiplier", 4}};
    planner::PublishedRun run;
    run.name = name;
    run.model = model::model_from_json(model, origin);
    run.grid = topo::Grid{1, t, 1, data, pipe};
    run.batch_seqs = batch;
    run.microbatch_seqs = microbatch;
    run.measured_step_s = planner::megatron_step_flops(batch, seq_len, layers, hidden, vocab) /
                          (static_cast<double>(gpus) * tflops * 1e12);
    p.runs.push_back(run);
    p.tflops_per_gpu.push_back(tflops);
  }
  if (p.runs.size() < 2) r.fail("runs", fmt::format("{} runs", p.runs.size()), "at least 2 (one to fit, one to test)");
  r.finish();
  return p;
}

int run_fit_published(const FitPublishedOptions& o, std::ostream& out) {
  const PublishedRuns runs = read_published_runs(o.runs);
  const topo::Topology base = topo::load_topology(o.topology.empty() ? runs.topology : o.topology);
  if (std::abs(base.peak_flops_per_s / runs.peak_flops_per_s - 1.0) > 1e-9)
    throw InputError("axplan", fmt::format("peak {:.4g} FLOP/s per GPU, the runs file's is {:.4g}",
                                           base.peak_flops_per_s, runs.peak_flops_per_s),
                     "--topology " + (o.topology.empty() ? runs.topology : o.topology),
                     "the GPU the runs ran on (the same peak_flops_per_s)");
  const std::vector<size_t> rows = parse_rows(o.fit_rows, runs.runs.size());

  const planner::ComputeFit fit = planner::fit_compute(base, runs.options, runs.runs, rows, true);
  const planner::ComputeFit no_overhead = planner::fit_compute(base, runs.options, runs.runs, rows, false);
  topo::Topology no_roofline = base;  // the same fit without the memory side
  no_roofline.compute.memory_bytes_per_s = 0;
  const planner::ComputeFit without_memory = planner::fit_compute(no_roofline, runs.options, runs.runs, rows, true);
  topo::Topology peak_only = base;
  peak_only.compute = {};
  std::vector<size_t> every_row(runs.runs.size());  // at peak nothing is fitted: all rows count
  for (size_t i = 0; i < every_row.size(); ++i) every_row[i] = i;
  const std::vector<planner::RunPrediction> at_peak =
      planner::predict_runs(peak_only, runs.options, runs.runs, every_row);

  fmt::print(out, "{}: {} runs on {} ({}); fitted on rows {}\n", runs.name, runs.runs.size(), base.name,
             o.topology.empty() ? runs.topology : o.topology, rows_text(rows));
  fmt::print(out, "source: {}\n\n", runs.source);
  fmt::print(out, "{:>4} {:<12} {:>14} {:>6} {:>8} {:>10} {:>10} {:>7} {:>10} {:>7} {:>9}\n", "row", "run",
             "grid t,d,p", "mb", "TFLOP/s", "meas (s)", "peak (s)", "err", "fit (s)", "err", "mem GiB");
  for (size_t i = 0; i < runs.runs.size(); ++i) {
    const auto& r = runs.runs[i];
    const auto& f = fit.runs[i];
    fmt::print(out, "{:>3}{} {:<12} {:>14} {:>6} {:>8.0f} {:>10.3f} {:>10.3f} {:>+6.1f}% {:>10.3f} {:>+6.1f}% {:>9.1f}\n",
               i + 1, f.fitted ? "*" : " ", r.name, fmt::format("{},{},{}", r.grid.gy, r.grid.gdata, r.grid.ginter),
               r.microbatch_seqs, runs.tflops_per_gpu[i], f.measured_s, at_peak[i].predicted_s,
               100 * at_peak[i].error(), f.predicted_s, 100 * f.error(), f.memory_bytes / kGiB);
  }
  fmt::print(out, "(* fitted on; meas = the paper's eq. 3 FLOPs / (GPUs x TFLOP/s); peak = no compute model; "
                  "mem = the planner's peak per GPU, {:.0f} GiB available)\n\n",
             static_cast<double>(base.gpu_memory_bytes) / kGiB);
  fmt::print(out, "fit: matmul_flops_per_s = {:.4f} x peak = {:.1f} TFLOP/s, matmul_overhead_s = {:.1f} us, "
                  "memory_bytes_per_s = {:.0f} GB/s\n",
             fit.efficiency, fit.efficiency * base.peak_flops_per_s / 1e12, fit.matmul_overhead_s * 1e6,
             base.compute.memory_bytes_per_s / 1e9);
  fmt::print(out, "MAPE: fitted rows {:.1f}%, held out {:.1f}% ({} runs)\n", 100 * fit.fitted_mape,
             100 * fit.held_out_mape, runs.runs.size() - rows.size());
  if (fit.at_bound)
    fmt::print(out, "warning: a fitted number is at the edge of its search interval (efficiency 0.05-1, overhead "
                    "0-1 ms): the model misses something that the fit absorbs\n");
  fmt::print(out, "without the overhead (efficiency {:.4f} only): fitted {:.1f}%, held out {:.1f}%\n",
             no_overhead.efficiency, 100 * no_overhead.fitted_mape, 100 * no_overhead.held_out_mape);
  if (base.compute.memory_bytes_per_s > 0)
    fmt::print(out, "without the memory side (no roofline, no element-wise cost): fitted {:.1f}%, held out {:.1f}%\n",
               100 * without_memory.fitted_mape, 100 * without_memory.held_out_mape);
  fmt::print(out, "at peak (no compute model): MAPE {:.1f}% over all runs\n",
             100 * planner::mean_abs_error(at_peak, true));

  if (o.every_choice) {
    const auto all_choices = choices(runs.runs.size(), rows.size());
    for (bool with_overhead : {true, false}) {
      std::vector<double> held_out;
      size_t within = 0;
      for (const auto& c : all_choices) {
        const double m = planner::fit_compute(base, runs.options, runs.runs, c, with_overhead).held_out_mape;
        held_out.push_back(m);
        within += m <= 0.10;
      }
      fmt::print(out, "every choice of {} fit rows ({} fits, {}): held-out MAPE min {:.1f}%, median {:.1f}%, "
                      "max {:.1f}%; {} of {} within 10%\n",
                 rows.size(), held_out.size(), with_overhead ? "efficiency and overhead" : "efficiency only",
                 100 * *std::min_element(held_out.begin(), held_out.end()), 100 * median(held_out),
                 100 * *std::max_element(held_out.begin(), held_out.end()), within, held_out.size());
    }
  }
  if (!o.out.empty()) {
    const topo::Topology fitted = planner::with_compute(base, fit.efficiency, fit.matmul_overhead_s);
    write_file_atomically(o.out, topo::topology_to_json(fitted).dump(2) + "\n", "axplan");
    fmt::print(out, "wrote {}\n", o.out);
  }
  return 0;
}

}  // namespace axonn::tools
