#include "transport/ucx/ucx_worker.hpp"

#include <chrono>
#include <cstdlib>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

// The idle progress thread sleeps at most this long between polls: the latency a put to an idle
// target pays on emulated transports, traded against waking a 2-core machine too often.
constexpr auto kMaxIdleSleep = std::chrono::microseconds(100);
}  // namespace

Result UcxWorker::create(std::shared_ptr<ContextState> context, std::shared_ptr<UcxWorker>* out) {
  std::shared_ptr<UcxWorker> w(new UcxWorker());
  const int rank = context->rank;
  w->rank_ = rank;
  w->state_ = std::move(context);
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK)
    return TSR_FAIL(tsrSystemError, "rank %d: ucp_config_read failed: %s (check UCX_* variables)",
                    rank, ucs_status_string(s));
  // The registration cache hooks mmap through libucm, whose lock a forked child can inherit
  // held (seen as a hang in ucp_init in tests that fork ranks); every buffer here is registered
  // with ucp_mem_map and passed with its memh, so the cache buys nothing. UCX_RCACHE_ENABLE
  // still wins when set.
  if (std::getenv("UCX_RCACHE_ENABLE") == nullptr)
    (void)ucp_config_modify(config, "RCACHE_ENABLE", "n");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
  params.mt_workers_shared = 0;
  s = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (s != UCS_OK)
    return TSR_FAIL(tsrSystemError, "rank %d: ucp_init (RMA, AMO64) failed: %s", rank,
                    ucs_status_string(s));

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  // An older UCX that does not report memory types is taken as host-only.
  if (ucp_context_query(w->context_, &attr) == UCS_OK &&
      (attr.field_mask & UCP_ATTR_FIELD_MEMORY_TYPES) != 0)
    w->cudaMemory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(w->context_, &wp, &w->worker_);
  if (s != UCS_OK)
    return TSR_FAIL(tsrSystemError, "rank %d: ucp_worker_create failed: %s", rank,
                    ucs_status_string(s));
  w->thread_ = std::thread([raw = w.get()] { raw->progressLoop(); });
  *out = std::move(w);
  return tsrSuccess;
}

UcxWorker::~UcxWorker() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  orphans_.clear();  // after the worker: it may call back into them until destroyed
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxWorker::progressLoop() {
  uint32_t idle = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    if (quiesced()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // until the destructor
      continue;
    }
    unsigned done;
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = ucp_worker_progress(worker_);
    }
    if (done != 0) {
      idle = 0;
      std::this_thread::yield();  // let a thread that waits for the lock take it
      continue;
    }
    ++idle;
    if (idle < 64) {
      std::this_thread::yield();
    } else {
      auto us = std::chrono::microseconds(idle < 256 ? 10 : kMaxIdleSleep.count());
      std::this_thread::sleep_for(us);
    }
  }
}

ucs_status_t UcxWorker::wait(ucs_status_ptr_t request, const Deadline& deadline,
                             const std::atomic<bool>* aborted) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  Backoff backoff;
  for (;;) {
    ucs_status_t s;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (quiesced() || (aborted != nullptr && aborted->load(std::memory_order_acquire))) {
        ucp_request_free(request);
        return UCS_ERR_CANCELED;
      }
      ucp_worker_progress(worker_);
      s = ucp_request_check_status(request);
      if (s != UCS_INPROGRESS) {
        ucp_request_free(request);
        return s;
      }
      if (deadline.expired()) {
        // Released to UCX: it frees the request once the operation ends (or the ep is closed).
        ucp_request_free(request);
        return UCS_ERR_TIMED_OUT;
      }
    }
    backoff.pause();
  }
}

void UcxWorker::keepUntilDestroyed(std::shared_ptr<void> p) {
  std::lock_guard<std::mutex> lock(mutex);
  orphans_.push_back(std::move(p));
}

}  // namespace tessera
