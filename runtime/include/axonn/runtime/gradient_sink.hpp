// Where a layer's weight gradient goes once it is reduced over Z: a hook of the
// gradient-reducer seam (gradient_reducer.hpp). Without a sink the reducer adds it into
// the shard's .grad; ZeRO-2's optimizer (optimizer.hpp) is a sink that reduces it over
// the data group straight into the block of the rank that owns each element, so no rank
// keeps the whole gradient.
//
// A sink's collectives may span ranks of other model replicas, whose ranks poll at
// other moments: so accumulate() and poll() never block, and the reducer calls
// settle() only at points of the pass program (the same on every rank), which keeps
// the waits free of deadlock whatever the polling did.
//
// Example:
//   reducer.set_sink(optimizer->gradient_sink());   // null: plain accumulation
//   ... backward: sink->accumulate(w_shard, dw)  per layer (by the reducer) ...
//   sink->settle(2);                                // at most two in flight
//   sink->settle(0);                                // the pass's reductions completed
#pragma once

#include <ATen/ATen.h>

namespace axonn::runtime {

class GradientSink {
 public:
  virtual ~GradientSink() = default;
  // `param`: a layer's weight shard (a parameter of the stage); `grad`: its gradient from
  // one backward pass, as many elements (any shape). The sink may reduce it
  // asynchronously; it keeps `grad` alive until then.
  virtual void accumulate(const at::Tensor& param, const at::Tensor& grad) = 0;
  // Completes whatever reductions have finished, in issue order, without blocking.
  virtual void poll() = 0;
  // Blocks until at most `in_flight` accumulate()s are outstanding (0: all completed).
  virtual void settle(size_t in_flight) = 0;
};

}  // namespace axonn::runtime
