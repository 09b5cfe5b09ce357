// axplan calibration-swap; see calibration_swap.hpp.
#include "calibration_swap.hpp"

#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "axonn/common/error.hpp"
#include "axonn/planner/calibrated_fields.hpp"
#include "axonn/topology/topology_io.hpp"
#include "validate.hpp"

namespace axonn::tools {
namespace {

// Each measured configuration's placement-aware prediction, by name.
std::map<std::string, double> predictions(const RescoredSweep& r) {
  std::map<std::string, double> p;
  for (const auto& c : r.configs)
    if (c.status == planner::RunStatus::Measured) p[c.name] = c.aware.batch_s;
  return p;
}

}  // namespace

int run_calibration_swap(const std::string& report, const std::string& topology, const std::string& donor,
                         std::ostream& out) {
  const topo::Topology mine = topo::load_topology(topology), other = topo::load_topology(donor);
  struct Row {
    std::string fields;
    topo::Topology t;
  };
  std::vector<Row> rows{{"none (the calibration's own)", mine}};
  for (planner::CalibratedField f : planner::calibrated_fields())
    rows.push_back({planner::field_name(f), planner::with_field_from(mine, other, f)});
  rows.push_back({"all (the other calibration)", other});

  fmt::print(out, "# axplan calibration-swap: {} under {}, with fields from {}\n\n", report, topology, donor);
  fmt::print(out,
             "Predictions move: the RMS over the configurations measured under both of ln(predicted / predicted "
             "under the calibration's own fields). Statistics: placement-aware, over the measured configurations.\n\n");
  fmt::print(out, "| fields from {} | predictions move | MAPE | Spearman | measured best, predicted | top-5 overlap |\n",
             donor);
  fmt::print(out, "|---|---|---|---|---|---|\n");
  const SweepToRescore sweep(report);  // read once, scored under every row's topology
  std::map<std::string, double> base;
  for (const Row& row : rows) {
    const RescoredSweep r = rescore_sweep(sweep, row.t);
    if (!r.stats)
      throw InputError("calibration-swap", "fewer than two measured configurations", report,
                       "a validate report with two or more measured configurations");
    const std::map<std::string, double> p = predictions(r);
    if (base.empty()) base = p;
    std::vector<double> before, after;
    for (const auto& [name, s] : p)
      if (auto it = base.find(name); it != base.end()) before.push_back(it->second), after.push_back(s);
    const planner::ModelStatistics& a = r.stats->aware;
    fmt::print(out, "| {} | {:.1f}% | {:.1f}% | {:.3f} | {} | {:.2f} |\n", row.fields,
               100 * planner::rms_log_ratio(before, after), 100 * a.mape, a.spearman, a.best_rank, a.top5);
  }
  return 0;
}

}  // namespace axonn::tools
