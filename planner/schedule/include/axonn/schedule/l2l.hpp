// The step of L2L (seed 001, seed-spec B2) as data: the layer-major program one rank
// runs, which the planner times (planner/l2l_time.hpp) and the runtime executes
// (runtime/l2l_trainer.hpp). The unit is a pipeline unit of the model (a GPT block; the
// embedding joins the first, the final norm, LM head and loss the last), M the
// micro-batches of the step on this rank (the paper's u).
//
//   forward visits   units 0 .. N-2: Fetch(l) [Prefetch(l+1)] Forward(l, 0..M-1)
//                    Release(l); each Forward stashes the unit's output only
//   backward visits  units N-1 .. 0: Fetch(l) [Prefetch(l-1)] Backward(l, 0..M-1)
//                    Push(l); a Backward recomputes the unit from its stashed input
//                    and back-propagates (the last unit: forward, loss and backward),
//                    Push hands the unit's gradient to the parameter server (which
//                    reduces it over data and updates the unit, eagerly) and frees
//                    the unit's weights and gradient on the device
//   WaitUpdates      every unit's update done: the next step's fetches read them
//
// The last unit has no forward visit: its backward visit runs its forward first (as
// one pipeline stage runs F then B), so a step fetches 2N - 1 units, one fewer than
// the paper's equation 1 counts.
//
// Example:
//   l2l_program(/*units=*/2, /*microbatches=*/2, /*prefetch=*/true);
//   // Fetch(0) Prefetch(1) Forward(0,0) Forward(0,1) Release(0)
//   // Fetch(1) Prefetch(0) Backward(1,0) Backward(1,1) Push(1)
//   // Fetch(0) Backward(0,0) Backward(0,1) Push(0) WaitUpdates
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::schedule {

enum class L2LOp : uint8_t {
  Fetch,        // the unit's weights on the device (a copy from the host tier, or the prefetched one)
  Prefetch,     // start copying the unit's weights to the device
  Forward,      // the unit on one micro-batch, without autograd; its output stashed
  Backward,     // recompute from the stashed input, back-propagate, accumulate dW
  Release,      // free the unit's weights on the device
  Push,         // the unit's gradient to the parameter server; weights and gradient freed
  WaitUpdates,  // every update of the step applied
};
const char* l2l_op_name(L2LOp op);

struct L2LInstruction {
  L2LOp op = L2LOp::Fetch;
  int32_t unit = -1;        // -1 for WaitUpdates
  int32_t microbatch = -1;  // Forward and Backward only
  bool operator==(const L2LInstruction& o) const {
    return op == o.op && unit == o.unit && microbatch == o.microbatch;
  }
  std::string to_string() const;  // "Backward(3, 1)"
};

// The program of one rank for `units` >= 1 units and `microbatches` >= 1.
std::vector<L2LInstruction> l2l_program(int64_t units, int64_t microbatches, bool prefetch);

// The schedule of one unit's passes under an L2L plan: the unit as a pipeline stage of
// its own (stage `unit` of N), without activation checkpointing (the L2L backward
// recomputes the whole unit from its stash) and without data-parallel buckets (the
// parameter server reduces each unit's gradient: the optimizer is offloaded).
StageSchedule l2l_unit_schedule(const plan::Plan& p, int64_t unit);

}  // namespace axonn::schedule
