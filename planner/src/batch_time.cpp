// The stage timeline; see axonn/planner/batch_time.hpp and docs/model.md section 8.
#include "axonn/planner/batch_time.hpp"

#include <algorithm>

namespace axonn::planner {
namespace {

// A clock for one rank: `t` is when the next compute may start; the Z all-gathers of
// prefetched weights run on their own stream.
struct Clock {
  double t = 0;
  double compute = 0;
  double gather_free = 0;  // the all-gather stream is busy until then
  double issue = 0;        // when the next prefetch may be issued (the previous compute's start)

  void gather(double seconds, bool prefetch) {
    if (seconds <= 0) return;
    if (!prefetch) {
      t += seconds;
      return;
    }
    const double done = std::max(issue, gather_free) + seconds;
    gather_free = done;
    t = std::max(t, done);
  }
  void compute_for(double seconds) {
    issue = t;  // the next layer's all-gather is issued as this compute starts
    t += seconds;
    compute += seconds;
  }
};

void forward_layer(Clock& c, const LayerCosts& l, bool prefetch, bool gather) {
  if (gather) c.gather(l.comm.all_gather_s, prefetch);
  c.compute_for(l.forward_s);
  c.t += l.comm.forward_all_reduce_s;
}

}  // namespace

StageTime stage_time(const std::vector<LayerTimes>& layers, const StageSchedule& s) {
  std::vector<StageLayer> view;
  view.reserve(layers.size());
  for (const auto& l : layers) view.push_back({&l, l});
  return stage_time(view.data(), view.size(), s);
}

StageTime stage_time(const StageLayer* layers, size_t count, const StageSchedule& s) {
  const auto& o = s.overlap;
  Clock c;
  double rs_free = 0, data_free = 0;
  StageTime out;
  for (int64_t mb = 0; mb < s.microbatches; ++mb) {
    const bool last = mb == s.microbatches - 1;
    c.issue = c.gather_free = c.t;
    for (size_t i = 0; i < count; ++i) forward_layer(c, *layers[i].costs, o.prefetch_all_gather, true);

    double bucket_bytes = 0, bucket_s = 0, bucket_ready = 0, unbucketed_s = 0;
    auto flush = [&] {
      if (bucket_s > 0) data_free = std::max(bucket_ready, data_free) + bucket_s;
      bucket_bytes = bucket_s = 0;
    };
    c.issue = c.gather_free = c.t;
    for (size_t end = count; end > 0;) {
      size_t begin = end;  // [begin, end): one unit
      while (begin > 0 && layers[begin - 1].role.unit == layers[end - 1].role.unit) --begin;
      // The runtime prefetches inside a block's recompute only: its first gather waits.
      if (s.activation_checkpointing) c.issue = c.gather_free = c.t;
      if (s.activation_checkpointing)
        for (size_t i = begin; i < end; ++i)
          if (layers[i].role.recomputed)
            forward_layer(c, *layers[i].costs, o.prefetch_all_gather, !layers[i].role.cached);
      for (size_t i = end; i-- > begin;) {
        const LayerCosts& l = *layers[i].costs;
        const LayerRole& r = layers[i].role;
        const bool gathered_by_recompute = s.activation_checkpointing && r.recomputed;
        if (!gathered_by_recompute && !r.cached && r.gather_in_backward)
          c.gather(l.comm.all_gather_s, o.prefetch_all_gather);
        c.compute_for(l.backward_input_s);
        if (o.async_input_grad_all_reduce) {
          const double reduced = c.t + l.comm.input_grad_all_reduce_s;
          c.compute_for(l.backward_weight_s);
          c.t = std::max(c.t, reduced);
        } else {
          c.t += l.comm.input_grad_all_reduce_s;
          c.compute_for(l.backward_weight_s);
        }
        double rs_done = c.t;
        if (l.comm.reduce_scatter_s > 0) {
          if (o.async_weight_grad_reduce_scatter) {
            rs_free = std::max(c.t, rs_free) + l.comm.reduce_scatter_s;
            rs_done = rs_free;
          } else {
            c.t += l.comm.reduce_scatter_s;
            rs_done = c.t;
          }
        }
        if (!last || !s.data_all_reduce || l.comm.data_all_reduce_s <= 0) continue;
        if (!o.bucketed_data_parallel_all_reduce) {
          unbucketed_s += l.comm.data_all_reduce_s;
          continue;
        }
        bucket_bytes += l.comm.data_bytes;
        bucket_s += l.comm.data_all_reduce_s;
        bucket_ready = std::max(bucket_ready, rs_done);
        if (bucket_bytes >= static_cast<double>(o.bucket_bytes)) flush();
      }
      end = begin;
    }
    c.t = std::max(c.t, rs_free);  // finish_backward: every reduce-scatter waited for
    if (last) {
      const double before = c.t;
      bucket_ready = std::max(bucket_ready, c.t);
      flush();
      c.t = std::max(c.t, data_free) + unbucketed_s;
      out.data_tail_s = c.t - before;
    }
  }
  c.t += s.optimizer_s;
  c.compute += s.optimizer_s;
  out.batch_s = c.t;
  out.compute_s = c.compute;
  out.exposed_comm_s = c.t - c.compute;
  return out;
}

double pipeline_batch_s(double slowest_microbatch_s, double p2p_per_microbatch_s, int64_t microbatches,
                        int64_t ginter, double data_tail_s) {
  return static_cast<double>(microbatches + ginter - 1) * (slowest_microbatch_s + p2p_per_microbatch_s) + data_tail_s;
}

}  // namespace axonn::planner
