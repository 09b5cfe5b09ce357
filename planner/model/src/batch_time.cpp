// The pass clock; see axonn/planner/batch_time.hpp and docs/model.md section 8.
#include "axonn/planner/batch_time.hpp"

#include <algorithm>

namespace axonn::planner {

using schedule::LayerInstruction;
using schedule::LayerOp;
using schedule::PassKind;
using schedule::PassLayer;
using schedule::Source;

namespace {

// The clock of one rank through one pass (times from the pass start, seconds).
struct PassClock {
  const LayerCosts* const* costs;
  std::vector<double>& prefetch_done;  // per layer: when its prefetched all-gather ends
  double t = 0, compute = 0;
  double gather_free = 0;   // the prefetch stream is busy until then
  double input_grad_done = 0;  // the dI all-reduce in flight
  double rs_free = 0;       // the reduce-scatter FIFO is busy until then
  double data_free = 0;     // the data-parallel FIFO is busy until then
  double bucket_ready = 0;  // the reduce-scatters of the bucket being filled are done by then
  double bucket_s = 0;      // its all-reduce time so far
  double unbucketed_s = 0;
  double since_sync = 0;  // compute since the last collective of the tensor group
  double sync_wait = 0;   // the waits charged so far

  void compute_for(double seconds) {
    t += seconds;
    compute += seconds;
    since_sync += seconds;
  }
  // The wait of `calls` collectives of `seconds` in all (0: none, the group has one
  // member) for the group's last member: a fraction of the compute since the previous
  // one, and the fixed cost of each call.
  double wait_of(const LayerCosts& l, double seconds, int64_t calls = 1) {
    if (seconds <= 0 || (l.comm.sync_wait_fraction == 0 && l.comm.sync_call_s == 0)) return 0;  // none
    const double w = l.comm.sync_wait_fraction * since_sync + static_cast<double>(calls) * l.comm.sync_call_s;
    since_sync = 0;
    sync_wait += w;
    return w;
  }
  double blocking(const LayerCosts& l, double seconds, int64_t calls = 1) {
    return wait_of(l, seconds, calls) + seconds;
  }

  void operator()(const LayerInstruction& in) {
    const LayerCosts& l = *costs[in.layer >= 0 ? in.layer : 0];
    switch (in.op) {
      case LayerOp::Prefetch:
        gather_free = std::max(t, gather_free) + l.comm.all_gather_s;
        prefetch_done[in.layer] = gather_free;
        break;
      case LayerOp::Fetch:
        if (in.source == Source::Gather) t += blocking(l, l.comm.all_gather_s);
        if (in.source == Source::Prefetched) t = std::max(t, prefetch_done[in.layer]);
        break;
      case LayerOp::Forward:  // with sequence parallelism, attention waits for its ring
        compute_for(l.forward_s);  // then its ring, SUMMA's moves and its small collectives, one charge
        t += blocking(l, l.comm.ring_forward_s + l.summa_forward_exposed_s + l.comm.small_forward_s,
                      (l.comm.ring_forward_s > 0) + 2 * l.comm.summa_steps + l.comm.small_forward_calls);
        break;
      case LayerOp::ForwardCollective: t += blocking(l, l.comm.forward_all_reduce_s); break;
      case LayerOp::InputGather: t += blocking(l, l.comm.input_gather_s); break;
      case LayerOp::OutputGradGather: t += blocking(l, l.comm.output_grad_gather_s); break;
      case LayerOp::BackwardInput:  // 2d-broadcast: SUMMA's backward moves, dW's products included
        compute_for(l.backward_input_s);
        t += blocking(l, l.comm.ring_backward_s + l.summa_backward_exposed_s + l.comm.small_backward_s,
                      (l.comm.ring_backward_s > 0) + 4 * l.comm.summa_steps + l.comm.small_backward_calls);
        break;
      case LayerOp::InputGradCollective: input_grad_done = t + blocking(l, l.comm.input_grad_all_reduce_s); break;
      case LayerOp::InputGradWait: t = std::max(t, input_grad_done); break;
      case LayerOp::BackwardWeight: compute_for(l.backward_weight_s); break;
      case LayerOp::ReducedGradient:  // already summed over Z: final at once
        if (last) {
          if (bucketed) {
            bucket_ready = std::max(bucket_ready, t);
            bucket_s += l.comm.data_all_reduce_s;
          } else {
            unbucketed_s += l.comm.data_all_reduce_s;
          }
        }
        break;
      case LayerOp::ReduceScatter:
        if (async_rs) {
          const double w = wait_of(l, l.comm.reduce_scatter_s);
          rs_free = std::max(t + w, rs_free) + l.comm.reduce_scatter_s;
        } else {
          t += blocking(l, l.comm.reduce_scatter_s);
          rs_free = std::max(rs_free, t);
        }
        if (last) {  // the layer's gradient is final: it joins a bucket when reduce-scattered
          if (bucketed) {
            bucket_ready = std::max(bucket_ready, async_rs ? rs_free : t);
            bucket_s += l.comm.data_all_reduce_s;
          } else {
            unbucketed_s += l.comm.data_all_reduce_s;
          }
        }
        break;
      case LayerOp::BucketAllReduce:
        data_free = std::max(bucket_ready, data_free) + bucket_s;
        bucket_s = 0;
        break;
      case LayerOp::WaitReduceScatters:
        t = std::max(t, rs_free);
        bucket_ready = std::max(bucket_ready, t);  // the last bucket starts after the pass at the earliest
        break;
    }
  }

  bool async_rs = false, last = false, bucketed = false;
};

}  // namespace

PassTime simulate_pass(const PassLayer* layers, const LayerCosts* const* costs, size_t count,
                       const schedule::PassSettings& s, PassKind kind, std::vector<double>& prefetch_done) {
  if (prefetch_done.size() < count) prefetch_done.resize(count);
  PassClock c{costs, prefetch_done};
  c.async_rs = s.overlap.async_weight_grad_reduce_scatter;
  c.last = kind == PassKind::LastBackward && s.data_parallel;
  c.bucketed = s.overlap.bucketed_data_parallel_all_reduce;
  if (count > 0) schedule::emit_pass(layers, count, s, kind, c);
  PassTime out;
  out.duration_s = c.t;
  out.compute_s = c.compute;
  out.data_done_s = c.data_free;
  out.unbucketed_data_s = c.unbucketed_s;
  out.sync_wait_s = c.sync_wait;
  return out;
}

double offloaded_optimizer_phase_s(double allreduce_s, double update_s, int64_t chunks, bool overlapped,
                                   double per_chunk_s) {
  const double n = static_cast<double>(std::max<int64_t>(chunks, 1));
  if (!overlapped || chunks <= 1) return allreduce_s + n * per_chunk_s + update_s;
  const double a = allreduce_s / n + per_chunk_s, u = update_s / n;
  return a + (n - 1) * std::max(a, u) + u;
}

StageTime stage_time(const std::vector<LayerTimes>& layers, const StageSchedule& s) {
  std::vector<PassLayer> pass;
  std::vector<const LayerCosts*> costs;
  for (const auto& l : layers) {
    PassLayer p;
    p.weighted = l.weighted;
    p.input_gradient = l.input_gradient;
    p.weight_in_backward = l.gather_in_backward;
    p.recomputed = s.activation_checkpointing && l.recomputed;
    p.cached = l.cached;
    p.segment = l.unit;
    p.grad_bytes = l.comm.data_bytes;
    pass.push_back(p);
    costs.push_back(&l);
  }
  schedule::PassSettings settings;
  settings.overlap = s.overlap;
  settings.checkpointing = s.activation_checkpointing;
  settings.data_parallel = s.data_all_reduce;
  std::vector<double> scratch;
  auto run = [&](PassKind k) { return simulate_pass(pass.data(), costs.data(), pass.size(), settings, k, scratch); };
  const PassTime f = run(PassKind::Forward), b = run(PassKind::Backward), last = run(PassKind::LastBackward);
  const double m = static_cast<double>(s.microbatches);
  StageTime out;
  const double before_tail = (m - 1) * (f.duration_s + b.duration_s) + f.duration_s + last.duration_s;
  out.data_tail_s = std::max(0.0, last.data_done_s - last.duration_s) + last.unbucketed_data_s;
  out.batch_s = before_tail + out.data_tail_s + s.optimizer_s;
  out.compute_s = m * f.compute_s + (m - 1) * b.compute_s + last.compute_s + s.optimizer_s;
  out.sync_wait_s = m * f.sync_wait_s + (m - 1) * b.sync_wait_s + last.sync_wait_s;
  out.exposed_comm_s = out.batch_s - out.compute_s;
  return out;
}

double pipeline_batch_s(double slowest_microbatch_s, double p2p_per_microbatch_s, int64_t microbatches,
                        int64_t ginter, double data_tail_s) {
  return static_cast<double>(microbatches + ginter - 1) * (slowest_microbatch_s + p2p_per_microbatch_s) + data_tail_s;
}

}  // namespace axonn::planner
