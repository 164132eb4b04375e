// The NCCL drop-in's internals (src/nccl): NCCL's handles over tessera's C API.
//
// The shim is a user of the public API (include/tessera/tessera.h) like any other: it includes no
// internal header of the library. An ncclComm_t is a pointer to a Comm below; every Comm ever
// handed out stays in a registry (and in memory) for the life of the process, so a handle used
// after ncclCommDestroy is ncclInvalidUsage with a sentence instead of a read of freed memory.
#pragma once

#include <nccl.h>

#include <cstdarg>
#include <string>

#include "tessera/tessera.h"

struct ncclComm {
  tsrComm_t tsr = nullptr;    // the tessera communicator
  void* shadow = nullptr;     // the real NCCL's communicator (TESSERA_NCCL_FALLBACK), or null
  bool destroyed = false;     // after ncclCommDestroy / ncclCommAbort
  bool finalized = false;     // after ncclCommFinalize
  bool blocking = true;       // the config's blocking (init and the calls' errors)
  int rank = -1, nranks = 0;  // filled once the communicator is ready
};

namespace tessera::nccl {

// ---- errors --------------------------------------------------------------------------------
// Sets the calling thread's last error (ncclGetLastError) and logs it at WARN; returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A tessera result as NCCL's; on failure the sentence is "<api>: <tessera's sentence>".
ncclResult_t fromTsr(tsrResult_t r, const char* api);
// The calling thread's last error ("" if none).
const char* lastError();
// The refusal of a function tessera does not implement (refused.cpp, generated): ncclInvalidUsage
// with "<name>: not supported by tessera's NCCL drop-in: <why>".
extern "C" ncclResult_t tesseraNcclRefuse(const char* name);

// ---- logging (NCCL_DEBUG / TESSERA_DEBUG: INFO and TRACE show the shim's INFO lines) ---------
bool infoEnabled();
// NCCL_DEBUG / TESSERA_DEBUG is VERSION, INFO or TRACE: print the version line once.
bool bannerEnabled();
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- handles -------------------------------------------------------------------------------
// A new handle (registered for the life of the process).
ncclComm* newComm();
// The live communicator behind `comm`, or an error naming `api`: NULL, not a handle of this
// library, destroyed, or still initializing (non-blocking init, when !allowInProgress).
ncclResult_t lookup(ncclComm_t comm, const char* api, ncclComm** out, bool allowInProgress = false);
// Marks the handle destroyed (its memory stays: later uses are errors, not crashes).
void retire(ncclComm* comm);

// ---- groups --------------------------------------------------------------------------------
// Inside ncclGroupStart / ncclGroupEnd on the calling thread.
bool inGroup();

// ---- fallback (TESSERA_NCCL_FALLBACK) ------------------------------------------------------
// After the tessera communicator is ready: creates the shadow communicator over the real NCCL
// when the variable is set. A fallback that cannot be used (the library does not open, is this
// very library, or its init fails) is logged at WARN and leaves `shadow` null: calls tessera
// refuses then fail with tessera's sentence.
ncclResult_t attachFallback(ncclComm* comm);
void releaseFallback(ncclComm* comm, bool abort);

enum class CallKind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kSend,
  kRecv
};
struct Call {
  CallKind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  int rootOrPeer;
  cudaStream_t stream;
};
// Reissues `call` on the shadow communicator through the real NCCL.
ncclResult_t forward(ncclComm* comm, const Call& call);

// Bytes of one element of an NCCL datatype; 0 for a value that is not one.
size_t elemSize(ncclDataType_t t);

// tessera's enums have NCCL's values (tessera.h says so); these only make the casts visible.
inline tsrDataType_t dt(ncclDataType_t t) { return static_cast<tsrDataType_t>(t); }
inline tsrRedOp_t op(ncclRedOp_t o) { return static_cast<tsrRedOp_t>(o); }
inline tsrStream_t stream(cudaStream_t s) { return reinterpret_cast<tsrStream_t>(s); }

}  // namespace tessera::nccl
