// Helpers of the shrink and revoke tests: thread ranks over either thread bootstrap, and the check
// that a shrunk communicator reduces right (against a serial sum over the survivors).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace tessera::test {

enum class Boot { kInproc, kUniqueId };

inline std::vector<tsrComm_t> makeComms(Boot boot, int n, int timeoutMs = TSR_CONFIG_UNDEF_INT) {
  std::vector<tsrComm_t> comms(static_cast<size_t>(n), nullptr);
  if (boot == Boot::kInproc) {
    EXPECT_EQ(tsrCommInitAll(comms.data(), n, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
    return comms;
  }
  tsrUniqueId id;
  EXPECT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs;
  tessera::test::runRanks(n, [&](int r) {
    EXPECT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  return comms;
}

inline int64_t value(int parentRank, size_t i) {
  return int64_t{parentRank + 1} * 1000003 + int64_t(i);
}

// Every survivor's all-reduce on its shrunk communicator equals the serial sum over survivors.
inline void expectShrunkWorks(const std::vector<tsrComm_t>& shrunk,
                              const std::vector<int>& survivors) {
  const size_t count = 4099;  // prime: uneven chunks
  std::vector<std::vector<int64_t>> out(shrunk.size(), std::vector<int64_t>(count, -1));
  tessera::test::runRanks(static_cast<int>(survivors.size()), [&](int i) {
    const int parent = survivors[static_cast<size_t>(i)];
    tsrComm_t c = shrunk[static_cast<size_t>(parent)];
    int rank = -1, size = -1;
    ASSERT_EQ(tsrCommUserRank(c, &rank), tsrSuccess);
    ASSERT_EQ(tsrCommCount(c, &size), tsrSuccess);
    EXPECT_EQ(rank, i) << "survivors keep their order";
    EXPECT_EQ(size, static_cast<int>(survivors.size()));
    std::vector<int64_t> in(count);
    for (size_t k = 0; k < count; ++k) in[k] = value(parent, k);
    EXPECT_EQ(tsrAllReduce(in.data(), out[static_cast<size_t>(parent)].data(), count, tsrInt64,
                           tsrSum, c, nullptr),
              tsrSuccess)
        << tsrGetLastError(c);
  });
  std::vector<int64_t> want(count, 0);
  for (int p : survivors)
    for (size_t k = 0; k < count; ++k) want[k] += value(p, k);
  for (int p : survivors) EXPECT_EQ(out[static_cast<size_t>(p)], want) << "parent rank " << p;
}

// Both ranks of a two-rank communicator still reduce right (after a refused call left it alone).
inline void expectPairStillReduces(const std::vector<tsrComm_t>& comms) {
  std::vector<int64_t> sums(2, -1);
  tessera::test::runRanks(2, [&](int r) {
    int64_t mine = r + 5;
    EXPECT_EQ(tsrAllReduce(&mine, &sums[static_cast<size_t>(r)], 1, tsrInt64, tsrSum,
                           comms[static_cast<size_t>(r)], nullptr),
              tsrSuccess)
        << tsrGetLastError(comms[static_cast<size_t>(r)]);
  });
  EXPECT_EQ(sums, (std::vector<int64_t>{11, 11}));
}

}  // namespace tessera::test
