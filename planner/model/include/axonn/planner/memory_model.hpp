// Memory per GPU of one pipeline stage (docs/model.md section 5). Pure function.
//
//   model state      = w * phi + wg * phi + (state_bytes_per_param - w - wg) * phi
//                      (weights, gradients, the optimizer's master and moments), phi =
//                      (stage weights)/(Gx*Gy*Gz); ZeRO shards the last term over Gdata
//                      (stage 2 the gradients too); mixed precision adds one fp32
//                      gradient bucket, 4 * min(bsize, phi). Offloaded optimizer (AxoNN
//                      2022 section V): w * phi + wg * phi + 16 * min(bsize, phi) (the
//                      working set: fp32 master, two moments, fp32 gradient)
//   host tier        = offloaded optimizer only: 12 * phi (fp32 master, two moments);
//                      not device memory, so not in total_bytes()
//   gathered weights = w * (inflight * max block + sum of cached blocks), block = k*n/(Gx*Gy),
//                      inflight = 2 with all-gather prefetch, else 1; only when Gz > 1
//   un-scattered dW  = w * (sum of blocks with async reduce-scatter, else max block); Gz > 1
//   activations      = the most that the step's passes hold at one time (docs/model.md
//                      section 5): the walk of the last micro-batch's backward pass, segment
//                      by segment, over what the runtime's operators keep (layer_activations),
//                      plus the other in-flight micro-batches' checkpoints; the loss works on
//                      fp32 logits (three rows x vocab/Gy copies at its backward)
//   bucket buffers   = the data-parallel buckets' flat buffers alive at that time: each
//                      bucket, once issued in the backward pass, until the step's reduction
//   optimizer phase  = in place of all the above when larger (the passes' buffers are gone):
//                      ZeRO-1's reduce-scattered block, wg * phi/Gdata, and the gradient
//                      norm's fp64 copy and square of the largest parameter, 16 * block
//
// Example: a stage holding GPT-20B's 20.5e9 weights at Gx*Gy*Gz = 16 keeps, in bf16 with
//   fp32 gradients, 18 * 20.5e9 / 16 = 23.0 GB of model state per GPU.
#pragma once

#include <cstdint>
#include <string>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/topology/grid.hpp"

namespace axonn::planner {

struct MemoryBreakdown {
  double model_state_bytes = 0;
  double gathered_weight_bytes = 0;
  double unscattered_grad_bytes = 0;
  double activation_bytes = 0;  // at the passes' peak (with the dW being computed)
  double bucket_bytes = 0;      // data-parallel buckets in flight at that peak
  // The optimizer phase's own buffers when that phase is the peak (the passes' fields
  // are then 0): ZeRO-1's reduce-scattered gradient block and the gradient norm's fp64
  // copies of the largest parameter.
  double optimizer_bytes = 0;
  double host_bytes = 0;        // the host tier: not counted against the GPU's memory
  double total_bytes() const {
    return model_state_bytes + gathered_weight_bytes + unscattered_grad_bytes + activation_bytes + bucket_bytes +
           optimizer_bytes;
  }
};

struct MemorySettings {
  int64_t microbatch_seqs = 1;
  int64_t inflight_microbatches = 1;  // 1 without a pipeline; min(microbatches, Ginter) with one
  bool activation_checkpointing = true;
  plan::OverlapSettings overlap;
  plan::Precision precision;
  plan::OptimizerSettings optimizer;
  // Whether the step has a device optimizer phase (its buffers may be the peak); L2L's
  // update is the parameter server's, in the host tier.
  bool optimizer_phase = true;
  // The pipeline's last stage: it sends no activation on, so it keeps no stage output
  // or send buffer, with or without a loss layer (an explicit model may end without one).
  bool final_stage = false;
  // The model is a chain: no layer joins a residual stream (an explicit description),
  // so each layer kept whole is walked exactly (docs/model.md section 5, "a chain").
  // A GPT (false) keeps the residual stream's terms.
  bool chain = false;
};
// Whether no layer of `m` joins a residual stream (MemorySettings::chain).
bool is_chain(const model::ModelDescription& m);

// What one layer's operators keep per row (token) of a micro-batch, in elements of the
// activation type, as the runtime's autograd graph holds them (docs/model.md section 5).
// A linear keeps its input shard (k/Gx, or k/Gy when transposed); with a layer norm
// before it, the norm keeps one more hidden/Gx (its input with Gx = 1, its normalized
// input with Gx > 1); GELU after it keeps its input (n/Gy). Attention keeps the q, k, v
// copies its batched products make (3*hidden/Gy) and the probabilities (heads/Gy x
// seq_len).
struct LayerActivations {
  double saved = 0;          // kept until the layer's backward
  double input_grad = 0;     // its backward's dI (a linear: its input width)
  double norm_before = 0;    // of `saved`: what its layer norm keeps
  double copies = 0;         // attention: q, k, v
  double probs = 0;          // attention: the probabilities
  double logits = 0;         // the loss follows: vocab/Gy logits, handled in fp32
  // A chain of layers (MemorySettings::chain): what its backward holds on top of the
  // saved tensors, per row, at its two moments (docs/model.md section 5, "a chain"):
  // computing dI (the output gradient as it arrives and as the operator gathers it, dI,
  // and 2d's transposed copy of dI), and computing dW (the output gradient, dI and dI's
  // reduce-scattered block; the dW itself is counted in bytes apart).
  double backward_at_input = 0;
  double backward_at_weight = 0;
};
LayerActivations layer_activations(const model::Layer& l, const topo::Grid& g, int64_t seq_len);

// One layer of a stage as the memory model reads it (identical layers share the numbers).
struct MemoryLayer {
  double weight_elements = 0;  // k*n (0 for attention)
  const LayerActivations* act = nullptr;  // layer_activations(), shared by identical layers
  int64_t unit = 0;            // its checkpointed segment
  bool recomputed = false;
  bool cached = false;         // keeps its gathered weight (overlap optimization 4)
  double grad_bytes = 0;       // its data-parallel gradient shard, bytes (bucket sizes)
  bool local_weight = false;   // never gathered (2d-broadcast's linear layers: SUMMA's blocks)
};

// Memory of the GPUs of a stage holding `count` layers (no allocation); `hidden` and
// `seq_len` are the model's.
MemoryBreakdown stage_memory(const MemoryLayer* layers, size_t count, int64_t hidden, int64_t seq_len,
                             const topo::Grid& g, const MemorySettings& s);

// The plan's copy of `b`'s device parts (plan::MemoryPrediction), whole bytes; the host
// tier is the plan's host_memory_bytes_per_gpu.
plan::MemoryPrediction memory_prediction(const MemoryBreakdown& b);

// "51.3 GiB > 40.0 GiB"; below 1 GiB in MiB ("124.4 MiB > 115.0 MiB"), so that the two
// numbers differ in print.
std::string memory_over_limit(double bytes, double limit_bytes);

// Memory of the GPUs of the stage owning layers [first, last) of m.layers.
// `cached(i)` tells whether layer i keeps its gathered weight (overlap optimization 4).
MemoryBreakdown stage_memory(const model::ModelDescription& m, size_t first, size_t last,
                             const topo::Grid& g, const MemorySettings& s,
                             const std::vector<bool>& cached);

}  // namespace axonn::planner
