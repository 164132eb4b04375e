// TESSERA_NCCL_FALLBACK: what tessera cannot run goes to the real NCCL over a shadow communicator.
//
// Off by default. The real library is opened RTLD_LOCAL | RTLD_DEEPBIND, so its own references
// to nccl* symbols bind inside it, never to this library's exports of the same names. Each
// communicator made by ncclCommInitRank / ncclCommInitRankConfig (blocking) gets a shadow: rank
// 0 asks the real NCCL for a unique id, tessera broadcasts it, and every rank joins the real
// communicator on its current device. Calls forwarded today: a collective outside a group that
// tessera refuses with ncclInvalidUsage (coll.cpp).
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "nccl/shim.hpp"

namespace tessera::nccl {
namespace {

struct Real {
  void* lib = nullptr;
  std::string path;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  const char* (*getLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                           cudaStream_t) = nullptr;
};

template <class F>
bool bind(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

// Opens the library named by TESSERA_NCCL_FALLBACK once per process. Null with *why filled when
// the variable is unset (why empty) or the library cannot serve as a fallback.
const Real* openReal(std::string* why) {
  static std::once_flag once;
  static Real real;
  static std::string error;
  std::call_once(once, [] {
    const char* path = std::getenv("TESSERA_NCCL_FALLBACK");
    if (path == nullptr || *path == '\0') return;
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (lib == nullptr) {
      const char* e = dlerror();
      error = std::string("TESSERA_NCCL_FALLBACK=") + path + " cannot be opened: " + (e ? e : "?");
      return;
    }
    std::string missing;
    Real r;
    r.lib = lib;
    r.path = path;
    bind(lib, "ncclGetUniqueId", &r.getUniqueId, &missing);
    bind(lib, "ncclCommInitRank", &r.commInitRank, &missing);
    bind(lib, "ncclCommDestroy", &r.commDestroy, &missing);
    bind(lib, "ncclCommAbort", &r.commAbort, &missing);
    bind(lib, "ncclGetLastError", &r.getLastError, &missing);
    bind(lib, "ncclAllReduce", &r.allReduce, &missing);
    bind(lib, "ncclBroadcast", &r.broadcast, &missing);
    bind(lib, "ncclReduce", &r.reduce, &missing);
    bind(lib, "ncclAllGather", &r.allGather, &missing);
    bind(lib, "ncclReduceScatter", &r.reduceScatter, &missing);
    bind(lib, "ncclAlltoAll", &r.alltoAll, &missing);
    if (!missing.empty()) {
      error = std::string("TESSERA_NCCL_FALLBACK=") + path + " lacks " + missing;
      dlclose(lib);
      return;
    }
    // The path must name another library than this one (LD_PRELOAD'ed shim, or a symlink to it).
    Dl_info self{}, other{};
    if (dladdr(reinterpret_cast<void*>(&ncclGetUniqueId), &self) != 0 &&
        dladdr(reinterpret_cast<void*>(r.getUniqueId), &other) != 0 &&
        self.dli_fbase == other.dli_fbase) {
      error = std::string("TESSERA_NCCL_FALLBACK=") + path +
              " is tessera's own NCCL drop-in; it must name NVIDIA's libnccl.so.2";
      return;
    }
    real = r;
  });
  *why = error;
  return real.lib != nullptr ? &real : nullptr;
}

}  // namespace

ncclResult_t attachFallback(ncclComm* c) {
  std::string why;
  const Real* real = openReal(&why);
  if (real == nullptr) {
    if (!why.empty())
      return fail(ncclInvalidArgument, "%s", why.c_str());  // a bad setting fails the init
    return ncclSuccess;
  }
  // Rank 0 makes the real id; tessera broadcasts it (a collective every rank reaches here).
  ncclUniqueId id{};
  int ok = 1;
  if (c->rank == 0 && real->getUniqueId(&id) != ncclSuccess) ok = 0;
  struct {
    ncclUniqueId id;
    int ok;
  } msg{id, ok};
  tsrResult_t r = tsrBroadcast(&msg, &msg, sizeof msg, tsrUint8, 0, c->tsr, nullptr);
  if (r != tsrSuccess) return fromTsr(r, "the NCCL fallback's unique id broadcast");
  if (!msg.ok) {
    warn(
        "TESSERA_NCCL_FALLBACK: the real NCCL's ncclGetUniqueId failed on rank 0: "
        "calls tessera refuses will not be forwarded on this communicator");
    return ncclSuccess;
  }
  ncclComm_t shadow = nullptr;
  ncclResult_t rr = real->commInitRank(&shadow, c->nranks, msg.id, c->rank);
  if (rr != ncclSuccess) {
    warn(
        "TESSERA_NCCL_FALLBACK: the real NCCL (%s) could not create the shadow communicator "
        "(%d: %s): calls tessera refuses will not be forwarded on this communicator",
        real->path.c_str(), static_cast<int>(rr), real->getLastError(nullptr));
    return ncclSuccess;
  }
  c->shadow = shadow;
  info("rank %d of %d: shadow communicator on %s for calls tessera refuses", c->rank, c->nranks,
       real->path.c_str());
  return ncclSuccess;
}

void releaseFallback(ncclComm* c, bool abort) {
  if (c->shadow == nullptr) return;
  std::string why;
  const Real* real = openReal(&why);
  if (real != nullptr) {
    ncclComm_t shadow = static_cast<ncclComm_t>(c->shadow);
    (abort ? real->commAbort : real->commDestroy)(shadow);
  }
  c->shadow = nullptr;
}

ncclResult_t forward(ncclComm* c, const Call& k) {
  std::string why;
  const Real* real = openReal(&why);
  if (real == nullptr || c->shadow == nullptr)
    return fail(ncclInternalError, "forward: no shadow communicator");
  ncclComm_t s = static_cast<ncclComm_t>(c->shadow);
  ncclResult_t r = ncclInternalError;
  switch (k.kind) {
    case CallKind::kAllReduce:
      r = real->allReduce(k.send, k.recv, k.count, k.datatype, k.op, s, k.stream);
      break;
    case CallKind::kBroadcast:
      r = real->broadcast(k.send, k.recv, k.count, k.datatype, k.rootOrPeer, s, k.stream);
      break;
    case CallKind::kReduce:
      r = real->reduce(k.send, k.recv, k.count, k.datatype, k.op, k.rootOrPeer, s, k.stream);
      break;
    case CallKind::kAllGather:
      r = real->allGather(k.send, k.recv, k.count, k.datatype, s, k.stream);
      break;
    case CallKind::kReduceScatter:
      r = real->reduceScatter(k.send, k.recv, k.count, k.datatype, k.op, s, k.stream);
      break;
    case CallKind::kAlltoAll:
      r = real->alltoAll(k.send, k.recv, k.count, k.datatype, s, k.stream);
      break;
    case CallKind::kSend:
    case CallKind::kRecv:
      return fail(ncclInternalError, "forward: sends and receives are never forwarded");
  }
  if (r != ncclSuccess)
    return fail(r, "forwarded to the real NCCL, which failed: %s", real->getLastError(s));
  return ncclSuccess;
}

}  // namespace tessera::nccl
