// How a rank waits between polls; see axonn/runtime/idle_wait.hpp.
#include "axonn/runtime/idle_wait.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

std::atomic<WaitPolicy>& policy_slot() {
  static std::atomic<WaitPolicy> policy{WaitPolicy::Yield};
  return policy;
}

thread_local int collective_waits_as_messages = 0;  // open CollectiveWaitsAsMessages scopes

}  // namespace

void set_wait_policy(WaitPolicy policy) { policy_slot().store(policy, std::memory_order_relaxed); }

WaitPolicy wait_policy() { return policy_slot().load(std::memory_order_relaxed); }

WaitPolicy parse_wait_policy(const std::string& text, const std::string& where) {
  if (text == "yield") return WaitPolicy::Yield;
  if (text == "sleep") return WaitPolicy::Sleep;
  throw InputError("runtime", "wait policy \"" + text + "\"", where, "yield or sleep");
}

const char* to_string(WaitPolicy policy) { return policy == WaitPolicy::Sleep ? "sleep" : "yield"; }

WaitPolicy automatic_wait_policy(double cores_per_rank, int threads_per_rank) {
  return cores_per_rank < threads_per_rank ? WaitPolicy::Sleep : WaitPolicy::Yield;
}

CollectiveWaitsAsMessages::CollectiveWaitsAsMessages() { ++collective_waits_as_messages; }
CollectiveWaitsAsMessages::~CollectiveWaitsAsMessages() { --collective_waits_as_messages; }

WaitKind collective_wait_kind() {
  return collective_waits_as_messages > 0 ? WaitKind::Message : WaitKind::Collective;
}

std::chrono::microseconds sleep_between_polls(WaitPolicy policy, WaitKind kind, std::chrono::microseconds waited) {
  if (policy == WaitPolicy::Yield || kind == WaitKind::Collective || waited < kSpinBeforeSleep)
    return std::chrono::microseconds(0);
  return std::min(kLongestSleep, waited / 8);
}

void IdleWait::pause() {
  using clock = std::chrono::steady_clock;
  const clock::time_point now = clock::now();
  if (!started_) since_ = now, started_ = true;
  const auto pause = sleep_between_polls(wait_policy(), kind_,
                                         std::chrono::duration_cast<std::chrono::microseconds>(now - since_));
  if (pause.count() > 0) std::this_thread::sleep_for(pause);
  else std::this_thread::yield();
}

}  // namespace axonn::runtime
