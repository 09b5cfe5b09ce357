// What the runtime benchmarks share: the --grid argument and the plan they train under.
#pragma once

#include <string>

#include "axonn/common/error.hpp"
#include "axonn/plan/plan.hpp"

namespace axonn::tools {

// "gx,gy,gz,gdata[,ginter]" (topo::parse_grid) whose product is the number of ranks.
inline topo::Grid parse_bench_grid(const std::string& text, int ranks) {
  const topo::Grid g = topo::parse_grid(text, "bench", "--grid " + text);
  if (g.total() != ranks)
    throw InputError("bench", "grid product " + std::to_string(g.total()), "--grid " + text,
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
