// The runtime of one pipeline stage on one rank: the schedule of the stage
// (axonn/schedule/schedule.hpp) and the three seams that execute its passes
// (OperatorComm, GatheredWeights, BucketedReducer), with the recorder that checks each
// pass against the schedule. The executor (Trainer) brackets every pass with
// begin_*/end_*; the model's operators run inside through engine().
//
// Example:
//   StageEngine se(grid, schedule::build_schedule(plan, stage), &tracer);
//   ParallelGpt model(cfg, grid, weights, se.schedule(), se.engine());
//   se.begin_forward(0);  model.forward(...);  se.end_forward();
#pragma once

#include <memory>
#include <string>

#include "axonn/runtime/engine.hpp"
#include "axonn/schedule/schedule.hpp"

namespace axonn::runtime {

class StageEngine {
 public:
  // `keep_history`: the recorder keeps every instruction (tests compare whole steps).
  StageEngine(ProcessGrid& grid, schedule::StageSchedule schedule, Tracer* tracer, bool keep_history = false);
  StageEngine(const StageEngine&) = delete;
  StageEngine& operator=(const StageEngine&) = delete;

  Engine& engine() { return engine_; }
  const schedule::StageSchedule& schedule() const { return schedule_; }
  PassRecorder& recorder() { return recorder_; }
  void set_parameters(std::vector<Parameter>* params) { reducer_.set_parameters(params); }
  void set_gradient_sink(GradientSink* sink) { reducer_.set_sink(sink); }
  void set_weight_store(WeightStore* store) { weights_.set_store(store); }

  void begin_forward(int64_t microbatch);
  void end_forward();
  void begin_backward(int64_t microbatch);  // the step's last backward when microbatch == M - 1
  void end_backward();
  void reduce_gradients();                  // ReduceGradients

 private:
  schedule::StageSchedule schedule_;
  PassRecorder recorder_;
  OperatorComm ops_;
  GatheredWeights weights_;
  BucketedReducer reducer_;
  Engine engine_;
  int64_t microbatch_ = 0;
};

}  // namespace axonn::runtime
