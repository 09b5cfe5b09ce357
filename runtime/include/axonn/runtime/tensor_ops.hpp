// The runtime side of a tensor mode: the operators a model calls and how it shards its
// parameters, one entry per layout (topo::TensorLayout), looked up once per grid. The
// GPT and the trainer call through the entry instead of testing the layout, so a new
// layout is a new entry and its operators (docs/architecture.md, "How a new strategy
// is added"); plan/tensor_mode.hpp names the modes whose grids carry the layout.
//
//   layout    linear         embedding        weights, vectors           rows split (in / out)
//   axonn3d   tp_linear      tp_embedding     AxoNN's blocks, by role    -  /  -
//   2d        tp2d_linear    tp2d_embedding   normal blocks, vectors on Y -  /  -
//   3d        tp3d_linear    tp_embedding     AxoNN's blocks, by role    Y  /  X
//
// Example:
//   const runtime::TensorOps& ops = runtime::tensor_ops(grid.grid().layout);
//   at::Tensor y = ops.linear(engine, layer, x, bias, runtime::LinearShape{k, n, false});
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/ATen.h>

#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/tensor_parallel.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::runtime {

struct TensorOps {
  topo::TensorLayout layout = topo::TensorLayout::Axonn3d;
  // y = x W (+ bias) for engine layer `layer`; shape.transposed: the row-parallel
  // member of a column/row pair (a layout without roles ignores it).
  at::Tensor (*linear)(Engine& e, int64_t layer, const at::Tensor& x, const at::Tensor& bias,
                       const LinearShape& shape) = nullptr;
  // The vocab x hidden table's rows for `tokens` (int64, [rows]).
  at::Tensor (*embedding)(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden) = nullptr;
  // A weight's shards (transposed: the row-parallel role) and a bias's or norm's, given
  // the axis that splits the activation it meets in AxoNN's layout.
  ShardSpec (*matrix)(bool transposed, int64_t qkv_heads) = nullptr;
  ShardSpec (*vector)(topo::Axis natural, int64_t qkv_heads) = nullptr;
  // The axis whose group splits the rows of a column-parallel layer's input (the
  // stage's input, the embedding's output: tp_embedding scatters them over Y in 3d, so
  // the two must agree) and of its output (the attention's input, the logits); none
  // where the rows are whole.
  std::optional<topo::Axis> input_rows_split, output_rows_split;
};

// The entry of `layout`.
const TensorOps& tensor_ops(topo::TensorLayout layout);

}  // namespace axonn::runtime
