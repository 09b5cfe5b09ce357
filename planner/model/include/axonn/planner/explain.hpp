// One grid in detail (`axplan explain`): where each group lands and the bandwidth it
// gets (docs/model.md section 2), each distinct layer's compute and collective times
// for one micro-batch (sections 3 and 7), and the evaluation itself (verdict, batch
// time, memory). The same numbers the ranking uses, not a second model.
//
// Example:
//   Explanation x = explain(load_model("gpt-20b"), load_topology("perlmutter"), Grid{4, 2, 1, 4, 1}, options);
//   x.axes[int(topo::Axis::Z)].bandwidth_bytes_per_s;   // +inf: a group of one
//   x.layers[1].costs.forward_s;                           // the first block's QKV forward
//   x.stages[0].backward_s;                                // stage 0's backward pass of one micro-batch
#pragma once

#include <array>
#include <string>
#include <vector>

#include "axonn/planner/batch_time.hpp"
#include "axonn/planner/pipeline_time.hpp"
#include "axonn/planner/planner.hpp"

namespace axonn::planner {

struct AxisPlacement {
  int64_t size = 1;                 // members of the group
  int64_t ip = 1;                   // ranks between members (the sizes of the groups placed inside)
  bool inside_node = true;          // every copy of the group stays inside a node (straddle rule)
  double bandwidth_bytes_per_s = 0; // what the model gives it (+inf for a group of one)
  // Time-sliced ranks (topology cores_per_rank below 1): the share of the passes the
  // other rings on its link are there (docs/model.md section 2, "Tensor rings out of
  // step"); 0 where eq. 10's every ring at once stands.
  double out_of_step_share = 0;
};

struct LayerExplanation {
  std::string name;      // its first instance
  std::string kind;      // model::layer_kind_name
  int64_t count = 0;     // identical layers in the model
  LayerCosts costs;      // one micro-batch, one occurrence of each collective, seconds
  double optimizer_s = 0;
};

struct Explanation {
  Evaluation evaluation;
  std::array<AxisPlacement, topo::kNumAxes> axes{};  // indexed by topo::Axis
  std::vector<LayerExplanation> layers;              // empty when the grid does not divide the model
  // Each pipeline stage's passes of one micro-batch as the clock simulated them (busy
  // and compute seconds; the optimizer per step): what a per-phase timer measures.
  // Empty where no batch time was computed.
  std::vector<StagePasses> stages;
};

// Throws InputError for a request no grid can satisfy (check_request).
Explanation explain(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                    const PlannerOptions& o);

}  // namespace axonn::planner
