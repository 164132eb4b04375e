// Calls of one process group in issue order (DESIGN.md, "Frameworks"): a queue, a progress thread
// that runs what an async call left there, and the Work objects PyTorch hands back.
//
// Order. Every call of a group is a job in its queue and jobs run one at a time in the order they
// were issued, which is the order tessera matches calls across ranks. Who runs a job does not
// matter: the progress thread runs the jobs of async calls (so DDP's bucketed all-reduces overlap
// the backward pass), and a thread that waits for a job runs the jobs before it and the job itself
// when no one else is running one (a synchronous call, or Work.wait() on a job still queued). So a
// synchronous call costs no thread hand-over, and runs on the caller's core.
//
// Completion. A job's Work completes (and its future with it) after the job ran, outside the lock
// that orders the jobs, so a future's callback may itself issue calls and wait for them. A failed
// job's Work raises at wait() with tessera's sentence; the failure does not stop the queue (later
// calls run, and tessera refuses them with its own sentence when the communicator is broken).
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace tessera_torch {

class CallQueue;

class TesseraWork : public c10d::Work {
 public:
  // `outputs`: the future's value (a list of tensors). `devices`: the CUDA devices of a device
  // call (its future is then completed on the call's stream), empty for host calls.
  TesseraWork(std::shared_ptr<CallQueue> queue, int rank, c10d::OpType type, const char* title,
              std::vector<at::Tensor> outputs, std::vector<c10::Device> devices,
              std::chrono::milliseconds timeout);
  ~TesseraWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  // Runs (or waits for) this call and the calls before it. Host calls: returns once the result is
  // in place. Device calls: once the call is on its stream, and the caller's current stream then
  // waits for it (as ProcessGroupNCCL's Work does). Raises the call's error, or DistBackendError
  // when `timeout` (0: the group's) passes first.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  // Device calls (set before the job runs): whether the stream has passed the call, and making the
  // current stream wait for it.
  std::function<bool()> deviceQuery;
  std::function<void()> deviceBlock;
  // Works completed together with this one (the calls of a coalesced batch).
  std::vector<c10::intrusive_ptr<TesseraWork>> linked;
  // A receive from any source: where its job writes the sender (read by sourceRank once done).
  std::shared_ptr<std::atomic<int>> source;
  // The sender of a receive from any source (c10d's Work::sourceRank; torch's dist.recv without
  // src returns it); raises for other calls and before the receive completed.
  int sourceRank() const override;

  // By whoever ran the job: marks it done (error: the exception to raise) and completes the future
  // (device calls: their job completed it already, with the call's stream current).
  void complete(std::exception_ptr error);
  bool done();  // the job ran (host result in place / device call enqueued)
  // A device call's job, with the call's stream current: completes the future (the future records
  // events on the current streams of its devices, which consumers of its value wait for).
  void completeFutureOnStream();

 private:
  // Completes future_ once, by whoever gets there first (complete, getFuture or the device job).
  void markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f, std::exception_ptr error);

  std::shared_ptr<CallQueue> queue_;
  std::vector<at::Tensor> outputs_;
  std::vector<c10::Device> devices_;
  // Made when asked for (most synchronous calls never are), except for device calls, whose future
  // must be completed on the call's stream.
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool futureMarked_ = false;
  std::chrono::milliseconds timeout_;
};

class CallQueue : public std::enable_shared_from_this<CallQueue> {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs the call; throws (with tessera's sentence) when it fails.
  using Body = std::function<void()>;

  explicit CallQueue(std::string name) : name_(std::move(name)) {}
  ~CallQueue();

  // Queues a call. `wake`: the progress thread runs it (async calls); otherwise it waits for a
  // thread that waits for it (the caller of a synchronous call, right after).
  void submit(Body body, c10::intrusive_ptr<TesseraWork> work, bool wake);
  // A synchronous call when nothing is queued or running: runs it on this thread at once (no
  // queue entry, no lock handed between threads). False, with `body` untouched, otherwise.
  bool runNow(Body& body, const c10::intrusive_ptr<TesseraWork>& work);
  // Runs queued jobs on this thread in order, or waits while another thread runs one, until
  // `work` is done. False when `deadline` passed first. `mayRun` false: only waits (a job run
  // here could not return before its own, longer, deadline: Work.wait(timeout) must).
  bool drive(TesseraWork* work, Clock::time_point deadline, bool mayRun = true);
  // Every job queued so far has run (each within its own deadlines).
  void drain();
  // Jobs not yet started fail with `error` instead of running; the thread ends. Jobs queued later
  // fail at once.
  void close(std::exception_ptr error);
  // The progress thread finishes the jobs queued so far and ends (joined unless it is the caller).
  void stop();

  void notifyDone();

 private:
  struct Job {
    Body body;
    c10::intrusive_ptr<TesseraWork> work;
  };
  bool popFront(Job* out);
  void runLocked(Job& job, std::unique_lock<std::mutex>& run);
  void threadMain();

  std::string name_;
  std::mutex m_;  // jobs_, closed_, thread_
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<Job> jobs_;
  std::exception_ptr closed_;
  bool stopping_ = false;
  std::thread thread_;
  std::mutex runMutex_;  // held while a job runs: one at a time, in order
};

}  // namespace tessera_torch
