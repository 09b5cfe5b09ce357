// The 3D tensor-parallel operators of the 4D paper's Algorithm 1 as LibTorch autograd
// functions, plus the exact operators around them (embedding, layer norm, loss).
// Layouts (docs/runtime.md), rows = this rank's tokens (its Z share of the micro-batch):
//
//   column-parallel    in [rows, k/Gx] (replicated over Y)  ->  out [rows, n/Gy] (replicated over X)
//     linear (AxoNN's "normal" layer; the head too)
//   row-parallel       in [rows, k/Gy] (replicated over X)  ->  out [rows, n/Gx] (replicated over Y)
//     linear (AxoNN's "transposed" layer)
//   weight             the local block (k/Gx x n/Gy, or k/Gy x n/Gx), flattened, 1/Gz of it per rank
//   embedding          tokens [rows] -> [rows, hidden/Gx]; table vocab/Gy x hidden/Gx, 1/Gz per rank
//   layer norm         [rows, hidden/Gx], statistics all-reduced over X (exact)
//   vocab-parallel CE  logits [rows, vocab/Gy] -> per-row loss, reductions over Y (exact)
//
// The 2d layout (topo::Grid::summa, Colossal-AI's 2D on gx = 1, gy = gz = q), where
// every activation is block (z, y) of its matrix and nothing is replicated:
//   2d linear          in [rows, k/Gy] -> out [rows, n/Gy]. SUMMA in its collective form:
//                      the input's row broadcasts are one all-gather over Y (to
//                      [rows, k]), the weight's column broadcasts the weight source's
//                      gather over Z (the block k x n/Gy); backward, dI = dO W^T is
//                      reduce-scattered over Y (the row reduces) and dW = I^T dO over Z
//                      (the column reduces). The gathered input is kept for dW.
//   2d embedding       tokens [rows] -> [rows, hidden/Gy]; table vocab x hidden/Gy (gathered over Z)
//   layer norm         [rows, hidden/Gy], statistics all-reduced over Y
//   vocab-parallel CE  as above (logits [rows, vocab/Gy])
//   2d-broadcast linear  the same blocks, SUMMA as the paper runs it (summa.hpp): q
//                      steps of broadcasts of input blocks along Y and of this rank's
//                      weight block [k/Gy, n/Gy] (its shard, never gathered) along Z;
//                      backward, dI reduced along Y and dW along Z to their owners.
//
// The 3d layout (topo::Grid::threed, Colossal-AI's 3D): AxoNN's weight blocks, and the
// rows AxoNN replicates split instead, so a column-parallel layer's input is [rows/Gy, k/Gx]
// and its output [rows/Gx, n/Gy] (row-parallel: X and Y swapped):
//   3d linear          the input's rows all-gathered over b, AxoNN's matmul, the partial
//                      output reduce-scattered over a by rows (AxoNN all-reduces it);
//                      backward: dO's rows all-gathered over a, dI reduce-scattered
//                      over b, dW as AxoNN's
//   embedding          its output reduce-scattered over Y by rows: [rows/Gy, hidden/Gx]
//   biases, norms      their gradients summed over the axis splitting the rows
//
// Where every group an operator uses has one member, it calls LibTorch's own kernel
// (matmul, embedding, layer_norm, cross_entropy): the same function, fused.
//
// Gradient convention: a tensor replicated over a group carries the full gradient on
// every member; a weight shard receives its gradient summed over Z (reduce-scatter).
// Parameters replicated over Z (biases, layer-norm weights) still need a sum over Z,
// done with the data-parallel reduction (Trainer).
//
// Every collective goes through the Engine (engine.hpp): weights from its weight source,
// dW blocks to its gradient reducer, the operators' own all-reduces through its
// OperatorComm; each records what it runs, so the runtime can check the pass against
// the schedule. Weights are referred to by their layer index in the stage's schedule.
//
// Example:
//   engine.add_layer(4, &w_shard);   // fc1 is layer 4 of the stage
//   auto out = tp_linear(engine, 4, x, bias, LinearShape{1024, 4096, model::LinearRole::Column});
#pragma once

#include <utility>

#include <ATen/ATen.h>

#include "axonn/model/model_description.hpp"
#include "axonn/runtime/engine.hpp"

namespace axonn::runtime {

struct LinearShape {
  int64_t k = 0;  // input features (rows of W)
  int64_t n = 0;  // output features (columns of W)
  // Its role in a column/row pair (the model description's): a row-parallel layer is
  // AxoNN's "transposed" one, X and Y swapping roles; the head is column-parallel.
  model::LinearRole role = model::LinearRole::Column;
  bool row() const { return role == model::LinearRole::Row; }
};

// O = I*W (+ bias). `bias` may be undefined; it holds the local output columns.
at::Tensor tp_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias,
                     const LinearShape& shape);

// Rows of the vocab x hidden table (engine layer `layer`) for `tokens` (int64, [rows]).
at::Tensor tp_embedding(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden);

// The 3d layout's linear; the bias (if any) holds the local output columns.
at::Tensor tp3d_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias,
                       const LinearShape& shape);
// `v` as used on rows split over `rows` (3d): the same values, its gradient summed over
// that axis's group; `v` itself in the other layouts.
at::Tensor rows_split_vector(Engine& e, const at::Tensor& v, topo::Axis rows);
// Two such vectors used together (a norm's gain and shift): their gradients summed in
// one call.
std::pair<at::Tensor, at::Tensor> rows_split_vectors(Engine& e, const at::Tensor& v, const at::Tensor& w,
                                                     topo::Axis rows);

// The 2d layout's linear (no roles: every layer is column-parallel) and embedding.
at::Tensor tp2d_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias, int64_t k, int64_t n);
// The 2d-broadcast layout's linear: the same blocks in and out, SUMMA's broadcasts and
// reduces on this rank's own weight block (summa.hpp); its embedding is tp2d_embedding.
at::Tensor tp2d_broadcast_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias, int64_t k,
                                 int64_t n);
at::Tensor tp2d_embedding(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden);

// Layer norm over the full hidden width when each rank holds hidden/Gx columns (2d:
// hidden/Gy).
at::Tensor tp_layer_norm(Engine& e, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                         int64_t hidden, double eps);

// Cross-entropy per row when each rank holds vocab/Gy logit columns; [rows].
at::Tensor tp_cross_entropy(Engine& e, const at::Tensor& logits, const at::Tensor& targets, int64_t vocab);

}  // namespace axonn::runtime
