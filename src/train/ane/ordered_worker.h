// One background thread that runs jobs one at a time, in the order they were submitted. The ANE
// block runner gives it each layer's weight gradients (dW = dYᵀ·X as sgemm on the CPU) so that they
// are computed while the main thread already drives the next layer's backward programs on the ANE.
//
//   OrderedWorker w;
//   w.submit([&] { dW(l); });     // returns at once
//   … ANE work of layer l−1 …
//   w.wait_until_pending(1);      // job l−1's buffers may be reused only once job l+1 is done
//   w.wait();                     // every job finished (then AdamW may read the gradients)
//
// A job's exception is kept and rethrown by the next wait. Each job runs with the OpenMP thread
// count its submitter had, so the worker's sgemm uses the cores the user asked for.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace orion::train {

class OrderedWorker {
 public:
  OrderedWorker() = default;
  ~OrderedWorker();  // finishes the queued jobs, then joins the thread
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  void submit(std::function<void()> job);
  // Blocks until at most n submitted jobs are unfinished; rethrows a job's exception (once).
  void wait_until_pending(int n);
  void wait() { wait_until_pending(0); }

 private:
  struct Job {
    std::function<void()> run;
    int threads = 0;  // the submitter's OpenMP thread count
  };
  void loop();

  std::mutex m_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  int unfinished_ = 0;  // queued + running
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // started by the first submit
};

}  // namespace orion::train
