// How a rank waits for a message or a collective's next step: it polls (MPI_Test and
// the rings in flight), and between polls that find nothing it gives the core away.
//
// - WaitPolicy::Yield: sched_yield after every empty poll. On a machine whose ranks
//   share the cores the waiting rank stays runnable, and the kernel's fair scheduler
//   still gives it up to a computing rank's share of the cores: calibrate measured a
//   rank waiting for another node's message taking about 1 (docs/validation.md,
//   "Waiting stages lend their cores").
// - WaitPolicy::Sleep: a wait for a message (WaitKind::Message: a pipeline stage's
//   activation or gradient) yields for its first `kSpinBeforeSleep` (a short wait costs
//   no latency), then sleeps between polls, each sleep an eighth of the time waited so
//   far and at most `kLongestSleep`: it ends at most 1/8 of its length or 1 ms late, and
//   the waiting rank leaves the cores to the ranks computing. Messages keep arriving
//   while it sleeps (the kernel buffers TCP; shared memory is copied by the receiver
//   when it polls). A wait in a collective (WaitKind::Collective: MpiCommunicator's
//   waits) still yields: the group's other members wait for this rank's next step, and
//   sleeping there made SUMMA's broadcasts 1.4 to 1.6 times slower on the emulated cluster
//   (docs/performance.md, "How a waiting rank passes the time"); except where the
//   caller says its members arrive far apart (CollectiveWaitsAsMessages).
//
// The policy is one per process (axrun and calibrate's --wait, `auto` by default:
// automatic_wait_policy); waits never change the numbers, only who computes while a rank
// waits.
//
// Example:
//   axonn::runtime::set_wait_policy(axonn::runtime::WaitPolicy::Sleep);
//   axonn::runtime::IdleWait idle;                  // WaitKind::Message
//   while (!work->test()) idle.pause();
#pragma once

#include <chrono>
#include <string>

namespace axonn::runtime {

enum class WaitPolicy { Yield, Sleep };

// Spinning (with yields) before the first sleep, and the longest sleep.
inline constexpr std::chrono::microseconds kSpinBeforeSleep{200};
inline constexpr std::chrono::microseconds kLongestSleep{1000};

void set_wait_policy(WaitPolicy policy);
WaitPolicy wait_policy();

// "yield" or "sleep"; InputError naming `where` otherwise.
WaitPolicy parse_wait_policy(const std::string& text, const std::string& where);
const char* to_string(WaitPolicy policy);

// --wait auto: Sleep where a rank's compute threads outnumber the cores it has to itself
// (machine_cores.hpp: the ranks time-share the cores, and a polling rank takes a computing
// one's), Yield where every thread has a core (a sleep would only delay the wait's end).
WaitPolicy automatic_wait_policy(double cores_per_rank, int threads_per_rank);

// What a wait is for: a point-to-point message no one else waits on this rank for, or a
// collective whose other members need this rank's polls to move on.
enum class WaitKind { Message, Collective };

// Within its scope, this thread's collective waits count as message waits: for a
// collective whose members arrive far apart (a pipeline's stages reduce the loss at the
// step's end, the first stages long before the last: the others compute meanwhile), and
// the wait for a stage's sends to be taken. Scopes nest.
class CollectiveWaitsAsMessages {
 public:
  CollectiveWaitsAsMessages();
  ~CollectiveWaitsAsMessages();
  CollectiveWaitsAsMessages(const CollectiveWaitsAsMessages&) = delete;
  CollectiveWaitsAsMessages& operator=(const CollectiveWaitsAsMessages&) = delete;
};

// WaitKind::Collective, or WaitKind::Message inside a CollectiveWaitsAsMessages scope.
WaitKind collective_wait_kind();

// How long a wait that began `waited` ago sleeps after an empty poll; 0: it yields.
std::chrono::microseconds sleep_between_polls(WaitPolicy policy, WaitKind kind, std::chrono::microseconds waited);

// One wait: call pause() after each poll that found nothing.
class IdleWait {
 public:
  explicit IdleWait(WaitKind kind = WaitKind::Message) : kind_(kind) {}
  void pause();
  void restart() { started_ = false; }  // progress was made: the next pause starts a new wait

 private:
  WaitKind kind_;
  std::chrono::steady_clock::time_point since_{};
  bool started_ = false;
};

}  // namespace axonn::runtime
