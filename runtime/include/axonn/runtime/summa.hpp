// SUMMA matrix multiplication: the linear operator of Colossal-AI's 2D tensor
// parallelism ("Optimus"; seed 004; ../shared/reference/seed-spec.md C2), as the
// paper runs it: the `2d-broadcast` tensor mode's layers (tensor_parallel.hpp's
// tp2d_broadcast_linear, through the engine) and the bare operator summa_linear below
// (and, one per depth layer, 2.5D's). The `2d` mode runs its collective form instead.
//
// On a q x q grid of ranks, rank (i, j) (row i, column j) holds block (i, j) of each of
// X [rows, k], W [k, n] and Y = X W [rows, n]: X_ij is row block i and k block j, W_ij
// is k block i and n block j. Nothing is replicated.
//   Forward, q steps: at step t, X_it is broadcast along row i (from (i, t)) and W_tj
//   along column j (from (t, j)); Y_ij += X_it W_tj. The next step's broadcasts are in
//   flight while this step multiplies.
//   Backward: dX_it = sum_j dY_ij W_tj^T: W_tj broadcast along column j again, the
//   products reduced along row i to (i, t); dW_tj = sum_i X_it^T dY_ij: X_it broadcast
//   along row i again, the products reduced along column j to (t, j).
// Y has X's layout, so SUMMA layers chain without the transposed roles of AxoNN's 3D.
// Per rank and step: forward q broadcasts of an X block and q of a W block (each
// O(1/q^2) of the matrix); backward q broadcasts and q reduces of each.
//
// Example (4 ranks as a 2 x 2 grid; row = the members of this rank's row ordered by
// column, column = those of its column ordered by row):
//   at::Tensor y = summa_linear(row, column, x_block, w_block);  // [rows/2, n/2]
//   // or, moving the blocks another way: class M : public SummaMoves {...};
//   at::Tensor y2 = summa_forward(m, x_block, w_block);
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <utility>

#include "axonn/runtime/communicator.hpp"

namespace axonn::runtime {

// How SUMMA's steps move blocks and multiply: the bare operator below calls the
// communicators; the GPT's 2d-broadcast layers (tp2d_broadcast_linear) go through the
// engine, which traces each move and times each product. A move is waited for by
// calling what it returns.
class SummaMoves {
 public:
  using Pending = std::function<void()>;
  virtual ~SummaMoves() = default;
  virtual int64_t q() const = 0;
  virtual int64_t row_rank() const = 0;     // this rank's place in its row (its column index)
  virtual int64_t column_rank() const = 0;  // and in its column (its row index)
  // In place, from or to member `root` of this rank's row (the X blocks) or column (W).
  virtual Pending broadcast_row(const at::Tensor& t, int64_t root) = 0;
  virtual Pending broadcast_column(const at::Tensor& t, int64_t root) = 0;
  virtual Pending reduce_row(const at::Tensor& t, int64_t root) = 0;
  virtual Pending reduce_column(const at::Tensor& t, int64_t root) = 0;
  // One product of a step; `backward`: of the backward pass.
  virtual at::Tensor multiply(bool /*backward*/, const std::function<at::Tensor()>& f) { return f(); }
};

// The algorithm itself, shared by both: Y = X W from the blocks, and (dX, dW) from dY.
at::Tensor summa_forward(SummaMoves& m, const at::Tensor& x_block, const at::Tensor& w_block);
std::pair<at::Tensor, at::Tensor> summa_backward(SummaMoves& m, const at::Tensor& x_block, const at::Tensor& w_block,
                                                 const at::Tensor& dy_block);

// Differentiable in x_block [rows/q, k/q] and w_block [k/q, n/q]; `row` and `column`
// have q members each and must outlive the autograd graph. Throws InputError for
// groups of different sizes or blocks whose inner dimensions differ.
at::Tensor summa_linear(Communicator& row, Communicator& column, const at::Tensor& x_block,
                        const at::Tensor& w_block);

}  // namespace axonn::runtime
