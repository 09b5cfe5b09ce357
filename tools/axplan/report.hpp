// One printer for ranked candidates: a human table, JSON or CSV from the same rows.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "axonn/planner/explain.hpp"
#include "axonn/planner/planner.hpp"

namespace axonn::tools {

enum class Format { Table, Json, Csv };

struct ReportContext {
  std::string model, topology;
  int64_t gpus = 0, batch_seqs = 0, seq_len = 0;
  planner::CommModel comm_model = planner::CommModel::Full;
  bool placement_aware = true;
  std::string order;
  plan::PipelineSchedule pipeline_schedule = plan::PipelineSchedule::MessageDriven;
  bool memory_options_searched = false;  // --search-memory-options: the table shows each grid's optimizer
  bool order_searched = false;           // --search-order: every candidate shows its placement order
  bool strategies_ranked = false;        // --strategy l2l or all: the table shows each candidate's strategy
  bool bf16_kernels = false;  // the plans compute with the topology's compute_bf16 (kernels timed in bf16)
};

// `top` = how many feasible candidates to print (0 = all); rejected ones are printed
// (with their reason) only when `show_rejected`.
void print_ranking(std::ostream& out, Format f, const ReportContext& c, const planner::Ranking& r,
                   size_t top, bool show_rejected);

nlohmann::json evaluation_to_json(const planner::Evaluation& e);

// `axplan explain`: the grid's verdict, its groups' placement and bandwidth, each
// distinct layer's costs, memory and batch time.
void print_explanation(std::ostream& out, const ReportContext& c, const planner::Explanation& x);

}  // namespace axonn::tools
