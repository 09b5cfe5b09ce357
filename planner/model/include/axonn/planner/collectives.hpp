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

// Point-to-point send of B bytes: B / beta + alpha.
inline double point_to_point_s(double bytes, double beta_bytes_per_s, double alpha_s = 0) {
  return bytes / beta_bytes_per_s + alpha_s;
}

}  // namespace axonn::planner
