// The optimizers of a stage; see axonn/runtime/optimizer.hpp.
#include "axonn/runtime/optimizer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/runtime/host_memory.hpp"
#include "axonn/runtime/worker_thread.hpp"

namespace axonn::runtime {

double clip_gradients(ProcessGrid& grid, std::vector<Parameter>& params, double max_norm) {
  at::Tensor sq = at::zeros({1}, at::kDouble);
  for (auto& p : params) {
    at::Tensor grad = p.tensor.grad();
    if (!grad.defined()) continue;
    sq += grad.to(at::kDouble).pow(2).sum() / static_cast<double>(p.spec.replication(grid.grid()));
  }
  all_reduce_now(grid.model(), sq);
  const double norm = std::sqrt(sq.item<double>());
  const double coef = max_norm / (norm + 1e-6);  // as torch::nn::utils::clip_grad_norm_
  if (max_norm > 0 && coef < 1.0)
    for (auto& p : params)
      if (p.tensor.grad().defined()) p.tensor.mutable_grad().mul_(coef);
  return norm;
}

namespace {

class DeviceAdam final : public Optimizer {
 public:
  DeviceAdam(ProcessGrid& grid, std::vector<Parameter>& params, const AdamSettings& s) : grid_(grid), params_(params) {
    std::vector<at::Tensor> tensors;
    for (auto& p : params) tensors.push_back(p.tensor);
    adam_ = std::make_unique<torch::optim::Adam>(
        tensors, torch::optim::AdamOptions(s.learning_rate).betas({s.beta1, s.beta2}).eps(s.eps));
  }
  void zero_grad() override { adam_->zero_grad(); }
  OptimizerPhase step(double max_grad_norm) override {
    OptimizerPhase ph;
    ph.grad_norm = clip_gradients(grid_, params_, max_grad_norm);
    adam_->step();
    return ph;
  }
  bool reduces_data_parallel() const override { return false; }

 private:
  ProcessGrid& grid_;
  std::vector<Parameter>& params_;
  std::unique_ptr<torch::optim::Adam> adam_;
};

class OffloadedAdam final : public Optimizer {
 public:
  OffloadedAdam(ProcessGrid& grid, std::vector<Parameter>& params, const plan::OptimizerSettings& o,
                const AdamSettings& s, Tracer* tracer)
      : grid_(grid), params_(params), settings_(o), adam_(s), tracer_(tracer) {
    AXONN_ASSERT(o.offload && o.bucket_elements > 0 && o.allreduce_coarsening >= 0);
    segments_[0].group = &grid.data();
    segments_[0].kind = "ar_data";
    segments_[1].group = &grid.z_data();
    segments_[1].kind = "ar_z_data";
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      Segment& seg = segments_[params[i].spec.replicated_over_z() ? 1 : 0];
      seg.pieces.push_back({i, seg.elements, params[i].tensor.numel()});
      seg.elements += params[i].tensor.numel();
    }
    const auto options = params.front().tensor.options();
    for (Segment& seg : segments_) {
      if (seg.elements == 0) continue;
      // The device tier: the gradients, flat; each parameter's gradient is a view, which
      // autograd and the reducer accumulate into in place.
      seg.grad = at::zeros({seg.elements}, options.requires_grad(false));
      // The host tier: fp32 master weights and Adam's moments.
      seg.master = HostMemory::empty(seg.elements, at::kFloat);
      seg.exp_avg = HostMemory::zeros(seg.elements, at::kFloat);
      seg.exp_avg_sq = HostMemory::zeros(seg.elements, at::kFloat);
      for (const Piece& pc : seg.pieces) {
        at::Tensor& w = params[pc.param].tensor;
        seg.master.narrow(0, pc.offset, pc.elements).copy_(w.detach().reshape({-1}));
        w.mutable_grad() = seg.grad.narrow(0, pc.offset, pc.elements).view(w.sizes());
      }
    }
    // The working set on the device, reused by every bucket.
    const int64_t b = std::min(o.bucket_elements, std::max(segments_[0].elements, segments_[1].elements));
    const auto fp32 = at::TensorOptions().dtype(at::kFloat);
    master_ = at::empty({b}, fp32);
    exp_avg_ = at::empty({b}, fp32);
    exp_avg_sq_ = at::empty({b}, fp32);
    grad_ = at::empty({b}, fp32);
  }

  void zero_grad() override {
    for (Segment& seg : segments_)
      if (seg.elements > 0) seg.grad.zero_();
  }

  bool reduces_data_parallel() const override { return true; }

  OptimizerPhase step(double max_grad_norm) override {
    OptimizerPhase ph;
    ++step_;
    // As LibTorch's Adam (torch/csrc/api/src/optim/adam.cpp, 1.13).
    const double bias_correction1 = 1 - std::pow(adam_.beta1, static_cast<double>(step_));
    const double bias_correction2 = 1 - std::pow(adam_.beta2, static_cast<double>(step_));
    const Coefficients c{adam_.beta1, adam_.beta2, adam_.eps, std::sqrt(bias_correction2),
                         adam_.learning_rate / bias_correction1};

    std::vector<Chunk> chunks;
    for (size_t s = 0; s < segments_.size(); ++s) {
      const int64_t n = segments_[s].elements;
      const int64_t width = settings_.allreduce_coarsening > 0 ? settings_.allreduce_coarsening * settings_.bucket_elements : n;
      for (int64_t at = 0; at < n; at += width) chunks.push_back({s, at, std::min(width, n - at)});
    }
    const bool overlap = settings_.allreduce_coarsening > 0 && max_grad_norm <= 0;
    if (!overlap) {
      for (const Chunk& ch : chunks) wait(issue(ch), ph);
      ph.grad_norm = clip_gradients(grid_, params_, max_grad_norm);
      for (const Chunk& ch : chunks) update(ch, c);
      return ph;
    }
    // Chunk c's buckets on the worker while chunk c+1 is reduced (seed-spec A6).
    Pending next = chunks.empty() ? Pending{} : issue(chunks.front());
    for (size_t i = 0; i < chunks.size(); ++i) {
      wait(std::move(next), ph);
      if (i + 1 < chunks.size()) next = issue(chunks[i + 1]);
      worker_.submit([this, ch = chunks[i], c] { update(ch, c); });
    }
    worker_.drain();
    return ph;
  }

 private:
  struct Piece {
    size_t param;
    int64_t offset, elements;  // in the segment
  };
  struct Segment {
    Communicator* group = nullptr;
    const char* kind = "";
    std::vector<Piece> pieces;
    int64_t elements = 0;
    at::Tensor grad;                         // device
    at::Tensor master, exp_avg, exp_avg_sq;  // host
  };
  struct Chunk {
    size_t segment;
    int64_t offset, elements;
  };
  struct Pending {
    WorkHandle work;
    const char* kind = "";
    double issued_at = 0;
  };
  struct Coefficients {
    double beta1, beta2, eps, sqrt_bias_correction2, step_size;
  };

  Pending issue(const Chunk& ch) {
    Segment& seg = segments_[ch.segment];
    Pending p;
    if (seg.group->size() == 1) return p;
    p.kind = seg.kind;
    p.issued_at = tracer_ ? tracer_->now() : 0;
    p.work = seg.group->all_reduce(seg.grad.narrow(0, ch.offset, ch.elements), ReduceOp::Sum);
    return p;
  }

  void wait(Pending p, OptimizerPhase& ph) {
    if (!p.work) return;
    const double t0 = now_s();
    p.work->wait();
    const double waited = now_s() - t0;
    ph.reduce_wait_s += waited;
    if (tracer_) tracer_->comm(p.kind, p.issued_at, tracer_->now(), waited);
  }

  // Adam on the buckets of one chunk: fetch, update, write back, refresh the weights.
  void update(const Chunk& ch, const Coefficients& c) {
    at::NoGradGuard no_grad;  // thread-local: the worker needs its own
    Segment& seg = segments_[ch.segment];
    const int64_t end = ch.offset + ch.elements;
    for (int64_t a = ch.offset; a < end; a += settings_.bucket_elements) {
      const int64_t n = std::min(settings_.bucket_elements, end - a);
      at::Tensor w = master_.narrow(0, 0, n), m = exp_avg_.narrow(0, 0, n), v = exp_avg_sq_.narrow(0, 0, n),
                 g = grad_.narrow(0, 0, n);
      w.copy_(seg.master.narrow(0, a, n));
      m.copy_(seg.exp_avg.narrow(0, a, n));
      v.copy_(seg.exp_avg_sq.narrow(0, a, n));
      g.copy_(seg.grad.narrow(0, a, n));  // to fp32: the loss was pre-divided, nothing to de-scale
      m.mul_(c.beta1).add_(g, 1 - c.beta1);
      v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
      at::sqrt_out(g, v);  // the denominator, in the gradient's buffer (no longer needed)
      g.div_(c.sqrt_bias_correction2).add_(c.eps);
      w.addcdiv_(m, g, -c.step_size);
      seg.master.narrow(0, a, n).copy_(w);
      seg.exp_avg.narrow(0, a, n).copy_(m);
      seg.exp_avg_sq.narrow(0, a, n).copy_(v);
      refresh(seg, a, w);
    }
  }

  // The device weights of segment elements [a, a + w.numel()) from the updated master.
  void refresh(Segment& seg, int64_t a, const at::Tensor& w) {
    const int64_t b = a + w.numel();
    auto it = std::upper_bound(seg.pieces.begin(), seg.pieces.end(), a,
                               [](int64_t x, const Piece& p) { return x < p.offset; });
    for (--it; it != seg.pieces.end() && it->offset < b; ++it) {
      const int64_t from = std::max(a, it->offset), to = std::min(b, it->offset + it->elements);
      params_[it->param].tensor.view({-1}).narrow(0, from - it->offset, to - from).copy_(w.narrow(0, from - a, to - from));
    }
  }

  ProcessGrid& grid_;
  std::vector<Parameter>& params_;
  plan::OptimizerSettings settings_;
  AdamSettings adam_;
  Tracer* tracer_;
  std::array<Segment, 2> segments_;
  at::Tensor master_, exp_avg_, exp_avg_sq_, grad_;  // the device working set, bsize elements each
  int64_t step_ = 0;
  WorkerThread worker_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(ProcessGrid& grid, std::vector<Parameter>& params,
                                          const plan::OptimizerSettings& settings, const AdamSettings& adam,
                                          Tracer* tracer) {
  if (settings.offload) return std::make_unique<OffloadedAdam>(grid, params, settings, adam, tracer);
  return std::make_unique<DeviceAdam>(grid, params, adam);
}

}  // namespace axonn::runtime
