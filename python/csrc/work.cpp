#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include "types.hpp"

namespace tessera_torch {
namespace {
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

TesseraWork::TesseraWork(std::shared_ptr<CallQueue> queue, int rank, c10d::OpType type,
                         const char* title, std::vector<at::Tensor> outputs,
                         std::vector<c10::Device> devices, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type, title),
      queue_(std::move(queue)),
      outputs_(std::move(outputs)),
      devices_(std::move(devices)),
      timeout_(timeout) {
  if (!devices_.empty())
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices_);
}

TesseraWork::~TesseraWork() = default;

bool TesseraWork::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool TesseraWork::isCompleted() {
  if (!done()) return false;
  return deviceQuery ? deviceQuery() : true;
}

bool TesseraWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr TesseraWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> TesseraWork::result() { return outputs_; }

void TesseraWork::markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& f,
                             std::exception_ptr error) {
  if (error)
    f->setError(error);
  else
    f->markCompleted(c10::IValue(outputs_));
}

void TesseraWork::complete(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> f;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
    completed_ = true;
    exception_ = error;
    if (future_ && !futureMarked_) {
      futureMarked_ = true;
      f = future_;
    }
  }
  cv_.notify_all();
  // The future's callbacks (DDP's comm hooks) run here, on the thread that ran the call.
  if (f) markFuture(f, error);
  for (auto& w : linked) w->complete(error);
}

void TesseraWork::completeFutureOnStream() {
  c10::intrusive_ptr<c10::ivalue::Future> f;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (futureMarked_ || !future_) return;
    futureMarked_ = true;
    f = future_;
  }
  markFuture(f, nullptr);
}

bool TesseraWork::wait(std::chrono::milliseconds timeout) {
  auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  auto deadline = CallQueue::Clock::now() + limit;
  if (limit.count() <= 0) deadline = CallQueue::Clock::time_point::max();
  // With the group's timeout this thread may run the queued calls itself (each ends within that
  // deadline); with a caller's own timeout it waits for the progress thread, so that it can
  // return when that timeout passes.
  if (!queue_->drive(this, deadline, timeout == kNoTimeout))
    C10_THROW_ERROR(DistBackendError, "tessera: " + c10d::opTypeToString(opType_) +
                                          " call did not complete within " +
                                          std::to_string(limit.count()) +
                                          " ms (Work.wait timeout); it is still queued or running");
  std::exception_ptr error = exception();
  if (error) std::rethrow_exception(error);
  if (deviceBlock) deviceBlock();
  return true;
}

void TesseraWork::synchronize() { wait(kNoTimeout); }

int TesseraWork::sourceRank() const {
  const int s = source ? source->load(std::memory_order_acquire) : -1;
  if (s < 0)
    C10_THROW_ERROR(ValueError, std::string("tessera: sourceRank() is for a receive from any "
                                            "source that completed; this is ") +
                                    (source ? "one not completed (wait() first)"
                                            : c10d::opTypeToString(opType_) + " call"));
  return s;
}

c10::intrusive_ptr<c10::ivalue::Future> TesseraWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> f, mark;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_)
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), devices_);
    f = future_;
    if (completed_ && !futureMarked_) {  // asked for after the call ran
      futureMarked_ = true;
      mark = f;
      error = exception_;
    }
  }
  if (mark) markFuture(mark, error);
  return f;
}

// ---- CallQueue ------------------------------------------------------------------------------

CallQueue::~CallQueue() {
  // Only the thread's own reference can be the last while it runs: it ends here.
  if (thread_.joinable()) thread_.detach();
}

void CallQueue::stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
    t.swap(thread_);
  }
  wake_.notify_all();
  if (!t.joinable()) return;
  if (t.get_id() == std::this_thread::get_id())
    t.detach();  // a future callback of this queue's own thread destroys the group
  else
    t.join();
}

void CallQueue::submit(Body body, c10::intrusive_ptr<TesseraWork> work, bool wake) {
  std::exception_ptr closed;
  {
    std::lock_guard<std::mutex> lock(m_);
    closed = closed_;
    if (!closed) {
      jobs_.push_back(Job{std::move(body), work});
      // The thread holds the queue: it is never destroyed under a running job.
      if (wake && !thread_.joinable() && !stopping_)
        thread_ = std::thread([self = shared_from_this()] { self->threadMain(); });
    }
  }
  if (closed) {
    work->complete(closed);
    return;
  }
  if (wake) wake_.notify_one();
}

bool CallQueue::runNow(Body& body, const c10::intrusive_ptr<TesseraWork>& work) {
  std::unique_lock<std::mutex> run(runMutex_, std::try_to_lock);
  if (!run.owns_lock()) return false;  // a job runs: this one goes after it
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!jobs_.empty() || closed_) return false;
  }
  Job job{std::move(body), work};
  runLocked(job, run);
  return true;
}

bool CallQueue::popFront(Job* out) {
  std::lock_guard<std::mutex> lock(m_);
  if (jobs_.empty()) return false;
  *out = std::move(jobs_.front());
  jobs_.pop_front();
  return true;
}

void CallQueue::notifyDone() {
  std::lock_guard<std::mutex> lock(m_);
  done_.notify_all();
}

// Runs one job while `run` holds runMutex_, releases it, then completes the job's Work.
void CallQueue::runLocked(Job& job, std::unique_lock<std::mutex>& run) {
  std::exception_ptr error;
  try {
    job.body();
  } catch (...) {
    error = std::current_exception();
  }
  run.unlock();
  job.work->complete(error);
  notifyDone();
}

bool CallQueue::drive(TesseraWork* work, Clock::time_point deadline, bool mayRun) {
  while (!work->done()) {
    std::unique_lock<std::mutex> run(runMutex_, std::defer_lock);
    if (mayRun && run.try_lock()) {
      Job job;
      if (popFront(&job)) {
        runLocked(job, run);
        continue;
      }
      run.unlock();
    }
    // Another thread runs a job (maybe this one). A thread woken from a sleep costs tens of
    // microseconds where cores are shared: poll (handing the core over) for a short while first.
    const auto spinUntil = std::min(deadline, Clock::now() + kSpin);
    while (!work->done() && Clock::now() < spinUntil) std::this_thread::yield();
    if (work->done()) break;
    std::unique_lock<std::mutex> lock(m_);
    auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
    done_.wait_until(lock, until, [&] { return work->done(); });
    if (Clock::now() >= deadline && !work->done()) return false;
  }
  return true;
}

void CallQueue::drain() {
  for (;;) {
    std::unique_lock<std::mutex> run(runMutex_);
    Job job;
    if (!popFront(&job)) return;  // nothing queued, and nothing runs (we hold runMutex_)
    runLocked(job, run);
  }
}

void CallQueue::close(std::exception_ptr error) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(m_);
    closed_ = error;
    dropped.swap(jobs_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (Job& j : dropped) j.work->complete(error);
  notifyDone();
}

void CallQueue::threadMain() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_ && jobs_.empty()) return;
    }
    std::unique_lock<std::mutex> run(runMutex_);
    Job job;
    if (!popFront(&job)) continue;  // a waiting thread ran it
    runLocked(job, run);
  }
}

}  // namespace tessera_torch
