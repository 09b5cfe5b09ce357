// SUMMA (runtime/summa.hpp, the 2d mode's linear operator) against serial LibTorch
// under real mpirun (part of runtime_mpi_tests): on 4 ranks one 2 x 2 grid, on 8 two
// 2 x 2 grids side by side with their own data (as data-parallel replicas), on 9 one
// 3 x 3 grid (ctest runtime_mpi_np9_summa), elsewhere grids of one. Y = X W and the
// gradients of X and W, block by block, within rel. err 1e-5 of the serial matmul; the
// blocks are not replicated anywhere.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "axonn/runtime/summa.hpp"
#include "runtime_test_util.hpp"

using namespace axonn;
using namespace axonn::test;

TEST(Summa, BlocksEqualTheSerialMatmulAndItsGradients) {
  const int64_t ranks = g_world->size(), q = ranks % 9 == 0 ? 3 : ranks % 4 == 0 ? 2 : 1;
  const int64_t grid = g_world->rank() / (q * q), member = g_world->rank() % (q * q);
  const int64_t i = member / q, j = member % q;
  auto row = g_world->split(static_cast<int>(grid * q + i), static_cast<int>(j), "summa_row");
  auto column = g_world->split(static_cast<int>(grid * q + j), static_cast<int>(i), "summa_column");
  ASSERT_EQ(row->rank(), j);
  ASSERT_EQ(column->rank(), i);
  const int64_t rows = 6 * q, k = 4 * q, n = 10 * q;
  torch::manual_seed(50 + static_cast<uint64_t>(grid));  // each grid its own matrices
  const at::Tensor x = at::randn({rows, k}), w = at::randn({k, n}), dy = at::randn({rows, n});
  at::Tensor xs = x.clone().requires_grad_(), ws = w.clone().requires_grad_();
  at::matmul(xs, ws).backward(dy);
  const at::Tensor y_ref = at::matmul(x, w);
  auto block = [&](const at::Tensor& t, int64_t a, int64_t b) {
    return t.narrow(0, a * (t.size(0) / q), t.size(0) / q).narrow(1, b * (t.size(1) / q), t.size(1) / q).contiguous();
  };
  at::Tensor xb = block(x, i, j).requires_grad_(), wb = block(w, i, j).requires_grad_();
  at::Tensor y = runtime::summa_linear(*row, *column, xb, wb);
  y.backward(block(dy, i, j));
  const std::string where = "rank (" + std::to_string(i) + ", " + std::to_string(j) + ") of a " + std::to_string(q) +
                            " x " + std::to_string(q) + " grid";
  EXPECT_LT(relative_error(y, block(y_ref, i, j)), 1e-5) << where;
  EXPECT_LT(relative_error(xb.grad(), block(xs.grad(), i, j)), 1e-5) << where;
  EXPECT_LT(relative_error(wb.grad(), block(ws.grad(), i, j)), 1e-5) << where;
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{rows / q, n / q})) << where;
}

TEST(Summa, RefusesBlocksThatDoNotChain) {
  const at::Tensor a = at::zeros({2, 3}), b = at::zeros({4, 5});
  try {
    runtime::summa_linear(*g_world, *g_world, a, b);
    FAIL() << "accepted [2, 3] x [4, 5]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("summa_linear"), std::string::npos) << e.what();
  }
}
