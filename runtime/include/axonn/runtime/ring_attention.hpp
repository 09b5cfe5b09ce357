// Ring self-attention: the attention core of Colossal-AI's sequence parallelism (seed 004,
// section IV; ../shared/reference/seed-spec.md C6), for the `sequence` tensor mode of
// issue #11.
//
// The sequence of L positions is split into N contiguous chunks over the members of
// `group`: member n holds positions [n*L/N, (n+1)*L/N). Each member passes its own
// queries, keys and values, [batch*heads, L/N, head_dim], and gets its chunk of
//     softmax(Q K^T / sqrt(head_dim) + mask) V
// over the whole sequence; with `causal` the mask hides every key at a later *global*
// position than the query's.
//
// Forward: keys, then values, circulate around the ring (member n sends to n+1 and
// receives from n-1, the next shift in flight while the current chunk is multiplied), so
// a member holds its own chunk and one more; its queries' scores against all L keys
// ([batch*heads, L/N, L]) are the memory the method costs, as the paper says.
// Backward: D = rowsum(dO * O) gives the softmax gradient without a second pass over the
// keys, so one ring pass carries (K_m, V_m) and the accumulating (dK_m, dV_m) together;
// after N shifts each accumulator is back at its owner. No gradient is divided by N (the
// Colossal-AI source divides dQ, dK, dV by N as a convention; here the gradients are
// those of the serial attention).
// Chunks sent per member, each batch*heads*(L/N)*head_dim elements:
// forward 2(N-1); backward 2(N-1) + 2N (planner: ring_self_attention_forward_s and _backward_s, collectives.hpp).
// Blocks wholly above the causal diagonal are not computed (their probabilities are 0).
// With a tracer, each shift's wait (what the step pays for it; the transfer itself runs
// beside the chunk's matmul) is a span of kind p2p_seq: 2(N-1) in the forward, 2N-1 in
// the backward.
//
// Example (4 members, a sequence of 64 split in 16s, 12 heads of 64, batch 2):
//   at::Tensor out = ring_self_attention(seq_group, q, k, v, /*causal=*/true);  // [24, 16, 64]
#pragma once

#include <ATen/ATen.h>

#include "axonn/runtime/communicator.hpp"
#include "axonn/runtime/trace.hpp"

namespace axonn::runtime {

// Differentiable in q, k and v. `group` must outlive the autograd graph. q, k, v: the
// same shape [batch*heads, L/N, head_dim] on every member; throws InputError otherwise.
// `tracer` (may be null) must outlive the autograd graph too.
at::Tensor ring_self_attention(Communicator& group, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               bool causal, Tracer* tracer = nullptr);

}  // namespace axonn::runtime
