// axplan validate; see validate.hpp.
#include "validate.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/load_average.hpp"
#include "axonn/common/median.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/calibration.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/planner/validation.hpp"
#include "axonn/topology/topology_io.hpp"
#include "validation_report.hpp"

namespace axonn::tools {
namespace {

namespace fs = std::filesystem;

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

// Runs `LAUNCHER COMMAND` under `timeout` (--timeout), its output into `log`; returns
// its exit code (124 or 137 when it timed out, 128 + the signal when one ended it).
int run_launched(const ValidateOptions& o, const std::string& command, const std::string& log) {
  const std::string cmd = fmt::format("timeout --kill-after=20 {:.0f} {} {} >{} 2>&1 </dev/null", o.timeout_s,
                                      o.launcher, command, quote(log));
  const int status = std::system(cmd.c_str());
  return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs one configuration as `LAUNCHER AXRUN --plan P ...`; fills status, reason, steps
// and the measured time, and counts the run under the wait policy its measurement names.
void run_one(planner::ValidationConfig& c, const ValidateOptions& o, const std::string& axrun,
             const std::string& plan_path, const fs::path& runs, std::map<std::string, int64_t>& wait_policies) {
  const std::string measure = (runs / (c.name + ".measure.json")).string();
  fs::remove(measure);
  const int code = run_launched(o, fmt::format("{} --plan {} --steps {} --measure {} {}", quote(axrun), quote(plan_path),
                                               o.steps, quote(measure), o.axrun_args),
                                 c.log_path);
  std::vector<double> steps;
  std::vector<planner::CommByTerm> comm;  // each step's but the first (as measured_batch_s)
  std::vector<planner::CommByTerm> calls;  // the same steps' collective calls
  std::vector<double> pipeline_wait;      // the same steps' recv_wait_s
  if (code != 0) {
    c.status = planner::RunStatus::Failed;
    c.reason = code == 124 || code == 137 ? fmt::format("timed out after {:.0f} s", o.timeout_s)
                                          : fmt::format("exit code {}: {}", code, tail_line(c.log_path));
    return;
  }
  try {
    std::ifstream f(measure);
    if (!f) throw std::runtime_error("no measurement file " + measure);
    const nlohmann::json m = nlohmann::json::parse(f);
    for (const auto& s : m.at("steps")) {
      steps.push_back(s.at("batch_s").get<double>());
      if (!(std::isfinite(steps.back()) && steps.back() > 0))
        throw std::runtime_error(fmt::format("step {} of {} took {} s", steps.size(), measure, steps.back()));
      if (steps.size() == 1 || !s.contains("breakdown")) continue;
      std::map<std::string, double> seconds, count;
      for (const auto& [kind, stats] : s.at("breakdown").at("by_kind").items()) {
        seconds[kind] = planner::measured_kind_s(kind, stats.at("busy_s").get<double>(), stats.value("exposed_s", 0.0));
        count[kind] = stats.value("count", 0.0);
      }
      comm.push_back(planner::comm_by_term(seconds));
      calls.push_back(planner::comm_by_term(count));
      pipeline_wait.push_back(s.value("recv_wait_s", 0.0));
    }
    if (steps.empty()) throw std::runtime_error("no steps in " + measure);
    if (m.contains("wait_policy") && m["wait_policy"].is_string()) ++wait_policies[m["wait_policy"].get<std::string>()];
  } catch (const std::exception& e) {
    c.status = planner::RunStatus::Failed;
    c.reason = std::string("unreadable measurement: ") + e.what();
    return;
  }
  c.steps_s.insert(c.steps_s.end(), steps.begin(), steps.end());
  c.steps_comm_s.insert(c.steps_comm_s.end(), comm.begin(), comm.end());
  c.measured_comm_s = planner::median_by_term(c.steps_comm_s);
  c.steps_calls.insert(c.steps_calls.end(), calls.begin(), calls.end());
  c.measured_calls = planner::median_by_term(c.steps_calls);
  c.steps_pipeline_wait_s.insert(c.steps_pipeline_wait_s.end(), pipeline_wait.begin(), pipeline_wait.end());
  c.measured_pipeline_wait_s = c.steps_pipeline_wait_s.empty() ? 0.0 : median(c.steps_pipeline_wait_s);
  c.runs_s.push_back(planner::measured_batch_s(steps));
  c.measured_s = median(c.runs_s);
  c.status = planner::RunStatus::Measured;
  c.reason.clear();
}

// One kernel probe (--kernel-probes): `LAUNCHER AXPLAN calibrate --kernels-only` on the
// cluster, one round, its kernel times over the topology's, in the sweep's precision
// (bf16: the bf16 kernels, where the topology has them).
KernelProbe probe_kernels(const ValidateOptions& o, const topo::Topology& t, const fs::path& runs, int index,
                          const std::string& when) {
  const bool bf16 = o.precision == "bf16" && t.compute_bf16;
  const int64_t bytes = bf16 ? 2 : 4;
  KernelProbe k;
  k.when = when;
  const std::string file = (runs / fmt::format("kernel-probe-{}.json", index)).string(),
                    log = (runs / fmt::format("kernel-probe-{}.log", index)).string(),
                    axplan = fs::read_symlink("/proc/self/exe").string();
  fs::remove(file);
  const int code = run_launched(
      o,
      fmt::format("{} calibrate --kernels-only --kernel-dtypes {} --gpus-per-node {} --model {} --batch-seqs {} "
                  "--kernel-rounds 1 --base {} -o {}",
                  quote(axplan), bf16 ? "fp32,bf16" : "fp32", t.gpus_per_node, quote(o.model), o.batch_seqs,
                  quote(o.topology), quote(file)),
      log);
  if (code != 0) {
    k.note = fmt::format("exit code {}: {}", code, tail_line(log));
    return k;
  }
  try {
    const topo::Topology probed = topo::load_topology(file);
    const planner::KernelTimeRatio r = planner::kernel_time_ratio(t.compute_for(bytes), probed.compute_for(bytes));
    if (r.shapes == 0 && r.operations == 0) throw InputError("validate", "no kernel in common", file, "the topology's");
    k.shapes = r.shapes, k.operations = r.operations, k.matmul_ratio = r.matmul, k.elementwise_ratio = r.elementwise;
  } catch (const Error& e) {
    k.note = e.what();
  }
  return k;
}

// Exits with InputError unless the launcher, an MPI launcher and axrun can be found.
std::string check_programs(const ValidateOptions& o) {
  if (o.topology.empty())
    throw InputError("validate", "no topology", "--topology", "the cluster's topology file (axplan calibrate writes one)");
  const auto words = split_words(o.launcher);
  if (words.empty())
    throw InputError("validate", "no launcher", "--launcher", "a command prefix such as \"mpirun -np 8\"");
  if (find_program(words.front()).empty() && !(words.front() == "bash" && words.size() > 1))
    throw InputError("validate", fmt::format("launcher program '{}' not found", words.front()), "--launcher",
                     "an MPI launcher on PATH (mpirun, srun) or a script path");
  if (words.front() == "bash" && words.size() > 1 && !fs::is_regular_file(words[1]))
    throw InputError("validate", fmt::format("launcher script '{}' not found", words[1]), "--launcher",
                     "an existing script");
  if (find_program("mpirun").empty() && find_program("srun").empty())
    throw InputError("validate", "no MPI launcher on PATH", "PATH", "mpirun (Open MPI) or srun");
  std::string axrun = o.axrun;
  if (axrun.empty()) axrun = (fs::read_symlink("/proc/self/exe").parent_path() / "axrun").string();
  if (!executable(axrun))
    throw InputError("validate", fmt::format("runtime launcher '{}' not found", axrun), "--axrun",
                     "the axrun program (built with LibTorch)");
  if (o.steps < 2) throw InputError("validate", "fewer than 2 steps", "--steps", "at least 2 (the first is a warm-up)");
  return axrun;
}

// With --rescore: an earlier measurement of the configuration taken over.
void take_measurement(planner::ValidationConfig& c, const planner::ValidationConfig& measured) {
  c.status = planner::RunStatus::Measured;
  c.steps_s = measured.steps_s;
  c.runs_s = measured.runs_s;
  c.measured_s = measured.measured_s;
  c.measured_comm_s = measured.measured_comm_s;
  c.measured_calls = measured.measured_calls;
  c.unmeasured_terms = measured.unmeasured_terms;
  c.measured_pipeline_wait_s = measured.measured_pipeline_wait_s;
  c.log_path = measured.log_path;
}

// InputError unless the topology `where` names has `gpus` GPUs.
void require_cluster_size(int64_t gpus, const topo::Topology& t, const std::string& where) {
  if (gpus != t.total_gpus())
    throw InputError("validate",
                     fmt::format("--gpus {} differs from the topology's {} nodes x {} GPUs = {}", gpus, t.num_nodes,
                                 t.gpus_per_node, t.total_gpus()),
                     where, "the topology of the cluster the launcher runs on (axplan calibrate on all of it)");
}

// The rankings validate scores: the aware and agnostic models' feasible candidates of
// `o`'s modes on `t`, as validation configurations.
struct Ranked {
  planner::PlannerOptions po;
  planner::Ranking aware;
  std::vector<planner::ValidationConfig> configs;
};
Ranked rank_for_validation(const model::ModelDescription& m, const topo::Topology& t, const ValidateOptions& o) {
  Ranked r;
  planner::PlannerOptions& po = r.po;
  po.gpus = o.gpus;
  po.batch_seqs = o.batch_seqs;
  po.precision = o.precision == "bf16" ? plan::Precision::bf16() : plan::Precision::fp32();
  po.overlap = plan::OverlapSettings::level(o.overlap_level, 0);
  planner::select_tensor_modes(po, o.tensor_mode, "--tensor-mode");
  po.search_order = o.search_order;  // the agnostic ranking below does not search (nothing to find)
  r.aware = planner::rank_candidates(m, t, po);
  po.placement_aware = false;
  const planner::Ranking agnostic = planner::rank_candidates(m, t, po);
  po.placement_aware = true;
  if (r.aware.feasible.empty())
    throw InputError("validate", "no feasible configuration: " + planner::explain_infeasible(r.aware, t),
                     fmt::format("{} on {} GPUs", m.name, o.gpus), "a smaller model or batch");
  r.configs = planner::validation_configs(r.aware, agnostic, [](const topo::Grid&) { return true; }, "");
  return r;
}

// The earlier report's measurements taken over by the configurations of the same name;
// returns the measured ones that `configs` does not hold.
std::vector<std::string> take_measurements(std::vector<planner::ValidationConfig>& configs, const EarlierReport& e) {
  std::set<std::string> taken;
  for (auto& c : configs)
    if (auto it = e.measured.find(c.name); it != e.measured.end()) {
      take_measurement(c, it->second);
      taken.insert(c.name);
    }
  std::vector<std::string> left_out;
  for (const auto& [name, c] : e.measured)
    if (!taken.count(name)) left_out.push_back(name);
  return left_out;
}

// The settings of the sweep an earlier report holds, as validate's options.
ValidateOptions options_of(const EarlierReport& e, const std::string& report, ValidateOptions o) {
  const ValidationRun& r = e.run;
  if (r.search_order)
    throw InputError("validate", "its configurations ran in the placement orders a search chose, which it does not record",
                     "--rescore " + report, "a report of a sweep without --search-order");
  o.model = r.model_file, o.gpus = r.gpus, o.batch_seqs = r.batch_seqs, o.steps = r.steps;
  o.overlap_level = r.overlap_level, o.tensor_mode = r.tensor_mode, o.repeats = r.repeats;
  o.launcher = r.launcher, o.axrun_args = r.axrun_args, o.precision = r.precision;
  return o;
}

}  // namespace

int run_validate(const ValidateOptions& options, std::ostream& out, std::ostream& err) {
  // --rescore: the earlier report's settings and measurements; nothing is run.
  std::optional<EarlierReport> earlier;
  ValidateOptions o = options;
  std::string axrun;
  if (!options.rescore.empty()) {
    if (o.topology.empty())
      throw InputError("validate", "no topology", "--topology", "the topology to score the measurements under");
    earlier = read_validation_report(options.rescore);
    o = options_of(*earlier, options.rescore, o);
    axrun = earlier->run.axrun;
  } else {
    if (o.gpus < 1 || o.batch_seqs < 1)
      throw InputError("validate", "no cluster size or batch", "--gpus, --batch-seqs",
                       "both (positive integers), unless --rescore gives them");
    axrun = check_programs(o);
  }
  const model::ModelDescription m = model::load_model(o.model);
  if (auto why = plan::runtime_problem(m)) throw InputError("validate", *why, "--model " + o.model, "a GPT model");
  const topo::Topology t = topo::load_topology(o.topology);
  require_cluster_size(o.gpus, t, o.topology);
  Ranked ranked = rank_for_validation(m, t, o);
  const planner::PlannerOptions& po = ranked.po;
  const planner::Ranking& aware = ranked.aware;
  auto& configs = ranked.configs;
  const std::vector<size_t> selected =
      planner::select_for_validation(configs, o.top, o.sample, o.seed, o.tensor_mode == "all");
  size_t runnable = 0;
  for (const auto& c : configs) runnable += c.status != planner::RunStatus::NotRunnable;
  const fs::path dir(o.out_dir), runs = dir / "runs";
  fs::create_directories(runs);
  if (earlier)
    fmt::print(out, "axplan validate --rescore {}: its {} measured configurations under {} ({} feasible)\n",
               options.rescore, earlier->measured.size(), o.topology, configs.size());
  else
    fmt::print(out,
               "axplan validate: {} on {} GPUs of {}, batch {} sequences; {} feasible, {} runnable, {} selected; {} "
               "steps each\n",
               m.name, o.gpus, t.name, o.batch_seqs, configs.size(), runnable, selected.size(), o.steps);

  // --repeats R: R rounds, the configurations taking turns in each, so that drift in the
  // machine's speed hits all alike; a configuration that failed is not run again.
  std::optional<LoadAverage> load_before = read_load_average(), load_after;
  std::vector<KernelProbe> probes;
  std::map<std::string, int64_t> wait_policies;  // runs by axrun's wait policy
  auto probe = [&](const std::string& when) {
    if (!o.kernel_probes || earlier) return;
    probes.push_back(probe_kernels(o, t, runs, static_cast<int>(probes.size()), when));
    const KernelProbe& k = probes.back();
    fmt::print(err, "  kernel probe {}: {}\n", when,
               k.note.empty() ? fmt::format("matmuls {:.2f}, element-wise {:.2f} of the topology's", k.matmul_ratio,
                                            k.elementwise_ratio)
                              : "failed: " + k.note);
  };
  probe("before the sweep");
  if (earlier) {
    for (const auto& name : take_measurements(configs, *earlier))
      fmt::print(err, "  {} was measured but is not feasible under {}: left out\n", name, o.topology);
    load_before = earlier->run.load_before, load_after = earlier->run.load_after;
    probes = earlier->run.kernel_probes;  // the machine's rate during the sweep, as probed then
    wait_policies = earlier->run.wait_policies;
  }
  for (int64_t round = 1; round <= o.repeats && !earlier; ++round) {
    for (size_t n = 0; n < selected.size(); ++n) {
      auto& c = configs[selected[n]];
      if (round > 1 && c.status != planner::RunStatus::Measured) continue;
      const std::string plan_path = (runs / (c.name + ".plan.json")).string();
      c.log_path = (runs / (c.name + (round > 1 ? fmt::format(".run{}", round) : "") + ".log")).string();
      if (round == 1)
        plan::save_plan(
            planner::make_plan(m, t, po, c.aware, c.aware_rank, static_cast<int64_t>(aware.feasible.size())),
            plan_path);
      run_one(c, o, axrun, plan_path, runs, wait_policies);
      for (int retry = 0; retry < o.retries && c.status == planner::RunStatus::Failed; ++retry) {
        fmt::print(err, "  {} failed ({}); retrying\n", c.name, c.reason);
        const std::string first = c.reason;
        run_one(c, o, axrun, plan_path, runs, wait_policies);
        if (c.status == planner::RunStatus::Failed) c.reason += " (retried; first: " + first + ")";
        else c.retried_after = first;
      }
      const size_t total = selected.size() * static_cast<size_t>(o.repeats),
                   at = static_cast<size_t>(round - 1) * selected.size() + n + 1, width = 24,
                   done = at * width / total;
      fmt::print(err, "[{}{}] {:>3}/{}  {:<12} {}\n", std::string(done, '#'), std::string(width - done, '.'), at, total,
                 c.name,
                 c.status == planner::RunStatus::Measured
                     ? fmt::format("measured {:.3f} s, predicted {:.3f} s (aware) {:.3f} s (agnostic)",
                                   c.runs_s.back(), c.aware.batch_s, c.agnostic.batch_s)
                     : "FAILED: " + c.reason);
      err.flush();
    }
    probe(fmt::format("after round {}", round));
  }
  if (!earlier) load_after = read_load_average();

  size_t measured = 0;
  for (const auto& c : configs) measured += c.status == planner::RunStatus::Measured;
  std::optional<planner::ValidationStatistics> stats;
  if (measured >= 2) stats = planner::compare_with_measurements(configs);
  ValidationRun run{m.name,    o.topology,    o.launcher,        axrun,        o.axrun_args,
                          o.gpus,    o.batch_seqs,  m.seq_len,         o.steps,      o.overlap_level,
                          o.efficient_within, o.tensor_mode, o.repeats, load_before, load_after,
                          o.model,   o.search_order, probes,         wait_policies, o.precision};
  write_file_atomically((dir / "report.json").string(), validation_report_json(run, configs, stats).dump(2) + "\n",
                        "validate");
  const std::string md = validation_summary(run, configs, stats);
  write_file_atomically((dir / "summary.md").string(), md, "validate");
  if (measured > 0) {
    write_file_atomically((dir / "fig7.svg").string(), fig7_svg(run, configs), "validate");
    write_file_atomically((dir / "predicted_vs_measured.svg").string(), predicted_vs_measured_svg(run, configs),
                          "validate");
  }
  out << md;
  fmt::print(out, "\nwrote {}/report.json, summary.md{}\n", o.out_dir,
             measured == 0 ? "" : ", fig7.svg, predicted_vs_measured.svg");
  if (!stats) {
    err << "axplan: validate: fewer than 2 configurations measured (see " << o.out_dir << "/runs/*.log)\n";
    return 1;
  }
  return 0;
}

SweepToRescore::SweepToRescore(const std::string& report_path)
    : report(report_path), earlier(read_validation_report(report_path)), options(options_of(earlier, report_path, {})),
      model(model::load_model(options.model)) {}

RescoredSweep rescore_sweep(const SweepToRescore& sweep, const topo::Topology& t) {
  require_cluster_size(sweep.options.gpus, t, t.name);
  RescoredSweep r;
  r.configs = rank_for_validation(sweep.model, t, sweep.options).configs;
  r.left_out = take_measurements(r.configs, sweep.earlier);
  size_t measured = 0;
  for (const auto& c : r.configs) measured += c.status == planner::RunStatus::Measured;
  if (measured >= 2) r.stats = planner::compare_with_measurements(r.configs);
  return r;
}

}  // namespace axonn::tools
