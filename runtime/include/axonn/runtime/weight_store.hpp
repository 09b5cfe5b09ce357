// Where a layer's weight shard comes from when no rank keeps it whole: a hook of the
// weight-source seam (weight_source.hpp), as GradientSink is of the reducer's. Without
// a store the source reads the shard itself (the parameter); ZeRO-3's optimizer
// (optimizer.hpp) is a store: each rank of the data group keeps the elements of its
// block only, and gather() rebuilds the layer's shard from the owners before the Z
// all-gather.
//
// gather() blocks on a collective over the data group: the weight source calls it only
// at points of the pass program (a Fetch or a Prefetch), which every rank of the group
// reaches in the same order when the replicas run the same step program (not under the
// message-driven pipeline, whose passes follow message arrival: ZeRO-3 refuses it).
// ZeRO-3 gathers on a communicator of its own (the data group's members): the gradient
// sink issues its reductions as the Z reduce-scatters complete, at moments that differ
// between ranks, and the collectives of one communicator must be issued in one order
// by every member (a first version shared it, and 4 ranks hung on a truncated message).
//
// Example:
//   weights.set_store(optimizer->weight_store());   // null: the parameters are whole
//   at::Tensor shard = store->gather(w_shard);      // as many elements as the shard has
#pragma once

#include <ATen/ATen.h>

namespace axonn::runtime {

class WeightStore {
 public:
  virtual ~WeightStore() = default;
  // `param`: a layer's weight shard (a parameter of the stage, possibly holding no
  // elements here); returns its elements, flat, gathered from their owners.
  virtual at::Tensor gather(const at::Tensor& param) = 0;
};

}  // namespace axonn::runtime
