#include "train/ane/ordered_worker.h"

#include "runtime/cpu/kernels.h"

namespace orion::train {

OrderedWorker::~OrderedWorker() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OrderedWorker::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(m_);
    queue_.push_back({std::move(job), cpu::num_threads()});
    unfinished_++;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
}

void OrderedWorker::wait_until_pending(int n) {
  std::unique_lock<std::mutex> lock(m_);
  changed_.wait(lock, [&] { return unfinished_ <= n; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void OrderedWorker::loop() {
  int threads = 0;
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (job.threads != threads) cpu::set_num_threads(threads = job.threads);  // this thread's OpenMP ICV
    std::exception_ptr e;
    try {
      job.run();
    } catch (...) {
      e = std::current_exception();
    }
    lock.lock();
    if (e && !error_) error_ = e;
    unfinished_--;
    changed_.notify_all();
  }
}

}  // namespace orion::train
