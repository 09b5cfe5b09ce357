// One pass of one pipeline stage, layer by layer: the order of weight fetches,
// computes and collectives that the planner simulates on a clock and the runtime
// executes (docs/architecture.md, "The schedule IR"; docs/model.md section 8).
//
// emit_pass() is the only place that knows this order. It hands each instruction to a
// visitor, so the planner's simulation allocates nothing, and pass_program()
// materializes the same list for the runtime, which follows it (which weight to
// prefetch, what to keep for the recompute, which gradients form a bucket) and checks
// its own trace against it.
//
// Forward pass (optimization 3, prefetch, on):
//   Prefetch(w0); then per layer: Fetch(i) [weighted] -> Prefetch(next weighted) ->
//   [InputGather(i): weighted, gathers_input (2d, 3d)] -> Forward(i) ->
//   ForwardCollective(i) [weighted, forward_collective]
// Backward pass: checkpointed segments in reverse; a segment of recomputed layers first
//   runs their forward again (its first fetch gathers, later ones are prefetched within
//   the segment, a cached layer (optimization 4) comes from the forward); then each
//   layer in reverse:
//   Fetch(i) + Prefetch(previous) [weighted, not recomputed, reads its weight]
//   OutputGradGather(i) [weighted, gathers_output_grad (3d)]
//   BackwardInput(i) [computes dI] -> InputGradCollective(i) [weighted]
//   -> InputGradWait(i) here without optimization 1 -> BackwardWeight(i)
//   -> ReduceScatter(i) [weighted; a local weight: ReducedGradient(i)]
//   -> InputGradWait(i) here with optimization 1
//   -> BucketAllReduce when a data-parallel bucket fills (last micro-batch only)
//   and at the end WaitReduceScatters, then the last partial bucket.
// A layer with a local weight (2d-broadcast's linear layers, PassLayer::local_weight)
// has no Prefetch or Fetch: its Forward, BackwardInput and BackwardWeight move SUMMA's
// blocks themselves (their broadcasts and reduces are part of the instruction).
//
// A BucketAllReduce is data flow: it starts when the reduce-scatters of its layers
// have completed, so its place among the other instructions depends on timing; the
// runtime issues it then, and the planner's clock starts it then.
//
// Example:
//   PassSettings s;  s.overlap = plan::OverlapSettings::level(4, 0);  s.checkpointing = true;
//   auto fwd = pass_program(layers.data(), layers.size(), s, PassKind::Forward);
//   fwd.front();   // {Prefetch, layer 0}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/plan/plan.hpp"

namespace axonn::schedule {

enum class LayerOp : uint8_t {
  Prefetch,            // issue the Z all-gather of the layer's weight (optimization 3)
  Fetch,               // take the layer's weight (`source`), keep it for the recompute if `keep`
  Forward,             // forward compute (inside a backward pass: the recompute)
  ForwardCollective,    // blocking, after the compute: all-reduce of the partial output
                       // (AxoNN 3D), reduce-scatter of its rows (3d)
  BackwardInput,       // dI compute (attention: dP, dQ, dK)
  InputGradCollective,  // issue the dI all-reduce (2d, 3d: its reduce-scatter)
  InputGradWait,       // wait for it
  BackwardWeight,      // dW compute (attention: dV; embedding: the table gradient)
  ReduceScatter,       // the dW block over Z: queued with optimization 2, else waited for at once
  ReducedGradient,     // a local weight's dW, already summed over Z by BackwardWeight: handed over
                       // (to the bucket in the last backward); no collective
  BucketAllReduce,     // data-parallel all-reduce of the last `count` reduce-scattered layers
  WaitReduceScatters,  // end of a backward pass: every queued reduce-scatter has completed
  InputGather,         // blocking, before the compute: the input's all-gather (2d: columns over Y; 3d: rows)
  OutputGradGather,    // blocking, before the backward's computes: dO's all-gather over its rows (3d)
};
const char* layer_op_name(LayerOp op);

// Where a fetched weight comes from.
enum class Source : uint8_t { None, Gather, Prefetched, Cached };

struct LayerInstruction {
  LayerOp op = LayerOp::Forward;
  int32_t layer = 0;              // index among the stage's layers
  Source source = Source::None;   // Fetch
  bool keep = false;              // Fetch in the forward pass: keep the block for the recompute
  int32_t count = 0;              // BucketAllReduce: how many layers
  bool operator==(const LayerInstruction& o) const {
    return op == o.op && layer == o.layer && source == o.source && keep == o.keep && count == o.count;
  }
  std::string to_string() const;  // "Fetch(3, prefetched)", "BucketAllReduce(5, 4 layers)"
};

// One layer of a stage as the pass order depends on it.
struct PassLayer {
  bool weighted = true;            // has a weight: fetched, reduce-scattered, all-reduced over data
  bool input_gradient = true;      // computes dI (false: the embedding)
  bool weight_in_backward = true;  // its backward reads the weight (false: the embedding)
  bool recomputed = false;         // run again in the backward pass (activation checkpointing on)
  bool cached = false;             // optimization 4: the recompute reuses the forward's block
  int64_t segment = 0;             // layers recomputed together share one; consecutive
  double grad_bytes = 0;           // its data-parallel gradient shard, bytes (bucket sizes)
  // Tensor layouts (topo::TensorLayout): 2d and 3d gather the layer's input before its
  // compute (InputGather) and reduce-scatter dI; 2d has no collective after the compute
  // (forward_collective false); 3d reduce-scatters the output there and gathers dO
  // before the backward (OutputGradGather).
  bool gathers_input = false;
  bool forward_collective = true;  // weighted layers: a ForwardCollective
  bool gathers_output_grad = false;
  // The weight stays this rank's block (layout_rules' linear_weight_local): no Prefetch,
  // Fetch or ReduceScatter; a ReducedGradient hands its dW over.
  bool local_weight = false;
  bool operator==(const PassLayer& o) const {
    return weighted == o.weighted && input_gradient == o.input_gradient && weight_in_backward == o.weight_in_backward &&
           recomputed == o.recomputed && cached == o.cached && segment == o.segment && grad_bytes == o.grad_bytes &&
           gathers_input == o.gathers_input && forward_collective == o.forward_collective &&
           gathers_output_grad == o.gathers_output_grad && local_weight == o.local_weight;
  }
};

struct PassSettings {
  plan::OverlapSettings overlap;
  bool checkpointing = false;
  bool data_parallel = true;  // gradients are all-reduced over data in the backward (data_parallel_in_backward)
};

// Whether the backward reduces gradients over data (Gdata > 1), rather than the
// optimizer phase (the offloaded optimizer reduces them in chunks of its buckets; ZeRO
// reduce-scatters them).
inline bool data_parallel_in_backward(const topo::Grid& g, const plan::OptimizerSettings& o) {
  return g.gdata > 1 && !o.reduces_data_parallel();
}

enum class PassKind : uint8_t {
  Forward,
  Backward,      // a micro-batch's backward pass
  LastBackward,  // the backward pass of the step's last micro-batch on this stage: gradients are final
};

// Calls v(const LayerInstruction&) for each instruction of the pass, in order.
template <class Visitor>
void emit_pass(const PassLayer* layers, size_t count, const PassSettings& s, PassKind kind, Visitor&& v);

std::vector<LayerInstruction> pass_program(const PassLayer* layers, size_t count, const PassSettings& s,
                                           PassKind kind);

// ---- implementation -------------------------------------------------------------------

namespace detail {

// Whether the layer's weight is fetched (gathered over Z, prefetched, cached).
inline bool fetched(const PassLayer& l) { return l.weighted && !l.local_weight; }

inline int64_t next_fetched(const PassLayer* layers, size_t count, int64_t i) {
  for (int64_t j = i + 1; j < static_cast<int64_t>(count); ++j)
    if (fetched(layers[j])) return j;
  return -1;
}

inline int64_t previous_fetched(const PassLayer* layers, int64_t i) {
  for (int64_t j = i - 1; j >= 0; --j)
    if (fetched(layers[j])) return j;
  return -1;
}

// Whether the backward pass fetches the layer's weight itself (not via the recompute).
inline bool fetched_in_backward(const PassLayer& l) { return fetched(l) && l.weight_in_backward && !l.recomputed; }

}  // namespace detail

template <class Visitor>
void emit_pass(const PassLayer* layers, size_t count, const PassSettings& s, PassKind kind, Visitor&& v) {
  using detail::fetched;
  using detail::next_fetched;
  using detail::previous_fetched;
  const bool prefetch = s.overlap.prefetch_all_gather;
  auto emit = [&](LayerOp op, int64_t layer, Source source = Source::None, bool keep = false, int32_t n = 0) {
    v(LayerInstruction{op, static_cast<int32_t>(layer), source, keep, n});
  };
  // A layer's forward compute with its collectives before (2d, 3d) and after it.
  auto forward = [&](int64_t i) {
    const PassLayer& l = layers[i];
    if (l.weighted && l.gathers_input) emit(LayerOp::InputGather, i);
    emit(LayerOp::Forward, i);
    if (l.weighted && l.forward_collective) emit(LayerOp::ForwardCollective, i);
  };
  const int64_t n = static_cast<int64_t>(count);

  if (kind == PassKind::Forward) {
    if (prefetch) {
      const int64_t first = next_fetched(layers, count, -1);
      if (first >= 0) emit(LayerOp::Prefetch, first);
    }
    for (int64_t i = 0; i < n; ++i) {
      const PassLayer& l = layers[i];
      if (fetched(l)) {
        emit(LayerOp::Fetch, i, prefetch ? Source::Prefetched : Source::Gather, s.checkpointing && l.cached);
        const int64_t next = next_fetched(layers, count, i);
        if (prefetch && next >= 0) emit(LayerOp::Prefetch, next);
      }
      forward(i);
    }
    return;
  }

  // Backward: the last layer's weight is prefetched as the pass begins when its
  // backward gathers it.
  bool prefetched_ahead = false;  // the layer about to be fetched in the backward was prefetched
  {
    const int64_t last = previous_fetched(layers, n);
    if (prefetch && last >= 0 && detail::fetched_in_backward(layers[last])) {
      emit(LayerOp::Prefetch, last);
      prefetched_ahead = true;
    }
  }
  const bool buckets = kind == PassKind::LastBackward && s.data_parallel && s.overlap.bucketed_data_parallel_all_reduce;
  double bucket_bytes = 0;
  int32_t bucket_layers = 0;
  int64_t last_reduced = -1;
  for (int64_t end = n; end > 0;) {
    int64_t begin = end;  // [begin, end): one segment
    while (begin > 0 && layers[begin - 1].segment == layers[end - 1].segment &&
           layers[begin - 1].recomputed == layers[end - 1].recomputed)
      --begin;
    if (s.checkpointing && layers[begin].recomputed) {
      bool gathered_ahead = false;  // prefetched by the previous fetch of this recompute
      for (int64_t i = begin; i < end; ++i) {
        const PassLayer& l = layers[i];
        if (fetched(l)) {
          const Source src = l.cached ? Source::Cached : gathered_ahead ? Source::Prefetched : Source::Gather;
          emit(LayerOp::Fetch, i, src);
          const int64_t next = next_fetched(layers, count, i);
          gathered_ahead = prefetch && next >= 0 && next < end && !layers[next].cached;
          if (gathered_ahead) emit(LayerOp::Prefetch, next);
        }
        forward(i);
      }
    }
    for (int64_t i = end - 1; i >= begin; --i) {
      const PassLayer& l = layers[i];
      if (detail::fetched_in_backward(l)) {
        emit(LayerOp::Fetch, i, prefetched_ahead ? Source::Prefetched : Source::Gather);
        const int64_t prev = previous_fetched(layers, i);
        prefetched_ahead = prefetch && prev >= 0 && detail::fetched_in_backward(layers[prev]);
        if (prefetched_ahead) emit(LayerOp::Prefetch, prev);
      }
      const bool reduce_input = l.weighted && l.input_gradient && !l.local_weight;  // local: SUMMA's own reduces
      if (l.weighted && l.gathers_output_grad) emit(LayerOp::OutputGradGather, i);
      if (l.input_gradient) emit(LayerOp::BackwardInput, i);
      if (reduce_input) emit(LayerOp::InputGradCollective, i);
      if (reduce_input && !s.overlap.async_input_grad_all_reduce) emit(LayerOp::InputGradWait, i);
      emit(LayerOp::BackwardWeight, i);
      if (l.weighted) {
        emit(l.local_weight ? LayerOp::ReducedGradient : LayerOp::ReduceScatter, i);
        last_reduced = i;
      }
      if (reduce_input && s.overlap.async_input_grad_all_reduce) emit(LayerOp::InputGradWait, i);
      if (buckets && l.weighted) {
        bucket_bytes += l.grad_bytes;
        ++bucket_layers;
        if (bucket_bytes >= static_cast<double>(s.overlap.bucket_bytes)) {
          emit(LayerOp::BucketAllReduce, i, Source::None, false, bucket_layers);
          bucket_bytes = 0;
          bucket_layers = 0;
        }
      }
    }
    end = begin;
  }
  emit(LayerOp::WaitReduceScatters, -1);
  if (buckets && bucket_layers > 0) emit(LayerOp::BucketAllReduce, last_reduced, Source::None, false, bucket_layers);
}

}  // namespace axonn::schedule
