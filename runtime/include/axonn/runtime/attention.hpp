// The attention core of a transformer block, causal softmax(Q K^T / sqrt(d)) V, on the
// packed output of the QKV layer, two ways (the two attention entries of
// runtime/tensor_ops.hpp):
//  - causal_attention: every rank holds whole sequences of its heads;
//  - sequence_attention: the sequence mode; each member of `group` holds a contiguous
//    chunk of every sequence's positions, and the keys and values of the other chunks
//    come round the ring (ring_attention.hpp), the mask on global positions.
// qkv: [sequences, positions, 3 * width] (Q, K, V side by side, `heads` heads of
// width / heads each); the result [sequences, positions, width].
//
// Example (2 sequences of 16 positions, 4 heads of 8):
//   at::Tensor ctx = runtime::causal_attention(qkv, 4);  // qkv [2, 16, 96] -> [2, 16, 32]
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "axonn/runtime/communicator.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads);
// `group` and `tracer` (may be null) must outlive the autograd graph.
at::Tensor sequence_attention(Communicator& group, const at::Tensor& qkv, int64_t heads, Tracer* tracer);

}  // namespace axonn::runtime
