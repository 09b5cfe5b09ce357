// Timers and traces of one rank: spans of compute and of communication, the time the
// rank sat blocked waiting for a collective, and a Chrome trace-event file (open it
// in Perfetto or chrome://tracing) with compute, communication and the steps (from
// begin_step to end_step, "step N", category "step") on separate tracks.
//
// A communication span runs from the issue of a collective to the moment the rank saw
// it complete (a test() that succeeded, or the return of wait()); its "exposed" part
// is the time spent blocked in wait(). Hidden = span - exposed.
//
// Example:
//   Tracer t(/*keep_events=*/true);
//   double t0 = t.now();  ...;  t.compute("fc1 forward", t0, t.now());
//   t.write_chrome_trace("trace/rank0.json", 0);
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/plan/collective_kind.hpp"

namespace axonn::runtime {

struct CommStats {
  double busy_s = 0;     // sum of span durations (issue -> completion seen)
  double exposed_s = 0;  // blocked in wait()
  int64_t count = 0;
};

// The paper's breakdown (Fig. 3 / Fig. 10) of one step.
struct OverlapBreakdown {
  double batch_s = 0;
  double comm_s = 0;                  // union of communication spans
  double exposed_comm_s = 0;          // non-overlapped communication (blocked in wait)
  double overlapped_s = 0;            // communication hidden behind compute
  double non_overlapped_compute_s = 0;
  std::map<std::string, CommStats> by_kind;  // by plan::collective_kind_name
  nlohmann::json to_json() const;
};

class Tracer {
 public:
  explicit Tracer(bool keep_events = false) : keep_events_(keep_events) {}
  double now() const;  // seconds, steady clock

  void compute(const std::string& name, double t0, double t1);
  void comm(plan::CollectiveKind kind, double t0, double t1, double exposed_s);

  void begin_step();
  OverlapBreakdown end_step();  // breakdown of the step since begin_step()

  bool keeps_events() const { return keep_events_; }
  // Writes every span kept so far (Chrome trace-event JSON, microseconds), atomically.
  void write_chrome_trace(const std::string& path, int rank) const;

 private:
  enum class Track { Compute, Comm, Step };
  struct Span {
    std::string name;
    Track track;
    double t0, t1;
  };
  bool keep_events_;
  double step_start_ = 0;
  int64_t steps_ = 0;  // steps ended
  std::vector<std::pair<double, double>> step_comm_;  // spans of this step
  std::map<std::string, CommStats> step_kinds_;
  std::vector<Span> events_;
};

}  // namespace axonn::runtime
