// The layer norm over a hidden dimension split across a group (the layout's hidden axis:
// X for AxoNN 3D and 3d, Y for 2d and 2d-broadcast): its arithmetic, with the group's
// sum as a callback. The runtime's LayerNormFn (tensor_parallel.cpp) passes its
// all-reduce; `axplan calibrate` passes none and times the same arithmetic (the
// element-wise operation layer_norm_split), so the planner charges what the runtime runs. Where the group has one member the runtime calls
// at::layer_norm, LibTorch's fused kernel, instead (layer_norm), which moves the
// activations a few times less (docs/model.md section 7).
//
// Example:
//   SplitNormSaved s;
//   at::Tensor y = split_layer_norm_forward(x, gamma, beta, hidden, 1e-5, sum_over_group, s);
//   SplitNormGrads d = split_layer_norm_backward(dy, gamma, s, hidden, sum_over_group);
#pragma once

#include <functional>

#include <ATen/ATen.h>

namespace axonn::runtime {

// Sums a tensor over the group in place (an all-reduce); a no-op for a group of one.
// Called once in the forward (fp64 statistics) and once in the backward (the input's
// dtype).
using SumOverGroup = std::function<void(at::Tensor&)>;

struct SplitNormSaved {
  at::Tensor xhat;  // the normalized input, (x - mean) * rstd: the local columns
  at::Tensor rstd;  // 1 / sqrt(var + eps), one per row
};

struct SplitNormGrads {
  at::Tensor dx, dgamma, dbeta;  // dgamma, dbeta: this rank's rows' contributions
};

// y = (x - mean) / sqrt(var + eps) * gamma + beta, with the mean and variance over the
// full hidden width `hidden`: one call of `sum` on a (rows, 2) fp64 tensor, each
// member's sum and sum of squares of its columns.
at::Tensor split_layer_norm_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                                    int64_t hidden, double eps, const SumOverGroup& sum, SplitNormSaved& saved);

// dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)) with gy = dy * gamma, the means
// over the full hidden width; dgamma and dbeta summed over this rank's rows.
SplitNormGrads split_layer_norm_backward(const at::Tensor& dy, const at::Tensor& gamma, const SplitNormSaved& saved,
                                         int64_t hidden, const SumOverGroup& sum);

}  // namespace axonn::runtime
