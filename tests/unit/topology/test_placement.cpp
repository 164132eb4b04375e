// Host identity and the locality of two ranks' placements.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/status.hpp"
#include "support/harness.hpp"
#include "topology/placement.hpp"

namespace tessera {
namespace {

using test::ScopedEnv;

TEST(TopoHostId, EnvironmentOverrides) {
  ScopedEnv env("TESSERA_HOST_ID", "emulated-node-7");
  std::string id;
  ASSERT_EQ(hostId(&id), tsrSuccess);
  EXPECT_EQ(id, "emulated-node-7");
}

TEST(TopoHostId, DefaultIsHostnameAndBootId) {
  ScopedEnv env("TESSERA_HOST_ID", nullptr);
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  in >> boot;
  std::string id;
  ASSERT_EQ(hostId(&id), tsrSuccess);
  if (boot.empty()) {
    EXPECT_EQ(id, name);
  } else {
    EXPECT_EQ(id, std::string(name) + ":" + boot);
    EXPECT_EQ(boot.size(), 36u);  // a UUID: the part that separates two boots
  }
}

TEST(TopoHostId, OverlongOverrideIsRejected) {
  ScopedEnv env("TESSERA_HOST_ID", std::string(300, 'h').c_str());
  std::string id;
  EXPECT_EQ(hostId(&id), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("TESSERA_HOST_ID"), std::string::npos)
      << lastErrorMessage();
  RankPlacement p;
  EXPECT_EQ(localPlacement(-1, nullptr, &p), tsrInvalidArgument);
}

TEST(TopoPlacement, FieldsOfThisProcess) {
  ScopedEnv env("TESSERA_HOST_ID", "node-a");
  RankPlacement p;
  ASSERT_EQ(localPlacement(3, "0000:3B:00.0", &p), tsrSuccess);
  EXPECT_STREQ(p.hostId, "node-a");
  EXPECT_EQ(p.pid, static_cast<int32_t>(getpid()));
  EXPECT_EQ(p.cudaDevice, 3);
  EXPECT_STREQ(p.busId, "0000:3b:00.0");
  EXPECT_NE(p.processNonce, 0u);

  RankPlacement host;
  ASSERT_EQ(localPlacement(-1, nullptr, &host), tsrSuccess);
  EXPECT_EQ(host.cudaDevice, -1);
  EXPECT_STREQ(host.busId, "");
  EXPECT_EQ(host.processNonce, p.processNonce);
}

TEST(TopoPlacement, BadArgumentsAreRejected) {
  RankPlacement p;
  EXPECT_EQ(localPlacement(0, "not-a-bus-id", &p), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("not-a-bus-id"), std::string::npos);
  EXPECT_EQ(localPlacement(-2, nullptr, &p), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("-2"), std::string::npos);
}

TEST(TopoPlacement, ThreadsOfOneProcessAreOneProcess) {
  std::vector<RankPlacement> all(4);
  std::vector<Result> results(4, tsrInternalError);
  test::runRanks(4, [&](int r) {
    results[static_cast<size_t>(r)] = localPlacement(r, nullptr, &all[static_cast<size_t>(r)]);
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(results[static_cast<size_t>(r)], tsrSuccess);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      EXPECT_EQ(locality(all[static_cast<size_t>(a)], all[static_cast<size_t>(b)]),
                Locality::kSameProcess);
}

TEST(TopoPlacement, SurvivesACopyAsBytes) {
  RankPlacement p;
  ASSERT_EQ(localPlacement(0, "3b:00.0", &p), tsrSuccess);
  unsigned char wire[sizeof(RankPlacement)];
  std::memcpy(wire, &p, sizeof(p));
  RankPlacement q;
  std::memcpy(&q, wire, sizeof(q));
  EXPECT_EQ(locality(p, q), Locality::kSameProcess);
  EXPECT_TRUE(sameGpu(p, q));
}

TEST(TopoPlacement, DifferentHostIdsAreDifferentHosts) {
  RankPlacement a, b;
  {
    ScopedEnv env("TESSERA_HOST_ID", "host-a");
    ASSERT_EQ(localPlacement(0, "0000:3b:00.0", &a), tsrSuccess);
  }
  {
    ScopedEnv env("TESSERA_HOST_ID", "host-b");
    ASSERT_EQ(localPlacement(0, "0000:3b:00.0", &b), tsrSuccess);
  }
  EXPECT_EQ(locality(a, b), Locality::kOtherHost);
  EXPECT_EQ(locality(b, a), Locality::kOtherHost);
  EXPECT_FALSE(sameGpu(a, b));  // same bus id, but on another machine
  EXPECT_STREQ(localityName(locality(a, b)), "other host");
}

TEST(TopoPlacement, SameHostDifferentProcess) {
  // Another process as the communicator would see it: same host id, its own pid and nonce.
  ScopedEnv env("TESSERA_HOST_ID", "node-a");
  RankPlacement a;
  ASSERT_EQ(localPlacement(0, "0000:3b:00.0", &a), tsrSuccess);
  RankPlacement b = a;
  b.processNonce ^= 0x5a5a;
  EXPECT_EQ(locality(a, b), Locality::kSameHost);
  EXPECT_TRUE(sameGpu(a, b));  // two processes sharing one GPU
  RankPlacement c = a;
  c.pid += 1;  // same nonce but another pid: a different process
  EXPECT_EQ(locality(a, c), Locality::kSameHost);
  RankPlacement d = a;
  std::strcpy(d.busId, "0000:3c:00.0");
  EXPECT_FALSE(sameGpu(a, d));
}

TEST(TopoPlacement, EqualTruncatedIdsWithDifferentHashesDiffer) {
  RankPlacement a, b;
  ASSERT_EQ(localPlacement(-1, nullptr, &a), tsrSuccess);
  b = a;
  b.hostHash ^= 1;  // what two long host ids sharing their first 255 characters look like
  EXPECT_EQ(locality(a, b), Locality::kOtherHost);
}

TEST(TopoPlacement, ForkedChildIsAnotherProcessOnThisHost) {
  ScopedEnv env("TESSERA_HOST_ID", "node-fork");
  RankPlacement parent;
  ASSERT_EQ(localPlacement(-1, nullptr, &parent), tsrSuccess);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RankPlacement p;
    int ok = localPlacement(-1, nullptr, &p) == tsrSuccess;
    ssize_t n = ok ? write(fds[1], &p, sizeof(p)) : -1;
    _exit(n == static_cast<ssize_t>(sizeof(p)) ? 0 : 1);
  }
  close(fds[1]);
  RankPlacement fromChild;
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got < sizeof(fromChild) && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    ssize_t n = read(fds[0], reinterpret_cast<char*>(&fromChild) + got, sizeof(fromChild) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  if (got < sizeof(fromChild)) kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(got, sizeof(fromChild)) << "the child did not report its placement in 30 s";
  EXPECT_NE(fromChild.processNonce, parent.processNonce);
  EXPECT_EQ(locality(parent, fromChild), Locality::kSameHost);
}

}  // namespace
}  // namespace tessera
