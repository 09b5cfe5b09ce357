// The instructions the planner simulated for one grid, per pipeline stage: the step
// (each Forward and Backward with its simulated times) and the pass programs of the
// stage, as the clock ran them. The runtime's record of a step must list the same
// (tests/runtime: "the runtime runs the planner's instructions").
//
// Example:
//   auto stages = simulated_schedule(model, topology, Grid{1, 2, 1, 1, 4}, options);
//   stages[3].steps.front().instruction;   // RecvActivation(0) on the last stage
#pragma once

#include <vector>

#include "axonn/planner/pipeline_time.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/pass.hpp"

namespace axonn::planner {

struct SimulatedStage {
  std::vector<SimulatedInstruction> steps;
  std::vector<schedule::PassLayer> layers;
  std::vector<schedule::LayerInstruction> forward, backward, last_backward;
};

// Throws InputError when the grid is rejected (the reason in the message).
std::vector<SimulatedStage> simulated_schedule(const model::ModelDescription& m, const topo::Topology& t,
                                               const topo::Grid& g, const PlannerOptions& o);

}  // namespace axonn::planner
