// The NCCL drop-in: collectives, point-to-point, reduction ops, registration and memory.
//
// Every call maps onto the tessera call of the same shape (tessera's enums have NCCL's values).
// Host buffers are accepted, a documented extension (NCCL requires device memory): they run on
// tessera's host executor and the call returns when the result is in place.
#include <cuda_runtime.h>

#include "nccl/shim.hpp"

using namespace tessera::nccl;

namespace tessera::nccl {
size_t elemSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}
}  // namespace tessera::nccl

namespace {

// A collective outside a group that tessera refuses (ncclInvalidUsage: what it cannot run) goes
// to the real NCCL where TESSERA_NCCL_FALLBACK gave a shadow communicator.
ncclResult_t finish(ncclComm* c, tsrResult_t r, const char* api, const Call& call) {
  // Sends and receives are never forwarded: a pair of which one side ran on tessera and the
  // other on NCCL could not meet.
  if (r == tsrInvalidUsage && c->shadow != nullptr && !inGroup() && call.kind != CallKind::kSend &&
      call.kind != CallKind::kRecv) {
    std::string why = tsrGetLastError(nullptr);
    ncclResult_t fr = forward(c, call);
    info("%s: forwarded to the real NCCL (tessera: %s): %s", api, why.c_str(),
         fr == ncclSuccess ? "done" : lastError());
    return fr;
  }
  return fromTsr(r, api);
}

// Gather's and scatter's checks: the root, the datatype, the root's buffer of nranks blocks
// (`buff`, named `what`); *bytes: one rank's block.
ncclResult_t rootedBlock(const ncclComm* c, const char* api, int root, ncclDataType_t datatype,
                         size_t count, const void* buff, const char* what, size_t* bytes) {
  if (root < 0 || root >= c->nranks)
    return fail(ncclInvalidArgument, "%s: root %d is outside [0, %d)", api, root, c->nranks);
  const size_t elem = elemSize(datatype);
  if (elem == 0)
    return fail(ncclInvalidArgument, "%s: datatype %d is not an NCCL datatype", api,
                static_cast<int>(datatype));
  if (c->rank == root && count > 0 && buff == nullptr)
    return fail(ncclInvalidArgument, "%s: %s is NULL on the root", api, what);
  *bytes = count * elem;
  return ncclSuccess;
}

#define LOOKUP(api)      \
  ncclComm* c = nullptr; \
  if (ncclResult_t lr = lookup(comm, api, &c); lr != ncclSuccess) return lr

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t redop, ncclComm_t comm,
                           cudaStream_t st) {
  LOOKUP("ncclAllReduce");
  tsrResult_t r =
      tsrAllReduce(sendbuff, recvbuff, count, dt(datatype), op(redop), c->tsr, stream(st));
  return finish(c, r, "ncclAllReduce",
                {CallKind::kAllReduce, sendbuff, recvbuff, count, datatype, redop, 0, st});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclBroadcast");
  tsrResult_t r = tsrBroadcast(sendbuff, recvbuff, count, dt(datatype), root, c->tsr, stream(st));
  return finish(c, r, "ncclBroadcast",
                {CallKind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, st});
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t st) {
  LOOKUP("ncclBcast");
  tsrResult_t r = tsrBroadcast(buff, buff, count, dt(datatype), root, c->tsr, stream(st));
  return finish(c, r, "ncclBcast",
                {CallKind::kBroadcast, buff, buff, count, datatype, ncclSum, root, st});
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t redop, int root, ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclReduce");
  tsrResult_t r =
      tsrReduce(sendbuff, recvbuff, count, dt(datatype), op(redop), root, c->tsr, stream(st));
  return finish(c, r, "ncclReduce",
                {CallKind::kReduce, sendbuff, recvbuff, count, datatype, redop, root, st});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclAllGather");
  tsrResult_t r = tsrAllGather(sendbuff, recvbuff, sendcount, dt(datatype), c->tsr, stream(st));
  return finish(c, r, "ncclAllGather",
                {CallKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, st});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t redop, ncclComm_t comm,
                               cudaStream_t st) {
  LOOKUP("ncclReduceScatter");
  tsrResult_t r =
      tsrReduceScatter(sendbuff, recvbuff, recvcount, dt(datatype), op(redop), c->tsr, stream(st));
  return finish(c, r, "ncclReduceScatter",
                {CallKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, redop, 0, st});
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclAlltoAll");
  tsrResult_t r = tsrAlltoAll(sendbuff, recvbuff, count, dt(datatype), c->tsr, stream(st));
  return finish(c, r, "ncclAlltoAll",
                {CallKind::kAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, st});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclSend");
  tsrResult_t r = tsrSend(sendbuff, count, dt(datatype), peer, c->tsr, stream(st));
  return finish(c, r, "ncclSend",
                {CallKind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer, st});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t st) {
  LOOKUP("ncclRecv");
  tsrResult_t r = tsrRecv(recvbuff, count, dt(datatype), peer, c->tsr, stream(st));
  return finish(c, r, "ncclRecv",
                {CallKind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, st});
}

// Gather and scatter are groups of sends and receives (as in NCCL): every rank sends its block
// to the root, which receives block p from rank p. In place: sendbuff == recvbuff + root's block;
// the root's own block is then already where it belongs.
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t st) {
  const char* api = "ncclGather";
  LOOKUP(api);
  size_t bytes = 0;
  if (ncclResult_t r = rootedBlock(c, api, root, datatype, count, recvbuff, "recvbuff", &bytes);
      r != ncclSuccess)
    return r;
  tsrGroupStart();
  tsrResult_t r = tsrSuccess;
  char* out = static_cast<char*>(recvbuff);
  bool inPlace =
      c->rank == root && out != nullptr && sendbuff == out + static_cast<size_t>(root) * bytes;
  if (!inPlace)  // in place implies the root
    r = tsrSend(sendbuff, count, dt(datatype), root, c->tsr, stream(st));
  if (c->rank == root)
    for (int p = 0; p < c->nranks && r == tsrSuccess; ++p) {
      if (p == root && inPlace) continue;
      r = tsrRecv(out + static_cast<size_t>(p) * bytes, count, dt(datatype), p, c->tsr, stream(st));
    }
  tsrResult_t e = tsrGroupEnd();
  return fromTsr(r != tsrSuccess ? r : e, api);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t st) {
  const char* api = "ncclScatter";
  LOOKUP(api);
  size_t bytes = 0;
  if (ncclResult_t r = rootedBlock(c, api, root, datatype, count, sendbuff, "sendbuff", &bytes);
      r != ncclSuccess)
    return r;
  const char* in = static_cast<const char*>(sendbuff);
  bool inPlace =
      c->rank == root && in != nullptr && recvbuff == in + static_cast<size_t>(root) * bytes;
  tsrGroupStart();
  tsrResult_t r = tsrSuccess;
  if (c->rank == root)
    for (int p = 0; p < c->nranks && r == tsrSuccess; ++p) {
      if (p == root && inPlace) continue;
      r = tsrSend(in + static_cast<size_t>(p) * bytes, count, dt(datatype), p, c->tsr, stream(st));
    }
  if (r == tsrSuccess && !inPlace)
    r = tsrRecv(recvbuff, count, dt(datatype), root, c->tsr, stream(st));
  tsrResult_t e = tsrGroupEnd();
  return fromTsr(r != tsrSuccess ? r : e, api);
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* redop, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  LOOKUP("ncclRedOpCreatePreMulSum");
  tsrRedOp_t t = tsrSum;
  tsrResult_t r = tsrRedOpCreatePreMulSum(redop != nullptr ? &t : nullptr, scalar, dt(datatype),
                                          static_cast<tsrScalarResidence_t>(residence), c->tsr);
  if (r == tsrSuccess) *redop = static_cast<ncclRedOp_t>(t);
  return fromTsr(r, "ncclRedOpCreatePreMulSum");
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t redop, ncclComm_t comm) {
  LOOKUP("ncclRedOpDestroy");
  return fromTsr(tsrRedOpDestroy(op(redop), c->tsr), "ncclRedOpDestroy");
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  LOOKUP("ncclCommRegister");
  return fromTsr(tsrCommRegister(c->tsr, buff, size, handle), "ncclCommRegister");
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  LOOKUP("ncclCommDeregister");
  return fromTsr(tsrCommDeregister(c->tsr, handle), "ncclCommDeregister");
}

}  // extern "C"

// A window is tessera's window (tsrCommWindowRegister: collective; device calls on buffers in
// windows at the same offsets on every rank run zero-copy plans); NCCL's symmetric-memory device
// API over windows is not implemented (errors.cpp).
struct ncclWindow_vidmem {
  ncclComm* comm;
  tsrWindow_t handle;
  void* base;
  size_t size;
};

extern "C" {

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  const char* api = "ncclCommWindowRegister";
  LOOKUP(api);
  if (win == nullptr) return fail(ncclInvalidArgument, "%s: win is NULL", api);
  *win = nullptr;
  if ((winFlags & ~NCCL_WIN_COLL_SYMMETRIC) != 0)
    return fail(ncclInvalidArgument, "%s: winFlags 0x%x has bits this NCCL does not define", api,
                winFlags);
  tsrWindow_t handle = nullptr;
  ncclResult_t r = fromTsr(tsrCommWindowRegister(c->tsr, buff, size, &handle, winFlags), api);
  if (r != ncclSuccess) return r;
  *win = new ncclWindow_vidmem{c, handle, buff, size};
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const char* api = "ncclCommWindowDeregister";
  LOOKUP(api);
  if (win == nullptr) return fail(ncclInvalidArgument, "%s: win is NULL", api);
  if (win->comm != c)
    return fail(ncclInvalidArgument, "%s: the window was registered with another communicator",
                api);
  ncclResult_t r = fromTsr(tsrCommWindowDeregister(c->tsr, win->handle), api);
  if (r == ncclSuccess) delete win;
  return r;
}

}  // extern "C"

extern "C" {

// Device memory of the current device where the calling thread has one (as NCCL), from
// tsrMemAllocDevice so that registrations of it zero-copy and ncclMemFree never waits for a
// communicator's resident kernel; host memory that the host's processes can map (tsrMemAlloc)
// where there is no GPU.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  const char* api = "ncclMemAlloc";
  if (ptr == nullptr) return fail(ncclInvalidArgument, "%s: ptr is NULL", api);
  *ptr = nullptr;
  if (size == 0) return fail(ncclInvalidArgument, "%s: size is 0", api);
  int ndev = 0;
  const bool gpu = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
  if (!gpu) cudaGetLastError();  // clear the sticky "no device" error of the runtime
  return fromTsr(gpu ? tsrMemAllocDevice(ptr, size, -1) : tsrMemAlloc(ptr, size), api);
}

// Either kind: tsrMemFree knows which it is, and refuses a pointer neither allocator returned.
ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;  // as free(NULL)
  return fromTsr(tsrMemFree(ptr), "ncclMemFree");
}

}  // extern "C"
