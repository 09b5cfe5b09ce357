// axplan validate: run configurations on a real or emulated cluster with the runtime
// and compare measured batch times with the planner's predictions, placement-aware
// and placement-agnostic side by side (docs/validation.md; the 4D paper's Fig. 7).
//
//   axplan validate --model gpt-bench --topology cluster.json --gpus 8 --batch-seqs 16
//       --launcher "bash tools/emulated_cluster.sh --nodes 2 --gpus-per-node 4 --rate 400mbit --"
//       [--tensor-mode axonn3d|1d|sequence|2d|2.5d|3d|all]
//       [--top K --sample N --seed S] [--steps 4] [--out-dir validate_report]
//
// The launcher and --axrun-args go to `sh` as written (split on spaces to check the
// launcher's program exists, so its path must not contain spaces).
// Every feasible grid of the tensor modes ranked, or the aware model's top K (with
// --tensor-mode all, the top K of each mode) plus N others drawn at random, is written
// as a plan (fp32, as the runtime computes on CPU) and run as `LAUNCHER AXRUN --plan P --steps S --measure M`, one after another, with a
// progress bar. The measured batch time is the median of the steps after the first.
// A configuration that fails (exit code, timeout, no measurement) is run again
// (--retries, default 1), then recorded with the reason, and the sweep goes on. Writes OUT/report.json, OUT/summary.md,
// OUT/fig7.svg (measured time by predicted rank, efficient ones marked) and
// OUT/predicted_vs_measured.svg; plans and logs under OUT/runs/.
//
// With --kernel-probes, `LAUNCHER AXPLAN calibrate --kernels-only` (one round, the
// topology's node size, the sweep's model and batch) runs before the sweep and after
// each round; each probe's kernel times over the topology's (planner::kernel_time_ratio)
// go into the report and the summary, so that a drift of the machine's rate since
// calibrate shows beside the model's error. A failed probe is recorded and the sweep
// goes on.
//
//   axplan validate --rescore OLD/report.json --topology other.json [--out-dir NEW]
//
// scores an earlier sweep's measurements under another topology (or a changed cost model)
// without running anything: the same report, summary and plots, from the old
// measurements and the new predictions; a measured configuration the new ranking does
// not hold as feasible is left out with a note.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/planner/validation.hpp"
#include "axonn/topology/topology.hpp"
#include "validation_report.hpp"

namespace axonn::tools {

struct ValidateOptions {
  std::string model = "gpt-bench";
  std::string topology;           // the measured cluster (axplan calibrate)
  int64_t gpus = 0;
  int64_t batch_seqs = 0;
  std::string launcher;           // command prefix; split on spaces
  std::string axrun;              // empty: the axrun next to this axplan
  std::string axrun_args;         // extra axrun arguments (e.g. "--progress poll")
  int overlap_level = 4;          // plan::OverlapSettings::level of the plans and predictions,
                                  // with no all-gather cache (level 4 = level 3 + cache of 0)
  int64_t steps = 4;
  int64_t repeats = 1;            // runs of each configuration, in rounds (the spread is reported)
  std::string tensor_mode = "axonn3d";  // the modes ranked (planner::select_tensor_modes)
  bool search_order = false;      // each configuration in its searched placement order (--search-order)
  // The plans' dtype: "fp32" (what every sweep in docs/validation.md ran), or "bf16" (mixed
  // precision, predicted with the topology's compute_bf16 where it has one).
  std::string precision = "fp32";
  bool kernel_probes = false;     // the kernels timed again before the sweep and after each round (--kernel-probes)
  size_t top = 0;                 // 0: every runnable configuration; with tensor_mode "all", per mode
  size_t sample = 0;              // extra random configurations with --top
  uint64_t seed = 1;
  double timeout_s = 600;         // per configuration
  int retries = 1;                // runs again after a failure (launches can fail transiently)
  double efficient_within = 0.10; // "efficient": measured within this fraction of the best
  std::string out_dir = "validate_report";
  // An earlier report.json: its measured configurations scored again under `topology`
  // (another topology, or the same after a change of the cost model), nothing run; the
  // report's settings replace the above. Refused for a sweep run with --search-order.
  std::string rescore;
};

// Returns the exit code: 0 when at least two configurations were measured, 1 when
// fewer were (the report is still written), 2 for bad input.
int run_validate(const ValidateOptions& o, std::ostream& out, std::ostream& err);

// An earlier sweep to score again: its report, read once, with its settings as
// validate's options and its model loaded.
struct SweepToRescore {
  explicit SweepToRescore(const std::string& report_path);
  std::string report;
  EarlierReport earlier;
  ValidateOptions options;
  model::ModelDescription model;
};

// The core of --rescore, writing nothing: the configurations the rankings under `t` hold
// for the sweep, those it measured carrying its measurements, and the statistics over
// them (two or more measured). `left_out`: measured configurations that are not feasible
// under `t`.
struct RescoredSweep {
  std::vector<planner::ValidationConfig> configs;
  std::optional<planner::ValidationStatistics> stats;
  std::vector<std::string> left_out;
};
RescoredSweep rescore_sweep(const SweepToRescore& sweep, const topo::Topology& t);

}  // namespace axonn::tools
