// Reduce-scatters and data-parallel buckets; see axonn/runtime/gradient_reducer.hpp.
#include "axonn/runtime/gradient_reducer.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using schedule::LayerInstruction;
using schedule::LayerOp;

BucketedReducer::BucketedReducer(ProcessGrid& grid, const plan::OverlapSettings& overlap, bool optimizer_reduces,
                                 Tracer* tracer, PassRecorder& recorder)
    : grid_(grid), overlap_(overlap), optimizer_reduces_(optimizer_reduces), tracer_(tracer), recorder_(recorder) {}

BucketedReducer::~BucketedReducer() {
  // Outstanding operations must complete before their buffers go away (see GatheredWeights).
  try {
    for (auto& p : pending_rs_) p->work->wait();
    for (auto& p : pending_data_) p->work->wait();
  } catch (...) {
  }
}

void BucketedReducer::add_layer(int64_t layer, at::Tensor* shard) {
  if (static_cast<int64_t>(shards_.size()) <= layer) {
    shards_.resize(static_cast<size_t>(layer) + 1, nullptr);
    rs_done_.resize(shards_.size(), false);
    data_reduced_.resize(shards_.size(), false);
  }
  shards_[static_cast<size_t>(layer)] = shard;
}

at::Tensor* BucketedReducer::shard(int64_t layer) {
  AXONN_ASSERT(layer >= 0 && layer < static_cast<int64_t>(shards_.size()) && shards_[static_cast<size_t>(layer)]);
  return shards_[static_cast<size_t>(layer)];
}

void BucketedReducer::accumulate(int64_t layer, const at::Tensor& grad_shard) {
  at::Tensor& s = *shard(layer);
  if (sink_) {
    sink_->accumulate(s, grad_shard);
    return;
  }
  if (s.grad().defined()) {
    s.mutable_grad().view({-1}).add_(grad_shard.view({-1}));
    return;
  }
  // A gradient must not be a view (optimizers detach_() gradients in place).
  at::Tensor g = grad_shard.sizes() == s.sizes() ? grad_shard : grad_shard.reshape(s.sizes());
  s.mutable_grad() = g.is_view() ? g.clone() : g;
}

void BucketedReducer::begin_backward(const std::vector<LayerInstruction>& program, bool last) {
  ops_.clear();
  for (const auto& i : program)
    if (i.op == LayerOp::ReduceScatter || i.op == LayerOp::ReducedGradient || i.op == LayerOp::BucketAllReduce)
      ops_.push_back(i);
  next_ = 0;
  last_ = last;
  scattered_.clear();
  std::fill(rs_done_.begin(), rs_done_.end(), false);
}

void BucketedReducer::take_buckets() {
  for (; next_ < ops_.size() && ops_[next_].op == LayerOp::BucketAllReduce; ++next_) {
    const auto count = static_cast<size_t>(ops_[next_].count);
    AXONN_ASSERT(count >= 1 && count <= scattered_.size());
    buckets_.push_back({std::vector<int64_t>(scattered_.end() - static_cast<long>(count), scattered_.end()), false});
  }
}

void BucketedReducer::reduce_scatter(int64_t layer, const at::Tensor& dw_block) {
  const bool reduced = next_ < ops_.size() && ops_[next_].op == LayerOp::ReducedGradient;
  if (next_ >= ops_.size() || (ops_[next_].op != LayerOp::ReduceScatter && !reduced) || ops_[next_].layer != layer)
    throw InternalError("runtime", "the model handed over the gradient of layer " + std::to_string(layer),
                        "the schedule's pass program",
                        next_ < ops_.size() ? ops_[next_].to_string()
                                            : "no more ReduceScatter or ReducedGradient in this pass");
  recorder_.record(ops_[next_++]);
  scattered_.push_back(layer);
  at::Tensor flat = dw_block.contiguous().view({-1});
  if (grid_.z().size() == 1 || reduced) {  // a ReducedGradient: summed over Z by the operator
    accumulate(layer, flat);
    rs_done_[static_cast<size_t>(layer)] = true;
  } else {
    auto p = std::make_unique<Pending>();
    at::Tensor out = at::empty({flat.numel() / grid_.z().size()}, flat.options());
    p->kind = plan::CollectiveKind::RsZ;
    p->issued_at = tracer_ ? tracer_->now() : 0;
    p->work = grid_.z().reduce_scatter(flat, out);
    p->on_done = [this, layer, out] {
      accumulate(layer, out);
      rs_done_[static_cast<size_t>(layer)] = true;
    };
    if (overlap_.async_weight_grad_reduce_scatter) pending_rs_.push_back(std::move(p));
    else wait_pending(*p);
  }
  take_buckets();
  poll();
  if (sink_) {  // a point of the pass program: waits here are the same on every rank
    while (pending_rs_.size() > kSinkDepth) {
      wait_pending(*pending_rs_.front());
      pending_rs_.pop_front();
    }
    sink_->settle(kSinkDepth);
  }
}

void BucketedReducer::issue_ready_buckets() {
  while (!buckets_.empty()) {
    Bucket& b = buckets_.front();
    for (int64_t l : b.layers)
      if (!rs_done_[static_cast<size_t>(l)]) return;  // in order: a later bucket waits for this one
    recorder_.record({LayerOp::BucketAllReduce, static_cast<int32_t>(b.layers.back()), schedule::Source::None, false,
                      static_cast<int32_t>(b.layers.size())});
    if (grid_.data().size() > 1) {
      std::vector<at::Tensor> grads;
      for (int64_t l : b.layers) {
        grads.push_back(shard(l)->grad().view({-1}));
        data_reduced_[static_cast<size_t>(l)] = true;
      }
      auto p = std::make_unique<Pending>();
      at::Tensor flat = at::cat(grads);
      p->kind = plan::CollectiveKind::ArData;
      p->issued_at = tracer_ ? tracer_->now() : 0;
      p->work = grid_.data().all_reduce(flat, ReduceOp::Sum);
      p->on_done = [this, ids = b.layers, flat] {
        int64_t offset = 0;
        for (int64_t id : ids) {
          at::Tensor g = shard(id)->mutable_grad();
          g.view({-1}).copy_(flat.narrow(0, offset, g.numel()));
          offset += g.numel();
        }
      };
      pending_data_.push_back(std::move(p));
    }
    buckets_.pop_front();
  }
}

void BucketedReducer::end_backward() {
  while (!pending_rs_.empty()) {
    wait_pending(*pending_rs_.front());
    pending_rs_.pop_front();
  }
  recorder_.record({LayerOp::WaitReduceScatters, -1});
  if (sink_) sink_->settle(0);
  take_buckets();  // the program's last, partial bucket
  issue_ready_buckets();
  if (next_ != ops_.size())
    throw InternalError("runtime", "the backward pass ended before " + ops_[next_].to_string(),
                        "the schedule's pass program", "every reduce-scatter of the pass");
}

void BucketedReducer::finish_step() {
  issue_ready_buckets();
  AXONN_ASSERT(buckets_.empty());
  while (!pending_data_.empty()) {
    wait_pending(*pending_data_.front());
    pending_data_.pop_front();
  }
  // Whatever did not go through a bucket: all-reduced now, in parameter order.
  if (params_ && !optimizer_reduces_) {
    std::vector<at::Tensor> replicated;
    for (auto& prm : *params_) {
      if (!prm.tensor.grad().defined()) continue;
      if (prm.spec.replicated_over_z()) {
        replicated.push_back(prm.tensor.grad().view({-1}));
        continue;
      }
      bool reduced = false;
      for (size_t l = 0; l < shards_.size(); ++l)
        if (shards_[l] && shards_[l]->is_same(prm.tensor)) reduced = data_reduced_[l];
      if (!reduced && grid_.data().size() > 1) {
        auto p = std::make_unique<Pending>();
        p->kind = plan::CollectiveKind::ArData;
        p->issued_at = tracer_ ? tracer_->now() : 0;
        p->work = grid_.data().all_reduce(prm.tensor.mutable_grad(), ReduceOp::Sum);
        p->on_done = [] {};
        wait_pending(*p);
      }
    }
    // Parameters replicated over Z (biases, layer norms): one flat all-reduce over Z x data.
    if (!replicated.empty() && grid_.z_data().size() > 1) {
      at::Tensor flat = at::cat(replicated);
      auto p = std::make_unique<Pending>();
      p->kind = plan::CollectiveKind::ArZData;
      p->issued_at = tracer_ ? tracer_->now() : 0;
      p->work = grid_.z_data().all_reduce(flat, ReduceOp::Sum);
      p->on_done = [] {};
      wait_pending(*p);
      int64_t offset = 0;
      for (auto& g : replicated) {
        g.copy_(flat.narrow(0, offset, g.numel()));
        offset += g.numel();
      }
    }
  }
  std::fill(data_reduced_.begin(), data_reduced_.end(), false);
}

void BucketedReducer::finish_pending(Pending& p, double exposed_s) {
  if (tracer_) tracer_->comm(p.kind, p.issued_at, tracer_->now(), exposed_s);
  p.on_done();
}

void BucketedReducer::wait_pending(Pending& p) {
  const double t0 = tracer_ ? tracer_->now() : 0;
  p.work->wait();
  finish_pending(p, tracer_ ? tracer_->now() - t0 : 0);
}

void BucketedReducer::poll() {
  // In issue order only: every rank must complete reduce-scatters in one order.
  while (!pending_rs_.empty() && pending_rs_.front()->work->test()) {
    finish_pending(*pending_rs_.front(), 0);
    pending_rs_.pop_front();
  }
  if (sink_) sink_->poll();
  issue_ready_buckets();
  while (!pending_data_.empty() && pending_data_.front()->work->test()) {
    finish_pending(*pending_data_.front(), 0);
    pending_data_.pop_front();
  }
}

}  // namespace axonn::runtime
