// The mpi and tcp bootstraps across mpirun processes, checked against MPI's own collectives
// (MPI_Allgather, MPI_Bcast, MPI_Comm_split) on MPI_COMM_WORLD.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include "bootstrap/mpi_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "mpi/mpi_test_util.hpp"

namespace tessera {
namespace {

constexpr double kTimeout = 30;

using test::worldRank;
using test::worldSize;

std::vector<uint8_t> pattern(int rank, int round, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<uint8_t>((rank + 1) * 37 + round * 11 + i * 7 + (i >> 8) * 3);
  return v;
}

BootstrapOptions options(double seconds = kTimeout) {
  BootstrapOptions o;
  o.timeoutSeconds = seconds;
  return o;
}

// kMpiSmallTags: the mpi kind as on an MPI whose MPI_TAG_UB is the standard's minimum, 32767.
enum class Kind { kMpi, kMpiSmallTags, kTcp };

std::unique_ptr<Bootstrap> makeBootstrap(Kind kind, double seconds = kTimeout) {
  std::unique_ptr<Bootstrap> b;
  if (kind == Kind::kMpi || kind == Kind::kMpiSmallTags) {
    BootstrapOptions o = options(seconds);
    if (kind == Kind::kMpiSmallTags) o.mpiTagUpperBound = 32767;
    EXPECT_EQ(MpiBootstrap::create(MPI_COMM_WORLD, o, &b), tsrSuccess) << lastErrorMessage();
    return b;
  }
  tsrUniqueId id{};
  if (worldRank() == 0) {
    EXPECT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(TcpBootstrap::create(id, worldRank(), worldSize(), options(seconds), &b), tsrSuccess)
      << lastErrorMessage();
  return b;
}

class BootstrapMpi : public ::testing::TestWithParam<Kind> {};

TEST_P(BootstrapMpi, AllGatherMatchesMpiAllgather) {
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam());
  ASSERT_NE(b, nullptr);
  const int me = worldRank(), n = worldSize();
  ASSERT_EQ(b->rank(), me);
  ASSERT_EQ(b->nranks(), n);
  int round = 0;
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{65536}}) {
    for (int rep = 0; rep < 3; ++rep, ++round) {
      std::vector<uint8_t> mine = pattern(me, round, bytes);
      std::vector<uint8_t> reference(bytes * static_cast<size_t>(n));
      MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, reference.data(),
                    static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
      std::vector<uint8_t> got(bytes * static_cast<size_t>(n), 0xEE);
      std::memcpy(got.data() + static_cast<size_t>(me) * bytes, mine.data(), bytes);
      ASSERT_EQ(b->allGather(got.data(), bytes), tsrSuccess) << lastErrorMessage();
      EXPECT_TRUE(got == reference) << bytes << " bytes, round " << round;
    }
  }
}

TEST_P(BootstrapMpi, BroadcastMatchesMpiBcast) {
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam());
  ASSERT_NE(b, nullptr);
  const int me = worldRank(), n = worldSize();
  for (size_t bytes : {size_t{0}, size_t{9}, size_t{300000}}) {
    for (int root = 0; root < n; ++root) {
      std::vector<uint8_t> reference =
          me == root ? pattern(root, root, bytes) : std::vector<uint8_t>(bytes, 0x11);
      MPI_Bcast(reference.data(), static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
      std::vector<uint8_t> got =
          me == root ? pattern(root, root, bytes) : std::vector<uint8_t>(bytes, 0x22);
      ASSERT_EQ(b->broadcast(bytes ? got.data() : nullptr, bytes, root), tsrSuccess)
          << lastErrorMessage();
      EXPECT_TRUE(got == reference) << "root " << root << ", " << bytes << " bytes";
    }
  }
}

// Everyone sends to everyone (itself too) on 3 tags before receiving, in reverse tag order;
// what arrives is compared with what the sender's contribution to an MPI_Allgather says it sent.
TEST_P(BootstrapMpi, SendRecvAllPairsWithTags) {
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam());
  ASSERT_NE(b, nullptr);
  const int me = worldRank(), n = worldSize();
  // Each rank's message seed, gathered by MPI: the receivers' reference.
  int seed = 1000 + me * 17;
  std::vector<int> seeds(static_cast<size_t>(n));
  MPI_Allgather(&seed, 1, MPI_INT, seeds.data(), 1, MPI_INT, MPI_COMM_WORLD);
  const size_t sizes[3] = {0, 40, size_t{1} << 20};
  for (int tag = 0; tag < 3; ++tag)
    for (int peer = 0; peer < n; ++peer)
      for (int seq = 0; seq < 2; ++seq) {
        std::vector<uint8_t> m = pattern(seed + peer, tag * 10 + seq, sizes[tag]);
        ASSERT_EQ(b->send(peer, tag, m.data(), m.size()), tsrSuccess) << lastErrorMessage();
      }
  for (int tag = 2; tag >= 0; --tag)
    for (int peer = n - 1; peer >= 0; --peer)
      for (int seq = 0; seq < 2; ++seq) {
        std::vector<uint8_t> got(sizes[tag], 0xEE);
        ASSERT_EQ(b->recv(peer, tag, got.data(), got.size()), tsrSuccess) << lastErrorMessage();
        EXPECT_TRUE(got ==
                    pattern(seeds[static_cast<size_t>(peer)] + me, tag * 10 + seq, sizes[tag]))
            << "from " << peer << " tag " << tag << " seq " << seq;
      }
  for (int i = 0; i < 5; ++i) ASSERT_EQ(b->barrier(), tsrSuccess) << lastErrorMessage();
}

// The reference for split is MPI_Comm_split itself: same color and key on MPI_COMM_WORLD.
TEST_P(BootstrapMpi, SplitMatchesMpiCommSplit) {
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam());
  ASSERT_NE(b, nullptr);
  const int me = worldRank(), n = worldSize();
  const int color = (n > 2 && me == 1) ? TSR_SPLIT_NOCOLOR : me % 2;
  const int key = (n - me) / 2;  // ties between neighbours, broken by rank
  MPI_Comm reference = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color == TSR_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key,
                 &reference);
  std::unique_ptr<Bootstrap> child;
  ASSERT_EQ(b->split(color, key, &child), tsrSuccess) << lastErrorMessage();
  if (reference == MPI_COMM_NULL) {
    EXPECT_EQ(child, nullptr);
    return;
  }
  ASSERT_NE(child, nullptr);
  int refRank = 0, refSize = 0;
  MPI_Comm_rank(reference, &refRank);
  MPI_Comm_size(reference, &refSize);
  EXPECT_EQ(child->rank(), refRank);
  ASSERT_EQ(child->nranks(), refSize);
  std::vector<int> refMembers(static_cast<size_t>(refSize));
  MPI_Allgather(&me, 1, MPI_INT, refMembers.data(), 1, MPI_INT, reference);
  std::vector<int> members(static_cast<size_t>(refSize), -1);
  members[static_cast<size_t>(child->rank())] = me;
  ASSERT_EQ(child->allGather(members.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(members, refMembers);
  EXPECT_EQ(child->barrier(), tsrSuccess) << lastErrorMessage();
  MPI_Comm_free(&reference);
}

// Tags as the layers above use them (up to 2^28 and beyond) between the members of split
// children with several ranks per color, and on the parent between the children's messages;
// received in the reverse of the order they were sent in, so messages for other tags that share
// an MPI tag arrive first. What arrives is checked against what the sender's pattern says.
TEST_P(BootstrapMpi, SplitChildrenExchangeOnLargeTags) {
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam());
  ASSERT_NE(b, nullptr);
  const int me = worldRank(), n = worldSize();
  const int tags[] = {
      0,       5,        32767, 32768, (1 << 27) + 1, 268851072, (1 << 28) + (0x4c4c << 4) + 3,
      INT_MAX, 32768 + 5};
  const size_t sizes[] = {0, 3, 64, 4096};
  auto exchange = [&](Bootstrap& c, int salt) {
    const int next = (c.rank() + 1) % c.nranks(), prev = (c.rank() + c.nranks() - 1) % c.nranks();
    int i = 0;
    for (int tag : tags)
      for (size_t bytes : sizes) {
        std::vector<uint8_t> m = pattern(c.rank() + salt, i++, bytes);
        ASSERT_EQ(c.send(next, tag, m.data(), m.size()), tsrSuccess) << lastErrorMessage();
      }
    for (int t = static_cast<int>(std::size(tags)) - 1; t >= 0; --t)
      for (size_t s = 0; s < std::size(sizes); ++s) {
        std::vector<uint8_t> got(sizes[s], 0xEE);
        ASSERT_EQ(c.recv(prev, tags[t], got.data(), got.size()), tsrSuccess) << lastErrorMessage();
        EXPECT_TRUE(got == pattern(prev + salt,
                                   t * static_cast<int>(std::size(sizes)) + static_cast<int>(s),
                                   sizes[s]))
            << "tag " << tags[t] << ", " << sizes[s] << " bytes, from child rank " << prev;
      }
  };
  // Two colors, each with several members from 3 ranks on; keys reverse the parent order.
  std::unique_ptr<Bootstrap> child;
  ASSERT_EQ(b->split(me % 2, n - me, &child), tsrSuccess) << lastErrorMessage();
  ASSERT_NE(child, nullptr);
  ASSERT_EQ(child->nranks(), (n + 1 - me % 2) / 2);
  exchange(*child, 100);
  exchange(*b, 200);
  // A child of the child, and the child still works after it.
  std::unique_ptr<Bootstrap> grand;
  ASSERT_EQ(child->split(0, child->rank(), &grand), tsrSuccess) << lastErrorMessage();
  ASSERT_NE(grand, nullptr);
  exchange(*grand, 300);
  exchange(*child, 400);
  EXPECT_EQ(b->barrier(), tsrSuccess) << lastErrorMessage();
}

TEST_P(BootstrapMpi, RecvTimeoutAndAbortReturnPromptly) {
  const double timeout = 2;
  std::unique_ptr<Bootstrap> b = makeBootstrap(GetParam(), timeout);
  ASSERT_NE(b, nullptr);
  if (worldRank() == 0) {
    auto start = std::chrono::steady_clock::now();
    int x = 0;
    EXPECT_EQ(b->recv(1, 99, &x, sizeof(x)), tsrTimeout);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(took, timeout + 10);
    std::string why = lastErrorMessage();
    EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
    EXPECT_NE(why.find("tag 99"), std::string::npos) << why;

    std::thread aborter([&] {
      // Late on purpose: the abort must wake a receive that already blocks.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      b->abort();
    });
    start = std::chrono::steady_clock::now();
    EXPECT_EQ(b->recv(1, 98, &x, sizeof(x)), tsrRemoteError);
    took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(took, 10);
    aborter.join();
    EXPECT_EQ(b->barrier(), tsrInvalidUsage);
  }
  // The others stay until rank 0 is done (leaving early would be another error).
  MPI_Barrier(MPI_COMM_WORLD);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BootstrapMpi,
                         ::testing::Values(Kind::kMpi, Kind::kMpiSmallTags, Kind::kTcp),
                         [](const auto& p) {
                           return p.param == Kind::kMpi            ? "mpi"
                                  : p.param == Kind::kMpiSmallTags ? "mpi_tag_ub_32767"
                                                                   : "tcp";
                         });

}  // namespace
}  // namespace tessera
