// Ring collective times (the 4D paper's eqs. 1-3, docs/model.md section 1).
//
// p GPUs, B = the full buffer in bytes (all-gather output, reduce-scatter input,
// all-reduce buffer), beta = bandwidth in bytes/s, alpha = latency per ring step in
// seconds (0 = the paper's Assumption 3). A group of one GPU costs nothing.
//
// Example: 4 GPUs all-reduce 1 GB at 100 GB/s:
//   ring_all_reduce_s(4, 1e9, 100e9);   // 2 * 3/4 * 1e9 / 100e9 = 0.015 s
#pragma once

#include <cstdint>

#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// t_AG(p, B) = (p-1)/p * B / beta + alpha * (p-1)
inline double ring_all_gather_s(int64_t p, double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  if (p <= 1) return 0.0;
  const double steps = static_cast<double>(p - 1);
  return steps / static_cast<double>(p) * bytes / beta_bytes_per_s + alpha_s * steps;
}

// t_RS(p, B) = (p-1)/p * B / beta + alpha * (p-1)
inline double ring_reduce_scatter_s(int64_t p, double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  return ring_all_gather_s(p, bytes, beta_bytes_per_s, alpha_s);
}

// t_AR(p, B) = 2 * (p-1)/p * B / beta + 2 * alpha * (p-1)   (reduce-scatter + all-gather)
inline double ring_all_reduce_s(int64_t p, double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  return 2.0 * ring_all_gather_s(p, bytes, beta_bytes_per_s, alpha_s);
}

// The bytes of an all-gather's output B that a group's busiest node link carries, per
// byte, for p members with m on each node (m < p: the group crosses nodes), by
// algorithm (topo::AllGatherAlgorithm):
//   ring:    (p-1)/p       (one ring edge leaves each node)
//   linear:  m (p-m) / p   (each of the node's m members sends its B/p to the p-m
//                           members elsewhere)
// Example: p = 8 on 2 nodes of 4 (m = 4): ring 0.875, linear 2.
inline double all_gather_link_bytes(topo::AllGatherAlgorithm a, int64_t p, int64_t m) {
  const double pd = static_cast<double>(p), md = static_cast<double>(m);
  return a == topo::AllGatherAlgorithm::Linear ? md * (pd - md) / pd : (pd - 1.0) / pd;
}
// How many times a ring's time the algorithm takes: the ratio of the two link volumes
// across nodes, m (p-m) / (p-1) for linear; 1 inside a node (m >= p), where the model
// keeps the measured ring rate, and for p = 2 or one member per node (m = 1).
inline double all_gather_slowdown(topo::AllGatherAlgorithm a, int64_t p, int64_t m) {
  if (p <= 1 || m >= p) return 1.0;
  return all_gather_link_bytes(a, p, m) / all_gather_link_bytes(topo::AllGatherAlgorithm::Ring, p, m);
}

// Point-to-point send of B bytes: B / beta + alpha.
inline double point_to_point_s(double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  return bytes / beta_bytes_per_s + alpha_s;
}

// Broadcast of B bytes from one member, pipelined along the ring (NCCL's ring
// broadcast; 2D/2.5D SUMMA's row and column broadcasts): every link carries B once and
// the last member waits p-1 hops for the first piece.
// t_BC(p, B) = B / beta + alpha * (p-1)
inline double ring_broadcast_s(int64_t p, double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  if (p <= 1) return 0.0;
  return bytes / beta_bytes_per_s + alpha_s * static_cast<double>(p - 1);
}

// Reduce of B bytes to one member, the broadcast run backwards (SUMMA's backward).
// t_R(p, B) = B / beta + alpha * (p-1)
inline double ring_reduce_s(int64_t p, double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  return ring_broadcast_s(p, bytes, beta_bytes_per_s, alpha_s);
}

// Ring self-attention over p members (runtime/ring_attention.hpp), C = bytes of one
// member's chunk of K (or V, dK, dV): batch * heads * (L/p) * head_dim * element bytes.
// Forward: K, then V, go round the ring, p-1 shifts each:
//   t_RSA_fwd(p, C) = 2 (p-1) * t_P2P(C)
// Backward: (K, V) packed, p-1 shifts, and the (dK, dV) accumulators p shifts home:
//   t_RSA_bwd(p, C) = (2p - 1) * t_P2P(2C)
// The shifts of one forward and of one backward (0 without a ring).
inline int64_t ring_self_attention_forward_shifts(int64_t p) { return p <= 1 ? 0 : 2 * (p - 1); }
inline int64_t ring_self_attention_backward_shifts(int64_t p) { return p <= 1 ? 0 : 2 * p - 1; }
inline double ring_self_attention_forward_s(int64_t p, double chunk_bytes, double beta_bytes_per_s,
                                            double alpha_s = 0) {
  if (p <= 1) return 0.0;
  return static_cast<double>(ring_self_attention_forward_shifts(p)) *
         point_to_point_s(chunk_bytes, beta_bytes_per_s, alpha_s);
}
inline double ring_self_attention_backward_s(int64_t p, double chunk_bytes, double beta_bytes_per_s,
                                             double alpha_s = 0) {
  if (p <= 1) return 0.0;
  return static_cast<double>(ring_self_attention_backward_shifts(p)) *
         point_to_point_s(2.0 * chunk_bytes, beta_bytes_per_s, alpha_s);
}

}  // namespace axonn::planner
