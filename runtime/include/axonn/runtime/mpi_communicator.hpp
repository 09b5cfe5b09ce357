// The MPI backend of Communicator and the MPI environment. Every MPI call goes
// through AXONN_CHECK (axonn/runtime/check.hpp).
//
// Example:
//   axonn::runtime::MpiEnvironment env(argc, argv);       // MPI_Init_thread ... MPI_Finalize
//   auto world = axonn::runtime::MpiCommunicator::world();
//   auto half = world->split(world->rank() % 2, world->rank(), "half");
//
// all_gather(_v) and reduce_scatter(_v) run as rings of point-to-point messages
// (mpi_ring.hpp); the other collectives are MPI's non-blocking ones.
//
// Failures throw axonn::Error "[comm] MPI_Iallreduce failed: <reason>: rank 3 on host n1".
// A process that cannot continue calls abort_job(), which ends every rank
// (MPI_Abort) instead of leaving the others waiting in a collective.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "axonn/runtime/abort_job.hpp"
#include "axonn/runtime/check.hpp"
#include "axonn/runtime/communicator.hpp"
#include "axonn/topology/topology.hpp"

namespace axonn::runtime {

// RAII for MPI_Init_thread / MPI_Finalize. Errors on MPI_COMM_WORLD return codes
// (MPI_ERRORS_RETURN) so that AXONN_CHECK can report them.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  int thread_level() const { return provided_; }

 private:
  int provided_ = 0;
  bool finalize_ = false;
};

// Drives MPI progress from a background thread: Open MPI advances non-blocking
// collectives only inside MPI calls, so without it a collective issued before a long
// computation mostly runs in the wait() after it. The thread calls MPI_Iprobe on a
// private communicator every `interval`, and posts the next step of every ring
// collective whose step has completed (needs MPI_THREAD_MULTIPLE; otherwise it does
// nothing and active() is false, and rings move on only when tested or waited for).
// Stops and joins on destruction.
class MpiProgressThread {
 public:
  explicit MpiProgressThread(std::chrono::microseconds interval);
  ~MpiProgressThread();
  MpiProgressThread(const MpiProgressThread&) = delete;
  MpiProgressThread& operator=(const MpiProgressThread&) = delete;
  bool active() const { return thread_.joinable(); }
  // How many ring collectives this thread posted the last step of (count).
  int64_t rings_completed() const { return rings_completed_.load(std::memory_order_relaxed); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rings_completed_{0};
  std::thread thread_;
};

// The watchdog: an operation still incomplete `timeout` after it was issued makes its
// wait() or test() throw CommError naming it, its communicator and that communicator's
// world ranks (one of which hangs or died); axrun then ends the job (abort_job).
// Process-wide, for every MpiCommunicator; 0 (the default): wait forever.
void set_completion_timeout(std::chrono::milliseconds timeout);

class MpiCommunicator final : public Communicator {
 public:
  // The algorithm of all_gather: a ring of point-to-point messages (mpi_ring.hpp), as
  // all_gather_v, reduce_scatter and reduce_scatter_v, since Open MPI 4.1's non-blocking
  // ones (coll/libnbc) have no ring. calibrate writes it into the topology.
  static constexpr topo::AllGatherAlgorithm kAllGatherAlgorithm = topo::AllGatherAlgorithm::Ring;

  // Wraps `comm`; frees it on destruction when `owned`.
  MpiCommunicator(MPI_Comm comm, bool owned, std::string name);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  static std::unique_ptr<MpiCommunicator> world();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  MPI_Comm handle() const { return comm_; }

  WorkHandle all_reduce(at::Tensor t, ReduceOp op) override;
  WorkHandle all_gather(at::Tensor in, at::Tensor out) override;
  WorkHandle reduce_scatter(at::Tensor in, at::Tensor out) override;
  WorkHandle reduce_scatter_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) override;
  WorkHandle all_gather_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) override;
  WorkHandle broadcast(at::Tensor t, int root) override;
  WorkHandle reduce(at::Tensor t, int root) override;
  WorkHandle send(at::Tensor t, int peer, int tag) override;
  WorkHandle recv(at::Tensor t, int peer, int tag) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
  std::string name_;
  std::shared_ptr<const std::string> described_;  // "data (world ranks 0, 2)", for the watchdog
  // The rings' own communicator (a duplicate of comm_) and the count of rings issued.
  MPI_Comm ring_comm_ = MPI_COMM_NULL;
  std::atomic<uint32_t> ring_rounds_{0};
  int next_ring_tag();
};

}  // namespace axonn::runtime
