// Tensor-parallel operators; see axonn/runtime/tensor_parallel.hpp and docs/runtime.md.
#include "axonn/runtime/tensor_parallel.hpp"

#include <torch/torch.h>

#include "axonn/common/error.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/runtime/split_layer_norm.hpp"
#include "axonn/runtime/summa.hpp"

namespace axonn::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using topo::Axis;

namespace {

using schedule::LayerOp;

// Autograd contexts store the engine as an integer; the engine outlives every graph.
int64_t to_handle(Engine* e) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(e)); }
Engine& engine_of(int64_t handle) { return *reinterpret_cast<Engine*>(static_cast<intptr_t>(handle)); }
Engine& engine_of(const AutogradContext* ctx) { return engine_of(ctx->saved_data.at("engine").toInt()); }
// Whether the layout splits the rows AxoNN replicates (3d; plan/layout_rules.hpp).
bool splits_rows(const Engine& e) { return plan::layout_rules(e.grid.grid().layout).splits_rows; }

void record(Engine& e, LayerOp op, int64_t layer) { e.recorder.record({op, static_cast<int32_t>(layer)}); }

// Runs a compute of a layer, timed when the engine traces.
template <class F>
at::Tensor timed(Engine& e, LayerOp op, int64_t layer, F&& f) {
  Tracer* t = e.tracer();
  if (!t || !t->keeps_events()) return f();
  const double t0 = t->now();
  at::Tensor out = f();
  t->compute(std::string(schedule::layer_op_name(op)) + " " + std::to_string(layer), t0, t->now());
  return out;
}
// The same, recorded as the pass program's instruction `op`.
template <class F>
at::Tensor compute(Engine& e, LayerOp op, int64_t layer, F&& f) {
  record(e, op, layer);
  return timed(e, op, layer, std::forward<F>(f));
}

// The 3d layout's row collectives over `c` (member i holds row block i): the rows'
// all-gather, and the reduce-scatter of a full-row partial sum to this member's block.
at::Tensor gather_rows(Engine& e, Communicator& c, const at::Tensor& block, plan::CollectiveKind kind) {
  at::Tensor out = at::empty({c.size() * block.size(0), block.size(1)}, block.options());
  OperatorComm::InFlight f = e.ops.issue_all_gather(c, block.contiguous(), out, kind);
  e.ops.wait(f);
  return out;
}
OperatorComm::InFlight issue_scatter_rows(Engine& e, Communicator& c, const at::Tensor& full, at::Tensor& out,
                                          plan::CollectiveKind kind) {
  out = at::empty({full.size(0) / c.size(), full.size(1)}, full.options());
  return e.ops.issue_reduce_scatter(c, full.contiguous(), out, kind);
}
at::Tensor scatter_rows(Engine& e, Communicator& c, const at::Tensor& full, plan::CollectiveKind kind) {
  at::Tensor out;
  OperatorComm::InFlight f = issue_scatter_rows(e, c, full, out, kind);
  e.ops.wait(f);
  return out;
}

// The end of a linear layer's backward once its dI collective `f` is issued: dW =
// input^T dout to the gradient reducer, with the dI collective waited for before it, or
// under it with optimization 1.
void weight_gradient(Engine& e, int64_t layer, OperatorComm::InFlight& f, const at::Tensor& input,
                     const at::Tensor& dout) {
  const bool async = e.overlap.async_input_grad_all_reduce;
  if (!async) record(e, LayerOp::InputGradWait, layer), e.ops.wait(f);
  at::Tensor dw = compute(e, LayerOp::BackwardWeight, layer, [&] { return at::matmul(input.t(), dout); });
  e.grads.reduce_scatter(layer, dw);
  if (async) record(e, LayerOp::InputGradWait, layer), e.ops.wait(f);
  e.poll();
}

// What a linear layer's backward needs, kept by its forward: the layer, its local
// block's shape, the input it multiplied, and the weight when the recompute gathered
// it (it serves the backward pass that follows at once).
struct SavedLinear {
  int64_t layer = 0, k = 0, n = 0;
  bool row = false;
  at::Tensor input, weight;
};
void save_linear(AutogradContext* ctx, Engine& e, int64_t engine, const SavedLinear& s) {
  ctx->saved_data["engine"] = engine;
  ctx->saved_data["layer"] = s.layer;
  ctx->saved_data["k"] = s.k;
  ctx->saved_data["n"] = s.n;
  ctx->saved_data["row"] = s.row;
  if (e.weights.in_backward()) ctx->saved_data["weight"] = s.weight;
  ctx->save_for_backward({s.input});
}
SavedLinear load_linear(AutogradContext* ctx, Engine& e) {
  SavedLinear s;
  s.layer = ctx->saved_data["layer"].toInt();
  s.k = ctx->saved_data["k"].toInt();
  s.n = ctx->saved_data["n"].toInt();
  s.row = ctx->saved_data["row"].toBool();
  s.input = ctx->get_saved_variables()[0];
  s.weight = ctx->saved_data.count("weight") ? ctx->saved_data["weight"].toTensor()
                                             : e.weights.weight(s.layer).view({s.k, s.n});
  return s;
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t k_local, int64_t n_local, bool row) {
    (void)weight_shard;  // an input so that autograd routes its gradient; read through the engine
    Engine& e = engine_of(engine);
    ProcessGrid& g = e.grid;
    at::Tensor w = e.weights.weight(layer).view({k_local, n_local});
    at::Tensor out = compute(e, LayerOp::Forward, layer, [&] { return at::matmul(input, w); });
    record(e, LayerOp::ForwardCollective, layer);
    e.ops.all_reduce(row ? g.y() : g.x(), out, row ? plan::CollectiveKind::ArY : plan::CollectiveKind::ArX);  // partial over W's rows
    save_linear(ctx, e, engine, {layer, k_local, n_local, row, input, w});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    ProcessGrid& g = e.grid;
    const SavedLinear sv = load_linear(ctx, e);
    const int64_t layer = sv.layer, k = sv.k, n = sv.n;
    const bool row = sv.row;
    const at::Tensor& input = sv.input;
    const at::Tensor& w = sv.weight;
    at::Tensor dout = grads[0].contiguous();
    at::Tensor dinput =
        compute(e, LayerOp::BackwardInput, layer, [&] { return at::matmul(dout, w.t()).contiguous(); });
    // Optimization 1: the dI all-reduce (partial over W's columns) runs under the dW matmul.
    Communicator& c = row ? g.x() : g.y();
    plan::CollectiveKind kind = row ? plan::CollectiveKind::ArX : plan::CollectiveKind::ArY;
    record(e, LayerOp::InputGradCollective, layer);
    OperatorComm::InFlight f = e.ops.issue_all_reduce(c, dinput, kind);
    weight_gradient(e, layer, f, input.reshape({-1, k}), dout.reshape({-1, n}));
    return {dinput, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct EmbeddingFn : public torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor tokens, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t vocab_local, int64_t hidden_local) {
    (void)weight_shard;
    Engine& e = engine_of(engine);
    const int64_t first = e.grid.coord(Axis::Y) * vocab_local;  // this rank's vocabulary rows
    at::Tensor local = tokens - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local);
    at::Tensor index = local.clamp(0, vocab_local - 1);
    at::Tensor table = e.weights.weight(layer).view({vocab_local, hidden_local});
    // One vocabulary group (Gy = 1): LibTorch's lookup; else the rows this rank holds.
    at::Tensor out = compute(e, LayerOp::Forward, layer, [&] {
      return e.grid.y().size() == 1 ? at::embedding(table, tokens)
                                    : table.index_select(0, index) * mask.unsqueeze(1).to(table.scalar_type());
    });
    record(e, LayerOp::ForwardCollective, layer);
    if (splits_rows(e)) out = scatter_rows(e, e.grid.y(), out, plan::CollectiveKind::RsY);  // this rank's rows
    else e.ops.all_reduce(e.grid.y(), out, plan::CollectiveKind::ArY);
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["vocab"] = vocab_local;
    ctx->saved_data["hidden"] = hidden_local;
    ctx->save_for_backward({index, mask});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    auto saved = ctx->get_saved_variables();
    const auto vocab = ctx->saved_data["vocab"].toInt(), hidden = ctx->saved_data["hidden"].toInt();
    const int64_t layer = ctx->saved_data["layer"].toInt();
    at::Tensor grad = grads[0];
    if (splits_rows(e)) record(e, LayerOp::OutputGradGather, layer), grad = gather_rows(e, e.grid.y(), grad, plan::CollectiveKind::AgY);
    at::Tensor dtable = compute(e, LayerOp::BackwardWeight, layer, [&] {
      at::Tensor dout = grad * saved[1].unsqueeze(1).to(grad.scalar_type());
      return at::zeros({vocab, hidden}, dout.options()).index_add_(0, saved[0], dout);
    });
    e.grads.reduce_scatter(layer, dtable);
    e.poll();
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The 2d layout's input all-gather over Y: [rows, k/q] -> [rows, k] (member i's block
// the i-th column block), and the dI reduce-scatter back.
at::Tensor gather_columns(Engine& e, const at::Tensor& block) {
  Communicator& y = e.grid.y();
  const int64_t q = y.size(), rows = block.size(0), width = block.size(1);
  at::Tensor out = at::empty({q, rows, width}, block.options());
  OperatorComm::InFlight f = e.ops.issue_all_gather(y, block.contiguous(), out, plan::CollectiveKind::AgY);
  e.ops.wait(f);
  return out.permute({1, 0, 2}).reshape({rows, q * width});
}

struct Linear2dFn : public torch::autograd::Function<Linear2dFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t k, int64_t n_local) {
    (void)weight_shard;  // as LinearFn
    Engine& e = engine_of(engine);
    at::Tensor w = e.weights.weight(layer).view({k, n_local});
    record(e, LayerOp::InputGather, layer);
    at::Tensor full = gather_columns(e, input);
    at::Tensor out = compute(e, LayerOp::Forward, layer, [&] { return at::matmul(full, w); });
    save_linear(ctx, e, engine, {layer, k, n_local, false, full, w});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    Communicator& y = e.grid.y();
    const SavedLinear sv = load_linear(ctx, e);
    const int64_t layer = sv.layer, k = sv.k;
    const at::Tensor& full = sv.input;
    const at::Tensor& w = sv.weight;
    const at::Tensor dout = grads[0].contiguous();
    const int64_t q = y.size(), rows = dout.size(0);
    // dI partial over Y, laid out as q column blocks for the reduce-scatter.
    at::Tensor dfull = compute(e, LayerOp::BackwardInput, layer, [&] {
      return at::matmul(dout, w.t()).view({rows, q, k / q}).transpose(0, 1).contiguous();
    });
    at::Tensor dinput = at::empty({rows, k / q}, dout.options());
    record(e, LayerOp::InputGradCollective, layer);
    OperatorComm::InFlight f = e.ops.issue_reduce_scatter(y, dfull, dinput, plan::CollectiveKind::RsY);
    weight_gradient(e, layer, f, full, dout);
    return {dinput, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// SUMMA's moves through the engine (2d-broadcast): rows are the Y groups (this rank's
// input blocks, dI's reduces), columns the Z groups (the weight's blocks, dW's); each
// move traced by its kind, each product timed as the instruction it belongs to.
class EngineMoves final : public SummaMoves {
 public:
  EngineMoves(Engine& e, int64_t layer) : e_(e), layer_(layer) {}
  int64_t q() const override { return e_.grid.y().size(); }
  int64_t row_rank() const override { return e_.grid.y().rank(); }
  int64_t column_rank() const override { return e_.grid.z().rank(); }
  Pending broadcast_row(const at::Tensor& t, int64_t root) override {
    return pending(e_.ops.issue_broadcast(e_.grid.y(), t, static_cast<int>(root), plan::CollectiveKind::BcY));
  }
  Pending broadcast_column(const at::Tensor& t, int64_t root) override {
    return pending(e_.ops.issue_broadcast(e_.grid.z(), t, static_cast<int>(root), plan::CollectiveKind::BcZ));
  }
  Pending reduce_row(const at::Tensor& t, int64_t root) override {
    return pending(e_.ops.issue_reduce(e_.grid.y(), t, static_cast<int>(root), plan::CollectiveKind::RdY));
  }
  Pending reduce_column(const at::Tensor& t, int64_t root) override {
    return pending(e_.ops.issue_reduce(e_.grid.z(), t, static_cast<int>(root), plan::CollectiveKind::RdZ));
  }
  at::Tensor multiply(bool backward, const std::function<at::Tensor()>& f) override {
    return timed(e_, backward ? LayerOp::BackwardInput : LayerOp::Forward, layer_, f);
  }

 private:
  Pending pending(OperatorComm::InFlight f) {
    auto in_flight = std::make_shared<OperatorComm::InFlight>(std::move(f));
    return [this, in_flight] { e_.ops.wait(*in_flight); };
  }
  Engine& e_;
  int64_t layer_;
};

// The 2d-broadcast layout's linear: SUMMA as the paper runs it, on this rank's own
// weight block (never gathered) and input block [rows, k/q]. The forward is one Forward
// instruction; the backward's dI and dW products interleave (summa_backward), so they
// are recorded as its BackwardInput, followed by an empty BackwardWeight, and dW, summed
// over Z already, goes to the reducer as the program's ReducedGradient.
struct Linear2dBroadcastFn : public torch::autograd::Function<Linear2dBroadcastFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t k_local, int64_t n_local) {
    Engine& e = engine_of(engine);
    at::Tensor w = weight_shard.detach().view({k_local, n_local});
    record(e, LayerOp::Forward, layer);
    EngineMoves moves(e, layer);
    at::Tensor out = summa_forward(moves, input, w);
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["layer"] = layer;
    ctx->save_for_backward({input, w});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    const int64_t layer = ctx->saved_data["layer"].toInt();
    const auto saved = ctx->get_saved_variables();
    record(e, LayerOp::BackwardInput, layer);
    EngineMoves moves(e, layer);
    auto [dinput, dw] = summa_backward(moves, saved[0], saved[1], grads[0]);
    record(e, LayerOp::BackwardWeight, layer);
    e.grads.reduce_scatter(layer, dw);
    e.poll();
    return {dinput, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The 3d layout's linear: AxoNN's blocks and matmuls, with the input's rows split over
// b (gathered first) and the output's over a (reduce-scattered instead of all-reduced).
struct Linear3dFn : public torch::autograd::Function<Linear3dFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t k_local, int64_t n_local, bool row) {
    (void)weight_shard;  // as LinearFn
    Engine& e = engine_of(engine);
    ProcessGrid& g = e.grid;
    at::Tensor w = e.weights.weight(layer).view({k_local, n_local});
    record(e, LayerOp::InputGather, layer);
    at::Tensor full = gather_rows(e, row ? g.x() : g.y(), input, row ? plan::CollectiveKind::AgX : plan::CollectiveKind::AgY);
    at::Tensor partial = compute(e, LayerOp::Forward, layer, [&] { return at::matmul(full, w); });
    record(e, LayerOp::ForwardCollective, layer);
    at::Tensor out = scatter_rows(e, row ? g.y() : g.x(), partial, row ? plan::CollectiveKind::RsY : plan::CollectiveKind::RsX);
    save_linear(ctx, e, engine, {layer, k_local, n_local, row, full, w});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    ProcessGrid& g = e.grid;
    const SavedLinear sv = load_linear(ctx, e);  // fetches the weight first, as the pass program says
    const int64_t layer = sv.layer;
    const bool row = sv.row;
    const at::Tensor& full = sv.input;
    const at::Tensor& w = sv.weight;
    record(e, LayerOp::OutputGradGather, layer);
    const at::Tensor dout = gather_rows(e, row ? g.y() : g.x(), grads[0], row ? plan::CollectiveKind::AgY : plan::CollectiveKind::AgX);
    at::Tensor dfull = compute(e, LayerOp::BackwardInput, layer, [&] { return at::matmul(dout, w.t()); });
    at::Tensor dinput;
    record(e, LayerOp::InputGradCollective, layer);
    OperatorComm::InFlight f =
        issue_scatter_rows(e, row ? g.x() : g.y(), dfull, dinput, row ? plan::CollectiveKind::RsX : plan::CollectiveKind::RsY);
    weight_gradient(e, layer, f, full, dout);
    return {dinput, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// A vector added to (or scaling) rows split over `axis` in the 3d layout: its gradient
// is summed over the local rows, then over the group holding the other rows. The
// gradients `d` of such vectors, summed in place over that group (0 = X, 1 = Y).
void sum_over_rows_group(AutogradContext* ctx, at::Tensor& d) {
  Engine& e = engine_of(ctx);
  const bool x = ctx->saved_data["axis"].toInt() == 0;
  e.ops.all_reduce(x ? e.grid.x() : e.grid.y(), d, x ? plan::CollectiveKind::ArXVector : plan::CollectiveKind::ArYVector);
}

struct RowsSumFn : public torch::autograd::Function<RowsSumFn> {
  // Identity forward on `v`; its gradient all-reduced over `axis` (0 = X, 1 = Y).
  static at::Tensor forward(AutogradContext* ctx, at::Tensor v, int64_t engine, int64_t axis) {
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["axis"] = axis;
    return v.view_as(v);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    at::Tensor d = grads[0].contiguous().clone();
    sum_over_rows_group(ctx, d);
    return {d, at::Tensor(), at::Tensor()};
  }
};

// Two such vectors used together (a norm's gain and shift): their gradients in one
// all-reduce.
struct RowsSumPairFn : public torch::autograd::Function<RowsSumPairFn> {
  static tensor_list forward(AutogradContext* ctx, at::Tensor v, at::Tensor w, int64_t engine, int64_t axis) {
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["axis"] = axis;
    return {v.view_as(v), w.view_as(w)};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {  // undefined ones arrive as zeros
    const int64_t nv = grads[0].numel(), nw = grads[1].numel();
    at::Tensor d = at::cat({grads[0].reshape({-1}), grads[1].reshape({-1})});
    sum_over_rows_group(ctx, d);
    return {d.narrow(0, 0, nv).view_as(grads[0]), d.narrow(0, nv, nw).view_as(grads[1]), at::Tensor(), at::Tensor()};
  }
};

struct Embedding2dFn : public torch::autograd::Function<Embedding2dFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor tokens, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t vocab, int64_t hidden_local) {
    (void)weight_shard;
    Engine& e = engine_of(engine);
    at::Tensor table = e.weights.weight(layer).view({vocab, hidden_local});
    at::Tensor out = compute(e, LayerOp::Forward, layer, [&] { return at::embedding(table, tokens); });
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["vocab"] = vocab;
    ctx->save_for_backward({tokens});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    const int64_t layer = ctx->saved_data["layer"].toInt(), vocab = ctx->saved_data["vocab"].toInt();
    const at::Tensor tokens = ctx->get_saved_variables()[0];
    at::Tensor dtable = compute(e, LayerOp::BackwardWeight, layer, [&] {
      return at::zeros({vocab, grads[0].size(1)}, grads[0].options()).index_add_(0, tokens, grads[0]);
    });
    e.grads.reduce_scatter(layer, dtable);
    e.poll();
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The group over which the hidden columns are split: X (AxoNN 3D), Y (2d).
topo::Axis hidden_axis(Engine& e) { return plan::layout_rules(e.grid.grid().layout).hidden_axis; }
Communicator& hidden_group(Engine& e) { return e.grid.axis(hidden_axis(e)); }
plan::CollectiveKind norm_kind(Engine& e) {
  return hidden_axis(e) == topo::Axis::Y ? plan::CollectiveKind::ArYNorm : plan::CollectiveKind::ArXNorm;
}

// The layer norm's sums over its group: an all-reduce over the hidden axis.
SumOverGroup norm_group_sum(Engine& e) {
  return [&e](at::Tensor& t) { e.ops.all_reduce(hidden_group(e), t, norm_kind(e)); };
}

struct LayerNormFn : public torch::autograd::Function<LayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor gamma, at::Tensor beta, int64_t engine,
                            int64_t hidden, double eps) {
    Engine& e = engine_of(engine);
    SplitNormSaved s;
    at::Tensor y = split_layer_norm_forward(x, gamma, beta, hidden, eps, norm_group_sum(e), s);
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["hidden"] = hidden;
    ctx->save_for_backward({s.xhat, s.rstd, gamma});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Engine& e = engine_of(ctx);
    auto saved = ctx->get_saved_variables();
    SplitNormGrads d = split_layer_norm_backward(grads[0], saved[2], {saved[0], saved[1]},
                                                 ctx->saved_data["hidden"].toInt(), norm_group_sum(e));
    return {d.dx, d.dgamma, d.dbeta, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, at::Tensor targets, int64_t engine,
                            int64_t vocab_local) {
    Engine& e = engine_of(engine);
    Communicator& y = e.grid.y();
    at::Tensor max = std::get<0>(logits.max(-1, true)).contiguous();
    e.ops.all_reduce(y, max, plan::CollectiveKind::ArYLoss, ReduceOp::Max);
    at::Tensor ex = (logits - max).exp();
    const int64_t first = e.grid.coord(Axis::Y) * vocab_local;
    at::Tensor local = targets - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local).to(logits.scalar_type());
    at::Tensor index = local.clamp(0, vocab_local - 1).unsqueeze(-1);
    // The sum of exponentials and the target's logit (held by one member) in one call.
    at::Tensor sums = at::cat({ex.sum(-1, true), logits.gather(-1, index) * mask.unsqueeze(-1)}, -1).contiguous();
    e.ops.all_reduce(y, sums, plan::CollectiveKind::ArYLoss);
    const at::Tensor sum = sums.narrow(-1, 0, 1);
    ctx->save_for_backward({ex / sum, index, mask});
    return sum.log().squeeze(-1) + max.squeeze(-1) - sums.select(-1, 1);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    at::Tensor d = saved[0].clone();  // softmax over the local columns
    d.scatter_add_(-1, saved[1], -saved[2].unsqueeze(-1));
    return {d * grads[0].unsqueeze(-1), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace {
// The local block of a linear's weight in AxoNN's and the 3d layout: k/Ga x n/Gb, with
// (a, b) = (X, Y), or (Y, X) for a row-parallel layer.
std::pair<int64_t, int64_t> local_block(const topo::Grid& g, const LinearShape& s) {
  const int64_t ga = s.row() ? g.gy : g.gx, gb = s.row() ? g.gx : g.gy;
  return {s.k / ga, s.n / gb};
}
}  // namespace

at::Tensor tp_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias,
                     const LinearShape& s) {
  const auto [k, n] = local_block(e.grid.grid(), s);
  at::Tensor out = LinearFn::apply(input.contiguous(), *e.weights.shard(layer), to_handle(&e), layer, k, n, s.row());
  return bias.defined() ? out + bias : out;
}

at::Tensor tp_embedding(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden) {
  const topo::Grid& g = e.grid.grid();
  return EmbeddingFn::apply(tokens, *e.weights.shard(layer), to_handle(&e), layer, vocab / g.gy, hidden / g.gx);
}

at::Tensor tp3d_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias,
                       const LinearShape& s) {
  const auto [k, n] = local_block(e.grid.grid(), s);
  at::Tensor out =
      Linear3dFn::apply(input.contiguous(), *e.weights.shard(layer), to_handle(&e), layer, k, n, s.row());
  return bias.defined() ? out + rows_split_vector(e, bias, s.row() ? topo::Axis::Y : topo::Axis::X) : out;
}

at::Tensor rows_split_vector(Engine& e, const at::Tensor& v, topo::Axis rows) {
  if (!splits_rows(e) || e.grid.grid().size(rows) == 1) return v;
  return RowsSumFn::apply(v, to_handle(&e), rows == topo::Axis::X ? 0 : 1);
}

std::pair<at::Tensor, at::Tensor> rows_split_vectors(Engine& e, const at::Tensor& v, const at::Tensor& w,
                                                     topo::Axis rows) {
  if (!splits_rows(e) || e.grid.grid().size(rows) == 1) return {v, w};
  const tensor_list both = RowsSumPairFn::apply(v, w, to_handle(&e), rows == topo::Axis::X ? 0 : 1);
  return {both[0], both[1]};
}

at::Tensor tp2d_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias, int64_t k, int64_t n) {
  at::Tensor out = Linear2dFn::apply(input, *e.weights.shard(layer), to_handle(&e), layer, k, n / e.grid.grid().gy);
  return bias.defined() ? out + bias : out;
}

at::Tensor tp2d_broadcast_linear(Engine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias, int64_t k,
                                 int64_t n) {
  const int64_t q = e.grid.grid().gy;
  at::Tensor out = Linear2dBroadcastFn::apply(input.contiguous(), *e.weights.shard(layer), to_handle(&e), layer, k / q, n / q);
  return bias.defined() ? out + bias : out;
}

at::Tensor tp2d_embedding(Engine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden) {
  return Embedding2dFn::apply(tokens, *e.weights.shard(layer), to_handle(&e), layer, vocab, hidden / e.grid.grid().gy);
}

at::Tensor tp_layer_norm(Engine& e, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                         int64_t hidden, double eps) {
  // 3d: the rows are split over Y, so are the contributions to gamma's and beta's gradients.
  const auto [g, b] = rows_split_vectors(e, gamma, beta, topo::Axis::Y);
  if (hidden_group(e).size() == 1) return at::layer_norm(x, {hidden}, g, b, eps);
  return LayerNormFn::apply(x, g, b, to_handle(&e), hidden, eps);
}

at::Tensor tp_cross_entropy(Engine& e, const at::Tensor& logits, const at::Tensor& targets, int64_t vocab) {
  if (e.grid.grid().gy == 1) return at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
  return CrossEntropyFn::apply(logits.contiguous(), targets, to_handle(&e), vocab / e.grid.grid().gy);
}

}  // namespace axonn::runtime
