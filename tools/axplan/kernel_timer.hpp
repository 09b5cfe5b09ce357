// Kernel timers for `axplan calibrate --model` (calibrate.hpp) backed by LibTorch; linked
// into the axplan program only when the build has LibTorch, so the planner library and
// its tests stay LibTorch-free. One thread per rank, fp32 (the runtime's dtype on CPU).
#pragma once

#include <cstdint>
#include <string>

#include "axonn/planner/compute_model.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::tools {

// Median seconds per call of at::matmul on random operands of shape `s`; each of the
// `repeats` runs loops for at least 50 ms.
double time_matmul_libtorch(const planner::MatmulShape& s, int repeats);

// Seconds per element, forward and backward (autograd), of one element-wise operation
// of topo::elementwise_op_names() as the runtime runs it, on `rows` x `width` elements
// (softmax: rows/width score matrices of width x width). Medians of `repeats` runs.
topo::ElementwiseCost time_elementwise_libtorch(const std::string& op, int64_t rows, int64_t width, int repeats);

}  // namespace axonn::tools
