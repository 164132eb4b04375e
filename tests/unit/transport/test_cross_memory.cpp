// Cross-memory attach (transport/shm/cross_memory.hpp, Connection::readPeerAddress /
// writePeerAddress): between processes over shm the kernel copies between the rank's memory and
// any address of the peer's (unregistered malloc memory here); between threads over inproc it is
// the same address space. Where the kernel refuses it (a seccomp filter denying the system calls,
// as containers' defaults do) or TESSERA_CMA=0, the connection says so with the reason and the
// calls are refused with it; nothing is written.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "transport/transport.hpp"
#include "transport_matrix.hpp"

namespace tessera::test {
namespace {

constexpr size_t kBytes = 3 << 20;  // a few MiB: many pages, one call each way

// Each rank publishes the address of a malloc buffer (no registration) over the bootstrap; rank 0
// reads rank 1's and writes into it, and rank 1 checks what arrived.
std::string readAndWrite(TransportContext& ctx, TransportKind kind) {
  int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, kind, &conn));
  std::string why;
  TT_CHECK(conn->crossMemory(&why), "no cross-memory attach over %s: %s", transportName(kind),
           why.c_str());
  TT_CHECK(conn->sharesAddressSpace() == (kind == TransportKind::kInproc),
           "%s says sharesAddressSpace %d", transportName(kind), conn->sharesAddressSpace());
  std::vector<uint8_t> mine(kBytes), got(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) mine[i] = pattern(me, 0, i);
  uint64_t addrs[2] = {};
  addrs[me] = reinterpret_cast<uintptr_t>(mine.data());
  TT_CHECK_OK(ctx.bootstrap().allGather(addrs, sizeof(uint64_t)));
  if (me == 0) {
    TT_CHECK_OK(conn->readPeerAddress(got.data(), addrs[peer], kBytes));
    for (size_t i = 0; i < kBytes; ++i)
      TT_CHECK(got[i] == pattern(peer, 0, i), "read byte %zu is 0x%02x", i, got[i]);
    for (size_t i = 0; i < kBytes; ++i) got[i] = pattern(me, 1, i);
    // Into the middle of the peer's buffer: its first and last bytes stay.
    TT_CHECK_OK(conn->writePeerAddress(addrs[peer] + 1, got.data(), kBytes - 2));
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 1) {
    TT_CHECK(mine[0] == pattern(me, 0, 0) && mine[kBytes - 1] == pattern(me, 0, kBytes - 1),
             "the write went past its range");
    for (size_t i = 1; i + 1 < kBytes; ++i)
      TT_CHECK(mine[i] == pattern(0, 1, i - 1), "written byte %zu is 0x%02x", i, mine[i]);
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

// Where the kernel refuses: the connection says why, the calls fail with it, nothing moved.
std::string refused(TransportContext& ctx, const char* expect) {
  int peer = 1 - ctx.rank();
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, TransportKind::kShm, &conn));
  std::string why;
  TT_CHECK(!conn->crossMemory(&why), "cross-memory attach was not refused");
  TT_CHECK(why.find(expect) != std::string::npos, "reason '%s' lacks '%s'", why.c_str(), expect);
  std::vector<uint8_t> buf(4096, 0x5A);
  uint64_t addrs[2] = {};
  addrs[ctx.rank()] = reinterpret_cast<uintptr_t>(buf.data());
  TT_CHECK_OK(ctx.bootstrap().allGather(addrs, sizeof(uint64_t)));
  Result r = conn->readPeerAddress(buf.data(), addrs[peer], buf.size());
  TT_CHECK(r == tsrInvalidUsage, "readPeerAddress gave %s", resultName(r));
  TT_CHECK(std::strstr(lastErrorMessage(), expect) != nullptr, "sentence: %s", lastErrorMessage());
  r = conn->writePeerAddress(addrs[peer], buf.data(), buf.size());
  TT_CHECK(r == tsrInvalidUsage, "writePeerAddress gave %s", resultName(r));
  for (uint8_t b : buf) TT_CHECK(b == 0x5A, "a refused call wrote into the buffer");
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

TEST(CrossMemory, ShmProcessesReadAndWriteUnregisteredMemory) {
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    return readAndWrite(ctx, TransportKind::kShm);
  }));
}

TEST(CrossMemory, InprocThreadsShareTheAddressSpace) {
  expectAllRanksOk(runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) {
    return readAndWrite(ctx, TransportKind::kInproc);
  }));
}

TEST(CrossMemory, RefusedByASeccompFilterSaysWhy) {
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    TT_CHECK(test::denyCrossMemoryForTest(), "installing the seccomp filter failed: %s",
             std::strerror(errno));
    return refused(ctx, "Operation not permitted");
  }));
}

TEST(CrossMemory, TurnedOffByTesseraCma) {
  ScopedEnv off("TESSERA_CMA", "0");
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    return refused(ctx, "TESSERA_CMA=0");
  }));
}

TEST(CrossMemory, TransportsWithoutItSaySo) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  ScopedEnv tls("UCX_TLS", "tcp");
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(1 - ctx.rank(), TransportKind::kUcx, &conn));
    std::string reason;
    TT_CHECK(!conn->crossMemory(&reason), "ucx offers cross-memory attach");
    TT_CHECK(reason.find("ucx") != std::string::npos, "reason: %s", reason.c_str());
    return std::string();
  }));
}

}  // namespace
}  // namespace tessera::test
