// The attention core, whole sequences or a ring of chunks; see axonn/runtime/attention.hpp.
#include "axonn/runtime/attention.hpp"

#include <cmath>
#include <limits>

#include "axonn/runtime/ring_attention.hpp"

namespace axonn::runtime {

at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads) {
  const int64_t b = qkv.size(0), s = qkv.size(1), width = qkv.size(2) / 3, d = width / heads;
  auto split = [&](int64_t part) { return qkv.narrow(2, part * width, width).reshape({b, s, heads, d}).transpose(1, 2); };
  at::Tensor q = split(0), k = split(1), v = split(2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  at::Tensor mask = at::ones({s, s}, at::kBool).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  return at::matmul(scores.softmax(-1), v).transpose(1, 2).reshape({b, s, width});
}

at::Tensor sequence_attention(Communicator& group, const at::Tensor& qkv, int64_t heads, Tracer* tracer) {
  // As causal_attention, on this member's chunk of positions: heads to the batch, the
  // keys and values of the other chunks from the ring.
  const int64_t b = qkv.size(0), s = qkv.size(1), width = qkv.size(2) / 3, d = width / heads;
  auto split = [&](int64_t part) {
    return qkv.narrow(2, part * width, width).reshape({b, s, heads, d}).transpose(1, 2).reshape({b * heads, s, d});
  };
  at::Tensor out = ring_self_attention(group, split(0), split(1), split(2), /*causal=*/true, tracer);
  return out.view({b, heads, s, d}).transpose(1, 2).reshape({b, s, width});
}

}  // namespace axonn::runtime
