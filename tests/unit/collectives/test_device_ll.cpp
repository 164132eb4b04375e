// The LL protocol (collectives/exec/device/ll.hpp) on host threads: N ranks of one process, each
// with its own work queue and inbox in host memory and 1 or 2 "CTAs" (threads running
// runScheduler<HostGroup>, as the emulated device executor does), every collective against a
// serial reference built with core's reduce functions. Calls are posted in batches with distinct
// buffers, so ranks run ahead of each other and both parities are reused while peers lag.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "collectives/exec/device/ll.hpp"
#include "collectives/plan/plan.hpp"
#include "core/datatype.hpp"
#include "core/reduce_op.hpp"

namespace tessera::exec {
namespace {

constexpr uint32_t kSlots = 16;

struct LLRunner {
  WorkQueueHandle queue;
  bool runItem(const WorkItem& item, const HostGroup& g, uint32_t cta, uint32_t nctas) {
    return runLLItem(queue, item, g, cta, nctas);
  }
};

struct Rank {
  WorkItem items[kSlots]{};
  uint64_t posted = 0, consumed = 0;
  uint32_t abortFlag = 0, stopFlag = 0, done = 0;
  ErrorRecord error{};
  GridSync grid{};
  WorkQueueHandle q{};
  std::vector<uint64_t> inbox;
  std::vector<char*> peerInbox;
  uint32_t epoch[kLLMaxCtas]{};
  DeviceLL ll{};
  std::vector<std::thread> ctas;
};

// N ranks wired together; `running` ranks get threads (the others stay silent: a missing peer).
class World {
 public:
  World(int n, uint32_t nctas, uint64_t timeoutNs, int running) : nctas_(nctas) {
    for (int r = 0; r < n; ++r) ranks_.push_back(std::make_unique<Rank>());
    for (int r = 0; r < n; ++r) {
      Rank& k = *ranks_[static_cast<size_t>(r)];
      k.inbox.assign(2 * static_cast<size_t>(n) * kLLSlotBytes / 8, 0);
      k.q = WorkQueueHandle{k.items, &k.posted, &k.consumed, &k.abortFlag, &k.stopFlag, &k.error,
                            &k.grid, kSlots,    0,           timeoutNs};
    }
    for (int r = 0; r < n; ++r) {
      Rank& k = *ranks_[static_cast<size_t>(r)];
      for (auto& p : ranks_) k.peerInbox.push_back(reinterpret_cast<char*>(p->inbox.data()));
      k.ll = DeviceLL{
          reinterpret_cast<char*>(k.inbox.data()), k.peerInbox.data(), k.epoch, kLLSlotBytes, r, n};
    }
    for (int r = 0; r < running; ++r) {
      Rank& k = *ranks_[static_cast<size_t>(r)];
      for (uint32_t c = 0; c < nctas; ++c)
        k.ctas.emplace_back([&k, c, nctas] {
          LLRunner runner{k.q};
          runScheduler(k.q, HostGroup{}, c, nctas, 0, runner);
        });
    }
  }
  ~World() {
    for (auto& k : ranks_) {
      if (k->ctas.empty()) continue;
      WorkItem stop{};
      stop.kind = kItemStop;
      postItem(k->q, stop);
      for (auto& t : k->ctas) t.join();
    }
  }
  Rank& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(ranks_.size()); }
  void post(int r, WorkItem item) {
    Rank& k = rank(r);
    item.kind = kItemLL;
    item.ll = &k.ll;
    item.doneWord = &k.done;
    item.doneValue = ++posts_[r];
    postItem(k.q, item);
  }
  // Waits until rank r completed everything posted to it.
  bool wait(int r, double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (loadAcquire32(&rank(r).done) != posts_[r]) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::yield();
    }
    return true;
  }

 private:
  uint32_t nctas_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  uint32_t posts_[kLLMaxRanks]{};
};

struct Case {
  Collective coll;
  tsrDataType_t dtype;
  RedOpDesc op;
  size_t count;
  int root;
  bool inPlace;
};

RedOpDesc opFor(int which, tsrDataType_t dtype) {
  RedOpDesc op;
  if (which == 0) op.kind = RedKind::kSum;
  if (which == 1) op.kind = RedKind::kMax;
  if (which == 2) op.kind = RedKind::kAvg;
  if (which == 3) {
    std::vector<unsigned char> scalar(8, 0);
    dtypeVisit(dtype, [&](auto t) {
      using T = decltype(t);
      T v;
      if constexpr (std::is_integral_v<T>)
        v = T(3);
      else if constexpr (std::is_floating_point_v<T>)
        v = T(0.75);
      else
        v = T::fromFloat(0.75f);
      std::memcpy(scalar.data(), &v, sizeof v);
      return 0;
    });
    EXPECT_EQ(makePreMulSum(dtype, scalar.data(), &op), tsrSuccess);
  }
  return op;
}

void fillRandom(std::mt19937& rng, tsrDataType_t dtype, void* buf, size_t count) {
  std::uniform_int_distribution<int> d(-64, 64);
  dtypeVisit(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(buf);
    for (size_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>)
        p[i] = static_cast<T>(d(rng) * 977);
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = static_cast<T>(d(rng)) / T(7);
      else
        p[i] = T::fromFloat(static_cast<float>(d(rng)) / 9.0f);
    }
    return 0;
  });
}

// Runs `cases` in batches of `batch` on world `w`, every rank's results against the reference.
void runCases(World& w, const std::vector<Case>& cases, size_t batch, uint64_t seed) {
  const int n = w.size();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (size_t first = 0; first < cases.size(); first += batch) {
    const size_t last = std::min(cases.size(), first + batch);
    struct Bufs {
      std::vector<std::vector<uint64_t>> in, out, saved;
    };
    std::vector<Bufs> bufs(last - first);
    for (size_t i = first; i < last; ++i) {
      const Case& c = cases[i];
      Bufs& b = bufs[i - first];
      const size_t sz = dtypeSize(c.dtype);
      const bool blocks = c.coll == Collective::kReduceScatter || c.coll == Collective::kAllToAll;
      const bool outBlocks = c.coll == Collective::kAllGather || c.coll == Collective::kAllToAll;
      const size_t inElems = c.count * (blocks ? static_cast<size_t>(n) : 1);
      const size_t outElems = c.count * (outBlocks ? static_cast<size_t>(n) : 1);
      for (int r = 0; r < n; ++r) {
        b.in.emplace_back((inElems * sz + 7) / 8 + 1, 0);
        b.out.emplace_back((outElems * sz + 7) / 8 + 1, 0x5a5a5a5a5a5a5a5aull);
        fillRandom(rng, c.dtype, b.in.back().data(), inElems);
        b.saved.push_back(b.in.back());
      }
      WorkItem item{};
      item.collective = static_cast<uint8_t>(c.coll);
      item.dtype = static_cast<uint8_t>(c.dtype);
      item.count = c.count;
      item.root = c.root;
      item.redKind = static_cast<uint8_t>(c.op.kind);
      item.preOp = c.op.kind == RedKind::kPreMulSum;
      item.postAvg = c.op.kind == RedKind::kAvg;
      dtypeVisit(c.dtype, [&](auto t) {
        auto s = preMulScalar<decltype(t)>(c.op);
        std::memcpy(&item.scalarBits, &s, sizeof s);
        return 0;
      });
      // Post the batch to ranks in a rotating order, so some ranks start calls well before others.
      for (int k = 0; k < n; ++k) {
        const int r = static_cast<int>((static_cast<size_t>(k) + i) % static_cast<size_t>(n));
        item.input = reinterpret_cast<const char*>(b.in[static_cast<size_t>(r)].data());
        item.output = c.inPlace ? reinterpret_cast<char*>(b.in[static_cast<size_t>(r)].data())
                                : reinterpret_cast<char*>(b.out[static_cast<size_t>(r)].data());
        w.post(r, item);
      }
    }
    for (int r = 0; r < n; ++r) ASSERT_TRUE(w.wait(r, 60)) << "rank " << r << " stuck";
    for (int r = 0; r < n; ++r) ASSERT_EQ(w.rank(r).error.code, 0u) << "rank " << r;
    for (size_t i = first; i < last; ++i) {
      const Case& c = cases[i];
      Bufs& b = bufs[i - first];
      const size_t sz = dtypeSize(c.dtype), blk = c.count * sz;
      auto bytesOf = [&](const std::vector<uint64_t>& v) {
        return reinterpret_cast<const char*>(v.data());
      };
      for (int r = 0; r < n; ++r) {
        const char* got = c.inPlace ? bytesOf(b.in[static_cast<size_t>(r)])
                                    : bytesOf(b.out[static_cast<size_t>(r)]);
        std::vector<char> want;
        std::vector<const void*> srcs;
        switch (c.coll) {
          case Collective::kAllReduce:
          case Collective::kReduce:
          case Collective::kReduceScatter: {
            if (c.coll == Collective::kReduce && r != c.root) continue;
            const size_t off =
                c.coll == Collective::kReduceScatter ? static_cast<size_t>(r) * blk : 0;
            for (int s = 0; s < n; ++s)
              srcs.push_back(bytesOf(b.saved[static_cast<size_t>(s)]) + off);
            want.resize(blk);
            ASSERT_EQ(reduceAllHost(c.op, c.dtype, srcs.data(), n, want.data(), c.count),
                      tsrSuccess);
            break;
          }
          case Collective::kBroadcast:
            want.assign(bytesOf(b.saved[static_cast<size_t>(c.root)]),
                        bytesOf(b.saved[static_cast<size_t>(c.root)]) + blk);
            break;
          case Collective::kAllGather:
            for (int s = 0; s < n; ++s)
              want.insert(want.end(), bytesOf(b.saved[static_cast<size_t>(s)]),
                          bytesOf(b.saved[static_cast<size_t>(s)]) + blk);
            break;
          case Collective::kAllToAll:
            for (int s = 0; s < n; ++s) {
              const char* p =
                  bytesOf(b.saved[static_cast<size_t>(s)]) + static_cast<size_t>(r) * blk;
              want.insert(want.end(), p, p + blk);
            }
            break;
        }
        ASSERT_EQ(std::memcmp(got, want.data(), want.size()), 0)
            << "case " << i << " collective " << static_cast<int>(c.coll) << " "
            << dtypeName(c.dtype) << " " << redKindName(c.op.kind) << " count " << c.count
            << " rank " << r << " of " << n;
        if (!c.inPlace && c.coll != Collective::kReduce && c.coll != Collective::kBroadcast) {
          // Nothing written past the result.
          EXPECT_EQ(static_cast<unsigned char>(got[want.size()]), 0x5a) << "case " << i;
        }
      }
    }
  }
}

std::vector<Case> allCases(int n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const tsrDataType_t dtypes[] = {tsrFloat32, tsrBfloat16, tsrFloat8e4m3, tsrInt32};
  const Collective colls[] = {Collective::kAllReduce, Collective::kReduceScatter,
                              Collective::kAllGather, Collective::kBroadcast,
                              Collective::kReduce,    Collective::kAllToAll};
  std::vector<Case> cases;
  int k = 0;
  for (Collective coll : colls)
    for (tsrDataType_t dt : dtypes) {
      const bool reduces = coll == Collective::kAllReduce || coll == Collective::kReduce ||
                           coll == Collective::kReduceScatter;
      for (int op = 0; op < (reduces ? 4 : 1); ++op, ++k) {
        const size_t sz = dtypeSize(dt), most = kLLMaxBytes / sz;
        const size_t sizes[] = {1, 3, 5, 17, 255, 1000, most - 1, most};
        size_t count = sizes[static_cast<size_t>(k) % 8];
        if (k % 8 >= 6 && n > 3) count = sizes[rng() % 6];  // keep the big ones for small worlds
        Case c{coll, dt, opFor(op, dt), count, static_cast<int>(rng() % static_cast<unsigned>(n)),
               false};
        c.inPlace = coll == Collective::kAllReduce && k % 3 == 0;
        cases.push_back(c);
      }
    }
  std::shuffle(cases.begin(), cases.end(), rng);
  return cases;
}

class LLCollectives : public ::testing::TestWithParam<std::tuple<int, uint32_t>> {};

TEST_P(LLCollectives, MatchSerialReferenceOverManyCalls) {
  const auto [n, nctas] = GetParam();
  World w(n, nctas, uint64_t{20} * 1000000000, n);
  const std::vector<Case> cases = allCases(n, 1000u + static_cast<unsigned>(n) * 10 + nctas);
  runCases(w, cases, 3, 7u * static_cast<unsigned>(n) + nctas);
  // Every CTA advanced its epoch once per call.
  for (int r = 0; r < n; ++r)
    for (uint32_t c = 0; c < nctas; ++c) EXPECT_EQ(w.rank(r).epoch[c], cases.size());
}

INSTANTIATE_TEST_SUITE_P(Ranks, LLCollectives,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5),
                                            ::testing::Values(1u, 2u)));

TEST(LLProtocol, OddDtypesAndUnalignedBuffers) {
  // 8-byte elements (a unit is one element) and 1-byte buffers at odd addresses.
  World w(3, 2, uint64_t{20} * 1000000000, 3);
  std::vector<Case> cases;
  for (tsrDataType_t dt : {tsrFloat64, tsrInt64, tsrUint8, tsrFloat16, tsrFloat8e5m2})
    for (size_t count : {size_t{1}, size_t{7}, size_t{4096}})
      cases.push_back({Collective::kAllReduce, dt, opFor(0, dt), count, 0, false});
  runCases(w, cases, 4, 99);
}

TEST(LLProtocol, SupportsSmallCallsOnly) {
  EXPECT_TRUE(llSupports(kLLAllReduce, 8, 2));
  EXPECT_TRUE(llSupports(kLLAllToAll, kLLMaxBytes, kLLMaxRanks));
  EXPECT_FALSE(llSupports(kLLAllReduce, kLLMaxBytes + 1, 4));
  EXPECT_FALSE(llSupports(kLLAllReduce, 0, 4));
  EXPECT_FALSE(llSupports(kLLAllReduce, 64, 1));
  EXPECT_FALSE(llSupports(kLLAllReduce, 64, kLLMaxRanks + 1));
  EXPECT_FALSE(llSupports(6, 64, 4));
}

TEST(LLProtocol, MissingPeerTimesOutQuickly) {
  // Rank 2 never runs: ranks 0 and 1 give up after the 100 ms deadline, naming it.
  World w(3, 1, uint64_t{100} * 1000000, 2);
  std::vector<float> in(64, 1.0f), out0(64), out1(64);
  WorkItem item{};
  item.collective = kLLAllReduce;
  item.dtype = tsrFloat32;
  item.count = 64;
  auto start = std::chrono::steady_clock::now();
  item.input = reinterpret_cast<const char*>(in.data());
  item.output = reinterpret_cast<char*>(out0.data());
  w.post(0, item);
  item.output = reinterpret_cast<char*>(out1.data());
  w.post(1, item);
  ASSERT_TRUE(w.wait(0, 10));
  ASSERT_TRUE(w.wait(1, 10));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 5.0);
  for (int r = 0; r < 2; ++r) {
    const ErrorRecord& e = w.rank(r).error;
    EXPECT_EQ(e.code, 8u) << r;  // tsrTimeout
    EXPECT_EQ(e.why, kWhyTimeout) << r;
    EXPECT_EQ(e.peer, 2) << r;
  }
}

}  // namespace
}  // namespace tessera::exec
