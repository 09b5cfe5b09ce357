// `axplan fit-published`: fit a GPU's compute model to published training runs and
// report the error on the runs left out of the fit (docs/validation.md, "Published
// GPU runs"). Reads a runs file (model_zoo/published/*.json, format in
// docs/formats.md), fits with planner::fit_compute, prints the table and can write the
// fitted topology.
//
// Example:
//   axplan fit-published --runs megatron-lm-2021 --fit-rows 1,5,10 --out selene.json
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "axonn/planner/planner.hpp"
#include "axonn/planner/published_fit.hpp"

namespace axonn::tools {

// A runs file, read and checked: each row against the paper's parameter count (eq. 2),
// its aggregate FLOP/s and its percentage of `peak_flops_per_s`.
struct PublishedRuns {
  std::string name, source, notes;
  std::string topology;            // the cluster the runs ran on (a shipped name or a path)
  double peak_flops_per_s = 0;     // the peak the file's percentages refer to, per GPU
  planner::PlannerOptions options; // the file's settings (schedule, order, overlap, ...)
  std::vector<planner::PublishedRun> runs;
  std::vector<double> tflops_per_gpu;  // as published, per run
};
// `name_or_path`: a file path or a name in model_zoo/published/. Throws InputError
// naming the file and the field.
PublishedRuns read_published_runs(const std::string& name_or_path);

struct FitPublishedOptions {
  std::string runs = "megatron-lm-2021";
  std::string topology;         // empty: the runs file's
  std::string fit_rows = "1,5,10";
  bool every_choice = false;    // also fit on every choice of as many rows, and summarize
  std::string out;              // the fitted topology file to write (empty: none)
};
int run_fit_published(const FitPublishedOptions& o, std::ostream& out);

}  // namespace axonn::tools
