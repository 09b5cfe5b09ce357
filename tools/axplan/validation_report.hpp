// What `axplan validate` writes (docs/validation.md): report.json, summary.md and two
// SVG plots, rendered from the configurations and their measurements. Pure string
// building; validate.cpp writes the files.
//
// Example:
//   std::string md = validation_summary(run, configs, stats);   // stats: nullopt with < 2 measured
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/common/load_average.hpp"
#include "axonn/planner/validation.hpp"

namespace axonn::tools {

// One probe of the machine's kernel rate (validate --kernel-probes): the model's kernels
// timed again on the cluster, summed, over the topology's times of the same kernels.
struct KernelProbe {
  std::string when;   // "before the sweep", "after round 1", ...
  std::string note;   // why the probe failed (then nothing else is set)
  size_t shapes = 0, operations = 0;               // matched matmul shapes, element-wise operations
  double matmul_ratio = 0, elementwise_ratio = 0;  // probe / topology
};
// The mean matmul ratio of the probes that ran (matmuls are most of the model's
// compute); nullopt when none did. The ratio planner::score_with_compute_scaled takes.
std::optional<double> probes_compute_ratio(const std::vector<KernelProbe>& probes);

// The sweep's settings, as the report states them.
struct ValidationRun {
  std::string model, topology, launcher, axrun, axrun_args;
  int64_t gpus = 0, batch_seqs = 0, seq_len = 0, steps = 0;
  int overlap_level = 0;
  double efficient_within = 0.10;  // "efficient": measured within this fraction of the best
  std::string tensor_mode = "axonn3d";  // the modes ranked (--tensor-mode)
  int64_t repeats = 1;                  // runs of each configuration
  std::optional<LoadAverage> load_before, load_after;  // the machine's load around the sweep
  std::string model_file;     // the --model argument (a name or a path), for --rescore
  bool search_order = false;  // --search-order: each configuration ran in its searched order
  std::vector<KernelProbe> kernel_probes;  // --kernel-probes, in order
  // How waiting ranks passed the time (axrun --wait: "sleep" or "yield"), as each run's
  // measurement file records it: runs by policy; empty for reports written before it.
  std::map<std::string, int64_t> wait_policies;
  std::string precision = "fp32";  // the plans' dtype (--precision); reports before it: fp32
};

nlohmann::json validation_report_json(const ValidationRun& run, const std::vector<planner::ValidationConfig>& configs,
                                      const std::optional<planner::ValidationStatistics>& stats);
std::string validation_summary(const ValidationRun& run, const std::vector<planner::ValidationConfig>& configs,
                               const std::optional<planner::ValidationStatistics>& stats);
// What an earlier report.json holds for `axplan validate --rescore`: its settings
// (topology, efficient_within and seq_len are not read back; the model from
// "model_file", else "model") and its measured
// configurations by name, as ValidationConfig measurements (status Measured, no
// predictions). Reports written before `calls` lack them (0). Throws InputError
// naming the file and the field for anything else missing or malformed.
// It also keeps, for `axplan residuals`, what the report scored each measured
// configuration with: the placement-aware batch time (0 in a report without one), the
// tensor mode and the grid's pipeline stages and data-parallel ranks.
struct ScoredConfig {
  double aware_batch_s = 0;  // s
  std::string mode;
  int64_t stages = 1, data = 1;
};
struct EarlierReport {
  ValidationRun run;
  std::map<std::string, planner::ValidationConfig> measured;
  std::map<std::string, ScoredConfig> scored;  // by name, the measured ones
};
EarlierReport read_validation_report(const std::string& path);
// Throws InputError (module `module`, "the sweeps differ in FIELD: ...") unless the two
// reports' runs agree in model, GPUs, batch, steps, overlap level and launcher, and,
// with `same_modes`, in tensor modes and --search-order; `expected` says what was asked.
void require_same_sweep_settings(const ValidationRun& a, const std::string& path_a, const ValidationRun& b,
                                 const std::string& path_b, const char* module, bool same_modes,
                                 const std::string& expected);


// A scatter ceiling's MAPE, Spearman, top-5 overlap and best-first share, joined by
// `sep` (summary.md's row; compare-sweeps' tables).
std::string ceiling_values(const planner::ScatterCeiling& c, const char* sep);

// Measured batch time by each model's predicted rank (among the measured), the 4D
// paper's Fig. 7; and predicted against measured with y = x. Need one measured config.
std::string fig7_svg(const ValidationRun& run, const std::vector<planner::ValidationConfig>& configs);
std::string predicted_vs_measured_svg(const ValidationRun& run, const std::vector<planner::ValidationConfig>& configs);

}  // namespace axonn::tools
