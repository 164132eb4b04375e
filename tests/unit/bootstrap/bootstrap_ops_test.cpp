// allGather, barrier, broadcast, send/recv on 1..8 thread ranks, for the inproc and tcp kinds.
// Every received byte is compared with pattern(), computed here from (rank, round, index).
#include <atomic>
#include <cstring>
#include <vector>

#include "bootstrap_test_util.hpp"

namespace tessera::test {
namespace {

constexpr double kTimeout = 20;

class BootstrapOps : public ::testing::TestWithParam<std::tuple<Kind, int>> {
 protected:
  Kind kind() const { return std::get<0>(GetParam()); }
  int n() const { return std::get<1>(GetParam()); }
};

TEST_P(BootstrapOps, AllGatherManyRoundsAndSizes) {
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    int round = 0;
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096}, size_t{70000}}) {
      for (int rep = 0; rep < 3; ++rep, ++round) {
        std::vector<uint8_t> buf(bytes * static_cast<size_t>(n()), 0xEE);
        std::vector<uint8_t> mine = patternBuffer(b.rank(), round, bytes);
        std::memcpy(buf.data() + static_cast<size_t>(b.rank()) * bytes, mine.data(), bytes);
        ASSERT_EQ(b.allGather(buf.data(), bytes), tsrSuccess) << lastErrorMessage();
        for (int r = 0; r < n(); ++r)
          ASSERT_EQ(std::memcmp(buf.data() + static_cast<size_t>(r) * bytes,
                                patternBuffer(r, round, bytes).data(), bytes),
                    0)
              << "slot of rank " << r << ", " << bytes << " bytes, round " << round;
      }
    }
    EXPECT_EQ(b.allGather(nullptr, 0), tsrSuccess) << lastErrorMessage();
  });
}

TEST_P(BootstrapOps, BarrierHoldsEveryRankBack) {
  // Before barrier k each rank adds one; after it, every rank must see all k+1 additions.
  std::atomic<int> arrived{0};
  const int rounds = 10;
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    for (int k = 0; k < rounds; ++k) {
      arrived.fetch_add(1);
      ASSERT_EQ(b.barrier(), tsrSuccess) << lastErrorMessage();
      EXPECT_GE(arrived.load(), n() * (k + 1))
          << "barrier " << k << " let rank " << b.rank() << " through early";
    }
  });
  EXPECT_EQ(arrived.load(), n() * rounds);
}

TEST_P(BootstrapOps, BroadcastFromEveryRoot) {
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    for (size_t bytes : {size_t{0}, size_t{7}, size_t{1} << 20}) {
      for (int root = 0; root < n(); ++root) {
        const int round = 100 + root;
        std::vector<uint8_t> buf = b.rank() == root ? patternBuffer(root, round, bytes)
                                                    : std::vector<uint8_t>(bytes, 0xEE);
        ASSERT_EQ(b.broadcast(bytes ? buf.data() : nullptr, bytes, root), tsrSuccess)
            << lastErrorMessage();
        ASSERT_EQ(buf, patternBuffer(root, round, bytes)) << "root " << root << ", " << bytes;
      }
    }
  });
}

// Every rank sends to every rank (itself too) on 4 tags, 3 messages each, before receiving;
// receivers take the tags in the reverse order. Order per (peer, tag) must hold.
TEST_P(BootstrapOps, SendRecvTagsInterleavedBothDirections) {
  constexpr int kTags = 4, kPerTag = 3;
  auto message = [](int src, int dst, int tag, int seq) {
    return patternBuffer(src * 1000 + dst, tag * 10 + seq, static_cast<size_t>(5 + tag * 3 + seq));
  };
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    for (int seq = 0; seq < kPerTag; ++seq)
      for (int tag = 0; tag < kTags; ++tag)
        for (int peer = 0; peer < n(); ++peer) {
          std::vector<uint8_t> m = message(b.rank(), peer, tag, seq);
          ASSERT_EQ(b.send(peer, tag, m.data(), m.size()), tsrSuccess) << lastErrorMessage();
        }
    for (int tag = kTags - 1; tag >= 0; --tag)
      for (int peer = n() - 1; peer >= 0; --peer)
        for (int seq = 0; seq < kPerTag; ++seq) {
          std::vector<uint8_t> expected = message(peer, b.rank(), tag, seq);
          std::vector<uint8_t> got(expected.size(), 0xEE);
          ASSERT_EQ(b.recv(peer, tag, got.data(), got.size()), tsrSuccess) << lastErrorMessage();
          ASSERT_EQ(got, expected) << "from " << peer << " tag " << tag << " seq " << seq;
        }
  });
}

TEST_P(BootstrapOps, ZeroSizeMessages) {
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    const int right = (b.rank() + 1) % n(), left = (b.rank() + n() - 1) % n();
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(b.send(right, 9, nullptr, 0), tsrSuccess) << lastErrorMessage();
      ASSERT_EQ(b.send(right, 10, &i, sizeof(i)), tsrSuccess) << lastErrorMessage();
    }
    for (int i = 0; i < 5; ++i) {
      int got = -1;
      ASSERT_EQ(b.recv(left, 10, &got, sizeof(got)), tsrSuccess) << lastErrorMessage();
      EXPECT_EQ(got, i);
      ASSERT_EQ(b.recv(left, 9, nullptr, 0), tsrSuccess) << lastErrorMessage();
    }
  });
}

// Messages larger than socket buffers, sent by both sides before either receives.
TEST_P(BootstrapOps, LargeMessagesBothDirectionsAtOnce) {
  const size_t bytes = n() <= 4 ? size_t{6} << 20 : size_t{2} << 20;
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    const int right = (b.rank() + 1) % n(), left = (b.rank() + n() - 1) % n();
    std::vector<uint8_t> toRight = patternBuffer(b.rank(), 1, bytes);
    std::vector<uint8_t> toLeft = patternBuffer(b.rank(), 2, bytes);
    ASSERT_EQ(b.send(right, 1, toRight.data(), bytes), tsrSuccess) << lastErrorMessage();
    ASSERT_EQ(b.send(left, 2, toLeft.data(), bytes), tsrSuccess) << lastErrorMessage();
    std::vector<uint8_t> fromLeft(bytes), fromRight(bytes);
    ASSERT_EQ(b.recv(left, 1, fromLeft.data(), bytes), tsrSuccess) << lastErrorMessage();
    ASSERT_EQ(b.recv(right, 2, fromRight.data(), bytes), tsrSuccess) << lastErrorMessage();
    EXPECT_TRUE(fromLeft == patternBuffer(left, 1, bytes)) << "from rank " << left;
    EXPECT_TRUE(fromRight == patternBuffer(right, 2, bytes)) << "from rank " << right;
  });
}

// Collectives and messages mixed, as a communicator's setup does.
TEST_P(BootstrapOps, MixedOperations) {
  runBootstrapRanks(kind(), n(), kTimeout, [&](Bootstrap& b) {
    for (int round = 0; round < 4; ++round) {
      const int right = (b.rank() + 1) % n(), left = (b.rank() + n() - 1) % n();
      std::vector<uint8_t> m = patternBuffer(b.rank(), round, 33);
      ASSERT_EQ(b.send(right, round, m.data(), m.size()), tsrSuccess) << lastErrorMessage();
      std::vector<int> ranks(static_cast<size_t>(n()), -1);
      ranks[static_cast<size_t>(b.rank())] = b.rank() * 10 + round;
      ASSERT_EQ(b.allGather(ranks.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
      for (int r = 0; r < n(); ++r) EXPECT_EQ(ranks[static_cast<size_t>(r)], r * 10 + round);
      ASSERT_EQ(b.barrier(), tsrSuccess) << lastErrorMessage();
      std::vector<uint8_t> got(33);
      ASSERT_EQ(b.recv(left, round, got.data(), got.size()), tsrSuccess) << lastErrorMessage();
      EXPECT_EQ(got, patternBuffer(left, round, 33));
      int value = b.rank() == round % n() ? 4242 + round : -1;
      ASSERT_EQ(b.broadcast(&value, sizeof(value), round % n()), tsrSuccess) << lastErrorMessage();
      EXPECT_EQ(value, 4242 + round);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapOps,
                         ::testing::Combine(::testing::Values(Kind::kInproc, Kind::kTcp),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const auto& p) {
                           return std::string(kindName(std::get<0>(p.param))) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

}  // namespace
}  // namespace tessera::test
