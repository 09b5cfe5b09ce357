// Compute time of one layer on one GPU (docs/model.md section 7): the local matrix
// multiplies a layer runs for one micro-batch, and what each costs on a topology.
//
// A normal layer O = I*W (W is k x n) on a (Gx, Gy, Gz) grid multiplies, per GPU,
// I's block of rows x (k/Gx), rows = mb*seq/Gz, by W's gathered block (k/Gx) x (n/Gy):
//   forward   (m, k, n) = (rows, k/Gx, n/Gy)           O  = I  W
//   backward  (m, n, k)                                dI = dO W^T
//             (k, m, n)                                dW = I^T dO
// A transposed layer swaps Gx and Gy. Attention runs, for (seqs/Gz) * (heads/Gy) heads,
// S = Q K^T (s x d x s) and C = P V (s x s x d) forward, and four such products backward.
// Embeddings are lookups: no matmul.
//
// Example (gpt-bench fc1, k = 256, n = 1024, 16 sequences of 128 tokens, grid 2,2,2):
//   forward_matmuls(fc1, {2,2,2,1,1}, 16, 128)  ->  {m = 1024, k = 128, n = 512}
//   matmul_s(c, peak, {1024, 128, 512}) = overhead + 2*1024*128*512 / rate  (or the table's entry)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/topology/grid.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// `batch` products of an (m x k) by a (k x n) matrix.
struct MatmulShape {
  int64_t m = 0, k = 0, n = 0, batch = 1;
  double flops() const { return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(k) *
                                static_cast<double>(n); }
  bool operator==(const MatmulShape& o) const { return m == o.m && k == o.k && n == o.n && batch == o.batch; }
};

// Up to three local matmuls of one pass of one layer, without allocating (the planner's
// inner loop; the std::vector functions below return the same shapes).
struct MatmulList {
  std::array<MatmulShape, 3> shapes{};
  size_t size = 0;
  void push_back(const MatmulShape& s) { shapes[size++] = s; }
  const MatmulShape* begin() const { return shapes.data(); }
  const MatmulShape* end() const { return shapes.data() + size; }
};
MatmulList forward_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs, int64_t seq_len);
MatmulList backward_input_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                      int64_t seq_len);
MatmulList backward_weight_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                       int64_t seq_len);

// Local matmuls of one micro-batch of `microbatch_seqs` sequences (of one data-parallel group).
std::vector<MatmulShape> forward_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                         int64_t seq_len);
// Backward products: the input side (dI for linear layers; dP, dQ, dK for attention) and
// the weight side (dW; dV for attention). Embeddings have none.
std::vector<MatmulShape> backward_input_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                int64_t seq_len);
std::vector<MatmulShape> backward_weight_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                 int64_t seq_len);

// Element-wise work of one layer for one micro-batch on one GPU, seconds: each of the
// layer's operations (model::Layer flags; softmax for attention) costs its measured
// seconds per element (topology compute.elementwise_s_per_element; unmeasured, with
// compute.memory_bytes_per_s: elementwise_bytes / memory_bytes_per_s) times its elements:
//   bias, gelu, residual, cross_entropy   rows * n/Gb      (the layer's local output; 3d: rows/Ga)
//   layer_norm                            rows * k/Ga      (the layer's local input; 2d: k/(Ga Gy); 3d: rows/Gb)
//     at layer_norm_split's rates where the hidden dimension is split (the layout's
//     hidden axis has more than one member: the runtime's decomposed form), else the
//     fused layer_norm's; without a layer_norm_split entry, its roofline bytes where
//     the topology has a memory bandwidth, else layer_norm's rates
//   softmax                               (mb/Gz)*(heads/Gy) * s * s   (3d: mb/(Gz Gx), as attention's matmuls)
//   attention_layout                      (mb/Gz)*(heads/Gy) * s * d   (one of q, k, v; the same sequences)
// Zero where the topology has neither.
struct ElementwiseTime {
  double forward_s = 0;
  double backward_s = 0;
};
ElementwiseTime elementwise_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g,
                              int64_t microbatch_seqs, int64_t seq_len);
// One Adam step over the layer's local weight shard (k*n / (Ga*Gb*Gz) elements), seconds.
double optimizer_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g);
// Adding one backward pass's weight gradient into the shard's gradient buffer (the
// grad_accumulate operation over the same local elements), seconds. Charged once per
// micro-batch's backward pass: the runtime zeroes the buffers once per step (not
// charged) and every pass adds into them (runtime/src/bucketed_reducer.cpp). 0 where
// the topology has neither a measured cost nor a memory bandwidth, or sets the cost to
// 0 (fused into the dW product).
double gradient_accumulation_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g);

// The measured rates of a layer's element-wise operations, looked up once per layer
// and topology (elementwise_s's terms in the same order, so the same sums).
struct ElementwiseRates {
  enum class Elements { Input, Output, Scores, Heads };  // what the operation touches (table above)
  struct Term {
    Elements elements = Elements::Output;
    double forward_s_per_element = 0, backward_s_per_element = 0;
  };
  static constexpr size_t kMaxTerms = 5;
  std::array<Term, kMaxTerms> terms{};
  size_t count = 0;
  // The layer norm's term (an index into terms; kMaxTerms when the layer has none) and
  // its rates where the hidden dimension is split, which replace that term's there.
  size_t norm_term = kMaxTerms;
  Term split_norm{};
  double adam_s_per_element = 0;             // 0: not measured
  double grad_accumulate_s_per_element = 0;  // 0: not measured, or fused
};
ElementwiseRates elementwise_rates(const topo::Topology& t, const model::Layer& l);
ElementwiseTime elementwise_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g,
                              int64_t microbatch_seqs, int64_t seq_len);
double optimizer_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g);
double gradient_accumulation_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g);

// Bytes one element-wise operation moves per element when memory bandwidth bounds it
// (docs/model.md section 7): half-precision (2-byte) activations, each operand read
// once and each result written once; Adam reads and writes fp32 master weights and
// moments and writes the half-precision copy; the gradient accumulation reads and
// writes the fp32 gradient and reads the half-precision dW. {0, 0} for an unknown name.
struct ElementwiseBytes {
  double forward = 0;   // bytes per element
  double backward = 0;  // bytes per element
};
ElementwiseBytes elementwise_bytes(const std::string& op);

// Bytes a matmul moves at least: its half-precision operands and result, once each,
// 2 * b * (m*k + k*n + m*n) bytes (the roofline's memory side).
double matmul_bytes(const MatmulShape& s);

// `t` as a plan whose weights and activations take `compute_bytes` bytes an element
// (plan::Precision::compute_bytes) computes on it: a copy whose `compute` is
// t.compute_bf16 for 2 bytes where `t` has it (Topology::compute_for); null where `t`
// serves as it is. The evaluator and the L2L model read compute from what this gives.
std::shared_ptr<const topo::Topology> topology_for_precision(const topo::Topology& t, int64_t compute_bytes);

// Seconds for one matmul: the measured table entry of exactly this shape if there is
// one, else matmul_overhead_s + max(flops / matmul_flops_per_s (peak_flops_per_s if
// 0), matmul_bytes / memory_bytes_per_s (if set)).
double matmul_s(const topo::Topology& t, const MatmulShape& s);

// matmul_s with the table indexed once (the planner evaluates thousands of grids on
// one topology). Keeps a reference to `t`.
class MatmulTimes {
 public:
  explicit MatmulTimes(const topo::Topology& t);
  double operator()(const MatmulShape& s) const;
  double sum(const MatmulList& shapes) const;

 private:
  struct Hash {
    size_t operator()(const MatmulShape& s) const;
  };
  const topo::Topology& t_;
  double rate_flops_per_s_;
  std::unordered_map<MatmulShape, double, Hash> table_;
  double memory_bytes_per_s_;  // 0: no memory side
};

}  // namespace axonn::planner
