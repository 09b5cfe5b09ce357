// Comparing predictions with measured batch times (`axplan validate`,
// docs/validation.md): which configurations to run and how well each model ranked and
// predicted the measured ones. Pure functions; launching the runs is the tool's.
//
// Example:
//   auto configs = validation_configs(aware, agnostic, [](const topo::Grid& g) { return true; });
//   for (size_t i : select_for_validation(configs, /*top=*/5, /*sample=*/5, /*seed=*/1)) ... run it ...
//   ValidationStatistics s = compare_with_measurements(configs);   // needs >= 2 measured
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "axonn/planner/planner.hpp"
#include "axonn/planner/scatter_ceiling.hpp"

namespace axonn::planner {

// Seconds per step of each CommBreakdown term ("ag_z", ..., "small"; plan::kBreakdownTerms)
// and "unknown" (a kind name plan::CollectiveKind does not have: a runtime newer than the
// planner).
using CommByTerm = std::map<std::string, double>;
inline constexpr const char* kUnknownKind = "unknown";

// The seconds validate counts for one kind in one step, from axrun's `by_kind` entry:
// its busy seconds (issue to completion seen), or for a kind measured by its waits
// (plan::measured_by_wait: SUMMA's moves) the seconds its rank sat blocked in them.
double measured_kind_s(const std::string& kind, double busy_s, double exposed_s);
// One step's measured seconds by collective kind name (measured_kind_s of axrun's
// `by_kind`) summed into the terms that predict them.
CommByTerm comm_by_term(const std::map<std::string, double>& seconds_by_kind);
// Each term's median over the steps (0 in a step without it).
CommByTerm median_by_term(const std::vector<CommByTerm>& steps);
// The predicted seconds per step of `term` in `b` (0 for "unknown").
double predicted_term_s(const plan::CommBreakdown& b, const std::string& term);
// What validate sets beside the measured term: predicted_term_s of e.comm, or for a term
// measured by its waits (plan::term_measured_by_wait: `summa`) what the model leaves
// exposed (Evaluation::summa_exposed_s).
double predicted_term_s(const Evaluation& e, const std::string& term);

enum class RunStatus { NotSelected, NotRunnable, Measured, Failed };
const char* run_status_name(RunStatus s);  // "not selected", "not runnable", "measured", "failed"

struct ValidationConfig {
  Evaluation aware, agnostic;                 // the same grid under both bandwidth models
  int64_t aware_rank = 0, agnostic_rank = 0;  // among all feasible candidates of that model (1 = best)
  std::string mode;                           // tensor_mode_name of the grid: axonn3d, 1d, 2d, 3d, sequence
  std::string name;                           // "gxXgyXgzXgdataXginter", e.g. "2x1x2x1x1"; other modes
                                              // than axonn3d and 1d prefixed: "2d-1x2x2x1x1",
                                              // "3d-2x2x2x1x1", "seq2-1x1x1x4x1" (sequence group 2)
  RunStatus status = RunStatus::NotSelected;
  std::string reason;                         // why not runnable, or why it failed
  std::string retried_after;                  // the first attempt's failure, when a retry succeeded
  std::vector<double> steps_s;                // measured batch time of every step of every run
  std::vector<double> runs_s;                 // measured_batch_s of each run (validate --repeats)
  std::vector<CommByTerm> steps_comm_s;       // rank 0's seconds by term (measured_kind_s), each step but a run's first
  CommByTerm measured_comm_s;                 // median_by_term of steps_comm_s
  std::vector<CommByTerm> steps_calls;        // rank 0's collective calls by term (axrun's count), same steps
  CommByTerm measured_calls;                  // median_by_term of steps_calls
  std::vector<double> steps_pipeline_wait_s;  // rank 0's wait for pipeline messages (axrun's recv_wait_s), same steps
  double measured_pipeline_wait_s = 0;        // their median
  double measured_s = 0;                      // the median of runs_s
  std::string log_path;                       // the run's output (set by whoever ran it)
  // Traced terms an earlier report says were not measured (null: the ring's waits in a
  // report from before they were traced); --rescore keeps them unmeasured.
  std::set<std::string> unmeasured_terms;
};

// Whether `c`'s measurement has `term`: "unknown", and every term whose collectives the
// runtime traces, except those its report left unmeasured (unmeasured_terms).
bool term_measured(const ValidationConfig& c, const std::string& term);

// Where a measured configuration's batch-time error comes from (docs/validation.md,
// "Where the error comes from"). The step is cut into parts that the runtime measures and
// the aware model predicts apart, and the parts' errors sum to measured - predicted:
//   - each traced CommBreakdown term and "unknown": rank 0's busy seconds (the median
//     step) against the term's predicted seconds (0 for "unknown"); `summa` (SUMMA's
//     moves, issued a step ahead): rank 0's waits in them against the moves the model
//     leaves exposed (predicted_term_s of the Evaluation);
//   - kPipelineWait (pipelines): rank 0 waiting for the pipeline's messages against the
//     model's bubble and p2p_pipe (batch_s - compute_s - the exposed communication +
//     p2p_pipe, at least p2p_pipe; the exposed communication is comm_s with SUMMA's
//     moves counted by their exposed part);
//   - "sync_wait": the predicted waits for the groups' last members against 0, since
//     the runtime measures them inside the collectives' busy seconds above (read it
//     with them: their sum's error is the waits' and the transfers' together);
//   - kComputeRest: what is left of each, i.e. measured compute against compute_s (plus
//     p2p_seq where the measurement has none: reports from before the runtime traced the
//     ring's waits).
// Exact at overlap level 0, where the model hides no communication but SUMMA's moves
// (whose hidden part stays out of every part); with overlaps the hidden part moves into
// kComputeRest.
inline constexpr const char* kPipelineWait = "pipeline_wait";
inline constexpr const char* kComputeRest = "compute";
struct ErrorPart {
  std::string part;
  double predicted_s = 0, measured_s = 0;  // seconds per step
  double calls = 0;                        // collectives: rank 0's calls per step (median); 0 otherwise
};
std::vector<ErrorPart> error_parts(const ValidationConfig& c);

// Over the Measured configurations, each part's error as a share of the configuration's
// measured batch time, (measured - predicted) / measured: its mean (the bias the part
// adds; the parts' means sum to the mean signed batch-time error) and the mean of its
// absolute value. Sums of both times over the configurations too. Largest mean absolute
// share first: the part that accounts for most of the remaining error.
struct ErrorShare {
  std::string part;
  double predicted_s = 0, measured_s = 0;  // summed over the configurations
  double calls = 0;                        // summed over the configurations
  double mean_share = 0, mean_abs_share = 0;
  // (measured_s - predicted_s) / calls: what each call of the part's collectives costs
  // beyond the model, seconds (0 without calls).
  double excess_per_call_s() const { return calls > 0 ? (measured_s - predicted_s) / calls : 0.0; }
};
std::vector<ErrorShare> error_budget(const std::vector<ValidationConfig>& configs);

// Every feasible grid of `aware`, in its order, with the same grid's agnostic
// evaluation; grids `runnable` refuses are NotRunnable with `not_runnable_reason`.
std::vector<ValidationConfig> validation_configs(const Ranking& aware, const Ranking& agnostic,
                                                 const std::function<bool(const topo::Grid&)>& runnable,
                                                 const std::string& not_runnable_reason);

// Indices of the configurations to run: every runnable one (top = 0), or the aware
// model's first `top` runnable ones plus `sample` others drawn with `seed`. With
// `per_mode`, the first `top` runnable ones of each tensor mode (ValidationConfig::mode),
// so that every mode is measured (--tensor-mode all), plus the sample.
std::vector<size_t> select_for_validation(const std::vector<ValidationConfig>& configs, size_t top, size_t sample,
                                          uint64_t seed, bool per_mode = false);

// The measured batch time of a run: the median of the steps after the first (the
// first warms up: allocations, connections); the only step if there is one.
double measured_batch_s(const std::vector<double>& steps_s);

// The run-to-run spread of one configuration: (max - min) / median of its runs' measured
// batch times; 0 with fewer than two runs.
double run_spread(const std::vector<double>& runs_s);

// What the runs' own scatter alone costs a model that predicted the configuration's
// expected batch time exactly, for normal scatter: E|mean of n runs - expected| /
// expected = sqrt(2 / (pi n)) * sigma / mean, sigma estimated without bias as s / c4(n)
// (s the runs' sample standard deviation, c4(n) = sqrt(2 / (n-1)) G(n/2) / G((n-1)/2)).
// For two runs, whose median is their mean, that is |a - b| / 2 / mean; for more, the
// median (measured_s) scatters up to 25% more than the mean, so it is a lower bound.
// 0 with fewer than two runs.
double expected_noise_error(const std::vector<double>& runs_s);
// The mean of expected_noise_error over the configurations (each its runs) that ran at
// least twice; 0 when none did.
double noise_floor_mape(const std::vector<std::vector<double>>& runs_s);

struct ModelStatistics {
  double spearman = 0, kendall = 0, mape = 0, top5 = 0;
  size_t best_rank = 0;  // predicted rank (among the measured) of the measured best
};
// How well `predicted` ranks and matches `measured` (equal lengths, two or more): the
// statistics of statistics.hpp, as validate scores a model.
ModelStatistics score_prediction(const std::vector<double>& predicted, const std::vector<double>& measured);
// The same statistics over one tensor mode's measured configurations. Spearman,
// Kendall and the best's rank need two of them (ranked = false with one: MAPE only).
struct ModeStatistics {
  std::string mode;
  size_t measured = 0;
  bool ranked = false;
  ModelStatistics aware, agnostic;
};
struct ValidationStatistics {
  size_t measured = 0;
  ModelStatistics aware, agnostic;
  std::vector<ModeStatistics> modes;  // each mode with a measured configuration, in order of first appearance
  // The batch-time errors of the pipeline grids (Ginter > 1) and of the others apart.
  size_t pipelines_measured = 0;
  double pipeline_mape_aware = 0, pipeline_mape_agnostic = 0;
  double other_mape_aware = 0, other_mape_agnostic = 0;
  // The median over the measured configurations of run_spread (0 when each ran once):
  // what the same configuration varies by, to set beside the MAPE.
  double median_spread = 0;
  // The mean of expected_noise_error over the configurations that ran at least twice
  // (0 when none did; the MAPE counts every measured one): the batch-time MAPE that a
  // model exact in expectation would still show against these measurements.
  double noise_floor_mape = 0;
  // What a model exact in expectation would score, drawn from the runs' scatter
  // (scatter_ceiling.hpp: kCeilingDraws draws, seed kCeilingSeed); nullopt when no
  // configuration ran twice.
  std::optional<ScatterCeiling> ceiling;
};
inline constexpr size_t kCeilingDraws = 4000;
inline constexpr uint64_t kCeilingSeed = 1;

// Over the Measured configurations; throws InputError with fewer than two.
ValidationStatistics compare_with_measurements(const std::vector<ValidationConfig>& configs);

// The aware model's statistics had its compute run `compute_ratio` times as long: each
// measured configuration's prediction batch_s + (compute_ratio - 1) * compute_s. With
// the ratio the kernel probes measured during the sweep (validate --kernel-probes),
// what the model would score had calibrate caught the machine's kernels at the rate
// the sweep saw: the calibration's drift taken out of the error. Only compute is
// scaled (the sync wait, which grows with compute, is not), so it is a diagnostic, not
// a model. Throws InputError with fewer than two measured or a ratio not above 0.
ModelStatistics score_with_compute_scaled(const std::vector<ValidationConfig>& configs, double compute_ratio);

}  // namespace axonn::planner
