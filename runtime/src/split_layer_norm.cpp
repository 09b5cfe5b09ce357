// The layer norm over a split hidden dimension; see axonn/runtime/split_layer_norm.hpp.
#include "axonn/runtime/split_layer_norm.hpp"

#include <algorithm>
#include <cmath>

namespace axonn::runtime {

at::Tensor split_layer_norm_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                                    int64_t hidden, double eps, const SumOverGroup& sum, SplitNormSaved& saved) {
  const double H = static_cast<double>(hidden), n = static_cast<double>(x.size(-1));
  // Each member's mean m_i and centred sum of squares M2_i over its n columns (two
  // passes: exact where the mean dwarfs the spread).
  const at::Tensor local_mean = x.sum(-1, true).div_(n);
  at::Tensor xc = x - local_mean;
  const at::Tensor local = at::cat({local_mean, (xc * xc).sum(-1, true)}, -1).to(at::kDouble);  // contiguous: cat's
  // The group's in one all-reduce of every member's sum n m_i and sum of squares
  // M2_i + n m_i^2, in fp64: the variance Q / H - mean^2 then loses about
  // 1e-16 * mean^2 / var, where fp32 would lose all its digits at mean / std ~ 3e3.
  // Per row in loops: a dozen tensor operations on (rows, 1) tensors would cost more
  // than the call saves.
  auto per_row = x.sizes().vec();
  per_row.back() = 2;
  at::Tensor stats = at::empty(per_row, local.options());
  const int64_t rows = stats.numel() / 2;
  const double* m = local.data_ptr<double>();  // m_i, M2_i per row
  double* io = stats.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    io[2 * r] = n * m[2 * r];
    io[2 * r + 1] = m[2 * r + 1] + n * m[2 * r] * m[2 * r];
  }
  sum(stats);
  for (int64_t r = 0; r < rows; ++r) {  // now 1 / sqrt(var + eps) and mean - m_i
    const double mean = io[2 * r] / H, var = std::max(io[2 * r + 1] / H - mean * mean, 0.0);
    io[2 * r] = 1.0 / std::sqrt(var + eps);
    io[2 * r + 1] = mean - m[2 * r];
  }
  const at::Tensor scale = stats.to(x.scalar_type());
  saved.rstd = scale.narrow(-1, 0, 1).contiguous();
  saved.xhat = xc.sub_(scale.narrow(-1, 1, 1)).mul_(saved.rstd);  // x - mean from x - m_i, in place
  // gamma and beta broadcast over rows: LibTorch's CPU addcmul is fast in that direction
  // (and ~4 times slower than a subtract and a multiply with (rows, 1) operands).
  return at::addcmul(beta, saved.xhat, gamma);
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
