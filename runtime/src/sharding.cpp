// Sharding of serial parameters; see axonn/runtime/sharding.hpp.
#include "axonn/runtime/sharding.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using topo::Axis;

ShardSpec ShardSpec::matrix(model::LinearRole role, int64_t qkv_heads) {
  const bool row = role == model::LinearRole::Row;
  ShardSpec s;
  s.kind = Kind::Matrix;
  s.axis_a = row ? Axis::Y : Axis::X;
  s.axis_b = row ? Axis::X : Axis::Y;
  s.qkv_heads = qkv_heads;
  return s;
}

ShardSpec ShardSpec::vector(Axis axis, int64_t qkv_heads) {
  ShardSpec s;
  s.kind = Kind::Vector;
  s.axis_a = axis;
  s.qkv_heads = qkv_heads;
  return s;
}

int64_t ShardSpec::replication(const topo::Grid& g) const {
  if (kind == Kind::Matrix) return 1;
  return g.gx * g.gy * g.gz / g.size(axis_a);
}

namespace {

// New position -> old position of the regrouped [q|k|v] columns for `gy` Y-ranks.
at::Tensor qkv_permutation(int64_t n, int64_t gy) {
  const int64_t hidden = n / 3, per_rank = hidden / gy;
  std::vector<int64_t> perm;
  perm.reserve(n);
  for (int64_t y = 0; y < gy; ++y)
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t i = 0; i < per_rank; ++i) perm.push_back(part * hidden + y * per_rank + i);
  return at::tensor(perm, at::kLong);
}

int64_t last_dim(const at::Tensor& t) { return t.size(t.dim() - 1); }

}  // namespace

at::Tensor shard_of(const at::Tensor& full_in, const ShardSpec& s, const topo::Grid& g, const topo::Coords& c) {
  at::Tensor full = full_in.detach();
  if (s.qkv_heads > 0) full = full.index_select(full.dim() - 1, qkv_permutation(last_dim(full), g.gy));
  const int64_t ga = g.size(s.axis_a), ia = c[static_cast<int>(s.axis_a)];
  if (s.kind == ShardSpec::Kind::Vector) {
    const int64_t len = full.size(0) / ga;
    return full.narrow(0, ia * len, len).clone();  // never a view of the serial tensor
  }
  const int64_t gb = g.size(s.axis_b), ib = c[static_cast<int>(s.axis_b)];
  const int64_t rows = full.size(0) / ga, cols = full.size(1) / gb;
  at::Tensor block = full.narrow(0, ia * rows, rows).narrow(1, ib * cols, cols).contiguous().view({-1});
  const int64_t chunk = block.numel() / g.gz;
  return block.narrow(0, c[static_cast<int>(Axis::Z)] * chunk, chunk).clone();
}

at::Tensor shard_positions(const ShardSpec& s, at::IntArrayRef full_shape, const topo::Grid& g, const topo::Coords& c) {
  const int64_t ga = g.size(s.axis_a), ia = c[static_cast<int>(s.axis_a)];
  const int64_t n_cols = full_shape[full_shape.size() - 1];
  // A column of the (regrouped) tensor -> its column in the full tensor.
  auto column = [&](const at::Tensor& regrouped) {
    return s.qkv_heads > 0 ? qkv_permutation(n_cols, g.gy).index_select(0, regrouped) : regrouped;
  };
  if (s.kind == ShardSpec::Kind::Vector) {
    const int64_t len = full_shape[0] / ga;
    return column(at::arange(ia * len, (ia + 1) * len, at::kLong));
  }
  const int64_t gb = g.size(s.axis_b), ib = c[static_cast<int>(s.axis_b)];
  const int64_t rows = full_shape[0] / ga, cols = n_cols / gb;
  const int64_t chunk = rows * cols / g.gz, z = c[static_cast<int>(Axis::Z)];
  // In place where possible: at most two (three with qkv) tensors of the shard's size.
  at::Tensor col = at::arange(z * chunk, (z + 1) * chunk, at::kLong);  // the Z chunk of the flat block
  at::Tensor row = col.div(cols, "floor").add_(ia * rows);
  col = column(col.remainder_(cols).add_(ib * cols));
  return row.mul_(n_cols).add_(col);
}

at::Tensor unshard(ProcessGrid& g, const at::Tensor& local, const ShardSpec& s, at::IntArrayRef full_shape) {
  const topo::Grid& grid = g.grid();
  at::Tensor full = at::zeros(full_shape, local.options());
  // Only one holder of each element writes it; the sum over the model group assembles it.
  const int64_t ga = grid.size(s.axis_a), ia = g.coord(s.axis_a);
  bool canonical = true;
  for (int i = 0; i < topo::kNumAxes; ++i) {
    auto a = static_cast<Axis>(i);
    if (a == Axis::Data || a == Axis::Pipe || a == s.axis_a ||
        (s.kind == ShardSpec::Kind::Matrix && (a == s.axis_b || a == Axis::Z)))
      continue;
    canonical = canonical && g.coord(a) == 0;
  }
  at::Tensor permuted = at::zeros(full_shape, local.options());
  if (canonical) {
    at::Tensor l = local.detach();
    if (s.kind == ShardSpec::Kind::Vector) {
      const int64_t len = full_shape[0] / ga;
      permuted.narrow(0, ia * len, len).copy_(l);
    } else {
      const int64_t gb = grid.size(s.axis_b), ib = g.coord(s.axis_b);
      const int64_t rows = full_shape[0] / ga, cols = full_shape[1] / gb;
      at::Tensor block = at::zeros({rows * cols}, local.options());
      const int64_t chunk = rows * cols / grid.gz;
      block.narrow(0, g.coord(Axis::Z) * chunk, chunk).copy_(l.reshape({-1}));
      permuted.narrow(0, ia * rows, rows).narrow(1, ib * cols, cols).copy_(block.view({rows, cols}));
    }
  }
  all_reduce_now(g.tensor(), permuted);
  if (s.qkv_heads == 0) return permuted;
  const int64_t dim = permuted.dim() - 1;
  full.index_copy_(dim, qkv_permutation(permuted.size(dim), grid.gy), permuted);
  return full;
}

}  // namespace axonn::runtime
