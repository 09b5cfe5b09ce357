// axplan validate; see validate.hpp.
#include "validate.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/planner/statistics.hpp"
#include "axonn/topology/topology_io.hpp"
#include "svg_plot.hpp"

namespace axonn::tools {
namespace {

namespace fs = std::filesystem;

struct Config {
  planner::Evaluation aware, agnostic;
  int64_t aware_rank = 0, agnostic_rank = 0;  // among all feasible candidates of that model
  std::string status = "not selected";        // measured | failed | not selected | not runnable
  std::string reason;
  std::vector<double> steps_s;
  double measured_s = 0;
  std::string name, plan_path, log_path;
  std::string retried_after;  // the first attempt's failure, when a retry succeeded
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool executable(const fs::path& p) { return fs::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0; }

// The program a command word names: a path, or a name searched on PATH ("" if none).
std::string find_program(const std::string& word) {
  if (word.find('/') != std::string::npos) return executable(word) ? word : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && executable(fs::path(d) / word)) return (fs::path(d) / word).string();
  return "";
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string tail_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty() && line.find_first_not_of(" -") != std::string::npos) last = line;
  return last;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs one configuration; fills status, reason, steps and measured time.
void run_one(Config& c, const ValidateOptions& o, const std::string& axrun, const fs::path& runs) {
  const std::string measure = (runs / (c.name + ".measure.json")).string();
  fs::remove(measure);
  std::string cmd = fmt::format("timeout --kill-after=20 {:.0f} {} {} --plan {} --steps {} --measure {} {}", o.timeout_s,
                                o.launcher, quote(axrun), quote(c.plan_path), o.steps, quote(measure), o.axrun_args);
  cmd += " >" + quote(c.log_path) + " 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  const int code = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0) {
    c.status = "failed";
    c.reason = code == 124 || code == 137 ? fmt::format("timed out after {:.0f} s", o.timeout_s)
                                          : fmt::format("exit code {}: {}", code, tail_line(c.log_path));
    return;
  }
  try {
    std::ifstream f(measure);
    if (!f) throw std::runtime_error("no measurement file " + measure);
    const nlohmann::json m = nlohmann::json::parse(f);
    for (const auto& s : m.at("steps")) c.steps_s.push_back(s.at("batch_s").get<double>());
    if (c.steps_s.empty()) throw std::runtime_error("no steps in " + measure);
  } catch (const std::exception& e) {
    c.status = "failed";
    c.reason = std::string("unreadable measurement: ") + e.what();
    return;
  }
  // The first step warms up (allocations, connections): the median of the rest.
  std::vector<double> rest(c.steps_s.size() > 1 ? c.steps_s.begin() + 1 : c.steps_s.begin(), c.steps_s.end());
  c.measured_s = median(rest);
  c.status = "measured";
}

struct ModelStats {
  double spearman = 0, kendall = 0, mape = 0, top5 = 0;
  size_t best_rank = 0;  // predicted rank (among measured) of the measured best
};

ModelStats statistics(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ModelStats s;
  s.spearman = planner::spearman(predicted, measured);
  s.kendall = planner::kendall_tau_b(predicted, measured);
  s.mape = planner::mape(predicted, measured);
  s.top5 = planner::top_k_overlap(predicted, measured, 5);
  s.best_rank = planner::predicted_rank_of_measured_best(predicted, measured);
  return s;
}

nlohmann::json stats_json(const ModelStats& s) {
  return {{"spearman", s.spearman},       {"kendall_tau_b", s.kendall},         {"mape", s.mape},
          {"top5_overlap", s.top5},       {"measured_best_predicted_rank", s.best_rank}};
}

nlohmann::json prediction_json(const planner::Evaluation& e, int64_t rank) {
  return {{"batch_s", e.batch_s}, {"compute_s", e.compute_s}, {"exposed_comm_s", e.exposed_comm_s},
          {"comm_s", e.comm_s}, {"rank", rank}};
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f.flush()) throw InputError("validate", "cannot write", tmp.string(), "a writable --out-dir");
  }
  fs::rename(tmp, path);
}

// Measured batch time by each model's predicted rank (among the measured configurations).
SvgPanel fig7_panel(const std::string& title, const std::vector<const Config*>& measured, bool aware, double best,
                    double within) {
  std::vector<const Config*> order = measured;
  std::sort(order.begin(), order.end(), [&](const Config* a, const Config* b) {
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

int run_validate(const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  // ---- input --------------------------------------------------------------------
  if (o.topology.empty())
    throw InputError("validate", "no topology", "--topology", "the cluster's topology file (axplan calibrate writes one)");
  const auto words = split_words(o.launcher);
  if (words.empty())
    throw InputError("validate", "no launcher", "--launcher", "a command prefix such as \"mpirun -np 8\"");
  if (find_program(words.front()).empty() && !(words.front() == "bash" && words.size() > 1))
    throw InputError("validate", fmt::format("launcher program '{}' not found", words.front()), "--launcher",
                "an MPI launcher on PATH (mpirun, srun) or a script path");
  if (words.front() == "bash" && words.size() > 1 && !fs::is_regular_file(words[1]))
    throw InputError("validate", fmt::format("launcher script '{}' not found", words[1]), "--launcher", "an existing script");
  if (find_program("mpirun").empty() && find_program("srun").empty())
    throw InputError("validate", "no MPI launcher on PATH", "PATH", "mpirun (Open MPI) or srun");
  std::string axrun = o.axrun;
  if (axrun.empty()) axrun = (fs::read_symlink("/proc/self/exe").parent_path() / "axrun").string();
  if (!executable(axrun))
    throw InputError("validate", fmt::format("runtime launcher '{}' not found", axrun), "--axrun",
                "the axrun program (built with LibTorch)");
  if (o.steps < 2) throw InputError("validate", "fewer than 2 steps", "--steps", "at least 2 (the first is a warm-up)");

  const model::ModelDescription m = model::load_model(o.model);
  const topo::Topology t = topo::load_topology(o.topology);
  if (o.gpus != t.total_gpus())
    throw InputError("validate",
                fmt::format("--gpus {} differs from the topology's {} nodes x {} GPUs = {}", o.gpus, t.num_nodes,
                            t.gpus_per_node, t.total_gpus()),
                o.topology, "the topology of the cluster the launcher runs on (axplan calibrate on all of it)");
  planner::PlannerOptions po;
  po.gpus = o.gpus;
  po.batch_seqs = o.batch_seqs;
  po.precision = plan::Precision::fp32();  // the runtime's dtype on CPU
  po.overlap = plan::OverlapSettings::level(o.overlap_level, 0);
  const planner::Ranking aware = planner::rank_candidates(m, t, po);
  po.placement_aware = false;
  const planner::Ranking agnostic = planner::rank_candidates(m, t, po);
  po.placement_aware = true;
  if (aware.feasible.empty())
    throw InputError("validate", "no feasible configuration: " + planner::explain_infeasible(aware, t),
                fmt::format("{} on {} GPUs", m.name, o.gpus), "a smaller model or batch");

  // ---- selection ----------------------------------------------------------------
  std::vector<Config> configs;
  for (size_t i = 0; i < aware.feasible.size(); ++i) {
    Config c;
    c.aware = aware.feasible[i];
    c.aware_rank = static_cast<int64_t>(i) + 1;
    for (size_t j = 0; j < agnostic.feasible.size(); ++j)
      if (agnostic.feasible[j].grid == c.aware.grid) c.agnostic = agnostic.feasible[j], c.agnostic_rank = j + 1;
    const auto& g = c.aware.grid;
    c.name = fmt::format("{}x{}x{}x{}x{}", g.gx, g.gy, g.gz, g.gdata, g.ginter);
    if (g.ginter != 1) {
      c.status = "not runnable";
      c.reason = "the runtime has no pipeline (ginter > 1)";
    }
    configs.push_back(c);
  }
  std::vector<size_t> runnable;
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].status != "not runnable") runnable.push_back(i);
  std::vector<size_t> selected = runnable;
  if (o.top > 0 && o.top < runnable.size()) {
    selected.assign(runnable.begin(), runnable.begin() + static_cast<long>(o.top));
    std::vector<size_t> others(runnable.begin() + static_cast<long>(o.top), runnable.end());
    std::mt19937_64 rng(o.seed);
    std::shuffle(others.begin(), others.end(), rng);
    others.resize(std::min(o.sample, others.size()));
    selected.insert(selected.end(), others.begin(), others.end());
  }

  const fs::path dir(o.out_dir), runs = dir / "runs";
  fs::create_directories(runs);
  fmt::print(out, "axplan validate: {} on {} GPUs of {}, batch {} sequences; {} feasible, {} runnable, {} selected; {} "
                  "steps each\n",
             m.name, o.gpus, t.name, o.batch_seqs, configs.size(), runnable.size(), selected.size(), o.steps);

  // ---- runs ---------------------------------------------------------------------
  for (size_t n = 0; n < selected.size(); ++n) {
    Config& c = configs[selected[n]];
    c.plan_path = (runs / (c.name + ".plan.json")).string();
    c.log_path = (runs / (c.name + ".log")).string();
    plan::save_plan(planner::make_plan(m, t, po, c.aware, c.aware_rank, static_cast<int64_t>(aware.feasible.size())),
                    c.plan_path);
    run_one(c, o, axrun, runs);
    for (int retry = 0; retry < o.retries && c.status == "failed"; ++retry) {
      fmt::print(err, "  {} failed ({}); retrying\n", c.name, c.reason);
      const std::string first = c.reason;
      c.status.clear(), c.reason.clear(), c.steps_s.clear();
      run_one(c, o, axrun, runs);
      c.reason = c.status == "failed" ? c.reason + " (retried; first: " + first + ")" : "";
      if (c.status == "measured") c.retried_after = first;
    }
    const size_t width = 24, done = (n + 1) * width / selected.size();
    fmt::print(err, "[{}{}] {:>3}/{}  {:<12} {}\n", std::string(done, '#'), std::string(width - done, '.'), n + 1,
               selected.size(), c.name,
               c.status == "measured"
                   ? fmt::format("measured {:.3f} s, predicted {:.3f} s (aware) {:.3f} s (agnostic)", c.measured_s,
                                 c.aware.batch_s, c.agnostic.batch_s)
                   : "FAILED: " + c.reason);
    err.flush();
  }

  // ---- statistics ---------------------------------------------------------------
  std::vector<const Config*> measured;
  for (const auto& c : configs)
    if (c.status == "measured") measured.push_back(&c);
  std::vector<double> meas, pa, pg;
  for (const Config* c : measured) {
    meas.push_back(c->measured_s);
    pa.push_back(c->aware.batch_s);
    pg.push_back(c->agnostic.batch_s);
  }
  const bool enough = measured.size() >= 2;
  ModelStats sa, sg;
  if (enough) sa = statistics(pa, meas), sg = statistics(pg, meas);

  nlohmann::json report = {{"model", m.name},       {"topology", o.topology}, {"gpus", o.gpus},
                           {"batch_seqs", o.batch_seqs}, {"steps", o.steps},   {"launcher", o.launcher}, {"axrun_args", o.axrun_args}, {"overlap_level", o.overlap_level},
                           {"axrun", axrun},          {"precision", "fp32"},   {"configs", nlohmann::json::array()}};
  for (const auto& c : configs) {
    const auto& g = c.aware.grid;
    nlohmann::json j = {{"name", c.name},
                        {"grid", {{"gx", g.gx}, {"gy", g.gy}, {"gz", g.gz}, {"gdata", g.gdata}, {"ginter", g.ginter}}},
                        {"status", c.status},
                        {"predicted", {{"placement_aware", prediction_json(c.aware, c.aware_rank)},
                                       {"placement_agnostic", prediction_json(c.agnostic, c.agnostic_rank)}}}};
    if (!c.reason.empty()) j["reason"] = c.reason;
    if (!c.retried_after.empty()) j["retried_after"] = c.retried_after;
    if (c.status == "measured") j["measured_batch_s"] = c.measured_s, j["measured_steps_s"] = c.steps_s;
    if (!c.log_path.empty()) j["log"] = c.log_path;
    report["configs"].push_back(j);
  }
  report["measured_configs"] = measured.size();
  if (enough)
    report["statistics"] = {{"placement_aware", stats_json(sa)}, {"placement_agnostic", stats_json(sg)}};
  write_file(dir / "report.json", report.dump(2) + "\n");

  // ---- summary and plots --------------------------------------------------------
  std::string md = fmt::format("# axplan validate: {} on {} GPUs of {}\n\nBatch {} sequences of {} tokens, fp32, overlap "
                               "level {} (no all-gather cache), {} steps per configuration (measured = median of steps 2..{}).\n"
                               "Launcher: `{}`; axrun arguments: `{}`\n\n",
                               m.name, o.gpus, t.name, o.batch_seqs, m.seq_len, o.overlap_level, o.steps, o.steps,
                               o.launcher, o.axrun_args);
  md += "Ranks in the table are among all feasible candidates (pipelines included); the statistics below are over the "
        "measured ones.\n\n";
  md += "| grid (gx,gy,gz,gdata,ginter) | measured (s) | aware: predicted (s) | aware rank | agnostic: predicted (s) | "
        "agnostic rank | status |\n|---|---|---|---|---|---|---|\n";
  std::vector<const Config*> rows;
  for (const auto& c : configs) rows.push_back(&c);
  std::stable_sort(rows.begin(), rows.end(), [](const Config* a, const Config* b) {
    const bool am = a->status == "measured", bm = b->status == "measured";
    if (am != bm) return am;
    return am ? a->measured_s < b->measured_s : a->aware_rank < b->aware_rank;
  });
  for (const Config* c : rows)
    md += fmt::format("| {} | {} | {:.3f} | {} | {:.3f} | {} | {} |\n", c->aware.grid.to_string(),
                      c->status == "measured" ? fmt::format("{:.3f}", c->measured_s) : "-", c->aware.batch_s,
                      c->aware_rank, c->agnostic.batch_s, c->agnostic_rank,
                      c->reason.empty() ? c->status : c->status + ": " + c->reason);
  if (enough) {
    md += fmt::format("\nOver the {} measured configurations:\n\n| statistic | placement-aware | placement-agnostic |\n"
                      "|---|---|---|\n",
                      measured.size());
    md += fmt::format("| Spearman rank correlation | {:.3f} | {:.3f} |\n", sa.spearman, sg.spearman);
    md += fmt::format("| Kendall tau-b | {:.3f} | {:.3f} |\n", sa.kendall, sg.kendall);
    md += fmt::format("| predicted rank of the measured best (among the measured) | {} | {} |\n", sa.best_rank,
                      sg.best_rank);
    md += fmt::format("| top-5 overlap | {:.2f} | {:.2f} |\n", sa.top5, sg.top5);
    md += fmt::format("| batch-time MAPE | {:.1f}% | {:.1f}% |\n", 100 * sa.mape, 100 * sg.mape);
    auto mark = [](bool ok) { return ok ? "met" : "NOT met"; };
    md += "\nAcceptance (issue #5), placement-aware model:\n\n";
    md += fmt::format("- measured best among the predicted top 3: {} (rank {})\n", mark(sa.best_rank <= 3), sa.best_rank);
    md += fmt::format("- Spearman >= 0.8: {} ({:.3f})\n", mark(sa.spearman >= 0.8), sa.spearman);
    md += fmt::format("- better than agnostic on Spearman and top-5 overlap: {} ({:.3f} vs {:.3f}; {:.2f} vs {:.2f})\n",
                      mark(sa.spearman > sg.spearman && sa.top5 > sg.top5), sa.spearman, sg.spearman, sa.top5, sg.top5);
    md += fmt::format("- batch-time MAPE <= 15%: {} ({:.1f}%)\n", mark(sa.mape <= 0.15), 100 * sa.mape);
  } else {
    md += fmt::format("\nOnly {} configuration(s) measured: no statistics.\n", measured.size());
  }
  md += "\nPlots: `fig7.svg` (measured batch time by predicted rank), `predicted_vs_measured.svg`.\n";
  write_file(dir / "summary.md", md);

  if (!measured.empty()) {
    double best = meas.front();
    for (double x : meas) best = std::min(best, x);
    write_file(dir / "fig7.svg",
               render_svg(fmt::format("{} on {} GPUs: measured batch time of each configuration by predicted rank",
                                      m.name, o.gpus),
                          {fig7_panel("placement-agnostic model", measured, false, best, o.efficient_within),
                           fig7_panel("placement-aware model", measured, true, best, o.efficient_within)}));
    SvgPanel scatter;
    scatter.title = "predicted vs measured batch time";
    scatter.x_label = "predicted (s)";
    scatter.y_label = "measured (s)";
    scatter.diagonal = true;
    SvgSeries a{"placement-aware", "#1f77b4", "circle", {}}, g{"placement-agnostic", "#ff7f0e", "square", {}};
    for (size_t i = 0; i < meas.size(); ++i) a.points.emplace_back(pa[i], meas[i]), g.points.emplace_back(pg[i], meas[i]);
    scatter.series = {a, g};
    write_file(dir / "predicted_vs_measured.svg", render_svg(fmt::format("{} on {} GPUs", m.name, o.gpus), {scatter}));
  }
  out << md;
  fmt::print(out, "\nwrote {}/report.json, summary.md{}\n", o.out_dir,
             measured.empty() ? "" : ", fig7.svg, predicted_vs_measured.svg");
  if (!enough) {
    err << "axplan: validate: fewer than 2 configurations measured (see " << o.out_dir << "/runs/*.log)\n";
    return 1;
  }
  return 0;
}

}  // namespace axonn::tools
