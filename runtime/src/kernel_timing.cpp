// LibTorch kernel timers; see axonn/runtime/kernel_timing.hpp.
#include "axonn/runtime/kernel_timing.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/split_layer_norm.hpp"

namespace axonn::runtime {
namespace {

// Each timed run lasts at least kMinRun: ranks sharing cores are descheduled in slices
// of milliseconds, and a single short call would measure the scheduler instead of the
// average rate the ranks get.
constexpr double kMinRun = 0.05;  // seconds

double seconds_since(double t0) { return now_s() - t0; }

// Median over `repeats` runs of the per-call time of `f`.
double time_calls(const std::function<void()>& f, int repeats) {
  f();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_s();
    int64_t calls = 0;
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = seconds_since(t0);
    } while (elapsed < kMinRun);
    times.push_back(elapsed / static_cast<double>(calls));
  }
  return median(times);
}

// Median over `repeats` runs of the backward time of `forward`'s outputs alone, given
// `grads` as their gradients (ones where `grads` is empty).
double time_backward(const std::function<std::vector<at::Tensor>()>& forward, const std::vector<at::Tensor>& grads,
                     std::vector<at::Tensor> leaves, int repeats) {
  auto once = [&] {
    const std::vector<at::Tensor> ys = forward();
    std::vector<at::Tensor> gs = grads;
    if (gs.empty())
      for (const at::Tensor& y : ys) gs.push_back(at::ones_like(y));
    const double t0 = now_s();
    torch::autograd::backward(ys, gs);
    const double t = seconds_since(t0);
    for (auto& l : leaves) l.mutable_grad() = at::Tensor();
    return t;
  };
  once();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    double total = 0;
    int64_t calls = 0;
    const double t0 = now_s();
    do {
      total += once();
      ++calls;
    } while (seconds_since(t0) < 2 * kMinRun);
    times.push_back(total / static_cast<double>(calls));
  }
  return median(times);
}

double time_backward(const std::function<at::Tensor()>& forward, std::vector<at::Tensor> leaves, int repeats) {
  return time_backward([&] { return std::vector<at::Tensor>{forward()}; }, {}, std::move(leaves), repeats);
}

at::Tensor leaf(at::IntArrayRef shape, at::ScalarType dtype) {
  return at::randn(shape, at::TensorOptions().dtype(dtype)).requires_grad_(true);
}

}  // namespace

double time_matmul(const topo::MatmulTiming& s, int repeats, at::ScalarType dtype) {
  runtime::set_compute_threads(1);
  const bool batched = s.batch > 1;
  const auto as = at::TensorOptions().dtype(dtype);
  at::Tensor a = batched ? at::randn({s.batch, s.m, s.k}, as) : at::randn({s.m, s.k}, as);
  at::Tensor b = batched ? at::randn({s.batch, s.k, s.n}, as) : at::randn({s.k, s.n}, as);
  at::Tensor c;
  return time_calls([&] { c = at::matmul(a, b); }, repeats);
}

topo::ElementwiseCost time_elementwise(const std::string& op, const topo::ElementwiseShape& shape, int repeats,
                                       at::ScalarType dtype) {
  runtime::set_compute_threads(1);
  const int64_t rows = shape.rows, width = shape.width;
  const auto as = at::TensorOptions().dtype(dtype);
  const double elements = static_cast<double>(rows * width);
  std::function<at::Tensor()> forward;
  std::vector<at::Tensor> leaves;
  if (op == "bias" || op == "residual") {
    at::Tensor x = leaf({rows, width}, dtype), b = op == "bias" ? leaf({width}, dtype) : leaf({rows, width}, dtype);
    leaves = {x, b};
    forward = [x, b] { return x + b; };
  } else if (op == "layer_norm") {
    at::Tensor x = leaf({rows, width}, dtype), gamma = leaf({width}, dtype), beta = leaf({width}, dtype);
    leaves = {x, gamma, beta};
    forward = [x, gamma, beta, width] { return at::layer_norm(x, {width}, gamma, beta, 1e-5); };
  } else if (op == "layer_norm_split") {  // LayerNormFn's arithmetic, its all-reduces left out
    const at::Tensor x = at::randn({rows, width}, as), gamma = at::randn({width}, as), beta = at::randn({width}, as),
                     dy = at::randn({rows, width}, as);
    const SumOverGroup alone = [](at::Tensor&) {};
    SplitNormSaved saved;
    const double f =
        time_calls([&] { split_layer_norm_forward(x, gamma, beta, width, 1e-5, alone, saved); }, repeats);
    const double b = time_calls([&] { split_layer_norm_backward(dy, gamma, saved, width, alone); }, repeats);
    return {f / elements, b / elements};
  } else if (op == "gelu") {
    at::Tensor x = leaf({rows, width}, dtype);
    leaves = {x};
    forward = [x] { return at::gelu(x); };
  } else if (op == "softmax") {  // as causal_attention (runtime/src/attention.cpp) runs it
    const int64_t n = std::max<int64_t>(1, rows / width);
    at::Tensor x = leaf({n, width, width}, dtype);
    leaves = {x};
    forward = [x, width] {
      at::Tensor mask = at::ones({width, width}, at::kBool).triu(1);
      return (x / 8.0).masked_fill(mask, -std::numeric_limits<float>::infinity()).softmax(-1);
    };
    const double per = static_cast<double>(n * width * width);
    return {time_calls([&] { forward(); }, repeats) / per, time_backward(forward, leaves, repeats) / per};
  } else if (op == "attention_layout") {
    // causal_attention's (runtime/src/attention.cpp) copies around its products: q, k^T
    // and v cut from qkv and folded to (sequences x heads, tokens, d) as at::matmul
    // folds them, and the context's folded back to tokens; backward, their gradients
    // along the same path (the slices' zero-filled gradients and their sum). Two
    // sequences, so that the fold is a copy as it is in a step (one would be a view).
    const int64_t heads = std::max<int64_t>(1, shape.heads), d = width / heads;
    const int64_t b = rows % 2 == 0 ? 2 : 1, s = rows / b;
    const at::Tensor qkv = leaf({b, s, 3 * width}, dtype), context = leaf({b * heads, s, d}, dtype);
    const at::Tensor dq = at::randn({b * heads, s, d}, as), dk = at::randn({b * heads, d, s}, as),
                     dv = at::randn({b * heads, s, d}, as), dout = at::randn({b, s, width}, as);
    auto fold = [&] {
      auto split = [&](int64_t part) {
        return qkv.narrow(2, part * width, width).reshape({b, s, heads, d}).transpose(1, 2);
      };
      return std::vector<at::Tensor>{split(0).reshape({b * heads, s, d}),
                                     split(1).transpose(-2, -1).reshape({b * heads, d, s}),
                                     split(2).reshape({b * heads, s, d}),
                                     context.view({b, heads, s, d}).transpose(1, 2).reshape({b, s, width})};
    };
    const double f = time_calls([&] { fold(); }, repeats);
    return {f / elements, time_backward(fold, {dq, dk, dv, dout}, {qkv, context}, repeats) / elements};
  } else if (op == "cross_entropy") {
    at::Tensor logits = leaf({rows, width}, dtype), targets = at::randint(width, {rows}, at::kLong);
    leaves = {logits};
    forward = [logits, targets] { return at::cross_entropy_loss(logits, targets, {}, at::Reduction::None); };
  } else if (op == "adam") {  // torch::optim::Adam's update, in place, on fp32 (the master weights)
    at::Tensor p = at::randn({rows * width}), g = at::randn({rows * width}), m = at::zeros({rows * width}),
               v = at::zeros({rows * width});
    const double t = time_calls(
        [&] {
          m.mul_(0.9).add_(g, 0.1);
          v.mul_(0.999).addcmul_(g, g, 0.001);
          at::Tensor denom = (v.sqrt() / std::sqrt(0.001)).add_(1e-8);
          p.addcdiv_(m, denom, -1e-3 / 0.1);
        },
        repeats);
    return {t / elements, 0.0};
  } else if (op == "grad_accumulate") {  // BucketedReducer::accumulate: the shard's .grad += dW
    at::Tensor acc = at::randn({rows * width}), dw = at::randn({rows * width}, as);  // fp32 += the pass's dW
    return {time_calls([&] { acc.add_(dw); }, repeats) / elements, 0.0};
  } else {
    throw InputError("calibrate", "unknown element-wise operation '" + op + "'", "kernel timer",
                     "one of topo::elementwise_op_names()");
  }
  return {time_calls([&] { forward(); }, repeats) / elements, time_backward(forward, leaves, repeats) / elements};
}

}  // namespace axonn::runtime
