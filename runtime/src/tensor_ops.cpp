// The runtime's tensor-mode table; see axonn/runtime/tensor_ops.hpp.
#include "axonn/runtime/tensor_ops.hpp"

#include "axonn/common/error.hpp"
#include "axonn/runtime/attention.hpp"

namespace axonn::runtime {
namespace {

using topo::Axis;
using topo::TensorLayout;

at::Tensor summa_linear_op(Engine& e, int64_t layer, const at::Tensor& x, const at::Tensor& bias,
                           const LinearShape& shape) {
  return tp2d_linear(e, layer, x, bias, shape.k, shape.n);  // no roles: every layer is normal
}
at::Tensor summa_broadcast_op(Engine& e, int64_t layer, const at::Tensor& x, const at::Tensor& bias,
                              const LinearShape& shape) {
  return tp2d_broadcast_linear(e, layer, x, bias, shape.k, shape.n);
}
ShardSpec role_matrix(model::LinearRole role, int64_t heads) { return ShardSpec::matrix(role, heads); }
ShardSpec column_matrix(model::LinearRole, int64_t heads) { return ShardSpec::matrix(model::LinearRole::Column, heads); }
ShardSpec natural_vector(Axis axis, int64_t heads) { return ShardSpec::vector(axis, heads); }
ShardSpec y_vector(Axis, int64_t heads) { return ShardSpec::vector(Axis::Y, heads); }

at::Tensor whole_sequences(Engine&, const at::Tensor& qkv, int64_t heads) { return causal_attention(qkv, heads); }
at::Tensor ring_of_chunks(Engine& e, const at::Tensor& qkv, int64_t heads) {
  return sequence_attention(e.grid.sequence(), qkv, heads, e.tracer());
}
Communicator& tensor_group(ProcessGrid& grid) { return grid.tensor(); }
Communicator& sequence_group(ProcessGrid& grid) { return grid.sequence(); }

}  // namespace

const TensorOps& tensor_ops(const topo::Grid& g) {
  static const TensorOps sequence = [] {
    TensorOps e = tensor_ops(TensorLayout::Axonn3d);
    e.attention = ring_of_chunks;
    e.lockstep_group = sequence_group;
    return e;
  }();
  if (g.sequence == 1) return tensor_ops(g.layout);
  AXONN_ASSERT(g.layout == TensorLayout::Axonn3d);  // a sequence group keeps AxoNN's layout (divisibility)
  return sequence;
}

const TensorOps& tensor_ops(TensorLayout layout) {
  static const TensorOps axonn3d{TensorLayout::Axonn3d, tp_linear, tp_embedding, role_matrix, natural_vector,
                                 std::nullopt, std::nullopt, whole_sequences, tensor_group};
  static const TensorOps two_d{TensorLayout::TwoD, summa_linear_op, tp2d_embedding, column_matrix, y_vector,
                               std::nullopt, std::nullopt, whole_sequences, tensor_group};
  static const TensorOps two_d_broadcast{TensorLayout::TwoDBroadcast, summa_broadcast_op, tp2d_embedding,
                                         column_matrix, y_vector, std::nullopt, std::nullopt, whole_sequences,
                                         tensor_group};
  static const TensorOps three_d{TensorLayout::ThreeD, tp3d_linear, tp_embedding, role_matrix, natural_vector,
                                 Axis::Y, Axis::X, whole_sequences, tensor_group};
  switch (layout) {
    case TensorLayout::Axonn3d: return axonn3d;
    case TensorLayout::TwoD: return two_d;
    case TensorLayout::ThreeD: return three_d;
    case TensorLayout::TwoDBroadcast: return two_d_broadcast;
  }
  throw InternalError("runtime", "a layout without operators", "tensor_ops", "a layout of topo::TensorLayout");
}

}  // namespace axonn::runtime
