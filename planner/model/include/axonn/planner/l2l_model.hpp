// L2L's cost (docs/model.md section 12): the step program of the schedule IR
// (axonn/schedule/l2l.hpp) on three clocks, and the device and host memory of its
// visits. Pure functions; the runtime executes the same program.
//
//   compute   Forward(l): C_l; Backward(l): C_l (the recompute) + B_l (dI, dW)
//   link in   Fetch/Prefetch(l): X_l = weight bytes / host link; one copy at a time; a
//             Fetch waits for its copy (issued at the Fetch without prefetch)
//   link out  Push(l): the gradient's bytes / host link, after the unit's last Backward
//   server    after the push: the gradient all-reduced over data (ring) and Adam on the
//             host; units one after another; with clipping every update waits for the
//             last reduction (the global norm). WaitUpdates ends the step when the
//             server is done.
// Without prefetch and with a free server this is the paper's equation 4,
// N(uC + X) + N(3uC + X), with one forward visit fewer (the last unit's forward runs in
// its backward visit), and with B_l measured instead of 2C.
//
// Device memory, the largest over the backward visits (they hold the most):
//   weights and gradients of unit l, and the prefetched unit's weights, compute bytes
//   one micro-batch's activations of the unit without checkpointing (memory_model.hpp)
//   M + 1 gradients of the unit's output (the backward's, and the one being made)
//   the device stash: units 0 .. l-1's outputs for every micro-batch
// Host memory: 16 bytes per parameter (fp32 master, two moments, gradient), and the
// host stash: the N - 1 units' outputs of every micro-batch.
//
// Example: evaluate_l2l(gpt_bench, emulated, {gpus 2, batch 16}, {4, {StashTier::Host, true}})
//   -> grid 1,1,1,2,1, 4 micro-batches of 2 sequences, batch_s, device and host bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/model/model_description.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/schedule/l2l.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::planner {

// One unit's costs, seconds for one micro-batch (compute) or one copy.
struct L2LUnitCost {
  double forward_s = 0;   // C
  double backward_s = 0;  // dI and dW, without the recompute
  double fetch_s = 0;     // X: weights host -> device
  double push_s = 0;      // gradient device -> host
  double reduce_s = 0;    // the gradient all-reduced over data (on the host)
  double update_s = 0;    // Adam on the host
};

struct L2LTime {
  double batch_s = 0;
  double compute_s = 0;        // forward, recompute and backward of every visit
  double fetch_wait_s = 0;     // compute idle waiting for weights
  double server_tail_s = 0;    // after the last Backward, until the server is done
};

// The program on the clocks above; `clipping`: updates wait for the last push.
L2LTime l2l_step_time(const std::vector<schedule::L2LInstruction>& program, const std::vector<L2LUnitCost>& units,
                      bool clipping);

// The paper's equation 6 with its N restored (seed-spec B3), relative to u = 1: samples
// per second at u micro-batches per visit over those at one, for forward compute C and
// transfer X per unit and micro-batch of fixed size (backward = 2C, weights sent twice,
// nothing overlapped): u (4C + 2X) / (4uC + 2X). X = C gives 1.2 at u = 2.
double l2l_equation6_ratio(int64_t u, double forward_s, double transfer_s);

// One L2L candidate: the plan's settings (stash tier, prefetch) and what the plan
// does not carry.
struct L2LCandidate {
  int64_t microbatches = 1;  // u, per replica
  plan::L2LSettings settings;
  bool clipping = true;      // the updates wait for the last push
};

struct L2LEvaluation {
  Evaluation eval;  // grid 1,1,1,gpus,1; batch_s, compute_s, memory (device), feasible
  L2LTime time;
  std::vector<L2LUnitCost> units;
};

// L2L on o.gpus data-parallel replicas (o.batch_seqs, o.precision, o.memory_limit);
// rank_candidates ranks these beside the 4D grids, and make_plan writes their plan.
// Rejected (feasible false, with the reason) when u does not divide the replica's
// sequences or the device memory is over the topology's.
L2LEvaluation evaluate_l2l(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
                           const L2LCandidate& s);

}  // namespace axonn::planner
