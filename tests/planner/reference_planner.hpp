// The reference evaluation of one grid (reference_planner.cpp): the per-layer
// implementation the memoized planner must reproduce exactly.
#pragma once

#include "axonn/planner/planner.hpp"

namespace axonn::test {

planner::Evaluation reference_evaluate(const model::ModelDescription& m, const topo::Topology& t,
                                       const topo::Grid& g, const planner::PlannerOptions& o);

}  // namespace axonn::test
