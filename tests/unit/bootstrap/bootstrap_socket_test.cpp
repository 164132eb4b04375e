// Interface selection (NCCL's TESSERA_SOCKET_IFNAME syntax), address and unique-id encodings,
// and the TCP kind over IPv6 loopback.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap_test_util.hpp"
#include "core/hash.hpp"
#include "support/harness.hpp"

namespace tessera::test {
namespace {

TEST(BootstrapSocket, IfnameFilterFollowsNcclSyntax) {
  IfnameFilter prefixes = parseIfnameFilter("eth,ib");
  EXPECT_TRUE(ifnameMatches(prefixes, "eth0"));
  EXPECT_TRUE(ifnameMatches(prefixes, "ib1"));
  EXPECT_FALSE(ifnameMatches(prefixes, "lo"));
  EXPECT_FALSE(ifnameMatches(prefixes, "veth0"));

  IfnameFilter exact = parseIfnameFilter("=eth0");
  EXPECT_TRUE(ifnameMatches(exact, "eth0"));
  EXPECT_FALSE(ifnameMatches(exact, "eth01"));
  EXPECT_FALSE(ifnameMatches(exact, "eth"));

  IfnameFilter excluded = parseIfnameFilter("^docker,lo");
  EXPECT_FALSE(ifnameMatches(excluded, "docker0"));
  EXPECT_FALSE(ifnameMatches(excluded, "lo"));
  EXPECT_TRUE(ifnameMatches(excluded, "eth0"));

  IfnameFilter excludedExact = parseIfnameFilter("^=eth0");
  EXPECT_FALSE(ifnameMatches(excludedExact, "eth0"));
  EXPECT_TRUE(ifnameMatches(excludedExact, "eth01"));
}

TEST(BootstrapSocket, PickedAddressFollowsTheEnvironment) {
  SocketAddress a;
  std::string ifname;
  {
    ScopedEnv env("TESSERA_SOCKET_IFNAME", "=lo");
    ScopedEnv family("TESSERA_SOCKET_FAMILY", "AF_INET");
    ASSERT_EQ(pickBootstrapAddress(&a, &ifname), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(ifname, "lo");
    EXPECT_EQ(a.family(), AF_INET);
    EXPECT_EQ(a.str().rfind("127.", 0), 0u) << a.str();
  }
  {
    ScopedEnv env("TESSERA_SOCKET_IFNAME", "^lo");
    // No other interface may be up here; then there is nothing to pick, said in a sentence.
    Result r = pickBootstrapAddress(&a, &ifname);
    if (r == tsrSuccess)
      EXPECT_NE(ifname, "lo");
    else
      EXPECT_TRUE(contains(lastErrorMessage(), "no network interface")) << lastErrorMessage();
  }
  {
    ScopedEnv env("TESSERA_SOCKET_IFNAME", "nosuchinterface");
    EXPECT_EQ(pickBootstrapAddress(&a, &ifname), tsrInvalidArgument);
    EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_SOCKET_IFNAME='nosuchinterface'"))
        << lastErrorMessage();
  }
  {
    ScopedEnv family("TESSERA_SOCKET_FAMILY", "AF_UNIX");
    EXPECT_EQ(pickBootstrapAddress(&a, &ifname), tsrInvalidArgument);
    EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_SOCKET_FAMILY")) << lastErrorMessage();
  }
}

TEST(BootstrapSocket, AddressesSurviveTheirWireForm) {
  SocketAddress v4;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&v4.storage);
  in4->sin_family = AF_INET;
  ASSERT_EQ(inet_pton(AF_INET, "192.0.2.77", &in4->sin_addr), 1);
  v4.length = sizeof(sockaddr_in);
  v4.setPort(40001);
  SocketAddress v6;
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&v6.storage);
  in6->sin6_family = AF_INET6;
  ASSERT_EQ(inet_pton(AF_INET6, "fd00::1234", &in6->sin6_addr), 1);
  in6->sin6_scope_id = 3;
  v6.length = sizeof(sockaddr_in6);
  v6.setPort(65000);

  uint8_t wire[kWireAddressBytes];
  SocketAddress back;
  encodeAddress(v4, wire);
  ASSERT_TRUE(decodeAddress(wire, &back));
  EXPECT_EQ(back.str(), "192.0.2.77:40001");
  encodeAddress(v6, wire);
  ASSERT_TRUE(decodeAddress(wire, &back));
  EXPECT_EQ(back.str(), "[fd00::1234]:65000");
  EXPECT_EQ(reinterpret_cast<sockaddr_in6*>(&back.storage)->sin6_scope_id, 3u);
  wire[0] = 9;  // unknown family
  EXPECT_FALSE(decodeAddress(wire, &back));
}

TEST(BootstrapSocket, UniqueIdRoundTripsAndChecksItsFormat) {
  UniqueIdContents c;
  c.version = 12345;
  c.nonce = 0x0123456789abcdefull;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&c.root.storage);
  in4->sin_family = AF_INET;
  in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c.root.length = sizeof(sockaddr_in);
  c.root.setPort(5555);
  tsrUniqueId id;
  encodeUniqueId(c, &id);
  UniqueIdContents back;
  ASSERT_EQ(decodeUniqueId(id, &back), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(back.version, 12345u);
  EXPECT_EQ(back.nonce, c.nonce);
  EXPECT_EQ(back.root.str(), "127.0.0.1:5555");

  // A later format, correctly checksummed, is refused with its own sentence.
  id.internal[4] = 2;
  uint64_t sum = fnv1a64(id.internal, TSR_UNIQUE_ID_BYTES - 8);
  std::memcpy(id.internal + TSR_UNIQUE_ID_BYTES - 8, &sum, sizeof(sum));
  EXPECT_EQ(decodeUniqueId(id, &back), tsrInvalidArgument);
  EXPECT_TRUE(contains(lastErrorMessage(), "format 2")) << lastErrorMessage();
}

TEST(BootstrapSocket, TcpRanksOverIpv6Loopback) {
  ScopedEnv family("TESSERA_SOCKET_FAMILY", "AF_INET6");
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  SocketAddress a;
  std::string name;
  if (pickBootstrapAddress(&a, &name) != tsrSuccess)
    GTEST_SKIP() << "no IPv6 loopback here: " << lastErrorMessage();
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  BootstrapOptions options;
  options.timeoutSeconds = 20;
  runRanks(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(TcpBootstrap::create(id, rank, 3, options, &b), tsrSuccess) << lastErrorMessage();
    std::vector<int> all(3, -1);
    all[static_cast<size_t>(rank)] = rank * 7;
    ASSERT_EQ(b->allGather(all.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(all, (std::vector<int>{0, 7, 14}));
  });
}

}  // namespace
}  // namespace tessera::test
