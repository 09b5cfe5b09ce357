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
//   activations      = inflight_mb * (stored layers + one checkpoint of rows x hidden/Gx per
//                      checkpointed unit) + the largest checkpointed unit's working set,
//                      rows = microbatch_seqs * seq_len / Gz
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
  double activation_bytes = 0;
  double host_bytes = 0;  // the host tier: not counted against the GPU's memory
  double total_bytes() const {
    return model_state_bytes + gathered_weight_bytes + unscattered_grad_bytes + activation_bytes;
  }
};

struct MemorySettings {
  int64_t microbatch_seqs = 1;
  int64_t inflight_microbatches = 1;  // 1 without a pipeline; min(microbatches, Ginter) with one
  bool activation_checkpointing = true;
  plan::OverlapSettings overlap;
  plan::Precision precision;
  plan::OptimizerSettings optimizer;
};

// Activation elements per row (token) of one layer's input plus output shard
// (attention: its scores and probabilities, heads/Gy x seq_len per row).
double activation_elems_per_row(const model::Layer& l, const topo::Grid& g, int64_t seq_len);

// One layer of a stage as the memory model reads it (identical layers share the numbers).
struct MemoryLayer {
  double weight_elements = 0;           // k*n (0 for attention)
  double activation_elems_per_row = 0;  // activation_elems_per_row()
  int64_t unit = 0;
  bool recomputed = false;
  bool cached = false;                  // keeps its gathered weight (overlap optimization 4)
};

// Memory of the GPUs of a stage holding `count` layers (no allocation); `hidden` and
// `seq_len` are the model's.
MemoryBreakdown stage_memory(const MemoryLayer* layers, size_t count, int64_t hidden, int64_t seq_len,
                             const topo::Grid& g, const MemorySettings& s);

// "51.3 GiB > 40.0 GiB"; below 1 GiB in MiB ("124.4 MiB > 115.0 MiB"), so that the two
// numbers differ in print.
std::string memory_over_limit(double bytes, double limit_bytes);

// Memory of the GPUs of the stage owning layers [first, last) of m.layers.
// `cached(i)` tells whether layer i keeps its gathered weight (overlap optimization 4).
MemoryBreakdown stage_memory(const model::ModelDescription& m, size_t first, size_t last,
                             const topo::Grid& g, const MemorySettings& s,
                             const std::vector<bool>& cached);

}  // namespace axonn::planner
