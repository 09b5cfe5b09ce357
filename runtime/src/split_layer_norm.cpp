// The layer norm over a split hidden dimension; see axonn/runtime/split_layer_norm.hpp.
#include "axonn/runtime/split_layer_norm.hpp"

namespace axonn::runtime {

at::Tensor split_layer_norm_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                                    int64_t hidden, double eps, const SumOverGroup& sum, SplitNormSaved& saved) {
  const double H = static_cast<double>(hidden), n = static_cast<double>(x.size(-1));
  // The local columns' mean and variance in one fused pass (fp32 at least), then the
  // group's in one all-reduce of their sums and sums of squares, n (var + mean^2) per
  // member, in fp64: var = Q / H - mean^2 cancels where the mean is large beside the
  // spread, and fp64 leaves that error about 1e-16 * mean^2 / var (the local
  // statistics' own fp32 error enters only through the members' means' spread).
  const auto [local_var, local_mean] = at::var_mean(x.to(at::promote_types(x.scalar_type(), at::kFloat)), {-1},
                                                    /*unbiased=*/false, /*keepdim=*/true);
  at::Tensor m = local_mean.to(at::kDouble), stats = at::cat({m * n, (local_var.to(at::kDouble) + m * m) * n}, -1);
  sum(stats);
  const at::Tensor mean = stats.narrow(-1, 0, 1) / H;
  const at::Tensor var = (stats.narrow(-1, 1, 1) / H - mean * mean).clamp_min(0.0);
  at::Tensor xc = x - mean.to(x.scalar_type());
  saved.rstd = (var + eps).rsqrt().to(x.scalar_type());
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
