// What one rank actually did in a pass, instruction by instruction, checked against
// the schedule IR's pass program (axonn/schedule/pass.hpp). The weight source, the
// gradient reducer and the operators record into it; at the end of each pass the
// runtime compares, so a run that strays from the schedule stops with the first
// difference instead of training on a different order than the planner simulated.
//
// Compared: every instruction of a weighted layer, in order, except the data-parallel
// buckets, which start when their reduce-scatters complete (timing), and are compared
// as their own sequence. Unweighted layers (attention) run inside LibTorch's autograd
// without a hook, so their compute is not recorded.
//
// Example:
//   recorder.begin(&program, layers);  ... recorder.record({LayerOp::Forward, 3});  ...
//   recorder.check("forward of micro-batch 2");  // throws InternalError at the first difference
#pragma once

#include <string>
#include <vector>

#include "axonn/schedule/pass.hpp"

namespace axonn::runtime {

class PassRecorder {
 public:
  // `program` and `layers` must outlive the pass. Keeps every pass's record when
  // `keep_history` (tests compare whole steps).
  explicit PassRecorder(bool keep_history = false) : keep_history_(keep_history) {}

  void begin(const std::vector<schedule::LayerInstruction>* program, const std::vector<schedule::PassLayer>* layers);
  void record(const schedule::LayerInstruction& i);
  // Throws InternalError naming `what` and the first difference.
  void check(const std::string& what);

  // Every recorded instruction since construction (with keep_history).
  const std::vector<schedule::LayerInstruction>& history() const { return history_; }

  // The instructions of `program` this recorder compares (the expected record).
  static std::vector<schedule::LayerInstruction> comparable(const std::vector<schedule::LayerInstruction>& program,
                                                            const std::vector<schedule::PassLayer>& layers,
                                                            bool buckets);

 private:
  bool keep_history_;
  const std::vector<schedule::LayerInstruction>* program_ = nullptr;
  const std::vector<schedule::PassLayer>* layers_ = nullptr;
  std::vector<schedule::LayerInstruction> record_, history_;
};

}  // namespace axonn::runtime
