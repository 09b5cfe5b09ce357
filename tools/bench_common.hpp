// What the runtime benchmarks share: the --grid argument and the plan they train under.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"

namespace axonn::tools {

// "gx,gy,gz,gdata" (Ginter = 1) whose product is the number of ranks.
inline topo::Grid parse_bench_grid(const std::string& text, int ranks) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  try {
    for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stoll(item));
  } catch (const std::exception&) {
    v.clear();
  }
  if (v.size() != 4) throw Error("bench", "bad grid \"" + text + "\"", "--grid", "gx,gy,gz,gdata");
  topo::Grid g{v[0], v[1], v[2], v[3], 1};
  if (g.total() != ranks)
    throw Error("bench", "grid product " + std::to_string(g.total()), "--grid " + text,
                "the number of ranks, " + std::to_string(ranks));
  return g;
}

// A plan for `model` on `grid`: `seqs` sequences per step, one micro-batch per group.
inline plan::Plan bench_plan(const model::ModelDescription& model, const topo::Grid& grid, int64_t seqs) {
  plan::Plan p;
  p.model = model;
  p.grid = grid;
  p.gpus = grid.total();
  p.batch = {seqs, seqs / grid.gdata};
  return p;
}

}  // namespace axonn::tools
