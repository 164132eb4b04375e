// The collective engine: one per communicator rank. src/comm hands it validated calls; it picks a
// plan (tuner + plan cache), binds the plan to memory and channels, and returns an Operation that
// the host executor progresses (DESIGN.md, "One call, end to end").
//
// Calls are matched across ranks by order, as in NCCL: every rank starts the same collectives in
// the same order. Plan resources (scratch, semaphores, imported peer memory) are made the first
// time a plan is used, collectively among the ranks the plan connects (pairwise, over the
// transport context), and kept in the plan cache for the communicator's life.
//
// Operations never block: progress() does what it can and returns, so one thread can drive the
// operations of several communicators (a group) without deadlock. runOperations() drives a set
// to completion with a deadline.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "collectives/tuner/tuner.hpp"
#include "core/reduce_op.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

class ParkSet;
class TransportContext;

// One collective call. `count` is the API's count: allreduce, broadcast, reduce: elements of
// each buffer; reducescatter: recvcount (the input holds nranks * count); allgather: sendcount
// (the output holds nranks * count); alltoall: elements per peer (both hold nranks * count).
// In place is detected from the pointers as NCCL defines it (allreduce/broadcast/reduce:
// sendbuf == recvbuf; allgather: sendbuf == recvbuf + rank * count; reducescatter:
// recvbuf == sendbuf + rank * count). The caller (src/comm) has validated pointers, counts,
// datatype, op and root.
struct CollCall {
  Collective collective = Collective::kAllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  tsrDataType_t dtype = tsrFloat32;
  RedOpDesc op;  // ignored by non-reducing collectives
  int root = 0;
  // Overrides of the tuner's choice (perf binaries' -A and --plan): a family name, or a plan.
  std::string algorithm;
  std::shared_ptr<const Plan> plan;  // must match collective and nranks; verified on first use
};

// One send or receive of a group (tsrSend / tsrRecv). A peer equal to the rank is valid: the
// matching receive must be in the same group.
struct P2PCall {
  bool isSend = true;
  int peer = 0;
  const void* sendbuf = nullptr;  // isSend
  void* recvbuf = nullptr;        // !isSend
  size_t count = 0;
  tsrDataType_t dtype = tsrFloat32;
};

// A group whose every call is a send to `rank` itself or a receive from it (paired and checked by
// pairCallsToSelf), run as copies without any executor: ordered on `stream` (cudaMemcpyAsync) on
// a GPU, done at once (memmove) where `emulated` (host buffers stand for device ones). No peer
// takes part, so a rank whose group concerns only itself never starts what is collective to set
// up (the engine, the device executor): its peers may call nothing in that group. `groupNo` names
// the group in error sentences.
Result copyToSelfOnStream(int rank, const std::vector<P2PCall>& calls, void* stream, bool emulated,
                          uint64_t groupNo);
// Whether every call of a group names `rank` as its peer (and there is one).
bool allToSelf(int rank, const std::vector<P2PCall>& calls);

// Whether a call is in place as NCCL defines it (allreduce, broadcast, reduce, alltoall:
// sendbuf == recvbuf; allgather: sendbuf == recvbuf + rank * count; reducescatter:
// recvbuf == sendbuf + rank * count). The one test of it: src/comm's checks and the engine's use
// it.
bool callInPlace(const CollCall& call, int rank);

// The sends of a group to `rank` itself and its receives from itself, in call order: the k-th
// send goes into the k-th receive. Fails with a sentence where a peer is not one of `nranks`
// ranks, or the sends and receives to self differ in number or a pair in bytes. The one check of
// it: the engine admits every group with it, and src/comm copies a group of calls to self alone
// by it. `sends` and `recvs` may be null.
Result pairCallsToSelf(int rank, int nranks, const std::vector<P2PCall>& calls,
                       std::vector<const P2PCall*>* sends, std::vector<const P2PCall*>* recvs);

class Operation {
 public:
  virtual ~Operation() = default;
  // Moves the operation on without blocking. Sets *done once the result is in place (the
  // caller's buffers may then be reused). An error is final: the operation (and its
  // communicator's engine) must not be progressed again.
  virtual Result progress(bool* done) = 0;
  // For error sentences: "allreduce ring n=4 count=1024 float32 sum (call 17)".
  virtual std::string describe() const = 0;
  // For a thread about to park (runOperations, src/core/park.hpp): adds the futex words whose
  // change would let the operation move (the semaphores it waits on) and returns true; false
  // when something it waits for wakes no sleeper (a transport that does not map memory, device
  // memory), so the thread must poll. An operation waiting for its turn adds nothing: the one
  // ahead of it runs in the same set.
  virtual bool parkWords(ParkSet* /*set*/) const { return false; }
};

// Progresses every operation round-robin until all are done; when none moved, the thread waits as
// src/core/park.hpp says (spin on a core of its own, park on the operations' semaphores when the
// core is shared or the wait is long, poll with a bounded backoff where it cannot park);
// tsrTimeout naming the operations still pending after `timeoutSeconds`.
Result runOperations(const std::vector<Operation*>& ops, double timeoutSeconds);
// The same for one operation (a call outside a group: no container to build).
Result runOperation(Operation* op, double timeoutSeconds);

// The device executor's defaults on a GPU (DESIGN.md, "Device defaults"). A staged step costs a
// put's latency and a signal (microseconds on NVLink), so slices must be large: tessera_sim puts
// the staged ring (8 workers) on 8 x H100 at 1 GiB at busbw all-reduce 363 / all-gather 341 /
// reduce-scatter 345 GB/s with 64 MiB, 356 / 329 / 332 with 32 MiB, 341 / - / - with 16 MiB and
// 217 (one worker) with 2 MiB (simulated). A scratch per bound plan and rank, as NCCL's buffers
// per channel and peer. 8 CTAs: one ring per CTA, and on several nodes the rings leave a node
// over 8 different NICs (a DGX's 8 rails).
inline constexpr size_t kDeviceScratchBytes = size_t{64} << 20;
inline constexpr int kDeviceCtas = 8;

struct EngineOptions {
  TransportContext* transports = nullptr;  // required; outlives the engine
  int rank = 0;
  int nranks = 1;
  std::vector<int> hostOf;  // host index of each rank (size nranks)
  // Process id of each rank on this host in another process, -1 for the others (what
  // TESSERA_DUMP_ON_TIMEOUT signals; empty: none).
  std::vector<int> peerPids;
  double timeoutSeconds = 300;  // every wait's deadline
  // Staging memory per plan and rank; 0: TESSERA_SCRATCH_BYTES, or where that is unset, 2 MiB on
  // the host executor and the emulated device executor and kDeviceScratchBytes on a GPU.
  size_t scratchBytes = 0;
  // The device executor (enqueue): this rank's GPU, or -1. With deviceEmulation it runs on host
  // threads over host memory instead (tests; the GPU is not touched).
  int cudaDevice = -1;
  bool deviceEmulation = false;
  // Resident CTAs of the device executor: 0 takes TESSERA_MIN_CTAS / TESSERA_MAX_CTAS (the
  // communicator's config fields minCTAs / maxCTAs when set), or where those are unset
  // kDeviceCtas on a GPU and 2 in the emulation (whose CTAs are host threads).
  int minCtas = 0;
  int maxCtas = 0;
  // Payload bytes per slot of the device executor's send/recv rings (0: the default, 64 KiB).
  // Every rank must use the same; tests make it small so that messages span many slots.
  size_t deviceP2PSlotBytes = 0;
  // Ranks of this communicator on this rank's GPU in other processes (the resident-grid check).
  int gpuRanksElsewhere = 0;
  // NICs on this rank's host for traffic between hosts (0: unknown, taken as one). The ranks
  // agree on the fewest (the tuner's device model spreads a host's crossing rings over them).
  int nicsPerHost = 0;
  // This rank's GPU reaches some GPU of a same-host rank over PCIe only (no NVLink: no native peer
  // atomics between them). The ranks agree on whether any does (the tuner's device model then
  // prices the intra-host link as PCIe, TunerParams::devicePcie).
  bool devicePcie = false;
};

class CollectiveEngine {
 public:
  static Result create(const EngineOptions& options, std::unique_ptr<CollectiveEngine>* out);
  virtual ~CollectiveEngine() = default;

  // Starts a collective. May block for the one-time setup of a plan's resources (collective
  // among the plan's ranks). Host buffers only: device pointers are the caller's to reject.
  virtual Result start(const CollCall& call, std::unique_ptr<Operation>* out) = 0;
  // Starts the sends and receives of one group together (any order; they never deadlock).
  virtual Result startP2P(const std::vector<P2PCall>& calls, std::unique_ptr<Operation>* out) = 0;
  // tsrProbe: an operation that completes once the next host message from `peer` (kAnySource:
  // any peer whose link exists) has arrived, with its sender and size in *found; nothing is
  // received. A specific peer's link is set up first if need be (pairwise, as startP2P).
  static constexpr int kAnySource = -1;
  struct Probe {
    int source = -1;
    size_t bytes = 0;
  };
  virtual Result startProbe(int peer, Probe* found, std::unique_ptr<Operation>* out) = 0;

  // Zero-copy registration (tsrCommRegister): local; peers learn of it when a call uses it.
  virtual Result registerBuffer(void* ptr, size_t bytes, void** handle) = 0;
  virtual Result deregisterBuffer(void* handle) = 0;
  // A window on device buffers (tsrCommWindowRegister; host buffers under deviceEmulation):
  // collective, every rank in the same order. Calls whose buffers lie in windows at the same
  // offset on every rank run zero-copy plans on the device executor (device_executor.hpp,
  // DeviceWindow). Starts the device executor if none runs yet. deregisterWindow is collective
  // too, and refused on every rank while an eager call on the window is in flight on any.
  virtual Result registerWindow(void* ptr, size_t bytes, void** handle) = 0;
  virtual Result deregisterWindow(void* handle) = 0;
  // A local registration of a device buffer (tsrCommRegister on device memory; host buffers
  // under deviceEmulation): no peer takes part. Where every rank of the communicator is in this
  // process, device calls whose buffers all lie in such registrations run zero-copy through the
  // device executor's boards (NCCL's rule for registered buffers: if one rank passes registered
  // buffers to a call, every rank does); elsewhere they are staged. deregisterDeviceBuffer is
  // refused while this rank's last eager device call on it is in flight.
  virtual Result registerDeviceBuffer(void* ptr, size_t bytes, void** handle) = 0;
  virtual Result deregisterDeviceBuffer(void* handle) = 0;

  virtual Tuner& tuner() = 0;
  // The tuner's estimate of a call, in microseconds, without running it or talking to a peer
  // (tsrGroupSimulateEnd): a collective as the family the tuner would pick for it (LL included
  // on device buffers), a send or receive as one step plus its bytes over the link to its peer.
  // Before the first collective agreed on the transports, the tuner's defaults stand in.
  virtual Result predictUs(const CollCall& call, bool onDevice, double* us) = 0;
  virtual Result predictP2PUs(const P2PCall& call, double* us) = 0;

  // ---- the device executor (collectives/exec/device, DESIGN.md "Executors") ----
  // Enqueues a collective on device buffers (host buffers under deviceEmulation), ordered on
  // `stream` (a cudaStream_t; ignored by the emulation): it starts when the stream reaches it and
  // the stream goes on once it is done. Returns once enqueued. Errors of the executing side come
  // later, from deviceError() (the communicator's async error).
  virtual Result enqueue(const CollCall& call, void* stream) = 0;
  // Enqueues the sends and receives of one group on device buffers (host buffers under
  // deviceEmulation) as one item of the device executor, ordered on `stream` after this engine's
  // earlier device calls. Semantics as startP2P: per ordered pair of ranks the k-th device send
  // meets the peer's k-th device receive (host-buffer calls are matched among themselves, by the
  // host executor); any order within the group; a send to self needs its receive in the group.
  // Checks what startP2P checks before anything is enqueued; at most 128 calls (a send to self and
  // its receive count two). A size mismatch, a missing peer (tsrTimeout after the engine's
  // timeout) or an abort come later, from deviceError(). The first group that names a peer sets up
  // the pair's link, pairwise: it blocks until the peer reaches its own first group naming this
  // rank.
  virtual Result enqueueP2P(const std::vector<P2PCall>& calls, void* stream) = 0;
  // Waits until every call enqueued outside a graph capture completed (tsrCommFinalize): in the
  // emulation and in the GPU's persistent mode (launch mode: stream order only).
  virtual Result deviceSynchronize() = 0;
  // The device executor's first failure; tsrSuccess while none (or never used).
  virtual Result deviceError() = 0;
  // The executing side gives up its waits now (tsrCommAbort).
  virtual void abortDevice() = 0;
};

}  // namespace tessera
