// The collective scheduler; see axonn/runtime/comm_engine.hpp and docs/runtime.md.
#include "axonn/runtime/comm_engine.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

struct CommEngine::Pending {
  WorkHandle work;
  const char* kind = "";
  double issued_at = 0;
  std::function<void()> on_done;
};

CommEngine::CommEngine(ProcessGrid& grid, const plan::OverlapSettings& overlap, bool checkpointing, Tracer* tracer)
    : grid_(grid), overlap_(overlap), checkpointing_(checkpointing), tracer_(tracer) {}

CommEngine::~CommEngine() {
  // Outstanding operations must complete before their buffers go away. A failure here
  // cannot be reported from a destructor; axrun ends the job (MPI_Abort) before
  // unwinding reaches this point.
  try {
    for (auto& [id, p] : prefetched_)
      if (p.work) p.work->wait();
    for (auto& p : pending_rs_) p->work->wait();
    for (auto& p : pending_data_) p->work->wait();
  } catch (...) {
  }
}

int64_t CommEngine::add_layer(at::Tensor* shard, int64_t block, const std::string& name, bool weight_in_backward) {
  const bool cacheable = checkpointing_ && block >= 0 && cacheable_count_ < overlap_.cache_all_gather_layers;
  if (cacheable) ++cacheable_count_;
  layers_.push_back({shard, block, name, weight_in_backward, cacheable});
  data_reduced_.push_back(false);
  return static_cast<int64_t>(layers_.size()) - 1;
}

void CommEngine::set_parameters(std::vector<Parameter>* params) { params_ = params; }

// ---- operator collectives -------------------------------------------------------

CommEngine::InFlight CommEngine::issue_all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op) {
  InFlight f;
  f.kind = kind;
  if (c.size() == 1) return f;
  f.issued_at = tracer_ ? tracer_->now() : 0;
  f.work = c.all_reduce(t, op);
  return f;
}

void CommEngine::wait(InFlight& f) {
  if (!f.work) return;
  const double t0 = tracer_ ? tracer_->now() : 0;
  f.work->wait();
  if (tracer_) {
    const double t1 = tracer_->now();
    tracer_->comm(f.kind, f.issued_at, t1, t1 - t0);
  }
  f.work.reset();
}

void CommEngine::all_reduce(Communicator& c, const at::Tensor& t, const char* kind, ReduceOp op) {
  InFlight f = issue_all_reduce(c, t, kind, op);
  wait(f);
}

// ---- weights: all-gather, prefetch (3), cache (4) -------------------------------

int64_t CommEngine::next_to_prefetch(int64_t id) const {
  const int64_t n = static_cast<int64_t>(layers_.size());
  switch (phase_) {
    case Phase::Forward:
      return id + 1 < n ? id + 1 : -1;
    case Phase::Recompute:
      return id + 1 < n && layers_[id].block >= 0 && layers_[id + 1].block == layers_[id].block ? id + 1 : -1;
    case Phase::Backward: {
      // Only layers whose backward re-gathers: without checkpointing, or outside blocks.
      const int64_t prev = id - 1;
      if (prev < 0 || !layers_[prev].weight_in_backward) return -1;
      return (!checkpointing_ || layers_[prev].block < 0) ? prev : -1;
    }
  }
  return -1;
}

at::Tensor CommEngine::weight_block(int64_t id) {
  poll();
  at::Tensor& shard = *layers_[id].shard;
  if (grid_.z().size() == 1) return shard;
  at::Tensor block;
  auto cached = cache_.find(id);
  auto fetched = prefetched_.find(id);
  if (phase_ == Phase::Recompute && cached != cache_.end()) {
    block = cached->second;
    cache_.erase(cached);
  } else if (fetched != prefetched_.end()) {
    Prefetch& p = fetched->second;
    const double t0 = tracer_ ? tracer_->now() : 0;
    if (p.done_at < 0) p.work->wait();
    if (tracer_) {
      const double t1 = tracer_->now();
      tracer_->comm("ag_z", p.issued_at, p.done_at < 0 ? t1 : p.done_at, p.done_at < 0 ? t1 - t0 : 0.0);
    }
    block = p.block;
    prefetched_.erase(fetched);
  } else {
    at::Tensor s = shard.detach().contiguous();
    block = at::empty({s.numel() * grid_.z().size()}, s.options());
    const double t0 = tracer_ ? tracer_->now() : 0;
    grid_.z().all_gather(s, block)->wait();
    if (tracer_) {
      const double t1 = tracer_->now();
      tracer_->comm("ag_z", t0, t1, t1 - t0);
    }
  }
  if (phase_ == Phase::Forward && layers_[id].cacheable) cache_[id] = block;
  if (overlap_.prefetch_all_gather) {
    const int64_t next = next_to_prefetch(id);
    if (next >= 0 && !(phase_ == Phase::Recompute && cache_.count(next))) prefetch(next);
  }
  return block;
}

void CommEngine::prefetch(int64_t id) {
  if (grid_.z().size() == 1 || prefetched_.count(id)) return;
  at::Tensor s = layers_[id].shard->detach().contiguous();
  Prefetch p;
  p.block = at::empty({s.numel() * grid_.z().size()}, s.options());
  p.issued_at = tracer_ ? tracer_->now() : 0;
  p.work = grid_.z().all_gather(s, p.block);
  prefetched_.emplace(id, std::move(p));
}

void CommEngine::set_phase(Phase p) {
  const bool entering_backward = phase_ == Phase::Forward && p == Phase::Backward;
  phase_ = p;
  if (!entering_backward || !overlap_.prefetch_all_gather || layers_.empty()) return;
  const auto& last = layers_.back();
  if (last.weight_in_backward && (!checkpointing_ || last.block < 0)) prefetch(static_cast<int64_t>(layers_.size()) - 1);
}

// ---- weight gradients: reduce-scatter (2), data-parallel buckets -------------------

void CommEngine::accumulate_weight_grad(int64_t id, const at::Tensor& grad_shard) {
  at::Tensor& shard = *layers_[id].shard;
  if (shard.grad().defined()) {
    shard.mutable_grad().view({-1}).add_(grad_shard.view({-1}));
    return;
  }
  // A gradient must not be a view (optimizers detach_() gradients in place).
  at::Tensor g = grad_shard.sizes() == shard.sizes() ? grad_shard : grad_shard.reshape(shard.sizes());
  shard.mutable_grad() = g.is_view() ? g.clone() : g;
}

void CommEngine::reduce_scatter_weight_grad(int64_t id, const at::Tensor& dw_block) {
  const bool last = last_microbatch_;
  at::Tensor flat = dw_block.contiguous().view({-1});
  if (grid_.z().size() == 1) {
    accumulate_weight_grad(id, flat);
    if (last) add_to_bucket(id);
    return;
  }
  auto p = std::make_unique<Pending>();
  at::Tensor out = at::empty({flat.numel() / grid_.z().size()}, flat.options());
  p->kind = "rs_z";
  p->issued_at = tracer_ ? tracer_->now() : 0;
  p->work = grid_.z().reduce_scatter(flat, out);
  p->on_done = [this, id, out, last] {
    accumulate_weight_grad(id, out);
    if (last) add_to_bucket(id);
  };
  if (overlap_.async_weight_grad_reduce_scatter) {
    pending_rs_.push_back(std::move(p));
    poll();
  } else {
    wait_pending(*p);
  }
}

void CommEngine::add_to_bucket(int64_t id) {
  if (!overlap_.bucketed_data_parallel_all_reduce || grid_.data().size() == 1) return;
  bucket_.push_back(id);
  bucket_bytes_ += static_cast<double>(layers_[id].shard->numel() * layers_[id].shard->element_size());
  if (bucket_bytes_ >= static_cast<double>(overlap_.bucket_bytes)) flush_bucket();
}

void CommEngine::flush_bucket() {
  if (bucket_.empty()) return;
  std::vector<at::Tensor> grads;
  for (int64_t id : bucket_) {
    grads.push_back(layers_[id].shard->grad().view({-1}));
    data_reduced_[id] = true;
  }
  auto p = std::make_unique<Pending>();
  at::Tensor flat = at::cat(grads);
  p->kind = "ar_data";
  p->issued_at = tracer_ ? tracer_->now() : 0;
  p->work = grid_.data().all_reduce(flat, ReduceOp::Sum);
  p->on_done = [this, ids = bucket_, flat] {
    int64_t offset = 0;
    for (int64_t id : ids) {
      at::Tensor g = layers_[id].shard->mutable_grad();
      g.view({-1}).copy_(flat.narrow(0, offset, g.numel()));
      offset += g.numel();
    }
  };
  pending_data_.push_back(std::move(p));
  bucket_.clear();
  bucket_bytes_ = 0;
}

// ---- progress --------------------------------------------------------------------

void CommEngine::finish_pending(Pending& p, double exposed_s) {
  if (tracer_) tracer_->comm(p.kind, p.issued_at, tracer_->now(), exposed_s);
  p.on_done();
}

void CommEngine::wait_pending(Pending& p) {
  const double t0 = tracer_ ? tracer_->now() : 0;
  p.work->wait();
  finish_pending(p, tracer_ ? tracer_->now() - t0 : 0);
}

void CommEngine::poll() {
  for (auto& [id, p] : prefetched_)
    if (p.done_at < 0 && p.work->test()) p.done_at = tracer_ ? tracer_->now() : 0;
  // In issue order only: every rank must hand gradients to the data buckets in one order.
  while (!pending_rs_.empty() && pending_rs_.front()->work->test()) {
    finish_pending(*pending_rs_.front(), 0);
    pending_rs_.pop_front();
  }
  while (!pending_data_.empty() && pending_data_.front()->work->test()) {
    finish_pending(*pending_data_.front(), 0);
    pending_data_.pop_front();
  }
}

void CommEngine::begin_microbatch(bool last) {
  last_microbatch_ = last;
  phase_ = Phase::Forward;
  if (overlap_.prefetch_all_gather && !layers_.empty()) prefetch(0);  // the first layer's weight
  if (last)
    for (size_t i = 0; i < data_reduced_.size(); ++i) data_reduced_[i] = false;
}

void CommEngine::finish_backward() {
  while (!pending_rs_.empty()) {
    wait_pending(*pending_rs_.front());
    pending_rs_.pop_front();
  }
  // Nothing prefetched may outlive the pass (a prefetch is always consumed, but be safe).
  for (auto& [id, p] : prefetched_) p.work->wait();
  prefetched_.clear();
  cache_.clear();
  phase_ = Phase::Forward;
  if (!last_microbatch_) return;
  flush_bucket();
  while (!pending_data_.empty()) {
    wait_pending(*pending_data_.front());
    pending_data_.pop_front();
  }
  // Whatever did not go through a bucket: all-reduced now, in parameter order.
  if (!params_) return;
  std::vector<at::Tensor> replicated;
  for (auto& prm : *params_) {
    if (!prm.tensor.grad().defined()) continue;
    if (prm.spec.replicated_over_z()) {
      replicated.push_back(prm.tensor.grad().view({-1}));
      continue;
    }
    bool reduced = false;
    for (size_t id = 0; id < layers_.size(); ++id)
      if (layers_[id].shard->is_same(prm.tensor)) reduced = data_reduced_[id];
    if (!reduced) all_reduce(grid_.data(), prm.tensor.mutable_grad(), "ar_data");
  }
  // Parameters replicated over Z (biases, layer norms): one flat all-reduce over Z x data.
  if (!replicated.empty() && grid_.z_data().size() > 1) {
    at::Tensor flat = at::cat(replicated);
    all_reduce(grid_.z_data(), flat, "ar_z_data");
    int64_t offset = 0;
    for (auto& g : replicated) {
      g.copy_(flat.narrow(0, offset, g.numel()));
      offset += g.numel();
    }
  }
}

}  // namespace axonn::runtime
