// Ring self-attention; see axonn/runtime/ring_attention.hpp.
#include "axonn/runtime/ring_attention.hpp"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

// One tag per circulating buffer, so that a late message can never match another's receive.
enum Tag : int { kKeysForward = 7101, kValuesForward = 7102, kKeysValuesBackward = 7103, kGradientsBackward = 7104 };

template <class T>
int64_t to_handle(T* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); }
Communicator& group_of(const AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(static_cast<intptr_t>(ctx->saved_data.at("group").toInt()));
}
Tracer* tracer_of(const AutogradContext* ctx) {
  return reinterpret_cast<Tracer*>(static_cast<intptr_t>(ctx->saved_data.at("tracer").toInt()));
}

// One ring shift in flight: `out` to the next member, the previous member's into `in`.
struct Shift {
  WorkHandle send, recv;
  Tracer* tracer;
  void wait() {
    const double t0 = tracer ? tracer->now() : 0.0;
    send->wait();
    recv->wait();
    if (tracer) {
      const double t1 = tracer->now();
      tracer->comm(plan::CollectiveKind::P2pSeq, t0, t1, t1 - t0);
    }
  }
};

Shift shift(Communicator& g, const at::Tensor& out, const at::Tensor& in, Tag tag, Tracer* tracer) {
  const int n = g.rank(), members = g.size();
  WorkHandle r = g.recv(in, (n + members - 1) % members, tag);
  return {g.send(out, (n + 1) % members, tag), std::move(r), tracer};
}

// Runs body(m, chunk) for each member m's chunk of `mine` as it passes this member, in
// ring order (own first); the next shift is in flight while body runs. `mine` is only
// read (it may be a tensor autograd saved): the chunks received go to two buffers of
// their own.
template <class Body>
void circulate(Communicator& g, Tracer* tracer, const at::Tensor& mine, Tag tag, Body&& body) {
  const int64_t members = g.size(), n = g.rank();
  at::Tensor cur = mine.contiguous(), next = at::empty_like(cur);
  for (int64_t i = 0; i < members; ++i) {
    std::optional<Shift> s;
    if (i + 1 < members) s = shift(g, cur, next, tag, tracer);
    body((n - i + members) % members, cur);
    if (s) {
      s->wait();
      if (i == 0)  // never receive into `mine`
        cur = std::exchange(next, members > 2 ? at::empty_like(next) : at::Tensor());
      else
        std::swap(cur, next);
    }
  }
}

struct RingAttentionFn : public torch::autograd::Function<RingAttentionFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v, int64_t group,
                            int64_t tracer, bool causal) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["tracer"] = tracer;
    Communicator& g = group_of(ctx);
    Tracer* const t = tracer_of(ctx);
    const int64_t n = g.rank(), members = g.size(), chunk = q.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
    // Key block m is wholly masked for this member's queries when it lies after them.
    auto visible = [&](int64_t m) { return !causal || m <= n; };
    at::Tensor scores = at::empty({q.size(0), chunk, members * chunk}, q.options());
    circulate(g, t, k, kKeysForward, [&](int64_t m, const at::Tensor& keys) {
      at::Tensor block = scores.narrow(2, m * chunk, chunk);
      if (visible(m))
        block.copy_(at::matmul(q, keys.transpose(1, 2)).mul_(scale));
      else
        block.fill_(-std::numeric_limits<double>::infinity());
    });
    if (causal) {  // the diagonal block: keys after the query's global position
      at::Tensor upper = at::ones({chunk, chunk}, q.options().dtype(at::kBool)).triu(1);
      scores.narrow(2, n * chunk, chunk).masked_fill_(upper, -std::numeric_limits<double>::infinity());
    }
    at::Tensor probs = at::softmax(scores, -1);
    at::Tensor out = at::zeros_like(q);
    circulate(g, t, v, kValuesForward, [&](int64_t m, const at::Tensor& values) {
      if (visible(m)) out.add_(at::matmul(probs.narrow(2, m * chunk, chunk), values));
    });
    ctx->saved_data["causal"] = causal;
    ctx->save_for_backward({q, k, v, probs, out});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Communicator& g = group_of(ctx);
    Tracer* const t = tracer_of(ctx);
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3], &out = saved[4];
    const bool causal = ctx->saved_data["causal"].toBool();
    const int64_t n = g.rank(), members = g.size(), chunk = q.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
    const at::Tensor dout = grads[0].contiguous();
    // rowsum(dP * P) = rowsum(dO * O): the softmax backward needs no pass over the keys.
    const at::Tensor d = (dout * out).sum(-1, /*keepdim=*/true);
    at::Tensor dq = at::zeros_like(q);
    // (dK_m, dV_m) accumulate as they travel; member n starts with its own, zeros.
    at::Tensor acc = at::zeros({2, q.size(0), chunk, q.size(2)}, q.options()), acc_next = at::empty_like(acc);
    circulate(g, t, at::stack({k, v}), kKeysValuesBackward, [&](int64_t m, const at::Tensor& kv) {
      if (!causal || m <= n) {
        const at::Tensor p = probs.narrow(2, m * chunk, chunk);
        const at::Tensor keys = kv.select(0, 0), values = kv.select(0, 1);
        const at::Tensor ds = p * (at::matmul(dout, values.transpose(1, 2)) - d);
        dq.add_(at::matmul(ds, keys).mul_(scale));
        acc.select(0, 0).add_(at::matmul(ds.transpose(1, 2), q).mul_(scale));
        acc.select(0, 1).add_(at::matmul(p.transpose(1, 2), dout));
      }
      if (members > 1) {  // on to the next member, whose turn with block m comes next
        shift(g, acc, acc_next, kGradientsBackward, t).wait();
        std::swap(acc, acc_next);
      }
    });
    return {dq, acc.select(0, 0).clone(), acc.select(0, 1).clone(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ring_self_attention(Communicator& group, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               bool causal, Tracer* tracer) {
  if (q.dim() != 3 || !q.sizes().equals(k.sizes()) || !q.sizes().equals(v.sizes()) || q.size(1) == 0)
    throw InputError("runtime", "ring self-attention on q, k, v of shapes " + std::string(c10::str(q.sizes())) + ", " +
                                    c10::str(k.sizes()) + ", " + c10::str(v.sizes()),
                     "ring_self_attention", "three [batch*heads, L/N, head_dim] tensors of one shape, L/N > 0");
  return RingAttentionFn::apply(q, k, v, to_handle(&group), to_handle(tracer), causal);
}

}  // namespace axonn::runtime
