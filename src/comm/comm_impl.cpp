#include "comm/comm_impl.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>

#include "bootstrap/tcp_bootstrap.hpp"  // createUniqueId (tsrCommGetUniqueId)
#include "collectives/exec/engine.hpp"  // complete type for engine_'s destructor
#include "comm/group.hpp"
#include "core/cuda_driver.hpp"
#include "core/datatype.hpp"
#include "core/env.hpp"
#include "core/hash.hpp"
#include "fused/fused.hpp"  // complete types for the fused executors' destructors

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kInit;
// How long a revocation notice may take to reach a peer (a dead or unreachable one costs the
// sender this, once, for all of them together).
constexpr double kRevokeNoticeSeconds = 1.0;

}  // namespace

const char* commStateName(CommImpl::State s) {
  switch (s) {
    case CommImpl::State::kInitializing: return "initializing";
    case CommImpl::State::kReady: return "ready";
    case CommImpl::State::kFinalized: return "finalized";
    case CommImpl::State::kAborted: return "aborted";
    case CommImpl::State::kFailed: return "failed";
    case CommImpl::State::kRevoked: return "revoked";
  }
  return "?";
}

CommImpl::CommImpl(int rank, int nranks, const CommConfig& config)
    : rank_(rank), nranks_(nranks), config_(config) {
  cancelFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // -1 only disables early cancel
}

CommImpl::~CommImpl() {
  if (initThread_.joinable()) {
    if (state_.load() == State::kInitializing) abort();
    initThread_.join();
  }
  // First: no notice may reach this rank while it is torn down (waits for one being delivered),
  // and the notices this rank sends are on their way (within kRevokeNoticeSeconds).
  revokeEndpoint_.reset();
  joinNotices();
  // The engine (and its device executor: the resident grid stops, its device memory is released)
  // and then the fused executors go before the transports their plans and workspaces use. The
  // engine first: the fused executor's frees would otherwise find this rank's own resident grid
  // still running (they are held back until it ends, core/idle_release.hpp, but there is no
  // reason to hold them).
  enginePublished_.store(nullptr);
  engine_.reset();
  fusedDevicePublished_.store(nullptr);
  fusedDevice_.reset();
  fusedHost_.reset();
  if (cancelFd_ >= 0) close(cancelFd_);
}

Result CommImpl::create(int rank, int nranks, const CommConfig& config,
                        BootstrapFactory makeBootstrap, std::shared_ptr<CommImpl>* out) {
  static std::once_flag versionOnce;
  std::call_once(versionOnce, [] {
    // As NCCL: the version line with TESSERA_DEBUG=VERSION or INFO and above, not with WARN.
    LogLevel level = logLevel();
    if (level == LogLevel::kVersion || level >= LogLevel::kInfo)
      logMessage(LogLevel::kVersion, Subsys::kInit, "tessera version %s", TESSERA_VERSION_STRING);
  });
  std::shared_ptr<CommImpl> comm(new CommImpl(rank, nranks, config));
  TSR_CHECK(comm->bindDevice());
  if (config.blocking) {
    Result r = comm->initCollective(makeBootstrap);
    if (r != tsrSuccess) return r;
    *out = std::move(comm);
    return tsrSuccess;
  }
  // Non-blocking: the thread holds only a raw pointer; the destructor joins it first.
  CommImpl* raw = comm.get();
  int callerRank = currentRank();
  comm->initThread_ = std::thread([raw, makeBootstrap, callerRank] {
    ScopedRank scoped(callerRank);
    raw->initCollective(makeBootstrap);
  });
  *out = std::move(comm);
  return tsrInProgress;
}

Result CommImpl::createWith(std::unique_ptr<Bootstrap> bootstrap, CommConfig config,
                            std::shared_ptr<CommImpl>* out) {
  if (!config.blocking && !bootstrap->usableFromAnotherThread()) {
    TSR_INFO(
        "the %s bootstrap cannot be driven from another thread: the non-blocking init "
        "completes before the call returns",
        bootstrap->kind());
    config.blocking = true;
  }
  const int rank = bootstrap->rank();
  const int nranks = bootstrap->nranks();
  auto holder = std::make_shared<std::unique_ptr<Bootstrap>>(std::move(bootstrap));
  return create(
      rank, nranks, config,
      [holder](int, std::unique_ptr<Bootstrap>* b) {
        *b = std::move(*holder);
        return tsrSuccess;
      },
      out);
}

Result CommImpl::bindDevice() {
  int dev = config_.device;
  if (dev == TSR_DEVICE_CURRENT) dev = cudaCurrentDevice();  // -1 (host-only) without a device
  if (dev >= 0) {
    CudaDeviceInfo info;
    Result r = cudaGetDeviceInfo(dev, &info);
    if (r != tsrSuccess)
      return addContext(r, "cannot bind the communicator rank to CUDA device %d", dev);
    busId_ = info.busId;
  }
  device_ = dev < 0 ? TSR_DEVICE_HOST : dev;
  return tsrSuccess;
}

Result CommImpl::initCollective(const BootstrapFactory& makeBootstrap) {
  auto failed = [this](Result r) {
    state_.store(State::kFailed);
    asyncError_.store(r);
    return r;
  };
  std::unique_ptr<Bootstrap> boot;
  Result r = makeBootstrap(cancelFd_, &boot);
  if (r != tsrSuccess) return failed(r);
  {
    std::lock_guard<std::mutex> lock(bootstrapMutex_);
    bootstrap_ = std::move(boot);
    if (abortFlag_.load()) bootstrap_->abort();
  }
  if (rank() >= 0 && rank() != bootstrap_->rank())
    return failed(TSR_FAIL(tsrInternalError, "bootstrap gave rank %d, expected %d",
                           bootstrap_->rank(), rank()));
  rank_.store(bootstrap_->rank(), std::memory_order_release);
  nranks_.store(bootstrap_->nranks(), std::memory_order_release);
  const int me = rank(), n = nranks();
  ScopedRank scoped(me);

  // Where every rank lives (host, process, device), where its revoke service listens, and a
  // random id, rank 0's naming the communicator in revocation notices.
  struct InitRecord {
    RankPlacement placement;
    RevokeAddress revoke;
    uint64_t id;
  };
  InitRecord mineRecord;
  std::memset(&mineRecord, 0, sizeof(mineRecord));  // padding too: it goes on the wire
  r = localPlacement(device_, busId_.c_str(), &mineRecord.placement);
  if (r != tsrSuccess) return failed(r);
  const RankPlacement mine = mineRecord.placement;
  revokeEndpoint_ = RevokeEndpoint::open();
  mineRecord.revoke = revokeEndpoint_->address();
  mineRecord.id = randomNonce64();
  std::vector<InitRecord> records(static_cast<size_t>(n), mineRecord);
  r = bootstrap_->allGather(records.data(), sizeof(InitRecord));
  if (r != tsrSuccess) return failed(addContext(r, "exchanging rank placements at init"));
  placements_.resize(static_cast<size_t>(n));
  revokePeers_.resize(static_cast<size_t>(n));
  for (size_t p = 0; p < records.size(); ++p) {
    placements_[p] = records[p].placement;
    revokePeers_[p] = records[p].revoke;
  }
  commId_ = records[0].id;
  revokeEndpoint_->attach(commId_, me, this);

  localRanks_ = 0;
  for (int p = 0; p < n; ++p) {
    if (locality(mine, placements_[static_cast<size_t>(p)]) != Locality::kOtherHost) ++localRanks_;
  }
  localRank_ = 0;
  for (int p = 0; p < me; ++p)
    if (locality(mine, placements_[static_cast<size_t>(p)]) != Locality::kOtherHost) ++localRank_;
  // Same on every rank: identifies this communicator in logs.
  commHash_ = fnv1a64(placements_.data(), placements_.size() * sizeof(RankPlacement));

  // Ready only if abort() did not come first (abort() moves kInitializing to kAborted).
  State expected = State::kInitializing;
  if (abortFlag_.load() || !state_.compare_exchange_strong(expected, State::kReady)) {
    asyncError_.store(tsrRemoteError);
    return TSR_FAIL(tsrRemoteError, "communicator aborted during init");
  }
  asyncError_.store(tsrSuccess);
  TSR_INFO("comm %016llx rank %d nranks %d device %d%s%s localRank %d/%d - Init COMPLETE",
           static_cast<unsigned long long>(commHash_), me, n, device_,
           busId_.empty() ? "" : " busId ", busId_.c_str(), localRank_, localRanks_);
  return tsrSuccess;
}

Result CommImpl::checkReady(const char* api) const {
  State s = state_.load();
  if (s == State::kReady) return tsrSuccess;
  if (s == State::kInitializing)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: the communicator is still initializing (non-blocking init: poll "
                    "tsrCommGetAsyncError until it is no longer tsrInProgress)",
                    api);
  if (s == State::kFailed)
    return TSR_FAIL(tsrInvalidUsage, "%s: the communicator failed to initialize (%s); destroy it",
                    api, tsrGetErrorString(asyncError_.load()));
  if (s == State::kRevoked) return revokedError(api);
  return TSR_FAIL(tsrInvalidUsage, "%s: the communicator was %s; only tsrCommDestroy may follow",
                  api, commStateName(s));
}

Locality CommImpl::localityOf(int peer) const {
  return locality(placements_[static_cast<size_t>(rank())], placements_[static_cast<size_t>(peer)]);
}

Result CommImpl::pathClassTo(int peer, PathClass* out) const {
  TSR_CHECK(checkReady("pathClassTo"));
  if (peer < 0 || peer >= nranks())
    return TSR_FAIL(tsrInvalidArgument, "pathClassTo: peer %d is outside [0, %d)", peer, nranks());
  std::shared_ptr<const Topology> topo;
  TSR_CHECK(processTopology(&topo));
  return rankPathClass(*topo, placements_[static_cast<size_t>(rank())],
                       placements_[static_cast<size_t>(peer)], out);
}

Result CommImpl::split(int color, int key, const tsrConfig_t* config,
                       std::shared_ptr<CommImpl>* out) {
  if (!revoked()) TSR_CHECK(checkReady("tsrCommSplit"));
  if (color < 0 && color != TSR_SPLIT_NOCOLOR)
    return TSR_FAIL(
        tsrInvalidArgument,
        "tsrCommSplit: color %d is negative (use TSR_SPLIT_NOCOLOR (-1) to take no part)", color);
  CommConfig childConfig;
  TSR_CHECK(resolveConfig(config, &config_, &childConfig));
  if (config == nullptr || config->device == TSR_CONFIG_UNDEF_INT) childConfig.device = device_;
  // The split of the bootstrap is collective over this communicator, so it runs here, blocking;
  // only the child's own init may run in the background.
  std::unique_ptr<Bootstrap> childBoot;
  TSR_CHECK(splitBootstrap(*bootstrap_, color, key, &childBoot));
  out->reset();
  if (childBoot == nullptr) return tsrSuccess;  // TSR_SPLIT_NOCOLOR
  return createWith(std::move(childBoot), childConfig, out);
}

Result CommImpl::shrink(const std::vector<int>& excluded, const tsrConfig_t* config, int flags,
                        std::shared_ptr<CommImpl>* out) {
  if (!revoked()) TSR_CHECK(checkReady("tsrCommShrink"));
  if ((flags & ~TSR_SHRINK_ABORT) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommShrink: unknown flags 0x%x (TSR_SHRINK_DEFAULT or TSR_SHRINK_ABORT)",
                    static_cast<unsigned>(flags));
  CommConfig childConfig;
  TSR_CHECK(resolveConfig(config, &config_, &childConfig));
  if (config == nullptr || config->device == TSR_CONFIG_UNDEF_INT) childConfig.device = device_;
  // A revoked communicator's work is stopped already (and it stays revoked).
  if ((flags & TSR_SHRINK_ABORT) && !revoked()) abortWork(/*bootstrapToo=*/false);
  std::unique_ptr<Bootstrap> childBoot;
  Result r = bootstrap_->shrink(excluded, &childBoot);
  if (r != tsrSuccess) return addContext(r, "tsrCommShrink");
  return createWith(std::move(childBoot), childConfig, out);
}

Result CommImpl::growUniqueId(tsrUniqueId* id) {
  TSR_CHECK(checkReady("tsrCommGetUniqueId"));
  {
    std::lock_guard<std::mutex> lock(revokeMutex_);
    if (growIdPending_)
      return TSR_FAIL(tsrInvalidUsage,
                      "tsrCommGetUniqueId: this rank's previous grow id has not been used by "
                      "tsrCommGrow yet (one at a time)");
    growIdPending_ = true;
  }
  // Not TESSERA_COMM_ID's fixed address: that is the communicator's own root.
  Result r = createUniqueId(id);
  if (r != tsrSuccess) {
    std::lock_guard<std::mutex> lock(revokeMutex_);
    growIdPending_ = false;
    return addContext(r, "tsrCommGetUniqueId");
  }
  return tsrSuccess;
}

Result CommImpl::growAgree(int nranks, const tsrUniqueId* id, const tsrConfig_t* config,
                           tsrUniqueId* agreed, CommConfig* childConfig) {
  TSR_CHECK(checkReady("tsrCommGrow"));
  {
    // This rank's id from tsrCommGetUniqueId is used or abandoned by this grow, whatever comes
    // of it (its root serves one communicator, and one nobody joins exits on its own).
    std::lock_guard<std::mutex> lock(revokeMutex_);
    growIdPending_ = false;
  }
  struct Record {
    int32_t nranks;
    int32_t hasId;
    tsrUniqueId id;
  };
  const int n = this->nranks();
  const int me = rank();
  std::vector<Record> all(static_cast<size_t>(n));
  Record& mine = all[static_cast<size_t>(me)];
  std::memset(&mine, 0, sizeof mine);
  mine.nranks = nranks;
  mine.hasId = id != nullptr ? 1 : 0;
  if (id != nullptr) mine.id = *id;
  if (Result r = bootstrap_->allGather(all.data(), sizeof(Record)); r != tsrSuccess)
    return addContext(r, "tsrCommGrow: rank %d of %d: agreeing on the unique id", me, n);
  // Every rank sees the same records, so every rank takes the same way out.
  std::string holders;
  int holder = -1, count = 0;
  for (int q = 0; q < n; ++q) {
    const Record& x = all[static_cast<size_t>(q)];
    if (x.nranks != all[0].nranks)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrCommGrow: rank %d of %d: rank 0 asks for %d ranks, rank %d for %d; every "
                      "existing rank must pass the same nranks",
                      me, n, all[0].nranks, q, x.nranks);
    if (x.hasId != 0) {
      holders += (holders.empty() ? "" : ", ") + std::to_string(q);
      holder = q;
      ++count;
    }
  }
  if (all[0].nranks <= n)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommGrow: rank %d of %d: nranks is %d; a grow needs more than the %d "
                    "ranks the communicator has",
                    me, n, all[0].nranks, n);
  if (count != 1)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommGrow: rank %d of %d: %d existing ranks passed a unique id (%s); "
                    "exactly one must (the one that called tsrCommGetUniqueId), the others NULL",
                    me, n, count, count == 0 ? "none" : holders.c_str());
  *agreed = all[static_cast<size_t>(holder)].id;
  TSR_CHECK(resolveConfig(config, &config_, childConfig));
  if (config == nullptr || config->device == TSR_CONFIG_UNDEF_INT) childConfig->device = device_;
  TSR_INFO("tsrCommGrow: rank %d of %d joins a communicator of %d ranks (id from rank %d)", me, n,
           all[0].nranks, holder);
  return tsrSuccess;
}

Result CommImpl::transports(TransportContext** out) {
  TSR_CHECK(checkReady("transport setup"));
  std::lock_guard<std::mutex> lock(transportMutex_);
  if (!transports_) {
    TransportContextOptions o;
    o.bootstrap = bootstrap_.get();
    o.placements = placements_;
    o.cudaDevice = device_ >= 0 ? device_ : -1;
    o.timeoutSeconds = config_.timeoutSeconds;  // 0: TESSERA_TRANSPORT_TIMEOUT
    o.pathClass = [this](int peer, PathClass* c) { return pathClassTo(peer, c); };
    TSR_CHECK(TransportContext::create(o, &transports_));
  }
  *out = transports_.get();
  return tsrSuccess;
}

Result CommImpl::beginWork(const char* api) {
  inFlight_.fetch_add(1);
  if (finalizing_.load()) {
    endWork();
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: tsrCommFinalize has begun on this communicator; no call may start after "
                    "it (only tsrCommDestroy may follow)",
                    api);
  }
  return tsrSuccess;
}

void CommImpl::endWork() { inFlight_.fetch_sub(1); }

double CommImpl::drainTimeoutSeconds() const {
  // A call gives up after the transports' deadline; wait a little longer, so that its own
  // failure (which names the operation and the peer) comes first.
  double seconds = callTimeout_.load();
  if (seconds <= 0) seconds = config_.timeoutSeconds;
  if (seconds <= 0 && envDouble("TESSERA_TRANSPORT_TIMEOUT", &seconds) != tsrSuccess) {
    clearLastError();
    seconds = 300;
  }
  return seconds * 1.25 + 0.5;
}

Result CommImpl::drain() {
  // Calls still running on other threads of this rank (host calls return when their result is
  // in place; a device call once enqueued).
  const double timeout = drainTimeoutSeconds();
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int pending; (pending = inFlight_.load()) > 0;) {
    if (elapsed() > timeout)
      return TSR_FAIL(tsrTimeout,
                      "tsrCommFinalize: rank %d: %d call%s of this communicator still running on "
                      "other threads after %.3g s (waiting for them to complete)",
                      rank(), pending, pending == 1 ? " is" : "s are", timeout);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Collectives and send/recv groups on device buffers, ordered on their streams: every one this
  // rank enqueued must have completed (the device executor's own deadline bounds the wait).
  if (CollectiveEngine* engine = enginePublished_.load(std::memory_order_acquire)) {
    Result r = engine->deviceSynchronize();
    if (r != tsrSuccess)
      return addContext(r, "tsrCommFinalize: rank %d: waiting for its device collectives", rank());
  }
  return tsrSuccess;
}

Result CommImpl::finalize() {
  TSR_CHECK(checkReady("tsrCommFinalize"));
  if (groupHasCallsOf(this))
    return TSR_FAIL(tsrInvalidUsage,
                    "tsrCommFinalize: calls of this communicator are queued in the group open on "
                    "this thread; end the group (tsrGroupEnd) before finalizing");
  bool expected = false;
  if (!finalizing_.compare_exchange_strong(expected, true))
    return TSR_FAIL(tsrInvalidUsage,
                    "tsrCommFinalize: another thread is already finalizing this communicator");
  Result r = drain();
  // No rank tears down its endpoints while a peer may still use them.
  if (r == tsrSuccess && (r = bootstrap_->barrier()) != tsrSuccess)
    addContext(r, "tsrCommFinalize: rank %d: waiting for every rank to finalize", rank());
  state_.store(State::kFinalized);
  if (r != tsrSuccess) asyncError_.store(r);
  return r;
}

Result CommImpl::asyncError() const {
  Result r = asyncError_.load();
  if (r != tsrSuccess) return r;
  CollectiveEngine* engine = enginePublished_.load(std::memory_order_acquire);
  if (engine != nullptr && (r = engine->deviceError()) != tsrSuccess) return r;
  fused::DeviceFusedExecutor* fusedDevice = fusedDevicePublished_.load(std::memory_order_acquire);
  return fusedDevice != nullptr ? fusedDevice->asyncError() : tsrSuccess;
}

void CommImpl::abort() {
  // The others learn at once, not from their transports or deadlines (a communicator revoked
  // already has told them, or heard it from them).
  if (state_.load() == State::kReady) {
    char why[96];
    std::snprintf(why, sizeof(why), "rank %d aborted the communicator (tsrCommAbort)", rank());
    sendNotices(tsrRemoteError, why);
  }
  abortFlag_.store(true);
  abortWork(/*bootstrapToo=*/true);
  joinNotices();
}

Result CommImpl::revoke(int revokeFlags) {
  if (revokeFlags != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommRevoke: revokeFlags is 0x%x; it must be TSR_REVOKE_DEFAULT (0)",
                    static_cast<unsigned>(revokeFlags));
  if (revoked()) return tsrSuccess;
  TSR_CHECK(checkReady("tsrCommRevoke"));
  char why[96];
  std::snprintf(why, sizeof(why), "rank %d revoked the communicator (tsrCommRevoke)", rank());
  revokeAs(rank(), tsrRemoteError, why, /*notify=*/true, /*setAsyncError=*/false);
  return tsrSuccess;
}

Result CommImpl::callFailed(Result r, const char* api) {
  if (r == tsrSuccess || r == tsrInProgress) return r;
  if (revoked()) return revokedError(api);
  if (state_.load() == State::kReady &&
      (r == tsrRemoteError || r == tsrTimeout || r == tsrSystemError)) {
    const std::string why = lastErrorMessage();
    // The caller's error stays this call's own (it names the peer and what failed): revokeAs
    // records none.
    revokeAs(rank(), r, why, /*notify=*/true, /*setAsyncError=*/true);
  }
  return r;
}

void CommImpl::revokedByPeer(const RevokeNotice& notice) {
  if (notice.fromRank >= nranks()) return;
  ScopedRank scoped(rank());
  TSR_INFO("comm %016llx rank %d: revoked by rank %d: %s",
           static_cast<unsigned long long>(commHash_), rank(), notice.fromRank, notice.why.c_str());
  revokeAs(notice.fromRank, notice.code, notice.why, /*notify=*/false, /*setAsyncError=*/true);
}

void CommImpl::revokeAs(int fromRank, Result code, const std::string& why, bool notify,
                        bool setAsyncError) {
  {
    std::lock_guard<std::mutex> lock(revokeMutex_);
    State s = State::kReady;
    if (!state_.compare_exchange_strong(s, State::kRevoked)) return;  // once, from ready only
    revokeFrom_ = fromRank;
    revokeWhy_ = why;
  }
  if (setAsyncError) asyncError_.store(code);
  // The others first (they may be waiting in a call that will never complete), then this rank's
  // own running calls: they fail with revokedError() (group.cpp asks callFailed).
  if (notify) sendNotices(code, why);
  abortWork(/*bootstrapToo=*/false, /*setAborted=*/false);
}

void CommImpl::sendNotices(Result code, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(revokeMutex_);
    if (noticesSent_ || revokePeers_.empty()) return;
    noticesSent_ = true;
  }
  if (!revokeNoticesEnabled()) return;
  RevokeNotice notice;
  notice.commId = commId_;
  notice.fromRank = rank();
  notice.code = code;
  notice.why = why;
  // On a thread of its own, so the failed call returns at once: a peer behind a downed link
  // holds its connection up to the whole kRevokeNoticeSeconds. abort() and the destructor wait
  // for it (joinNotices), so a process that aborts and exits has sent its notices first.
  auto send = [this, notice, r = rank()] {
    ScopedRank scoped(r);
    const auto t0 = std::chrono::steady_clock::now();
    const int took = sendRevokeNotices(revokePeers_, notice, kRevokeNoticeSeconds);
    TSR_INFO("comm %016llx rank %d: revocation notice taken by %d of %d other ranks in %.3f s",
             static_cast<unsigned long long>(commHash_), r, took, nranks() - 1,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  std::lock_guard<std::mutex> lock(noticeThreadMutex_);
  try {
    noticeThread_ = std::thread(send);
  } catch (const std::system_error&) {
    send();  // no thread to be had: the caller waits instead
  }
}

void CommImpl::joinNotices() {
  std::lock_guard<std::mutex> lock(noticeThreadMutex_);
  if (noticeThread_.joinable()) noticeThread_.join();
}

Result CommImpl::revokedError(const char* api) const {
  std::lock_guard<std::mutex> lock(revokeMutex_);
  std::string by = revokeFrom_ == rank() ? std::string("by this rank")
                                         : "by rank " + std::to_string(revokeFrom_);
  return TSR_FAIL(tsrRemoteError,
                  "%s: rank %d of %d: the communicator was revoked %s (%s); only tsrCommShrink, "
                  "tsrCommSplit or tsrCommDestroy may follow",
                  api, rank(), nranks(), by.c_str(), revokeWhy_.c_str());
}

void CommImpl::abortWork(bool bootstrapToo, bool setAborted) {
  // The device executor first: its waits give up at once, so streams waiting for its calls go
  // on, before the transports under it are torn down.
  if (CollectiveEngine* engine = enginePublished_.load(std::memory_order_acquire))
    engine->abortDevice();
  if (fused::DeviceFusedExecutor* fd = fusedDevicePublished_.load(std::memory_order_acquire))
    fd->abort();
  if (bootstrapToo) {
    if (cancelFd_ >= 0) {
      uint64_t one = 1;
      ssize_t ignored = write(cancelFd_, &one, sizeof(one));
      (void)ignored;
    }
    std::lock_guard<std::mutex> lock(bootstrapMutex_);
    if (bootstrap_ != nullptr) bootstrap_->abort();
  }
  {
    std::lock_guard<std::mutex> lock(transportMutex_);
    if (transports_) transports_->abort();
  }
  // Any state but failed becomes aborted, atomically against init's move to ready.
  if (!setAborted) return;
  State s = state_.load();
  while (s != State::kFailed && !state_.compare_exchange_weak(s, State::kAborted)) {
  }
}

Result CommImpl::redOpCreatePreMulSum(tsrRedOp_t* op, const void* scalar, tsrDataType_t dtype,
                                      tsrScalarResidence_t residence) {
  TSR_CHECK(checkReady("tsrRedOpCreatePreMulSum"));
  if (op == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrRedOpCreatePreMulSum: op is NULL");
  if (scalar == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "tsrRedOpCreatePreMulSum: scalar is NULL");
  TSR_CHECK(dtypeCheck(dtype, "tsrRedOpCreatePreMulSum"));
  if (residence == tsrScalarDevice)
    return TSR_FAIL(tsrInvalidUsage,
                    "tsrRedOpCreatePreMulSum: tsrScalarDevice needs the device executor, which "
                    "this version does not have; pass tsrScalarHostImmediate");
  if (residence != tsrScalarHostImmediate)
    return TSR_FAIL(tsrInvalidArgument, "tsrRedOpCreatePreMulSum: invalid residence %d",
                    static_cast<int>(residence));
  auto desc = std::make_unique<RedOpDesc>();
  TSR_CHECK(makePreMulSum(dtype, scalar, desc.get()));
  std::lock_guard<std::mutex> lock(redOpMutex_);
  size_t slot = userOps_.size();
  for (size_t i = 0; i < userOps_.size(); ++i)
    if (userOps_[i] == nullptr) {
      slot = i;
      break;
    }
  if (slot == userOps_.size()) userOps_.emplace_back();
  userOps_[slot] = std::move(desc);
  *op = static_cast<tsrRedOp_t>(tsrNumOps + static_cast<int>(slot));
  return tsrSuccess;
}

Result CommImpl::redOpDestroy(tsrRedOp_t op) {
  int idx = static_cast<int>(op) - tsrNumOps;
  std::lock_guard<std::mutex> lock(redOpMutex_);
  if (static_cast<int>(op) < tsrNumOps)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrRedOpDestroy: op %d is built in, not created by "
                    "tsrRedOpCreatePreMulSum",
                    static_cast<int>(op));
  if (idx >= static_cast<int>(userOps_.size()) || userOps_[static_cast<size_t>(idx)] == nullptr)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrRedOpDestroy: op %d was not created on this communicator "
                    "or was already destroyed",
                    static_cast<int>(op));
  userOps_[static_cast<size_t>(idx)].reset();
  return tsrSuccess;
}

Result CommImpl::redOpLookup(tsrRedOp_t op, tsrDataType_t dtype, RedOpDesc* out) const {
  int v = static_cast<int>(op);
  if (v >= 0 && v < tsrNumOps) {
    return redOpBuiltin(op, out);
  }
  std::lock_guard<std::mutex> lock(redOpMutex_);
  int idx = v - tsrNumOps;
  if (idx < 0 || idx >= static_cast<int>(userOps_.size()) ||
      userOps_[static_cast<size_t>(idx)] == nullptr)
    return TSR_FAIL(tsrInvalidArgument,
                    "reduction op %d is neither built in nor live on this communicator", v);
  const RedOpDesc& d = *userOps_[static_cast<size_t>(idx)];
  if (d.dtype != tsrNumTypes && d.dtype != dtype)
    return TSR_FAIL(tsrInvalidArgument, "reduction op %d was created for %s, used with %s", v,
                    dtypeName(d.dtype), dtypeName(dtype));
  *out = d;
  return tsrSuccess;
}

}  // namespace tessera
