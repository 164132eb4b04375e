#include "core/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/env.hpp"

namespace tessera {
namespace {

struct SubsysEntry {
  const char* name;
  Subsys bit;
};
constexpr SubsysEntry kSubsysNames[] = {
    {"INIT", Subsys::kInit},
    {"BOOTSTRAP", Subsys::kBootstrap},
    {"TOPO", Subsys::kTopo},
    {"ENV", Subsys::kEnv},
    {"COMM", Subsys::kComm},
    {"TRANSPORT", Subsys::kTransport},
    {"COLL", Subsys::kColl},
    {"TUNING", Subsys::kTuning},
    {"FUSED", Subsys::kFused},
    {"ALLOC", Subsys::kAlloc},
    {"PROXY", Subsys::kProxy},
    {"GRAPH", Subsys::kGraph},
    {"CUDA", Subsys::kCuda},
    // NCCL's names for what tessera logs under the subsystems above, so that NCCL_DEBUG_SUBSYS
    // (an alias under the NCCL drop-in) takes every value NCCL documents. After the originals:
    // subsysName() prints the first entry of a bit.
    {"P2P", Subsys::kTransport},
    {"SHM", Subsys::kTransport},
    {"NET", Subsys::kTransport},
    {"CALL", Subsys::kComm},
    {"RAS", Subsys::kComm},
    {"REG", Subsys::kAlloc},
    {"NVLS", Subsys::kColl},
    {"PROFILE", Subsys::kColl},
};

// The default of TESSERA_DEBUG_SUBSYS, as in NCCL: the subsystems that matter at start-up.
constexpr const char* kDefaultSubsys = "INIT,BOOTSTRAP,ENV";

std::once_flag gInitOnce;
std::atomic<int> gLevel{static_cast<int>(LogLevel::kWarn)};
std::atomic<uint32_t> gMask{0};
std::mutex gMutex;  // guards gFile and the writing of lines
FILE* gFile = nullptr;
bool gFileOwned = false;

thread_local int tRank = -1;

std::string upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  // Short name, as NCCL prints it: up to the first dot.
  char* dot = std::strchr(buf, '.');
  if (dot != nullptr) *dot = '\0';
  return buf;
}

void applyConfigLocked(const LogConfig& config) {
  if (gFileOwned && gFile != nullptr) std::fclose(gFile);
  gFile = stderr;
  gFileOwned = false;
  if (!config.file.empty()) {
    std::string path = expandLogFileName(config.file);
    FILE* f = std::fopen(path.c_str(), "a");
    if (f != nullptr) {
      gFile = f;
      gFileOwned = true;
    } else {
      std::fprintf(stderr, "tessera: cannot open %s '%s' (%s); logging to stderr\n",
                   envSourceName("TESSERA_DEBUG_FILE"), path.c_str(), std::strerror(errno));
    }
  }
  gLevel.store(static_cast<int>(config.level), std::memory_order_relaxed);
  gMask.store(config.subsysMask, std::memory_order_relaxed);
}

void initFromEnv() {
  std::lock_guard<std::mutex> lock(gMutex);
  applyConfigLocked(logConfigFromEnv());
}

}  // namespace

const char* subsysName(Subsys s) {
  for (const auto& e : kSubsysNames)
    if (e.bit == s) return e.name;
  return "ALL";
}

bool parseSubsysMask(const char* value, uint32_t* mask, std::string* why) {
  std::string v = value == nullptr ? "" : value;
  bool invert = false;
  if (!v.empty() && v[0] == '^') {
    invert = true;
    v.erase(0, 1);
  }
  uint32_t m = 0;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    std::string tok =
        upper(v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? v.size() + 1 : comma + 1;
    if (tok.empty()) continue;
    if (tok == "ALL") {
      m = static_cast<uint32_t>(Subsys::kAll);
      continue;
    }
    bool found = false;
    for (const auto& e : kSubsysNames) {
      if (tok == e.name) {
        m |= static_cast<uint32_t>(e.bit);
        found = true;
      }
    }
    if (!found) {
      if (why != nullptr) {
        *why = "unknown subsystem '" + tok + "' (known: ALL";
        for (const auto& e : kSubsysNames) *why += std::string(",") + e.name;
        *why += ")";
      }
      return false;
    }
  }
  *mask = invert ? ~m : m;
  return true;
}

bool parseLogLevel(const char* value, LogLevel* level, std::string* why) {
  std::string v = upper(value == nullptr ? "" : value);
  if (v == "NONE" || v.empty())
    *level = LogLevel::kNone;
  else if (v == "VERSION")
    *level = LogLevel::kVersion;
  else if (v == "WARN")
    *level = LogLevel::kWarn;
  else if (v == "INFO")
    *level = LogLevel::kInfo;
  else if (v == "TRACE")
    *level = LogLevel::kTrace;
  else {
    if (why != nullptr)
      *why = "'" + std::string(value) + "' is not one of NONE, VERSION, WARN, INFO, TRACE";
    return false;
  }
  return true;
}

LogConfig logConfigFromEnv() {
  LogConfig config;
  std::string why;
  // envRaw: an empty value counts as unset, and NCCL_DEBUG* count where aliases are active. The
  // sentences name the variable the value came from.
  if (const char* v = envRaw("TESSERA_DEBUG"); v != nullptr) {
    if (!parseLogLevel(v, &config.level, &why)) {
      std::fprintf(stderr, "tessera: invalid %s: %s; using WARN\n", envSourceName("TESSERA_DEBUG"),
                   why.c_str());
      config.level = LogLevel::kWarn;
    }
  }
  const char* subsys = envRaw("TESSERA_DEBUG_SUBSYS");
  if (subsys == nullptr || !parseSubsysMask(subsys, &config.subsysMask, &why)) {
    if (subsys != nullptr)
      std::fprintf(stderr, "tessera: invalid %s: %s; using %s\n",
                   envSourceName("TESSERA_DEBUG_SUBSYS"), why.c_str(), kDefaultSubsys);
    parseSubsysMask(kDefaultSubsys, &config.subsysMask, nullptr);
  }
  if (const char* f = envRaw("TESSERA_DEBUG_FILE"); f != nullptr) config.file = f;
  return config;
}

void logConfigure(const LogConfig& config) {
  std::call_once(gInitOnce, [] {});  // a later lazy init must not override this configuration
  std::lock_guard<std::mutex> lock(gMutex);
  applyConfigLocked(config);
}

bool logEnabled(LogLevel level, Subsys subsys) {
  std::call_once(gInitOnce, initFromEnv);
  int active = gLevel.load(std::memory_order_relaxed);
  if (static_cast<int>(level) > active) return false;
  // WARN is shown whatever the subsystem filter says, as in NCCL.
  if (level <= LogLevel::kWarn) return true;
  return (gMask.load(std::memory_order_relaxed) & static_cast<uint32_t>(subsys)) != 0;
}

LogLevel logLevel() {
  std::call_once(gInitOnce, initFromEnv);
  return static_cast<LogLevel>(gLevel.load(std::memory_order_relaxed));
}

void logMessage(LogLevel level, Subsys subsys, const char* fmt, ...) {
  static const std::string host = hostName();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* levelName = level == LogLevel::kWarn    ? "WARN"
                          : level == LogLevel::kInfo  ? "INFO"
                          : level == LogLevel::kTrace ? "TRACE"
                                                      : "VERSION";
  char rank[16];
  if (tRank >= 0)
    std::snprintf(rank, sizeof(rank), "%d", tRank);
  else
    std::snprintf(rank, sizeof(rank), "-");
  std::lock_guard<std::mutex> lock(gMutex);
  FILE* out = gFile != nullptr ? gFile : stderr;
  std::fprintf(out, "%s:%d:%ld [%s] tessera %s %s %s\n", host.c_str(), static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), rank, levelName, subsysName(subsys), msg);
  std::fflush(out);
}

std::string expandLogFileName(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') {
        out += hostName();
        ++i;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(getpid());
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

int currentRank() { return tRank; }

ScopedRank::ScopedRank(int rank) : previous_(tRank) { tRank = rank; }
ScopedRank::~ScopedRank() { tRank = previous_; }

}  // namespace tessera
