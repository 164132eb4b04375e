// The collective engine behind engine.hpp: its caches, the resources it shares between plans
// (connections, the zero-copy control region, point-to-point links, the staging area for
// transports that do not map memory), and the order in which its operations run.
//
// Operations of one engine run one after the other, in the order they were started (which is the
// order calls are matched across ranks): an operation waits for its turn, so two operations never
// share a plan's scratch or semaphores at once. The calls of one engine come from one thread at a
// time (the communicator's rule, as in NCCL); nothing here locks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/engine.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "collectives/exec/planner.hpp"
#include "collectives/exec/profile.hpp"
#include "core/deadline.hpp"
#include "transport/context.hpp"

namespace tessera {

class DeviceExecutor;
struct DeviceBoundPlan;

// device_bind.cpp: binds `plan` (verified) for the device executor `ex`, pairwise with the plan's
// peers (the order rules of bind.cpp), `ctas` resident CTAs. Refuses zero-copy plans and plans
// beyond kMaxDeviceSrcs / kMaxCtaWorkers with a sentence.
Result bindDevicePlan(DeviceExecutor* ex, std::shared_ptr<const Plan> plan, int ctas,
                      DeviceBoundPlan* out);

// The transports of the cuda kinds move GPU memory; the host executor reaches the same peers
// through their host counterparts.
inline TransportKind hostTransportKind(TransportKind k) {
  if (k == TransportKind::kCudaIpc) return TransportKind::kShm;
  if (k == TransportKind::kP2p) return TransportKind::kInproc;
  return k;
}

// Bootstrap tags of the engine's own messages (memory blobs): below kTransportTagBase.
inline constexpr int kEngineTagBase = 1 << 27;
enum EngineTag {
  kTagPlanSetup = 1,
  kTagUserBlob = 2,
  kTagControlSetup = 3,
  kTagP2PSetup = 4,
  kTagDevicePlanSetup = 5,  // the device executor's plan binding (device_bind.cpp)
  kTagDeviceP2PSetup = 6,   // the device executor's send/recv links (device_p2p.cpp)
  kTagDeviceWindow = 7,     // the device executor's windows (device_window.cpp)
};
// The user tag the engine gives the transport layer for connects and semaphores.
inline constexpr int kEngineTransportTag = 0x6578;
// The same for the device executor's own connections (device kinds), semaphores and port channels.
inline constexpr int kDeviceTransportTag = 0x6479;

struct Registration {
  char* base = nullptr;
  size_t bytes = 0;
  std::shared_ptr<Memory> memory;
};

// Memory ids of deregistered buffers one record announces (the rest wait for later records).
inline constexpr int kHandshakeRetiredPerRecord = 16;

// What every rank publishes before a zero-copy-sized call (zero_copy.cpp).
struct HandshakeRecord {
  uint64_t call = 0;
  uint64_t count = 0;
  uint8_t collective = 0;
  uint8_t dtype = 0;
  uint8_t opKind = 0;
  uint8_t flags = 0;  // kInOk | kOutOk | kMapsAll | kCrossAll | kSameSpaceAll
  int32_t root = 0;
  uint32_t inId = 0;
  uint32_t outId = 0;
  uint64_t inOffset = 0;
  uint64_t outOffset = 0;
  // The buffers' addresses in the writer's process, for peers that reach them without a
  // registration (cross-memory attach, or threads of one process); 0 when it does not use one.
  uint64_t inAddr = 0;
  uint64_t outAddr = 0;
  uint64_t magic = 0;
  // The writer's registrations that are gone: the reader drops their blobs and mappings.
  uint32_t retiredCount = 0;
  uint32_t retired[kHandshakeRetiredPerRecord] = {};
};
inline constexpr uint8_t kHandshakeInOk = 1, kHandshakeOutOk = 2, kHandshakeMapsAll = 4;
// The writer reaches every peer's memory at any address: by cross-memory attach (shm,
// transport/shm/cross_memory.hpp) or because the peer is a thread of its process (kSameSpaceAll).
inline constexpr uint8_t kHandshakeCrossAll = 8, kHandshakeSameSpaceAll = 16;
inline constexpr size_t kHandshakeSlotBytes = 192;
static_assert(sizeof(HandshakeRecord) <= kHandshakeSlotBytes);

// A registration of the peer whose blob arrived here. It is imported (mapped) only when a
// zero-copy plan reaches it: outside such a call the owner may deregister and free it at any time.
struct PeerBlob {
  uint32_t id = 0;
  std::string blob;
  std::shared_ptr<RemoteMemory> memory;  // null until imported
};
// Blobs a rank keeps per peer (and ids a rank remembers as sent): beyond it the least recently
// named goes, on both sides alike, and is sent again when a record names it once more.
inline constexpr size_t kMaxPeerBlobs = 64;

// Both sides of a link apply the same steps to the same records in the same order (retire the
// record's retired ids, then touch or add its input and output ids, then evict the least recently
// named beyond kMaxPeerBlobs), so `sentIds` here and the peer's `blobs` from this rank always hold
// the same ids and a record never names an id whose blob the reader lacks.
struct ControlLink {
  std::shared_ptr<Connection> connection;
  std::shared_ptr<RemoteMemory> remote;  // the peer's control region
  std::shared_ptr<Semaphore> semaphore;
  std::vector<uint32_t> sentIds;  // this rank's ids whose blob the peer holds, oldest first
  std::vector<PeerBlob> blobs;    // the peer's, least recently named first
};

struct Control {
  std::shared_ptr<Memory> memory;  // [2 parities][nranks slots] + an outbox slot
  char* base = nullptr;
  std::vector<ControlLink> links;  // by peer
  bool mapsAll = true;
  bool crossAll = true;           // every peer's connection offers cross-memory attach
  bool sameSpaceAll = true;       // every peer is a thread of this process
  uint64_t rounds = 0;            // handshakes done
  std::vector<uint32_t> retired;  // deregistered ids some peer holds, not yet announced
};

// A point-to-point link with one peer (p2p.cpp): the peer writes into this rank's inbox.
struct P2PLink {
  std::shared_ptr<Connection> connection;
  bool mapped = false;
  std::shared_ptr<Memory> inbox;
  std::shared_ptr<RemoteMemory> peerInbox;
  std::shared_ptr<Semaphore> data;  // a piece arrived (both directions)
  std::shared_ptr<Semaphore> ack;   // a slot was drained (both directions)
  uint64_t sent = 0, acked = 0, received = 0;
};
inline constexpr int kP2PSlots = 8;
inline constexpr size_t kP2PSlotBytes = 64 << 10;
inline constexpr size_t kP2PHeaderBytes = 64;

// Staging memory for peers that are reached through put/get (ucx): loads land in the first
// part; stores go through a ring that is flushed before it wraps.
struct Bounce {
  std::shared_ptr<Memory> memory;
  char* base = nullptr;
  size_t loadBytes = 0;
  size_t ringBytes = 0;
  size_t ringAt = 0;
  std::vector<Connection*> dirty;  // see EngineImpl::markDirty
};

// The host LL protocol's resources (host_ll.cpp): this rank's inbox (per sender, two parities of
// lines), the peers' inboxes mapped here, a doorbell semaphore per peer (for parked waits), and
// staging for the payloads a reduction combines.
struct HostLL {
  struct Peer {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<RemoteMemory> remote;
    char* inbox = nullptr;  // the peer's inbox, mapped
    std::shared_ptr<Semaphore> doorbell;
    device::SemaphoreDeviceHandle doorbellHandle{};
  };
  bool ready = false;
  std::shared_ptr<Memory> memory;
  char* inbox = nullptr;
  size_t linesPerBox = 0;   // lines per (sender, parity)
  size_t payloadBytes = 0;  // staging per sender
  std::vector<char> stagingMemory;
  char* staging = nullptr;
  std::vector<Peer> peers;  // by rank
  uint64_t calls = 0;       // LL calls so far (every rank alike)
};
// LL runs for up to this many ranks, up to this payload per message (a rank's whole buffer for
// all-reduce, one block for all-gather and reduce-scatter), and by default where a call moves at
// most kHostLLDefaultMaxBytes: its nccl-tests size, and the bytes a rank receives ((n-1) messages).
// Measured on the CI machine class, 2 processes, same runs, LL against Simple (medians): 0.42-0.46
// vs 0.60-0.74 us at 256 B, 1.49-2.00 vs 2.41-2.85 us at 4 KiB, but 2.85-3.72 vs 2.66-3.51 at
// 8 KiB; 4 thread ranks on 2 cores: 3.3-4.9 vs 5.5-7.5 us at 512 B, 5.7-8.0 vs 6.2-6.4 at 2 KiB
// (6 KiB received); all-gather and reduce-scatter alike. (Earlier, with the two cores sharing a
// last-level cache, Simple won from 512 B by up to 0.16 us; LL's win where they do not is larger.)
// TESSERA_PROTO=LL uses it up to the payload limit; TESSERA_PROTO=Simple never, nor a TESSERA_ALGO
// that names families for the collective (hostLLFits).
inline constexpr int kHostLLMaxRanks = 16;
inline constexpr size_t kHostLLMaxPayload = 16 << 10;
inline constexpr size_t kHostLLDefaultMaxBytes = 4 << 10;

// Bookkeeping of an operation that did not move: when the wait began, when peers were last
// checked.
struct IdleState {
  uint32_t polls = 0;
  bool idle = false;
  Clock::time_point since{};
  Clock::time_point lastPeerCheck{};
};

// Moves made by the engine's operations on this thread: runOperations backs off while it stays
// the same over a pass (cheaper than asking each operation through a cast).
inline thread_local uint64_t tlsExecMoves = 0;

class ExecOperation : public Operation {
 public:
  // Whether the last progress() moved anything.
  bool moved() const { return moved_; }
  // What the operation waits for now, for timeout sentences.
  virtual std::string blocked() const = 0;
  // tsrSuccess while every peer the operation still needs may be alive (Connection::peerStatus
  // of those only: a peer that finished its part may be gone already).
  virtual Result checkPeers() const = 0;
  // The processes of this host whose ranks the operation's communicator shares
  // (TESSERA_DUMP_ON_TIMEOUT signals them when the operation's wait times out).
  virtual const std::vector<int>* dumpPeers() const { return nullptr; }

 protected:
  void markMoved() {
    moved_ = true;
    ++tlsExecMoves;
  }
  bool moved_ = false;
};

class EngineImpl final : public CollectiveEngine {
 public:
  explicit EngineImpl(const EngineOptions& options);
  ~EngineImpl() override;
  Result init();

  Result start(const CollCall& call, std::unique_ptr<Operation>* out) override;
  Result startP2P(const std::vector<P2PCall>& calls, std::unique_ptr<Operation>* out) override;
  Result startProbe(int peer, Probe* found, std::unique_ptr<Operation>* out) override;  // p2p.cpp
  // Where the next any-source probe starts looking (the rank after the last one found).
  int probeFrom_ = 0;
  Result registerBuffer(void* ptr, size_t bytes, void** handle) override;
  Result deregisterBuffer(void* handle) override;
  Result registerWindow(void* ptr, size_t bytes, void** handle) override;  // device_engine.cpp
  Result deregisterWindow(void* handle) override;
  Result registerDeviceBuffer(void* ptr, size_t bytes, void** handle) override;
  Result deregisterDeviceBuffer(void* handle) override;
  Tuner& tuner() override { return planner_.tuner(); }
  Result predictUs(const CollCall& call, bool onDevice, double* us) override;
  Result predictP2PUs(const P2PCall& call, double* us) override;
  // device_engine.cpp
  Result enqueue(const CollCall& call, void* stream) override;
  Result enqueueP2P(const std::vector<P2PCall>& calls, void* stream) override;
  Result deviceSynchronize() override;
  Result deviceError() override;
  void abortDevice() override;
  // The verified plan the device executor runs for `call` (given, named or tuned), from the
  // planner, without binding host resources (device_engine.cpp). `zeroCopy`: the call's buffers
  // lie in windows, so a zero-copy plan may run (a named family's zero-copy form, or the tuner's
  // choice with Staging::kZeroCopy). *useLL (optional): the tuner picked the LL protocol (the
  // plan is the fallback when LL cannot run the call). `workers`: the device executor's CTAs,
  // spread over the plan's workers.
  Result devicePlan(const CollCall& call, int workers, bool zeroCopy,
                    std::shared_ptr<const Plan>* out, bool* useLL = nullptr);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<int>* peerPids() const { return &options_.peerPids; }
  // TESSERA_PROFILE (profile.hpp): the host executor's op times, when on.
  bool profiling() const { return profiling_; }
  ExecProfile& profile() { return profile_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  size_t scratchBytes() const { return scratchBytes_; }
  // The device executor's scratch per plan (EngineOptions::scratchBytes).
  size_t deviceScratchBytes() const { return deviceScratchBytes_; }
  // The device executor (null until the first device call or window); tests look at its counts.
  const DeviceExecutor* deviceExecutor() const { return device_.get(); }
  TransportContext& transports() { return *ctx_; }

  // Turns: operations run in start order.
  uint64_t takeTurn() { return nextSeq_++; }
  bool myTurn(uint64_t seq) const { return running_ == seq; }
  uint64_t running() const { return running_; }
  void endTurn() { ++running_; }
  // An operation failed (or was dropped unfinished): every later call fails with this.
  Result poison(Result code);
  // An operation destroyed unfinished (its wait timed out or was aborted, or its group was
  // dropped): poisons the engine with "<what> was destroyed before it completed", logged but
  // not recorded as the thread's last error, so the caller still reads why the wait ended
  // (the timeout's sentence naming what each operation waits for).
  void abandoned(const std::string& what);

  // While an operation waits: timeouts, dead peers, abort, and progress of non-mapping
  // connections. Returns tsrSuccess while it may go on waiting.
  Result idle(IdleState* st, const ExecOperation& op);
  static void busy(IdleState* st) {
    st->polls = 0;
    st->idle = false;
  }

  // ---- resources (bind.cpp) ----
  Result connection(int peer, std::shared_ptr<Connection>* out);
  Result bindPlan(BoundPlan* bp);
  Result ensureBounce();
  Bounce& bounce() { return bounce_; }
  // Room for `bytes` in the staging ring (flushing it first when full); the offset in the
  // bounce memory.
  Result stageStore(size_t bytes, size_t* offset);
  // Connections (not mapping) with puts or signals that may still be in flight; flushed when the
  // staging ring wraps and when an operation ends, so that nothing lands in a peer's memory
  // after both sides moved on (a peer may free it once the call is over everywhere).
  void markDirty(Connection* c) {
    for (Connection* x : bounce_.dirty)
      if (x == c) return;
    bounce_.dirty.push_back(c);
  }
  Result flushDirty();
  Result ensureControl();
  Control& control() { return control_; }
  Result p2pLink(int peer, P2PLink** out);
  // Sends `memory`'s blob to `peer` / receives one from it (engine tags).
  Result sendBlob(int peer, int tag, const Memory* memory);
  Result recvBlob(int peer, int tag, std::string* blob);

  // ---- host LL (host_ll.cpp) ----
  // Whether `call` runs the LL protocol (the same answer on every rank). Needs the transport
  // classes agreed.
  bool hostLLFits(const CollCall& call) const;
  // Collective among all ranks: the inboxes, exchanged, and the doorbells.
  Result ensureHostLL();
  HostLL& hostLL() { return hostLL_; }
  const HostLL& hostLL() const { return hostLL_; }

  // ---- zero-copy (zero_copy.cpp) ----
  const Registration* findRegistration(const void* ptr, size_t bytes) const;
  // This rank's record for a call; sends blobs of registrations peers have not seen.
  Result makeRecord(const CollCall& call, uint64_t callNo, HandshakeRecord* out);
  Result publishRecord(const HandshakeRecord& mine);
  // Polls peer records; *ready when all arrived. Fills `records` (index = rank).
  Result pollRecords(std::vector<HandshakeRecord>* records, std::vector<uint8_t>* have,
                     bool* ready);
  // A registration is being deregistered: peers that hold its blob learn so with the next record.
  void retireRegistration(uint32_t id);
  // Maps the peer's registration `id` (its blob arrived with a record) on first use.
  Result importUser(int peer, uint32_t id, std::shared_ptr<RemoteMemory>* out);
  // Test hooks: blobs held from `peer`, ids this rank remembers as sent to it.
  size_t peerBlobCount(int peer) const;
  size_t sentIdCount(int peer) const;
  // tsrInvalidUsage naming both calls when rank `peer`'s record `b` does not match `a` (this
  // rank's): call number, collective, count, dtype, op (reducing) and root (rooted).
  Result compareRecords(const HandshakeRecord& a, int peer, const HandshakeRecord& b) const;

 private:
  friend class CollOperation;
  // The checks every call passes before it is numbered, host or device: the engine has not
  // failed, and the planner admits it. *callNo: the number it takes if it runs.
  Result admit(const CollCall& call, uint64_t* callNo);
  // tsrInvalidUsage with the first failure's sentence once an operation failed.
  Result alive() const;
  // The host executor's plan for a tuned call: the planner's choice, bound here on first use;
  // *out null for kCross when there is no cross-memory candidate.
  Result hostChoice(Collective c, size_t bytes, int root, Staging staging, BoundPlan** out);
  // `plan` (verified by the planner) compiled for this rank and bound to this engine's resources,
  // once per plan.
  Result bound(const std::shared_ptr<const Plan>& plan, BoundPlan** out);
  // Sets intraHost_ / interHost_ alike on every rank (collective: the first tuned call).
  Result agreeTransportClasses();
  // Every rank's tuner decides alike (collective): the same filters, else tsrInvalidUsage; the
  // same parameters and table, else all fall back to the built-in ones.
  Result agreeTuner();
  bool tunerAgreed_ = false;
  Result agreeClasses(bool hostKinds, TransportKind* intra, TransportKind* inter);

  EngineOptions options_;
  TransportContext* ctx_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  double timeoutSeconds_ = 300;
  size_t scratchBytes_ = 0;
  size_t deviceScratchBytes_ = 0;
  uint64_t zeroCopyMinBytes_ = 0;
  TransportKind intraHost_ = TransportKind::kShm;
  TransportKind interHost_ = TransportKind::kUcx;
  bool classesAgreed_ = false;

  Planner planner_;
  std::map<const Plan*, std::unique_ptr<BoundPlan>> bound_;  // the host executor's bound plans

  std::vector<std::shared_ptr<Connection>> connections_;  // by peer
  std::vector<std::shared_ptr<Connection>> unmapped_;     // those that need progress() calls
  std::vector<std::unique_ptr<Registration>> registrations_;
  Control control_;
  bool controlReady_ = false;
  std::vector<std::unique_ptr<P2PLink>> p2p_;  // by peer
  Bounce bounce_;
  HostLL hostLL_;

  uint64_t p2pGroups_ = 0;
  bool profiling_ = false;
  ExecProfile profile_;
  uint64_t nextSeq_ = 0;
  uint64_t running_ = 0;
  Result poisoned_ = tsrSuccess;
  std::string poisonWhy_;
  // The device executor, made by the first enqueue (device_engine.cpp), and its verified plans.
  std::unique_ptr<DeviceExecutor> device_;
  // Local registrations of device buffers (registerDeviceBuffer): the range, and the ticket of
  // the last eager device call that named it (0: none).
  struct DeviceRegistration {
    uint64_t key = 0;  // never reused (DeviceExecutor::shareLocal names registrations by it)
    char* base = nullptr;
    size_t bytes = 0;
    uint32_t lastTicket = 0;
    bool used = false;
  };
  std::vector<std::unique_ptr<DeviceRegistration>> deviceRegistrations_;
  uint64_t nextRegistrationKey_ = 1;
  // Both buffers of `call` lie in local device registrations: them, in (input, output).
  bool locallyRegistered(const CollCall& call, DeviceRegistration* out[2]) const;
  Result deviceTransportClasses();
  Result makeDeviceExecutor();
  TransportKind deviceIntra_ = TransportKind::kP2p;
  TransportKind deviceInter_ = TransportKind::kUcx;
  bool deviceClassesAgreed_ = false;

  friend Result makeCollOperation(EngineImpl*, const CollCall&, uint64_t, BoundPlan*, BoundPlan*,
                                  BoundPlan*, bool, std::unique_ptr<Operation>*);
};

// An operation that runs in the engine's issue order, whole, in its turn: send/recv groups, probes,
// host LL calls. It takes its turn number when made.
class TurnOperation : public ExecOperation {
 protected:
  explicit TurnOperation(EngineImpl* e) : e_(e), seq_(e->takeTurn()) {}

  // The head of progress(): true when it is this operation's turn to run. Otherwise it has nothing
  // to do now and progress() returns *result: it is done, it failed, or an earlier operation
  // still runs (which has its own deadline, so this one's idle time does not count).
  bool inTurn(bool* done, Result* result) {
    moved_ = false;
    *done = done_;
    *result = done_ ? tsrSuccess : failed_;
    if (done_ || failed_ != tsrSuccess) return false;
    if (!e_->myTurn(seq_)) {
      EngineImpl::busy(&idle_);
      return false;
    }
    return true;
  }
  // Fails the operation in its turn: the turn ends and the engine is poisoned.
  Result failInTurn(Result code) {
    failed_ = code;
    e_->endTurn();
    return e_->poison(code);
  }
  // Whether it runs and waits now, in its turn (parkWords: only then has it words to give).
  bool waitingInTurn() const { return !done_ && failed_ == tsrSuccess && e_->myTurn(seq_); }
  // blocked()'s sentence when an earlier operation still runs, or "" in this operation's turn.
  std::string waitsForEarlier(const std::string& head) const {
    if (e_->myTurn(seq_)) return std::string();
    return head + strprintf("waits for its earlier operation %llu to finish",
                            static_cast<unsigned long long>(e_->running()));
  }

  EngineImpl* e_;
  uint64_t seq_;
  bool done_ = false;
  Result failed_ = tsrSuccess;
  IdleState idle_;
};

// host_executor.cpp: the operation that runs a collective (`plain` without zero-copy, `zeroCopy`
// when the handshake finds every rank registered, or every rank a thread of one process; `cross`
// when it finds every rank able to attach to its peers' memory and the tuner prefers that to
// staging; null where there is no such candidate).
Result makeCollOperation(EngineImpl* engine, const CollCall& call, uint64_t callNo,
                         BoundPlan* plain, BoundPlan* zeroCopy, BoundPlan* cross, bool handshake,
                         std::unique_ptr<Operation>* out);

// host_ll.cpp: the operation that runs a call with the host LL protocol (hostLLFits).
Result makeHostLLOperation(EngineImpl* engine, const CollCall& call, uint64_t callNo,
                           std::unique_ptr<Operation>* out);

// The message size as nccl-tests counts it (the tuner's and the zero-copy threshold's measure).
size_t callBytes(const CollCall& call, int nranks);

}  // namespace tessera
