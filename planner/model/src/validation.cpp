// Predictions against measurements; see axonn/planner/validation.hpp.
#include "axonn/planner/validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/plan/collective_kind.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/statistics.hpp"

namespace axonn::planner {

double measured_kind_s(const std::string& kind, double busy_s, double exposed_s) {
  const auto k = plan::parse_collective_kind(kind);
  return k && plan::measured_by_wait(*k) ? exposed_s : busy_s;
}

CommByTerm comm_by_term(const std::map<std::string, double>& seconds_by_kind) {
  CommByTerm out;
  for (const auto& [name, seconds] : seconds_by_kind) {
    const auto kind = plan::parse_collective_kind(name);
    out[kind ? plan::breakdown_term(*kind) : kUnknownKind] += seconds;
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

double predicted_term_s(const Evaluation& e, const std::string& term) {
  return plan::term_measured_by_wait(term) ? e.summa_exposed_s : predicted_term_s(e.comm, term);
}

namespace {
double term_or_zero(const CommByTerm& m, const std::string& term) {
  const auto it = m.find(term);
  return it == m.end() ? 0.0 : it->second;
}
}  // namespace

bool term_measured(const ValidationConfig& c, const std::string& term) {
  if (term == kUnknownKind) return true;
  if (!plan::term_is_traced(term)) return false;
  return c.unmeasured_terms.count(term) == 0;
}

std::vector<ErrorPart> error_parts(const ValidationConfig& c) {
  const Evaluation& e = c.aware;
  std::vector<ErrorPart> parts;
  double predicted_rest = e.batch_s, measured_rest = c.measured_s;
  auto add = [&](const std::string& part, double predicted_s, double measured_s) {
    parts.push_back({part, predicted_s, measured_s, term_or_zero(c.measured_calls, part)});
    predicted_rest -= predicted_s, measured_rest -= measured_s;
  };
  for (const plan::BreakdownTerm& t : plan::kBreakdownTerms) {
    // Where not measured (p2p_pipe; the ring in an old report), in the rest of the step.
    if (!term_measured(c, t.name)) continue;
    const double predicted_s = predicted_term_s(e, t.name), measured_s = term_or_zero(c.measured_comm_s, t.name);
    if (predicted_s > 0 || measured_s > 0) add(t.name, predicted_s, measured_s);
  }
  if (e.comm.sync_wait > 0) add("sync_wait", e.comm.sync_wait, 0.0);
  if (term_or_zero(c.measured_comm_s, kUnknownKind) > 0)
    add(kUnknownKind, 0.0, term_or_zero(c.measured_comm_s, kUnknownKind));
  if (e.grid.ginter > 1 || c.measured_pipeline_wait_s > 0) {
    // The communication the model leaves exposed: SUMMA's moves by their exposed part.
    const double exposed_comm_s = e.comm_s - e.comm.summa + e.summa_exposed_s;
    const double bubble_s = e.grid.ginter > 1 ? std::max(0.0, e.batch_s - e.compute_s - exposed_comm_s) : 0.0;
    add(kPipelineWait, bubble_s + e.comm.p2p_pipe, c.measured_pipeline_wait_s);
  }
  parts.push_back({kComputeRest, predicted_rest, measured_rest});
  return parts;
}

std::vector<ErrorShare> error_budget(const std::vector<ValidationConfig>& configs) {
  std::vector<ErrorShare> out;
  size_t n = 0;
  for (const auto& c : configs) {
    if (c.status != RunStatus::Measured || c.measured_s <= 0) continue;
    ++n;
    for (const ErrorPart& p : error_parts(c)) {
      auto it = std::find_if(out.begin(), out.end(), [&](const ErrorShare& s) { return s.part == p.part; });
      if (it == out.end()) it = out.insert(out.end(), ErrorShare{p.part, 0, 0, 0, 0, 0});
      const double share = (p.measured_s - p.predicted_s) / c.measured_s;
      it->predicted_s += p.predicted_s, it->measured_s += p.measured_s, it->calls += p.calls;
      it->mean_share += share, it->mean_abs_share += std::abs(share);
    }
  }
  for (auto& s : out) s.mean_share /= static_cast<double>(n), s.mean_abs_share /= static_cast<double>(n);
  std::stable_sort(out.begin(), out.end(),
                   [](const ErrorShare& a, const ErrorShare& b) { return a.mean_abs_share > b.mean_abs_share; });
  return out;
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
    const std::string tag = plan::tensor_mode_tag(g);
    c.name = fmt::format("{}{}x{}x{}x{}x{}", tag.empty() ? "" : tag + "-", g.gx, g.gy, g.gz, g.gdata, g.ginter);
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

double expected_noise_error(const std::vector<double>& runs_s) {
  if (runs_s.size() < 2) return 0;
  constexpr double kPi = 3.14159265358979323846;
  const double n = static_cast<double>(runs_s.size());
  const double c4 = std::sqrt(2.0 / (n - 1)) * std::exp(std::lgamma(n / 2) - std::lgamma((n - 1) / 2));
  return std::sqrt(2.0 / (kPi * n)) * sample_standard_deviation(runs_s) / c4 / mean(runs_s);
}

double noise_floor_mape(const std::vector<std::vector<double>>& runs_s) {
  std::vector<double> noise;
  for (const auto& runs : runs_s)
    if (runs.size() >= 2) noise.push_back(expected_noise_error(runs));
  return noise.empty() ? 0.0 : mean(noise);
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

// A sweep's statistics compare rankings: they need two measured configurations.
void require_two_measured(size_t measured) {
  if (measured < 2)
    throw InputError("validate", fmt::format("{} configuration(s) measured", measured), "the sweep",
                     "at least two to compare rankings");
}

}  // namespace

ModelStatistics score_prediction(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ModelStatistics s;
  s.spearman = spearman(predicted, measured);
  s.kendall = kendall_tau_b(predicted, measured);
  s.mape = mape(predicted, measured);
  s.top5 = top_k_overlap(predicted, measured, 5);
  s.best_rank = predicted_rank_of_measured_best(predicted, measured);
  return s;
}

ValidationStatistics compare_with_measurements(const std::vector<ValidationConfig>& configs) {
  const MeasuredTimes all = measured_where(configs, [](const ValidationConfig&) { return true; });
  require_two_measured(all.measured.size());
  ValidationStatistics out;
  out.measured = all.measured.size();
  out.aware = score_prediction(all.aware, all.measured);
  out.agnostic = score_prediction(all.agnostic, all.measured);
  for (const auto& c : configs) {
    if (c.status != RunStatus::Measured) continue;
    if (std::any_of(out.modes.begin(), out.modes.end(), [&](const ModeStatistics& s) { return s.mode == c.mode; }))
      continue;
    const MeasuredTimes t = measured_where(configs, [&](const ValidationConfig& d) { return d.mode == c.mode; });
    ModeStatistics s{c.mode, t.measured.size(), t.measured.size() >= 2, {}, {}};
    if (s.ranked) {
      s.aware = score_prediction(t.aware, t.measured), s.agnostic = score_prediction(t.agnostic, t.measured);
    } else {
      s.aware.mape = mape(t.aware, t.measured), s.agnostic.mape = mape(t.agnostic, t.measured);
    }
    out.modes.push_back(s);
  }
  std::vector<double> spreads;
  std::vector<std::vector<double>> runs;
  for (const auto& c : configs) {
    if (c.status != RunStatus::Measured) continue;
    spreads.push_back(run_spread(c.runs_s));
    runs.push_back(c.runs_s.empty() ? std::vector<double>{c.measured_s} : c.runs_s);
  }
  out.median_spread = median(spreads);
  out.noise_floor_mape = noise_floor_mape(runs);
  out.ceiling = scatter_ceiling(runs, kCeilingDraws, kCeilingSeed);
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

ModelStatistics score_with_compute_scaled(const std::vector<ValidationConfig>& configs, double compute_ratio) {
  if (!(compute_ratio > 0))
    throw InputError("validate", fmt::format("compute ratio {}", compute_ratio), "the kernel probes",
                     "a ratio above 0");
  std::vector<double> predicted, measured;
  for (const auto& c : configs)
    if (c.status == RunStatus::Measured) {
      predicted.push_back(c.aware.batch_s + (compute_ratio - 1) * c.aware.compute_s);
      measured.push_back(c.measured_s);
    }
  require_two_measured(measured.size());
  return score_prediction(predicted, measured);
}

}  // namespace axonn::planner
