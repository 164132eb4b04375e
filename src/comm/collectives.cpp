// The collective, point-to-point, group, registration and allocation calls of the C++ API. Every
// argument is checked before anything is written or queued (DESIGN.md, "One call, end to end");
// a valid call then goes to group.cpp, which starts it on the communicator's engine.
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "collectives/exec/engine.hpp"
#include "comm/api_guard.hpp"
#include "comm/buffer_place.hpp"
#include "comm/comm_impl.hpp"
#include "comm/group.hpp"
#include "core/datatype.hpp"
#include "tessera/tessera.hpp"
#include "transport/cuda_ipc/cuda_memory.hpp"
#include "transport/host_alloc.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// A collective as the API received it.
struct Request {
  const char* api;
  Collective collective;
  const void* sendbuf;
  void* recvbuf;
  size_t count;
  tsrDataType_t dtype;
  tsrRedOp_t op;
  int root;
  tsrStream_t stream;  // device buffers: the call is ordered on it (NULL: the legacy stream)
};

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  return aBytes > 0 && bBytes > 0 && addr(a) < addr(b) + bBytes && addr(b) < addr(a) + aBytes;
}

// `factor` blocks of `count` elements must fit ptrdiff_t (and so size_t): every byte offset the
// executors compute, up to count * size * nranks, is then representable.
Result checkCount(const char* api, size_t count, tsrDataType_t dtype, int factor) {
  const size_t unit = dtypeSize(dtype) * static_cast<size_t>(factor);
  constexpr auto kMaxBytes = static_cast<size_t>(PTRDIFF_MAX);
  if (count > kMaxBytes / unit)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: count %zu of %s (%zu bytes each) times %d blocks is more than %zu bytes "
                    "(PTRDIFF_MAX)",
                    api, count, dtypeName(dtype), dtypeSize(dtype), factor, kMaxBytes);
  return tsrSuccess;
}

// Which executor runs a call: host buffers go to the host executor (plain loads and stores), device
// buffers of the communicator's GPU to the device executor (stream-ordered). A mix, device memory
// of another GPU, or device memory on a host-only rank has no executor.
struct Placement {
  bool any = false;     // some buffer was classified
  bool device = false;  // the classified buffers are device (or managed) memory
};

Result classifyBuffer(const CommImpl& comm, const char* api, const char* name, const void* ptr,
                      Placement* pl) {
  bool onDevice = false;
  TSR_CHECK(executorPlace(comm.cudaDevice(), api, name, ptr, &onDevice));
  if (pl->any && pl->device != onDevice)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: %s %p is %s memory but the other buffer is %s memory: both buffers of a "
                    "call must be host memory (host executor) or both device memory (device "
                    "executor)",
                    api, name, ptr, onDevice ? "device" : "host", pl->device ? "device" : "host");
  pl->any = true;
  pl->device = onDevice;
  return tsrSuccess;
}

// NCCL's in-place rule of each collective, for error sentences.
const char* inPlaceRule(Collective c) {
  switch (c) {
    case Collective::kAllGather: return "sendbuff == recvbuff + rank * sendcount";
    case Collective::kReduceScatter: return "recvbuff == sendbuff + rank * recvcount";
    case Collective::kAllToAll: return "alltoall has no in-place form";
    default: return "sendbuff == recvbuff";
  }
}

Result checkCollective(CommImpl& comm, const Request& q, CollCall* call, bool* onDevice) {
  *onDevice = false;
  TSR_CHECK(comm.checkReady(q.api));
  TSR_CHECK(dtypeCheck(q.dtype, q.api));
  const int n = comm.nranks(), me = comm.rank();
  RedOpDesc op;
  if (collectiveReduces(q.collective)) {
    Result r = comm.redOpLookup(q.op, q.dtype, &op);
    if (r != tsrSuccess) return addContext(r, "%s", q.api);
  }
  if (collectiveHasRoot(q.collective) && (q.root < 0 || q.root >= n))
    return TSR_FAIL(tsrInvalidArgument, "%s: root %d is outside [0, %d)", q.api, q.root, n);
  TSR_CHECK(checkCount(q.api, q.count, q.dtype, n));
  call->collective = q.collective;
  call->sendbuf = q.sendbuf;
  call->recvbuf = q.recvbuf;
  call->count = q.count;
  call->dtype = q.dtype;
  call->op = op;
  call->root = q.root;
  comm.callOverride(&call->algorithm, &call->plan);
  if (q.count == 0) return tsrSuccess;  // no buffer is touched

  // Bytes this rank reads from sendbuff and writes to recvbuff.
  const size_t block = dtypeSize(q.dtype) * q.count;
  const auto all = block * static_cast<size_t>(n);
  size_t sendBytes = block, recvBytes = block;
  // alltoall's sendbuff == recvbuff is refused below, before the overlap test.
  const bool inPlace = callInPlace(*call, me);
  switch (q.collective) {
    case Collective::kReduceScatter: sendBytes = all; break;
    case Collective::kAllGather: recvBytes = all; break;
    case Collective::kAllToAll: sendBytes = recvBytes = all; break;
    case Collective::kBroadcast:
      if (me != q.root) sendBytes = 0;  // not read: may be NULL
      break;
    case Collective::kReduce:
      if (me != q.root) recvBytes = 0;  // not written: may be NULL
      break;
    case Collective::kAllReduce: break;
  }
  if ((sendBytes > 0 && addr(q.sendbuf) + sendBytes < addr(q.sendbuf)) ||
      (recvBytes > 0 && addr(q.recvbuf) + recvBytes < addr(q.recvbuf)))
    return TSR_FAIL(
        tsrInvalidArgument, "%s: a buffer of %zu bytes at %p wraps around the address space", q.api,
        sendBytes > 0 && addr(q.sendbuf) + sendBytes < addr(q.sendbuf) ? sendBytes : recvBytes,
        sendBytes > 0 && addr(q.sendbuf) + sendBytes < addr(q.sendbuf) ? q.sendbuf : q.recvbuf);
  if (sendBytes > 0 && q.sendbuf == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "%s: sendbuff is NULL with count %zu%s", q.api, q.count,
                    collectiveHasRoot(q.collective) ? " on this rank" : "");
  if (recvBytes > 0 && q.recvbuf == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "%s: recvbuff is NULL with count %zu%s", q.api, q.count,
                    collectiveHasRoot(q.collective) ? " on the root" : "");
  if (q.collective == Collective::kAllToAll && q.sendbuf == q.recvbuf)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: sendbuff == recvbuff (%p), but alltoall has no in-place form; use two "
                    "buffers",
                    q.api, q.recvbuf);
  // Any other overlap would make the call read what it already wrote.
  if (!inPlace && overlaps(q.sendbuf, sendBytes, q.recvbuf, recvBytes))
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: sendbuff [%p, +%zu bytes) and recvbuff [%p, +%zu bytes) overlap but the "
                    "call is not in place (%s)",
                    q.api, q.sendbuf, sendBytes, q.recvbuf, recvBytes, inPlaceRule(q.collective));
  Placement pl;
  if (sendBytes > 0) TSR_CHECK(classifyBuffer(comm, q.api, "sendbuff", q.sendbuf, &pl));
  if (recvBytes > 0) TSR_CHECK(classifyBuffer(comm, q.api, "recvbuff", q.recvbuf, &pl));
  *onDevice = pl.device;
  return tsrSuccess;
}

// The C++ API promises codes, not exceptions: what the standard library throws (out of memory
// while queueing inside a group) is recorded as the call's error, so tsrGroupEnd fails too.
Result issue(const std::shared_ptr<CommImpl>& impl, const Request& q) {
  ScopedRank scoped(impl->rank());
  Result r = guarded(q.api, [&]() -> Result {
    PendingCall pc;
    pc.comm = impl;
    TSR_CHECK(checkCollective(*impl, q, &pc.coll, &pc.onDevice));
    pc.stream = q.stream;
    if (q.count == 0) return tsrSuccess;
    return submitCall(std::move(pc));
  });
  return r == tsrSuccess ? r : noteCallError(r);
}

// A send or receive: on host buffers the host executor runs it, on device buffers of the
// communicator's GPU the device executor (*onDevice), ordered on the call's stream.
Result checkP2P(CommImpl& comm, const char* api, const void* buf, size_t count, tsrDataType_t dtype,
                int peer, bool* onDevice) {
  *onDevice = false;
  TSR_CHECK(comm.checkReady(api));
  TSR_CHECK(dtypeCheck(dtype, api));
  const int n = comm.nranks();
  if (peer < 0 || peer >= n)
    return TSR_FAIL(tsrInvalidArgument, "%s: peer %d is outside [0, %d)", api, peer, n);
  if (peer == comm.rank() && !inGroup())
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: peer %d is this rank, outside a group: it can only complete with its "
                    "matching call in the same tsrGroupStart/tsrGroupEnd",
                    api, peer);
  TSR_CHECK(checkCount(api, count, dtype, 1));
  if (count == 0) return tsrSuccess;
  if (buf == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "%s: the buffer is NULL with count %zu", api, count);
  Placement pl;
  TSR_CHECK(classifyBuffer(comm, api, "the buffer", buf, &pl));
  *onDevice = pl.device;
  return tsrSuccess;
}

Result submitP2P(const std::shared_ptr<CommImpl>& impl, bool isSend, const void* buf, size_t count,
                 tsrDataType_t dtype, int peer, bool onDevice, tsrStream_t stream);

Result issueP2P(const std::shared_ptr<CommImpl>& impl, const char* api, bool isSend,
                const void* buf, size_t count, tsrDataType_t dtype, int peer, tsrStream_t stream) {
  ScopedRank scoped(impl->rank());
  Result r = guarded(api, [&]() -> Result {
    bool onDevice = false;
    TSR_CHECK(checkP2P(*impl, api, buf, count, dtype, peer, &onDevice));
    if (count == 0) return tsrSuccess;
    return submitP2P(impl, isSend, buf, count, dtype, peer, onDevice, stream);
  });
  return r == tsrSuccess ? r : noteCallError(r);
}

Result submitP2P(const std::shared_ptr<CommImpl>& impl, bool isSend, const void* buf, size_t count,
                 tsrDataType_t dtype, int peer, bool onDevice, tsrStream_t stream) {
  PendingCall pc;
  pc.comm = impl;
  pc.isP2P = true;
  pc.onDevice = onDevice;
  pc.stream = stream;
  pc.p2p.isSend = isSend;
  pc.p2p.peer = peer;
  pc.p2p.sendbuf = isSend ? buf : nullptr;
  pc.p2p.recvbuf = isSend ? nullptr : const_cast<void*>(buf);
  pc.p2p.count = count;
  pc.p2p.dtype = dtype;
  return submitCall(std::move(pc));
}

}  // namespace

tsrResult_t Communicator::allReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    tsrDataType_t datatype, tsrRedOp_t op, tsrStream_t stream) {
  return issue(impl_, {"tsrAllReduce", Collective::kAllReduce, sendbuff, recvbuff, count, datatype,
                       op, 0, stream});
}

tsrResult_t Communicator::reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        tsrDataType_t datatype, tsrRedOp_t op, tsrStream_t stream) {
  return issue(impl_, {"tsrReduceScatter", Collective::kReduceScatter, sendbuff, recvbuff,
                       recvcount, datatype, op, 0, stream});
}

tsrResult_t Communicator::allGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    tsrDataType_t datatype, tsrStream_t stream) {
  return issue(impl_, {"tsrAllGather", Collective::kAllGather, sendbuff, recvbuff, sendcount,
                       datatype, tsrSum, 0, stream});
}

tsrResult_t Communicator::broadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    tsrDataType_t datatype, int root, tsrStream_t stream) {
  return issue(impl_, {"tsrBroadcast", Collective::kBroadcast, sendbuff, recvbuff, count, datatype,
                       tsrSum, root, stream});
}

tsrResult_t Communicator::reduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tsrDataType_t datatype, tsrRedOp_t op, int root,
                                 tsrStream_t stream) {
  return issue(impl_, {"tsrReduce", Collective::kReduce, sendbuff, recvbuff, count, datatype, op,
                       root, stream});
}

tsrResult_t Communicator::alltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   tsrDataType_t datatype, tsrStream_t stream) {
  return issue(impl_, {"tsrAlltoAll", Collective::kAllToAll, sendbuff, recvbuff, count, datatype,
                       tsrSum, 0, stream});
}

tsrResult_t Communicator::send(const void* sendbuff, size_t count, tsrDataType_t datatype, int peer,
                               tsrStream_t stream) {
  return issueP2P(impl_, "tsrSend", true, sendbuff, count, datatype, peer, stream);
}

tsrResult_t Communicator::recv(void* recvbuff, size_t count, tsrDataType_t datatype, int peer,
                               tsrStream_t stream) {
  return issueP2P(impl_, "tsrRecv", false, recvbuff, count, datatype, peer, stream);
}

tsrResult_t Communicator::probe(int peer, int* source, size_t* bytes) {
  CommImpl& impl = *impl_;
  ScopedRank scoped(impl.rank());
  return guarded("tsrProbe", [&]() -> Result {
    if (source == nullptr || bytes == nullptr)
      return TSR_FAIL(tsrInvalidArgument, "tsrProbe: source or bytes is NULL");
    *source = -1;
    *bytes = 0;
    TSR_CHECK(impl.checkReady("tsrProbe"));
    const int n = impl.nranks();
    if (peer != TSR_ANY_SOURCE && (peer < 0 || peer >= n))
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrProbe: peer %d is outside [0, %d) and not TSR_ANY_SOURCE (%d)", peer, n,
                      TSR_ANY_SOURCE);
    if (peer == impl.rank())
      return TSR_FAIL(tsrInvalidUsage,
                      "tsrProbe: peer %d is this rank: a send to self is only received in its "
                      "own group, where there is nothing to probe",
                      peer);
    if (inGroup())
      return TSR_FAIL(tsrInvalidUsage,
                      "tsrProbe: called inside a group; it waits for a message, so it cannot be "
                      "queued (call it outside tsrGroupStart/tsrGroupEnd)");
    CollectiveEngine::Probe found;
    Result r = [&]() -> Result {
      CommImpl::WorkScope work;
      TSR_CHECK(work.enter(&impl, "tsrProbe"));
      CollectiveEngine* engine = nullptr;
      TSR_CHECK(impl.collectives(&engine));
      std::unique_ptr<Operation> op;
      TSR_CHECK(engine->startProbe(peer, &found, &op));
      return runOperation(op.get(), impl.callTimeoutSeconds());
    }();
    // A fault (a dead peer, the deadline) revokes the communicator, as a failed receive would.
    if (r != tsrSuccess) return impl.callFailed(r, "tsrProbe");
    *source = found.source;
    *bytes = found.bytes;
    return tsrSuccess;
  });
}

tsrResult_t Communicator::groupStart() { return tessera::groupStart(); }

tsrResult_t Communicator::groupEnd() {
  return guarded("tsrGroupEnd", [] { return tessera::groupEnd(); });
}

tsrResult_t Communicator::registerBuffer(void* buff, size_t size, void** handle) {
  ScopedRank scoped(impl_->rank());
  if (handle == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommRegister: handle is NULL");
  if (buff == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommRegister: buff is NULL");
  if (size == 0) return TSR_FAIL(tsrInvalidArgument, "tsrCommRegister: size is 0");
  if (size > static_cast<size_t>(PTRDIFF_MAX) || addr(buff) + size < addr(buff))
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommRegister: [%p, +%zu bytes) runs past the end of the address space",
                    buff, size);
  Placement pl;
  TSR_CHECK(classifyBuffer(*impl_, "tsrCommRegister", "buff", buff, &pl));
  return impl_->registerBuffer(buff, size, pl.device, handle);
}

tsrResult_t Communicator::deregisterBuffer(void* handle) {
  ScopedRank scoped(impl_->rank());
  if (handle == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommDeregister: handle is NULL");
  return impl_->deregisterBuffer(handle);
}

tsrResult_t Communicator::windowRegister(void* buff, size_t size, tsrWindow_t* win, int flags) {
  ScopedRank scoped(impl_->rank());
  const char* api = "tsrCommWindowRegister";
  if (win == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: win is NULL", api);
  *win = nullptr;
  if (buff == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: buff is NULL", api);
  if (size == 0) return TSR_FAIL(tsrInvalidArgument, "%s: size is 0", api);
  if (size > static_cast<size_t>(PTRDIFF_MAX) || addr(buff) + size < addr(buff))
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: [%p, +%zu bytes) runs past the end of the address space", api, buff, size);
  if ((flags & ~TSR_WIN_COLL_SYMMETRIC) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: flags 0x%x: only TSR_WIN_DEFAULT and TSR_WIN_COLL_SYMMETRIC are known",
                    api, static_cast<unsigned>(flags));
  Placement pl;
  TSR_CHECK(classifyBuffer(*impl_, api, "buff", buff, &pl));
  void* handle = nullptr;
  TSR_CHECK(impl_->registerWindow(buff, size, pl.device, &handle));
  *win = static_cast<tsrWindow_t>(handle);
  return tsrSuccess;
}

tsrResult_t Communicator::windowDeregister(tsrWindow_t win) {
  ScopedRank scoped(impl_->rank());
  if (win == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommWindowDeregister: win is NULL");
  return impl_->deregisterWindow(win);
}

tsrResult_t Communicator::memAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrMemAlloc: ptr is NULL");
  if (size == 0) return TSR_FAIL(tsrInvalidArgument, "tsrMemAlloc: size is 0");
  return sharedHostAlloc(size, ptr);
}

namespace {
// tsrMemAllocDevice's allocations by pointer, until tsrMemFree.
std::mutex gDeviceAllocMutex;
std::unordered_map<void*, CudaAllocation>& deviceAllocations() {
  static auto* m = new std::unordered_map<void*, CudaAllocation>();
  return *m;
}
}  // namespace

tsrResult_t Communicator::memAllocDevice(void** ptr, size_t size, int device) {
  if (ptr == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrMemAllocDevice: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return TSR_FAIL(tsrInvalidArgument, "tsrMemAllocDevice: size is 0");
  if (device < -1)
    return TSR_FAIL(tsrInvalidArgument, "tsrMemAllocDevice: device %d (-1 or a device index)",
                    device);
  CudaAllocation a;
  if (Result r = cudaAllocateForUser(size, device, &a); r != tsrSuccess)
    return addContext(r, "tsrMemAllocDevice of %zu bytes", size);
  std::lock_guard<std::mutex> lock(gDeviceAllocMutex);
  *ptr = a.ptr;
  deviceAllocations().emplace(a.ptr, std::move(a));
  return tsrSuccess;
}

tsrResult_t Communicator::memFree(void* ptr) {
  if (ptr == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrMemFree: ptr is NULL");
  CudaAllocation device;
  {
    std::lock_guard<std::mutex> lock(gDeviceAllocMutex);
    auto it = deviceAllocations().find(ptr);
    if (it != deviceAllocations().end()) {
      device = std::move(it->second);
      deviceAllocations().erase(it);
    }
  }
  if (device.release) {
    device.release();  // cudaFree once the device is idle
    return tsrSuccess;
  }
  return sharedHostFree(ptr);
}

}  // namespace tessera
