// The optimizers of a stage; see axonn/runtime/optimizer.hpp.
#include "axonn/runtime/optimizer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/runtime/host_memory.hpp"
#include "axonn/runtime/precision.hpp"
#include "axonn/runtime/weight_store.hpp"
#include "axonn/runtime/worker_thread.hpp"

namespace axonn::runtime {

AdamCoefficients adam_coefficients(const AdamSettings& s, int64_t step) {
  // As LibTorch's Adam (torch/csrc/api/src/optim/adam.cpp, 1.13).
  const double bias_correction1 = 1 - std::pow(s.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(s.beta2, static_cast<double>(step));
  return {s.beta1, s.beta2, s.eps, std::sqrt(bias_correction2), s.learning_rate / bias_correction1};
}

void adam_update(at::Tensor w, at::Tensor m, at::Tensor v, at::Tensor g, const AdamCoefficients& c) {
  m.mul_(c.beta1).add_(g, 1 - c.beta1);
  v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
  at::sqrt_out(g, v);
  g.div_(c.sqrt_bias_correction2).add_(c.eps);
  w.addcdiv_(m, g, -c.step_size);
}

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

  // LibTorch's Adam keys its state by the parameter's TensorImpl (adam.cpp, 1.13); a
  // parameter without one has not been updated yet.
  TrainingState state() override {
    TrainingState s;
    for (auto& p : params_) {
      ParameterState ps;
      ps.weight = p.tensor.detach().clone();
      const auto it = adam_->state().find(key(p));
      if (it == adam_->state().end()) {
        ps.exp_avg = at::zeros_like(ps.weight);
        ps.exp_avg_sq = at::zeros_like(ps.weight);
      } else {
        const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
        s.adam_steps = st.step();
        ps.exp_avg = st.exp_avg().clone();
        ps.exp_avg_sq = st.exp_avg_sq().clone();
      }
      s.params.push_back(std::move(ps));
    }
    return s;
  }
  void load_state(const TrainingState& s) override {
    AXONN_ASSERT(s.params.size() == params_.size());
    at::NoGradGuard no_grad;
    adam_->state().clear();
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor w = params_[i].tensor.detach();
      const ParameterState& ps = s.params[i];
      AXONN_ASSERT(ps.weight.numel() == w.numel() && ps.exp_avg.numel() == w.numel());
      w.copy_(full_precision_weight(ps).view(w.sizes()));
      if (s.adam_steps == 0) continue;
      auto st = std::make_unique<torch::optim::AdamParamState>();
      st->step(s.adam_steps);
      st->exp_avg(ps.exp_avg.to(w.options()).view(w.sizes()).clone());
      st->exp_avg_sq(ps.exp_avg_sq.to(w.options()).view(w.sizes()).clone());
      adam_->state()[key(params_[i])] = std::move(st);
    }
  }

 private:
  // The key of torch::optim's state map: LibTorch 1.13 prints the TensorImpl's address
  // (c10::guts::to_string), later versions key on the address itself.
  using StateKey = std::decay_t<decltype(std::declval<torch::optim::Adam&>().state())>::key_type;
  template <class Key = StateKey>
  static Key key(const Parameter& p) {
    void* impl = p.tensor.unsafeGetTensorImpl();
    if constexpr (std::is_same_v<Key, std::string>) {
      std::ostringstream text;
      text << impl;
      return text.str();
    } else {
      return impl;
    }
  }

  ProcessGrid& grid_;
  std::vector<Parameter>& params_;
  std::unique_ptr<torch::optim::Adam> adam_;
};

// Adam over flat buffers, one per reduction group ("segment"): the offloaded optimizer,
// ZeRO-1/2, offload with ZeRO, or mixed precision (optimizer.hpp). Each rank updates the elements
// [lo, hi) of each segment it owns: all of them without ZeRO, its 1/N block with ZeRO
// (the segment padded to a multiple of N = the group's size). Under ZeRO-2 it is also
// the reducer's gradient sink for the data segment, whose gradient buffer is then the
// owned block only.
class FlatAdam final : public Optimizer, public GradientSink, public WeightStore {
 public:
  FlatAdam(ProcessGrid& grid, std::vector<Parameter>& params, const plan::OptimizerSettings& o,
           const plan::Precision& precision, const AdamSettings& s, Tracer* tracer)
      : grid_(grid),
        params_(params),
        settings_(o),
        adam_(s),
        tracer_(tracer),
        offload_(o.offload),
        shard_(o.zero >= 1),
        shard_grads_(o.zero >= 2),
        shard_weights_(o.zero >= 3),
        mixed_(c10::elementSize(params.front().tensor.scalar_type()) < 4) {
    AXONN_ASSERT((o.reduces_data_parallel() || mixed_) && o.bucket_elements > 0 && o.allreduce_coarsening >= 0);
    segments_[0].group = &grid.data();
    segments_[0].kinds = {plan::CollectiveKind::ArData, plan::CollectiveKind::RsData, plan::CollectiveKind::AgData};
    // ZeRO-3's gathers block at points of the pass program, while the sink's reductions
    // are issued as the Z reduce-scatters complete: on one communicator their order
    // would differ between ranks, so the gathers get a communicator of their own.
    if (shard_weights_) gather_group_ = grid.data().split(0, grid.data().rank(), "data_gather");
    segments_[1].group = &grid.z_data();
    segments_[1].kinds = {plan::CollectiveKind::ArZData, plan::CollectiveKind::RsZData, plan::CollectiveKind::AgZData};
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      Segment& seg = segments_[params[i].spec.replicated_over_z() ? 1 : 0];
      seg.pieces.push_back({i, seg.elements, params[i].tensor.numel(), params[i].tensor.sizes().vec()});
      seg.elements += params[i].tensor.numel();
    }
    const auto options = params.front().tensor.options().requires_grad(false);
    const auto grad_options = options.dtype(gradient_type(options.dtype().toScalarType(), precision));
    const auto fp32 = options.dtype(at::kFloat);
    int64_t largest = 0;
    for (Segment& seg : segments_) {
      if (seg.elements == 0) continue;
      const int64_t n = shard_ ? seg.group->size() : 1;
      const int64_t padded = (seg.elements + n - 1) / n * n;
      seg.lo = shard_ ? seg.group->rank() * (padded / n) : 0;
      seg.hi = seg.lo + padded / n;
      largest = std::max(largest, seg.hi - seg.lo);
      // The device tier: the weights and their gradients, flat (padded with zeros); each
      // parameter and its gradient are views, which autograd and the reducer update in
      // place. ZeRO-2's data segment: the gradient of the owned block only, which
      // accumulate() fills; the parameters' .grad stay undefined. The gradients are in the
      // plan's reduction type (fp32 .grad of bf16 weights: autograd and the reducer add
      // into them in place).
      seg.sharded_grad = shard_grads_ && &seg == &segments_[0];
      // ZeRO-3's data segment: the weights of the owned block only; each parameter
      // keeps no elements (its storage released), and the weight source gathers a
      // layer's shard from the owners when a pass fetches it (gather()).
      seg.sharded_weights = shard_weights_ && &seg == &segments_[0];
      seg.weights_base = seg.sharded_weights ? 0 : seg.lo;
      seg.weights = at::zeros({seg.sharded_weights ? seg.hi - seg.lo : padded}, options);
      seg.grad = at::zeros({seg.sharded_grad ? seg.hi - seg.lo : padded}, grad_options);
      for (const Piece& pc : seg.pieces) {
        at::Tensor& w = params[pc.param].tensor;
        if (seg.sharded_weights) {
          const int64_t from = std::max(pc.offset, seg.lo), to = std::min(pc.offset + pc.elements, seg.hi);
          if (from < to) seg.weights.narrow(0, from - seg.lo, to - from).copy_(w.detach().reshape({-1}).narrow(0, from - pc.offset, to - from));
          w.set_data(at::empty({0}, options));
        } else {
          seg.weights.narrow(0, pc.offset, pc.elements).copy_(w.detach().reshape({-1}));
          w.set_data(seg.weights.narrow(0, pc.offset, pc.elements).view(w.sizes()));
        }
        if (seg.sharded_grad) piece_of_[w.unsafeGetTensorImpl()] = &pc - seg.pieces.data();
        else w.mutable_grad() = seg.grad.narrow(0, pc.offset, pc.elements).view(w.sizes());
      }
      // Adam's moments of the owned elements, and their fp32 master weights: in the host
      // tier when offloaded; else on the device, where fp32 weights are their own master.
      const int64_t owned = seg.hi - seg.lo;
      if (offload_) {
        seg.master = HostMemory::empty(owned, at::kFloat);
        seg.master.copy_(seg.weights.narrow(0, seg.weights_base, owned));
        seg.exp_avg = HostMemory::zeros(owned, at::kFloat);
        seg.exp_avg_sq = HostMemory::zeros(owned, at::kFloat);
      } else {
        if (mixed_) seg.master = seg.weights.narrow(0, seg.weights_base, owned).to(fp32);
        seg.exp_avg = at::zeros({owned}, mixed_ ? fp32 : options);
        seg.exp_avg_sq = at::zeros({owned}, mixed_ ? fp32 : options);
      }
    }
    // The working set on the device, reused by every bucket: offloaded, the master, the
    // moments and the fp32 gradient; mixed precision on the device, the fp32 gradient.
    const int64_t b = std::min(o.bucket_elements, largest);
    if (offload_) {
      master_ = at::empty({b}, fp32);
      exp_avg_ = at::empty({b}, fp32);
      exp_avg_sq_ = at::empty({b}, fp32);
    }
    if (offload_ || mixed_) grad_ = at::empty({b}, fp32);
  }

  void zero_grad() override {
    for (Segment& seg : segments_)
      if (seg.elements > 0) seg.grad.zero_();
  }

  bool reduces_data_parallel() const override { return settings_.reduces_data_parallel(); }
  std::vector<at::Tensor> held_weights() const override { return segment_tensors(&Segment::weights); }
  std::vector<at::Tensor> held_gradients() const override { return segment_tensors(&Segment::grad); }
  GradientSink* gradient_sink() override { return shard_grads_ ? this : nullptr; }
  WeightStore* weight_store() override { return shard_weights_ ? this : nullptr; }

  // ZeRO-3: a layer's shard, gathered over the data group from the owners of its
  // elements (blocking: the weight source calls it at points of the pass program).
  at::Tensor gather(const at::Tensor& param) override {
    Segment& seg = segments_[0];
    const Piece& pc = piece_of(param, "FlatAdam::gather");
    const Owners own = owners(seg, pc);
    if (seg.group->size() == 1) return seg.weights.narrow(0, pc.offset, pc.elements);
    at::Tensor full = at::empty({pc.elements}, seg.weights.options());
    const double t0 = tracer_ ? tracer_->now() : 0;
    gather_group_->all_gather_v(seg.weights.narrow(0, own.at, own.mine), own.counts, full)->wait();
    if (tracer_) tracer_->comm(plan::CollectiveKind::AgData, t0, tracer_->now(), tracer_->now() - t0);
    return full;
  }

  // ZeRO-2: one backward's gradient of a weight of the data segment, reduced over the
  // data group into the owners' blocks (each rank receives the part of the piece inside
  // its block, possibly none). Issued, not waited for (gradient_sink.hpp).
  void accumulate(const at::Tensor& param, const at::Tensor& grad) override {
    Segment& seg = segments_[0];
    const Piece& pc = piece_of(param, "FlatAdam::accumulate");
    const at::Tensor flat = grad.contiguous().view({-1}).to(seg.grad.scalar_type());
    AXONN_ASSERT(flat.numel() == pc.elements);
    const Owners own = owners(seg, pc);
    if (seg.group->size() == 1) {
      seg.grad.narrow(0, own.at, own.mine).add_(flat);
      return;
    }
    Reduction red;
    red.out = at::empty({own.mine}, seg.grad.options());
    red.at = own.at;
    red.issued_at = tracer_ ? tracer_->now() : 0;
    red.work = seg.group->reduce_scatter_v(flat, own.counts, red.out);
    in_flight_.push_back(std::move(red));
  }
  void poll() override {
    while (!in_flight_.empty() && finish_oldest(/*block=*/false)) {
    }
  }
  void settle(size_t in_flight) override {
    while (in_flight_.size() > in_flight) finish_oldest(/*block=*/true);
  }

  OptimizerPhase step(double max_grad_norm) override {
    const AdamCoefficients c = adam_coefficients(adam_, ++step_);
    return shard_ ? sharded_step(max_grad_norm, c) : replicated_step(max_grad_norm, c);
  }

  // Each segment's owned blocks all-gathered (ZeRO) into whole buffers, cut into pieces.
  TrainingState state() override {
    TrainingState s;
    s.adam_steps = step_;
    s.params.resize(params_.size());
    for (Segment& seg : segments_) {
      if (seg.elements == 0) continue;
      const int n = shard_ ? seg.group->size() : 1;
      auto whole = [&](const at::Tensor& owned) {
        at::Tensor block = owned.to(seg.weights.device()).contiguous();  // the host tier's, when offloaded
        if (n == 1) return block;
        at::Tensor all = at::empty({block.numel() * n}, block.options());
        seg.group->all_gather(block, all)->wait();
        return all;
      };
      const at::Tensor w = seg.sharded_weights ? whole(seg.weights) : seg.weights;
      const at::Tensor m = whole(seg.exp_avg), v = whole(seg.exp_avg_sq);
      const at::Tensor master = mixed_ ? whole(seg.master) : at::Tensor();
      for (const Piece& pc : seg.pieces) {
        auto cut = [&](const at::Tensor& t) { return t.narrow(0, pc.offset, pc.elements).view(pc.shape).clone(); };
        ParameterState& ps = s.params[pc.param];
        ps.weight = cut(w);
        ps.exp_avg = cut(m);
        ps.exp_avg_sq = cut(v);
        if (mixed_) ps.master = cut(master);
      }
    }
    return s;
  }

  // Each segment's whole buffers assembled from the pieces; this rank keeps its blocks.
  void load_state(const TrainingState& s) override {
    AXONN_ASSERT(s.params.size() == params_.size());
    at::NoGradGuard no_grad;
    step_ = s.adam_steps;
    for (Segment& seg : segments_) {
      if (seg.elements == 0) continue;
      const int64_t padded = (seg.hi - seg.lo) * (shard_ ? seg.group->size() : 1);
      auto assemble = [&](auto field, const at::TensorOptions& options) {
        at::Tensor all = at::zeros({padded}, options);
        for (const Piece& pc : seg.pieces) {
          const at::Tensor& t = field(s.params[pc.param]);
          AXONN_ASSERT(t.numel() == pc.elements);
          all.narrow(0, pc.offset, pc.elements).copy_(t.reshape({-1}));
        }
        return all;
      };
      auto owned = [&](const at::Tensor& all) { return all.narrow(0, seg.lo, seg.hi - seg.lo); };
      // fp32 weights are their own master: loaded from the master copy where there is one.
      const at::Tensor w = assemble(
          [&](const ParameterState& ps) -> const at::Tensor& { return mixed_ ? ps.weight : full_precision_weight(ps); },
          seg.weights.options());
      seg.weights.copy_(seg.sharded_weights ? owned(w) : w);
      seg.exp_avg.copy_(owned(assemble([](const ParameterState& ps) -> const at::Tensor& { return ps.exp_avg; },
                                       seg.exp_avg.options())));
      seg.exp_avg_sq.copy_(owned(assemble([](const ParameterState& ps) -> const at::Tensor& { return ps.exp_avg_sq; },
                                          seg.exp_avg_sq.options())));
      if (seg.master.defined())
        seg.master.copy_(owned(assemble(full_precision_weight, seg.master.options())));
    }
  }

 private:
  struct Piece {
    size_t param;
    int64_t offset, elements;    // in the segment
    std::vector<int64_t> shape;  // of the parameter's shard (ZeRO-3's parameters keep no elements)
  };
  struct Segment {
    Communicator* group = nullptr;
    // Its collectives' kinds: all-reduce, reduce-scatter, all-gather.
    struct Kinds {
      plan::CollectiveKind all_reduce, reduce_scatter, all_gather;
    } kinds{};
    std::vector<Piece> pieces;
    int64_t elements = 0;
    int64_t lo = 0, hi = 0;                  // the owned elements
    bool sharded_grad = false;               // ZeRO-2's data segment: grad holds [lo, hi) only
    bool sharded_weights = false;            // ZeRO-3's data segment: weights hold [lo, hi) only
    int64_t weights_base = 0;                // where element lo is in `weights`
    at::Tensor weights, grad;                // device, every element (padded), or the owned block
    at::Tensor master, exp_avg, exp_avg_sq;  // the owned elements (master: offloaded only)
  };
  // The defined tensors `member` of the segments that hold elements.
  std::vector<at::Tensor> segment_tensors(at::Tensor Segment::*member) const {
    std::vector<at::Tensor> out;
    for (const Segment& seg : segments_)
      if (seg.elements > 0 && (seg.*member).defined()) out.push_back(seg.*member);
    return out;
  }
  struct Chunk {
    size_t segment;
    int64_t offset, elements;
  };
  struct Pending {
    WorkHandle work;
    plan::CollectiveKind kind = plan::CollectiveKind::ArData;
    double issued_at = 0;
  };
  struct Reduction {  // ZeRO-2: one layer's gradient on its way to the owners
    WorkHandle work;
    at::Tensor out;  // this rank's part of the sum
    int64_t at = 0;  // where it goes in the data segment's block
    double issued_at = 0;
  };

  // ZeRO-2/3: which ranks own a piece's elements. counts[r]: how many of them rank r's
  // block holds; `mine` of them here, from `at` in this rank's block.
  struct Owners {
    std::vector<int64_t> counts;
    int64_t mine = 0, at = 0;
  };
  static Owners owners(const Segment& seg, const Piece& pc) {
    Owners o;
    const int n = seg.group->size();
    const int64_t block = seg.hi - seg.lo, end = pc.offset + pc.elements;
    o.counts.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      o.counts[static_cast<size_t>(r)] =
          std::max<int64_t>(0, std::min(end, (r + 1) * block) - std::max(pc.offset, r * block));
    o.mine = o.counts[static_cast<size_t>(seg.group->rank())];
    o.at = o.mine > 0 ? std::max(pc.offset, seg.lo) - seg.lo : 0;
    return o;
  }
  const Piece& piece_of(const at::Tensor& param, const char* where) const {
    const auto it = piece_of_.find(param.unsafeGetTensorImpl());
    if (it == piece_of_.end())
      throw InternalError("runtime", "a tensor that is not a weight of the stage reached ZeRO's sharded segment", where,
                          "a parameter replicated over data, split over Z");
    return segments_[0].pieces[it->second];
  }

  // Completes the oldest reduction if it is done (or, with `block`, once it is);
  // returns whether it did.
  bool finish_oldest(bool block) {
    Reduction& red = in_flight_.front();
    const double t0 = tracer_ ? tracer_->now() : 0;
    if (block) red.work->wait();
    else if (!red.work->test()) return false;
    if (tracer_) tracer_->comm(plan::CollectiveKind::RsData, red.issued_at, tracer_->now(), block ? tracer_->now() - t0 : 0);
    segments_[0].grad.narrow(0, red.at, red.out.numel()).add_(red.out);
    in_flight_.pop_front();
    return true;
  }

  // Without ZeRO: all-reduce in chunks of k buckets, chunk c's update on the worker while
  // chunk c+1 is reduced (seed-spec A6); with clipping or k = 0, reduce all, then update.
  // Mixed precision without offload: the reducer reduced during the backward; update.
  OptimizerPhase replicated_step(double max_grad_norm, const AdamCoefficients& c) {
    OptimizerPhase ph;
    if (!settings_.reduces_data_parallel()) {
      ph.grad_norm = clip_gradients(grid_, params_, max_grad_norm);
      for (Segment& seg : segments_)
        if (seg.elements > 0) update(seg, seg.grad, 0, seg.elements, c);
      return ph;
    }
    std::vector<Chunk> chunks;
    for (size_t s = 0; s < segments_.size(); ++s) {
      const int64_t n = segments_[s].elements;
      const int64_t width = settings_.allreduce_coarsening > 0 ? settings_.allreduce_coarsening * settings_.bucket_elements : n;
      for (int64_t at = 0; at < n; at += width) chunks.push_back({s, at, std::min(width, n - at)});
    }
    auto issue = [&](const Chunk& ch) {
      Segment& seg = segments_[ch.segment];
      return start(seg.kinds.all_reduce, seg, [&] { return seg.group->all_reduce(seg.grad.narrow(0, ch.offset, ch.elements), ReduceOp::Sum); });
    };
    const bool overlap = settings_.allreduce_coarsening > 0 && max_grad_norm <= 0;
    if (!overlap) {
      for (const Chunk& ch : chunks) wait(issue(ch), ph);
      ph.grad_norm = clip_gradients(grid_, params_, max_grad_norm);
      for (const Chunk& ch : chunks) update(segments_[ch.segment], segments_[ch.segment].grad, ch.offset, ch.elements, c);
      return ph;
    }
    Pending next = chunks.empty() ? Pending{} : issue(chunks.front());
    for (size_t i = 0; i < chunks.size(); ++i) {
      wait(std::move(next), ph);
      if (i + 1 < chunks.size()) next = issue(chunks[i + 1]);
      worker_.submit([this, ch = chunks[i], c] {
        Segment& seg = segments_[ch.segment];
        update(seg, seg.grad, ch.offset, ch.elements, c);
      });
    }
    worker_.drain();
    return ph;
  }

  // ZeRO-1: reduce-scatter each segment's gradients (this rank's block of the sum, a
  // device buffer for the phase), clip with the norm of the blocks, update the owned
  // elements, all-gather the weights in place. ZeRO-2's data segment arrives reduced.
  OptimizerPhase sharded_step(double max_grad_norm, const AdamCoefficients& c) {
    OptimizerPhase ph;
    std::array<at::Tensor, 2> reduced;
    settle(0);
    for (size_t s = 0; s < segments_.size(); ++s) {
      Segment& seg = segments_[s];
      if (seg.elements == 0) continue;
      if (seg.sharded_grad) {  // ZeRO-2: reduced during the backward passes
        for (const Piece& pc : seg.pieces)
          if (params_[pc.param].tensor.grad().defined())
            throw InternalError("runtime", "parameter " + params_[pc.param].name + " has a gradient outside ZeRO-2's sink",
                                "FlatAdam::step", "every weight of the data segment handed over by the reducer");
        reduced[s] = seg.grad;
        continue;
      }
      reduced[s] = at::empty({seg.hi - seg.lo}, seg.grad.options());
      if (seg.group->size() == 1) reduced[s].copy_(seg.grad);
      else wait(start(seg.kinds.reduce_scatter, seg, [&] { return seg.group->reduce_scatter(seg.grad, reduced[s]); }), ph);
    }
    ph.grad_norm = sharded_norm(reduced);
    const double coef = max_grad_norm / (ph.grad_norm + 1e-6);  // as clip_gradients
    for (size_t s = 0; s < segments_.size(); ++s) {
      Segment& seg = segments_[s];
      if (seg.elements == 0) continue;
      if (max_grad_norm > 0 && coef < 1.0) reduced[s].mul_(coef);
      update(seg, reduced[s], 0, seg.hi - seg.lo, c);  // ZeRO-2: seg.grad ends holding Adam's denominator
      reduced[s] = at::Tensor();  // the phase's buffer goes before the weights are gathered
      if (seg.group->size() > 1 && !seg.sharded_weights)  // ZeRO-3 gathers each layer when a pass fetches it
        wait(start(seg.kinds.all_gather, seg, [&] { return seg.group->all_gather(seg.weights.narrow(0, seg.lo, seg.hi - seg.lo), seg.weights); }), ph);
    }
    return ph;
  }

  // The global norm of the reduced gradient from each rank's blocks: each segment's sum
  // of squares over its group (the blocks), then over the model's ranks, each element
  // counted once (`replication` ranks of a replica hold it; Z-replicated elements were
  // reduced over Z x data, so Z of the replica's ranks hold the same sum).
  double sharded_norm(const std::array<at::Tensor, 2>& reduced) {
    at::Tensor total = at::zeros({1}, at::kDouble);
    for (size_t s = 0; s < segments_.size(); ++s) {
      Segment& seg = segments_[s];
      if (seg.elements == 0) continue;
      at::Tensor sq = at::zeros({1}, at::kDouble);
      for (const Piece& pc : seg.pieces) {
        const int64_t from = std::max(seg.lo, pc.offset), to = std::min(seg.hi, pc.offset + pc.elements);
        if (from >= to) continue;
        const at::Tensor part = reduced[s].narrow(0, from - seg.lo, to - from).to(at::kDouble);
        sq += part.pow(2).sum() / static_cast<double>(params_[pc.param].spec.replication(grid_.grid()));
      }
      all_reduce_now(*seg.group, sq);
      total += sq;
    }
    all_reduce_now(grid_.model(), total);
    return std::sqrt(total.item<double>());
  }

  template <class Issue>
  Pending start(plan::CollectiveKind kind, const Segment& seg, Issue issue) {
    Pending p;
    if (seg.group->size() == 1) return p;
    p.kind = kind;
    p.issued_at = tracer_ ? tracer_->now() : 0;
    p.work = issue();
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

  // Adam on the owned elements [from, from + count) of a segment (offsets from seg.lo),
  // `grad` their reduced gradient (indexed alike). Offloaded, bucket by bucket: fetch,
  // update, write back, refresh the device weights. Mixed precision on the device,
  // bucket by bucket: the gradient to fp32, update the master, refresh the weights.
  // Otherwise (fp32 ZeRO, the phase's own gradient buffer): in place.
  void update(Segment& seg, const at::Tensor& grad, int64_t from, int64_t count, const AdamCoefficients& c) {
    at::NoGradGuard no_grad;  // thread-local: the worker needs its own
    const bool buckets = offload_ || mixed_;
    const int64_t end = from + count, step = buckets ? settings_.bucket_elements : count;
    for (int64_t a = from; a < end; a += step) {
      const int64_t n = std::min(step, end - a);
      at::Tensor device_weights = seg.weights.narrow(0, seg.weights_base + a, n);
      if (!buckets) {
        AXONN_ASSERT(shard_);  // ZeRO-1's own buffer: its gradient may hold the denominator
        adam_update(device_weights, seg.exp_avg.narrow(0, a, n), seg.exp_avg_sq.narrow(0, a, n), grad.narrow(0, a, n), c);
        continue;
      }
      at::Tensor g = grad_.narrow(0, 0, n);
      g.copy_(grad.narrow(0, a, n));  // to fp32: the loss was pre-divided, nothing to de-scale
      if (!offload_) {
        at::Tensor w = seg.master.narrow(0, a, n);
        adam_update(w, seg.exp_avg.narrow(0, a, n), seg.exp_avg_sq.narrow(0, a, n), g, c);
        device_weights.copy_(w);
        continue;
      }
      at::Tensor w = master_.narrow(0, 0, n), m = exp_avg_.narrow(0, 0, n), v = exp_avg_sq_.narrow(0, 0, n);
      w.copy_(seg.master.narrow(0, a, n));
      m.copy_(seg.exp_avg.narrow(0, a, n));
      v.copy_(seg.exp_avg_sq.narrow(0, a, n));
      adam_update(w, m, v, g, c);
      seg.master.narrow(0, a, n).copy_(w);
      seg.exp_avg.narrow(0, a, n).copy_(m);
      seg.exp_avg_sq.narrow(0, a, n).copy_(v);
      device_weights.copy_(w);
    }
  }

  ProcessGrid& grid_;
  std::vector<Parameter>& params_;
  plan::OptimizerSettings settings_;
  AdamSettings adam_;
  Tracer* tracer_;
  const bool offload_, shard_, shard_grads_, shard_weights_;
  const bool mixed_;  // weights narrower than fp32: an fp32 master (on the device unless offloaded)
  std::array<Segment, 2> segments_;
  std::unique_ptr<Communicator> gather_group_;  // ZeRO-3: the data group's members, for the weight gathers
  std::unordered_map<const c10::TensorImpl*, size_t> piece_of_;  // ZeRO-2: a weight's piece of segments_[0]
  std::deque<Reduction> in_flight_;                               // ZeRO-2: issue order
  at::Tensor master_, exp_avg_, exp_avg_sq_, grad_;  // the working set, bsize elements each (grad_: fp32)
  int64_t step_ = 0;
  WorkerThread worker_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(ProcessGrid& grid, std::vector<Parameter>& params,
                                          const plan::OptimizerSettings& settings, const plan::Precision& precision,
                                          const AdamSettings& adam, Tracer* tracer) {
  AXONN_ASSERT(!params.empty());
  const bool mixed = c10::elementSize(params.front().tensor.scalar_type()) < 4;
  if (settings.reduces_data_parallel() || mixed)
    return std::make_unique<FlatAdam>(grid, params, settings, precision, adam, tracer);
  return std::make_unique<DeviceAdam>(grid, params, adam);
}

}  // namespace axonn::runtime
