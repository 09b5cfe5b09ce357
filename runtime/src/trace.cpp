// Timers and traces; see axonn/runtime/trace.hpp.
#include "axonn/runtime/trace.hpp"

#include <algorithm>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"

namespace axonn::runtime {

nlohmann::json OverlapBreakdown::to_json() const {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [k, s] : by_kind) kinds[k] = {{"busy_s", s.busy_s}, {"exposed_s", s.exposed_s}, {"count", s.count}};
  return {{"batch_s", batch_s},
          {"comm_s", comm_s},
          {"exposed_comm_s", exposed_comm_s},
          {"overlapped_s", overlapped_s},
          {"non_overlapped_compute_s", non_overlapped_compute_s},
          {"by_kind", kinds}};
}

double Tracer::now() const { return now_s(); }

void Tracer::compute(const std::string& name, double t0, double t1) {
  if (keep_events_) events_.push_back({name, Track::Compute, t0, t1});
}

void Tracer::comm(plan::CollectiveKind kind, double t0, double t1, double exposed_s) {
  const std::string name = plan::collective_kind_name(kind);
  step_comm_.emplace_back(t0, t1);
  auto& k = step_kinds_[name];
  k.busy_s += t1 - t0;
  k.exposed_s += exposed_s;
  k.count += 1;
  if (keep_events_) events_.push_back({name, Track::Comm, t0, t1});
}

void Tracer::begin_step() {
  step_start_ = now();
  step_comm_.clear();
  step_kinds_.clear();
}

OverlapBreakdown Tracer::end_step() {
  OverlapBreakdown b;
  b.batch_s = now() - step_start_;
  b.by_kind = step_kinds_;
  // union of the communication spans
  auto spans = step_comm_;
  std::sort(spans.begin(), spans.end());
  double cur0 = 0, cur1 = -1;
  for (const auto& [t0, t1] : spans) {
    if (t0 > cur1) {
      if (cur1 > cur0) b.comm_s += cur1 - cur0;
      cur0 = t0;
      cur1 = t1;
    } else {
      cur1 = std::max(cur1, t1);
    }
  }
  if (cur1 > cur0) b.comm_s += cur1 - cur0;
  for (const auto& [k, s] : step_kinds_) b.exposed_comm_s += s.exposed_s;
  b.overlapped_s = std::max(0.0, b.comm_s - b.exposed_comm_s);
  b.non_overlapped_compute_s = std::max(0.0, b.batch_s - b.comm_s);
  if (keep_events_)
    events_.push_back({"step " + std::to_string(++steps_), Track::Step, step_start_, step_start_ + b.batch_s});
  return b;
}

void Tracer::write_chrome_trace(const std::string& path, int rank) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "compute"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 2}, {"args", {{"name", "communication"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 3}, {"args", {{"name", "steps"}}}});
  // The clock starts at the earliest span (spans are kept as they end, a step after its own).
  const auto first =
      std::min_element(events_.begin(), events_.end(), [](const Span& a, const Span& b) { return a.t0 < b.t0; });
  const double origin = first == events_.end() ? 0.0 : first->t0;
  for (const auto& e : events_) {
    const char* cat = e.track == Track::Comm ? "comm" : e.track == Track::Step ? "step" : "compute";
    const int tid = e.track == Track::Comm ? 2 : e.track == Track::Step ? 3 : 1;
    events.push_back({{"name", e.name}, {"cat", cat}, {"ph", "X"}, {"pid", rank}, {"tid", tid},
                      {"ts", (e.t0 - origin) * 1e6}, {"dur", (e.t1 - e.t0) * 1e6}});
  }
  write_file_atomically(path, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n", "trace");
}

}  // namespace axonn::runtime
