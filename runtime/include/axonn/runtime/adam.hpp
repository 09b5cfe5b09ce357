// Adam's arithmetic, once: LibTorch 1.13's update (torch/csrc/api/src/optim/adam.cpp)
// in its order of operations, for the optimizers that keep their own buffers (FlatAdam
// in optimizer.hpp, the L2L parameter server in parameter_server.hpp). Given the same
// gradient, each element's update is bitwise torch::optim::Adam's.
//
// Example:
//   AdamCoefficients c = adam_coefficients(settings, /*step=*/1);   // steps count from 1
//   adam_update(weights, exp_avg, exp_avg_sq, grad, c);              // grad ends holding the denominator
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace axonn::runtime {

struct AdamSettings {
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // LibTorch's defaults
};

// The step's scalars: the bias corrections of step `step` (>= 1).
struct AdamCoefficients {
  double beta1 = 0, beta2 = 0, eps = 0, sqrt_bias_correction2 = 0, step_size = 0;
};
AdamCoefficients adam_coefficients(const AdamSettings& s, int64_t step);

// One update of `w` in place, with its moments `m` and `v`; `g` (the gradient, same
// element type) is overwritten with Adam's denominator.
void adam_update(at::Tensor w, at::Tensor m, at::Tensor v, at::Tensor g, const AdamCoefficients& c);

}  // namespace axonn::runtime
