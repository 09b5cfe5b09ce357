// axplan residuals: the model's error that several validate sweeps of one cluster share
// (planner::sweep_residuals; docs/validation.md "The model's own error, over every
// sweep").
//
//   axplan residuals A/report.json B/report.json [C/report.json ...]
//
// Each report is scored by the predictions it holds: to judge today's model, rescore
// each first (`axplan validate --rescore R --topology T --out-dir D`, T the topology the
// sweep was calibrated into). Prints markdown: each sweep's MAPE, its scale and its
// MAPE at that scale; the systematic residual beside its noise and the split-half
// agreement; the mean residual by pipeline stages, data-parallel ranks and tensor mode;
// and every configuration measured by two sweeps or more. InputError (exit 2, module
// `residuals`) when the reports differ in model, GPUs, batch, steps, overlap level or
// launcher (the cluster's layout), when a measured configuration has no prediction,
// or as planner::sweep_residuals refuses.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "axonn/planner/sweep_residuals.hpp"

namespace axonn::tools {

planner::SweepResiduals residuals_of_reports(const std::vector<std::string>& paths);
std::string residuals_summary(const std::vector<std::string>& paths, const planner::SweepResiduals& r);
// Prints the summary; returns 0 (bad input throws InputError).
int run_residuals(const std::vector<std::string>& paths, std::ostream& out);

}  // namespace axonn::tools
