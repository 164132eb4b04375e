// Helpers of the bootstrap tests: thread ranks of either kind, processes via fork(), data
// patterns the tests check against, and a clock for "the error came within its deadline".
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace tessera::test {

enum class Kind { kInproc, kTcp };
const char* kindName(Kind kind);

// Runs body(bootstrap) on `nranks` thread ranks of `kind` (tcp: over loopback) whose operations
// time out after `timeoutSeconds`. Creating a rank's bootstrap is asserted to succeed.
void runBootstrapRanks(Kind kind, int nranks, double timeoutSeconds,
                       const std::function<void(Bootstrap&)>& body);

// Byte i of what rank `rank` contributes in round `round`: differs between ranks, rounds and
// neighbouring bytes, so a misplaced or stale byte shows.
inline uint8_t pattern(int rank, int round, size_t i) {
  return static_cast<uint8_t>((rank + 1) * 37 + round * 11 + i * 7 + (i >> 8) * 3);
}
std::vector<uint8_t> patternBuffer(int rank, int round, size_t bytes);

// Seconds since construction.
class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The machine is a loaded 2-core box: an error "within its deadline" is allowed this much more.
constexpr double kSlackSeconds = 10.0;

bool contains(const std::string& text, const std::string& part);

}  // namespace tessera::test
