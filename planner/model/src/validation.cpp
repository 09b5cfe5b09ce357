// Predictions against measurements; see axonn/planner/validation.hpp.
#include "axonn/planner/validation.hpp"

#include <algorithm>
#include <map>
#include <random>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/plan/collective_kind.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {

CommByTerm comm_by_term(const std::map<std::string, double>& busy_s_by_kind) {
  CommByTerm out;
  for (const auto& [name, busy_s] : busy_s_by_kind) {
    const auto kind = plan::parse_collective_kind(name);
    const std::string term = kind ? plan::breakdown_term(*kind) : kUnknownKind;
    out[term.empty() ? kNotModeled : term] += busy_s;
  }
  return out;
}

CommByTerm median_by_term(const std::vector<CommByTerm>& steps) {
  CommByTerm out;
  for (const auto& s : steps)
    for (const auto& [term, seconds] : s) out[term] = 0;
  for (auto& [term, value] : out) {
    std::vector<double> per_step;
    for (const auto& s : steps) {
      const auto it = s.find(term);
      per_step.push_back(it == s.end() ? 0.0 : it->second);
    }
    value = median(per_step);
  }
  return out;
}

double predicted_term_s(const plan::CommBreakdown& b, const std::string& term) {
  for (const plan::BreakdownTerm& t : plan::kBreakdownTerms)
    if (term == t.name) return b.*t.seconds;
  return 0.0;
}

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::NotSelected: return "not selected";
    case RunStatus::NotRunnable: return "not runnable";
    case RunStatus::Measured: return "measured";
    case RunStatus::Failed: return "failed";
  }
  return "?";
}

std::vector<ValidationConfig> validation_configs(const Ranking& aware, const Ranking& agnostic,
                                                 const std::function<bool(const topo::Grid&)>& runnable,
                                                 const std::string& not_runnable_reason) {
  std::vector<ValidationConfig> configs;
  for (size_t i = 0; i < aware.feasible.size(); ++i) {
    ValidationConfig c;
    c.aware = aware.feasible[i];
    c.aware_rank = static_cast<int64_t>(i) + 1;
    for (size_t j = 0; j < agnostic.feasible.size(); ++j)
      if (agnostic.feasible[j].grid == c.aware.grid)
        c.agnostic = agnostic.feasible[j], c.agnostic_rank = static_cast<int64_t>(j) + 1;
    const auto& g = c.aware.grid;
    c.mode = tensor_mode_name(g);
    const std::string prefix = c.mode == "sequence"                   ? fmt::format("seq{}-", g.sequence)
                               : c.mode == "axonn3d" || c.mode == "1d" ? ""
                                                                       : c.mode + "-";
    c.name = fmt::format("{}{}x{}x{}x{}x{}", prefix, g.gx, g.gy, g.gz, g.gdata, g.ginter);
    if (!runnable(g)) c.status = RunStatus::NotRunnable, c.reason = not_runnable_reason;
    configs.push_back(c);
  }
  return configs;
}

std::vector<size_t> select_for_validation(const std::vector<ValidationConfig>& configs, size_t top, size_t sample,
                                          uint64_t seed, bool per_mode) {
  std::vector<size_t> runnable;
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].status != RunStatus::NotRunnable) runnable.push_back(i);
  if (top == 0) return runnable;
  std::vector<size_t> selected, others;
  std::map<std::string, size_t> taken;  // per mode (or all together)
  for (size_t i : runnable)
    (taken[per_mode ? configs[i].mode : ""]++ < top ? selected : others).push_back(i);
  std::mt19937_64 rng(seed);
  std::shuffle(others.begin(), others.end(), rng);
  others.resize(std::min(sample, others.size()));
  selected.insert(selected.end(), others.begin(), others.end());
  return selected;
}

double measured_batch_s(const std::vector<double>& steps_s) {
  if (steps_s.size() <= 1) return median(steps_s);
  return median(std::vector<double>(steps_s.begin() + 1, steps_s.end()));
}

double run_spread(const std::vector<double>& runs_s) {
  if (runs_s.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(runs_s.begin(), runs_s.end());
  return (*hi - *lo) / median(runs_s);
}

namespace {

// The measured times and both predictions of the measured configurations that `keep` accepts.
struct MeasuredTimes {
  std::vector<double> measured, aware, agnostic;
};
MeasuredTimes measured_where(const std::vector<ValidationConfig>& configs,
                             const std::function<bool(const ValidationConfig&)>& keep) {
  MeasuredTimes t;
  for (const auto& c : configs)
    if (c.status == RunStatus::Measured && keep(c)) {
      t.measured.push_back(c.measured_s);
      t.aware.push_back(c.aware.batch_s);
      t.agnostic.push_back(c.agnostic.batch_s);
    }
  return t;
}

ModelStatistics statistics(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ModelStatistics s;
  s.spearman = spearman(predicted, measured);
  s.kendall = kendall_tau_b(predicted, measured);
  s.mape = mape(predicted, measured);
  s.top5 = top_k_overlap(predicted, measured, 5);
  s.best_rank = predicted_rank_of_measured_best(predicted, measured);
  return s;
}

}  // namespace

ValidationStatistics compare_with_measurements(const std::vector<ValidationConfig>& configs) {
  const MeasuredTimes all = measured_where(configs, [](const ValidationConfig&) { return true; });
  if (all.measured.size() < 2)
    throw InputError("validate", fmt::format("{} configuration(s) measured", all.measured.size()), "the sweep",
                     "at least two to compare rankings");
  ValidationStatistics out{all.measured.size(), statistics(all.aware, all.measured),
                           statistics(all.agnostic, all.measured), {}};
  for (const auto& c : configs) {
    if (c.status != RunStatus::Measured) continue;
    if (std::any_of(out.modes.begin(), out.modes.end(), [&](const ModeStatistics& s) { return s.mode == c.mode; }))
      continue;
    const MeasuredTimes t = measured_where(configs, [&](const ValidationConfig& d) { return d.mode == c.mode; });
    ModeStatistics s{c.mode, t.measured.size(), t.measured.size() >= 2, {}, {}};
    if (s.ranked) {
      s.aware = statistics(t.aware, t.measured), s.agnostic = statistics(t.agnostic, t.measured);
    } else {
      s.aware.mape = mape(t.aware, t.measured), s.agnostic.mape = mape(t.agnostic, t.measured);
    }
    out.modes.push_back(s);
  }
  std::vector<double> spreads;
  for (const auto& c : configs)
    if (c.status == RunStatus::Measured) spreads.push_back(run_spread(c.runs_s));
  out.median_spread = median(spreads);
  for (bool pipelines : {true, false}) {
    const MeasuredTimes t =
        measured_where(configs, [&](const ValidationConfig& c) { return (c.aware.grid.ginter > 1) == pipelines; });
    if (t.measured.empty()) continue;
    (pipelines ? out.pipeline_mape_aware : out.other_mape_aware) = mape(t.aware, t.measured);
    (pipelines ? out.pipeline_mape_agnostic : out.other_mape_agnostic) = mape(t.agnostic, t.measured);
    if (pipelines) out.pipelines_measured = t.measured.size();
  }
  return out;
}

}  // namespace axonn::planner
