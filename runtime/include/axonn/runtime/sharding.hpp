// How a serial (unsharded) parameter maps onto the ranks of one model replica, and back.
//
//   Matrix k x n: rows split over axis_a, columns over axis_b (column-parallel layer
//                 and head: X, Y; row-parallel layer and the embedding's table: Y, X); the local block, flattened
//                 row-major, is split into Gz equal chunks, chunk z on Z-rank z.
//   Vector n:     entries split over axis_a, replicated over every other axis.
//   qkv_heads>0:  the columns (entries) are [q | k | v], each heads x head_dim; they are
//                 regrouped per Y-rank as [q_y | k_y | v_y] so a split keeps whole heads.
//
// Example (Gx = Gy = 2, Gz = 1, W is 4 x 6, column-parallel): rank (x=1, y=0) holds W[2:4, 0:3].
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/runtime/process_grid.hpp"

namespace axonn::runtime {

struct ShardSpec {
  enum class Kind { Matrix, Vector };
  Kind kind = Kind::Matrix;
  topo::Axis axis_a = topo::Axis::X;  // Matrix: rows; Vector: entries
  topo::Axis axis_b = topo::Axis::Y;  // Matrix: columns
  int64_t qkv_heads = 0;

  static ShardSpec matrix(model::LinearRole role, int64_t qkv_heads = 0);
  static ShardSpec vector(topo::Axis axis, int64_t qkv_heads = 0);
  // Replicated over Z (and so its gradient must be summed over Z).
  bool replicated_over_z() const { return kind == Kind::Vector; }
  // How many ranks of one model replica hold each element.
  int64_t replication(const topo::Grid& g) const;
};

// This rank's shard of `full` (a new contiguous tensor).
at::Tensor shard_of(const at::Tensor& full, const ShardSpec& s, const topo::Grid& g, const topo::Coords& c);

// The positions (row-major indices into the full tensor of `full_shape`) that the shard
// at `c` holds, in the shard's order and shape: shard_of(arange(n).view(full_shape), ...),
// computed from the shard's own extent (8 bytes per shard element, never the full
// tensor's). Sharded initialization and checkpoint re-slicing use it.
at::Tensor shard_positions(const ShardSpec& s, at::IntArrayRef full_shape, const topo::Grid& g, const topo::Coords& c);

// The full tensor from every rank's shard, on every rank of the stage (collective over
// g.tensor(): the ranks holding parts of this rank's pipeline stage).
at::Tensor unshard(ProcessGrid& g, const at::Tensor& local, const ShardSpec& s, at::IntArrayRef full_shape);

struct Parameter {
  std::string name;
  at::Tensor tensor;  // the local shard; requires grad
  ShardSpec spec;
  std::vector<int64_t> shape;  // the full (serial) shape
};

}  // namespace axonn::runtime
