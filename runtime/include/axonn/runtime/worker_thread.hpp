// One background thread running tasks in submission order: the CPU stand-in for a
// second CUDA stream (the offloaded optimizer runs a chunk's buckets on it while the
// main thread drives the next chunk's all-reduce). The offloaded optimizer's tasks call
// no MPI (its main thread keeps those); L2L's parameter server reduces on its worker,
// on a communicator no other thread uses (MPI is initialized MPI_THREAD_MULTIPLE).
//
// Example:
//   WorkerThread w;
//   w.submit([&] { update(chunk); });
//   ... main thread: wait for the next all-reduce ...
//   w.drain();   // every task done; rethrows the first task's exception
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace axonn::runtime {

class WorkerThread {
 public:
  WorkerThread();
  ~WorkerThread();  // drains, then joins (exceptions of tasks not drained are dropped)
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  void submit(std::function<void()> task);
  // Blocks until every submitted task ran; rethrows the first exception a task threw
  // since the last drain (later tasks still ran).
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> tasks_;
  bool running_ = false;  // a task is executing
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace axonn::runtime
