#include "core/status.hpp"

#include <cstdio>

namespace tessera {
namespace {
thread_local std::string tLastError;
}  // namespace

std::string vstrprintf(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  return s;
}

const char* resultName(Result code) {
  switch (code) {
    case tsrSuccess: return "tsrSuccess";
    case tsrUnhandledCudaError: return "tsrUnhandledCudaError";
    case tsrSystemError: return "tsrSystemError";
    case tsrInternalError: return "tsrInternalError";
    case tsrInvalidArgument: return "tsrInvalidArgument";
    case tsrInvalidUsage: return "tsrInvalidUsage";
    case tsrRemoteError: return "tsrRemoteError";
    case tsrInProgress: return "tsrInProgress";
    case tsrTimeout: return "tsrTimeout";
    default: return "unknown result";
  }
}

const char* lastErrorMessage() { return tLastError.c_str(); }

void clearLastError() { tLastError.clear(); }

Result failWith(Subsys subsys, Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  int rank = currentRank();
  if (rank >= 0) msg = strprintf("rank %d: %s", rank, msg.c_str());
  tLastError = msg;
  TSR_LOG_IMPL(LogLevel::kWarn, subsys, "%s [%s]", msg.c_str(), resultName(code));
  return code;
}

Result addContext(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string ctx = vstrprintf(fmt, ap);
  va_end(ap);
  tLastError = ctx + ": " + tLastError;
  return code;
}

}  // namespace tessera

extern "C" const char* tsrGetErrorString(tsrResult_t result) {
  switch (result) {
    case tsrSuccess: return "no error";
    case tsrUnhandledCudaError:
      return "unhandled cuda error (run with TESSERA_DEBUG=INFO for details)";
    case tsrSystemError: return "unhandled system error (run with TESSERA_DEBUG=INFO for details)";
    case tsrInternalError:
      return "internal error - please report this issue to the tessera developers";
    case tsrInvalidArgument: return "invalid argument (run with TESSERA_DEBUG=WARN for details)";
    case tsrInvalidUsage: return "invalid usage (run with TESSERA_DEBUG=WARN for details)";
    case tsrRemoteError: return "remote process exited or there was a network error";
    case tsrInProgress: return "operation in progress";
    case tsrTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}
