// Errors, logging and handles of the NCCL drop-in.
#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "nccl/shim.hpp"

namespace tessera::nccl {
namespace {

thread_local std::string tLastError;

// Why each function the shim does not implement is refused (the others: kDefaultWhy).
struct Refusal {
  const char* name;
  const char* why;
};
constexpr const char* kDefaultWhy = "tessera has no counterpart for it yet";
constexpr Refusal kRefusals[] = {
    {"ncclCommMemStats", "tessera does not report per-communicator memory statistics"},
    {"ncclCommSuspend", "tessera cannot release a communicator's memory and keep the communicator"},
    {"ncclCommResume", "tessera cannot release a communicator's memory and keep the communicator"},
    {"ncclDevCommCreate",
     "NCCL's device API is not implemented; tessera's own device handles are in "
     "include/tessera/device"},
    {"ncclDevCommDestroy", "NCCL's device API is not implemented"},
    {"ncclGetLsaMultimemDevicePointer", "NCCL's device API (symmetric windows) is not implemented"},
    {"ncclGetMultimemDevicePointer", "NCCL's device API (symmetric windows) is not implemented"},
    {"ncclGetLsaDevicePointer", "NCCL's device API (symmetric windows) is not implemented"},
    {"ncclGetPeerDevicePointer", "NCCL's device API (symmetric windows) is not implemented"},
    {"ncclCommQueryProperties", "NCCL's device API is not implemented"},
    {"ncclPutSignal", "one-sided operations on windows are not implemented"},
    {"ncclSignal", "one-sided operations on windows are not implemented"},
    {"ncclWaitSignal", "one-sided operations on windows are not implemented"},
    {"ncclWinGetUserPtr",
     "windows are registrations of the user's buffer here; NCCL's window "
     "queries are not implemented"},
    {"ncclParam",
     "tessera's settings are environment variables (TESSERA_*, and NCCL_* aliases): "
     "tessera_info --env lists them"},
};

// TESSERA_DEBUG, else NCCL_DEBUG (read here with getenv: the shim sees only the public API).
struct DebugSetting {
  int level = 1;        // 0 none, 1 warn, 2 info, 3 trace
  bool banner = false;  // VERSION, INFO or TRACE: the version line at the first call
};
const DebugSetting& debugSetting() {
  static const DebugSetting setting = [] {
    DebugSetting d;
    const char* v = std::getenv("TESSERA_DEBUG");
    if (v == nullptr || *v == '\0') v = std::getenv("NCCL_DEBUG");
    if (v == nullptr || *v == '\0') return d;
    if (strcasecmp(v, "NONE") == 0) d.level = 0;
    if (strcasecmp(v, "INFO") == 0) d.level = 2;
    if (strcasecmp(v, "TRACE") == 0) d.level = 3;
    d.banner = d.level >= 2 || strcasecmp(v, "VERSION") == 0;
    return d;
  }();
  return setting;
}
int debugLevel() { return debugSetting().level; }

void vlog(const char* level, const char* fmt, va_list ap) {
  char line[2048];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::fprintf(stderr, "tessera nccl-shim %d %s %s\n", static_cast<int>(getpid()), level, line);
}

std::mutex gCommsMutex;
std::unordered_set<const ncclComm*>& comms() {
  static auto* set = new std::unordered_set<const ncclComm*>();  // never destroyed: see retire
  return *set;
}

// A program that loaded this library is an NCCL program: its NCCL_* variables configure tessera
// where the TESSERA_* ones are unset (the registry's aliases, tessera_info --env), unless the
// user said otherwise with TESSERA_NCCL_ENV=0. The library reads variables at communicator
// creation, after this ran.
__attribute__((constructor)) void enableNcclEnvironment() { setenv("TESSERA_NCCL_ENV", "1", 0); }

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  tLastError = text;
  if (debugLevel() >= 1) std::fprintf(stderr, "tessera nccl-shim %d WARN %s\n", getpid(), text);
  return code;
}

ncclResult_t fromTsr(tsrResult_t r, const char* api) {
  if (r == tsrSuccess) return ncclSuccess;
  const char* why = tsrGetLastError(nullptr);
  tLastError = std::string(api) + ": " + (why != nullptr ? why : "");
  if (r == tsrInProgress) return ncclInProgress;
  if (r == tsrTimeout) {
#ifdef TESSERA_NCCL_HAS_TIMEOUT
    return ncclTimeout;
#else
    return ncclRemoteError;  // this nccl.h has no ncclTimeout: a peer that did not answer in time
#endif
  }
  if (r < 0 || r >= tsrNumResults) return ncclInternalError;
  return static_cast<ncclResult_t>(r);
}

const char* lastError() { return tLastError.c_str(); }

bool infoEnabled() { return debugLevel() >= 2; }
bool bannerEnabled() { return debugSetting().banner; }

void info(const char* fmt, ...) {
  if (!infoEnabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog("INFO", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  if (debugLevel() < 1) return;
  va_list ap;
  va_start(ap, fmt);
  vlog("WARN", fmt, ap);
  va_end(ap);
}

extern "C" ncclResult_t tesseraNcclRefuse(const char* name) {
  const char* why = kDefaultWhy;
  for (const Refusal& r : kRefusals)
    if (std::strncmp(name, r.name, std::strlen(r.name)) == 0) {
      why = r.why;
      break;
    }
  return fail(ncclInvalidUsage, "%s: not supported by tessera's NCCL drop-in: %s", name, why);
}

ncclComm* newComm() {
  auto* c = new ncclComm();
  std::lock_guard<std::mutex> lock(gCommsMutex);
  comms().insert(c);
  return c;
}

ncclResult_t lookup(ncclComm_t comm, const char* api, ncclComm** out, bool allowInProgress) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
  {
    std::lock_guard<std::mutex> lock(gCommsMutex);
    if (comms().count(comm) == 0)
      return fail(ncclInvalidArgument,
                  "%s: comm %p is not a communicator of this library (an uninitialized handle, or "
                  "one made by another NCCL)",
                  api, static_cast<void*>(comm));
  }
  if (comm->destroyed)
    return fail(ncclInvalidUsage,
                "%s: the communicator was destroyed (ncclCommDestroy or "
                "ncclCommAbort) and cannot be used",
                api);
  if (comm->rank < 0) {  // a non-blocking init: is it over?
    tsrResult_t async = tsrSuccess;
    ncclResult_t r = fromTsr(tsrCommGetAsyncError(comm->tsr, &async), api);
    if (r != ncclSuccess) return r;
    if (async == tsrInProgress) {
      if (!allowInProgress)
        return fail(ncclInvalidUsage,
                    "%s: the communicator is still initializing (non-blocking init: poll "
                    "ncclCommGetAsyncError until it is no longer ncclInProgress)",
                    api);
    } else if (async == tsrSuccess) {
      if (tsrCommUserRank(comm->tsr, &comm->rank) != tsrSuccess ||
          tsrCommCount(comm->tsr, &comm->nranks) != tsrSuccess)
        return fromTsr(tsrInternalError, api);
    } else if (!allowInProgress) {
      return fail(ncclInvalidUsage,
                  "%s: the communicator's initialization failed (%s): it "
                  "cannot be used; ncclCommGetAsyncError returns the error",
                  api, tsrGetErrorString(async));
    }
  }
  *out = comm;
  return ncclSuccess;
}

void retire(ncclComm* comm) {
  // The memory is kept: a later use of the handle is found destroyed, not freed memory.
  comm->destroyed = true;
  comm->tsr = nullptr;
}

}  // namespace tessera::nccl
