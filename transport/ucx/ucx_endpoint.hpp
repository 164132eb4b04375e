// A UCP endpoint to one peer's worker, shared by its connection and the rkeys unpacked on it (an
// rkey is used and destroyed only while its endpoint exists). It is created with error handling
// mode PEER, so a dead peer fails the endpoint (the error callback records it) instead of hanging
// it; where no transport in UCX_TLS can detect peer failure it falls back to mode NONE, and a
// dead peer then shows as a deadline passing.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "transport/ucx/ucx_worker.hpp"

namespace tessera {

// What UCX's error callback writes: the first failure of the endpoint. Separate from the endpoint
// so it can outlive it when a close cannot complete (UcxWorker::keepUntilDestroyed).
struct UcxEndpointHealth {
  std::atomic<int> status{UCS_OK};
  int rank = -1;
  int peer = -1;
};

class UcxEndpoint {
 public:
  UcxEndpoint(std::shared_ptr<UcxWorker> worker, double timeoutSeconds)
      : worker_(std::move(worker)), timeoutSeconds_(timeoutSeconds) {}
  // Flushes (unless the endpoint failed or timed out), then force-closes it, with deadlines.
  ~UcxEndpoint();
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  // ucp_ep_create to the worker at `address` (the peer's ucp_worker_get_address).
  ucs_status_t open(int rank, int peer, const std::string& address);

  ucs_status_t failed() const {
    return static_cast<ucs_status_t>(health_->status.load(std::memory_order_acquire));
  }
  ucp_ep_h ep() const { return ep_; }
  UcxWorker& worker() const { return *worker_; }
  bool detectsFailure() const { return detectsFailure_; }
  // An operation missed its deadline: closing then skips the flush that would miss it again.
  void noteTimeout() { timedOut_.store(true, std::memory_order_relaxed); }

 private:
  std::shared_ptr<UcxWorker> worker_;
  double timeoutSeconds_;
  ucp_ep_h ep_ = nullptr;
  bool detectsFailure_ = true;
  std::atomic<bool> timedOut_{false};
  std::shared_ptr<UcxEndpointHealth> health_;
};

}  // namespace tessera
