// Predicted time of one pass of one pipeline stage: the pass program of the schedule
// IR (axonn/schedule/pass.hpp) run on a clock, with per-layer compute and collective
// times (docs/model.md section 8). The order is the IR's, so it is the runtime's.
//
// The clock of one rank: compute and blocking collectives advance it; prefetched
// all-gathers run one at a time on their own stream; dI all-reduces run alongside
// until waited for; reduce-scatters (optimization 2) queue on a FIFO the pass waits
// for at its end; data-parallel buckets queue on a second FIFO, each starting when its
// layers' reduce-scatters are done (bandwidth sharing between them is not modeled).
// Each tensor-group collective (not prefetched, not the data group's) first waits for
// the group's last member: LayerCollectives::sync_wait_fraction times the compute since
// the previous one, plus the fixed sync_call_s of a call (docs/model.md section 8).
// Under optimizations 1 and 2 the charge of the dI all-reduce and of the async
// reduce-scatter moves when they end, not the pass, and counts in full in sync_wait_s.
//
// Example: one layer, forward 1 s, dI 1 s, dW 1 s, all-reduces 0.5 s each, nothing else:
//   all switches on: 1 + 0.5 (forward AR) + 1 (dI) + max(1, 0.5) = 3.5 s, compute 3 s.
//   synchronous:     1 + 0.5 + 1 + 0.5 + 1                        = 4.0 s.
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/planner/layer_comm.hpp"
#include "axonn/schedule/pass.hpp"

namespace axonn::planner {

// One layer's costs for one micro-batch, seconds (collectives: one occurrence each).
// Identical layers (a GPT's blocks) share one.
struct LayerCosts {
  double forward_s = 0;            // forward matmuls and element-wise work
  double backward_input_s = 0;     // dI matmuls and element-wise work
  double backward_weight_s = 0;    // dW matmuls, and dW added into the gradient buffer
  LayerCollectives comm;           // its collectives (layer_comm.hpp; 0 where a group has size 1)
  // 2d-broadcast: what SUMMA's moves leave exposed in its forward and in its backward
  // (layer_comm.hpp's summa_*_exposed_s of comm and the products), blocking.
  double summa_forward_exposed_s = 0, summa_backward_exposed_s = 0;
};

// What a hand-made layer is, for stage_time (the planner takes it from the model).
struct LayerRole {
  bool recomputed = false;         // run again in the backward under activation checkpointing
  bool cached = false;             // optimization 4: the backward reuses the forward's weight
  bool gather_in_backward = true;  // false for embeddings (their backward needs no weight)
  bool weighted = true;            // has a weight (attention has none)
  bool input_gradient = true;      // computes dI (embeddings do not)
  int64_t unit = 0;                // checkpointed unit (block): recomputed together
};

// One layer with its own costs (tests, explanations).
struct LayerTimes : LayerCosts, LayerRole {};

// One pass on the clock, seconds from its start.
struct PassTime {
  double duration_s = 0;      // until its last instruction (the stage is busy that long)
  double compute_s = 0;       // compute inside it (matmuls, element-wise work)
  double data_done_s = 0;     // LastBackward: when its bucketed data all-reduces end (0: none)
  double unbucketed_data_s = 0;  // LastBackward: data all-reduces left for ReduceGradients
  double sync_wait_s = 0;     // the collectives' waits for their group's last member (in duration_s
                              // where blocking)
};

// Runs the pass program of `layers` (layer i costs `*costs[i]`). `prefetch_done` is
// working memory (grown to `count`).
PassTime simulate_pass(const schedule::PassLayer* layers, const LayerCosts* const* costs, size_t count,
                       const schedule::PassSettings& s, schedule::PassKind kind, std::vector<double>& prefetch_done);

// One stage's whole step without a pipeline (Ginter = 1): its micro-batches one after
// another (forward, backward), the data-parallel tail, then the optimizer.
struct StageTime {
  double batch_s = 0;        // first compute to the end of the optimizer step
  double compute_s = 0;      // matmuls, element-wise work and the optimizer
  double exposed_comm_s = 0; // batch_s - compute_s
  double data_tail_s = 0;    // part of exposed_comm_s spent waiting for the data all-reduce
  double sync_wait_s = 0;    // the collectives' waits for their group's last member (PassTime)
};

struct StageSchedule {
  int64_t microbatches = 1;
  bool activation_checkpointing = true;
  bool data_all_reduce = true;  // false: no data-parallel all-reduce (Gdata = 1)
  double optimizer_s = 0;       // the optimizer step after the pass (counted as compute)
  plan::OverlapSettings overlap;
};

StageTime stage_time(const std::vector<LayerTimes>& layers, const StageSchedule& s);

// The offloaded optimizer's phase (docs/model.md section 11), seconds: the data-parallel
// all-reduce (`allreduce_s` in all, its bandwidth term) and the bucketed update
// (`update_s`: Adam and the host-link copies) in `chunks` equal chunks, each chunk's
// all-reduce also paying `per_chunk_s` (its latency), chunk c's update beside chunk
// c+1's all-reduce when `overlapped`:  a + (n - 1) * max(a, u) + u,
// a = allreduce_s / n + per_chunk_s, u = update_s / n; not overlapped (or one chunk):
// allreduce_s + n * per_chunk_s + update_s.
double offloaded_optimizer_phase_s(double allreduce_s, double update_s, int64_t chunks, bool overlapped,
                                   double per_chunk_s = 0);

// The closed form of the pipeline bubble for equal stages and GPipe or 1F1B: (M +
// Ginter - 1) slots of one micro-batch's time plus its point-to-point time, then the
// data-parallel tail. The planner simulates the schedule instead (pipeline_time.hpp);
// for equal stages without point-to-point time the two agree.
double pipeline_batch_s(double slowest_microbatch_s, double p2p_per_microbatch_s, int64_t microbatches,
                        int64_t ginter, double data_tail_s);

}  // namespace axonn::planner
