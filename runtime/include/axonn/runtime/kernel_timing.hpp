// Kernel timers for `axplan calibrate --model` (axonn/runtime/calibration.hpp): the
// local matmuls and element-wise operations the runtime runs, timed with LibTorch on
// one thread, in LibTorch's pool and the BLAS's (compute_threads.hpp), in the dtype of
// the plan's weights and activations: fp32 (validate's plans on CPU), or bf16 (mixed
// precision, `axplan plan`'s default), whose products LibTorch runs through other
// kernels (oneDNN) at another rate. Adam updates fp32 master weights in either.
//
// Example:
//   double s = time_matmul({1024, 128, 512, 1, 0}, /*repeats=*/3);   // seconds per call
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/ScalarType.h>

#include "axonn/topology/measurements.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::runtime {

// Median seconds per call of at::matmul on random operands of the shape (m, k, n,
// batch) of `shape` (its seconds are ignored); each of the `repeats` runs loops for at
// least 50 ms. Operands of `dtype`.
double time_matmul(const topo::MatmulTiming& shape, int repeats, at::ScalarType dtype = at::kFloat);

// Seconds per element, forward and backward (autograd; layer_norm_split: the runtime's
// own backward), of one element-wise operation of topo::elementwise_op_names() as the
// runtime runs it, on `shape` (topo::ElementwiseShape). Medians of `repeats` runs.
// Activations of `dtype` (adam: fp32; grad_accumulate: a `dtype` dW added to an fp32
// gradient). Throws InputError for an unknown operation.
topo::ElementwiseCost time_elementwise(const std::string& op, const topo::ElementwiseShape& shape, int repeats,
                                       at::ScalarType dtype = at::kFloat);

}  // namespace axonn::runtime
