// tessera C++ API. The C API (tessera.h) is a thin wrapper over these classes.
//
// Calls return tsrResult_t rather than throw, so C and C++ callers see the same codes and the same
// sentences (tsrGetLastError). A Communicator owns its rank of a communicator: destroying the
// object destroys the rank (tsrCommDestroy); abort() tears it down without waiting for peers.
#pragma once

#include <memory>
#include <vector>

#include "tessera/tessera.h"

namespace tessera {

class CommImpl;     // internal (src/comm): the rank itself
struct CommAccess;  // internal (src/comm/comm_access.hpp): the library's own way in

class TSR_API Communicator {
 public:
  // tsrGetUniqueId: starts a bootstrap root in this process and describes it in `id`.
  static tsrResult_t getUniqueId(tsrUniqueId* id);

  // One rank of an nranks communicator whose ranks all use `id` (any process, any host).
  // config may be null (defaults, TESSERA_* variables). With config->blocking == 0 it returns
  // tsrInProgress at once; poll asyncError() until it is no longer tsrInProgress.
  static tsrResult_t initRank(int nranks, const tsrUniqueId& id, int rank,
                              const tsrConfig_t* config, std::unique_ptr<Communicator>* out);

  // `ndev` ranks in this process (one thread each during creation). devlist may be null.
  static tsrResult_t initAll(int ndev, const int* devlist,
                             std::vector<std::unique_ptr<Communicator>>* out);

  // Collective over this communicator: ranks with the same color form a new communicator,
  // ordered by (key, rank). TSR_SPLIT_NOCOLOR: *out stays null. config null: inherit ours.
  tsrResult_t split(int color, int key, const tsrConfig_t* config,
                    std::unique_ptr<Communicator>* out);
  // tsrCommShrink: collective over the ranks not in `excluded` (which take no part and may be
  // dead); they form a new communicator in rank order. flags: TSR_SHRINK_DEFAULT or
  // TSR_SHRINK_ABORT (abort this one's work first, after a failure).
  tsrResult_t shrink(const std::vector<int>& excluded, const tsrConfig_t* config, int flags,
                     std::unique_ptr<Communicator>* out);
  // tsrCommGetUniqueId: an id for one grow of this communicator (a root in this process).
  tsrResult_t growUniqueId(tsrUniqueId* id);
  // tsrCommGrow. existing: this rank's communicator (it keeps its rank; rank must be -1), or
  // null for a new rank (id required, rank its own). config null: inherit existing's, or the
  // defaults for a new rank.
  static tsrResult_t grow(Communicator* existing, int nranks, const tsrUniqueId* id, int rank,
                          const tsrConfig_t* config, std::unique_ptr<Communicator>* out);

  // Collective: completes this rank's outstanding work (calls running on other threads, device
  // calls enqueued on streams) and waits for every rank, each within its deadline (tessera.h,
  // tsrCommFinalize); the communicator can then only be destroyed.
  tsrResult_t finalize();
  // Stops at once: wakes every blocked operation of this rank, which then fails.
  tsrResult_t abort();
  // tsrCommRevoke: this rank's calls, running and later, fail with tsrRemoteError, and every
  // other rank is told so; then only shrink, split and destroy.
  tsrResult_t revoke(int flags);
  // tsrSuccess, tsrInProgress while a non-blocking init runs, or the error that broke it.
  tsrResult_t asyncError(tsrResult_t* error) const;

  tsrResult_t count(int* nranks) const;
  tsrResult_t userRank(int* rank) const;
  tsrResult_t cuDevice(int* device) const;

  tsrResult_t redOpCreatePreMulSum(tsrRedOp_t* op, const void* scalar, tsrDataType_t datatype,
                                   tsrScalarResidence_t residence);
  tsrResult_t redOpDestroy(tsrRedOp_t op);

  // Collectives and point-to-point, as tsrAllReduce ... tsrRecv (tessera.h says what each
  // count and buffer is). Host buffers run on the host executor and the call returns when the
  // result is in place (inside a group: at the outermost groupEnd); `stream` is then unused.
  tsrResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, tsrDataType_t datatype,
                        tsrRedOp_t op, tsrStream_t stream = nullptr);
  tsrResult_t reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                            tsrDataType_t datatype, tsrRedOp_t op, tsrStream_t stream = nullptr);
  tsrResult_t allGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        tsrDataType_t datatype, tsrStream_t stream = nullptr);
  tsrResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, tsrDataType_t datatype,
                        int root, tsrStream_t stream = nullptr);
  tsrResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, tsrDataType_t datatype,
                     tsrRedOp_t op, int root, tsrStream_t stream = nullptr);
  tsrResult_t alltoAll(const void* sendbuff, void* recvbuff, size_t count, tsrDataType_t datatype,
                       tsrStream_t stream = nullptr);
  tsrResult_t alltoAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                        void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                        tsrDataType_t datatype, tsrStream_t stream = nullptr);
  tsrResult_t send(const void* sendbuff, size_t count, tsrDataType_t datatype, int peer,
                   tsrStream_t stream = nullptr);
  // tsrProbe: the next host message from peer (TSR_ANY_SOURCE: any linked rank), not received.
  tsrResult_t probe(int peer, int* source, size_t* bytes);
  tsrResult_t recv(void* recvbuff, size_t count, tsrDataType_t datatype, int peer,
                   tsrStream_t stream = nullptr);

  // tsrGroupStart / tsrGroupEnd: per calling thread, nestable, over any communicators.
  static tsrResult_t groupStart();
  static tsrResult_t groupEnd();

  // tsrCommRegister / tsrCommDeregister (local).
  tsrResult_t registerBuffer(void* buff, size_t size, void** handle);
  tsrResult_t deregisterBuffer(void* handle);
  // tsrCommWindowRegister / tsrCommWindowDeregister (collective).
  tsrResult_t windowRegister(void* buff, size_t size, tsrWindow_t* win, int flags);
  tsrResult_t windowDeregister(tsrWindow_t win);

  // tsrMemAlloc / tsrMemAllocDevice / tsrMemFree: host memory that the processes of this host can
  // share; device memory that peers map once registered.
  static tsrResult_t memAlloc(void** ptr, size_t size);
  static tsrResult_t memAllocDevice(void** ptr, size_t size, int device);
  static tsrResult_t memFree(void* ptr);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

 private:
  // Opaque to users: only the library reaches the implementation (CommAccess).
  friend struct CommAccess;
  explicit Communicator(std::shared_ptr<CommImpl> impl);
  std::shared_ptr<CommImpl> impl_;
};

// A fused GEMM + communication op of one communicator rank with its own workspace, kept between
// calls (tsrGemmReduceScatter and friends use one workspace per communicator instead). Creating
// one is collective (every rank, same arguments); so is every run(). The shape given to create()
// is the largest run() may use; smaller shapes reuse the workspace. Destroy it before its
// communicator (it uses the communicator's transports).
class TSR_API FusedGemm {
 public:
  // onDevice: the buffers of run() will be device memory of the communicator's GPU.
  static tsrResult_t create(Communicator& comm, tsrFusedOp_t op, size_t maxM, size_t maxN,
                            size_t maxK, tsrDataType_t intype, tsrDataType_t outtype, int flags,
                            bool onDevice, std::unique_ptr<FusedGemm>* out);
  // Arguments as the C function of the op (gatheredA: AllGather only, may be null).
  tsrResult_t run(const void* A, const void* B, const void* bias, void* C, void* gatheredA,
                  size_t M, size_t N, size_t K, tsrStream_t stream = nullptr);
  size_t workspaceBytes() const;
  ~FusedGemm();
  FusedGemm(const FusedGemm&) = delete;
  FusedGemm& operator=(const FusedGemm&) = delete;

 private:
  struct Impl;  // internal (src/comm/fused.cpp)
  explicit FusedGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
