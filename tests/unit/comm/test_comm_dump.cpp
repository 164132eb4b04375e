// Hang diagnosis on process ranks: a call that times out names the collective, its call number,
// the plan step and the semaphore value expected and seen; with TESSERA_DUMP_ON_TIMEOUT=1 it
// also signals the same host's peers, and a peer still waiting logs what it waits for.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Rank 0 never makes the second call; rank 1 gives up after 2 s, rank 2 after 8 s. Rank 1's
// timeout must signal rank 2, which then logs what it waits for while it still waits.
TEST(DumpOnTimeout, TimeoutSignalsPeersAndTheyLogWhatTheyWaitFor) {
  tessera::test::ScopedEnv dump("TESSERA_DUMP_ON_TIMEOUT", "1");
  char dir[] = "/tmp/tessera-dump-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const int n = 3;
  tsrUniqueId id;
  {
    // No root thread in this process while it forks (forkRanks says why): rank 0 starts it.
    tessera::test::ScopedEnv commId("TESSERA_COMM_ID", tessera::test::loopbackCommId().c_str());
    ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  }
  std::vector<int> codes = tessera::test::forkRanks(
      n,
      [&](int r) {
        // Each rank's log (stderr) to its own file, read by the parent afterwards.
        std::string log = std::string(dir) + "/rank" + std::to_string(r) + ".log";
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0) return 10;
        tsrConfig_t config = TSR_CONFIG_INITIALIZER;
        config.timeoutMs = r == 1 ? 2000 : 8000;
        tsrComm_t comm = nullptr;
        if (tsrCommInitRankConfig(&comm, n, id, r, &config) != tsrSuccess) return 11;
        std::vector<float> buf(4096, 1.0f);
        if (tsrAllReduce(buf.data(), buf.data(), buf.size(), tsrFloat32, tsrSum, comm, nullptr) !=
            tsrSuccess)
          return 12;
        if (r == 0) {
          // Stays away from the second call until the others gave up: each has logged its
          // RESULT line (rank 2's deadline is 8 s, so 30 s is ample).
          bool gaveUp = tessera::test::waitUntil(
              [&] {
                for (int peer : {1, 2})
                  if (readFile(std::string(dir) + "/rank" + std::to_string(peer) + ".log")
                          .find("RESULT ") == std::string::npos)
                    return false;
                return true;
              },
              30);
          tsrCommAbort(comm);
          return gaveUp ? 0 : 15;
        }
        tsrResult_t res =
            tsrAllReduce(buf.data(), buf.data(), buf.size(), tsrFloat32, tsrSum, comm, nullptr);
        std::fprintf(stderr, "RESULT %d: %s\n", static_cast<int>(res), tsrGetLastError(comm));
        tsrCommAbort(comm);
        // Rank 1 times out; rank 2 may instead see rank 1 leave (its abort) first: an error
        // either way, never a success.
        if (r == 1) return res == tsrTimeout ? 0 : 13;
        return res != tsrSuccess ? 0 : 14;
      },
      40);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
  std::string log1 = readFile(std::string(dir) + "/rank1.log");
  std::string log2 = readFile(std::string(dir) + "/rank2.log");
  // The timed-out call's own sentence: collective, call number, plan step, semaphore values.
  EXPECT_NE(log1.find("RESULT 8:"), std::string::npos) << log1;
  EXPECT_NE(log1.find("(call 2): rank 1 "), std::string::npos) << log1;
  EXPECT_NE(log1.find(" op "), std::string::npos) << log1;
  EXPECT_NE(log1.find("(received "), std::string::npos) << log1;
  EXPECT_NE(log1.find("TESSERA_DUMP_ON_TIMEOUT: pending after 2 s"), std::string::npos) << log1;
  EXPECT_NE(log1.find("asked 2 process(es)"), std::string::npos) << log1;
  // Rank 2 logged what it waits for on rank 1's signal, long before its own deadline.
  EXPECT_NE(log2.find("TESSERA_DUMP_ON_TIMEOUT (SIGUSR1): pending: allreduce"), std::string::npos)
      << log2;
  EXPECT_NE(log2.find("(call 2): rank 2 "), std::string::npos) << log2;
  std::printf("---- rank 1's log\n%s---- rank 2's log\n%s----\n", log1.c_str(), log2.c_str());
  for (int r = 0; r < n; ++r)
    std::remove((std::string(dir) + "/rank" + std::to_string(r) + ".log").c_str());
  rmdir(dir);
}

}  // namespace
