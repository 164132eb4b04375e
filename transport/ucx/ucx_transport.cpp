// ucx: one-sided RMA through UCP (DESIGN.md, "Transport"). Memory is registered with ucp_mem_map
// and exported as {address, packed rkey}; a connection is a UCP endpoint to the peer's worker
// (ucx_endpoint.hpp: a dead peer fails the endpoint where UCX_TLS can detect it); imported
// memory is an unpacked rkey and is never mapped (RemoteMemory::mapped() is null, even where
// ucp_rkey_ptr could give a shared-memory pointer: one access path keeps the ordering rules in one
// place). See ucx_worker.hpp for threading and object lifetimes.
//
// Ordering (DESIGN.md, "Memory ordering"): put returns once issued (up to kMaxInFlight requests
// per connection stay in flight; flush completes them and reports their errors); atomicAdd
// issues ucp_worker_fence before the add, and UCP guarantees that operations issued before a
// fence complete (are visible at the target) before any issued after it, so the add lands after
// every earlier put. Both are issued under the worker mutex, so no other thread's operation can
// slip between the fence and the add.
//
// Not covered yet (no CUDA-capable UCX here): with GPUDirect RDMA into device memory, the fence
// orders delivery at the target NIC, but a kernel that acquires the counter may still read stale
// data until the NIC's writes are flushed to the GPU (NCCL does a loopback read or
// cuFlushGPUDirectRDMAWrites on the receiver). Device memory is only importable over ucx when
// UCX reports CUDA support; that flush must come with enabling it.
#include <cstring>
#include <vector>

#include "transport/transport.hpp"
#include "transport/ucx/ucx_endpoint.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

constexpr const char* kNoDetection =
    " (is the peer alive? this endpoint cannot detect a dead peer: no transport in UCX_TLS "
    "supports peer failure detection)";

// The head of a memory section; the packed rkey follows.
struct UcxSection {
  uint64_t address;
  uint64_t rkeyBytes;
};

struct UcxMemoryExport final : MemoryExport {
  std::shared_ptr<UcxWorker> worker;
  ucp_mem_h memh = nullptr;
  ~UcxMemoryExport() override {
    if (memh == nullptr) return;
    std::lock_guard<std::mutex> lock(worker->mutex);
    ucp_mem_unmap(worker->context(), memh);
  }
};

struct UcxRemoteMapping final : RemoteMapping {
  std::shared_ptr<UcxEndpoint> endpoint;
  ucp_rkey_h rkey = nullptr;
  ~UcxRemoteMapping() override {
    if (rkey == nullptr) return;
    std::lock_guard<std::mutex> lock(endpoint->worker().mutex);
    ucp_rkey_destroy(rkey);
  }
};

class UcxConnection final : public Connection {
 public:
  UcxConnection(std::shared_ptr<ContextState> context, int peer,
                std::shared_ptr<UcxEndpoint> endpoint)
      : Connection(std::move(context), peer, TransportKind::kUcx), endpoint_(std::move(endpoint)) {}

  ~UcxConnection() override {
    // Requests still in flight are handed to UCX, which frees them when they end; their
    // operands stay alive until the worker goes.
    std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
    for (auto& op : pending_) {
      ucp_request_free(op.request);
      if (op.operand) endpoint_->worker().keepUntilDestroyedLocked(std::move(op.operand));
    }
  }

  bool mapsMemory() const override { return false; }

  void progress() override { endpoint_->worker().tryProgress(); }

  Result peerStatus() override {
    ucs_status_t s = endpoint_->failed();
    if (s == UCS_OK) return tsrSuccess;
    return fail(tsrRemoteError, "the UCX endpoint failed (%s): the peer is gone or unreachable",
                ucs_status_string(s));
  }

 protected:
  Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                  std::unique_ptr<RemoteMapping>* mapping) override {
    UcxSection s{};
    if (section.size() < sizeof s)
      return fail(tsrInvalidArgument, "ucx memory section has %zu bytes, fewer than %zu",
                  section.size(), sizeof s);
    std::memcpy(&s, section.data(), sizeof s);
    if (s.rkeyBytes != section.size() - sizeof s || s.address != header.address)
      return fail(tsrInvalidArgument,
                  "ucx memory section of memory %u is malformed (%llu rkey bytes of %zu)",
                  header.memoryId, static_cast<unsigned long long>(s.rkeyBytes),
                  section.size() - sizeof s);
    auto m = std::make_unique<UcxRemoteMapping>();
    m->endpoint = endpoint_;
    ucs_status_t st;
    {
      std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
      st = ucp_ep_rkey_unpack(endpoint_->ep(), section.data() + sizeof s, &m->rkey);
      void* direct = nullptr;
      // Only reported: mapping stays null even where shared memory offers a pointer.
      if (st == UCS_OK && ucp_rkey_ptr(m->rkey, s.address, &direct) == UCS_OK)
        TSR_TRACE("ucx rank %d: memory %u of peer %d is also reachable directly at %p", rank(),
                  header.memoryId, peer(), direct);
    }
    if (st != UCS_OK) {
      m->rkey = nullptr;
      return fail(tsrRemoteError, "ucp_ep_rkey_unpack of memory %u failed: %s", header.memoryId,
                  ucs_status_string(st));
    }
    *mapped = nullptr;
    *mapping = std::move(m);
    return tsrSuccess;
  }

  Result doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src, size_t srcOffset,
               size_t bytes) override {
    TSR_CHECK(checkKinds("put", src, dst));
    ucp_request_param_t p{};
    addMemh(src, &p);
    const char* from = static_cast<const char*>(src.data()) + srcOffset;
    std::unique_lock<std::mutex> lock(endpoint_->worker().mutex);
    ucs_status_ptr_t req =
        ucp_put_nbx(endpoint_->ep(), from, bytes, dst.remoteAddress() + dstOffset, rkeyOf(dst), &p);
    // Not waited for: a put completes with a later flush (Connection::put's contract), so many
    // are in flight at once.
    return track(lock, req, nullptr, "put", bytes, dst.id(), dstOffset);
  }

  Result doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src, size_t srcOffset,
               size_t bytes) override {
    TSR_CHECK(checkKinds("get", dst, src));
    ucp_request_param_t p{};
    addMemh(dst, &p);
    char* to = static_cast<char*>(dst.data()) + dstOffset;
    ucs_status_ptr_t req;
    {
      std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
      req =
          ucp_get_nbx(endpoint_->ep(), to, bytes, src.remoteAddress() + srcOffset, rkeyOf(src), &p);
    }
    return finish(req, "get", bytes, src.id(), srcOffset);
  }

  Result doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) override {
    TSR_CHECK(checkEndpoint("atomicAdd"));
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(sizeof value);
    // UCP may read the operand until the operation completes: it lives with the pending entry.
    auto operand = std::make_unique<uint64_t>(value);
    // Fence and add under one lock: the add is ordered after every put issued before it (see
    // the file comment), and no other thread's operation comes between them.
    std::unique_lock<std::mutex> lock(endpoint_->worker().mutex);
    ucs_status_t s = ucp_worker_fence(endpoint_->worker().worker());
    if (s != UCS_OK)
      return fail(tsrRemoteError, "ucp_worker_fence before atomicAdd failed: %s",
                  ucs_status_string(s));
    ucs_status_ptr_t req = ucp_atomic_op_nbx(endpoint_->ep(), UCP_ATOMIC_OP_ADD, operand.get(), 1,
                                             dst.remoteAddress() + offset, rkeyOf(dst), &p);
    return track(lock, req, std::move(operand), "atomicAdd", sizeof value, dst.id(), offset);
  }

  Result doFlush(const Deadline& deadline) override {
    TSR_CHECK(checkEndpoint("flush"));
    ucp_request_param_t p{};
    ucs_status_ptr_t req;
    {
      std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
      req = ucp_ep_flush_nbx(endpoint_->ep(), &p);
    }
    ucs_status_t s = endpoint_->worker().wait(req, deadline, &context()->aborted);
    if (s == UCS_ERR_CANCELED)
      return fail(tsrRemoteError, "flush interrupted: the communicator was aborted");
    if (s == UCS_ERR_TIMED_OUT) {
      endpoint_->noteTimeout();
      return fail(tsrTimeout, "flush did not complete within %.3g s%s", deadline.seconds(),
                  endpoint_->detectsFailure() ? "" : kNoDetection);
    }
    if (s != UCS_OK) return fail(tsrRemoteError, "flush failed: %s", ucs_status_string(s));
    // Everything issued before the flush is complete: collect the requests and their errors
    // (what another thread issued after the flush may stay in flight).
    {
      std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
      reapLocked();
    }
    return takeError();
  }

 private:
  static ucp_rkey_h rkeyOf(const RemoteMemory& m) {
    return static_cast<UcxRemoteMapping*>(m.mapping())->rkey;
  }

  static void addMemh(const Memory& local, ucp_request_param_t* p) {
    auto* e = static_cast<UcxMemoryExport*>(local.exportOf(TransportKind::kUcx));
    if (e == nullptr || e->memh == nullptr) return;
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p->memh = e->memh;
  }

  Result checkEndpoint(const char* op) {
    ucs_status_t s = endpoint_->failed();
    if (s == UCS_OK) return tsrSuccess;
    return fail(tsrRemoteError, "%s on a failed UCX endpoint (%s): the peer is gone or unreachable",
                op, ucs_status_string(s));
  }

  Result checkKinds(const char* op, const Memory& local, const RemoteMemory& remote) {
    TSR_CHECK(checkEndpoint(op));
    if (local.kind() == MemoryKind::kCuda && (local.exportOf(TransportKind::kUcx) == nullptr ||
                                              local.exportOf(TransportKind::kUcx)->section.empty()))
      return fail(tsrInvalidUsage,
                  "%s with local cuda memory %u: this UCX build has no CUDA memory support and "
                  "staging through pinned host memory is not implemented",
                  op, local.id());
    (void)remote;  // a peer's cuda memory was importable, so its UCX handles it
    return tsrSuccess;
  }

  Result finish(ucs_status_ptr_t req, const char* op, size_t bytes, uint32_t memoryId,
                size_t offset) {
    Deadline deadline = Deadline::after(context()->timeoutSeconds);
    ucs_status_t s = endpoint_->worker().wait(req, deadline, &context()->aborted);
    if (s == UCS_OK) return tsrSuccess;
    if (s == UCS_ERR_CANCELED)
      return fail(tsrRemoteError, "%s interrupted: the communicator was aborted", op);
    if (s == UCS_ERR_TIMED_OUT) {
      endpoint_->noteTimeout();
      return fail(tsrTimeout,
                  "%s of %zu bytes at offset %zu of the peer's memory %u did not complete within "
                  "%.3g s%s",
                  op, bytes, offset, memoryId, deadline.seconds(),
                  endpoint_->detectsFailure() ? "" : kNoDetection);
    }
    return fail(tsrRemoteError, "%s of %zu bytes at offset %zu of the peer's memory %u failed: %s",
                op, bytes, offset, memoryId, ucs_status_string(s));
  }

  // An operation in flight: its request and the operand UCP may still read.
  struct Pending {
    ucs_status_ptr_t request;
    std::shared_ptr<uint64_t> operand;
    const char* op;
    size_t bytes;
    uint32_t memoryId;
    size_t offset;
  };
  // The most operations in flight per connection before an issuer waits for the oldest.
  static constexpr size_t kMaxInFlight = 256;

  // With the worker mutex held (`lock`): records a request an *_nbx call returned. Completed at
  // once (NULL) costs nothing; an error is reported now; in flight is kept for flush.
  Result track(std::unique_lock<std::mutex>& lock, ucs_status_ptr_t req,
               std::unique_ptr<uint64_t> operand, const char* op, size_t bytes, uint32_t memoryId,
               size_t offset) {
    if (UCS_PTR_IS_ERR(req)) {
      lock.unlock();
      return fail(tsrRemoteError,
                  "%s of %zu bytes at offset %zu of the peer's memory %u failed: %s", op, bytes,
                  offset, memoryId, ucs_status_string(UCS_PTR_STATUS(req)));
    }
    if (req != nullptr)
      pending_.push_back(
          {req, std::shared_ptr<uint64_t>(std::move(operand)), op, bytes, memoryId, offset});
    if (pending_.size() >= kMaxInFlight) reapLocked();
    if (pending_.size() < kMaxInFlight) {
      lock.unlock();
      return takeError();
    }
    // Still full: wait for the oldest (without the lock; wait() takes it as it progresses).
    Pending oldest = std::move(pending_.front());
    pending_.erase(pending_.begin());
    lock.unlock();
    Result r = finish(oldest.request, oldest.op, oldest.bytes, oldest.memoryId, oldest.offset);
    if (r != tsrSuccess) {
      // Released to UCX unfinished: its operand must outlive it.
      if (oldest.operand) endpoint_->worker().keepUntilDestroyed(std::move(oldest.operand));
      return r;
    }
    return takeError();
  }

  // With the worker mutex held: frees completed requests, keeping the first error.
  void reapLocked() {
    size_t kept = 0;
    for (auto& op : pending_) {
      ucs_status_t s = ucp_request_check_status(op.request);
      if (s == UCS_INPROGRESS) {
        pending_[kept++] = std::move(op);
        continue;
      }
      ucp_request_free(op.request);
      if (s != UCS_OK && error_.empty())
        error_ = strprintf("%s of %zu bytes at offset %zu of the peer's memory %u failed: %s",
                           op.op, op.bytes, op.offset, op.memoryId, ucs_status_string(s));
    }
    pending_.resize(kept);
  }

  // The first error of an operation that completed in the background, once.
  Result takeError() {
    std::string e;
    {
      std::lock_guard<std::mutex> lock(endpoint_->worker().mutex);
      e.swap(error_);
    }
    if (e.empty()) return tsrSuccess;
    return fail(tsrRemoteError, "%s", e.c_str());
  }

  std::vector<Pending> pending_;  // guarded by the worker mutex
  std::string error_;             // guarded by the worker mutex
  std::shared_ptr<UcxEndpoint> endpoint_;
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(std::shared_ptr<ContextState> context, std::shared_ptr<UcxWorker> worker)
      : Transport(std::move(context)), worker_(std::move(worker)) {}

  TransportKind kind() const override { return TransportKind::kUcx; }

  bool reaches(int, std::string*) const override { return true; }

  Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) override {
    auto e = std::make_unique<UcxMemoryExport>();
    e->worker = worker_;
    if (mem.kind() == MemoryKind::kCuda && !worker_->cudaMemory()) {
      e->whyNot =
          "this UCX build has no CUDA memory support; use cuda_ipc/p2p within a host, or a UCX "
          "built with CUDA";
      *out = std::move(e);
      return tsrSuccess;
    }
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                   UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    p.address = mem.data();
    p.length = mem.size();
    p.memory_type = mem.kind() == MemoryKind::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    void* rkey = nullptr;
    size_t rkeyBytes = 0;
    std::lock_guard<std::mutex> lock(worker_->mutex);
    ucs_status_t s = ucp_mem_map(worker_->context(), &p, &e->memh);
    if (s != UCS_OK) {
      e->memh = nullptr;
      return TSR_FAIL(tsrSystemError,
                      "ucx rank %d: ucp_mem_map of memory %u (%s, %zu bytes) "
                      "failed: %s",
                      context_->rank, mem.id(), memoryKindName(mem.kind()), mem.size(),
                      ucs_status_string(s));
    }
    s = ucp_rkey_pack(worker_->context(), e->memh, &rkey, &rkeyBytes);
    if (s != UCS_OK) {
      ucp_mem_unmap(worker_->context(), e->memh);
      e->memh = nullptr;
      return TSR_FAIL(tsrSystemError, "ucx rank %d: ucp_rkey_pack of memory %u failed: %s",
                      context_->rank, mem.id(), ucs_status_string(s));
    }
    UcxSection head{reinterpret_cast<uintptr_t>(mem.data()), rkeyBytes};
    e->section.assign(reinterpret_cast<const char*>(&head), sizeof head);
    e->section.append(static_cast<const char*>(rkey), rkeyBytes);
    ucp_rkey_buffer_release(rkey);
    *out = std::move(e);
    return tsrSuccess;
  }

  Result localEndpoint(int, std::string* blob) override {
    ucp_address_t* address = nullptr;
    size_t bytes = 0;
    std::lock_guard<std::mutex> lock(worker_->mutex);
    ucs_status_t s = ucp_worker_get_address(worker_->worker(), &address, &bytes);
    if (s != UCS_OK)
      return TSR_FAIL(tsrSystemError, "ucx rank %d: ucp_worker_get_address failed: %s",
                      context_->rank, ucs_status_string(s));
    blob->assign(reinterpret_cast<const char*>(address), bytes);
    ucp_worker_release_address(worker_->worker(), address);
    return tsrSuccess;
  }

  Result connect(int peer, const std::string& peerEndpoint,
                 std::shared_ptr<Connection>* out) override {
    if (peerEndpoint.empty())
      return TSR_FAIL(tsrInternalError, "ucx rank %d: peer %d sent an empty worker address",
                      context_->rank, peer);
    auto ep = std::make_shared<UcxEndpoint>(worker_, context_->timeoutSeconds);
    ucs_status_t s = ep->open(context_->rank, peer, peerEndpoint);
    if (s != UCS_OK)
      return TSR_FAIL(tsrRemoteError,
                      "ucx rank %d: ucp_ep_create to peer %d failed: %s (does a transport in "
                      "UCX_TLS reach it?)",
                      context_->rank, peer, ucs_status_string(s));
    *out = std::make_shared<UcxConnection>(context_, peer, std::move(ep));
    return tsrSuccess;
  }

 private:
  std::shared_ptr<UcxWorker> worker_;
};

}  // namespace

Result makeUcxTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out) {
  std::shared_ptr<UcxWorker> worker;
  TSR_CHECK(UcxWorker::create(context, &worker));
  *out = std::make_unique<UcxTransport>(std::move(context), std::move(worker));
  return tsrSuccess;
}

}  // namespace tessera
