// Predicted batch time of a pipeline (docs/model.md section 10): every stage's step
// program (axonn/schedule/step.hpp) run on its own clock, with the pass times of each
// stage (batch_time.hpp) and the point-to-point time of a message between neighbours.
//
//  - gpipe, 1f1b: each stage runs its fixed program in order; a receive waits for the
//    message; a send occupies the stage's outgoing link to that neighbour for that
//    boundary's message time and the message arrives when it is through (the sender
//    goes on).
//  - message-driven: an event simulation of MessageDrivenStage, the rule the runtime
//    runs: messages are handled in order of arrival, each stage one at a time.
// A stage's step ends after its last backward, its data-parallel tail and its
// optimizer step; the batch time is the latest stage's end. The stages whose data
// rings cross one node's link share it during their tails (StagePasses::tail_link_s).
//
// Example (2 stages, 2 micro-batches, forward 1 s, backward 2 s, no p2p time, gpipe):
//   F0 F1 on stage 0 at 0-2; stage 1: F0 1-2, F1 2-3, B0 3-5, B1 5-7; stage 0: B0 5-7,
//   B1 7-9: 9 s = (M + G - 1) * (1 + 2).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/schedule/step.hpp"

namespace axonn::planner {

// One stage's passes, seconds.
struct StagePasses {
  double forward_s = 0, backward_s = 0, last_backward_s = 0;          // busy time of each pass
  double forward_compute_s = 0, backward_compute_s = 0, last_backward_compute_s = 0;
  double tail_s = 0;       // after the last backward: waiting for the data-parallel reductions
  // Of tail_s: the data group's transfers, timed with every ring of eq. 10 on the node's
  // link at once. Where tail_link_stages > 1, the link's rings belong to that many
  // consecutive stages (stages s with the same s / tail_link_stages), which reach their
  // tails at different times: the simulation shares the link among the tails that
  // overlap (shared_link_ends), each taking tail_link_s / tail_link_stages alone.
  double tail_link_s = 0;
  int64_t tail_link_stages = 1;
  double optimizer_s = 0;
  double sync_wait_s = 0;  // per step: the collectives' waits for their group's last member
};

struct PipelineTime {
  double batch_s = 0;
  double compute_s = 0;       // compute of the stage that ends last
  double bubble_fraction = 0; // that stage's idle share of the batch time before its tail
};

// One executed instruction of a stage, with its simulated times.
struct SimulatedInstruction {
  schedule::StepInstruction instruction;
  double start_s = 0, end_s = 0;
};

// The working memory of simulate_pipeline, kept between calls so that the planner's
// inner loop does not allocate. One per thread.
class PipelineScratch {
 public:
  PipelineScratch();
  ~PipelineScratch();
  PipelineScratch(PipelineScratch&&) noexcept;
  PipelineScratch& operator=(PipelineScratch&&) noexcept;
  // Stage s's data-parallel tail in the last simulation, seconds (the link shared).
  double tail_s(int64_t stage) const;
  // Stage s in the last simulation: its time waiting for messages, and when its tail
  // began (its last backward's end), seconds.
  double idle_s(int64_t stage) const;
  double tail_start_s(int64_t stage) const;
  double end_s(int64_t stage) const;  // its step's end: after its tail and its optimizer
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// `link_s[b]`: one activation or gradient message across boundary b, between stages b
// and b + 1 (stages.size() - 1 of them; a boundary inside a node is faster than one
// between nodes). `trace`, if given, receives each stage's executed instructions in
// order. `scratch`: reused working memory (none: a fresh one for this call).
PipelineTime simulate_pipeline(const std::vector<StagePasses>& stages, const std::vector<double>& link_s,
                               plan::PipelineSchedule schedule, int64_t microbatches, int64_t limit,
                               std::vector<std::vector<SimulatedInstruction>>* trace = nullptr,
                               PipelineScratch* scratch = nullptr);
// The same with `p2p_s` on every boundary.
PipelineTime simulate_pipeline(const std::vector<StagePasses>& stages, double p2p_s, plan::PipelineSchedule schedule,
                               int64_t microbatches, int64_t limit,
                               std::vector<std::vector<SimulatedInstruction>>* trace = nullptr,
                               PipelineScratch* scratch = nullptr);

// Waiting stages lend their cores (docs/model.md section 10): on ranks that share a
// machine's cores (cores_per_rank < 1, each stage's passes timed with every rank
// computing), a stage that waits takes only `boundary_share` of a computing rank's
// cores (per boundary, by where its messages come from; a stage's share is the mean of
// its boundaries'). Over the passes' span (the latest stage's last backward), a stage
// waits for messages, and after its step's end (its data tail and optimizer, which
// lend nothing) for the others; the stages, equal in ranks and spread evenly over the
// machines, free on average f = the mean over stages of (waiting / span) x (1 - share),
// so the others compute 1 / (1 - f) times faster, at most 1 / cores_per_rank (a whole
// core each). f is taken from a simulation with the sped-up passes, to a fixed point.
// Returns the speedup (1: none); `lent` receives the stages with their compute divided
// by it (their other work unchanged).
//
// Example: GPipe, 2 stages, 2 micro-batches, forward 1 and backward 2 (all compute),
// no tails, shares 0: the span is 9; stage 0 waits 3 (2 to 5), stage 1 waits 1 and then
// 2 after its last backward, so f = 1/3 and the speedup 1.5. The sped-up span, 6, is
// the 12 units of the passes' work on the two stages' cores: the bubble costs nothing.
double lent_core_speedup(const std::vector<StagePasses>& stages, const std::vector<double>& link_s,
                         const std::vector<double>& boundary_share, double cores_per_rank,
                         plan::PipelineSchedule schedule, int64_t microbatches, int64_t limit,
                         std::vector<StagePasses>& lent, PipelineScratch& scratch);

}  // namespace axonn::planner
