// Result codes, the calling thread's last-error sentence, and the macros that propagate them.
//
// Convention: a function that fails records one sentence saying what failed, with which value,
// on which rank (TSR_FAIL), and returns the code. Callers propagate with TSR_CHECK and add
// nothing unless they know more than the callee.
#pragma once

#include <cstdarg>
#include <string>

#include "core/log.hpp"
#include "tessera/tessera.h"

namespace tessera {

using Result = tsrResult_t;

// printf into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list ap);

// "tsrInvalidArgument" etc.: the enumerator's name, for log lines.
const char* resultName(Result code);

// The calling thread's last error sentence ("" when none).
const char* lastErrorMessage();
void clearLastError();

// Records `code` and its sentence as the calling thread's last error (prefixed with the rank
// of the calling thread's current ScopedRank, if any), logs it at WARN under `subsys`, and
// returns `code`.
Result failWith(Subsys subsys, Result code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Keeps the original sentence of an error raised elsewhere but prepends context to it.
Result addContext(Result code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tessera

// Each .cpp that uses these macros declares, inside namespace tessera (or its own):
//   namespace { constexpr Subsys kLogSubsys = Subsys::kBootstrap; }
#define TSR_FAIL(code, ...) ::tessera::failWith(kLogSubsys, (code), __VA_ARGS__)

#define TSR_CHECK(expr)                                  \
  do {                                                   \
    ::tessera::Result tsr_check_r_ = (expr);             \
    if (tsr_check_r_ != tsrSuccess) return tsr_check_r_; \
  } while (0)
