// Helpers of the transport tests: run a body on N ranks that each have a TransportContext, as
// threads of this process (inproc bootstrap) or as forked processes (tcp bootstrap over
// loopback), with every rank's failures reported to the test.
//
// In a forked child gtest assertions do not reach the parent, so bodies report failure by
// returning a non-empty sentence (use the TT_* macros below); the parent asserts that every rank
// returned "" and prints what the others said.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/context.hpp"

namespace tessera::test {

enum class RankMode { kThreads, kProcesses };
const char* rankModeName(RankMode mode);

struct RankOptions {
  double timeoutSeconds = 20;  // transport and bootstrap waits
  double runSeconds = 120;     // the whole run; children still running then are killed
  int cudaDevice = -1;
  std::vector<int> cudaDevices;  // per rank; when not empty it overrides cudaDevice
};

// Returns "" on success, else what went wrong.
using RankBody = std::function<std::string(TransportContext& ctx)>;

// Runs body on `nranks` ranks. Returns one sentence per rank ("" for success); for processes, a
// child that died says so ("killed by signal 9").
std::vector<std::string> runTransportRanks(RankMode mode, int nranks, const RankBody& body,
                                           const RankOptions& options = {});

// Asserts (gtest) that every rank succeeded.
void expectAllRanksOk(const std::vector<std::string>& results);

// Connections from this rank to every other rank (index = peer; the own slot is null), made in
// an order that cannot deadlock.
Result connectAll(TransportContext& ctx, std::vector<std::shared_ptr<Connection>>* out);

// Byte i of what `rank` writes in round `round` (differs between ranks, rounds and bytes).
inline uint8_t pattern(int rank, uint64_t round, size_t i) {
  return static_cast<uint8_t>((rank + 1) * 37 + round * 11 + i * 7 + (i >> 8) * 3);
}

// Names of entries in /dev/shm that tessera made ("tessera" in the name), for leak checks.
std::vector<std::string> tesseraShmEntries();

}  // namespace tessera::test

// For rank bodies: on failure return a sentence naming the expression and tessera's last error.
#define TT_CHECK_OK(expr)                                                        \
  do {                                                                           \
    ::tessera::Result tt_r_ = (expr);                                            \
    if (tt_r_ != tsrSuccess)                                                     \
      return std::string(#expr) + " -> " + ::tessera::resultName(tt_r_) + ": " + \
             ::tessera::lastErrorMessage();                                      \
  } while (0)
#define TT_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond)) return std::string(#cond) + " failed: " + ::tessera::strprintf(__VA_ARGS__); \
  } while (0)
