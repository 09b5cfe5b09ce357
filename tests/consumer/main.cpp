// Ranks GPT-20B on 32 Perlmutter GPUs through the installed library, reading the
// model and cluster from the install tree's data directory, and checks the result:
// feasible grids, each of 32 GPUs, sorted by predicted batch time, the best one's
// prediction positive. Exit code 0 when every check holds.
#include <cstdio>

#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"

int main() {
  const std::string data = AXONN_DATA;
  const auto model = axonn::model::load_model(data + "/model_zoo/models/gpt-20b.json");
  const auto cluster = axonn::topo::load_topology(data + "/topology/clusters/perlmutter.json");
  axonn::planner::PlannerOptions o;
  o.gpus = 32;
  o.batch_seqs = 16;
  const auto r = axonn::planner::rank_candidates(model, cluster, o);
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) std::printf("FAIL %s\n", what), ++failures;
  };
  check(!r.feasible.empty(), "some grid is feasible");
  for (size_t i = 0; i < r.feasible.size(); ++i) {
    check(r.feasible[i].grid.total() == 32, "every grid has 32 GPUs");
    if (i > 0) check(r.feasible[i - 1].batch_s <= r.feasible[i].batch_s, "sorted by batch time");
  }
  if (!r.feasible.empty()) {
    const auto& best = r.feasible.front();
    check(best.batch_s > 0 && best.compute_s > 0, "the best grid has a positive prediction");
    std::printf("best of %zu feasible grids: %s, %.4f s per batch\n", r.feasible.size(), best.grid.to_string().c_str(),
                best.batch_s);
  }
  return failures == 0 ? 0 : 1;
}
