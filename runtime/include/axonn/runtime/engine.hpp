// What a model's operators use (tensor_parallel.hpp): the process grid, the overlap
// switches, and the three seams: operator collectives, where weights come from, and
// where weight gradients go. Handed to the model by whoever runs it (a StageEngine);
// the model owns none of it.
//
// Example:
//   at::Tensor w = engine.weights.weight(layer);        // Fetch (the schedule says how)
//   engine.ops.all_reduce(engine.grid.x(), out, plan::CollectiveKind::ArX);  // a partial output
//   engine.grads.reduce_scatter(layer, dw);               // the dW block
#pragma once

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/gradient_reducer.hpp"
#include "axonn/runtime/operator_comm.hpp"
#include "axonn/runtime/pass_recorder.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/weight_source.hpp"

namespace axonn::runtime {

struct Engine {
  ProcessGrid& grid;
  const plan::OverlapSettings& overlap;
  OperatorComm& ops;
  WeightSource& weights;
  GradientReducer& grads;
  PassRecorder& recorder;  // operators record their compute and collectives (pass_recorder.hpp)

  Tracer* tracer() { return ops.tracer(); }
  // A layer with a weight (its index in the stage's schedule) and this rank's shard.
  void add_layer(int64_t layer, at::Tensor* shard) {
    weights.add_layer(layer, shard);
    grads.add_layer(layer, shard);
  }
  void poll() {
    weights.poll();
    grads.poll();
  }
};

}  // namespace axonn::runtime
