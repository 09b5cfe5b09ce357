// axplan matmul-shapes and fit-matmul; see fit_matmul.hpp.
#include "fit_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"
#include "axonn/model/model_description.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/matmul_fit.hpp"
#include "axonn/topology/topology_io.hpp"
#include "fit_published.hpp"

namespace axonn::tools {
namespace {

struct GroupedShape {
  planner::MatmulShape shape;
  std::string group;
};

void add_unique(std::vector<GroupedShape>& all, const std::vector<planner::MatmulShape>& shapes,
                const std::string& group) {
  for (const auto& s : shapes)
    if (std::none_of(all.begin(), all.end(), [&](const GroupedShape& g) { return g.shape == s; }))
      all.push_back({s, group});
}

planner::MatmulShape shape_of(const topo::MatmulTiming& t) { return {t.m, t.k, t.n, t.batch}; }

// Mean and worst |relative error| of a set of products, and the error of their sum (a
// step runs each product once per layer: its compute error is nearer the sum's).
struct ErrorSummary {
  size_t count = 0;
  double sum = 0, worst = 0;
  double measured_s = 0, predicted_s = 0;
  void add(double measured, double predicted) {
    const double e = predicted / measured - 1.0;
    ++count;
    sum += std::abs(e);
    worst = std::max(worst, std::abs(e));
    measured_s += measured;
    predicted_s += predicted;
  }
  std::string text() const {
    return count == 0 ? "-"
                      : fmt::format("{:.1f}% (worst {:.0f}%, {} shapes; their sum {:+.1f}%)", 100 * sum / count,
                                    100 * worst, count, 100 * (predicted_s / measured_s - 1.0));
  }
};

}  // namespace

int run_matmul_shapes(const MatmulShapesOptions& o, std::ostream& out) {
  if (o.runs.empty() && o.models.empty())
    throw InputError("axplan", "no shapes asked for", "axplan matmul-shapes", "--runs and/or --model");
  std::vector<GroupedShape> all;
  if (!o.runs.empty()) {
    const PublishedRuns runs = read_published_runs(o.runs);
    for (const auto& r : runs.runs) {
      if (r.microbatch_seqs < 1)
        throw InputError("axplan", "micro-batch 0 (the planner's rule)", o.runs + ": /settings/microbatch_seqs",
                         "a micro-batch of 1 or more sequences, whose products matmul-shapes can list");
      const int64_t mb = r.microbatch_seqs;
      std::vector<planner::MatmulShape> shapes;
      for (const auto& l : r.model.layers)
        for (const auto& v : {planner::forward_matmuls(l, r.grid, mb, r.model.seq_len),
                              planner::backward_input_matmuls(l, r.grid, mb, r.model.seq_len),
                              planner::backward_weight_matmuls(l, r.grid, mb, r.model.seq_len)})
          shapes.insert(shapes.end(), v.begin(), v.end());
      add_unique(all, shapes, runs.name + ":" + r.name);
    }
  }
  for (const auto& name : o.models) {
    const model::ModelDescription m = model::load_model(name);
    for (int64_t g : o.gpus) add_unique(all, planner::model_matmul_shapes(m, g, o.batch_seqs), "zoo:" + m.name);
  }
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& g : all)
    shapes.push_back({{"m", g.shape.m}, {"k", g.shape.k}, {"n", g.shape.n}, {"batch", g.shape.batch},
                      {"group", g.group}});
  const nlohmann::json j = {{"format", "axonn-matmul-shapes"},
                            {"version", 1},
                            {"source", fmt::format("axplan matmul-shapes: runs '{}', models [{}] on every grid of [{}] "
                                                   "GPUs at {} sequences",
                                                   o.runs, fmt::join(o.models, ", "), fmt::join(o.gpus, ", "),
                                                   o.batch_seqs)},
                            {"shapes", shapes}};
  if (o.out.empty()) {
    out << j.dump(1) << "\n";
  } else {
    write_file_atomically(o.out, j.dump(1) + "\n", "axplan");
    fmt::print(out, "wrote {} shapes to {}\n", all.size(), o.out);
  }
  return 0;
}

MatmulTimings read_matmul_timings(const std::string& path) {
  const nlohmann::json j = read_json_file("axplan", path);
  ObjectReader r(j, path, "axplan");
  if (r.string("format") != "axonn-matmul-timings") r.fail("format", "not a timings file", "\"axonn-matmul-timings\"");
  if (r.integer("version") != 1) r.fail("version", "unknown version", "1");
  MatmulTimings t;
  t.device = r.string("device");
  t.software = r.string("software");
  t.dtype = r.string("dtype");
  t.method = r.string("method");
  for (auto& s : r.object_array("timings")) {
    TimedShape ts;
    constexpr int64_t kMost = int64_t{1} << 24;
    ts.timing.m = s.positive_int_at_most("m", kMost);
    ts.timing.k = s.positive_int_at_most("k", kMost);
    ts.timing.n = s.positive_int_at_most("n", kMost);
    ts.timing.batch = s.positive_int_at_most("batch", kMost);
    ts.timing.seconds = s.positive_number("seconds");
    ts.spread = s.non_negative_number("spread");
    ts.group = s.string("group");
    s.finish();
    t.shapes.push_back(ts);
  }
  if (t.shapes.size() < 2) r.fail("timings", fmt::format("{} products", t.shapes.size()), "at least 2");
  if (r.has("elementwise"))
    for (auto& e : r.object_array("elementwise")) {
      TimedElementwise te;
      te.op = e.one_of("op", topo::elementwise_op_names());
      te.elements = e.positive_int_at_most("elements", int64_t{1} << 40);
      te.forward_s = e.positive_number("forward_s");
      if (topo::elementwise_forward_only(te.op)) {  // no backward: the topology would refuse one
        te.backward_s = e.non_negative_number("backward_s");
        if (te.backward_s != 0) e.fail("backward_s", fmt::format("{}", te.backward_s), "0: " + te.op + " has no backward");
      } else {
        te.backward_s = e.positive_number("backward_s");
      }
      e.finish();
      t.elementwise.push_back(te);
    }
  r.finish();
  return t;
}

int run_fit_matmul(const FitMatmulOptions& o, std::ostream& out) {
  const MatmulTimings timings = read_matmul_timings(o.timings);
  const topo::Topology base = topo::load_topology(o.topology);
  for (const auto& g : o.fit_groups)
    if (std::none_of(timings.shapes.begin(), timings.shapes.end(), [&](const TimedShape& s) { return s.group == g; }))
      throw InputError("axplan", "no product of group \"" + g + "\"", "--fit-groups, " + o.timings,
                       "a group the timings file has");
  auto fitted_on = [&](const std::string& group) {
    return o.fit_groups.empty() || std::find(o.fit_groups.begin(), o.fit_groups.end(), group) != o.fit_groups.end();
  };
  std::vector<topo::MatmulTiming> fit_set;
  for (const auto& s : timings.shapes)
    if (fitted_on(s.group)) fit_set.push_back(s.timing);
  const double bw = base.compute.memory_bytes_per_s;
  const planner::MatmulFit fit = planner::fit_matmul_roofline(
      fit_set, bw,
      fmt::format("{} ({}, memory side of --topology {})", o.timings,
                  o.fit_groups.empty() ? "every group" : fmt::format("--fit-groups {}", fmt::join(o.fit_groups, ",")),
                  o.topology));

  topo::Topology fitted = base;
  fitted.compute.matmul_flops_per_s = fit.rate_flops_per_s;
  fitted.compute.matmul_overhead_s = fit.overhead_s;
  fitted.compute.matmul_table.clear();
  if (!o.description.empty()) fitted.description = o.description;
  fitted.compute.elementwise.clear();  // without --with-elementwise: the roofline's bytes
  if (o.with_elementwise) {
    if (timings.elementwise.empty())
      throw InputError("axplan", "no element-wise timings", o.timings + ": /elementwise",
                       "the timed operations that --with-elementwise writes");
    for (const auto& e : timings.elementwise)
      fitted.compute.elementwise[e.op] = {e.forward_s / static_cast<double>(e.elements),
                                          e.backward_s / static_cast<double>(e.elements)};
  }

  fmt::print(out, "{} products timed on {} ({}, {}); {}\n", timings.shapes.size(), timings.device, timings.dtype,
             timings.software, timings.method);
  fmt::print(out, "fit on {} products ({}): matmul_flops_per_s = {:.1f} TFLOP/s = {:.4f} x peak, "
                  "matmul_overhead_s = {:.2f} us, memory side at {:.0f} GB/s ({} memory-bound; {} refits)\n",
             fit_set.size(), o.fit_groups.empty() ? "every group" : fmt::format("{}", fmt::join(o.fit_groups, ", ")),
             fit.rate_flops_per_s / 1e12, fit.rate_flops_per_s / base.peak_flops_per_s, fit.overhead_s * 1e6,
             bw / 1e9, fit.memory_bound, fit.refits);

  // Errors of the fit and of the base topology's own model (its table left out), by
  // group and by size.
  topo::Topology base_model = base;
  base_model.compute.matmul_table.clear();
  const planner::MatmulTimes fitted_s(fitted), base_s(base_model);
  ErrorSummary fit_in, fit_out, base_all;
  std::map<std::string, ErrorSummary> by_group;
  std::map<int, ErrorSummary> by_decade;  // floor(log10(FLOPs))
  struct Worst {
    double predicted_s;
    const TimedShape* s;
    double error() const { return predicted_s / s->timing.seconds - 1.0; }
  };
  std::vector<Worst> worst;
  double spread_sum = 0;
  for (const auto& s : timings.shapes) {
    const planner::MatmulShape shape = shape_of(s.timing);
    const double p = fitted_s(shape);
    (fitted_on(s.group) ? fit_in : fit_out).add(s.timing.seconds, p);
    by_group[s.group].add(s.timing.seconds, p);
    by_decade[static_cast<int>(std::floor(std::log10(shape.flops())))].add(s.timing.seconds, p);
    base_all.add(s.timing.seconds, base_s(shape));
    worst.push_back({p, &s});
    spread_sum += s.spread;
  }
  if (!fit.settled)
    fmt::print(out, "warning: the products' sides (compute- or memory-bound) still changed after {} refits; the "
                    "rate below puts some on the other side from the fit's\n",
               fit.refits);
  fmt::print(out, "MAPE: fitted {}; held out {}\n", fit_in.text(), fit_out.text());
  fmt::print(out, "{}'s own model (matmul_flops_per_s {:.1f} TFLOP/s, overhead {:.2f} us) on every product: {}\n",
             base.name, (base.compute.matmul_flops_per_s > 0 ? base.compute.matmul_flops_per_s : base.peak_flops_per_s) / 1e12,
             base.compute.matmul_overhead_s * 1e6, base_all.text());
  fmt::print(out, "repeat spread (max - min) / median: mean {:.1f}%\n\n",
             100 * spread_sum / static_cast<double>(timings.shapes.size()));
  fmt::print(out, "{:<36} {}\n", "group (* fitted on)", "MAPE of the fit");
  for (const auto& [g, e] : by_group)
    fmt::print(out, "{:<36} {}\n",
               g + (fitted_on(g) ? " *" : ""),
               e.text());
  fmt::print(out, "\n{:<36} {}\n", "FLOPs per product", "MAPE of the fit");
  for (const auto& [d, e] : by_decade) fmt::print(out, "{:<36} {}\n", fmt::format("1e{} to 1e{}", d, d + 1), e.text());
  std::sort(worst.begin(), worst.end(),
            [](const Worst& a, const Worst& b) { return std::abs(a.error()) > std::abs(b.error()); });
  fmt::print(out, "\nworst products (m x k x n, batch: measured, predicted)\n");
  for (size_t i = 0; i < std::min<size_t>(5, worst.size()); ++i) {
    const auto& t = worst[i].s->timing;
    fmt::print(out, "  {} x {} x {}, {} ({}): {:.2f} us, {:.2f} us ({:+.0f}%)\n", t.m, t.k, t.n, t.batch,
               worst[i].s->group, t.seconds * 1e6, worst[i].predicted_s * 1e6, 100 * worst[i].error());
  }
  if (!timings.elementwise.empty() && bw > 0) {
    fmt::print(out, "\nelement-wise operations: measured vs the roofline's bytes / {:.0f} GB/s (ps per element)\n",
               bw / 1e9);
    fmt::print(out, "{:<15} {:>12} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}\n", "op", "elements", "fwd meas", "fwd roof",
               "ratio", "bwd meas", "bwd roof", "ratio");
    for (const auto& e : timings.elementwise) {
      const planner::ElementwiseBytes b = planner::elementwise_bytes(e.op);
      const double n = static_cast<double>(e.elements), f = e.forward_s / n, r = b.forward / bw;
      const double fb = e.backward_s / n, rb = b.backward / bw;
      fmt::print(out, "{:<15} {:>12} {:>10.2f} {:>10.2f} {:>7.2f} {:>10.2f} {:>10.2f} {:>7}\n", e.op, e.elements,
                 f * 1e12, r * 1e12, f / r, fb * 1e12, rb * 1e12, rb > 0 ? fmt::format("{:.2f}", fb / rb) : "-");
    }
  }
  if (!o.out.empty()) {
    write_file_atomically(o.out, topo::topology_to_json(fitted).dump(2) + "\n", "axplan");
    fmt::print(out, "wrote {}\n", o.out);
  }
  return 0;
}

}  // namespace axonn::tools
