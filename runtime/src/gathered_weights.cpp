// Weights gathered over Z; see axonn/runtime/weight_source.hpp.
#include "axonn/runtime/weight_source.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using schedule::LayerInstruction;
using schedule::LayerOp;
using schedule::Source;

GatheredWeights::GatheredWeights(ProcessGrid& grid, Tracer* tracer, PassRecorder& recorder)
    : grid_(grid), tracer_(tracer), recorder_(recorder) {}

GatheredWeights::~GatheredWeights() {
  // Outstanding all-gathers must complete before their buffers go away. A failure here
  // cannot be reported from a destructor; axrun ends the job (MPI_Abort) first.
  try {
    for (auto& [layer, p] : prefetched_)
      if (p.work) p.work->wait();
  } catch (...) {
  }
}

void GatheredWeights::add_layer(int64_t layer, at::Tensor* shard) {
  if (static_cast<int64_t>(shards_.size()) <= layer) shards_.resize(static_cast<size_t>(layer) + 1, nullptr);
  shards_[static_cast<size_t>(layer)] = shard;
}

at::Tensor* GatheredWeights::shard(int64_t layer) {
  AXONN_ASSERT(layer >= 0 && layer < static_cast<int64_t>(shards_.size()) && shards_[static_cast<size_t>(layer)]);
  return shards_[static_cast<size_t>(layer)];
}

void GatheredWeights::begin_pass(const std::vector<LayerInstruction>& program, schedule::PassKind kind,
                                 int64_t microbatch) {
  ops_.clear();
  for (const auto& i : program)
    if (i.op == LayerOp::Fetch || i.op == LayerOp::Prefetch) ops_.push_back(i);
  next_ = 0;
  kind_ = kind;
  microbatch_ = microbatch;
  issue_prefetches();
}

void GatheredWeights::issue_prefetches() {
  for (; next_ < ops_.size() && ops_[next_].op == LayerOp::Prefetch; ++next_) {
    const int64_t layer = ops_[next_].layer;
    recorder_.record(ops_[next_]);
    if (grid_.z().size() == 1 || prefetched_.count(layer)) continue;
    at::Tensor s = shard_elements(layer);
    Prefetch p;
    p.block = at::empty({s.numel() * grid_.z().size()}, s.options());
    p.issued_at = tracer_ ? tracer_->now() : 0;
    p.work = grid_.z().all_gather(s, p.block);
    prefetched_.emplace(layer, std::move(p));
  }
}

at::Tensor GatheredWeights::shard_elements(int64_t layer) {
  return store_ ? store_->gather(*shard(layer)) : shard(layer)->detach().contiguous();
}

at::Tensor GatheredWeights::gather_now(int64_t layer) {
  at::Tensor s = shard_elements(layer);
  at::Tensor block = at::empty({s.numel() * grid_.z().size()}, s.options());
  const double t0 = tracer_ ? tracer_->now() : 0;
  grid_.z().all_gather(s, block)->wait();
  if (tracer_) {
    const double t1 = tracer_->now();
    tracer_->comm(plan::CollectiveKind::AgZ, t0, t1, t1 - t0);
  }
  return block;
}

at::Tensor GatheredWeights::weight(int64_t layer) {
  poll();
  if (next_ >= ops_.size() || ops_[next_].op != LayerOp::Fetch || ops_[next_].layer != layer)
    throw InternalError("runtime", "the model fetched the weight of layer " + std::to_string(layer),
                        "the schedule's pass program",
                        next_ < ops_.size() ? ops_[next_].to_string() : "no more fetches in this pass");
  const LayerInstruction in = ops_[next_++];
  at::Tensor block;
  if (grid_.z().size() == 1) {
    block = store_ ? store_->gather(*shard(layer)) : *shard(layer);
  } else if (in.source == Source::Cached) {
    auto it = cache_.find({microbatch_, layer});
    if (it == cache_.end())
      throw InternalError("runtime", "no cached block of layer " + std::to_string(layer), "the recompute",
                          "the forward pass to have kept it");
    block = it->second;
    cache_.erase(it);
  } else if (in.source == Source::Prefetched) {
    auto it = prefetched_.find(layer);
    if (it == prefetched_.end())
      throw InternalError("runtime", "layer " + std::to_string(layer) + " was not prefetched", "the pass program",
                          "a Prefetch before its Fetch");
    Prefetch& p = it->second;
    const double t0 = tracer_ ? tracer_->now() : 0;
    if (p.done_at < 0) p.work->wait();
    if (tracer_) {
      const double t1 = tracer_->now();
      tracer_->comm(plan::CollectiveKind::AgZ, p.issued_at, p.done_at < 0 ? t1 : p.done_at, p.done_at < 0 ? t1 - t0 : 0.0);
    }
    block = p.block;
    prefetched_.erase(it);
  } else {
    block = gather_now(layer);
  }
  if (in.keep && grid_.z().size() > 1) cache_[{microbatch_, layer}] = block;
  recorder_.record(in);
  issue_prefetches();
  return block;
}

void GatheredWeights::end_pass() {
  if (next_ != ops_.size())
    throw InternalError("runtime", "the pass ended before " + ops_[next_].to_string(), "the schedule's pass program",
                        "every fetch of the pass");
  // Nothing prefetched may outlive the pass (each prefetch is consumed, but be safe).
  for (auto& [layer, p] : prefetched_) p.work->wait();
  prefetched_.clear();
  if (kind_ != schedule::PassKind::Forward)
    for (auto it = cache_.begin(); it != cache_.end();) it = it->first.first == microbatch_ ? cache_.erase(it) : std::next(it);
}

void GatheredWeights::poll() {
  for (auto& [layer, p] : prefetched_)
    if (p.done_at < 0 && p.work->test()) p.done_at = tracer_ ? tracer_->now() : 0;
}

}  // namespace axonn::runtime
