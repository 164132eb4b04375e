// The device executor's host side (DESIGN.md, "Executors"): per communicator, the plans bound to
// device resources (device scratch, p2p / cuda_ipc memory channels, UCX port channels through the
// proxy), the work queue and its resident grid (persistent mode) or per-call launches (launch
// mode), and the completion of calls in stream order.
//
// A call on a stream: the engine picks the plan (engine_impl.hpp, EngineImpl::enqueue); the
// executor binds it on first use (pairwise with the plan's peers, like the host engine's
// bindPlan), fills a WorkItem and
//   persistent: launches the trigger kernel on the stream (it posts the item when the stream gets
//               there) and makes the stream wait for the item's done word (cuStreamWaitValue32);
//   launch:     launches the item kernel on the stream.
// Done words: an eager call's is the executor's one eager word, which the resident kernel sets to
// the call's ticket (calls complete in order; the stream waits for >= ticket, wrap-aware). A call
// captured in a graph gets a call site of its own (a word never reused while the executor lives):
// its trigger stores 0 there first, the kernel stores 1, the stream waits for == 1, so every replay
// waits for its own run (DESIGN.md: "a graph replay repeats the values captured in it").
//
// Sends and receives of a group are one kItemP2P item on the same queue (device_p2p.cpp, p2p.hpp),
// so they are ordered with the collectives; its group descriptor travels in the trigger's
// parameters and is copied into a group ring beside the queue's slots.
//
// Emulation (cudaDevice < 0): the same executor on host memory and host transports, its resident
// CTAs host threads running runScheduler<HostGroup>; enqueue posts from the calling thread and
// synchronize() waits for the done word. The CPU tests run every collective through it.
//
// The resident kernel runs on a stream of its own (non-blocking: the legacy default stream does
// not wait for it). Hazards (README, "Device executor"): with more streams than
// CUDA_DEVICE_MAX_CONNECTIONS (default 8) a stream may share the resident kernel's hardware queue
// and stall behind it; cudaDeviceSynchronize() never returns while the kernel runs (synchronize
// streams instead); kernels of other modules loaded lazily may wait for an idle device
// (CUDA_MODULE_LOADING=EAGER avoids it). TESSERA_LAUNCH=kernel avoids all three.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/engine.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "transport/channel.hpp"
#include "transport/context.hpp"

namespace tessera {

class EngineImpl;

// The sentence of a failed send/recv group (record.callNo has exec::kP2PCallBit): its own reasons
// (kWhyP2P*) with their sizes, or `why` (the generic reason's text). device_p2p.cpp.
std::string p2pFailureText(const exec::ErrorRecord& record, int rank, const char* why);

enum class LaunchMode : uint8_t { kPersistent, kKernel };

struct DeviceExecutorOptions {
  EngineImpl* engine = nullptr;  // owner: bootstrap tags, connections' selection, poison
  TransportContext* transports = nullptr;
  int rank = 0;
  int nranks = 1;
  int cudaDevice = -1;  // -1: emulate on host threads
  double timeoutSeconds = 300;
  size_t scratchBytes = 0;                    // per plan
  int ctas = 2;                               // resident CTAs (TESSERA_MIN_CTAS..TESSERA_MAX_CTAS)
  int threads = 256;                          // per CTA (GPU; kernels.cu's launch bound)
  LaunchMode mode = LaunchMode::kPersistent;  // TESSERA_LAUNCH
  uint32_t queueSlots = 256;
  uint64_t p2pSlotBytes = 0;  // payload per send/recv ring slot; 0: kDeviceP2PSlotBytes
  // Ranks of this communicator on the same GPU in other processes (their grids are resident
  // beside this one's only under MPS; without it the processes' kernels time-slice).
  int gpuRanksElsewhere = 0;
};

// Whether a resident grid of `ctas` CTAs fits on a GPU of `sms` multiprocessors that hold
// `ctasPerSm` of them each, beside `others` CTAs of this process's resident grids already there:
// every resident grid must be resident at once (each spins until its peers' grids act), so a grid
// that does not fit would wait at its first grid barrier until the deadline. tsrInvalidUsage with
// a sentence when it does not fit.
Result residentGridFits(int rank, int device, int ctas, int others, int sms, int ctasPerSm,
                        int threads);

// Send/recv rings (device_p2p.cpp): slots per ordered pair of ranks, and the default payload per
// slot (the host executor's geometry, collectives/exec/engine_impl.hpp).
inline constexpr uint32_t kDeviceP2PSlots = 8;
inline constexpr uint64_t kDeviceP2PSlotBytes = 64 << 10;

// A plan bound for the device executor: the compiled program (compilePlan), its resources and the
// DevicePlan (plus arrays) copied where the executing side reads it.
struct DeviceBoundPlan {
  BoundPlan compiled;  // ops, refs, peers, sems (host copies); its host resources stay unbound
  std::shared_ptr<Memory> scratch;
  std::shared_ptr<Memory> staging;
  std::vector<std::shared_ptr<RemoteMemory>> peerScratch;  // by peer slot
  std::vector<std::unique_ptr<PortChannel>> ports;         // by peer slot (unmapped peers)
  std::vector<std::unique_ptr<PortChannel>> semPorts;      // by semaphore (unmapped peers)
  std::shared_ptr<Memory> image;                           // DevicePlan + arrays (device side)
  exec::DevicePlan* devicePlan = nullptr;                  // inside `image`
};

// A window (tsrCommWindowRegister, as NCCL's ncclCommWindowRegister): a buffer every rank
// registered together, each mapped by every peer, so that a call whose buffers lie in windows runs
// a zero-copy plan on them. Symmetric: a call's buffers are at the same offset in every rank's
// window (the caller's promise, as NCCL's), so a peer's buffer is its window's base plus this
// rank's offset, and every rank decides alike without talking.
struct DeviceWindow {
  char* base = nullptr;
  size_t bytes = 0;
  size_t minBytes = 0;  // the smallest of every rank's window: a zero-copy range stays under it
  bool usable = false;  // every rank mapped every peer's window (memory channels only)
  std::shared_ptr<Memory> memory;                    // this rank's registration (its export)
  std::vector<std::shared_ptr<RemoteMemory>> peers;  // by rank (own: none)
  std::shared_ptr<Memory> table;                     // char*[nranks], where the kernels read it
  // In flight: the last eager call on the window (its ticket) and whether any call on it was
  // captured into a graph (replays cannot be counted: the table is cleared at deregistration).
  uint32_t lastTicket = 0;
  bool eagerUsed = false;
  bool captured = false;
};

// A buffer registered locally (tsrCommRegister) as shared with ranks of other processes
// (device_window.cpp, DeviceExecutor::shareLocal): this rank's registration of it with the
// transports, and where every rank mapped it (`remote`, char*[nranks] in memory the kernels read,
// this rank's own pointer at its rank) once every peer did.
struct LocalShare {
  uint64_t key = 0;  // the engine's registration number: never reused
  char* base = nullptr;
  size_t bytes = 0;
  bool exportable = false;  // every peer's connection can map it
  bool shared = false;      // every peer mapped it: `remote` is filled
  bool captured = false;    // a captured call named `remote` (kept while the executor lives)
  std::shared_ptr<Memory> memory;
  std::shared_ptr<Memory> remote;
};

// One of a call's buffers on a local registration, as the engine hands it to shareLocal: the
// registration (key 0: the call does not use this buffer on this rank) and the buffer's offset.
struct LocalBuffer {
  uint64_t key = 0;
  char* base = nullptr;
  size_t bytes = 0;
  uint64_t offset = 0;
};

// How a zero-copy call reaches its peers' buffers, as DeviceExecutor::enqueue takes it: through
// its windows (symmetric offsets), or (`board`) through the pointers every rank publishes for the
// call on its peers' boards (buffers registered locally: WorkItem::board). On boards between
// processes (`localInput`/`localOutput` set) each rank publishes its buffers as each peer mapped
// them (LocalShare::remote plus the offset) rather than its own pointers.
struct WindowUse {
  const DeviceWindow* input = nullptr;
  uint64_t inputOffset = 0;
  const DeviceWindow* output = nullptr;
  uint64_t outputOffset = 0;
  bool board = false;
  bool mapped = false;  // boards between processes: localInput / localOutput say what to publish
  LocalShare* localInput = nullptr;
  LocalShare* localOutput = nullptr;
};

class DeviceExecutor {
 public:
  static Result create(const DeviceExecutorOptions& options, std::unique_ptr<DeviceExecutor>* out);
  // Stops the resident grid (a stop item after the last call; the stop flag and then the abort
  // flag when it does not end within the timeout) and frees everything. Never hangs.
  ~DeviceExecutor();

  // Enqueues `call` (validated; count > 0; nranks > 1) with `plan` chosen by the engine, on
  // `stream` (ignored by the emulation). `callNo` is the engine's call number.
  // A zero-copy plan needs `windows` (WindowUse, found by windowsOf); a staged one ignores it.
  Result enqueue(const CollCall& call, const std::shared_ptr<const Plan>& plan, uint64_t callNo,
                 void* stream, const WindowUse* windows = nullptr);
  // Windows (device_window.cpp). registerWindow is collective (every rank, in the same order):
  // each rank registers [ptr, ptr + bytes) with its transports and sends every peer its export,
  // maps theirs over its device connections, and all agree whether every peer mapped every window
  // (DeviceWindow::usable) and on the smallest size. deregisterWindow is collective too: refused
  // on every rank, with a sentence, while a rank's eager call on the window is in flight; else
  // every rank drops its mappings of the peers' windows before any rank releases its own.
  Result registerWindow(void* ptr, size_t bytes, DeviceWindow** out);
  Result deregisterWindow(DeviceWindow* window);
  // Whether the buffers `call` uses on this rank lie in usable windows, within every rank's
  // window; the windows and offsets in *out when so.
  bool windowsOf(const CollCall& call, WindowUse* out) const;
  // Whether this rank's connection to every peer goes over one of `accepted` (in the emulation,
  // the host transport standing in for the device one: hostTransportKind).
  bool everyPeerOver(std::initializer_list<TransportKind> accepted);
  // Whether every peer is a rank of this process (reached by p2p on a GPU, inproc in the
  // emulation), so that a buffer's pointer is valid on every rank: buffers registered locally
  // (tsrCommRegister) can then be reached through boards (WindowUse::board). The same answer on
  // every rank.
  bool peersInProcess();
  // Whether every rank's device connections map every peer's memory (p2p or cuda_ipc on a GPU;
  // inproc or shm in the emulation), agreed once by an allGather at the first call that asks
  // (collective: every rank passes registered buffers to that call). Where so and not every peer
  // is in this process, locally registered buffers are shared per call (shareLocal).
  Result peersMapEachOther(bool* out);
  // Buffers registered locally, between processes (device_window.cpp): at a call whose buffers
  // lie in local registrations on every rank, every rank exchanges with every peer, in increasing
  // order, the call's number, whether its buffers can be exported to every peer, the
  // registrations it has dropped since, and the export of each registration no peer has mapped
  // yet; each rank maps what came and answers where it mapped it. *zeroCopy says, alike on every
  // rank, whether every rank's buffers are mapped by every peer, and `use` then names them (boards,
  // `mapped`). A new registration first used under graph capture is refused on every rank.
  // The exchange is a host round trip with every peer per call (windows need none).
  Result shareLocal(uint64_t callNo, void* stream, const LocalBuffer bufs[2], WindowUse* use,
                    bool* zeroCopy);
  // The engine deregistered local registration `key`: forget it; the peers drop their mappings
  // at the next exchange.
  void dropLocal(uint64_t key);
  // Whether the eager call of `ticket` has completed; the ticket of the last eager call posted.
  bool eagerDone(uint32_t ticket) const;
  uint32_t lastTicket() const;
  // The LL protocol's exchange for a small call (ll.hpp); false in *used when LL cannot run it
  // (a peer not mapped, too large), and nothing is enqueued then.
  Result enqueueLL(const CollCall& call, uint64_t callNo, void* stream, bool* used);
  // The sends and receives of one group (validated by the engine: peers in range, every send to
  // self matched by a receive of its size; at most exec::kP2PMaxCalls calls), as one kItemP2P item
  // on `stream` (p2p.hpp). Sets up the links to peers the group is the first to name (pairwise,
  // in increasing peer order; the peers do the same at their matching group). `groupNo`: the
  // engine's group number (error sentences).
  Result enqueueP2P(const std::vector<P2PCall>& calls, uint64_t groupNo, void* stream);
  // Waits until every eager call enqueued so far completed (tsrTimeout after the timeout): in the
  // emulation and in persistent mode on a GPU (launch mode on a GPU: stream order only).
  Result synchronize();
  // The first failure of the executing side (tsrSuccess while none), with its sentence.
  Result error();
  // Raises the abort flag: waits on the executing side give up at once.
  void abort();

  // Calls enqueued with a zero-copy plan on windows so far (tests).
  uint64_t zeroCopyCalls() const { return zeroCopyCalls_; }
  size_t windowCount() const { return windows_.size(); }
  LaunchMode mode() const { return options_.mode; }
  int ctas() const { return options_.ctas; }

  // For the LL protocol's setup and enqueue (device_ll.cpp): the connection to `peer` of the
  // transport the device executor uses (p2p, cuda_ipc, ucx; inproc, shm in the emulation), made on
  // first use (pairwise); memory the executing side reaches (device memory, or host memory in the
  // emulation); and posting a filled item on `stream` (the done word and the trigger or launch as
  // for any call; `item.doneWord`/`doneValue` are set here). A kItemP2P item comes with its
  // `group`, which the poster copies into `groups` (the executor's group ring, queueSlots entries)
  // or a launch passes by value.
  Result connection(int peer, std::shared_ptr<Connection>* out);
  Result allocate(size_t bytes, std::shared_ptr<Memory>* out);
  // Copies host bytes to memory allocate() gave (cudaMemcpy, or memcpy in the emulation).
  Result upload(void* dst, const void* src, size_t bytes);
  Result post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group = nullptr,
              exec::P2PGroupDesc* groups = nullptr);
  bool emulated() const { return options_.cudaDevice < 0; }
  // Whether `stream` is being captured into a graph (never in the emulation).
  bool capturing(void* stream);
  // The device under which the resident grid and held releases are counted (idle_release.hpp).
  int registryDevice() const;
  EngineImpl* engine() const { return options_.engine; }

 private:
  explicit DeviceExecutor(const DeviceExecutorOptions& options);
  DeviceExecutorOptions options_;
  struct State;
  std::unique_ptr<State> state_;
  struct LLState;  // device_ll.cpp
  // Defined in device_ll.cpp (`delete p`), so that this header's users and the destructor in
  // device_executor.cpp need no complete LLState; set ll_ with ll_.reset(new LLState...).
  struct LLDeleter {
    void operator()(LLState* p) const;
  };
  std::unique_ptr<LLState, LLDeleter> ll_;
  struct P2PState;  // device_p2p.cpp, made by the first send/recv group (same pattern as LLState)
  struct P2PDeleter {
    void operator()(P2PState* p) const;
  };
  std::unique_ptr<P2PState, P2PDeleter> p2p_;
  // Windows (device_window.cpp): the registered ones, and the tables of deregistered windows that
  // a captured call named (a replay may still read them: cleared, kept while the executor lives).
  std::vector<std::unique_ptr<DeviceWindow>> windows_;
  std::vector<std::shared_ptr<Memory>> retiredTables_;
  uint64_t zeroCopyCalls_ = 0;
  // After a call on `use`'s windows was posted: its eager ticket, or that it was captured.
  void noteWindowUse(const WindowUse& use, bool captured, uint32_t ticket);
  // Boards (device_window.cpp), made at the first call that uses them (collective: every rank
  // makes that call, with locally registered buffers, as NCCL asks of registered buffers): this
  // rank's board, the table of the peers' boards mapped here, and their mappings.
  Result ensureBoards();
  std::shared_ptr<Memory> board_;
  std::shared_ptr<Memory> peerBoards_;
  std::vector<std::shared_ptr<RemoteMemory>> peerBoardMaps_;
  int peersInProcess_ = -1;  // -1: not asked yet
  int peersMap_ = -1;        // peersMapEachOther's answer; -1: not agreed yet
  // Local registrations between processes (shareLocal): this rank's, by key; the peers' as mapped
  // here, by (rank, key); the keys dropped since the last exchange.
  std::map<uint64_t, std::unique_ptr<LocalShare>> locals_;
  std::map<std::pair<int, uint64_t>, std::shared_ptr<RemoteMemory>> imports_;
  std::vector<uint64_t> droppedLocals_;
};

}  // namespace tessera
