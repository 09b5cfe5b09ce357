#include "axonn/runtime/op_profile.hpp"

#include <algorithm>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

namespace prof = torch::autograd::profiler;

void add_op_times(const std::vector<OpRange>& ranges, std::map<std::string, OpTime>& into) {
  struct Open {
    const OpRange* push;
    double children_s = 0;
  };
  std::vector<Open> open;
  for (const OpRange& r : ranges) {
    if (r.kind == OpRange::Kind::Push) {
      open.push_back({&r});
      continue;
    }
    auto it = std::find_if(open.rbegin(), open.rend(), [&](const Open& o) { return o.push->handle == r.handle; });
    if (it == open.rend()) continue;  // its Push was before start()
    open.erase(it.base(), open.end());  // ranges left open inside it
    const Open closed = open.back();
    open.pop_back();
    const double total = r.t_s - closed.push->t_s, self = total - closed.children_s;
    OpTime& o = into[closed.push->name];
    o.name = closed.push->name;
    ++o.calls;
    o.total_s += total;
    o.self_s += self;
    o.self_s_by_caller[open.empty() ? std::string() : open.back().push->name] += self;
    if (!open.empty()) open.back().children_s += total;
  }
}

OpProfile::~OpProfile() {
  if (running_) prof::disableProfilerLegacy();
}

void OpProfile::start() {
  if (running_)
    throw InternalError("op-profile", "started twice", "OpProfile::start", "stop() before the next start()");
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  running_ = true;
}

void OpProfile::stop() {
  if (!running_) return;
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  running_ = false;
  for (const auto& events : lists) {
    std::vector<OpRange> ranges;
    ranges.reserve(events.size());
    for (const prof::LegacyEvent& e : events) {
      if (e.kind() == prof::EventKind::PushRange)
        ranges.push_back({OpRange::Kind::Push, e.name(), e.handle(), e.cpuUs() * 1e-6});
      else if (e.kind() == prof::EventKind::PopRange)
        ranges.push_back({OpRange::Kind::Pop, {}, e.handle(), e.cpuUs() * 1e-6});
    }
    add_op_times(ranges, by_name_);
  }
}

std::vector<OpTime> OpProfile::totals() const {
  std::vector<OpTime> out;
  out.reserve(by_name_.size());
  for (const auto& [name, o] : by_name_) out.push_back(o);
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.self_s > b.self_s; });
  return out;
}

nlohmann::json OpProfile::to_json(int64_t steps) const {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpTime& o : totals())
    ops.push_back({{"name", o.name}, {"calls", o.calls}, {"self_s", o.self_s}, {"total_s", o.total_s},
                   {"self_s_by_caller", o.self_s_by_caller}});
  return {{"steps", steps}, {"ops", ops}};
}

}  // namespace axonn::runtime
