// A MatmulTimer (calibrate.hpp) backed by LibTorch; linked into the axplan program only
// when the build has LibTorch, so the planner library and its tests stay LibTorch-free.
#pragma once

#include "axonn/planner/compute_model.hpp"

namespace axonn::tools {

// Median seconds per call of at::matmul on random fp32 operands of shape `s` (one
// thread); each of the `repeats` runs loops for at least 50 ms.
double time_matmul_libtorch(const planner::MatmulShape& s, int repeats);

}  // namespace axonn::tools
