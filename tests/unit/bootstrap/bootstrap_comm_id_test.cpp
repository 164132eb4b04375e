// TESSERA_COMM_ID (NCCL_COMM_ID's meaning): every rank makes the same unique id from the address
// without talking to the others, rank 0 starts the root there when it joins, and communicators
// formed one after another reuse the port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap_test_util.hpp"
#include "support/harness.hpp"

namespace tessera::test {
namespace {

// A loopback port nothing listens on now (the kernel's pick, released at once).
int freeLoopbackPort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

TEST(BootstrapCommId, EveryRankMakesTheSameIdAndRankZeroStartsTheRoot) {
  const int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  ScopedEnv commId("TESSERA_COMM_ID", address.c_str());
  constexpr int kRanks = 3;
  BootstrapOptions options;
  options.timeoutSeconds = 20;
  // Three communicators in a row on one port, each rank going on to the next as soon as it is
  // done with one (the previous root must have let go of the port), and in the third rank 0
  // coming after the others have been refused for longer than a root made by createUniqueId
  // would be waited for.
  constexpr int kRounds = 3;
  std::vector<std::vector<tsrUniqueId>> ids(kRounds, std::vector<tsrUniqueId>(kRanks));
  runRanks(
      kRanks,
      [&](int rank) {
        for (int round = 0; round < kRounds; ++round) {
          SCOPED_TRACE("communicator " + std::to_string(round));
          // Late on purpose (see above): the others must be refused for a while first.
          if (round == 2 && rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          tsrUniqueId& id = ids[static_cast<size_t>(round)][static_cast<size_t>(rank)];
          ASSERT_EQ(createUserUniqueId(&id), tsrSuccess) << lastErrorMessage();
          std::unique_ptr<Bootstrap> b;
          ASSERT_EQ(TcpBootstrap::create(id, rank, kRanks, options, &b), tsrSuccess)
              << lastErrorMessage();
          std::vector<uint8_t> buf(16 * kRanks, 0xEE);
          std::vector<uint8_t> mine = patternBuffer(rank, round, 16);
          std::memcpy(buf.data() + 16 * rank, mine.data(), 16);
          ASSERT_EQ(b->allGather(buf.data(), 16), tsrSuccess) << lastErrorMessage();
          for (int r = 0; r < kRanks; ++r)
            EXPECT_EQ(std::memcmp(buf.data() + 16 * r, patternBuffer(r, round, 16).data(), 16), 0)
                << "slot of rank " << r << " on rank " << rank;
        }
      },
      90);
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<tsrUniqueId>& made = ids[static_cast<size_t>(round)];
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(std::memcmp(&made[0], &made[static_cast<size_t>(r)], sizeof(tsrUniqueId)), 0)
          << "rank " << r << " made another id for communicator " << round;
  }
  UniqueIdContents c;
  ASSERT_EQ(decodeUniqueId(ids[0][0], &c), tsrSuccess) << lastErrorMessage();
  EXPECT_TRUE(c.rootAtRank0);
  EXPECT_EQ(c.root.str(), address);
}

TEST(BootstrapCommId, WithoutItTheIdIsRandomAndItsRootRunsAlready) {
  ScopedEnv commId("TESSERA_COMM_ID", nullptr);
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId a, b;
  ASSERT_EQ(createUserUniqueId(&a), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(createUserUniqueId(&b), tsrSuccess) << lastErrorMessage();
  EXPECT_NE(std::memcmp(&a, &b, sizeof(a)), 0);
  UniqueIdContents c;
  ASSERT_EQ(decodeUniqueId(a, &c), tsrSuccess) << lastErrorMessage();
  EXPECT_FALSE(c.rootAtRank0);
}

TEST(BootstrapCommId, ABadAddressIsRefusedNamingTheVariable) {
  // (Not a name that fails to resolve: without a network DNS may take seconds to say so.)
  for (const char* bad : {"127.0.0.1", "::1:29500"}) {
    ScopedEnv commId("TESSERA_COMM_ID", bad);
    tsrUniqueId id;
    EXPECT_EQ(createUserUniqueId(&id), tsrInvalidArgument) << bad;
    EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_COMM_ID")) << lastErrorMessage();
  }
}

TEST(BootstrapCommId, ResolveHostPort) {
  SocketAddress a;
  std::string why;
  ASSERT_TRUE(resolveHostPort("127.0.0.1:29500", &a, &why)) << why;
  EXPECT_EQ(a.str(), "127.0.0.1:29500");
  ASSERT_TRUE(resolveHostPort("[::1]:7", &a, &why)) << why;
  EXPECT_EQ(a.str(), "[::1]:7");
  for (const char* bad : {"127.0.0.1", "::1:29500", "[::1]", "host:0", "host:99999", ":5"})
    EXPECT_FALSE(resolveHostPort(bad, &a, &why)) << bad;
}

}  // namespace
}  // namespace tessera::test
