/*
 * tessera: collective communication for GPUs (C API).
 *
 * The shape and names follow NCCL with the `tsr` prefix, so a user of NCCL can read this header
 * without a manual. Every function returns a tsrResult_t; tsrGetLastError() gives the sentence
 * behind the last failure of the calling thread.
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <stddef.h>
#include <stdint.h>

#include "tessera/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TSR_API __attribute__((visibility("default")))
#else
#define TSR_API
#endif

/* The enums are int-sized in C and C++ alike; in C++ every int is a value of them (a fixed
 * underlying type), so a C caller's out-of-range value reaches the library's checks, which
 * refuse it, instead of being undefined behaviour there. */
#ifdef __cplusplus
#define TSR_ENUM_INT : int
#else
#define TSR_ENUM_INT
#endif

/* ---- Result codes (values mirror NCCL's ncclResult_t) ---------------------------------------- */
typedef enum TSR_ENUM_INT {
  tsrSuccess = 0,
  tsrUnhandledCudaError = 1,
  tsrSystemError = 2,
  tsrInternalError = 3,
  tsrInvalidArgument = 4,
  tsrInvalidUsage = 5,
  tsrRemoteError = 6,
  tsrInProgress = 7,
  tsrTimeout = 8,
  tsrNumResults = 9
} tsrResult_t;

/* ---- Datatypes (values mirror NCCL's where NCCL has the type) ------------------------------ */
typedef enum TSR_ENUM_INT {
  tsrInt8 = 0,
  tsrChar = 0,
  tsrUint8 = 1,
  tsrInt32 = 2,
  tsrInt = 2,
  tsrUint32 = 3,
  tsrInt64 = 4,
  tsrUint64 = 5,
  tsrFloat16 = 6,
  tsrHalf = 6,
  tsrFloat32 = 7,
  tsrFloat = 7,
  tsrFloat64 = 8,
  tsrDouble = 8,
  tsrBfloat16 = 9,
  tsrFloat8e4m3 = 10, /* OCP FP8 E4M3FN: no infinities, saturating conversions */
  tsrFloat8e5m2 = 11, /* OCP FP8 E5M2: IEEE-like, with infinities */
  tsrNumTypes = 12
} tsrDataType_t;

/* ---- Reduction operations ---------------------------------------------------------------- */
typedef enum TSR_ENUM_INT {
  tsrSum = 0,
  tsrProd = 1,
  tsrMax = 2,
  tsrMin = 3,
  tsrAvg = 4,
  tsrNumOps = 5,
  /* Handles returned by tsrRedOpCreatePreMulSum start here. */
  tsrMaxRedOp = 0x7fffffff
} tsrRedOp_t;

typedef enum TSR_ENUM_INT {
  tsrScalarDevice = 0,       /* the scalar lives in device memory, read when the call runs */
  tsrScalarHostImmediate = 1 /* the scalar is read from host memory when the op is created */
} tsrScalarResidence_t;

/* ---- Communicator ------------------------------------------------------------------------ */
typedef struct tsrComm* tsrComm_t;

#define TSR_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TSR_UNIQUE_ID_BYTES];
} tsrUniqueId;

/* Color for ranks that take no part in a split: they get a NULL communicator. */
#define TSR_SPLIT_NOCOLOR (-1)

/* Values of tsrConfig_t.device. */
#define TSR_DEVICE_CURRENT                                                                     \
  (-2)                       /* the calling thread's current CUDA device, or host-only if none \
                              */
#define TSR_DEVICE_HOST (-1) /* host-only rank: no CUDA device is touched */

/* A field left at TSR_CONFIG_UNDEF_INT / TSR_CONFIG_UNDEF_PTR takes its default (or the value
 * of the matching TESSERA_* environment variable). */
#define TSR_CONFIG_UNDEF_INT (-2147483647 - 1)
#define TSR_CONFIG_UNDEF_PTR NULL

typedef struct {
  size_t size; /* sizeof(tsrConfig_t), set by TSR_CONFIG_INITIALIZER */
  unsigned int magic;
  unsigned int version;
  int blocking; /* 1: init returns when done; 0: returns tsrInProgress, poll tsrCommGetAsyncError */
  /* 0 or 1 (no thread-block clusters: tessera's kernels launch without them); larger values are
   * refused with tsrInvalidArgument. */
  int cgaClusterSize;
  int minCTAs; /* device executor: the fewest resident CTAs per communicator (TESSERA_MIN_CTAS) */
  int maxCTAs; /* device executor: the resident grid's CTAs (TESSERA_MAX_CTAS), >= minCTAs */
  /* NULL: automatic. Ranks on different hosts always use the ucx transport, so "UCX" (in a
   * build with UCX) is the only name accepted; any other is refused with tsrInvalidArgument. */
  const char* netName;
  /* 0 only: a split child never shares its parent's resources (it makes its own transports,
   * scratch and executors); 1 is refused with tsrInvalidArgument. */
  int splitShare;
  int device; /* CUDA device index, TSR_DEVICE_HOST, or TSR_DEVICE_CURRENT */
  /* Milliseconds any wait of this communicator may take before it fails with tsrTimeout: the
   * bootstrap's (TESSERA_BOOTSTRAP_TIMEOUT) and the transports' and executors'
   * (TESSERA_TRANSPORT_TIMEOUT). Undefined: those variables. A split child inherits it (its
   * bootstrap always keeps the parent's deadline). */
  int timeoutMs;
} tsrConfig_t;

#define TSR_CONFIG_MAGIC 0x7e55e2a1u
#define TSR_CONFIG_INITIALIZER                                                                  \
  {                                                                                             \
    sizeof(tsrConfig_t), TSR_CONFIG_MAGIC, TESSERA_VERSION_CODE, TSR_CONFIG_UNDEF_INT,          \
        TSR_CONFIG_UNDEF_INT, TSR_CONFIG_UNDEF_INT, TSR_CONFIG_UNDEF_INT, TSR_CONFIG_UNDEF_PTR, \
        TSR_CONFIG_UNDEF_INT, TSR_CONFIG_UNDEF_INT, TSR_CONFIG_UNDEF_INT                        \
  }

/* ---- Errors and version ------------------------------------------------------------------ */
TSR_API const char* tsrGetErrorString(tsrResult_t result);
/* The sentence behind the last error returned to the calling thread ("" if none). */
TSR_API const char* tsrGetLastError(tsrComm_t comm);
TSR_API tsrResult_t tsrGetVersion(int* version);

/* ---- Communicator creation and teardown --------------------------------------------------- */
/* Fills `uniqueId` with the address of a bootstrap root started in the calling process. The
 * root serves one communicator of up to the nranks that connect with this id. */
TSR_API tsrResult_t tsrGetUniqueId(tsrUniqueId* uniqueId);
TSR_API tsrResult_t tsrCommInitRank(tsrComm_t* comm, int nranks, tsrUniqueId commId, int rank);
TSR_API tsrResult_t tsrCommInitRankConfig(tsrComm_t* comm, int nranks, tsrUniqueId commId, int rank,
                                          tsrConfig_t* config);
/* ndev ranks in the calling process, one thread each. devlist: CUDA device of each rank, or NULL
 * for rank i on device i mod (number of CUDA devices), or host-only ranks where there is none. */
TSR_API tsrResult_t tsrCommInitAll(tsrComm_t* comms, int ndev, const int* devlist);
TSR_API tsrResult_t tsrCommSplit(tsrComm_t comm, int color, int key, tsrComm_t* newcomm,
                                 tsrConfig_t* config);
/* Like ncclCommShrink (NCCL 2.27): the ranks NOT in excludeRanksList call it, and only they take
 * part (the excluded ones may be dead: nothing waits for them); they form *newcomm, numbered in
 * their order in comm. Every caller must pass the same list. shrinkFlags: TSR_SHRINK_DEFAULT
 * (comm stays usable), or TSR_SHRINK_ABORT after a failure: this rank's work on comm is aborted
 * first (calls blocked in other threads return), and comm is then only fit for tsrCommDestroy.
 * config NULL: inherit comm's. Recovery after a peer died: tsrCommShrink(comm, dead, n,
 * &newcomm, NULL, TSR_SHRINK_ABORT), tsrCommDestroy(comm), carry on with newcomm. */
#define TSR_SHRINK_DEFAULT 0x00
#define TSR_SHRINK_ABORT 0x01
TSR_API tsrResult_t tsrCommShrink(tsrComm_t comm, const int* excludeRanksList,
                                  int excludeRanksCount, tsrComm_t* newcomm, tsrConfig_t* config,
                                  int shrinkFlags);
/* Like ncclCommGetUniqueId (NCCL 2.29): an id for tsrCommGrow of comm, from one existing rank
 * (it starts a bootstrap root in the calling process, as tsrGetUniqueId). One at a time: a second
 * call before that rank's tsrCommGrow is refused (tsrInvalidUsage). The id serves one grow. */
TSR_API tsrResult_t tsrCommGetUniqueId(tsrComm_t comm, tsrUniqueId* uniqueId);
/* Like ncclCommGrow (NCCL 2.29): the ranks of comm and new ranks form *newcomm of nranks ranks
 * (more than comm has). Existing ranks keep their rank and pass rank -1; the one that called
 * tsrCommGetUniqueId passes that id, the others NULL (they learn it from it). New ranks pass
 * comm NULL, the id and a rank of their own in [comm's size, nranks). Every existing rank takes
 * part (a shrink first drops the dead). config NULL: an existing rank inherits comm's, a new rank
 * takes the defaults. comm stays usable; destroy it when done. A rank count or id that the
 * existing ranks disagree on fails on every one of them with a sentence (tsrInvalidArgument). */
TSR_API tsrResult_t tsrCommGrow(tsrComm_t comm, int nranks, const tsrUniqueId* uniqueId, int rank,
                                tsrComm_t* newcomm, tsrConfig_t* config);
/* Collective: every rank calls it. First completes this rank's outstanding work: calls on this
 * communicator still running on other threads (host calls until their results are in place,
 * fused calls included) and the collectives and send/recv groups enqueued on device streams
 * (persistent mode; with TESSERA_LAUNCH=kernel they complete in stream order only), each within
 * a little more than the calls' own deadline (tsrConfig_t.timeoutMs, else
 * TESSERA_TRANSPORT_TIMEOUT); then waits (within the bootstrap deadline) until every rank got
 * here, so no rank tears down what a peer may still use. A wait past its deadline is tsrTimeout
 * naming what was waited for. Calls started once it has begun are refused (tsrInvalidUsage), and
 * so is a finalize while this thread's open group holds calls of the communicator (end the group
 * first). Afterwards only tsrCommDestroy is allowed. */
TSR_API tsrResult_t tsrCommFinalize(tsrComm_t comm);
/* Local: releases this rank (call tsrCommFinalize first for an orderly end). The handle is dead
 * afterwards: any use returns tsrInvalidUsage. */
TSR_API tsrResult_t tsrCommDestroy(tsrComm_t comm);
/* Local: stops at once. Operations of this rank blocked in other threads return an error. Every
 * other rank is told (a revocation notice, as tsrCommRevoke's), so their calls on the
 * communicator fail at once with tsrRemoteError naming this rank; a rank the notice cannot reach
 * sees this one gone when its process exits (shm and ucx notice a dead process) or at its deadline
 * (TESSERA_TRANSPORT_TIMEOUT). The handle is dead afterwards. */
TSR_API tsrResult_t tsrCommAbort(tsrComm_t comm);
/* Like ncclCommRevoke (NCCL 2.28.7), and more: local to call, but every rank hears of it. This
 * rank's calls on comm, running in other threads and later, fail with tsrRemoteError naming the
 * rank that revoked it and why; every other rank gets a revocation notice (over sockets of its
 * own, not the failed transports; TESSERA_SOCKET_IFNAME picks the interface) and its calls fail
 * likewise, within a moment. A communicator revokes itself when one of its calls meets a fault
 * (tsrRemoteError, tsrTimeout or tsrSystemError: a dead peer, a broken link, a deadline), and when
 * a rank aborts it. Returns when this rank's work has stopped (tsrCommGetAsyncError: tsrSuccess
 * after this call, the fault's code after a fault or a peer's notice). Afterwards only
 * tsrCommShrink (the usual next step: tsrCommShrink(comm, dead, n, &newcomm, NULL,
 * TSR_SHRINK_DEFAULT)), tsrCommSplit and tsrCommDestroy are allowed; tsrCommFinalize is refused.
 * revokeFlags: TSR_REVOKE_DEFAULT (0). Revoking a revoked communicator does nothing. */
#define TSR_REVOKE_DEFAULT 0x00
TSR_API tsrResult_t tsrCommRevoke(tsrComm_t comm, int revokeFlags);
TSR_API tsrResult_t tsrCommGetAsyncError(tsrComm_t comm, tsrResult_t* asyncError);

/* ---- Communicator queries ---------------------------------------------------------------- */
TSR_API tsrResult_t tsrCommCount(const tsrComm_t comm, int* count);
/* The CUDA device of this rank, or TSR_DEVICE_HOST (-1) for a host-only rank. */
TSR_API tsrResult_t tsrCommCuDevice(const tsrComm_t comm, int* device);
TSR_API tsrResult_t tsrCommUserRank(const tsrComm_t comm, int* rank);

/* ---- Reduction operations ---------------------------------------------------------------- */
/* dst = scalar * sum(inputs). `scalar` has type `datatype`. */
TSR_API tsrResult_t tsrRedOpCreatePreMulSum(tsrRedOp_t* op, void* scalar, tsrDataType_t datatype,
                                            tsrScalarResidence_t residence, tsrComm_t comm);
TSR_API tsrResult_t tsrRedOpDestroy(tsrRedOp_t op, tsrComm_t comm);

/* ---- Collectives --------------------------------------------------------------------------
 * The shapes are NCCL's. `stream` is a cudaStream_t (struct CUstream_st* is the very same type);
 * host buffers run on the host executor and ignore it: the call returns when the result is in
 * recvbuff. Device buffers of the communicator's GPU run on the device executor, ordered on
 * `stream` like an NCCL call (the call returns once enqueued).
 * In place as in NCCL: allreduce/broadcast/reduce: sendbuff == recvbuff; allgather:
 * sendbuff == recvbuff + rank * sendcount; reducescatter: recvbuff == sendbuff + rank * recvcount.
 * alltoall has no in-place form. Every rank must call the same collectives in the same order. */
typedef struct CUstream_st* tsrStream_t;

TSR_API tsrResult_t tsrAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 tsrDataType_t datatype, tsrRedOp_t op, tsrComm_t comm,
                                 tsrStream_t stream);
/* sendbuff holds nranks * recvcount elements; rank r receives the reduction of block r. */
TSR_API tsrResult_t tsrReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     tsrDataType_t datatype, tsrRedOp_t op, tsrComm_t comm,
                                     tsrStream_t stream);
/* recvbuff holds nranks * sendcount elements, rank r's at offset r * sendcount. */
TSR_API tsrResult_t tsrAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 tsrDataType_t datatype, tsrComm_t comm, tsrStream_t stream);
/* sendbuff is read on the root only (it may be NULL elsewhere). */
TSR_API tsrResult_t tsrBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                 tsrDataType_t datatype, int root, tsrComm_t comm,
                                 tsrStream_t stream);
/* recvbuff is written on the root only (it may be NULL elsewhere). */
TSR_API tsrResult_t tsrReduce(const void* sendbuff, void* recvbuff, size_t count,
                              tsrDataType_t datatype, tsrRedOp_t op, int root, tsrComm_t comm,
                              tsrStream_t stream);
/* Both buffers hold nranks * count elements; block p of sendbuff goes to rank p. */
TSR_API tsrResult_t tsrAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                tsrDataType_t datatype, tsrComm_t comm, tsrStream_t stream);
/* Uneven all-to-all (MPI_Alltoallv's shape; counts and displacements in elements, nranks entries
 * each): sendcounts[p] elements at sendbuff + sdispls[p] go to rank p, which receives them at its
 * recvbuff + rdispls[q] (q: the sender) with recvcounts[q] == the sender's sendcounts[p]; a
 * mismatch fails the call on both ranks with a sentence naming the sizes. The receive blocks must
 * not overlap one another nor any send block; there is no in-place form. Runs as one group of
 * sends and receives (inside an open group it joins it). */
TSR_API tsrResult_t tsrAlltoAllv(const void* sendbuff, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                 const size_t* rdispls, tsrDataType_t datatype, tsrComm_t comm,
                                 tsrStream_t stream);
/* Point to point. A peer equal to the caller's rank is valid (the matching receive must be in
 * the same group). Outside a group a send waits for its matching receive. */
TSR_API tsrResult_t tsrSend(const void* sendbuff, size_t count, tsrDataType_t datatype, int peer,
                            tsrComm_t comm, tsrStream_t stream);
TSR_API tsrResult_t tsrRecv(void* recvbuff, size_t count, tsrDataType_t datatype, int peer,
                            tsrComm_t comm, tsrStream_t stream);
/* tsrProbe's peer for a message from any rank (MPI_ANY_SOURCE). */
#define TSR_ANY_SOURCE (-1)
/* Like MPI_Probe: waits (within the communicator's deadline, as tsrRecv) until the next message
 * that `peer` (or, with TSR_ANY_SOURCE, any other rank) sent this rank with tsrSend on host
 * buffers has arrived, and gives its sender and size in bytes without receiving it: the next
 * tsrRecv from *source receives it. With TSR_ANY_SOURCE, ranks are tried in turn from the one
 * after the last source found, so a busy sender cannot starve the others, and only ranks this
 * rank has already exchanged a message with (in either direction) are looked at: the first send
 * or receive between two ranks sets up their link, both taking part. Outside a group only; not on
 * the device path (sends of device buffers travel on the device executor's own links). */
TSR_API tsrResult_t tsrProbe(int peer, tsrComm_t comm, int* source, size_t* bytes);

/* Groups: calls between tsrGroupStart and tsrGroupEnd (per thread, nestable) are queued and
 * issued together at the outermost tsrGroupEnd; sends and receives inside a group, in any order,
 * do not deadlock. Errors of queued calls are returned by tsrGroupEnd. */
TSR_API tsrResult_t tsrGroupStart(void);
TSR_API tsrResult_t tsrGroupEnd(void);
/* Ends the outermost group without running any of its calls (as ncclGroupSimulateEnd) and gives
 * the tuner's estimate of the time they would take, in microseconds: a communicator's collectives
 * one after another, its sends and receives together, communicators side by side. Local: it
 * talks to no peer (before a communicator's first collective, the tuner's default transports
 * stand in for the agreed ones). */
TSR_API tsrResult_t tsrGroupSimulateEnd(double* estimatedTimeUs);

/* Zero-copy: a registered buffer may be read and written by peers directly, so collectives on it
 * skip the staging copies. Local (not collective). The handle is released by tsrCommDeregister,
 * which must not race with a collective using the buffer (on device memory it is refused while
 * this rank's eager call on it is in flight). Device memory: zero-copy where every rank of the
 * communicator is in this process; as in NCCL, if one rank passes registered buffers to a call,
 * every rank must. Between processes, use windows (below). */
TSR_API tsrResult_t tsrCommRegister(const tsrComm_t comm, void* buff, size_t size, void** handle);
TSR_API tsrResult_t tsrCommDeregister(const tsrComm_t comm, void* handle);

/* Windows (as ncclCommWindowRegister): a collective registration of a buffer of the same layout on
 * every rank, each rank's mapped by every peer once, so that collectives on device buffers that lie
 * in windows run zero-copy on the device executor with no per-call exchange. Every rank calls it
 * in the same order. A call is zero-copy when its send and receive buffers lie in windows at the
 * same offsets on every rank (for broadcast and reduce, the buffer a rank does not use counts too:
 * pass both, or call in place); otherwise it is staged through the scratch. Where a peer cannot
 * map a window (another host, no peer access) its calls are staged. On host memory a window is a
 * registration (tsrCommRegister). tsrCommWindowDeregister is collective too, and refused on every
 * rank (tsrInvalidUsage) while an eager call on the window is in flight on any rank: synchronize
 * the streams first. Flags: TSR_WIN_DEFAULT or TSR_WIN_COLL_SYMMETRIC (the same here). */
typedef struct tsrWindow* tsrWindow_t;
#define TSR_WIN_DEFAULT 0x00
#define TSR_WIN_COLL_SYMMETRIC 0x01
TSR_API tsrResult_t tsrCommWindowRegister(tsrComm_t comm, void* buff, size_t size, tsrWindow_t* win,
                                          int flags);
TSR_API tsrResult_t tsrCommWindowDeregister(tsrComm_t comm, tsrWindow_t win);

/* Memory for zero-copy. tsrMemAlloc: host memory that the other processes of the host can map,
 * so registered buffers of it are read and written by peers directly (memory from malloc can be
 * registered too, but processes cannot share it; such calls stage through the scratch).
 * tsrMemAllocDevice (as ncclMemAlloc, which the drop-in maps to it): device memory of `device`
 * (-1: the calling thread's current device), zeroed, that peers map once registered (with
 * tsrCommRegister or as a window): directly between ranks of one process (p2p), by its CUDA IPC
 * handle between processes (cuda_ipc). tsrInvalidUsage where no GPU is visible. Both kinds are
 * freed with tsrMemFree, which holds the device's cudaFree back while a communicator's resident
 * kernel runs there (a plain cudaFree would wait for that kernel). tsrMemAlloc stays host memory
 * on a GPU rank, so host-buffer calls on it keep working; ask for device memory by name. */
TSR_API tsrResult_t tsrMemAlloc(void** ptr, size_t size);
TSR_API tsrResult_t tsrMemAllocDevice(void** ptr, size_t size, int device);
TSR_API tsrResult_t tsrMemFree(void* ptr);

/* ---- Fused GEMM + communication (tensor-parallel linear layers) ------------------------------
 * Row-major matrices; n = ranks of the communicator. A and B have type `intype` (float16 or
 * bfloat16 on device buffers; also float32 on host buffers), accumulation is float, C and bias
 * have type `outtype` (float32, float16 or bfloat16). M must be a multiple of n.
 *   tsrGemmReduceScatter: A is M x K and B is K x N on each rank (K = this rank's share of the
 *     inner dimension); C = sum over ranks of A B (+ bias, N elements, added once), and rank r
 *     receives rows [r M/n, (r+1) M/n): C is M/n x N.
 *   tsrAllGatherGemm: A is this rank's M/n x K shard and B is K x N (N = this rank's columns);
 *     C = [A_0; ...; A_{n-1}] B (+ bias) is M x N on every rank; gatheredA (M x K, may be NULL)
 *     receives the gathered A.
 *   tsrGemmAllReduce: as tsrGemmReduceScatter, but every rank receives all of C (M x N).
 * Calls are collective and ordered like collectives (every rank the same calls, shapes, types
 * and flags). Host buffers run on the host and return when C is in place; device buffers of the
 * communicator's GPU are ordered on `stream`. The communicator keeps a workspace between calls;
 * tsrFusedWorkspaceSize says how much one call needs. Flags (bitwise or): */
#define TSR_FUSED_DEFAULT 0     /* partials reduced in rank order: bitwise repeatable results */
#define TSR_FUSED_ATOMIC 1      /* partials accumulated atomically as they arrive */
#define TSR_FUSED_COPY_ENGINE 2 /* tsrAllGatherGemm on device: shards move by copy engine */

typedef enum TSR_ENUM_INT {
  tsrFusedGemmReduceScatter = 0,
  tsrFusedAllGatherGemm = 1,
  tsrFusedGemmAllReduce = 2
} tsrFusedOp_t;

TSR_API tsrResult_t tsrGemmReduceScatter(const void* A, const void* B, const void* bias, void* C,
                                         size_t M, size_t N, size_t K, tsrDataType_t intype,
                                         tsrDataType_t outtype, int flags, tsrComm_t comm,
                                         tsrStream_t stream);
TSR_API tsrResult_t tsrAllGatherGemm(const void* A, const void* B, const void* bias, void* C,
                                     void* gatheredA, size_t M, size_t N, size_t K,
                                     tsrDataType_t intype, tsrDataType_t outtype, int flags,
                                     tsrComm_t comm, tsrStream_t stream);
TSR_API tsrResult_t tsrGemmAllReduce(const void* A, const void* B, const void* bias, void* C,
                                     size_t M, size_t N, size_t K, tsrDataType_t intype,
                                     tsrDataType_t outtype, int flags, tsrComm_t comm,
                                     tsrStream_t stream);
/* The same calls described by one struct instead of thirteen positional arguments (the
 * positional functions above fill one and run through the same path). Initialize it with
 * TSR_FUSED_DESC_INITIALIZER, which sets size and version, so a library newer than the header
 * knows which fields the caller has; then set op, the buffers, the shape, the types and flags:
 *   op          which of the three calls
 *   A, B, bias, C, gatheredA   as the call of `op` (bias and gatheredA may be NULL; gatheredA is
 *               for tsrFusedAllGatherGemm only)
 *   M, N, K     the shape, as the call of `op` says (row-major, dense: no leading dimensions)
 *   intype, outtype, flags     as the positional calls
 * A NULL desc, a size or version this library does not know, an unknown op or flag bit, or a bad
 * shape fails with tsrInvalidArgument and a sentence naming the field. */
#define TSR_FUSED_DESC_VERSION 1u
typedef struct {
  size_t size;          /* sizeof(tsrFusedDesc_t) */
  unsigned int version; /* TSR_FUSED_DESC_VERSION */
  tsrFusedOp_t op;
  const void* A;
  const void* B;
  const void* bias;
  void* C;
  void* gatheredA;
  size_t M;
  size_t N;
  size_t K;
  tsrDataType_t intype;
  tsrDataType_t outtype;
  int flags;
} tsrFusedDesc_t;
#define TSR_FUSED_DESC_INITIALIZER                                                               \
  {                                                                                              \
    sizeof(tsrFusedDesc_t), TSR_FUSED_DESC_VERSION, tsrFusedGemmReduceScatter, NULL, NULL, NULL, \
        NULL, NULL, 0, 0, 0, tsrFloat16, tsrFloat32, TSR_FUSED_DEFAULT                           \
  }
TSR_API tsrResult_t tsrFusedGemm(const tsrFusedDesc_t* desc, tsrComm_t comm, tsrStream_t stream);
/* tsrFusedWorkspaceSize for a descriptor (its buffers are not read). */
TSR_API tsrResult_t tsrFusedGemmWorkspaceSize(const tsrFusedDesc_t* desc, int onDevice,
                                              tsrComm_t comm, size_t* bytes);

/* Workspace bytes one rank needs for the call (onDevice: 1 for device buffers, 0 for host). */
TSR_API tsrResult_t tsrFusedWorkspaceSize(tsrFusedOp_t op, size_t M, size_t N, size_t K,
                                          tsrDataType_t intype, tsrDataType_t outtype, int flags,
                                          int onDevice, tsrComm_t comm, size_t* bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_TESSERA_H_ */
