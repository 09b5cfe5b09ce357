// Tensor-parallel operators; see axonn/runtime/tensor_parallel.hpp and docs/runtime.md.
#include "axonn/runtime/tensor_parallel.hpp"

#include <torch/torch.h>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using topo::Axis;

namespace {

// Autograd contexts store the grid as an integer; the grid outlives every graph.
int64_t to_handle(ProcessGrid* g) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(g)); }
ProcessGrid& from_handle(const AutogradContext* ctx) {
  return *reinterpret_cast<ProcessGrid*>(static_cast<intptr_t>(ctx->saved_data.at("grid").toInt()));
}

at::Tensor reduce_scatter_z(ProcessGrid& g, const at::Tensor& block) {
  at::Tensor flat = block.contiguous().view({-1});
  if (g.z().size() == 1) return flat.clone();
  at::Tensor out = at::empty({flat.numel() / g.z().size()}, flat.options());
  g.z().reduce_scatter(flat, out)->wait();
  return out;
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input, at::Tensor weight_shard, int64_t grid,
                            int64_t k_local, int64_t n_local, bool transposed) {
    ctx->saved_data["grid"] = grid;
    ctx->saved_data["k"] = k_local;
    ctx->saved_data["n"] = n_local;
    ctx->saved_data["transposed"] = transposed;
    ctx->save_for_backward({input, weight_shard});
    auto& g = *reinterpret_cast<ProcessGrid*>(static_cast<intptr_t>(grid));
    at::Tensor w = gather_weight_block(g, weight_shard).view({k_local, n_local});
    at::Tensor out = at::matmul(input, w);
    all_reduce_now(transposed ? g.y() : g.x(), out);  // partial sums over the rows of W
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto& g = from_handle(ctx);
    const auto k = ctx->saved_data["k"].toInt(), n = ctx->saved_data["n"].toInt();
    const bool transposed = ctx->saved_data["transposed"].toBool();
    auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    at::Tensor dout = grads[0].contiguous();
    at::Tensor w = gather_weight_block(g, saved[1]).view({k, n});
    at::Tensor dinput = at::matmul(dout, w.t()).contiguous();
    all_reduce_now(transposed ? g.x() : g.y(), dinput);  // partial over the columns of W
    at::Tensor dw = at::matmul(input.reshape({-1, k}).t(), dout.reshape({-1, n}));
    return {dinput, reduce_scatter_z(g, dw), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct EmbeddingFn : public torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor tokens, at::Tensor weight_shard, int64_t grid,
                            int64_t vocab_local, int64_t hidden_local) {
    auto& g = *reinterpret_cast<ProcessGrid*>(static_cast<intptr_t>(grid));
    const int64_t first = g.coord(Axis::Y) * vocab_local;  // this rank's vocabulary rows
    at::Tensor local = tokens - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local);
    at::Tensor index = local.clamp(0, vocab_local - 1);
    at::Tensor table = gather_weight_block(g, weight_shard).view({vocab_local, hidden_local});
    at::Tensor out = table.index_select(0, index) * mask.unsqueeze(1).to(table.scalar_type());
    all_reduce_now(g.y(), out);
    ctx->saved_data["grid"] = grid;
    ctx->saved_data["vocab"] = vocab_local;
    ctx->saved_data["hidden"] = hidden_local;
    ctx->save_for_backward({index, mask});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto& g = from_handle(ctx);
    auto saved = ctx->get_saved_variables();
    const auto vocab = ctx->saved_data["vocab"].toInt(), hidden = ctx->saved_data["hidden"].toInt();
    at::Tensor dout = grads[0] * saved[1].unsqueeze(1).to(grads[0].scalar_type());
    at::Tensor dtable = at::zeros({vocab, hidden}, dout.options()).index_add_(0, saved[0], dout);
    return {at::Tensor(), reduce_scatter_z(g, dtable), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LayerNormFn : public torch::autograd::Function<LayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor gamma, at::Tensor beta, int64_t grid,
                            int64_t hidden, double eps) {
    auto& g = *reinterpret_cast<ProcessGrid*>(static_cast<intptr_t>(grid));
    const double H = static_cast<double>(hidden);
    at::Tensor mean = x.sum(-1, true).contiguous();
    all_reduce_now(g.x(), mean);
    mean.div_(H);
    at::Tensor xc = x - mean;
    at::Tensor var = (xc * xc).sum(-1, true).contiguous();
    all_reduce_now(g.x(), var);
    var.div_(H);
    at::Tensor rstd = (var + eps).rsqrt();
    at::Tensor xhat = xc * rstd;
    ctx->saved_data["grid"] = grid;
    ctx->saved_data["hidden"] = hidden;
    ctx->save_for_backward({xhat, rstd, gamma});
    return xhat * gamma + beta;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto& g = from_handle(ctx);
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &rstd = saved[1], &gamma = saved[2];
    const double H = static_cast<double>(ctx->saved_data["hidden"].toInt());
    at::Tensor dy = grads[0];
    at::Tensor gy = dy * gamma;
    // dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), means over the full hidden width
    at::Tensor sums = at::cat({gy.sum(-1, true), (gy * xhat).sum(-1, true)}, -1).contiguous();
    all_reduce_now(g.x(), sums);
    sums.div_(H);
    at::Tensor dx = rstd * (gy - sums.narrow(-1, 0, 1) - xhat * sums.narrow(-1, 1, 1));
    const auto rows = dy.numel() / dy.size(-1);
    at::Tensor dgamma = (dy * xhat).reshape({rows, -1}).sum(0);
    at::Tensor dbeta = dy.reshape({rows, -1}).sum(0);
    return {dx, dgamma, dbeta, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor logits, at::Tensor targets, int64_t grid,
                            int64_t vocab_local) {
    auto& g = *reinterpret_cast<ProcessGrid*>(static_cast<intptr_t>(grid));
    at::Tensor max = std::get<0>(logits.max(-1, true)).contiguous();
    all_reduce_now(g.y(), max, ReduceOp::Max);
    at::Tensor e = (logits - max).exp();
    at::Tensor sum = e.sum(-1, true).contiguous();
    all_reduce_now(g.y(), sum);
    const int64_t first = g.coord(Axis::Y) * vocab_local;
    at::Tensor local = targets - first;
    at::Tensor mask = (local >= 0).logical_and(local < vocab_local).to(logits.scalar_type());
    at::Tensor index = local.clamp(0, vocab_local - 1).unsqueeze(-1);
    at::Tensor target_logit = (logits.gather(-1, index).squeeze(-1) * mask).contiguous();
    all_reduce_now(g.y(), target_logit);
    ctx->save_for_backward({e / sum, index, mask});
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

at::Tensor gather_weight_block(ProcessGrid& g, const at::Tensor& weight_shard) {
  if (g.z().size() == 1) return weight_shard;
  at::Tensor shard = weight_shard.detach().contiguous();
  at::Tensor block = at::empty({shard.numel() * g.z().size()}, shard.options());
  g.z().all_gather(shard, block)->wait();
  return block;
}

at::Tensor tp_linear(ProcessGrid& g, const at::Tensor& input, const at::Tensor& weight_shard, const at::Tensor& bias,
                     const LinearShape& s) {
  const int64_t ga = s.transposed ? g.grid().gy : g.grid().gx;
  const int64_t gb = s.transposed ? g.grid().gx : g.grid().gy;
  // Fast paths: when a group has one member its collective is a no-op, and LibTorch's
  // own (fused) kernels compute the same function.
  if (ga == 1 && gb == 1 && g.grid().gz == 1) {
    at::Tensor out = at::matmul(input, weight_shard.view({s.k, s.n}));
    return bias.defined() ? out + bias : out;
  }
  at::Tensor out = LinearFn::apply(input.contiguous(), weight_shard, to_handle(&g), s.k / ga, s.n / gb, s.transposed);
  return bias.defined() ? out + bias : out;
}

at::Tensor tp_embedding(ProcessGrid& g, const at::Tensor& tokens, const at::Tensor& weight_shard, int64_t vocab,
                        int64_t hidden) {
  if (g.grid().gy == 1 && g.grid().gz == 1)
    return at::embedding(weight_shard.view({vocab, hidden / g.grid().gx}), tokens);
  return EmbeddingFn::apply(tokens, weight_shard, to_handle(&g), vocab / g.grid().gy, hidden / g.grid().gx);
}

at::Tensor tp_layer_norm(ProcessGrid& g, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                         int64_t hidden, double eps) {
  if (g.grid().gx == 1) return at::layer_norm(x, {hidden}, gamma, beta, eps);
  return LayerNormFn::apply(x, gamma, beta, to_handle(&g), hidden, eps);
}

at::Tensor tp_cross_entropy(ProcessGrid& g, const at::Tensor& logits, const at::Tensor& targets, int64_t vocab) {
  if (g.grid().gy == 1) return at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
  return CrossEntropyFn::apply(logits.contiguous(), targets, to_handle(&g), vocab / g.grid().gy);
}

}  // namespace axonn::runtime
