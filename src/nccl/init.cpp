// The NCCL drop-in: version, communicators (creation, split, teardown, queries, errors), groups.

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl/shim.hpp"

using namespace tessera::nccl;

static_assert(sizeof(ncclUniqueId) == sizeof(tsrUniqueId), "unique ids must have one size");
static_assert(NCCL_CONFIG_UNDEF_INT == TSR_CONFIG_UNDEF_INT, "undefined config fields agree");

namespace tessera::nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr unsigned kOldestConfigVersion = 21400;  // NCCL 2.14 introduced ncclConfig_t

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> inits;  // inits started inside the group
};
thread_local GroupState tGroup;

void banner() {
  static std::once_flag once;
  std::call_once(once, [] {
    int tv = 0;
    tsrGetVersion(&tv);
    if (bannerEnabled())
      std::fprintf(stderr, "NCCL version %d.%d.%d+tessera %d.%d.%d (tessera's NCCL drop-in)\n",
                   NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, tv / 10000, tv / 100 % 100, tv % 100);
  });
}

bool envBlocking() {
  const char* v = std::getenv("TESSERA_COMM_BLOCKING");
  if (v == nullptr || *v == '\0') v = std::getenv("NCCL_COMM_BLOCKING");
  return v == nullptr || *v == '\0' || std::strcmp(v, "0") != 0;
}

// A value set in the environment and not "0".
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

bool envSplitShare() {
  return envSet("TESSERA_SPLIT_SHARE") || envSet("NCCL_COMM_SPLIT_SHARE_RESOURCES");
}

std::once_flag splitShareOnce, cgaOnce;

// A hint of NCCL's that tessera does not honour: dropped, said once per process.
void dropHint(std::once_flag* once, const char* api, const char* field, int value,
              const char* why) {
  std::call_once(*once, [&] {
    warn("%s: config %s = %d is not honoured and is ignored: %s", api, field, value, why);
  });
}

// Does `user`'s layout hold the field ending at `end`? (NCCL copies min(size, sizeof) bytes.)
#define HAS_FIELD(cfg, field) \
  ((cfg)->size >= offsetof(ncclConfig_t, field) + sizeof(((ncclConfig_t*)nullptr)->field))

// ncclConfig_t as NCCL reads it: its magic and version must be set by NCCL_CONFIG_INITIALIZER;
// only the fields inside `size` are read (an older, smaller layout leaves the rest undefined).
ncclResult_t readConfig(const ncclConfig_t* user, const char* api, tsrConfig_t* out,
                        bool* blocking) {
  tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
  cfg.device = TSR_DEVICE_CURRENT;
  // NCCL treats these as hints, so the drop-in never passes them on (tessera itself refuses
  // what it does not honour): set here, tessera's TESSERA_SPLIT_SHARE is not read either.
  cfg.splitShare = 0;
  cfg.cgaClusterSize = TSR_CONFIG_UNDEF_INT;
  if (envSplitShare())
    dropHint(&splitShareOnce, api, "NCCL_COMM_SPLIT_SHARE_RESOURCES / TESSERA_SPLIT_SHARE", 1,
             "a split child never shares its parent's resources in tessera");
  *blocking = envBlocking();
  if (user != nullptr) {
    if (user->magic != kConfigMagic)
      return fail(ncclInvalidArgument,
                  "%s: the ncclConfig_t has magic 0x%08x instead of 0x%08x: initialize it with "
                  "NCCL_CONFIG_INITIALIZER",
                  api, user->magic, kConfigMagic);
    if (user->version < kOldestConfigVersion)
      return fail(ncclInvalidArgument,
                  "%s: the ncclConfig_t has version %u, older than NCCL 2.14 (%u) which "
                  "introduced it",
                  api, user->version, kOldestConfigVersion);
    if (user->size < offsetof(ncclConfig_t, blocking) || user->size > (size_t{1} << 20))
      return fail(ncclInvalidArgument,
                  "%s: the ncclConfig_t has size %zu, which no NCCL layout "
                  "has: initialize it with NCCL_CONFIG_INITIALIZER",
                  api, user->size);
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    std::memcpy(&c, user, std::min(user->size, sizeof c));
    if (HAS_FIELD(user, blocking) && c.blocking != NCCL_CONFIG_UNDEF_INT) {
      if (c.blocking != 0 && c.blocking != 1)
        return fail(ncclInvalidArgument, "%s: config blocking = %d, must be 0 or 1", api,
                    c.blocking);
      *blocking = c.blocking != 0;
      cfg.blocking = c.blocking;
    }
    if (HAS_FIELD(user, cgaClusterSize) && c.cgaClusterSize != NCCL_CONFIG_UNDEF_INT &&
        c.cgaClusterSize > 1)
      dropHint(&cgaOnce, api, "cgaClusterSize", c.cgaClusterSize,
               "tessera's kernels launch without thread-block clusters");
    if (HAS_FIELD(user, minCTAs)) cfg.minCTAs = c.minCTAs;
    if (HAS_FIELD(user, maxCTAs)) cfg.maxCTAs = c.maxCTAs;
    // A network name is a demand, not a hint: one tessera does not have fails the init, as
    // NCCL's does.
    if (HAS_FIELD(user, netName)) cfg.netName = c.netName;
    if (HAS_FIELD(user, splitShare) && c.splitShare != NCCL_CONFIG_UNDEF_INT && c.splitShare != 0)
      dropHint(&splitShareOnce, api, "splitShare", c.splitShare,
               "a split child never shares its parent's resources in tessera");
    // Fields with no tessera counterpart: accepted, and said so where the user set them.
    struct Ignored {
      const char* name;
      bool present;
      int value;
    };
    const Ignored ignored[] = {
        {"trafficClass", HAS_FIELD(user, trafficClass), c.trafficClass},
        {"collnetEnable", HAS_FIELD(user, collnetEnable), c.collnetEnable},
        {"CTAPolicy", HAS_FIELD(user, CTAPolicy), c.CTAPolicy},
        {"shrinkShare", HAS_FIELD(user, shrinkShare), c.shrinkShare},
        {"nvlsCTAs", HAS_FIELD(user, nvlsCTAs), c.nvlsCTAs},
        {"nChannelsPerNetPeer", HAS_FIELD(user, nChannelsPerNetPeer), c.nChannelsPerNetPeer},
        {"nvlinkCentricSched", HAS_FIELD(user, nvlinkCentricSched), c.nvlinkCentricSched},
    };
    for (const Ignored& f : ignored)
      if (f.present && f.value != NCCL_CONFIG_UNDEF_INT)
        info("%s: config %s = %d has no tessera counterpart; ignored", api, f.name, f.value);
    if (HAS_FIELD(user, commName) && c.commName != nullptr)
      info("%s: communicator name \"%s\"", api, c.commName);
  }
  *out = cfg;
  return ncclSuccess;
}

// The communicator is ready: remember its rank and size; with `fallback`, attach the shadow
// communicator (a collective of its own: only where every rank is sure to get here on a thread
// of its own, i.e. a blocking init or split outside a group; not when one thread drives several
// ranks of a group, nor when a poll of ncclCommGetAsyncError sees a non-blocking init finish).
ncclResult_t ready(ncclComm* c, const char* api, bool fallback) {
  if (tsrCommUserRank(c->tsr, &c->rank) != tsrSuccess ||
      tsrCommCount(c->tsr, &c->nranks) != tsrSuccess)
    return fromTsr(tsrInternalError, api);
  return fallback ? attachFallback(c) : ncclSuccess;
}

ncclResult_t initRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                      const ncclConfig_t* config, const char* api) {
  banner();
  if (out == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
  *out = nullptr;
  tsrConfig_t cfg;
  bool blocking = true;
  ncclResult_t res = readConfig(config, api, &cfg, &blocking);
  if (res != ncclSuccess) return res;
  // Inside a group the init must not block (several ranks of one thread, nccl-tests -g N):
  // tessera's non-blocking init runs it on a thread of its own; ncclGroupEnd waits for it.
  const bool grouped = inGroup();
  if (grouped) cfg.blocking = 0;
  tsrUniqueId tid;
  std::memcpy(&tid, &id, sizeof tid);
  ncclComm* c = newComm();
  c->blocking = blocking;
  tsrResult_t r = tsrCommInitRankConfig(&c->tsr, nranks, tid, rank, &cfg);
  if (r == tsrSuccess) {
    res = ready(c, api, /*fallback=*/true);
    if (res != ncclSuccess) {
      tsrCommDestroy(c->tsr);
      retire(c);
      return res;
    }
    *out = c;
    return ncclSuccess;
  }
  if (r == tsrInProgress) {
    *out = c;
    if (grouped) {
      tGroup.inits.push_back(c);
      return ncclSuccess;
    }
    info("%s: rank %d of %d initializing (non-blocking)", api, rank, nranks);
    return ncclInProgress;
  }
  retire(c);
  return fromTsr(r, api);
}

// Waits for an init started inside a group (bounded: tessera's init has its bootstrap deadline).
ncclResult_t finishInit(ncclComm* c) {
  tsrResult_t async = tsrInProgress;
  for (;;) {
    tsrResult_t r = tsrCommGetAsyncError(c->tsr, &async);
    if (r != tsrSuccess) return fromTsr(r, "ncclGroupEnd");
    if (async != tsrInProgress) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (async != tsrSuccess) return fromTsr(async, "ncclGroupEnd (a ncclCommInitRank of the group)");
  return ready(c, "ncclGroupEnd", /*fallback=*/false);
}

// The outermost group ended: inits started in it complete here for blocking communicators;
// non-blocking ones are left running and the group says ncclInProgress.
ncclResult_t finishGroupInits(ncclResult_t r) {
  std::vector<ncclComm*> inits = std::move(tGroup.inits);
  tGroup.inits.clear();
  bool pending = false;
  for (ncclComm* c : inits) {
    if (!c->blocking) {
      pending = true;
      continue;
    }
    ncclResult_t ri = finishInit(c);
    if (ri != ncclSuccess && r == ncclSuccess) r = ri;
  }
  if (r == ncclSuccess && pending) return ncclInProgress;
  return r;
}

// A communicator made from `comm` by `make(parent, &child, config or null)` (split, shrink): the
// config read as NCCL reads it, else the parent's blocking mode; a child left null
// (NCCL_SPLIT_NOCOLOR) is no communicator, and *newcomm stays NULL.
template <class Make>
ncclResult_t childOf(ncclComm_t comm, ncclConfig_t* config, const char* api, ncclComm_t* newcomm,
                     Make&& make) {
  ncclComm* parent = nullptr;
  ncclResult_t r = lookup(comm, api, &parent);
  if (r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "%s: newcomm is NULL", api);
  *newcomm = nullptr;
  tsrConfig_t cfg;
  bool blocking = parent->blocking;
  if (config != nullptr) {
    r = readConfig(config, api, &cfg, &blocking);
    if (r != ncclSuccess) return r;
  }
  ncclComm* c = newComm();
  c->blocking = blocking;
  tsrResult_t tr = make(parent->tsr, &c->tsr, config != nullptr ? &cfg : nullptr);
  if (tr != tsrSuccess && tr != tsrInProgress) {
    retire(c);
    return fromTsr(tr, api);
  }
  if (c->tsr == nullptr) {
    retire(c);
    return ncclSuccess;
  }
  *newcomm = c;
  if (tr == tsrInProgress) return ncclInProgress;
  return ready(c, api, /*fallback=*/!inGroup());
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

}  // namespace tessera::nccl

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  banner();
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;  // the nccl.h this library was built against
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  banner();
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  tsrUniqueId id;
  ncclResult_t r = fromTsr(tsrGetUniqueId(&id), "ncclGetUniqueId");
  if (r == ncclSuccess) std::memcpy(uniqueId, &id, sizeof id);
  return r;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* api = "ncclCommInitRankScalable";
  if (nId < 1 || commIds == nullptr)
    return fail(ncclInvalidArgument, "%s: nId = %d and commIds = %p: at least one id is needed",
                api, nId, static_cast<void*>(commIds));
  // tessera's TCP bootstrap has one root, which serves any number of ranks: every rank uses the
  // first id. The roots behind the other ids serve no rank and close at their deadline.
  if (nId > 1) info("%s: %d ids given; tessera's bootstrap root is the first one's", api, nId);
  return initRank(newcomm, nranks, commIds[0], myrank, config, api);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  banner();
  const char* api = "ncclCommInitAll";
  if (comms == nullptr) return fail(ncclInvalidArgument, "%s: comms is NULL", api);
  if (ndev < 1) return fail(ncclInvalidArgument, "%s: ndev = %d, must be >= 1", api, ndev);
  // tessera's ranks of one process are threads; devlist NULL: devices 0..ndev-1 where there are
  // GPUs, host-only ranks where there are none (a documented extension). A device that does not
  // exist is refused with a sentence by tsrCommInitAll.
  std::vector<tsrComm_t> tcs(static_cast<size_t>(ndev), nullptr);
  ncclResult_t r = fromTsr(tsrCommInitAll(tcs.data(), ndev, devlist), api);
  if (r != ncclSuccess) return r;
  for (int i = 0; i < ndev; ++i) {
    ncclComm* c = newComm();
    c->tsr = tcs[static_cast<size_t>(i)];
    tsrCommUserRank(c->tsr, &c->rank);
    tsrCommCount(c->tsr, &c->nranks);
    comms[i] = c;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  return childOf(comm, config, "ncclCommSplit", newcomm,
                 [&](tsrComm_t parent, tsrComm_t* child, tsrConfig_t* cfg) {
                   return tsrCommSplit(parent, color, key, child, cfg);
                 });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    if (newcomm != nullptr) *newcomm = nullptr;
    return fail(ncclInvalidArgument,
                "ncclCommShrink: shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor "
                "NCCL_SHRINK_ABORT",
                shrinkFlags);
  }
  const int flags = shrinkFlags == NCCL_SHRINK_ABORT ? TSR_SHRINK_ABORT : TSR_SHRINK_DEFAULT;
  return childOf(comm, config, "ncclCommShrink", newcomm,
                 [&](tsrComm_t parent, tsrComm_t* child, tsrConfig_t* cfg) {
                   return tsrCommShrink(parent, excludeRanksList, excludeRanksCount, child, cfg,
                                        flags);
                 });
}

// tsrCommRevoke: NCCL's local revoke, and every other rank is told (tessera.h).
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommRevoke", &c);
  if (r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags %d is not NCCL_REVOKE_DEFAULT",
                revokeFlags);
  return fromTsr(tsrCommRevoke(c->tsr, TSR_REVOKE_DEFAULT), "ncclCommRevoke");
}

// NCCL 2.29's grow (tsrCommGrow; not in every nccl.h this builds against, so declared here).
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommGetUniqueId", &c);
  if (r != ncclSuccess) return r;
  if (uniqueId == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  tsrUniqueId id;
  r = fromTsr(tsrCommGetUniqueId(c->tsr, &id), "ncclCommGetUniqueId");
  if (r == ncclSuccess) std::memcpy(uniqueId, &id, sizeof id);
  return r;
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  if (comm == nullptr) {
    // A new rank joins with the id, as an init would (tsrCommGrow does the same for it).
    if (newcomm != nullptr) *newcomm = nullptr;
    if (uniqueId == nullptr)
      return fail(ncclInvalidArgument,
                  "ncclCommGrow: a new rank (comm NULL) needs the id of ncclCommGetUniqueId");
    return initRank(newcomm, nRanks, *uniqueId, rank, config, "ncclCommGrow");
  }
  return childOf(comm, config, "ncclCommGrow", newcomm,
                 [&](tsrComm_t parent, tsrComm_t* child, tsrConfig_t* cfg) {
                   return tsrCommGrow(parent, nRanks,
                                      reinterpret_cast<const tsrUniqueId*>(uniqueId), rank, child,
                                      cfg);
                 });
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommFinalize", &c);
  if (r != ncclSuccess) return r;
  r = fromTsr(tsrCommFinalize(c->tsr), "ncclCommFinalize");
  if (r == ncclSuccess) c->finalized = true;
  return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommDestroy", &c, /*allowInProgress=*/true);
  if (r != ncclSuccess) return r;
  releaseFallback(c, /*abort=*/false);
  r = fromTsr(tsrCommDestroy(c->tsr), "ncclCommDestroy");
  retire(c);
  return r;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommAbort", &c, /*allowInProgress=*/true);
  if (r != ncclSuccess) return r;
  releaseFallback(c, /*abort=*/true);
  r = fromTsr(tsrCommAbort(c->tsr), "ncclCommAbort");
  retire(c);
  return r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  const char* api = "ncclCommGetAsyncError";
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, api, &c, /*allowInProgress=*/true);
  if (r != ncclSuccess) return r;
  if (asyncError == nullptr) return fail(ncclInvalidArgument, "%s: asyncError is NULL", api);
  tsrResult_t async = tsrSuccess;
  r = fromTsr(tsrCommGetAsyncError(c->tsr, &async), api);
  if (r != ncclSuccess) return r;
  if (async == tsrSuccess && c->rank < 0) {
    // A non-blocking init just finished: the communicator is ready from here on.
    r = ready(c, api, /*fallback=*/false);
    if (r != ncclSuccess) return r;
  }
  *asyncError = async == tsrSuccess      ? ncclSuccess
                : async == tsrInProgress ? ncclInProgress
                                         : fromTsr(async, api);
  return ncclSuccess;
}

// tessera's result codes are NCCL's (ncclTimeout included, where the header has it), and so
// are its sentences for them; NCCL_DEBUG works where they say TESSERA_DEBUG (an alias).
const char* ncclGetErrorString(ncclResult_t result) {
  return tsrGetErrorString(static_cast<tsrResult_t>(result));
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  // The sentence behind the last failure of the calling thread (NCCL keeps one per thread too).
  return lastError();
}

// Deprecated by NCCL (some headers define it away as a macro); exported all the same, since
// programs built against older headers import it.
#ifdef ncclResetDebugInit
#undef ncclResetDebugInit
void ncclResetDebugInit();
#endif
void ncclResetDebugInit() {
  fail(ncclInvalidUsage,
       "ncclResetDebugInit: has no effect on tessera: NCCL_DEBUG and TESSERA_DEBUG are read when "
       "the library first logs");
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommCount", &c);
  if (r != ncclSuccess) return r;
  return fromTsr(tsrCommCount(c->tsr, count), "ncclCommCount");
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommCuDevice", &c);
  if (r != ncclSuccess) return r;
  // A host-only rank (a tessera extension) reports -1.
  return fromTsr(tsrCommCuDevice(c->tsr, device), "ncclCommCuDevice");
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  ncclComm* c = nullptr;
  ncclResult_t r = lookup(comm, "ncclCommUserRank", &c);
  if (r != ncclSuccess) return r;
  return fromTsr(tsrCommUserRank(c->tsr, rank), "ncclCommUserRank");
}

ncclResult_t ncclGroupStart() {
  ++tGroup.depth;
  return fromTsr(tsrGroupStart(), "ncclGroupStart");
}

ncclResult_t ncclGroupEnd() {
  if (tGroup.depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart is open on this thread");
  --tGroup.depth;
  ncclResult_t r = fromTsr(tsrGroupEnd(), "ncclGroupEnd");
  if (tGroup.depth > 0) return r;
  return finishGroupInits(r);
}

// Ends the outermost group without running its calls; the estimate is tessera's tuner's
// (microseconds), NCCL's unit for estimatedTime.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  const char* api = "ncclGroupSimulateEnd";
  constexpr unsigned kSimInfoMagic = 0x74685283;
  if (simInfo != nullptr &&
      (simInfo->magic != kSimInfoMagic ||
       simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)))
    return fail(ncclInvalidArgument,
                "%s: the ncclSimInfo_t has magic 0x%08x and size %zu: initialize it with "
                "NCCL_SIM_INFO_INITIALIZER",
                api, simInfo->magic, simInfo->size);
  if (tGroup.depth != 1)
    return fail(ncclInvalidUsage, "%s: it ends the outermost group only (%d groups are open)", api,
                tGroup.depth);
  double us = 0;
  ncclResult_t r = fromTsr(tsrGroupSimulateEnd(&us), api);
  tGroup.depth = 0;
  if (r == ncclSuccess && simInfo != nullptr) simInfo->estimatedTime = static_cast<float>(us);
  return finishGroupInits(r);
}

}  // extern "C"
