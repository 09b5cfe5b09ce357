// axplan calibration-swap: which calibrated quantity moves a sweep's predictions
// (planner::CalibratedField; docs/validation.md "A second 4 x 2 sweep on the new
// machine, and what moves the predictions").
//
//   axplan calibration-swap SWEEP/report.json --topology MINE.json --donor OTHER.json
//
// Rescores the sweep's measurements (as `validate --rescore` does, writing nothing)
// under MINE, then under MINE with each group of fields taken from OTHER (another
// calibration of the same cluster), then under OTHER. Prints a markdown table: per row,
// how far the predictions moved from MINE's (the RMS over the configurations measured
// in both of ln(predicted / MINE's prediction)), and the placement-aware MAPE, Spearman,
// the measured best's predicted rank and the top-5 overlap. InputError (exit 2) for a
// report or topology that cannot be read, topologies of different layouts, or fewer
// than two measured configurations.
#pragma once

#include <ostream>
#include <string>

namespace axonn::tools {

int run_calibration_swap(const std::string& report, const std::string& topology, const std::string& donor,
                         std::ostream& out);

}  // namespace axonn::tools
