// Local matmul shapes and their times; see axonn/planner/compute_model.hpp.
#include "axonn/planner/compute_model.hpp"

namespace axonn::planner {
namespace {

using topo::Axis;

struct LocalLinear {
  int64_t rows, k, n;  // rows of I on this GPU; W's local block is k x n
};

LocalLinear local_linear(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs, int64_t seq_len) {
  const Axis a = l.transposed ? Axis::Y : Axis::X;  // splits W's rows
  const Axis b = l.transposed ? Axis::X : Axis::Y;  // splits W's columns
  return {microbatch_seqs / g.gz * seq_len, l.k / g.size(a), l.n / g.size(b)};
}

// Attention heads are split over the group that splits QKV's output columns (Y).
MatmulShape attention_shape(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs, int64_t m,
                            int64_t k, int64_t n) {
  return {m, k, n, microbatch_seqs / g.gz * (l.heads / g.gy)};
}

}  // namespace

std::vector<MatmulShape> forward_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                         int64_t seq_len) {
  const int64_t s = seq_len, d = l.head_dim;
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:
      return {attention_shape(l, g, microbatch_seqs, s, d, s), attention_shape(l, g, microbatch_seqs, s, s, d)};
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return {{x.rows, x.k, x.n, 1}};
}

std::vector<MatmulShape> backward_input_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                int64_t seq_len) {
  const int64_t s = seq_len, d = l.head_dim;
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:  // dP = dC V^T, dQ = dS K, dK = dS^T Q
      return {attention_shape(l, g, microbatch_seqs, s, d, s), attention_shape(l, g, microbatch_seqs, s, s, d),
              attention_shape(l, g, microbatch_seqs, s, s, d)};
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return {{x.rows, x.n, x.k, 1}};
}

std::vector<MatmulShape> backward_weight_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                 int64_t seq_len) {
  const int64_t s = seq_len;
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:  // dV = P^T dC (attention has no weights; this is its last input gradient)
      return {attention_shape(l, g, microbatch_seqs, s, s, l.head_dim)};
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return {{x.k, x.rows, x.n, 1}};
}

ElementwiseTime elementwise_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g,
                              int64_t microbatch_seqs, int64_t seq_len) {
  ElementwiseTime out;
  auto add = [&](const char* op, double elements) {
    auto it = t.compute.elementwise.find(op);
    if (it == t.compute.elementwise.end()) return;
    out.forward_s += elements * it->second.forward_s_per_element;
    out.backward_s += elements * it->second.backward_s_per_element;
  };
  if (l.kind == model::LayerKind::Attention) {
    const double s = static_cast<double>(seq_len);
    add("softmax", static_cast<double>(microbatch_seqs / g.gz * (l.heads / g.gy)) * s * s);
    return out;
  }
  if (l.kind != model::LayerKind::Linear) return out;
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  const double rows = static_cast<double>(x.rows);
  const double in = rows * static_cast<double>(x.k), outputs = rows * static_cast<double>(x.n);
  if (l.norm_before) add("layer_norm", in);
  if (l.bias) add("bias", outputs);
  if (l.gelu_after) add("gelu", outputs);
  if (l.residual_after) add("residual", outputs);
  if (l.loss_after) add("cross_entropy", outputs);
  return out;
}

double optimizer_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g) {
  auto it = t.compute.elementwise.find("adam");
  if (it == t.compute.elementwise.end() || l.weight_elements() == 0) return 0;
  const topo::Axis a = l.transposed ? Axis::Y : Axis::X, b = l.transposed ? Axis::X : Axis::Y;
  const double local = static_cast<double>(l.weight_elements()) /
                       static_cast<double>(g.size(a) * g.size(b) * g.gz);
  return local * it->second.forward_s_per_element;
}

double matmul_s(const topo::Topology& t, const MatmulShape& s) {
  for (const auto& e : t.compute.matmul_table)
    if (e.m == s.m && e.k == s.k && e.n == s.n && e.batch == s.batch) return e.seconds;
  const double rate = t.compute.matmul_flops_per_s > 0 ? t.compute.matmul_flops_per_s : t.peak_flops_per_s;
  return t.compute.matmul_overhead_s + s.flops() / rate;
}

double matmuls_s(const topo::Topology& t, const std::vector<MatmulShape>& shapes) {
  double total = 0;
  for (const auto& s : shapes) total += matmul_s(t, s);
  return total;
}

}  // namespace axonn::planner
