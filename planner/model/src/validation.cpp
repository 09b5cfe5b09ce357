// Predictions against measurements; see axonn/planner/validation.hpp.
#include "axonn/planner/validation.hpp"

#include <algorithm>
#include <map>
#include <random>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {

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

ValidationStatistics compare_with_measurements(const std::vector<ValidationConfig>& configs) {
  std::vector<double> measured, aware, agnostic;
  for (const auto& c : configs)
    if (c.status == RunStatus::Measured) {
      measured.push_back(c.measured_s);
      aware.push_back(c.aware.batch_s);
      agnostic.push_back(c.agnostic.batch_s);
    }
  if (measured.size() < 2)
    throw InputError("validate", fmt::format("{} configuration(s) measured", measured.size()), "the sweep",
                     "at least two to compare rankings");
  auto stats = [](const std::vector<double>& predicted, const std::vector<double>& measured) {
    ModelStatistics s;
    s.spearman = spearman(predicted, measured);
    s.kendall = kendall_tau_b(predicted, measured);
    s.mape = mape(predicted, measured);
    s.top5 = top_k_overlap(predicted, measured, 5);
    s.best_rank = predicted_rank_of_measured_best(predicted, measured);
    return s;
  };
  ValidationStatistics out{measured.size(), stats(aware, measured), stats(agnostic, measured), {}};
  for (const auto& c : configs) {
    if (c.status != RunStatus::Measured) continue;
    if (std::any_of(out.modes.begin(), out.modes.end(), [&](const ModeStatistics& s) { return s.mode == c.mode; }))
      continue;
    std::vector<double> m, a, g;
    for (const auto& d : configs)
      if (d.status == RunStatus::Measured && d.mode == c.mode)
        m.push_back(d.measured_s), a.push_back(d.aware.batch_s), g.push_back(d.agnostic.batch_s);
    ModeStatistics s{c.mode, m.size(), m.size() >= 2, {}, {}};
    if (s.ranked) {
      s.aware = stats(a, m), s.agnostic = stats(g, m);
    } else {
      s.aware.mape = mape(a, m), s.agnostic.mape = mape(g, m);
    }
    out.modes.push_back(s);
  }
  for (bool pipelines : {true, false}) {
    std::vector<double> m, a, g;
    for (const auto& c : configs)
      if (c.status == RunStatus::Measured && (c.aware.grid.ginter > 1) == pipelines)
        m.push_back(c.measured_s), a.push_back(c.aware.batch_s), g.push_back(c.agnostic.batch_s);
    if (m.empty()) continue;
    (pipelines ? out.pipeline_mape_aware : out.other_mape_aware) = mape(a, m);
    (pipelines ? out.pipeline_mape_agnostic : out.other_mape_agnostic) = mape(g, m);
    if (pipelines) out.pipelines_measured = m.size();
  }
  return out;
}

}  // namespace axonn::planner
