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

void IdleWait::pause() {
  using clock = std::chrono::steady_clock;
  if (wait_policy() == WaitPolicy::Yield) {
    std::this_thread::yield();
    return;
  }
  const clock::time_point now = clock::now();
  if (!started_) since_ = now, started_ = true;
  const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - since_);
  if (waited < kSpinBeforeSleep) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::min(kLongestSleep, waited / 8));
}

}  // namespace axonn::runtime
