// The runnable GPT; see axonn/gpt/gpt.hpp.
#include "axonn/gpt/gpt.hpp"

#include <torch/torch.h>

#include <cmath>

#include "axonn/common/checksum.hpp"
#include "axonn/common/error.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/runtime/attention.hpp"
#include "axonn/runtime/tensor_parallel.hpp"

namespace axonn::gpt {

using runtime::ShardSpec;
using topo::Axis;

GptConfig GptConfig::from(const model::ModelDescription& m) {
  if (m.family != "gpt")
    throw InputError("gpt", "model '" + m.name + "' is of family \"" + m.family + "\"", "model description /family",
                "\"gpt\" (the runtime runs GPT models)");
  GptConfig c;
  c.layers = m.num_layers;
  c.hidden = m.hidden;
  c.heads = m.heads;
  c.vocab = m.vocab;
  c.seq_len = m.seq_len;
  c.ffn = m.ffn_hidden;
  return c;
}

at::Tensor loss_precision(const at::Tensor& logits) {
  return c10::elementSize(logits.scalar_type()) < 4 ? logits.to(at::kFloat) : logits;
}

at::Tensor position_encoding(int64_t seq_len, int64_t hidden, at::ScalarType dtype) {
  at::Tensor pos = at::arange(seq_len, at::kDouble).unsqueeze(1);
  at::Tensor i = at::arange(hidden, at::kLong);
  at::Tensor freq = at::pow(10000.0, -(i - i.remainder(2)).to(at::kDouble) / static_cast<double>(hidden));
  at::Tensor angle = pos * freq.unsqueeze(0);
  return at::where(i.remainder(2).eq(0).unsqueeze(0), angle.sin(), angle.cos()).to(dtype);
}

std::vector<ParameterLayout> parameter_layout(const GptConfig& c, topo::TensorLayout layout) {
  const runtime::TensorOps& ops = runtime::tensor_ops(layout);
  const int64_t H = c.hidden, F = c.ffn, V = c.vocab;
  // Each layer by its role in a column/row pair (the embedding's table split as a
  // row-parallel weight) and each vector by the axis that splits the activation it
  // meets in AxoNN's layout (over X after a row-parallel layer, over Y after a column-
  // parallel one); the layout's entry decides (the 2d layout: column-parallel blocks
  // only and every vector over Y).
  using model::LinearRole;
  auto matrix = [&](LinearRole role, int64_t heads = 0) { return ops.matrix(role, heads); };
  auto vector = [&](Axis axis, int64_t heads = 0) { return ops.vector(axis, heads); };
  std::vector<ParameterLayout> out;
  out.push_back({"embedding.weight", {V, H}, matrix(LinearRole::Row)});
  auto norm = [&](const std::string& n) {
    out.push_back({n + ".weight", {H}, vector(Axis::X)});
    out.push_back({n + ".bias", {H}, vector(Axis::X)});
  };
  for (int64_t b = 0; b < c.layers; ++b) {
    const std::string p = "block" + std::to_string(b) + ".";
    norm(p + "ln1");
    out.push_back({p + "qkv.weight", {H, 3 * H}, matrix(LinearRole::Column, c.heads)});
    out.push_back({p + "qkv.bias", {3 * H}, vector(Axis::Y, c.heads)});
    out.push_back({p + "attn_out.weight", {H, H}, matrix(LinearRole::Row)});
    out.push_back({p + "attn_out.bias", {H}, vector(Axis::X)});
    norm(p + "ln2");
    out.push_back({p + "fc1.weight", {H, F}, matrix(LinearRole::Column)});
    out.push_back({p + "fc1.bias", {F}, vector(Axis::Y)});
    out.push_back({p + "fc2.weight", {F, H}, matrix(LinearRole::Row)});
    out.push_back({p + "fc2.bias", {H}, vector(Axis::X)});
  }
  norm("ln_f");
  out.push_back({"lm_head.weight", {H, V}, matrix(LinearRole::Head)});
  return out;
}

namespace {

const at::Tensor& find(const NamedTensors& params, const std::string& name) {
  for (const auto& [n, t] : params)
    if (n == name) return t;
  throw InputError("gpt", "no parameter named " + name, "model weights", "a complete GPT state");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

at::Tensor initial_values(const ParameterLayout& l, const at::Tensor& positions, uint64_t seed, at::ScalarType dtype) {
  if (l.shape.size() != 2) {
    const bool scale = ends_with(l.name, "ln1.weight") || ends_with(l.name, "ln2.weight") || l.name == "ln_f.weight";
    return (scale ? at::ones(positions.sizes()) : at::zeros(positions.sizes())).to(dtype);
  }
  constexpr double kStd = 0.02, kTwoPi = 6.283185307179586, kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  const uint64_t key = splitmix64(seed ^ splitmix64(fnv1a64(l.name.data(), l.name.size())));
  const at::Tensor pos = positions.contiguous();
  at::Tensor out = at::empty(pos.sizes(), at::kFloat);
  const int64_t* p = pos.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0, n = pos.numel(); i < n; ++i) {
    const auto at = static_cast<uint64_t>(p[i]);
    const double u1 = static_cast<double>((splitmix64(key + 2 * at) >> 11) + 1) * kUnit;  // (0, 1]
    const double u2 = static_cast<double>(splitmix64(key + 2 * at + 1) >> 11) * kUnit;    // [0, 1)
    o[i] = static_cast<float>(kStd * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
  }
  return out.to(dtype);
}

InitialWeights InitialWeights::seeded(uint64_t seed) {
  InitialWeights w;
  w.seed_ = seed;
  return w;
}

at::Tensor InitialWeights::shard(const ParameterLayout& l, const topo::Grid& g, const topo::Coords& coords,
                                 at::ScalarType dtype) const {
  if (serial_) return runtime::shard_of(find(*serial_, l.name), l.spec, g, coords).to(dtype);
  return initial_values(l, runtime::shard_positions(l.spec, l.shape, g, coords), seed_, dtype);
}

SerialGpt::SerialGpt(const GptConfig& c, uint64_t seed) : c_(c) {
  for (const auto& l : parameter_layout(c)) {
    int64_t numel = 1;
    for (int64_t d : l.shape) numel *= d;
    params_.emplace_back(l.name, initial_values(l, at::arange(numel, at::kLong).view(l.shape), seed, c.dtype)
                                     .set_requires_grad(true));
  }
}

const at::Tensor& SerialGpt::p(const std::string& name) const { return find(params_, name); }

at::Tensor SerialGpt::loss(const at::Tensor& tokens) {
  const int64_t S = tokens.size(1) - 1, B = tokens.size(0), H = c_.hidden;
  at::Tensor input = tokens.narrow(1, 0, S), target = tokens.narrow(1, 1, S);
  at::Tensor h = p("embedding.weight").index_select(0, input.reshape({-1})).view({B, S, H}) +
                 position_encoding(S, H, c_.dtype).unsqueeze(0);
  auto ln = [&](const at::Tensor& x, const std::string& n) {
    return at::layer_norm(x, {H}, p(n + ".weight"), p(n + ".bias"), c_.layer_norm_eps);
  };
  auto linear = [&](const at::Tensor& x, const std::string& n, bool bias = true) {
    at::Tensor y = at::matmul(x, p(n + ".weight"));
    return bias ? y + p(n + ".bias") : y;
  };
  for (int64_t b = 0; b < c_.layers; ++b) {
    const std::string pre = "block" + std::to_string(b) + ".";
    h = h + linear(runtime::causal_attention(linear(ln(h, pre + "ln1"), pre + "qkv"), c_.heads), pre + "attn_out");
    h = h + linear(at::gelu(linear(ln(h, pre + "ln2"), pre + "fc1")), pre + "fc2");
  }
  at::Tensor logits = linear(ln(h, "ln_f"), "lm_head", false);
  return at::cross_entropy_loss(loss_precision(logits).reshape({-1, c_.vocab}), target.reshape({-1}));
}

namespace {

// Activation checkpointing of a segment of blocks: the forward pass keeps only the
// segment's input; the backward pass recomputes the segment with autograd on and
// back-propagates through it (reentrant backward), which also accumulates its
// parameter gradients. The weight source knows it is inside a backward pass, so the
// recompute fetches as the schedule says.
struct SegmentCheckpointFn : public torch::autograd::Function<SegmentCheckpointFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor h, int64_t model, int64_t first,
                            int64_t last, int64_t seqs) {
    auto& m = *reinterpret_cast<ParallelGpt*>(static_cast<intptr_t>(model));
    ctx->saved_data["model"] = model;
    ctx->saved_data["first"] = first;
    ctx->saved_data["last"] = last;
    ctx->saved_data["seqs"] = seqs;
    ctx->save_for_backward({h});
    return m.blocks_forward(first, last, h, seqs);  // autograd is off inside forward()
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto& m = *reinterpret_cast<ParallelGpt*>(static_cast<intptr_t>(ctx->saved_data["model"].toInt()));
    at::Tensor h = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = m.blocks_forward(ctx->saved_data["first"].toInt(), ctx->saved_data["last"].toInt(), h,
                             ctx->saved_data["seqs"].toInt());
    }
    torch::autograd::backward({out}, {grads[0]});
    return {h.grad(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

int64_t block_of(const std::string& name) {
  return name.rfind("block", 0) == 0 ? std::stoll(name.substr(5, name.find('.') - 5)) : -1;
}

}  // namespace

ParallelGpt::ParallelGpt(const GptConfig& c, runtime::ProcessGrid& grid, const InitialWeights& weights,
                         const schedule::StageSchedule& stage, runtime::Engine& engine)
    : c_(c),
      grid_(grid),
      engine_(engine),
      ops_(runtime::tensor_ops(grid.grid())),
      first_stage_(stage.first_stage()),
      last_stage_(stage.last_stage()),
      checkpointing_(stage.settings.checkpointing),
      first_block_(stage.layout.first_unit),
      blocks_(stage.layout.units),
      interval_(std::max<int64_t>(stage.checkpoint_interval, 1)) {
  const auto coords = grid.layout().coords_of(grid.world().rank());
  for (const auto& l : parameter_layout(c, grid.grid().layout)) {
    const int64_t b = block_of(l.name);
    const bool mine = b >= 0 ? (b >= first_block_ && b < first_block_ + blocks_)
                             : (l.name == "embedding.weight" ? first_stage_ : last_stage_);
    if (!mine) continue;
    at::Tensor shard = weights.shard(l, grid.grid(), coords, c.dtype);
    params_.push_back({l.name, shard.set_requires_grad(true), l.spec, l.shape});
    layout_.push_back(l);
  }
  // Weights: the stage's layers of the schedule (a layer is named as its weight).
  for (auto& prm : params_) {
    if (prm.spec.kind != ShardSpec::Kind::Matrix) continue;
    const std::string layer = prm.name.substr(0, prm.name.rfind('.'));
    const int64_t index = stage.layer_index(layer);
    if (index < 0)
      throw InternalError("gpt", "weight " + prm.name + " has no layer in the stage's schedule", "the model description",
                          "a layer named " + layer);
    layer_of_[prm.name] = index;
    engine_.add_layer(index, &prm.tensor);
  }
  if (first_stage_) {  // the embedding's stage only: other stages never read it
    const Axis split = hidden_axis();
    const int64_t width = c.hidden / grid.grid().size(split);
    positions_ = position_encoding(c.seq_len, c.hidden, c.dtype).narrow(1, grid.coord(split) * width, width).contiguous();
  }
}

const at::Tensor& ParallelGpt::p(const std::string& name) const {
  for (const auto& prm : params_)
    if (prm.name == name) return prm.tensor;
  throw InternalError("gpt", "no parameter named " + name, "parallel model", "a complete GPT state");
}

std::vector<int64_t> ParallelGpt::activation_shape(int64_t seqs) const {
  const topo::Grid& g = grid_.grid();
  // 3d: the rows between blocks are split over Y too (a normal layer's input).
  return {seqs * c_.seq_len / g.sequence / rows_split(ops_.input_rows_split), c_.hidden / g.size(hidden_axis())};
}

topo::Axis ParallelGpt::hidden_axis() const { return plan::layout_rules(grid_.grid().layout).hidden_axis; }

int64_t ParallelGpt::rows_split(std::optional<topo::Axis> axis) const { return axis ? grid_.grid().size(*axis) : 1; }

at::Tensor ParallelGpt::rows_of(const at::Tensor& t, topo::Axis axis) const {
  const int64_t parts = grid_.grid().size(axis), rows = t.size(0) / parts;
  return t.narrow(0, grid_.coord(axis) * rows, rows);
}

at::Tensor ParallelGpt::block_forward(int64_t b, const at::Tensor& h_in, int64_t seqs) {
  auto& e = engine_;
  const int64_t H = c_.hidden;
  const int64_t heads_local = c_.heads / grid_.grid().gy;
  auto ln = [&](const at::Tensor& x, const std::string& n) {
    return runtime::tp_layer_norm(e, x, p(n + ".weight"), p(n + ".bias"), H, c_.layer_norm_eps);
  };
  using model::LinearRole;
  auto linear = [&](const at::Tensor& x, const std::string& n, int64_t k, int64_t nn, LinearRole role) {
    return ops_.linear(e, layer_of_.at(n + ".weight"), x, p(n + ".bias"), runtime::LinearShape{k, nn, role});
  };
  const std::string pre = "block" + std::to_string(b) + ".";
  at::Tensor qkv = linear(ln(h_in, pre + "ln1"), pre + "qkv", H, 3 * H, LinearRole::Column);  // [rows, 3H/Gy]
  // 3d: qkv's rows are this X-rank's sequences, a 1/Gx of those of the stage's input.
  const int64_t n = seqs / rows_split(ops_.output_rows_split);
  at::Tensor ctx = ops_.attention(e, qkv.view({n, qkv.size(0) / n, -1}), heads_local).reshape({qkv.size(0), -1});
  at::Tensor h = h_in + linear(ctx, pre + "attn_out", H, H, LinearRole::Row);
  return h + linear(at::gelu(linear(ln(h, pre + "ln2"), pre + "fc1", H, c_.ffn, LinearRole::Column)), pre + "fc2", c_.ffn, H,
                    LinearRole::Row);
}

at::Tensor ParallelGpt::blocks_forward(int64_t first, int64_t last, const at::Tensor& h_in, int64_t seqs) {
  at::Tensor h = h_in;
  for (int64_t b = first; b < last; ++b) h = block_forward(b, h, seqs);
  return h;
}

at::Tensor ParallelGpt::forward(const at::Tensor& activation, const at::Tensor& tokens, double global_tokens) {
  auto& e = engine_;
  const int64_t S = tokens.size(1) - 1, B = tokens.size(0), H = c_.hidden;
  // h: [B*S, H/Gx], replicated over Y
  at::Tensor h = activation;
  if (first_stage_) {
    at::Tensor input = tokens.narrow(1, 0, S).reshape({-1});
    // With sequence parallelism S is this member's chunk, at its global positions.
    const int64_t table = layer_of_.at("embedding.weight");
    at::Tensor positions = positions_.narrow(0, grid_.sequence().rank() * S, S).repeat({B, 1});
    if (ops_.input_rows_split) positions = rows_of(positions, *ops_.input_rows_split);  // 3d: block y
    h = ops_.embedding(e, table, input, c_.vocab, H) + positions;
  }
  for (int64_t b = first_block_; b < first_block_ + blocks_; b += interval_) {
    const int64_t end = std::min(b + interval_, first_block_ + blocks_);
    h = checkpointing_ ? SegmentCheckpointFn::apply(h, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)), b, end, B)
                       : blocks_forward(b, end, h, B);
  }
  if (!last_stage_) return h;
  at::Tensor target = tokens.narrow(1, 1, S).reshape({-1});
  at::Tensor hf = runtime::tp_layer_norm(e, h, p("ln_f.weight"), p("ln_f.bias"), H, c_.layer_norm_eps);
  const int64_t head = layer_of_.at("lm_head.weight");
  const runtime::LinearShape shape{H, c_.vocab, model::LinearRole::Head};
  at::Tensor logits = ops_.linear(e, head, hf, at::Tensor(), shape);  // [rows, V/Gy]
  if (ops_.output_rows_split) target = rows_of(target, *ops_.output_rows_split);  // 3d: the logits' block x
  return runtime::tp_cross_entropy(e, loss_precision(logits), target, c_.vocab).sum() / global_tokens;
}

NamedTensors ParallelGpt::gather(bool gradients) {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& prm = params_[i];
    const auto layer = layer_of_.find(prm.name);
    at::Tensor local = gradients                   ? prm.tensor.grad()
                       : layer != layer_of_.end() ? engine_.weights.shard_elements(layer->second)  // ZeRO-3 gathers
                                                   : prm.tensor.detach();
    if (!local.defined()) local = at::zeros_like(prm.tensor);
    out.emplace_back(prm.name, runtime::unshard(grid_, local.contiguous(), prm.spec, layout_[i].shape));
  }
  return out;
}

}  // namespace axonn::gpt
