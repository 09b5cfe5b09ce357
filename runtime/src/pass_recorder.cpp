// Recording and checking passes; see axonn/runtime/pass_recorder.hpp.
#include "axonn/runtime/pass_recorder.hpp"

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using schedule::LayerInstruction;
using schedule::LayerOp;

void PassRecorder::begin(const std::vector<LayerInstruction>* program, const std::vector<schedule::PassLayer>* layers) {
  program_ = program;
  layers_ = layers;
  record_.clear();
}

void PassRecorder::record(const LayerInstruction& i) {
  record_.push_back(i);
  if (keep_history_) history_.push_back(i);
}

std::vector<LayerInstruction> PassRecorder::comparable(const std::vector<LayerInstruction>& program,
                                                       const std::vector<schedule::PassLayer>& layers, bool buckets) {
  std::vector<LayerInstruction> out;
  for (const auto& i : program) {
    if ((i.op == LayerOp::BucketAllReduce) != buckets) continue;
    if (i.layer >= 0 && !layers[static_cast<size_t>(i.layer)].weighted) continue;
    out.push_back(i);
  }
  return out;
}

void PassRecorder::check(const std::string& what) {
  if (!program_) return;
  for (bool buckets : {false, true}) {
    const auto want = comparable(*program_, *layers_, buckets);
    const auto got = comparable(record_, *layers_, buckets);
    for (size_t k = 0; k < std::max(want.size(), got.size()); ++k) {
      if (k < want.size() && k < got.size() && want[k] == got[k]) continue;
      throw InternalError("runtime",
                          what + ": instruction " + std::to_string(k) + (buckets ? " of the buckets" : "") + " was " +
                              (k < got.size() ? got[k].to_string() : "missing"),
                          "the schedule's pass program",
                          k < want.size() ? want[k].to_string() : "nothing more");
    }
  }
  program_ = nullptr;
}

}  // namespace axonn::runtime
