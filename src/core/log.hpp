// Logging: TESSERA_DEBUG (level), TESSERA_DEBUG_SUBSYS (which subsystems), TESSERA_DEBUG_FILE
// (where; %h = host, %p = pid). Every line: "host:pid:tid [rank] tessera LEVEL SUBSYS message".
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

// Bit flags; TESSERA_DEBUG_SUBSYS names them in upper case (INIT, BOOTSTRAP, ...).
enum class Subsys : uint32_t {
  kInit = 1u << 0,
  kBootstrap = 1u << 1,
  kTopo = 1u << 2,
  kEnv = 1u << 3,
  kComm = 1u << 4,
  kTransport = 1u << 5,
  kColl = 1u << 6,
  kTuning = 1u << 7,
  kFused = 1u << 8,
  kAlloc = 1u << 9,
  kProxy = 1u << 10,
  kGraph = 1u << 11,
  kCuda = 1u << 12,
  kAll = 0xffffffffu,
};

const char* subsysName(Subsys s);

// Parses a TESSERA_DEBUG_SUBSYS value: "INIT,COLL", "^TOPO" (all but), "ALL". On failure,
// returns false and says why in `why`.
bool parseSubsysMask(const char* value, uint32_t* mask, std::string* why);
bool parseLogLevel(const char* value, LogLevel* level, std::string* why);

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  uint32_t subsysMask = 0;
  std::string file;  // "" = stderr; may hold %h and %p
};

// Reads the configuration from the environment (done once, lazily, on first log call).
// An invalid value is reported on stderr once and the documented default is used for logging
// itself; communicator creation rejects the same value with tsrInvalidArgument.
LogConfig logConfigFromEnv();
// Replaces the active configuration (tests, and tools that take flags).
void logConfigure(const LogConfig& config);

bool logEnabled(LogLevel level, Subsys subsys);
LogLevel logLevel();
void logMessage(LogLevel level, Subsys subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Expands %h (host name) and %p (pid) in a TESSERA_DEBUG_FILE pattern.
std::string expandLogFileName(const std::string& pattern);

// The rank shown in log lines and error sentences of the calling thread (-1: none).
int currentRank();
class ScopedRank {
 public:
  explicit ScopedRank(int rank);
  ~ScopedRank();
  ScopedRank(const ScopedRank&) = delete;
  ScopedRank& operator=(const ScopedRank&) = delete;

 private:
  int previous_;
};

}  // namespace tessera

#define TSR_LOG_IMPL(level, subsys, ...)                     \
  do {                                                       \
    if (::tessera::logEnabled((level), (subsys)))            \
      ::tessera::logMessage((level), (subsys), __VA_ARGS__); \
  } while (0)

// These use `kLogSubsys`, declared once per .cpp (see core/status.hpp).
#define TSR_WARN(...) TSR_LOG_IMPL(::tessera::LogLevel::kWarn, kLogSubsys, __VA_ARGS__)
#define TSR_INFO(...) TSR_LOG_IMPL(::tessera::LogLevel::kInfo, kLogSubsys, __VA_ARGS__)
#define TSR_TRACE(...) TSR_LOG_IMPL(::tessera::LogLevel::kTrace, kLogSubsys, __VA_ARGS__)
