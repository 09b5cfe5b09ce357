// Tensor-parallel operators; see axonn/runtime/tensor_parallel.hpp and docs/runtime.md.
#include "axonn/runtime/tensor_parallel.hpp"

#include <torch/torch.h>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using topo::Axis;

namespace {

// Autograd contexts store the engine as an integer; the engine outlives every graph.
int64_t to_handle(CommEngine* e) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(e)); }
CommEngine& engine_of(int64_t handle) { return *reinterpret_cast<CommEngine*>(static_cast<intptr_t>(handle)); }
CommEngine& engine_of(const AutogradContext* ctx) { return engine_of(ctx->saved_data.at("engine").toInt()); }

// Times a compute span when the engine traces.
template <class F>
at::Tensor timed(CommEngine& e, const std::string& name, F&& f) {
  Tracer* t = e.tracer();
  if (!t || !t->keeps_events()) return f();
  const double t0 = t->now();
  at::Tensor out = f();
  t->compute(name, t0, t->now());
  return out;
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t k_local, int64_t n_local, bool transposed) {
    (void)weight_shard;  // an input so that autograd routes its gradient; read through the engine
    CommEngine& e = engine_of(engine);
    ProcessGrid& g = e.grid();
    at::Tensor w = e.weight_block(layer).view({k_local, n_local});
    at::Tensor out = timed(e, e.layer_name(layer) + " forward", [&] { return at::matmul(input, w); });
    e.all_reduce(transposed ? g.y() : g.x(), out, transposed ? "ar_y" : "ar_x");  // partial over W's rows
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["k"] = k_local;
    ctx->saved_data["n"] = n_local;
    ctx->saved_data["transposed"] = transposed;
    // The recompute's gathered weight serves the backward pass that follows it at once.
    if (e.phase() == Phase::Recompute) ctx->saved_data["weight"] = w;
    ctx->save_for_backward({input});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    CommEngine& e = engine_of(ctx);
    ProcessGrid& g = e.grid();
    const int64_t layer = ctx->saved_data["layer"].toInt();
    const auto k = ctx->saved_data["k"].toInt(), n = ctx->saved_data["n"].toInt();
    const bool transposed = ctx->saved_data["transposed"].toBool();
    const at::Tensor input = ctx->get_saved_variables()[0];
    at::Tensor dout = grads[0].contiguous();
    at::Tensor w = ctx->saved_data.count("weight") ? ctx->saved_data["weight"].toTensor()
                                                   : e.weight_block(layer).view({k, n});
    const std::string& name = e.layer_name(layer);
    at::Tensor dinput = timed(e, name + " backward dI", [&] { return at::matmul(dout, w.t()).contiguous(); });
    // Optimization 1: the dI all-reduce (partial over W's columns) runs under the dW matmul.
    Communicator& c = transposed ? g.x() : g.y();
    const char* kind = transposed ? "ar_x" : "ar_y";
    CommEngine::InFlight f = e.issue_all_reduce(c, dinput, kind);
    if (!e.overlap().async_input_grad_all_reduce) e.wait(f);
    at::Tensor dw = timed(e, name + " backward dW",
                          [&] { return at::matmul(input.reshape({-1, k}).t(), dout.reshape({-1, n})); });
    e.reduce_scatter_weight_grad(layer, dw);
    e.wait(f);
    e.poll();
    return {dinput, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct EmbeddingFn : public torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor tokens, at::Tensor weight_shard, int64_t engine,
                            int64_t layer, int64_t vocab_local, int64_t hidden_local) {
    (void)weight_shard;
    CommEngine& e = engine_of(engine);
    const int64_t first = e.grid().coord(Axis::Y) * vocab_local;  // this rank's vocabulary rows
    at::Tensor local = tokens - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local);
    at::Tensor index = local.clamp(0, vocab_local - 1);
    at::Tensor table = e.weight_block(layer).view({vocab_local, hidden_local});
    at::Tensor out = table.index_select(0, index) * mask.unsqueeze(1).to(table.scalar_type());
    e.all_reduce(e.grid().y(), out, "ar_y");
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["vocab"] = vocab_local;
    ctx->saved_data["hidden"] = hidden_local;
    ctx->save_for_backward({index, mask});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    CommEngine& e = engine_of(ctx);
    auto saved = ctx->get_saved_variables();
    const auto vocab = ctx->saved_data["vocab"].toInt(), hidden = ctx->saved_data["hidden"].toInt();
    at::Tensor dout = grads[0] * saved[1].unsqueeze(1).to(grads[0].scalar_type());
    at::Tensor dtable = at::zeros({vocab, hidden}, dout.options()).index_add_(0, saved[0], dout);
    e.reduce_scatter_weight_grad(ctx->saved_data["layer"].toInt(), dtable);
    e.poll();
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LayerNormFn : public torch::autograd::Function<LayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor gamma, at::Tensor beta, int64_t engine,
                            int64_t hidden, double eps) {
    CommEngine& e = engine_of(engine);
    const double H = static_cast<double>(hidden);
    at::Tensor mean = x.sum(-1, true).contiguous();
    e.all_reduce(e.grid().x(), mean, "ar_x_norm");
    mean.div_(H);
    at::Tensor xc = x - mean;
    at::Tensor var = (xc * xc).sum(-1, true).contiguous();
    e.all_reduce(e.grid().x(), var, "ar_x_norm");
    var.div_(H);
    at::Tensor rstd = (var + eps).rsqrt();
    at::Tensor xhat = xc * rstd;
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["hidden"] = hidden;
    ctx->save_for_backward({xhat, rstd, gamma});
    return xhat * gamma + beta;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    CommEngine& e = engine_of(ctx);
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &rstd = saved[1], &gamma = saved[2];
    const double H = static_cast<double>(ctx->saved_data["hidden"].toInt());
    at::Tensor dy = grads[0];
    at::Tensor gy = dy * gamma;
    // dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), means over the full hidden width
    at::Tensor sums = at::cat({gy.sum(-1, true), (gy * xhat).sum(-1, true)}, -1).contiguous();
    e.all_reduce(e.grid().x(), sums, "ar_x_norm");
    sums.div_(H);
    at::Tensor dx = rstd * (gy - sums.narrow(-1, 0, 1) - xhat * sums.narrow(-1, 1, 1));
    const auto rows = dy.numel() / dy.size(-1);
    at::Tensor dgamma = (dy * xhat).reshape({rows, -1}).sum(0);
    at::Tensor dbeta = dy.reshape({rows, -1}).sum(0);
    return {dx, dgamma, dbeta, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, at::Tensor targets, int64_t engine,
                            int64_t vocab_local) {
    CommEngine& e = engine_of(engine);
    Communicator& y = e.grid().y();
    at::Tensor max = std::get<0>(logits.max(-1, true)).contiguous();
    e.all_reduce(y, max, "ar_y_loss", ReduceOp::Max);
    at::Tensor ex = (logits - max).exp();
    at::Tensor sum = ex.sum(-1, true).contiguous();
    e.all_reduce(y, sum, "ar_y_loss");
    const int64_t first = e.grid().coord(Axis::Y) * vocab_local;
    at::Tensor local = targets - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local).to(logits.scalar_type());
    at::Tensor index = local.clamp(0, vocab_local - 1).unsqueeze(-1);
    at::Tensor target_logit = (logits.gather(-1, index).squeeze(-1) * mask).contiguous();
    e.all_reduce(y, target_logit, "ar_y_loss");
    ctx->save_for_backward({ex / sum, index, mask});
    return sum.log().squeeze(-1) + max.squeeze(-1) - target_logit;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    at::Tensor d = saved[0].clone();  // softmax over the local columns
    d.scatter_add_(-1, saved[1], -saved[2].unsqueeze(-1));
    return {d * grads[0].unsqueeze(-1), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor tp_linear(CommEngine& e, int64_t layer, const at::Tensor& input, const at::Tensor& bias,
                     const LinearShape& s) {
  const topo::Grid& g = e.grid().grid();
  const int64_t ga = s.transposed ? g.gy : g.gx, gb = s.transposed ? g.gx : g.gy;
  at::Tensor out = LinearFn::apply(input.contiguous(), *e.weight_shard(layer), to_handle(&e), layer, s.k / ga,
                                   s.n / gb, s.transposed);
  return bias.defined() ? out + bias : out;
}

at::Tensor tp_embedding(CommEngine& e, int64_t layer, const at::Tensor& tokens, int64_t vocab, int64_t hidden) {
  const topo::Grid& g = e.grid().grid();
  if (g.gy == 1 && g.gz == 1) return at::embedding(e.weight_shard(layer)->view({vocab, hidden / g.gx}), tokens);
  return EmbeddingFn::apply(tokens, *e.weight_shard(layer), to_handle(&e), layer, vocab / g.gy, hidden / g.gx);
}

at::Tensor tp_layer_norm(CommEngine& e, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                         int64_t hidden, double eps) {
  if (e.grid().grid().gx == 1) return at::layer_norm(x, {hidden}, gamma, beta, eps);
  return LayerNormFn::apply(x, gamma, beta, to_handle(&e), hidden, eps);
}

at::Tensor tp_cross_entropy(CommEngine& e, const at::Tensor& logits, const at::Tensor& targets, int64_t vocab) {
  if (e.grid().grid().gy == 1) return at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
  return CrossEntropyFn::apply(logits.contiguous(), targets, to_handle(&e), vocab / e.grid().grid().gy);
}

}  // namespace axonn::runtime
