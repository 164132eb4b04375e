// What goes wrong comes back as the right code, with a sentence, within the deadline: missing
// ranks, garbage ids, a peer of another version, abort, bad arguments, size mismatches.
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap_test_util.hpp"
#include "support/harness.hpp"
#include "tessera/version.h"

namespace tessera::test {
namespace {

constexpr double kShort = 2.0;

BootstrapOptions shortOptions(double seconds = kShort) {
  BootstrapOptions o;
  o.timeoutSeconds = seconds;
  return o;
}

TEST(BootstrapErrors, InprocRankThatNeverJoinsIsNamed) {
  std::shared_ptr<InprocGroup> group;
  ASSERT_EQ(InprocBootstrap::createGroup(3, shortOptions(), &group), tsrSuccess);
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(group->join(rank, &b), tsrSuccess);
    Stopwatch clock;
    EXPECT_EQ(b->barrier(), tsrTimeout);
    std::string why = lastErrorMessage();
    EXPECT_LT(clock.seconds(), kShort + kSlackSeconds);
    EXPECT_GE(clock.seconds(), kShort * 0.9);
    EXPECT_TRUE(contains(why, "rank(s) 2 did not arrive")) << why;
    EXPECT_TRUE(contains(why, "never joined the group: 2")) << why;
    EXPECT_TRUE(contains(why, strprintf("rank %d of 3", rank))) << why;
  });
}

TEST(BootstrapErrors, TcpRankThatNeverJoinsIsNamed) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Stopwatch clock;
    EXPECT_EQ(TcpBootstrap::create(id, rank, 3, shortOptions(3.0), &b), tsrTimeout);
    std::string why = lastErrorMessage();
    EXPECT_LT(clock.seconds(), 3.0 + kSlackSeconds);
    EXPECT_TRUE(contains(why, "rank(s) 2 of 3 did not reach the bootstrap root")) << why;
    EXPECT_EQ(b, nullptr);
  });
}

TEST(BootstrapErrors, GarbageUniqueIdIsRejectedAtOnce) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 20; ++trial) {
    tsrUniqueId id;
    for (char& c : id.internal) c = static_cast<char>(rng());
    std::unique_ptr<Bootstrap> b;
    Stopwatch clock;
    EXPECT_EQ(TcpBootstrap::create(id, 0, 2, shortOptions(), &b), tsrInvalidArgument);
    EXPECT_LT(clock.seconds(), 1.0);
    EXPECT_TRUE(contains(lastErrorMessage(), "corrupted or not a tessera id"))
        << lastErrorMessage();
  }
}

TEST(BootstrapErrors, UniqueIdWithAFlippedBitIsRejectedAtOnce) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId valid;
  ASSERT_EQ(createUniqueId(&valid), tsrSuccess) << lastErrorMessage();
  for (size_t bit = 0; bit < sizeof(valid.internal) * 8; bit += 13) {
    tsrUniqueId id = valid;
    id.internal[bit / 8] = static_cast<char>(id.internal[bit / 8] ^ (1 << (bit % 8)));
    std::unique_ptr<Bootstrap> b;
    Stopwatch clock;
    EXPECT_EQ(TcpBootstrap::create(id, 0, 2, shortOptions(), &b), tsrInvalidArgument)
        << "bit " << bit;
    EXPECT_LT(clock.seconds(), 1.0);
    EXPECT_TRUE(contains(lastErrorMessage(), "corrupted or not a tessera id"))
        << lastErrorMessage();
  }
}

TEST(BootstrapErrors, PeerWithAnotherVersionIsRefusedNamingBoth) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  const int other = TESSERA_VERSION_CODE + 101;
  const std::string both = strprintf(
      "rank 1 runs tessera version %d but the root (the process "
      "that created the unique id) runs version %d",
      other, TESSERA_VERSION_CODE);
  runRanks(2, [&](int rank) {
    BootstrapOptions o = shortOptions(3.0);
    if (rank == 1) o.helloVersionOverride = other;
    std::unique_ptr<Bootstrap> b;
    Stopwatch clock;
    Result r = TcpBootstrap::create(id, rank, 2, o, &b);
    std::string why = lastErrorMessage();
    EXPECT_LT(clock.seconds(), 3.0 + kSlackSeconds);
    // The refused rank learns it was refused; the other that the communicator cannot form.
    EXPECT_EQ(r, rank == 1 ? tsrInvalidArgument : tsrRemoteError) << why;
    EXPECT_TRUE(contains(why, both)) << why;
  });
}

TEST(BootstrapErrors, TwoRanksWithTheSameRankAreRefused) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  std::atomic<int> refused{0}, failed{0};
  runRanks(2, [&](int) {
    std::unique_ptr<Bootstrap> b;
    Result r = TcpBootstrap::create(id, 0, 2, shortOptions(3.0), &b);
    EXPECT_TRUE(contains(lastErrorMessage(), "two ranks say they are rank 0"))
        << lastErrorMessage();
    if (r == tsrInvalidArgument) ++refused;
    if (r == tsrRemoteError) ++failed;
  });
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(failed.load(), 1);
}

TEST(BootstrapErrors, RanksThatDisagreeOnTheSizeAreRefused) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  std::atomic<int> refused{0};
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    Result r = TcpBootstrap::create(id, rank, rank == 0 ? 2 : 3, shortOptions(3.0), &b);
    EXPECT_NE(r, tsrSuccess);
    EXPECT_TRUE(contains(lastErrorMessage(), "ranks but rank")) << lastErrorMessage();
    if (r == tsrInvalidArgument) ++refused;
  });
  EXPECT_EQ(refused.load(), 1);
}

TEST(BootstrapErrors, InprocAbortWakesBlockedRecv) {
  // Rank 1's barrier then fails at once too: rank 0 aborted, so it left the group.
  std::shared_ptr<InprocGroup> group;
  ASSERT_EQ(InprocBootstrap::createGroup(2, shortOptions(60), &group), tsrSuccess);
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(group->join(rank, &b), tsrSuccess);
    if (rank == 1) {
      Stopwatch clock;
      EXPECT_EQ(b->barrier(), tsrRemoteError);
      EXPECT_TRUE(contains(lastErrorMessage(), "rank 0 left the group")) << lastErrorMessage();
      EXPECT_LT(clock.seconds(), kSlackSeconds);
      return;
    }
    std::thread aborter([&] {
      // Not synchronisation: the abort comes late on purpose, so that it must wake a receive that
      // already blocks rather than refuse one not yet made.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      b->abort();
    });
    Stopwatch clock;
    int x = 0;
    EXPECT_EQ(b->recv(1, 5, &x, sizeof(x)), tsrRemoteError);
    EXPECT_LT(clock.seconds(), kSlackSeconds);
    aborter.join();
    EXPECT_EQ(b->recv(1, 5, &x, sizeof(x)), tsrInvalidUsage);
  });
}

// Rank 0 blocks in recv; another thread aborts it. Rank 1, blocked in recv from rank 0 over
// the connection rank 0 opened, learns at once that rank 0 is gone.
TEST(BootstrapErrors, TcpAbortWakesBlockedRecvHereAndAtThePeer) {
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  std::atomic<bool> peerSawIt{false};
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(TcpBootstrap::create(id, rank, 2, shortOptions(60), &b), tsrSuccess)
        << lastErrorMessage();
    int x = 1;
    if (rank == 1) {
      ASSERT_EQ(b->recv(0, 5, &x, sizeof(x)), tsrSuccess) << lastErrorMessage();
      Stopwatch clock;
      EXPECT_EQ(b->recv(0, 6, &x, sizeof(x)), tsrRemoteError);
      EXPECT_TRUE(contains(lastErrorMessage(), "rank 0 will send nothing more"))
          << lastErrorMessage();
      EXPECT_LT(clock.seconds(), kSlackSeconds);
      peerSawIt = true;
      return;
    }
    ASSERT_EQ(b->send(1, 5, &x, sizeof(x)), tsrSuccess) << lastErrorMessage();
    std::thread aborter([&] {
      // Not synchronisation: the abort comes late on purpose, so that it must wake a receive that
      // already blocks rather than refuse one not yet made.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      b->abort();
    });
    Stopwatch clock;
    EXPECT_EQ(b->recv(1, 5, &x, sizeof(x)), tsrRemoteError);
    EXPECT_TRUE(contains(lastErrorMessage(), "aborted")) << lastErrorMessage();
    EXPECT_LT(clock.seconds(), kSlackSeconds);
    aborter.join();
    EXPECT_EQ(b->send(1, 5, &x, sizeof(x)), tsrInvalidUsage);
    EXPECT_EQ(b->allGather(&x, 0), tsrInvalidUsage);
    // Still alive: it is the abort, not the end of this bootstrap, that rank 1 noticed.
    EXPECT_TRUE(waitUntil([&] { return peerSawIt.load(); }, 2 * kSlackSeconds));
  });
}

TEST(BootstrapErrors, RecvTimesOutNamingPeerAndTag) {
  for (Kind kind : {Kind::kInproc, Kind::kTcp}) {
    std::atomic<bool> rank0Done{false};
    runBootstrapRanks(kind, 2, kShort, [&](Bootstrap& b) {
      if (b.rank() == 0) {
        Stopwatch clock;
        int x = 0;
        EXPECT_EQ(b.recv(1, 77, &x, sizeof(x)), tsrTimeout);
        std::string why = lastErrorMessage();
        EXPECT_LT(clock.seconds(), kShort + kSlackSeconds);
        EXPECT_GE(clock.seconds(), kShort * 0.9);
        EXPECT_TRUE(contains(why, "rank 1")) << why;
        EXPECT_TRUE(contains(why, "tag 77")) << why;
        EXPECT_TRUE(contains(why, "rank 0 of 2")) << why;
        EXPECT_TRUE(contains(why, "2 s")) << why;
        rank0Done = true;
      }
      // Rank 1 stays until rank 0 has timed out (rank 1 leaving would be another error).
      EXPECT_TRUE(waitUntil([&] { return rank0Done.load(); }, kShort + 2 * kSlackSeconds))
          << "rank 0's receive did not time out";
    });
  }
}

TEST(BootstrapErrors, SizeMismatchNamesBothSizes) {
  for (Kind kind : {Kind::kInproc, Kind::kTcp}) {
    runBootstrapRanks(kind, 2, 20, [&](Bootstrap& b) {
      uint64_t eight = 8;
      if (b.rank() == 1) {
        ASSERT_EQ(b.send(0, 3, &eight, sizeof(eight)), tsrSuccess) << lastErrorMessage();
        ASSERT_EQ(b.send(0, 3, &eight, sizeof(eight)), tsrSuccess) << lastErrorMessage();
        return;
      }
      uint32_t four = 0;
      EXPECT_EQ(b.recv(1, 3, &four, sizeof(four)), tsrInvalidUsage) << kindName(kind);
      std::string why = lastErrorMessage();
      EXPECT_TRUE(contains(why, "expected 4 bytes") || contains(why, "expects 4 bytes")) << why;
      EXPECT_TRUE(contains(why, "has 8 bytes")) << why;
      // The mismatched message was consumed; the next one arrives intact.
      uint64_t got = 0;
      EXPECT_EQ(b.recv(1, 3, &got, sizeof(got)), tsrSuccess) << lastErrorMessage();
      EXPECT_EQ(got, 8u);
    });
  }
}

TEST(BootstrapErrors, BadArgumentsAreRefusedWithASentence) {
  for (Kind kind : {Kind::kInproc, Kind::kTcp}) {
    runBootstrapRanks(kind, 1, 5, [&](Bootstrap& b) {
      int x = 0;
      auto refused = [&](Result r, const char* part) {
        EXPECT_EQ(r, tsrInvalidArgument) << kindName(kind) << ": " << part;
        EXPECT_TRUE(contains(lastErrorMessage(), part)) << lastErrorMessage();
      };
      refused(b.send(1, 0, &x, sizeof(x)), "peer 1 is out of range");
      refused(b.send(-1, 0, &x, sizeof(x)), "peer -1 is out of range");
      refused(b.recv(7, 0, &x, sizeof(x)), "peer 7 is out of range");
      refused(b.send(0, -4, &x, sizeof(x)), "tag -4 is negative");
      refused(b.recv(0, 0, nullptr, 4), "the buffer of 4 bytes is null");
      refused(b.allGather(nullptr, 16), "null buffer");
      refused(b.broadcast(&x, sizeof(x), 1), "root 1: out of range");
      refused(b.broadcast(nullptr, 3, 0), "null buffer");
      std::unique_ptr<Bootstrap> child;
      refused(b.split(-7, 0, &child), "color -7");
      refused(b.split(0, 0, nullptr), "null child pointer");
      // Still usable afterwards.
      EXPECT_EQ(b.send(0, 1, &x, sizeof(x)), tsrSuccess);
      EXPECT_EQ(b.recv(0, 1, &x, sizeof(x)), tsrSuccess);
    });
  }
}

TEST(BootstrapErrors, BadCreationArguments) {
  std::shared_ptr<InprocGroup> group;
  EXPECT_EQ(InprocBootstrap::createGroup(0, shortOptions(), &group), tsrInvalidArgument);
  ASSERT_EQ(InprocBootstrap::createGroup(2, shortOptions(), &group), tsrSuccess);
  std::unique_ptr<Bootstrap> b, again;
  EXPECT_EQ(group->join(2, &b), tsrInvalidArgument);
  EXPECT_EQ(group->join(-1, &b), tsrInvalidArgument);
  ASSERT_EQ(group->join(0, &b), tsrSuccess);
  EXPECT_EQ(group->join(0, &again), tsrInvalidUsage);
  EXPECT_TRUE(contains(lastErrorMessage(), "rank 0 joined its group twice"));

  tsrUniqueId id{};
  EXPECT_EQ(TcpBootstrap::create(id, 2, 2, shortOptions(), &b), tsrInvalidArgument);
  EXPECT_TRUE(contains(lastErrorMessage(), "rank 2 of 2 ranks is not a valid rank"));
  EXPECT_EQ(TcpBootstrap::create(id, 0, 0, shortOptions(), &b), tsrInvalidArgument);
  EXPECT_EQ(createUniqueId(nullptr), tsrInvalidArgument);
}

TEST(BootstrapErrors, InprocCollectivesThatDoNotMatchFailBothRanks) {
  std::shared_ptr<InprocGroup> group;
  ASSERT_EQ(InprocBootstrap::createGroup(2, shortOptions(30), &group), tsrSuccess);
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(group->join(rank, &b), tsrSuccess);
    Stopwatch clock;
    int x = 0;
    Result r = rank == 0 ? b->barrier() : b->broadcast(&x, sizeof(x), 0);
    EXPECT_EQ(r, tsrInvalidUsage);
    EXPECT_TRUE(contains(lastErrorMessage(), "called broadcast")) << lastErrorMessage();
    EXPECT_LT(clock.seconds(), kSlackSeconds);
  });
}

TEST(BootstrapErrors, TimeoutComesFromTheEnvironment) {
  {
    ScopedEnv timeout("TESSERA_BOOTSTRAP_TIMEOUT", "1.5");
    std::shared_ptr<InprocGroup> group;
    ASSERT_EQ(InprocBootstrap::createGroup(1, BootstrapOptions(), &group), tsrSuccess);
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(group->join(0, &b), tsrSuccess);
    EXPECT_DOUBLE_EQ(b->timeoutSeconds(), 1.5);
    // The options win over the environment.
    ASSERT_EQ(InprocBootstrap::createGroup(1, shortOptions(4), &group), tsrSuccess);
    ASSERT_EQ(group->join(0, &b), tsrSuccess);
    EXPECT_DOUBLE_EQ(b->timeoutSeconds(), 4);
  }
  ScopedEnv bad("TESSERA_BOOTSTRAP_TIMEOUT", "soon");
  std::shared_ptr<InprocGroup> group;
  EXPECT_EQ(InprocBootstrap::createGroup(1, BootstrapOptions(), &group), tsrInvalidArgument);
  EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_BOOTSTRAP_TIMEOUT")) << lastErrorMessage();
}

}  // namespace
}  // namespace tessera::test
