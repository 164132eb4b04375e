#include "transport/ucx/ucx_endpoint.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* h = static_cast<UcxEndpointHealth*>(arg);
  int ok = UCS_OK;
  // INFO, not WARN: a peer that closes its side at teardown fails the endpoint too; the sentence
  // reaches the user through peerStatus() or the failed operation where it matters.
  if (h->status.compare_exchange_strong(ok, status))
    TSR_INFO("ucx rank %d: endpoint to peer %d failed: %s", h->rank, h->peer,
             ucs_status_string(status));
}

}  // namespace

UcxEndpoint::~UcxEndpoint() {
  if (ep_ == nullptr) return;
  // Complete what this side issued, then release the endpoint without waiting for the peer:
  // a graceful close needs the peer's answer, which never comes from a peer that already
  // destroyed its worker over transports without a connection to break (shared memory).
  if (failed() == UCS_OK && !timedOut_.load(std::memory_order_relaxed)) {
    ucp_request_param_t p{};
    ucs_status_ptr_t req;
    {
      std::lock_guard<std::mutex> lock(worker_->mutex);
      req = ucp_ep_flush_nbx(ep_, &p);
    }
    ucs_status_t s = worker_->wait(req, Deadline::after(timeoutSeconds_));
    if (s != UCS_OK)
      TSR_INFO("ucx rank %d: flush before closing the endpoint to peer %d: %s", health_->rank,
               health_->peer, ucs_status_string(s));
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t req;
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    req = ucp_ep_close_nbx(ep_, &p);
  }
  ucs_status_t s = worker_->wait(req, Deadline::after(timeoutSeconds_));
  if (s == UCS_ERR_TIMED_OUT)
    TSR_WARN("ucx rank %d: closing the endpoint to peer %d did not finish in %.3g s", health_->rank,
             health_->peer, timeoutSeconds_);
  // Unfinished (timed out, or the rank was aborted and the worker quiesced): UCX may still call
  // the error handler with health_ until the worker goes.
  if (s == UCS_ERR_TIMED_OUT || s == UCS_ERR_CANCELED) worker_->keepUntilDestroyed(health_);
}

ucs_status_t UcxEndpoint::open(int rank, int peer, const std::string& address) {
  health_ = std::make_shared<UcxEndpointHealth>();
  health_->rank = rank;
  health_->peer = peer;
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = onEndpointError;
  p.err_handler.arg = health_.get();
  std::lock_guard<std::mutex> lock(worker_->mutex);
  ucs_status_t s = UCS_ERR_UNREACHABLE;
  if (!worker_->peerModeUnreachable) s = ucp_ep_create(worker_->worker(), &p, &ep_);
  if (s == UCS_ERR_UNREACHABLE) {
    worker_->peerModeUnreachable = true;  // UCX logs an error per refused attempt: try once
    // UCX 1.13's shared-memory transports (posix, sysv) cannot detect a failed peer, so with
    // UCX_TLS=sm no transport qualifies for mode PEER. Connect without failure detection: a
    // dead peer then shows as a deadline passing (tsrTimeout), not as tsrRemoteError.
    p.field_mask &= ~static_cast<uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_->worker(), &p, &ep_);
    if (s == UCS_OK) {
      detectsFailure_ = false;
      TSR_INFO(
          "ucx rank %d: endpoint to peer %d has no peer failure detection (the transports "
          "in UCX_TLS do not support it); a dead peer is seen at deadlines",
          rank, peer);
    }
  }
  if (s != UCS_OK) ep_ = nullptr;
  return s;
}

}  // namespace tessera
