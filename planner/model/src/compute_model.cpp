// Local matmul shapes and their times; see axonn/planner/compute_model.hpp.
#include "axonn/planner/compute_model.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "axonn/plan/layout_rules.hpp"
#include "axonn/planner/layout_costs.hpp"

namespace axonn::planner {
namespace {

using topo::Axis;

struct LocalLinear {
  int64_t rows, k, n;  // rows of I on this GPU; W's local block is k x n
};

// SUMMA in its broadcast form (2d-broadcast): q products of blocks per pass, one per
// step, [rows, k/q] x [k/q, n/q]; as one batch of q (the runtime makes q calls).
int64_t summa_steps(const topo::Grid& g) { return layout_costs(g.layout).rules->linear_weight_local ? g.gy : 1; }

LocalLinear local_linear(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs, int64_t seq_len) {
  if (summa_steps(g) > 1)
    return {microbatch_seqs / g.gz * (seq_len / g.sequence), l.k / g.gy, l.n / g.gy};
  const bool swap = layout_costs(g.layout).swaps(l);
  const Axis a = swap ? Axis::Y : Axis::X;     // splits W's rows
  const Axis b = swap ? Axis::X : Axis::Y;     // splits W's columns
  return {microbatch_seqs / g.gz * (seq_len / g.sequence), l.k / g.size(a), l.n / g.size(b)};
}

// With sequence parallelism a member's queries are its chunk; the keys are all seq_len.
int64_t queries(const topo::Grid& g, int64_t seq_len) { return seq_len / g.sequence; }

// The sequences of a Z-rank's micro-batch that an attention layer sees: QKV's output
// rows, split over its a axis (X) where the layout splits rows (3d).
int64_t attention_seqs(const topo::Grid& g, int64_t microbatch_seqs) {
  return microbatch_seqs / g.gz / layout_costs(g.layout).attention_row_split(g);
}

// Attention heads are split over the group that splits QKV's output columns (Y).
MatmulShape attention_shape(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs, int64_t m,
                            int64_t k, int64_t n) {
  return {m, k, n, attention_seqs(g, microbatch_seqs) * (l.heads / g.gy)};
}

MatmulList list(std::initializer_list<MatmulShape> shapes) {
  MatmulList out;
  for (const auto& s : shapes) out.push_back(s);
  return out;
}

std::vector<MatmulShape> to_vector(const MatmulList& l) { return {l.begin(), l.end()}; }

}  // namespace

std::vector<MatmulShape> forward_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                         int64_t seq_len) {
  return to_vector(forward_matmul_list(l, g, microbatch_seqs, seq_len));
}

std::vector<MatmulShape> backward_input_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                int64_t seq_len) {
  return to_vector(backward_input_matmul_list(l, g, microbatch_seqs, seq_len));
}

std::vector<MatmulShape> backward_weight_matmuls(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                                 int64_t seq_len) {
  return to_vector(backward_weight_matmul_list(l, g, microbatch_seqs, seq_len));
}

MatmulList forward_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                               int64_t seq_len) {
  const int64_t s = seq_len, q = queries(g, seq_len), d = l.head_dim;
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:  // S = Q K^T, C = P V
      return list({attention_shape(l, g, microbatch_seqs, q, d, s), attention_shape(l, g, microbatch_seqs, q, s, d)});
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return list({{x.rows, x.k, x.n, summa_steps(g)}});
}

MatmulList backward_input_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                      int64_t seq_len) {
  const int64_t s = seq_len, q = queries(g, seq_len), d = l.head_dim;
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:  // dP = dC V^T, dQ = dS K, dK = dS^T Q
      return list({attention_shape(l, g, microbatch_seqs, q, d, s), attention_shape(l, g, microbatch_seqs, q, s, d),
                   attention_shape(l, g, microbatch_seqs, s, q, d)});
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return list({{x.rows, x.n, x.k, summa_steps(g)}});
}

MatmulList backward_weight_matmul_list(const model::Layer& l, const topo::Grid& g, int64_t microbatch_seqs,
                                       int64_t seq_len) {
  const int64_t s = seq_len, q = queries(g, seq_len);
  switch (l.kind) {
    case model::LayerKind::Embedding: return {};
    case model::LayerKind::Attention:  // dV = P^T dC (attention has no weights; this is its last input gradient)
      return list({attention_shape(l, g, microbatch_seqs, s, q, l.head_dim)});
    case model::LayerKind::Linear: break;
  }
  const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
  return list({{x.k, x.rows, x.n, summa_steps(g)}});
}

ElementwiseRates elementwise_rates(const topo::Topology& t, const model::Layer& l) {
  ElementwiseRates r;
  using E = ElementwiseRates::Elements;
  const double bandwidth = t.compute.memory_bytes_per_s;
  auto cost = [&](const char* op) -> std::optional<topo::ElementwiseCost> {
    auto it = t.compute.elementwise.find(op);
    if (it != t.compute.elementwise.end()) return it->second;
    if (bandwidth <= 0) return std::nullopt;
    const ElementwiseBytes b = elementwise_bytes(op);
    return topo::ElementwiseCost{b.forward / bandwidth, b.backward / bandwidth};
  };
  auto add = [&](const char* op, E elements) {
    if (auto c = cost(op)) r.terms[r.count++] = {elements, c->forward_s_per_element, c->backward_s_per_element};
  };
  if (l.kind == model::LayerKind::Attention) {
    add("softmax", E::Scores);
    add("attention_layout", E::Heads);
  }
  if (l.kind == model::LayerKind::Linear) {
    if (l.norm_before) {
      const size_t before = r.count;
      add("layer_norm", E::Input);
      if (r.count > before) {
        r.norm_term = before;
        r.split_norm = r.terms[r.norm_term];
        if (auto c = cost("layer_norm_split"))
          r.split_norm = {E::Input, c->forward_s_per_element, c->backward_s_per_element};
      }
    }
    if (l.bias) add("bias", E::Output);
    if (l.gelu_after) add("gelu", E::Output);
    if (l.residual_after) add("residual", E::Output);
    if (l.loss_after) add("cross_entropy", E::Output);
  }
  if (l.weight_elements() > 0) {
    if (auto adam = cost("adam")) r.adam_s_per_element = adam->forward_s_per_element;
    if (auto acc = cost("grad_accumulate")) r.grad_accumulate_s_per_element = acc->forward_s_per_element;
  }
  return r;
}

ElementwiseTime elementwise_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g,
                              int64_t microbatch_seqs, int64_t seq_len) {
  ElementwiseTime out;
  if (r.count == 0) return out;
  double in = 0, outputs = 0, scores = 0, heads = 0;
  if (l.kind == model::LayerKind::Attention) {
    const double s = static_cast<double>(seq_len), q = static_cast<double>(queries(g, seq_len));
    const double local_heads = static_cast<double>(attention_seqs(g, microbatch_seqs) * (l.heads / g.gy));
    scores = local_heads * q * s;
    heads = local_heads * q * static_cast<double>(l.head_dim);
  } else {
    const LocalLinear x = local_linear(l, g, microbatch_seqs, seq_len);
    const LayoutCosts& layout = layout_costs(g.layout);
    const double rows = static_cast<double>(x.rows);
    // Where the input is gathered before the matmul (2d), the element-wise work on it
    // (the layer norm) is on the block each rank holds; where rows are split (3d), on
    // the rows each rank holds: the input's over b (gathered after the norm), the
    // output's over a (reduce-scattered before the bias and GELU).
    const double in_rows = rows / static_cast<double>(layout.input_row_split(l, g));
    const double out_rows = rows / static_cast<double>(layout.output_row_split(l, g));
    in = in_rows * static_cast<double>(x.k) / static_cast<double>(layout.input_block_split(g)),
    outputs = out_rows * static_cast<double>(x.n);
  }
  using E = ElementwiseRates::Elements;
  // Looked up only for a layer with a norm (the planner's inner loop).
  const bool hidden_split = r.norm_term < r.count && g.size(plan::layout_rules(g.layout).hidden_axis) > 1;
  for (size_t i = 0; i < r.count; ++i) {
    const auto& term = i == r.norm_term && hidden_split ? r.split_norm : r.terms[i];
    const double elements = term.elements == E::Input    ? in
                            : term.elements == E::Output ? outputs
                            : term.elements == E::Scores ? scores
                                                         : heads;
    out.forward_s += elements * term.forward_s_per_element;
    out.backward_s += elements * term.backward_s_per_element;
  }
  return out;
}

ElementwiseTime elementwise_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g,
                              int64_t microbatch_seqs, int64_t seq_len) {
  return elementwise_s(elementwise_rates(t, l), l, g, microbatch_seqs, seq_len);
}

namespace {
// The layer's weight elements on one rank: k*n / (Ga*Gb*Gz).
double local_weight_elements(const model::Layer& l, const topo::Grid& g) {
  const topo::Axis a = l.swaps_xy() ? Axis::Y : Axis::X, b = l.swaps_xy() ? Axis::X : Axis::Y;
  return static_cast<double>(l.weight_elements()) / static_cast<double>(g.size(a) * g.size(b) * g.gz);
}
}  // namespace

double optimizer_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g) {
  if (r.adam_s_per_element == 0 || l.weight_elements() == 0) return 0;
  return local_weight_elements(l, g) * r.adam_s_per_element;
}

double optimizer_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g) {
  return optimizer_s(elementwise_rates(t, l), l, g);
}

double gradient_accumulation_s(const ElementwiseRates& r, const model::Layer& l, const topo::Grid& g) {
  if (r.grad_accumulate_s_per_element == 0 || l.weight_elements() == 0) return 0;
  return local_weight_elements(l, g) * r.grad_accumulate_s_per_element;
}

double gradient_accumulation_s(const topo::Topology& t, const model::Layer& l, const topo::Grid& g) {
  return gradient_accumulation_s(elementwise_rates(t, l), l, g);
}

ElementwiseBytes elementwise_bytes(const std::string& op) {
  // Forward: read the input(s), write the output. Backward: read what the gradient
  // needs (the output gradient, and the input or output it depends on), write the
  // input gradient. 2 bytes per half-precision element.
  static const std::map<std::string, ElementwiseBytes> bytes = {
      {"bias", {4, 2}},           // y = x + b: read x, write y; db: read dy (dx is dy)
      {"layer_norm", {4, 6}},     // read x, write y; read x and dy, write dx
      {"layer_norm_split", {24, 42}},  // its separate passes (runtime/src/split_layer_norm.cpp):
                                       // forward 7 reads and 5 writes of an element, backward 14 and 7
      {"gelu", {4, 6}},           // read x, write y; read x and dy, write dx
      {"residual", {6, 6}},       // read h and y, write h + y; dh += dy: read two, write one
      {"softmax", {4, 6}},        // read S, write P; read P and dP, write dS
      {"attention_layout", {16, 34}},  // per element of one of q, k, v: four copies (q, k, v, the
                                       // context) read and written; backward their gradients'
                                       // four, the qkv gradient zeroed (3 elements) and its
                                       // slices written and summed (3 read, 3 written)
      {"cross_entropy", {4, 4}},  // read the logits, write log-probabilities; read those, write dlogits
      {"adam", {30, 0}},          // fp32 w, g, m, v read (16), w, m, v written (12), half w written (2),
                                  // whatever the plan's precision (the topology does not know it)
      {"grad_accumulate", {10, 0}},  // fp32 gradient read and written (8), half dW read (2),
                                     // whatever the plan's gradient precision (as adam)
  };
  auto it = bytes.find(op);
  return it == bytes.end() ? ElementwiseBytes{} : it->second;
}

double matmul_bytes(const MatmulShape& s) {
  const double m = static_cast<double>(s.m), k = static_cast<double>(s.k), n = static_cast<double>(s.n);
  return 2.0 * static_cast<double>(s.batch) * (m * k + k * n + m * n);
}

std::shared_ptr<const topo::Topology> topology_for_precision(const topo::Topology& t, int64_t compute_bytes) {
  const topo::ComputeThroughput& c = t.compute_for(compute_bytes);
  if (&c == &t.compute) return nullptr;
  auto copy = std::make_shared<topo::Topology>(t);
  copy->compute = c;
  return copy;
}

double matmul_s(const topo::Topology& t, const MatmulShape& s) { return MatmulTimes(t)(s); }

MatmulTimes::MatmulTimes(const topo::Topology& t)
    : t_(t),
      rate_flops_per_s_(t.compute.matmul_flops_per_s > 0 ? t.compute.matmul_flops_per_s : t.peak_flops_per_s),
      memory_bytes_per_s_(t.compute.memory_bytes_per_s) {
  // The first entry of a shape wins, as a linear search would find it.
  for (const auto& e : t.compute.matmul_table) table_.emplace(MatmulShape{e.m, e.k, e.n, e.batch}, e.seconds);
}

size_t MatmulTimes::Hash::operator()(const MatmulShape& s) const {
  size_t h = std::hash<int64_t>()(s.m);
  for (int64_t v : {s.k, s.n, s.batch}) h = h * 1000003u ^ std::hash<int64_t>()(v);
  return h;
}

double MatmulTimes::operator()(const MatmulShape& s) const {
  if (!table_.empty()) {
    auto it = table_.find(s);
    if (it != table_.end()) return it->second;
  }
  const double compute_s = s.flops() / rate_flops_per_s_;
  if (memory_bytes_per_s_ <= 0) return t_.compute.matmul_overhead_s + compute_s;
  return t_.compute.matmul_overhead_s + std::max(compute_s, matmul_bytes(s) / memory_bytes_per_s_);
}

double MatmulTimes::sum(const MatmulList& shapes) const {
  double total = 0;
  for (const auto& s : shapes) total += (*this)(s);
  return total;
}

}  // namespace axonn::planner
