// The UCP objects of one TransportContext's ucx transport: a ucp_context (RMA and 64-bit atomics),
// one ucp_worker, and a progress thread.
//
// Why a progress thread: over TCP and the other emulated transports (software atomics, AM-based
// RMA) an operation completes only when the *target* worker progresses, and the target may be
// sitting in a host wait (Semaphore::wait) that never calls into UCX.
//
// Thread safety: the worker is created UCS_THREAD_MODE_SERIALIZED and every call that touches the
// context or the worker (progress, put, fence, flush, ep create/close, mem map, rkey unpack or
// destroy) is made with `mutex` held. One lock keeps the rules simple and the critical sections
// are short (UCP calls do not block); the progress thread drops the lock between calls and backs
// off when idle so that issuing threads get it promptly.
//
// Lifetime: held by shared_ptr by the transport, every connection (endpoint), every memory export
// and every imported rkey, so UCP objects outlive the TransportContext as long as anything needs
// them. The destructor stops the thread, then destroys the worker and the context.
//
// Abort: once the context is aborted the worker is never progressed again (quiesced()). Over TCP
// and the other emulated transports a peer's put is carried out by *this* worker's progress
// (ucp_put_handler copies into the address the peer named, trusting its rkey), so a worker that
// kept progressing while an aborted rank frees its memory would let a peer that has not yet
// noticed the abort write into freed memory (seen as a SIGSEGV in ucp_put_handler). An aborted
// rank waits for no peer anyway: waits return UCS_ERR_CANCELED at once.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/deadline.hpp"
#include "core/status.hpp"
#include "transport/context_state.hpp"

namespace tessera {

class UcxWorker {
 public:
  static Result create(std::shared_ptr<ContextState> context, std::shared_ptr<UcxWorker>* out);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // Whether this UCX build can register and move CUDA device memory.
  bool cudaMemory() const { return cudaMemory_; }
  int rank() const { return rank_; }
  // The context was aborted: nothing progresses the worker any more (see the file comment).
  bool quiesced() const { return state_->aborted.load(std::memory_order_acquire); }

  // Guards every call on context() and worker() (see the file comment).
  std::mutex mutex;
  // Set (under `mutex`) once ucp_ep_create refused error handling mode PEER for lack of a
  // transport that detects peer failure; later endpoints go straight to mode NONE.
  bool peerModeUnreachable = false;

  // Waits for a request returned by a *_nbx call (NULL or an error pointer are handled too),
  // progressing the worker meanwhile, and frees it. UCS_ERR_TIMED_OUT once `deadline` passes
  // (the request is then released to UCX, which frees it when it completes). Call without
  // `mutex` held.
  // UCS_ERR_CANCELED (request released likewise) once *aborted turns true or the worker is
  // quiesced.
  ucs_status_t wait(ucs_status_ptr_t request, const Deadline& deadline,
                    const std::atomic<bool>* aborted = nullptr);

  // Keeps `p` alive until the worker is destroyed (state of an endpoint whose close could not
  // complete, which UCX may still call back into).
  void keepUntilDestroyed(std::shared_ptr<void> p);
  // Progresses the worker once if the mutex is free (a waiting thread helps the progress thread).
  void tryProgress() {
    if (quiesced()) return;
    std::unique_lock<std::mutex> lock(mutex, std::try_to_lock);
    if (lock.owns_lock()) ucp_worker_progress(worker_);
  }
  void keepUntilDestroyedLocked(std::shared_ptr<void> p) { orphans_.push_back(std::move(p)); }

 private:
  UcxWorker() = default;
  void progressLoop();

  int rank_ = -1;
  std::shared_ptr<ContextState> state_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  bool cudaMemory_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::shared_ptr<void>> orphans_;  // guarded by mutex
};

}  // namespace tessera
