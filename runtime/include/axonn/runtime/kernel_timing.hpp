// Kernel timers for `axplan calibrate --model` (axonn/runtime/calibration.hpp): the
// local matmuls and element-wise operations the runtime runs, timed with LibTorch in
// fp32 (the runtime's dtype on CPU) on one thread, in LibTorch's pool and the BLAS's
// (compute_threads.hpp).
//
// Example:
//   double s = time_matmul({1024, 128, 512, 1, 0}, /*repeats=*/3);   // seconds per call
#pragma once

#include <cstdint>
#include <string>

#include "axonn/topology/topology.hpp"

namespace axonn::runtime {

// Median seconds per call of at::matmul on random operands of the shape (m, k, n,
// batch) of `shape` (its seconds are ignored); each of the `repeats` runs loops for at
// least 50 ms.
double time_matmul(const topo::MatmulTiming& shape, int repeats);

// Seconds per element, forward and backward (autograd; layer_norm_split: the runtime's
// own backward), of one element-wise operation of topo::elementwise_op_names() as the
// runtime runs it, on `rows` x `width` elements (softmax: rows/width score matrices of
// width x width). Medians of `repeats` runs.
// Throws InputError for an unknown operation.
topo::ElementwiseCost time_elementwise(const std::string& op, int64_t rows, int64_t width, int repeats);

}  // namespace axonn::runtime
