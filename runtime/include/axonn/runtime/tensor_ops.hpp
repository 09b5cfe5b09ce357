// The runtime side of a tensor mode: the operators a model calls and how it shards its
// parameters, one entry per layout (topo::TensorLayout) and one for the sequence mode,
// looked up once per grid. The GPT and the trainer call through the entry instead of
// testing the layout or the sequence group, so a new layout is a new entry and its
// operators (docs/architecture.md, "How a new strategy is added"); plan/tensor_mode.hpp
// names the modes whose grids carry the layout.
//
//   entry     linear         embedding        weights, vectors           rows split   attention, lockstep group
//   axonn3d   tp_linear      tp_embedding     AxoNN's blocks, by role    -  /  -      causal, tensor
//   2d        tp2d_linear    tp2d_embedding   normal blocks, vectors on Y -  /  -     causal, tensor
//   3d        tp3d_linear    tp_embedding     AxoNN's blocks, by role    Y  /  X      causal, tensor
//   sequence  (axonn3d's, no tensor axes)                                             the ring, sequence
//
// Example:
//   const runtime::TensorOps& ops = runtime::tensor_ops(grid.grid());
//   at::Tensor y = ops.linear(engine, layer, x, bias, runtime::LinearShape{k, n, model::LinearRole::Column});
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/ATen.h>

#include "axonn/runtime/communicator.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/tensor_parallel.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::runtime {

struct TensorOps {
  topo::TensorLayout layout = topo::TensorLayout::Axonn3d;
  // y = x W (+ bias) for engine layer `layer`; shape.role: its role in a column/row
  // pair (a layout without roles ignores it).
  at::Tensor (*linear)(Engine& e, int64_t layer, const at::Tensor& x, const at::Tensor& bias,
                       const LinearShape& shape) = nullptr;
  // The vocab x hidden table's rows for `tokens` (int64, [rows]).
  at::Tensor (*embedding)(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden) = nullptr;
  // A weight's shards, by its layer's role (the embedding's table is split as a
  // row-parallel weight), and a bias's or norm's, given the axis that splits the
  // activation it meets in AxoNN's layout.
  ShardSpec (*matrix)(model::LinearRole role, int64_t qkv_heads) = nullptr;
  ShardSpec (*vector)(topo::Axis natural, int64_t qkv_heads) = nullptr;
  // The axis whose group splits the rows of a column-parallel layer's input (the
  // stage's input, the embedding's output: tp_embedding scatters them over Y in 3d, so
  // the two must agree) and of its output (the attention's input, the logits); none
  // where the rows are whole.
  std::optional<topo::Axis> input_rows_split, output_rows_split;
  // The attention core on this rank's `heads` heads (attention.hpp): qkv [sequences,
  // positions, 3 * width] -> [sequences, positions, width]. causal_attention on whole
  // sequences; the sequence entry's ring over the grid's sequence group.
  at::Tensor (*attention)(Engine& e, const at::Tensor& qkv, int64_t heads) = nullptr;
  // The group whose members issue a stage's collectives together, so that under the
  // message-driven pipeline they take the next message alike: the tensor group, or the
  // sequence group (whose rings must pair up).
  Communicator& (*lockstep_group)(ProcessGrid& grid) = nullptr;
};

// The entry of `layout`.
const TensorOps& tensor_ops(topo::TensorLayout layout);
// The entry of a grid: its layout's, or with a sequence group (Grid::sequence > 1, the
// sequence mode) the sequence entry.
const TensorOps& tensor_ops(const topo::Grid& g);

}  // namespace axonn::runtime
