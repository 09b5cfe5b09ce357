// CPU time by LibTorch operator over a stretch of training: LibTorch's own profiler
// (the legacy, CPU-only one that the Debian LibTorch 1.13 carries) records every
// operator the profiling thread runs, autograd's backward functions included, and
// this sums them by name. An operator's total time runs from its start to its end;
// its self time leaves out the operators it called (aten::linear's self time is its
// own dispatch, not the aten::mm inside it), so the self times of a stretch add up to
// the time the thread spent in operators. axrun --profile-ops writes them per rank.
//
// Only the thread that calls start() (and the at::launch tasks it starts) is
// recorded: the runtime's communication and optimizer worker threads are not.
//
// Example:
//   OpProfile p;
//   p.start();  trainer.step(batch);  p.stop();
//   for (const OpTime& o : p.totals()) fmt::print("{} {} {:.6f}\n", o.name, o.calls, o.self_s);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace axonn::runtime {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double self_s = 0;   // seconds inside the operator, less the operators it called
  double total_s = 0;  // seconds from its start to its end
  // self_s split by the operator that called it ("" at the top level), e.g. aten::copy_'s
  // under aten::_to_copy (a cast) apart from its direct calls.
  std::map<std::string, double> self_s_by_caller;
};

// One range boundary a profiler recorded on one thread, for add_op_times: a range's
// start (Push) or end (Pop), in seconds on any one clock; depth follows from the order.
struct OpRange {
  enum class Kind { Push, Pop };
  Kind kind = Kind::Push;
  std::string name;  // Push only
  uint64_t handle = 0;  // matches a Pop to its Push
  double t_s = 0;
};

// Sums one thread's ranges, in the order recorded, into `into` by name. A Pop closes
// the open Push with its handle (ranges left open inside it are dropped, as are Pops
// with no open Push and Pushes never closed).
void add_op_times(const std::vector<OpRange>& ranges, std::map<std::string, OpTime>& into);

class OpProfile {
 public:
  OpProfile() = default;
  ~OpProfile();  // stops a profile still running (its events are dropped)
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  void start();  // InternalError if already started
  void stop();   // adds what was recorded since start() to the totals
  bool running() const { return running_; }

  // Every operator recorded so far, the most self time first.
  std::vector<OpTime> totals() const;
  // {"steps": steps, "ops": [{"name", "calls", "self_s", "total_s", "self_s_by_caller"}, ...]}
  // (the totals).
  nlohmann::json to_json(int64_t steps) const;

 private:
  bool running_ = false;
  std::map<std::string, OpTime> by_name_;
};

}  // namespace axonn::runtime
