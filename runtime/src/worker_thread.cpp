// One background thread; see axonn/runtime/worker_thread.hpp.
#include "axonn/runtime/worker_thread.hpp"

namespace axonn::runtime {

WorkerThread::WorkerThread() : thread_([this] { loop(); }) {}

WorkerThread::~WorkerThread() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return tasks_.empty() && !running_; });
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void WorkerThread::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void WorkerThread::drain() {
  std::exception_ptr e;
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return tasks_.empty() && !running_; });
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

void WorkerThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      std::lock_guard<std::mutex> guard(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    running_ = false;
    if (tasks_.empty()) idle_.notify_all();
  }
}

}  // namespace axonn::runtime
