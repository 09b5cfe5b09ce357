// Predicted batch time of one pipeline stage: a timeline of compute and collectives,
// one micro-batch after another, that follows the runtime's schedule (CommEngine) and
// the overlap switches (docs/model.md section 8). Pure function of per-layer times.
//
// Per micro-batch, layers in order (forward), then in reverse (backward):
//   forward   wait for the layer's Z all-gather (prefetched while the previous layer
//             computed, when optimization 3 is on), compute, then the blocking forward
//             all-reduce.
//   backward  units (blocks) in reverse; with activation checkpointing a unit's
//             recomputed layers first run their forward again, in order (all-gather unless cached by optimization 4, compute, all-reduce);
//             without it, the weight is gathered again unless cached. Then, layers
//             in reverse, dI; its
//             all-reduce is waited for after dW (optimization 1) or at once; the dW
//             reduce-scatter goes to a FIFO waited for at the end of the pass
//             (optimization 2) or is waited for at once.
//   the step ends with the optimizer (optimizer_s, after every collective).
//   last micro-batch: each layer's gradient joins a data-parallel bucket when its
//             reduce-scatter is done; a full bucket (bucket_bytes) is all-reduced on a
//             second FIFO; the rest after the pass. Without bucketing all of it after.
// Collectives on the two FIFOs run concurrently with compute and with each other
// (bandwidth sharing between them is not modeled).
//
// Example: one layer, forward 1 s, dI 1 s, dW 1 s, all-reduces 0.5 s each, nothing else:
//   all switches on: 1 + 0.5 (forward AR) + 1 (dI) + max(1, 0.5) = 3.5 s, compute 3 s.
//   synchronous:     1 + 0.5 + 1 + 0.5 + 1                        = 4.0 s.
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/planner/layer_comm.hpp"

namespace axonn::planner {

// One layer's costs for one micro-batch, seconds (collectives: one occurrence each).
// Identical layers (a GPT's blocks) share one.
struct LayerCosts {
  double forward_s = 0;            // forward matmuls and element-wise work
  double backward_input_s = 0;     // dI matmuls and element-wise work
  double backward_weight_s = 0;    // dW matmuls
  LayerCollectives comm;           // its collectives (layer_comm.hpp; 0 where a group has size 1)
};

// What the timeline needs to know of one layer besides its costs.
struct LayerRole {
  bool recomputed = false;         // run again in the backward under activation checkpointing
  bool cached = false;             // optimization 4: the backward reuses the forward's weight
  bool gather_in_backward = true;  // false for embeddings (their backward needs no weight)
  int64_t unit = 0;                // checkpointed unit (block): recomputed together
};

// One layer with its own costs (tests, explanations).
struct LayerTimes : LayerCosts, LayerRole {};

// One layer of a stage as the timeline reads it: shared costs, its own role.
struct StageLayer {
  const LayerCosts* costs = nullptr;
  LayerRole role;
};

struct StageTime {
  double batch_s = 0;        // first compute to the end of the optimizer step
  double compute_s = 0;      // matmuls, element-wise work and the optimizer
  double exposed_comm_s = 0; // batch_s - compute_s
  double data_tail_s = 0;    // part of exposed_comm_s spent waiting for the data all-reduce
};

struct StageSchedule {
  int64_t microbatches = 1;
  bool activation_checkpointing = true;
  bool data_all_reduce = true;  // false: leave it out (pipeline stages add it once)
  double optimizer_s = 0;       // the optimizer step after the pass (counted as compute)
  plan::OverlapSettings overlap;
};

// The timeline of `count` layers (the planner's inner loop: no allocation).
StageTime stage_time(const StageLayer* layers, size_t count, const StageSchedule& s);
StageTime stage_time(const std::vector<LayerTimes>& layers, const StageSchedule& s);

// With Ginter > 1 stages and M micro-batches (1F1B/GPipe): (M + Ginter - 1) slots of
// the slowest stage's one-micro-batch time plus its point-to-point time, then that
// stage's data-parallel tail. (Ginter = 1 is stage_time over all M micro-batches.)
double pipeline_batch_s(double slowest_microbatch_s, double p2p_per_microbatch_s, int64_t microbatches,
                        int64_t ginter, double data_tail_s);

}  // namespace axonn::planner
