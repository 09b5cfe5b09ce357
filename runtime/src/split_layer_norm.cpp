// The layer norm over a split hidden dimension; see axonn/runtime/split_layer_norm.hpp.
#include "axonn/runtime/split_layer_norm.hpp"

namespace axonn::runtime {

at::Tensor split_layer_norm_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                                    int64_t hidden, double eps, const SumOverGroup& sum, SplitNormSaved& saved) {
  const double H = static_cast<double>(hidden);
  at::Tensor mean = x.sum(-1, true).contiguous();
  sum(mean);
  mean.div_(H);
  at::Tensor xc = x - mean;
  at::Tensor var = (xc * xc).sum(-1, true).contiguous();
  sum(var);
  var.div_(H);
  saved.rstd = (var + eps).rsqrt();
  saved.xhat = xc * saved.rstd;
  return saved.xhat * gamma + beta;
}

SplitNormGrads split_layer_norm_backward(const at::Tensor& dy, const at::Tensor& gamma, const SplitNormSaved& saved,
                                         int64_t hidden, const SumOverGroup& sum) {
  const double H = static_cast<double>(hidden);
  const at::Tensor& xhat = saved.xhat;
  at::Tensor gy = dy * gamma;
  at::Tensor sums = at::cat({gy.sum(-1, true), (gy * xhat).sum(-1, true)}, -1).contiguous();
  sum(sums);
  sums.div_(H);
  SplitNormGrads g;
  g.dx = saved.rstd * (gy - sums.narrow(-1, 0, 1) - xhat * sums.narrow(-1, 1, 1));
  const auto rows = dy.numel() / dy.size(-1);
  g.dgamma = (dy * xhat).reshape({rows, -1}).sum(0);
  g.dbeta = dy.reshape({rows, -1}).sum(0);
  return g;
}

}  // namespace axonn::runtime
