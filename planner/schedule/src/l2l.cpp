// The L2L step program; see axonn/schedule/l2l.hpp.
#include "axonn/schedule/l2l.hpp"

#include "axonn/common/error.hpp"

namespace axonn::schedule {

const char* l2l_op_name(L2LOp op) {
  switch (op) {
    case L2LOp::Fetch: return "Fetch";
    case L2LOp::Prefetch: return "Prefetch";
    case L2LOp::Forward: return "Forward";
    case L2LOp::Backward: return "Backward";
    case L2LOp::Release: return "Release";
    case L2LOp::Push: return "Push";
    case L2LOp::WaitUpdates: return "WaitUpdates";
  }
  return "?";
}

std::string L2LInstruction::to_string() const {
  std::string s = l2l_op_name(op);
  if (unit < 0) return s;
  s += "(" + std::to_string(unit);
  if (microbatch >= 0) s += ", " + std::to_string(microbatch);
  return s + ")";
}

std::vector<L2LInstruction> l2l_program(int64_t units, int64_t microbatches, bool prefetch) {
  AXONN_ASSERT(units >= 1 && microbatches >= 1);
  std::vector<L2LInstruction> out;
  auto add = [&](L2LOp op, int64_t unit, int64_t mb = -1) {
    out.push_back({op, static_cast<int32_t>(unit), static_cast<int32_t>(mb)});
  };
  for (int64_t l = 0; l + 1 < units; ++l) {
    add(L2LOp::Fetch, l);
    if (prefetch) add(L2LOp::Prefetch, l + 1);  // after N-2: N-1's backward visit
    for (int64_t mb = 0; mb < microbatches; ++mb) add(L2LOp::Forward, l, mb);
    add(L2LOp::Release, l);
  }
  for (int64_t l = units - 1; l >= 0; --l) {
    add(L2LOp::Fetch, l);
    if (prefetch && l > 0) add(L2LOp::Prefetch, l - 1);
    for (int64_t mb = 0; mb < microbatches; ++mb) add(L2LOp::Backward, l, mb);
    add(L2LOp::Push, l);
  }
  out.push_back({L2LOp::WaitUpdates, -1, -1});
  return out;
}

StageSchedule l2l_unit_schedule(const plan::Plan& p, int64_t unit) {
  AXONN_ASSERT(p.strategy == plan::Strategy::L2L && unit >= 0 && unit < p.model.num_units);
  plan::Plan units = p;
  units.grid.ginter = p.model.num_units;  // only the schedule's count of stages reads it
  units.pipeline.stage_units.assign(static_cast<size_t>(p.model.num_units), 1);
  units.pipeline.schedule = plan::PipelineSchedule::GPipe;
  units.activation_checkpointing = false;
  units.optimizer.offload = true;
  units.optimizer.zero = 0;
  return build_schedule(units, unit);
}

}  // namespace axonn::schedule
