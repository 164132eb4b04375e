// The host transports the generic transport tests run over, as gtest parameters: which transport
// every connection is forced to, whether ranks are threads or processes, how many, and for ucx
// which UCX_TLS. A transport that does not work makes its cases fail (never skip): the first
// connect reports the factory's sentence.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "transport/channel.hpp"
#include "transport/context.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {

struct TransportCase {
  const char* name;  // gtest's parameter name: Inproc_2, Shm_4, UcxTcp_2, UcxSm_4
  TransportKind kind;
  RankMode mode;
  int nranks;
  const char* ucxTls;  // UCX_TLS for the ranks (nullptr: leave it alone)
};

// UCX_TLS for ucx over shared memory. UCX 1.13 in this container accepts the "sm" alias (posix,
// sysv, cma); "self" is not needed because no rank talks to itself.
inline constexpr const char* kUcxSmTls = "sm";

inline TransportCase inprocCase(int n) {
  return {n == 2   ? "Inproc_2"
          : n == 3 ? "Inproc_3"
                   : "Inproc_4",
          TransportKind::kInproc, RankMode::kThreads, n, nullptr};
}
inline TransportCase shmCase(int n) {
  return {n == 2   ? "Shm_2"
          : n == 3 ? "Shm_3"
                   : "Shm_4",
          TransportKind::kShm, RankMode::kProcesses, n, nullptr};
}
inline TransportCase ucxTcpCase(int n) {
  return {n == 2   ? "UcxTcp_2"
          : n == 3 ? "UcxTcp_3"
                   : "UcxTcp_4",
          TransportKind::kUcx, RankMode::kProcesses, n, "tcp"};
}
inline TransportCase ucxSmCase(int n) {
  return {n == 2   ? "UcxSm_2"
          : n == 3 ? "UcxSm_3"
                   : "UcxSm_4",
          TransportKind::kUcx, RankMode::kProcesses, n, kUcxSmTls};
}

// Every host transport at each of `counts` ranks.
inline std::vector<TransportCase> hostTransportCases(std::initializer_list<int> counts) {
  std::vector<TransportCase> out;
  for (int n : counts) {
    out.push_back(inprocCase(n));
    out.push_back(shmCase(n));
    out.push_back(ucxTcpCase(n));
    out.push_back(ucxSmCase(n));
  }
  return out;
}

struct TransportCaseName {
  std::string operator()(const ::testing::TestParamInfo<TransportCase>& info) const {
    return info.param.name;
  }
};

inline void PrintTo(const TransportCase& c, std::ostream* os) { *os << c.name; }

// Runs `body` on the case's ranks with UCX_TLS set for them (forked children inherit it).
inline std::vector<std::string> runCase(const TransportCase& c, const RankBody& body,
                                        const RankOptions& options = {}) {
  ScopedEnv tls("UCX_TLS", c.ucxTls);
  return runTransportRanks(c.mode, c.nranks, body, options);
}

// Connections of `kind` from this rank to every other rank (index = peer; the own slot is null).
// Bootstrap sends never wait for the receiver, so every rank may go through its peers in order.
inline Result connectAllKind(TransportContext& ctx, TransportKind kind,
                             std::vector<std::shared_ptr<Connection>>* out) {
  out->assign(static_cast<size_t>(ctx.nranks()), nullptr);
  for (int p = 0; p < ctx.nranks(); ++p) {
    if (p == ctx.rank()) continue;
    Result r = ctx.connect(p, kind, &(*out)[static_cast<size_t>(p)]);
    if (r != tsrSuccess) return r;
  }
  return tsrSuccess;
}

// The seed of a test's random choices: TESSERA_TEST_SEED when set, else fresh. It is recorded as
// the test property "seed" and printed, so a failure can be replayed.
inline uint64_t testSeed() {
  uint64_t seed = 0;
  if (const char* s = std::getenv("TESSERA_TEST_SEED"); s != nullptr && *s != '\0') {
    seed = std::strtoull(s, nullptr, 0);
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[ seed     ] TESSERA_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// A generator for one (seed, a, b, c) tuple: ranks of one test derive the same choices from it.
inline std::mt19937_64 rngFor(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(a), static_cast<uint32_t>(b), static_cast<uint32_t>(c)};
  return std::mt19937_64(seq);
}

}  // namespace tessera::test
