// Rendering the validation report; see validation_report.hpp.
#include "validation_report.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "axonn/common/json_reader.hpp"
#include "axonn/common/median.hpp"
#include "axonn/plan/collective_kind.hpp"
#include "axonn/topology/topology_io.hpp"
#include "svg_plot.hpp"

namespace axonn::tools {
namespace {

using planner::RunStatus;
using planner::ValidationConfig;

nlohmann::json stats_json(const planner::ModelStatistics& s) {
  return {{"spearman", s.spearman},   {"kendall_tau_b", s.kendall},         {"mape", s.mape},
          {"top5_overlap", s.top5},   {"measured_best_predicted_rank", s.best_rank}};
}

nlohmann::json ceiling_json(const planner::ScatterCeiling& c) {
  return {{"configurations", c.configurations}, {"draws", c.draws}, {"relative_sigma", c.relative_sigma},
          {"shrinkage", c.shrinkage}, {"mape", c.mape}, {"spearman", c.spearman}, {"top5_overlap", c.top5},
          {"best_first", c.best_first}, {"meets_mape", c.meets_mape}, {"meets_spearman", c.meets_spearman},
          {"meets_top5", c.meets_top5}, {"meets_all", c.meets_all}};
}

nlohmann::json prediction_json(const planner::Evaluation& e, int64_t rank) {
  nlohmann::json j = {{"batch_s", e.batch_s}, {"compute_s", e.compute_s}, {"exposed_comm_s", e.exposed_comm_s},
                      {"comm_s", e.comm_s},   {"rank", rank}, {"lent_core_speedup", e.lent_core_speedup}};
  if (e.comm.summa > 0) j["summa_s"] = e.comm.summa, j["summa_exposed_s"] = e.summa_exposed_s;
  return j;
}

// The terms of the breakdown, then unknown kinds: those measured or predicted in any of
// `configs`.
std::vector<std::string> comm_terms(const std::vector<const ValidationConfig*>& configs) {
  std::vector<std::string> terms;
  std::vector<std::string> all;
  for (const plan::BreakdownTerm& t : plan::kBreakdownTerms) all.push_back(t.name);
  all.push_back(planner::kUnknownKind);
  for (const auto& t : all)
    for (const auto* c : configs)
      if (c->measured_comm_s.count(t) || planner::predicted_term_s(c->aware, t) > 0) {
        terms.push_back(t);
        break;
      }
  return terms;
}

double measured_term_s(const ValidationConfig& c, const std::string& term) {
  const auto it = c.measured_comm_s.find(term);
  return it == c.measured_comm_s.end() ? 0.0 : it->second;
}

std::vector<const ValidationConfig*> measured(const std::vector<ValidationConfig>& configs) {
  std::vector<const ValidationConfig*> out;
  for (const auto& c : configs)
    if (c.status == RunStatus::Measured) out.push_back(&c);
  return out;
}

SvgPanel fig7_panel(const std::string& title, std::vector<const ValidationConfig*> order, bool aware, double best,
                    double within) {
  std::sort(order.begin(), order.end(), [&](const ValidationConfig* a, const ValidationConfig* b) {
    return aware ? a->aware.batch_s < b->aware.batch_s : a->agnostic.batch_s < b->agnostic.batch_s;
  });
  SvgPanel p;
  p.title = title;
  p.x_label = "predicted rank";
  p.y_label = "measured batch time (s)";
  SvgSeries eff{fmt::format("efficient (within {:.0f}% of the best)", within * 100), "#2ca02c", "square", {}};
  SvgSeries rest{"other configurations", "#555555", "circle", {}};
  for (size_t i = 0; i < order.size(); ++i)
    (order[i]->measured_s <= best * (1 + within) ? eff : rest)
        .points.emplace_back(static_cast<double>(i + 1), order[i]->measured_s);
  p.series = {eff, rest};
  return p;
}

}  // namespace

nlohmann::json validation_report_json(const ValidationRun& run, const std::vector<ValidationConfig>& configs,
                                      const std::optional<planner::ValidationStatistics>& stats) {
  nlohmann::json report = {{"model", run.model},       {"topology", run.topology},     {"gpus", run.gpus},
                           {"batch_seqs", run.batch_seqs}, {"steps", run.steps},       {"launcher", run.launcher},
                           {"axrun_args", run.axrun_args}, {"overlap_level", run.overlap_level}, {"tensor_modes", run.tensor_mode},
                           {"axrun", run.axrun},       {"precision", run.precision},          {"repeats", run.repeats},
                           {"model_file", run.model_file}, {"search_order", run.search_order},
                           {"configs", nlohmann::json::array()}};
  auto load_json = [](const std::optional<LoadAverage>& l) {
    return l ? nlohmann::json{{"one_min", l->one_min}, {"five_min", l->five_min}, {"fifteen_min", l->fifteen_min},
                              {"cores", l->cores}}
             : nlohmann::json(nullptr);
  };
  report["machine_load"] = {{"before", load_json(run.load_before)}, {"after", load_json(run.load_after)}};
  if (!run.wait_policies.empty()) report["wait_policies"] = run.wait_policies;
  if (!run.kernel_probes.empty()) {
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& k : run.kernel_probes)
      probes.push_back(k.note.empty() ? nlohmann::json{{"when", k.when},
                                                       {"matmul_shapes", k.shapes},
                                                       {"elementwise_operations", k.operations},
                                                       {"matmul_ratio", k.matmul_ratio},
                                                       {"elementwise_ratio", k.elementwise_ratio}}
                                      : nlohmann::json{{"when", k.when}, {"failed", k.note}});
    report["kernel_probes"] = probes;
  }
  for (const auto& c : configs) {
    nlohmann::json j = {{"name", c.name},
                        {"tensor_mode", c.mode},
                        {"grid", topo::grid_to_json(c.aware.grid)},
                        {"mesh", topo::mesh_to_json(topo::grid_mesh(c.aware.grid, c.aware.order))},
                        {"status", planner::run_status_name(c.status)},
                        {"predicted", {{"placement_aware", prediction_json(c.aware, c.aware_rank)},
                                       {"placement_agnostic", prediction_json(c.agnostic, c.agnostic_rank)}}}};
    if (!c.reason.empty()) j["reason"] = c.reason;
    if (!c.retried_after.empty()) j["retried_after"] = c.retried_after;
    if (c.status == RunStatus::Measured) {
      j["measured_batch_s"] = c.measured_s, j["measured_steps_s"] = c.steps_s;
      j["measured_runs_s"] = c.runs_s, j["run_spread"] = planner::run_spread(c.runs_s);
      // Per collective: the aware model's seconds per step (its slowest stage) beside rank
      // 0's busy seconds (issue to completion seen), the median step; SUMMA's moves by
      // their waits beside the model's exposed moves (planner::measured_kind_s).
      nlohmann::json by_term = nlohmann::json::object();
      for (const auto& t : comm_terms({&c}))
        by_term[t] = {{"predicted_s", planner::predicted_term_s(c.aware, t)},
                      {"measured_busy_s",
                       planner::term_measured(c, t) ? nlohmann::json(measured_term_s(c, t)) : nlohmann::json(nullptr)}};
      // The small collectives' calls per step: the model's count for rank 0's stage beside
      // rank 0's (the two must agree: a test checks them).
      if (by_term.contains("small")) {
        const auto calls = c.measured_calls.find("small");
        by_term["small"]["predicted_calls"] = c.aware.small_calls;
        by_term["small"]["measured_calls"] = calls == c.measured_calls.end() ? 0.0 : calls->second;
      }
      j["comm_by_term"] = by_term;
      nlohmann::json parts = nlohmann::json::object();
      for (const auto& p : planner::error_parts(c))
        parts[p.part] = {{"predicted_s", p.predicted_s}, {"measured_s", p.measured_s}, {"calls", p.calls}};
      j["error_parts"] = parts;
    }
    if (!c.log_path.empty()) j["log"] = c.log_path;
    report["configs"].push_back(j);
  }
  report["measured_configs"] = measured(configs).size();
  if (stats) {
    nlohmann::json modes = nlohmann::json::array();
    for (const auto& s : stats->modes) {
      auto one = [&](const planner::ModelStatistics& m) {
        return s.ranked ? stats_json(m) : nlohmann::json{{"mape", m.mape}};  // one measured: nothing to rank
      };
      modes.push_back({{"tensor_mode", s.mode},
                       {"measured", s.measured},
                       {"placement_aware", one(s.aware)},
                       {"placement_agnostic", one(s.agnostic)}});
    }
    report["statistics"] = {{"median_run_spread", stats->median_spread},
                            {"noise_floor_mape", stats->noise_floor_mape},
                            {"placement_aware", stats_json(stats->aware)},
                            {"placement_agnostic", stats_json(stats->agnostic)},
                            {"pipelines_measured", stats->pipelines_measured},
                            {"pipeline_mape", {{"placement_aware", stats->pipeline_mape_aware},
                                               {"placement_agnostic", stats->pipeline_mape_agnostic}}},
                            {"other_mape", {{"placement_aware", stats->other_mape_aware},
                                            {"placement_agnostic", stats->other_mape_agnostic}}},
                            {"per_tensor_mode", modes}};
    if (stats->ceiling) report["statistics"]["scatter_ceiling"] = ceiling_json(*stats->ceiling);
    if (const auto ratio = probes_compute_ratio(run.kernel_probes)) {
      nlohmann::json scaled = stats_json(planner::score_with_compute_scaled(configs, *ratio));
      scaled["compute_ratio"] = *ratio;
      report["statistics"]["placement_aware_compute_scaled_by_probes"] = scaled;
    }
    nlohmann::json budget = nlohmann::json::array();
    for (const auto& b : planner::error_budget(configs))
      budget.push_back({{"part", b.part}, {"predicted_s", b.predicted_s}, {"measured_s", b.measured_s},
                        {"calls", b.calls}, {"mean_error_share", b.mean_share},
                        {"mean_abs_error_share", b.mean_abs_share}, {"excess_per_call_s", b.excess_per_call_s()}});
    report["statistics"]["error_budget"] = budget;
  }
  return report;
}

std::optional<double> probes_compute_ratio(const std::vector<KernelProbe>& probes) {
  double sum = 0;
  int ran = 0;
  for (const auto& k : probes)
    if (k.note.empty() && k.matmul_ratio > 0) sum += k.matmul_ratio, ++ran;
  if (ran == 0) return std::nullopt;
  return sum / ran;
}

EarlierReport read_validation_report(const std::string& path) {
  const nlohmann::json j = read_json_file("validate", path);
  ObjectReader r(j, path, "validate");
  EarlierReport out;
  ValidationRun& run = out.run;
  run.model = r.string("model");
  run.model_file = r.has("model_file") ? r.string("model_file") : run.model;  // reports before it: a shipped name
  run.search_order = r.boolean_or("search_order", false);
  run.gpus = r.positive_int("gpus");
  run.batch_seqs = r.positive_int("batch_seqs");
  run.steps = r.positive_int("steps");
  auto text = [&](const char* key) {  // may be empty
    return r.has(key) && r.raw(key).is_string() ? r.raw(key).get<std::string>() : std::string();
  };
  run.launcher = text("launcher");
  run.axrun = text("axrun");
  run.axrun_args = text("axrun_args");
  run.overlap_level = static_cast<int>(r.non_negative_int("overlap_level"));
  if (run.overlap_level > 4) r.fail("overlap_level", "out of range", "an overlap level from 0 to 4");
  run.tensor_mode = r.string_or("tensor_modes", "axonn3d");
  run.repeats = r.positive_int_or("repeats", 1);
  run.precision = r.string_or("precision", "fp32");
  if (run.precision != "fp32" && run.precision != "bf16") r.fail("precision", run.precision, "fp32 or bf16");
  if (r.has("machine_load")) {
    const nlohmann::json& load = r.raw("machine_load");
    auto one = [&](const char* key) -> std::optional<LoadAverage> {
      if (!load.is_object() || !load.contains(key) || !load[key].is_object()) return std::nullopt;
      const auto& l = load[key];
      return LoadAverage{l.value("one_min", 0.0), l.value("five_min", 0.0), l.value("fifteen_min", 0.0),
                         l.value("cores", 0u)};
    };
    run.load_before = one("before"), run.load_after = one("after");
  }
  if (r.has("wait_policies")) {
    const nlohmann::json& w = r.raw("wait_policies");
    if (!w.is_object()) r.fail("wait_policies", "not an object", "an object of policy: runs");
    for (const auto& [policy, runs] : w.items()) {
      if (!runs.is_number_integer() || runs.get<int64_t>() < 1)
        r.fail("wait_policies", fmt::format("{}'s run count is not a positive integer", policy),
               "an object of policy: runs");
      run.wait_policies[policy] = runs.get<int64_t>();
    }
  }
  if (r.has("kernel_probes"))
    for (ObjectReader& k : r.object_array("kernel_probes")) {
      KernelProbe probe;
      probe.when = k.string("when");
      if (k.has("failed")) {
        probe.note = k.string("failed");
      } else {
        probe.shapes = static_cast<size_t>(k.non_negative_int("matmul_shapes"));
        probe.operations = static_cast<size_t>(k.non_negative_int("elementwise_operations"));
        probe.matmul_ratio = k.positive_number("matmul_ratio");
        probe.elementwise_ratio = k.positive_number("elementwise_ratio");
      }
      run.kernel_probes.push_back(probe);
    }
  for (ObjectReader& c : r.object_array("configs")) {
    if (c.string("status") != run_status_name(RunStatus::Measured)) continue;
    ValidationConfig v;
    v.name = c.string("name");
    v.status = RunStatus::Measured;
    v.log_path = c.string_or("log", "");
    auto seconds = [&](const char* key) {
      std::vector<double> v;
      const nlohmann::json& a = c.raw(key);
      if (a.is_array())
        for (const auto& x : a)
          if (x.is_number() && x.get<double>() > 0) v.push_back(x.get<double>());
      if (v.empty() || v.size() != a.size()) c.fail(key, "not a list of positive seconds", "[seconds, ...]");
      return v;
    };
    v.steps_s = seconds("measured_steps_s");
    v.runs_s = seconds("measured_runs_s");
    v.measured_s = median(v.runs_s);
    const nlohmann::json& terms = c.raw("comm_by_term");
    if (!terms.is_object()) c.fail("comm_by_term", "not an object", "{term: {\"measured_busy_s\": seconds}}");
    // Reports written before the model had the small collectives call them "not_modeled".
    auto term_of = [](const std::string& term) { return term == "not_modeled" ? std::string("small") : term; };
    for (const auto& [term, t] : terms.items()) {
      if (!t.is_object() || !t.contains("measured_busy_s")) continue;
      if (t["measured_busy_s"].is_number()) v.measured_comm_s[term_of(term)] = t["measured_busy_s"].get<double>();
      else if (t["measured_busy_s"].is_null()) v.unmeasured_terms.insert(term_of(term));
    }
    // Reports written before SUMMA's moves were a term of their own summed their spans
    // into act_y, ag_z and rs_z: those terms cannot be split again, so they stay in the
    // rest of the step, unmeasured.
    if (c.string_or("tensor_mode", "") == "2d-broadcast" && v.measured_comm_s.count("summa") == 0)
      for (const char* term : {"summa", "act_y", "ag_z", "rs_z"}) {
        v.measured_comm_s.erase(term);
        v.unmeasured_terms.insert(term);
      }
    if (c.has("error_parts") && c.raw("error_parts").is_object())
      for (const auto& [part, p] : c.raw("error_parts").items()) {
        if (!p.is_object()) continue;
        auto number = [&](const char* key) {  // absent or null (NaN written by nlohmann): 0
          return p.contains(key) && p[key].is_number() ? p[key].get<double>() : 0.0;
        };
        const double measured_s = number("measured_s"), calls = number("calls");
        if (part == planner::kPipelineWait) v.measured_pipeline_wait_s = measured_s;
        else if (calls > 0) v.measured_calls[term_of(part)] = calls;
      }
    ScoredConfig scored;
    scored.mode = c.string_or("tensor_mode", "axonn3d");
    if (c.has("grid")) {
      ObjectReader g = c.object("grid");
      scored.stages = g.positive_int_or("ginter", 1), scored.data = g.positive_int_or("gdata", 1);
    }
    if (c.has("predicted")) {
      ObjectReader predicted = c.object("predicted");
      if (predicted.has("placement_aware"))
        scored.aware_batch_s = predicted.object("placement_aware").non_negative_number_or("batch_s", 0.0);
    }
    out.scored[v.name] = scored;
    out.measured[v.name] = std::move(v);
  }
  return out;
}

void require_same_sweep_settings(const ValidationRun& a, const std::string& path_a, const ValidationRun& b,
                                 const std::string& path_b, const char* module, bool same_modes,
                                 const std::string& expected) {
  const auto same = [&](const char* field, const auto& va, const auto& vb) {
    if (va != vb)
      throw InputError(module, fmt::format("the sweeps differ in {}: {} in {}, {} in {}", field, va, path_a, vb, path_b),
                       path_b + ": " + field, expected);
  };
  same("model", a.model, b.model);
  same("gpus", a.gpus, b.gpus);
  same("batch_seqs", a.batch_seqs, b.batch_seqs);
  same("steps", a.steps, b.steps);
  same("overlap_level", a.overlap_level, b.overlap_level);
  same("precision", a.precision, b.precision);
  same("launcher", a.launcher, b.launcher);
  if (!same_modes) return;
  same("tensor_modes", a.tensor_mode, b.tensor_mode);
  same("search_order", a.search_order, b.search_order);
}

std::string ceiling_values(const planner::ScatterCeiling& c, const char* sep) {
  return fmt::format("{:.1f}%{}{:.3f}{}{:.2f}{}{:.0f}%", 100 * c.mape, sep, c.spearman, sep, c.top5, sep,
                     100 * c.best_first);
}

std::string validation_summary(const ValidationRun& run, const std::vector<ValidationConfig>& configs,
                               const std::optional<planner::ValidationStatistics>& stats) {
  std::string md = fmt::format(
      "# axplan validate: {} on {} GPUs of {}\n\nBatch {} sequences of {} tokens, {}, overlap level {} (no "
      "all-gather cache), {} steps per configuration (measured = median of steps 2..{}); tensor modes: {}.\nLauncher: "
      "`{}`; axrun arguments: `{}`\n\n",
      run.model, run.gpus, run.topology, run.batch_seqs, run.seq_len,
      run.precision == "bf16" ? "mixed precision (bf16)" : run.precision, run.overlap_level, run.steps, run.steps,
      run.tensor_mode, run.launcher, run.axrun_args);
  if (run.repeats > 1)
    md += fmt::format("Each configuration ran {} times, the configurations taking turns in each round; measured = the "
                      "median of its runs.\n\n",
                      run.repeats);
  if (run.load_before || run.load_after)
    md += fmt::format("Machine: {} before the sweep, {} after.\n\n",
                      run.load_before ? describe(*run.load_before) : "load unknown",
                      run.load_after ? describe(*run.load_after) : "load unknown");
  if (!run.wait_policies.empty()) {
    std::vector<std::string> parts;
    for (const auto& [policy, n] : run.wait_policies) parts.push_back(fmt::format("{} in {} runs", policy, n));
    md += fmt::format("Waiting ranks (axrun `--wait`, as each run's measurement file records it): {}.\n\n",
                      fmt::join(parts, ", "));
  }
  if (!run.kernel_probes.empty()) {
    md += "Kernel probes (the model's matmuls and element-wise operations timed again by every rank at once, `axplan "
          "calibrate --kernels-only`, one round; the probe's time over the topology's, summed over the kernels both "
          "have; below 1: the machine ran faster than calibrated):";
    for (const auto& k : run.kernel_probes)
      md += k.note.empty() ? fmt::format(" {}: matmuls {:.2f} ({} shapes), element-wise {:.2f} ({} operations);", k.when,
                                         k.matmul_ratio, k.shapes, k.elementwise_ratio, k.operations)
                           : fmt::format(" {}: failed ({});", k.when, k.note);
    md.back() = '.';
    md += "\n\n";
  }
  md += "Ranks in the table are among all feasible candidates (pipelines included); the statistics below are over the "
        "measured ones.\n\n";
  md += "| grid (gx,gy,gz,gdata,ginter) | tensor mode | measured (s) | aware: predicted (s) | aware rank | agnostic: "
        "predicted (s) | agnostic rank | status |\n|---|---|---|---|---|---|---|---|\n";
  std::vector<const ValidationConfig*> rows;
  for (const auto& c : configs) rows.push_back(&c);
  std::stable_sort(rows.begin(), rows.end(), [](const ValidationConfig* a, const ValidationConfig* b) {
    const bool am = a->status == RunStatus::Measured, bm = b->status == RunStatus::Measured;
    if (am != bm) return am;
    return am ? a->measured_s < b->measured_s : a->aware_rank < b->aware_rank;
  });
  for (const ValidationConfig* c : rows) {
    const std::string status = planner::run_status_name(c->status);
    md += fmt::format("| {} | {} | {} | {:.3f} | {} | {:.3f} | {} | {} |\n", c->aware.grid.to_string(), c->mode,
                      c->status == RunStatus::Measured ? fmt::format("{:.3f}", c->measured_s) : "-", c->aware.batch_s,
                      c->aware_rank, c->agnostic.batch_s, c->agnostic_rank,
                      c->reason.empty() ? status : status + ": " + c->reason);
  }
  if (stats) {
    const auto &sa = stats->aware, &sg = stats->agnostic;
    md += fmt::format("\nOver the {} measured configurations:\n\n| statistic | placement-aware | placement-agnostic |\n"
                      "|---|---|---|\n",
                      stats->measured);
    md += fmt::format("| Spearman rank correlation | {:.3f} | {:.3f} |\n", sa.spearman, sg.spearman);
    md += fmt::format("| Kendall tau-b | {:.3f} | {:.3f} |\n", sa.kendall, sg.kendall);
    md += fmt::format("| predicted rank of the measured best (among the measured) | {} | {} |\n", sa.best_rank,
                      sg.best_rank);
    md += fmt::format("| top-5 overlap | {:.2f} | {:.2f} |\n", sa.top5, sg.top5);
    md += fmt::format("| batch-time MAPE | {:.1f}% | {:.1f}% |\n", 100 * sa.mape, 100 * sg.mape);
    if (run.repeats > 1) {
      md += fmt::format("| run-to-run spread ((max - min) / median of a configuration's {} runs; median over the "
                        "configurations) | {:.1f}% | (the same runs) |\n",
                        run.repeats, 100 * stats->median_spread);
      md += fmt::format("| MAPE from the runs' scatter alone (what a model exact in expectation would show: the "
                        "expected error of a configuration's measured time, from its {} runs' standard deviation; "
                        "mean over the configurations) | {:.1f}% | (the same runs) |\n",
                        run.repeats, 100 * stats->noise_floor_mape);
    }
    if (const auto& c = stats->ceiling)
      md += fmt::format("| what a model exact in expectation would reach, given the runs' scatter ({:.1f}% per run, "
                        "pooled; mean of {} simulated sweeps): MAPE / Spearman / top-5 overlap / share of sweeps "
                        "with the measured best first; share of sweeps in which it meets all four targets of issue "
                        "#16 | {}; {:.0f}% | (the same runs) |\n",
                        100 * c->relative_sigma, c->draws, ceiling_values(*c, " / "), 100 * c->meets_all);
    if (const auto ratio = probes_compute_ratio(run.kernel_probes)) {
      const planner::ModelStatistics d = planner::score_with_compute_scaled(configs, *ratio);
      md += fmt::format("| the same, the aware model's compute scaled by the probes' mean matmul ratio ({:.2f}; "
                        "the calibration's drift taken out, a diagnostic: planner::score_with_compute_scaled): MAPE "
                        "/ Spearman / predicted rank of the measured best / top-5 overlap | {:.1f}% / {:.3f} / {} / "
                        "{:.2f} | - |\n",
                        *ratio, 100 * d.mape, d.spearman, d.best_rank, d.top5);
    }
    if (stats->pipelines_measured > 0)
      md += fmt::format("| MAPE of the {} pipeline grids / of the {} others | {:.1f}% / {:.1f}% | {:.1f}% / {:.1f}% |\n",
                        stats->pipelines_measured, stats->measured - stats->pipelines_measured,
                        100 * stats->pipeline_mape_aware, 100 * stats->other_mape_aware,
                        100 * stats->pipeline_mape_agnostic, 100 * stats->other_mape_agnostic);
    if (stats->modes.size() > 1) {
      md += "\nPer tensor mode, placement-aware model (placement-agnostic in brackets); a mode with one measured "
            "configuration has nothing to rank:\n\n| tensor mode | measured | Spearman | top-5 overlap | predicted rank "
            "of its best | batch-time MAPE |\n|---|---|---|---|---|---|\n";
      for (const auto& s : stats->modes)
        md += s.ranked ? fmt::format("| {} | {} | {:.3f} ({:.3f}) | {:.2f} ({:.2f}) | {} ({}) | {:.1f}% ({:.1f}%) |\n",
                                     s.mode, s.measured, s.aware.spearman, s.agnostic.spearman, s.aware.top5,
                                     s.agnostic.top5, s.aware.best_rank, s.agnostic.best_rank, 100 * s.aware.mape,
                                     100 * s.agnostic.mape)
                       : fmt::format("| {} | 1 | - | - | - | {:.1f}% ({:.1f}%) |\n", s.mode, 100 * s.aware.mape,
                                     100 * s.agnostic.mape);
    }
    const auto budget = planner::error_budget(configs);
    double mean_error = 0;
    for (const auto& b : budget) mean_error += b.mean_share;
    md += fmt::format(
        "\nPer collective and the rest of the step, where the error comes from. Each measured step is cut into parts "
        "that the runtime measures and the aware model predicts apart, and the parts' errors sum to measured - "
        "predicted. Collectives: rank 0's busy seconds (issue to completion seen, the median step; they include the "
        "wait for the slowest rank), `small` being the small collectives (layer norms, losses, vectors); `{}`: rank 0 "
        "waiting for the pipeline's messages, against the model's bubble and p2p_pipe; `p2p_seq`: the waits of the "
        "ring self-attention's shifts (in reports measured before they were traced, they stay in the rest); `summa`: "
        "the waits of SUMMA's broadcasts and reduces (2d-broadcast, issued a step ahead), against the moves the model "
        "leaves exposed; `{}`: the rest of the step. Seconds are summed over the {} configurations; `error` "
        "is (measured - predicted) / measured batch time, averaged over them (the column sums to the mean signed "
        "error, {:+.1f}%), and `|error|` its absolute value, largest first; a collective's `excess per call` is its "
        "measured minus predicted seconds over rank 0's calls:\n\n| part | predicted (s) | measured (s) | measured / "
        "predicted | error | abs(error) | calls | excess per call (ms) |\n|---|---|---|---|---|---|---|---|\n",
        planner::kPipelineWait, planner::kComputeRest, stats->measured, 100 * mean_error);
    if (run.overlap_level > 0)
      md += fmt::format("With overlap level {}, busy time overlaps compute and the model hides communication, so the "
                        "parts are not separable: `{}` absorbs the difference (run at overlap level 0 to separate "
                        "them).\n\n",
                        run.overlap_level, planner::kComputeRest);
    for (const auto& b : budget)
      md += fmt::format("| {} | {:.4f} | {:.4f} | {} | {:+.1f}% | {:.1f}% | {} | {} |\n", b.part, b.predicted_s,
                        b.measured_s, b.predicted_s > 0 ? fmt::format("{:.2f}", b.measured_s / b.predicted_s) : "-",
                        100 * b.mean_share, 100 * b.mean_abs_share, b.calls > 0 ? fmt::format("{:.0f}", b.calls) : "-",
                        b.calls > 0 ? fmt::format("{:+.2f}", 1e3 * b.excess_per_call_s()) : "-");
    if (!budget.empty())
      md += fmt::format("\nMost of the remaining error: `{}`, {:.1f}% of the batch time on average.\n",
                        budget.front().part, 100 * budget.front().mean_abs_share);
    auto mark = [](bool ok) { return ok ? "met" : "NOT met"; };
    md += "\nAcceptance (issue #5), placement-aware model:\n\n";
    md += fmt::format("- measured best among the predicted top 3: {} (rank {})\n", mark(sa.best_rank <= 3), sa.best_rank);
    md += fmt::format("- Spearman >= 0.8: {} ({:.3f})\n", mark(sa.spearman >= 0.8), sa.spearman);
    md += fmt::format("- better than agnostic on Spearman and top-5 overlap: {} ({:.3f} vs {:.3f}; {:.2f} vs {:.2f})\n",
                      mark(sa.spearman > sg.spearman && sa.top5 > sg.top5), sa.spearman, sg.spearman, sa.top5, sg.top5);
    md += fmt::format("- batch-time MAPE <= 15%: {} ({:.1f}%)\n", mark(sa.mape <= 0.15), 100 * sa.mape);
  } else {
    md += fmt::format("\nOnly {} configuration(s) measured: no statistics.\n", measured(configs).size());
  }
  md += "\nPlots: `fig7.svg` (measured batch time by predicted rank), `predicted_vs_measured.svg`.\n";
  return md;
}

std::string fig7_svg(const ValidationRun& run, const std::vector<ValidationConfig>& configs) {
  const auto m = measured(configs);
  double best = m.front()->measured_s;
  for (const auto* c : m) best = std::min(best, c->measured_s);
  return render_svg(
      fmt::format("{} on {} GPUs: measured batch time of each configuration by predicted rank", run.model, run.gpus),
      {fig7_panel("placement-agnostic model", m, false, best, run.efficient_within),
       fig7_panel("placement-aware model", m, true, best, run.efficient_within)});
}

std::string predicted_vs_measured_svg(const ValidationRun& run, const std::vector<ValidationConfig>& configs) {
  SvgPanel scatter;
  scatter.title = "predicted vs measured batch time";
  scatter.x_label = "predicted (s)";
  scatter.y_label = "measured (s)";
  scatter.diagonal = true;
  SvgSeries a{"placement-aware", "#1f77b4", "circle", {}}, g{"placement-agnostic", "#ff7f0e", "square", {}};
  for (const auto* c : measured(configs))
    a.points.emplace_back(c->aware.batch_s, c->measured_s), g.points.emplace_back(c->agnostic.batch_s, c->measured_s);
  scatter.series = {a, g};
  return render_svg(fmt::format("{} on {} GPUs", run.model, run.gpus), {scatter});
}

}  // namespace axonn::tools
