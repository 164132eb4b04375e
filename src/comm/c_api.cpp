// The C API: argument checks on pointers, handle lookup, then the C++ API.
#include <cstring>

#include "comm/api_guard.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/fused_api.hpp"
#include "comm/group.hpp"
#include "comm/handles.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

using tessera::Communicator;
using tessera::guarded;
using tessera::Result;

namespace {
constexpr tessera::Subsys kLogSubsys = tessera::Subsys::kComm;

// Looks the handle up and sets the calling thread's rank for log lines and error sentences.
#define TSR_LOOKUP(h, api, var)                       \
  std::shared_ptr<Communicator> var;                  \
  TSR_CHECK(tessera::handleLookup((h), (api), &var)); \
  tessera::ScopedRank tsr_scoped_rank_(tessera::commImpl(*var)->rank())

// The same for collective and point-to-point calls: inside a group, a bad handle also fails
// tsrGroupEnd.
#define TSR_LOOKUP_CALL(h, api, var)                                          \
  std::shared_ptr<Communicator> var;                                          \
  TSR_CHECK(tessera::noteCallError(tessera::handleLookup((h), (api), &var))); \
  tessera::ScopedRank tsr_scoped_rank_(tessera::commImpl(*var)->rank())

}  // namespace

extern "C" {

TSR_API const char* tsrGetLastError(tsrComm_t /*comm*/) { return tessera::lastErrorMessage(); }

TSR_API tsrResult_t tsrGetVersion(int* version) {
  return guarded("tsrGetVersion", [&]() -> tsrResult_t {
    if (version == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrGetVersion: version is NULL");
    *version = TESSERA_VERSION_CODE;
    return tsrSuccess;
  });
}

TSR_API tsrResult_t tsrGetUniqueId(tsrUniqueId* uniqueId) {
  return guarded("tsrGetUniqueId",
                 [&]() -> tsrResult_t { return Communicator::getUniqueId(uniqueId); });
}

TSR_API tsrResult_t tsrCommInitRankConfig(tsrComm_t* comm, int nranks, tsrUniqueId commId, int rank,
                                          tsrConfig_t* config) {
  return guarded("tsrCommInitRankConfig", [&]() -> tsrResult_t {
    if (comm == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommInitRank: comm is NULL");
    *comm = nullptr;
    std::unique_ptr<Communicator> c;
    Result r = Communicator::initRank(nranks, commId, rank, config, &c);
    if (c != nullptr) *comm = tessera::handleRegister(std::move(c));
    return r;
  });
}

TSR_API tsrResult_t tsrCommInitRank(tsrComm_t* comm, int nranks, tsrUniqueId commId, int rank) {
  return guarded("tsrCommInitRank", [&]() -> tsrResult_t {
    return tsrCommInitRankConfig(comm, nranks, commId, rank, nullptr);
  });
}

TSR_API tsrResult_t tsrCommInitAll(tsrComm_t* comms, int ndev, const int* devlist) {
  return guarded("tsrCommInitAll", [&]() -> tsrResult_t {
    if (comms == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommInitAll: comms is NULL");
    std::vector<std::unique_ptr<Communicator>> cs;
    TSR_CHECK(Communicator::initAll(ndev, devlist, &cs));
    for (int i = 0; i < ndev; ++i)
      comms[i] = tessera::handleRegister(std::move(cs[static_cast<size_t>(i)]));
    return tsrSuccess;
  });
}

TSR_API tsrResult_t tsrCommSplit(tsrComm_t comm, int color, int key, tsrComm_t* newcomm,
                                 tsrConfig_t* config) {
  return guarded("tsrCommSplit", [&]() -> tsrResult_t {
    if (newcomm == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommSplit: newcomm is NULL");
    *newcomm = nullptr;
    TSR_LOOKUP(comm, "tsrCommSplit", c);
    std::unique_ptr<Communicator> child;
    Result r = c->split(color, key, config, &child);
    if (child != nullptr) *newcomm = tessera::handleRegister(std::move(child));
    return r;
  });
}

TSR_API tsrResult_t tsrCommShrink(tsrComm_t comm, const int* excludeRanksList,
                                  int excludeRanksCount, tsrComm_t* newcomm, tsrConfig_t* config,
                                  int shrinkFlags) {
  return guarded("tsrCommShrink", [&]() -> tsrResult_t {
    if (newcomm == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    if (excludeRanksCount < 0)
      return TSR_FAIL(tsrInvalidArgument, "tsrCommShrink: excludeRanksCount is %d",
                      excludeRanksCount);
    if (excludeRanksList == nullptr && excludeRanksCount > 0)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrCommShrink: excludeRanksList is NULL but excludeRanksCount is %d",
                      excludeRanksCount);
    TSR_LOOKUP(comm, "tsrCommShrink", c);
    std::vector<int> excluded;
    if (excludeRanksCount > 0)
      excluded.assign(excludeRanksList, excludeRanksList + excludeRanksCount);
    std::unique_ptr<Communicator> child;
    Result r = c->shrink(excluded, config, shrinkFlags, &child);
    if (child != nullptr) *newcomm = tessera::handleRegister(std::move(child));
    return r;
  });
}

TSR_API tsrResult_t tsrCommGetUniqueId(tsrComm_t comm, tsrUniqueId* uniqueId) {
  return guarded("tsrCommGetUniqueId", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommGetUniqueId", c);
    return c->growUniqueId(uniqueId);
  });
}

TSR_API tsrResult_t tsrCommGrow(tsrComm_t comm, int nranks, const tsrUniqueId* uniqueId, int rank,
                                tsrComm_t* newcomm, tsrConfig_t* config) {
  return guarded("tsrCommGrow", [&]() -> tsrResult_t {
    if (newcomm == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommGrow: newcomm is NULL");
    *newcomm = nullptr;
    std::unique_ptr<Communicator> grown;
    Result r;
    if (comm == nullptr) {
      r = Communicator::grow(nullptr, nranks, uniqueId, rank, config, &grown);
    } else {
      TSR_LOOKUP(comm, "tsrCommGrow", c);
      r = Communicator::grow(c.get(), nranks, uniqueId, rank, config, &grown);
    }
    if (grown != nullptr) *newcomm = tessera::handleRegister(std::move(grown));
    return r;
  });
}

TSR_API tsrResult_t tsrCommFinalize(tsrComm_t comm) {
  return guarded("tsrCommFinalize", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommFinalize", c);
    return c->finalize();
  });
}

TSR_API tsrResult_t tsrCommDestroy(tsrComm_t comm) {
  return guarded("tsrCommDestroy", [&]() -> tsrResult_t {
    std::shared_ptr<Communicator> c;
    TSR_CHECK(tessera::handleRemove(comm, "tsrCommDestroy", &c));
    // Another reference is a call of another thread still inside this rank: it must return, not
    // wait for its deadline, so the rank stops as on abort.
    if (c.use_count() > 1) return c->abort();
    return tsrSuccess;  // the rank's resources go with the last reference
  });
}

TSR_API tsrResult_t tsrCommAbort(tsrComm_t comm) {
  return guarded("tsrCommAbort", [&]() -> tsrResult_t {
    std::shared_ptr<Communicator> c;
    TSR_CHECK(tessera::handleRemove(comm, "tsrCommAbort", &c));
    return c->abort();
  });
}

TSR_API tsrResult_t tsrCommRevoke(tsrComm_t comm, int revokeFlags) {
  return guarded("tsrCommRevoke", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommRevoke", c);
    return c->revoke(revokeFlags);
  });
}

TSR_API tsrResult_t tsrCommGetAsyncError(tsrComm_t comm, tsrResult_t* asyncError) {
  return guarded("tsrCommGetAsyncError", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommGetAsyncError", c);
    return c->asyncError(asyncError);
  });
}

TSR_API tsrResult_t tsrCommCount(const tsrComm_t comm, int* count) {
  return guarded("tsrCommCount", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommCount", c);
    return c->count(count);
  });
}

TSR_API tsrResult_t tsrCommCuDevice(const tsrComm_t comm, int* device) {
  return guarded("tsrCommCuDevice", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommCuDevice", c);
    return c->cuDevice(device);
  });
}

TSR_API tsrResult_t tsrCommUserRank(const tsrComm_t comm, int* rank) {
  return guarded("tsrCommUserRank", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommUserRank", c);
    return c->userRank(rank);
  });
}

TSR_API tsrResult_t tsrRedOpCreatePreMulSum(tsrRedOp_t* op, void* scalar, tsrDataType_t datatype,
                                            tsrScalarResidence_t residence, tsrComm_t comm) {
  return guarded("tsrRedOpCreatePreMulSum", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrRedOpCreatePreMulSum", c);
    return c->redOpCreatePreMulSum(op, scalar, datatype, residence);
  });
}

TSR_API tsrResult_t tsrRedOpDestroy(tsrRedOp_t op, tsrComm_t comm) {
  return guarded("tsrRedOpDestroy", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrRedOpDestroy", c);
    return c->redOpDestroy(op);
  });
}

TSR_API tsrResult_t tsrAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tsrDataType_t datatype, tsrRedOp_t op, tsrComm_t comm,
                                 tsrStream_t stream) {
  return guarded("tsrAllReduce", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrAllReduce", c);
    return c->allReduce(sendbuff, recvbuff, count, datatype, op, stream);
  });
}

TSR_API tsrResult_t tsrReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tsrDataType_t datatype, tsrRedOp_t op, tsrComm_t comm,
                                     tsrStream_t stream) {
  return guarded("tsrReduceScatter", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrReduceScatter", c);
    return c->reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, stream);
  });
}

TSR_API tsrResult_t tsrAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 tsrDataType_t datatype, tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrAllGather", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrAllGather", c);
    return c->allGather(sendbuff, recvbuff, sendcount, datatype, stream);
  });
}

TSR_API tsrResult_t tsrBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                 tsrDataType_t datatype, int root, tsrComm_t comm,
                                 tsrStream_t stream) {
  return guarded("tsrBroadcast", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrBroadcast", c);
    return c->broadcast(sendbuff, recvbuff, count, datatype, root, stream);
  });
}

TSR_API tsrResult_t tsrReduce(const void* sendbuff, void* recvbuff, size_t count,
                              tsrDataType_t datatype, tsrRedOp_t op, int root, tsrComm_t comm,
                              tsrStream_t stream) {
  return guarded("tsrReduce", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrReduce", c);
    return c->reduce(sendbuff, recvbuff, count, datatype, op, root, stream);
  });
}

TSR_API tsrResult_t tsrAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                tsrDataType_t datatype, tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrAlltoAll", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrAlltoAll", c);
    return c->alltoAll(sendbuff, recvbuff, count, datatype, stream);
  });
}

TSR_API tsrResult_t tsrAlltoAllv(const void* sendbuff, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                 const size_t* rdispls, tsrDataType_t datatype, tsrComm_t comm,
                                 tsrStream_t stream) {
  return guarded("tsrAlltoAllv", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrAlltoAllv", c);
    return c->alltoAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype,
                        stream);
  });
}

TSR_API tsrResult_t tsrSend(const void* sendbuff, size_t count, tsrDataType_t datatype, int peer,
                            tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrSend", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrSend", c);
    return c->send(sendbuff, count, datatype, peer, stream);
  });
}

TSR_API tsrResult_t tsrRecv(void* recvbuff, size_t count, tsrDataType_t datatype, int peer,
                            tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrRecv", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrRecv", c);
    return c->recv(recvbuff, count, datatype, peer, stream);
  });
}

TSR_API tsrResult_t tsrProbe(int peer, tsrComm_t comm, int* source, size_t* bytes) {
  return guarded("tsrProbe", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrProbe", c);
    return c->probe(peer, source, bytes);
  });
}

TSR_API tsrResult_t tsrGroupStart(void) {
  return guarded("tsrGroupStart", [&]() -> tsrResult_t { return Communicator::groupStart(); });
}

TSR_API tsrResult_t tsrGroupEnd(void) {
  return guarded("tsrGroupEnd", [&]() -> tsrResult_t { return Communicator::groupEnd(); });
}

TSR_API tsrResult_t tsrGroupSimulateEnd(double* estimatedTimeUs) {
  return guarded("tsrGroupSimulateEnd",
                 [&]() -> tsrResult_t { return tessera::groupSimulateEnd(estimatedTimeUs); });
}

TSR_API tsrResult_t tsrCommRegister(const tsrComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("tsrCommRegister", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommRegister", c);
    return c->registerBuffer(buff, size, handle);
  });
}

TSR_API tsrResult_t tsrCommDeregister(const tsrComm_t comm, void* handle) {
  return guarded("tsrCommDeregister", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommDeregister", c);
    return c->deregisterBuffer(handle);
  });
}

TSR_API tsrResult_t tsrCommWindowRegister(tsrComm_t comm, void* buff, size_t size, tsrWindow_t* win,
                                          int flags) {
  return guarded("tsrCommWindowRegister", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommWindowRegister", c);
    return c->windowRegister(buff, size, win, flags);
  });
}

TSR_API tsrResult_t tsrCommWindowDeregister(tsrComm_t comm, tsrWindow_t win) {
  return guarded("tsrCommWindowDeregister", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrCommWindowDeregister", c);
    return c->windowDeregister(win);
  });
}

TSR_API tsrResult_t tsrMemAlloc(void** ptr, size_t size) {
  return guarded("tsrMemAlloc", [&]() -> tsrResult_t { return Communicator::memAlloc(ptr, size); });
}

TSR_API tsrResult_t tsrMemAllocDevice(void** ptr, size_t size, int device) {
  return guarded("tsrMemAllocDevice",
                 [&]() -> tsrResult_t { return Communicator::memAllocDevice(ptr, size, device); });
}

TSR_API tsrResult_t tsrMemFree(void* ptr) {
  return guarded("tsrMemFree", [&]() -> tsrResult_t { return Communicator::memFree(ptr); });
}

TSR_API tsrResult_t tsrFusedGemm(const tsrFusedDesc_t* desc, tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrFusedGemm", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrFusedGemm", c);
    return tessera::fusedApiCall(*c, "tsrFusedGemm", desc, stream);
  });
}

TSR_API tsrResult_t tsrFusedGemmWorkspaceSize(const tsrFusedDesc_t* desc, int onDevice,
                                              tsrComm_t comm, size_t* bytes) {
  return guarded("tsrFusedGemmWorkspaceSize", [&]() -> tsrResult_t {
    TSR_LOOKUP(comm, "tsrFusedGemmWorkspaceSize", c);
    return tessera::fusedApiWorkspaceSize(*c, "tsrFusedGemmWorkspaceSize", desc, onDevice, bytes);
  });
}

// The positional forms: a descriptor, then the same path.
TSR_API tsrResult_t tsrGemmReduceScatter(const void* A, const void* B, const void* bias, void* C,
                                         size_t M, size_t N, size_t K, tsrDataType_t intype,
                                         tsrDataType_t outtype, int flags, tsrComm_t comm,
                                         tsrStream_t stream) {
  return guarded("tsrGemmReduceScatter", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrGemmReduceScatter", c);
    const tsrFusedDesc_t d = tessera::fusedDesc(tsrFusedGemmReduceScatter, A, B, bias, C, nullptr,
                                                M, N, K, intype, outtype, flags);
    return tessera::fusedApiCall(*c, "tsrGemmReduceScatter", &d, stream);
  });
}

TSR_API tsrResult_t tsrAllGatherGemm(const void* A, const void* B, const void* bias, void* C,
                                     void* gatheredA, size_t M, size_t N, size_t K,
                                     tsrDataType_t intype, tsrDataType_t outtype, int flags,
                                     tsrComm_t comm, tsrStream_t stream) {
  return guarded("tsrAllGatherGemm", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrAllGatherGemm", c);
    const tsrFusedDesc_t d = tessera::fusedDesc(tsrFusedAllGatherGemm, A, B, bias, C, gatheredA, M,
                                                N, K, intype, outtype, flags);
    return tessera::fusedApiCall(*c, "tsrAllGatherGemm", &d, stream);
  });
}

TSR_API tsrResult_t tsrGemmAllReduce(const void* A, const void* B, const void* bias, void* C,
                                     size_t M, size_t N, size_t K, tsrDataType_t intype,
                                     tsrDataType_t outtype, int flags, tsrComm_t comm,
                                     tsrStream_t stream) {
  return guarded("tsrGemmAllReduce", [&]() -> tsrResult_t {
    TSR_LOOKUP_CALL(comm, "tsrGemmAllReduce", c);
    const tsrFusedDesc_t d = tessera::fusedDesc(tsrFusedGemmAllReduce, A, B, bias, C, nullptr, M, N,
                                                K, intype, outtype, flags);
    return tessera::fusedApiCall(*c, "tsrGemmAllReduce", &d, stream);
  });
}

TSR_API tsrResult_t tsrFusedWorkspaceSize(tsrFusedOp_t op, size_t M, size_t N, size_t K,
                                          tsrDataType_t intype, tsrDataType_t outtype, int flags,
                                          int onDevice, tsrComm_t comm, size_t* bytes) {
  return guarded("tsrFusedWorkspaceSize", [&]() -> tsrResult_t {
    if (bytes == nullptr)
      return TSR_FAIL(tsrInvalidArgument, "tsrFusedWorkspaceSize: bytes is NULL");
    TSR_LOOKUP(comm, "tsrFusedWorkspaceSize", c);
    const tsrFusedDesc_t d = tessera::fusedDesc(op, nullptr, nullptr, nullptr, nullptr, nullptr, M,
                                                N, K, intype, outtype, flags);
    return tessera::fusedApiWorkspaceSize(*c, "tsrFusedWorkspaceSize", &d, onDevice, bytes);
  });
}

}  // extern "C"
