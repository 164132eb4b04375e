// The NCCL drop-in, used as an NCCL program would use it: this file includes nccl.h only and
// links libnccl.so.2 (tessera's). Ranks are threads of this process with host buffers (the
// documented extension), so every path runs without a GPU. References: reference.hpp's serial
// reductions in double.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "reference.hpp"

using namespace ncclref;

namespace {

constexpr int kRanks = 3;

// Runs fn(rank, comm) on one thread per rank; failures are collected and reported per rank.
void onRanks(std::vector<ncclComm_t>& comms, const std::function<void(int, ncclComm_t)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(comms.size()); ++r)
    threads.emplace_back([&, r] { fn(r, comms[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
}

std::vector<ncclComm_t> initAll(int n) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  return comms;
}

void destroyAll(std::vector<ncclComm_t>& comms) {
  for (ncclComm_t c : comms)
    if (c != nullptr) {
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess) << ncclGetLastError(nullptr);
    }
}

class NcclThreads : public ::testing::Test {
 protected:
  void SetUp() override { comms_ = initAll(kRanks); }
  void TearDown() override { destroyAll(comms_); }
  std::vector<ncclComm_t> comms_;
};

}  // namespace

TEST(NcclVersion, IsTheHeadersVersion) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclGetVersion"), std::string::npos);
}

TEST(NcclVersion, ErrorStrings) {
  for (int r = ncclSuccess; r < ncclNumResults; ++r)
    EXPECT_GT(std::strlen(ncclGetErrorString(static_cast<ncclResult_t>(r))), 0u);
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(8)), "operation timed out");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(99)), "unknown result code");
}

TEST(NcclSymbols, ProfilingNamesAreTheSameFunctions) {
  for (const char* name : {"AllReduce", "CommInitRank", "GetVersion", "GroupEnd", "CommShrink"}) {
    void* a = dlsym(RTLD_DEFAULT, (std::string("nccl") + name).c_str());
    void* b = dlsym(RTLD_DEFAULT, (std::string("pnccl") + name).c_str());
    EXPECT_NE(a, nullptr) << name;
    EXPECT_EQ(a, b) << name;
  }
}

TEST(NcclRefused, SaysWhichFunctionAndWhy) {
  // ncclCommMemStats: exported (torch imports it), refused, and declared by no nccl.h here.
  auto memStats = reinterpret_cast<ncclResult_t (*)()>(dlsym(RTLD_DEFAULT, "ncclCommMemStats"));
  ASSERT_NE(memStats, nullptr);
  EXPECT_EQ(memStats(), ncclInvalidUsage);
  std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("ncclCommMemStats"), std::string::npos) << why;
  EXPECT_NE(why.find("not supported"), std::string::npos) << why;
}

TEST_F(NcclThreads, QueriesAndHostOnlyDevice) {
  for (int r = 0; r < kRanks; ++r) {
    int count = 0, rank = -5, dev = -5;
    ASSERT_EQ(ncclCommCount(comms_[static_cast<size_t>(r)], &count), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(comms_[static_cast<size_t>(r)], &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCuDevice(comms_[static_cast<size_t>(r)], &dev), ncclSuccess);
    EXPECT_EQ(count, kRanks);
    EXPECT_EQ(rank, r);
    EXPECT_GE(dev, -1);
  }
}

// Every reducing collective x datatype x op, out of place and in place, against the reference.
TEST_F(NcclThreads, ReducingCollectivesEveryTypeAndOp) {
  const size_t counts[] = {0, 1, 7, 1000};
  for (ncclDataType_t t : kTypes)
    for (ncclRedOp_t o : kOps)
      for (size_t count : counts)
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          const uint64_t seed = count * 131 + static_cast<uint64_t>(t) * 7 + o;
          const size_t es = elemSize(t);
          std::atomic<int> failures{0};
          onRanks(comms_, [&](int r, ncclComm_t comm) {
            auto fails = [&](const std::string& what, const std::string& diff) {
              if (diff.empty()) return;
              ++failures;
              ADD_FAILURE() << what << " " << typeName(t) << " " << opName(o) << " count " << count
                            << (inPlace ? " in place" : "") << " rank " << r << ": " << diff;
            };
            // all-reduce
            std::vector<char> in = makeInput(t, r, count, seed), out(count * es + 1);
            void* dst = inPlace ? in.data() : out.data();
            ncclResult_t res = ncclAllReduce(in.data(), dst, count, t, o, comm, nullptr);
            if (res != ncclSuccess) return fails("allreduce", ncclGetLastError(nullptr));
            fails("allreduce", compare(t, o, dst, count,
                                       [&](size_t i) { return reduceRef(t, o, kRanks, i, seed); }));
            // reduce to root 1
            in = makeInput(t, r, count, seed);
            std::fill(out.begin(), out.end(), 0);
            dst = inPlace ? in.data() : out.data();
            res = ncclReduce(in.data(), dst, count, t, o, 1, comm, nullptr);
            if (res != ncclSuccess) return fails("reduce", ncclGetLastError(nullptr));
            if (r == 1)  // NOLINT
              fails("reduce", compare(t, o, dst, count,
                                      [&](size_t i) { return reduceRef(t, o, kRanks, i, seed); }));
            // reduce-scatter: block b of every rank's input reduces onto rank b
            std::vector<char> big = makeInput(t, r, count * kRanks, seed), part(count * es + 1);
            void* rs = inPlace ? big.data() + static_cast<size_t>(r) * count * es : part.data();
            res = ncclReduceScatter(big.data(), rs, count, t, o, comm, nullptr);
            if (res != ncclSuccess) return fails("reducescatter", ncclGetLastError(nullptr));
            fails("reducescatter", compare(t, o, rs, count, [&](size_t i) {
                    return reduceRef(t, o, kRanks, static_cast<size_t>(r) * count + i, seed);
                  }));
          });
          if (failures > 0) return;  // one combination's report is enough
        }
}

// Data movement: every type (the bytes move unchanged), out of place and in place.
TEST_F(NcclThreads, MovingCollectivesEveryType) {
  const size_t counts[] = {0, 1, 5, 777};
  for (ncclDataType_t t : kTypes)
    for (size_t count : counts)
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        const uint64_t seed = 1000 + count + static_cast<uint64_t>(t);
        const size_t es = elemSize(t), bytes = count * es;
        onRanks(comms_, [&](int r, ncclComm_t comm) {
          std::string tag = std::string(typeName(t)) + " count " + std::to_string(count) +
                            (inPlace ? " in place" : "") + " rank " + std::to_string(r);
          auto expectBlock = [&](const char* what, const char* got, int from, size_t index0) {
            std::vector<char> want = makeInput(t, from, index0 + count, seed);
            EXPECT_EQ(0, std::memcmp(got, want.data() + index0 * es, bytes)) << what << " " << tag;
          };
          // all-gather
          std::vector<char> all(bytes * kRanks + 1, 0);
          std::vector<char> mine = makeInput(t, r, count, seed);
          const void* src = mine.data();
          if (inPlace) {
            std::memcpy(all.data() + static_cast<size_t>(r) * bytes, mine.data(), bytes);
            src = all.data() + static_cast<size_t>(r) * bytes;
          }
          ASSERT_EQ(ncclAllGather(src, all.data(), count, t, comm, nullptr), ncclSuccess)
              << ncclGetLastError(nullptr);
          for (int p = 0; p < kRanks; ++p)
            expectBlock("allgather", all.data() + static_cast<size_t>(p) * bytes, p, 0);
          // broadcast from root 2, and ncclBcast (always in place) from root 0
          std::vector<char> b = makeInput(t, r, count, seed), bout(bytes + 1, 0);
          void* bdst = inPlace ? b.data() : bout.data();
          ASSERT_EQ(ncclBroadcast(b.data(), bdst, count, t, 2, comm, nullptr), ncclSuccess)
              << ncclGetLastError(nullptr);
          expectBlock("broadcast", static_cast<char*>(bdst), 2, 0);
          b = makeInput(t, r, count, seed);
          ASSERT_EQ(ncclBcast(b.data(), count, t, 0, comm, nullptr), ncclSuccess);
          expectBlock("bcast", b.data(), 0, 0);
          // all-to-all (no in-place form): block p of rank q's input lands at block q on p
          std::vector<char> a = makeInput(t, r, count * kRanks, seed), aout(bytes * kRanks + 1);
          ASSERT_EQ(ncclAlltoAll(a.data(), aout.data(), count, t, comm, nullptr), ncclSuccess)
              << ncclGetLastError(nullptr);
          for (int q = 0; q < kRanks; ++q)
            expectBlock("alltoall", aout.data() + static_cast<size_t>(q) * bytes, q,
                        static_cast<size_t>(r) * count);
          // gather to root 1; in place: the root's block already sits in recvbuff
          std::vector<char> g(bytes * kRanks + 1, 0);
          std::vector<char> gin = makeInput(t, r, count, seed);
          const void* gsrc = gin.data();
          if (inPlace && r == 1) {
            std::memcpy(g.data() + bytes, gin.data(), bytes);
            gsrc = g.data() + bytes;
          }
          ASSERT_EQ(ncclGather(gsrc, g.data(), count, t, 1, comm, nullptr), ncclSuccess)
              << ncclGetLastError(nullptr);
          if (r == 1)
            for (int p = 0; p < kRanks; ++p)
              expectBlock("gather", g.data() + static_cast<size_t>(p) * bytes, p, 0);
          // scatter from root 0: rank p receives block p of the root's buffer
          std::vector<char> s = makeInput(t, r, count * kRanks, seed), sout(bytes + 1, 0);
          void* sdst = inPlace && r == 0 ? s.data() : sout.data();
          ASSERT_EQ(ncclScatter(s.data(), sdst, count, t, 0, comm, nullptr), ncclSuccess)
              << ncclGetLastError(nullptr);
          expectBlock("scatter", static_cast<char*>(sdst), 0, static_cast<size_t>(r) * count);
        });
      }
}

// Sends and receives in a group, around a ring and to self, in either order.
TEST_F(NcclThreads, GroupedSendRecvRing) {
  const size_t count = 4099;
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
    std::vector<char> mine = makeInput(ncclFloat32, r, count, 9), fromPrev(count * 4),
                      self(count * 4);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    if (r % 2 == 0) {
      ASSERT_EQ(ncclRecv(fromPrev.data(), count, ncclFloat32, prev, comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclSend(mine.data(), count, ncclFloat32, next, comm, nullptr), ncclSuccess);
    } else {
      ASSERT_EQ(ncclSend(mine.data(), count, ncclFloat32, next, comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(fromPrev.data(), count, ncclFloat32, prev, comm, nullptr), ncclSuccess);
    }
    ASSERT_EQ(ncclSend(mine.data(), count, ncclFloat32, r, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(self.data(), count, ncclFloat32, r, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<char> want = makeInput(ncclFloat32, prev, count, 9);
    EXPECT_EQ(0, std::memcmp(fromPrev.data(), want.data(), count * 4)) << "rank " << r;
    EXPECT_EQ(0, std::memcmp(self.data(), mine.data(), count * 4)) << "rank " << r;
  });
}

// ncclGroupSimulateEnd: the group is priced by tessera's tuner and nothing of it runs.
TEST_F(NcclThreads, GroupSimulateEndEstimatesAndRunsNothing) {
  std::vector<float> in(1 << 18, 1.0f), out(1 << 18, -3.0f);
  auto simulate = [&](size_t count) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comms_[0], nullptr),
              ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess) << ncclGetLastError(nullptr);
    return info.estimatedTime;
  };
  float small = simulate(64), large = simulate(1 << 18);
  EXPECT_GT(small, 0.0f);
  EXPECT_GT(large, small);
  EXPECT_EQ(out, std::vector<float>(1 << 18, -3.0f));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // closed by the simulation
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 1;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclSuccess);
}

TEST_F(NcclThreads, PreMulSumScalesTheSum) {
  const size_t count = 100;
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    double scalar = 0.25;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm),
              ncclSuccess)
        << ncclGetLastError(nullptr);
    std::vector<char> in = makeInput(ncclFloat64, r, count, 5), out(count * 8);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat64, op, comm, nullptr),
              ncclSuccess);
    EXPECT_EQ("", compare(ncclFloat64, ncclSum, out.data(), count, [&](size_t i) {
                return 0.25 * reduceRef(ncclFloat64, ncclSum, kRanks, i, 5);
              }));
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  });
}

TEST_F(NcclThreads, RegisteredBuffersAndWindows) {
  const size_t count = 1 << 16;
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    void* buf = nullptr;
    ASSERT_EQ(ncclMemAlloc(&buf, count * 4), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<char> in = makeInput(ncclInt32, r, count, 3);
    std::memcpy(buf, in.data(), count * 4);
    void* handle = nullptr;
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommRegister(comm, buf, count * 4, &handle), ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_EQ(ncclCommWindowRegister(comm, buf, count * 4, &win, NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_EQ(ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ("", compare(ncclInt32, ncclSum, buf, count,
                          [&](size_t i) { return reduceRef(ncclInt32, ncclSum, kRanks, i, 3); }));
    EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
    EXPECT_EQ(ncclMemFree(buf), ncclSuccess);
    EXPECT_EQ(ncclMemFree(buf), ncclInvalidArgument);  // twice: refused, nothing freed twice
  });
}

TEST_F(NcclThreads, SplitByParity) {
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, r % 2, -r, &child, nullptr), ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_NE(child, nullptr);
    int n = 0, cr = -1;
    ASSERT_EQ(ncclCommCount(child, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(child, &cr), ncclSuccess);
    EXPECT_EQ(n, r % 2 == 0 ? 2 : 1);
    // key -r: the higher parent rank comes first
    if (r % 2 == 0) {
      EXPECT_EQ(cr, r == 2 ? 0 : 1);
    }
    int64_t v = r + 1, sum = 0;
    ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, child, nullptr), ncclSuccess);
    EXPECT_EQ(sum, r % 2 == 0 ? 1 + 3 : 2);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    ncclComm_t none = reinterpret_cast<ncclComm_t>(1);
    ASSERT_EQ(ncclCommSplit(comm, r == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, nullptr), ncclSuccess);
    if (r == 0) {
      EXPECT_EQ(none, nullptr);
    }
    if (r != 0) {
      EXPECT_EQ(ncclCommDestroy(none), ncclSuccess);
    }
  });
}

// ncclCommShrink (NCCL 2.27): the survivors make a communicator without the excluded rank, in
// parent order; the excluded rank does not call it. Bad input is refused with a sentence.
TEST_F(NcclThreads, ShrinkWithoutTheMiddleRank) {
  int excluded = 1;
  ncclComm_t none = reinterpret_cast<ncclComm_t>(1);
  EXPECT_EQ(ncclCommShrink(comms_[0], &excluded, 1, &none, nullptr, 7), ncclInvalidArgument);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("shrinkFlags"), std::string::npos);
  EXPECT_EQ(ncclCommShrink(comms_[0], &excluded, 1, nullptr, nullptr, NCCL_SHRINK_DEFAULT),
            ncclInvalidArgument);
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    if (r == excluded) return;
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, &excluded, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_NE(child, nullptr);
    int n = 0, cr = -1;
    ASSERT_EQ(ncclCommCount(child, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(child, &cr), ncclSuccess);
    EXPECT_EQ(n, kRanks - 1);
    EXPECT_EQ(cr, r == 0 ? 0 : 1);
    int64_t v = r + 1, sum = 0;
    ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, child, nullptr), ncclSuccess);
    EXPECT_EQ(sum, 1 + 3);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
  // The parent stays usable after a default shrink.
  onRanks(comms_, [&](int r, ncclComm_t comm) {
    int64_t v = r + 1, sum = 0;
    ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(sum, 1 + 2 + 3);
  });
}

// NCCL 2.29's grow; the nccl.h this builds against may predate it (the same prototypes).
extern "C" ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
extern "C" ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                     int rank, ncclComm_t* newcomm, ncclConfig_t* config);

// ncclCommGrow: the 3 ranks and a new one (a thread with no communicator, rank 3) form 4 ranks;
// the existing keep theirs and pass -1, the id's holder passes it, the others NULL.
TEST_F(NcclThreads, GrowByOneNewRank) {
  ncclUniqueId id;
  EXPECT_EQ(ncclCommGetUniqueId(comms_[0], nullptr), ncclInvalidArgument);
  ASSERT_EQ(ncclCommGetUniqueId(comms_[1], &id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<ncclComm_t> grown(kRanks + 1, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r <= kRanks; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t* out = &grown[static_cast<size_t>(r)];
      if (r < kRanks) {
        EXPECT_EQ(ncclCommGrow(comms_[static_cast<size_t>(r)], kRanks + 1, r == 1 ? &id : nullptr,
                               -1, out, nullptr),
                  ncclSuccess)
            << ncclGetLastError(nullptr);
      } else {
        EXPECT_EQ(ncclCommGrow(nullptr, kRanks + 1, &id, r, out, nullptr), ncclSuccess)
            << ncclGetLastError(nullptr);
      }
    });
  for (auto& t : threads) t.join();
  for (ncclComm_t c : grown) ASSERT_NE(c, nullptr);
  onRanks(grown, [&](int r, ncclComm_t comm) {
    int n = 0, cr = -1;
    ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(comm, &cr), ncclSuccess);
    EXPECT_EQ(n, kRanks + 1);
    EXPECT_EQ(cr, r);
    int64_t v = r + 1, sum = 0;
    ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(sum, 1 + 2 + 3 + 4);
  });
  destroyAll(grown);
  // A new rank needs the id.
  ncclComm_t none = reinterpret_cast<ncclComm_t>(1);
  EXPECT_EQ(ncclCommGrow(nullptr, kRanks + 1, nullptr, kRanks, &none, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(none, nullptr);
}

// Errors give NCCL's codes and a sentence, and write nothing.
TEST_F(NcclThreads, BadArgumentsAreRefusedWithASentence) {
  ncclComm_t c0 = comms_[0];
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  EXPECT_EQ(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclAllReduce"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, c0, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(77), c0, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, y, 4, ncclFloat32, ncclSum, c0, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(x, y, 4, ncclFloat32, 7, c0, nullptr), ncclInvalidArgument);
  EXPECT_EQ(y[0], 9);  // nothing written
  EXPECT_GT(std::strlen(ncclGetLastError(c0)), 0u);
  int bogus = 0;
  EXPECT_EQ(ncclCommCount(reinterpret_cast<ncclComm_t>(&bogus), &bogus), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // no group open
}

TEST(NcclLifecycle, UseAfterDestroyIsInvalidUsage) {
  std::vector<ncclComm_t> comms = initAll(1);
  ASSERT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  int n = 0;
  EXPECT_EQ(ncclCommCount(comms[0], &n), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("destroyed"), std::string::npos);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclInvalidUsage);
}

TEST(NcclLifecycle, FinalizeThenDestroyAndAbort) {
  std::vector<ncclComm_t> comms = initAll(2);
  onRanks(comms, [&](int, ncclComm_t c) {
    EXPECT_EQ(ncclCommFinalize(c), ncclSuccess) << ncclGetLastError(nullptr);
  });
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
  int n;
  EXPECT_EQ(ncclCommCount(comms[1], &n), ncclInvalidUsage);  // abort is not a silent no-op
}

TEST(NcclLifecycle, DeviceRanksWithoutAGpuAreRefused) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) GTEST_SKIP() << "this machine has GPUs";
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devlist[2] = {0, 1};
  EXPECT_EQ(ncclCommInitAll(comms, 2, devlist), ncclInvalidArgument);
  std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("not a CUDA device"), std::string::npos) << why;
  EXPECT_EQ(comms[0], nullptr);
}

// ---- communicators from a unique id, one thread per rank -------------------------------------

namespace {
// The 2.14 layout of ncclConfig_t (what a program built against NCCL 2.14 passes).
struct ConfigV21400 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
};

void allReduceCheck(ncclComm_t comm, int r, int n) {
  int64_t v = r + 1, sum = 0;
  ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(sum, n * (n + 1) / 2);
}
}  // namespace

TEST(NcclInit, UniqueIdOneThreadPerRankWithConfigs) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<ncclComm_t> comms(kRanks, nullptr);
  onRanks(comms, [&](int r, ncclComm_t) {
    ncclComm_t c = nullptr;
    ncclResult_t res;
    if (r == 0) {
      res = ncclCommInitRank(&c, kRanks, id, r);
    } else if (r == 1) {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.commName = "rank one";
      cfg.maxCTAs = 4;
      res = ncclCommInitRankConfig(&c, kRanks, id, r, &cfg);
    } else {
      // An older, smaller layout: only its fields are read.
      ConfigV21400 old{
          sizeof(ConfigV21400),  0xcafebeef, 21400, 1, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
          NCCL_CONFIG_UNDEF_INT, nullptr};
      res = ncclCommInitRankConfig(&c, kRanks, id, r, reinterpret_cast<ncclConfig_t*>(&old));
    }
    ASSERT_EQ(res, ncclSuccess) << ncclGetLastError(nullptr);
    allReduceCheck(c, r, kRanks);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  });
}

TEST(NcclInit, BadConfigsAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = reinterpret_cast<ncclComm_t>(1);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  EXPECT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_CONFIG_INITIALIZER"),
            std::string::npos);
  EXPECT_EQ(c, nullptr);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.version = 21000;
  EXPECT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  EXPECT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  ncclUniqueId garbage;
  std::memset(&garbage, 0x5a, sizeof garbage);
  EXPECT_EQ(ncclCommInitRank(&c, 2, garbage, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, 5), ncclInvalidArgument);
}

// NCCL's hints tessera does not honour (splitShare, cgaClusterSize) are dropped, not errors; a
// network tessera does not have is an error, as in NCCL.
TEST(NcclInit, UnhonouredHintsAreDroppedAndAnUnknownNetworkIsRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.splitShare = 1;
  cfg.cgaClusterSize = 4;
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(c, 0, 0, &child, &cfg), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);

  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.netName = "IB";
  c = nullptr;
  EXPECT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("IB"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(c, nullptr);
}

// Non-blocking init: ncclInProgress, then completed by polling ncclCommGetAsyncError as PyTorch
// does; the communicator is refused for calls until then.
TEST(NcclInit, NonBlockingInitCompletesByPolling) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(2, nullptr);
  onRanks(comms, [&](int r, ncclComm_t) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t c = nullptr;
    ncclResult_t res = ncclCommInitRankConfig(&c, 2, id, r, &cfg);
    ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_NE(c, nullptr);
    ncclResult_t async = ncclInProgress;
    int polls = 0;
    while (async == ncclInProgress) {
      ASSERT_EQ(ncclCommGetAsyncError(c, &async), ncclSuccess);
      ++polls;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_LT(polls, 60000) << "init did not complete in a minute";
    }
    ASSERT_EQ(async, ncclSuccess);
    allReduceCheck(c, r, 2);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  });
}

// Several ranks created by one thread inside one group (nccl-tests -g N).
TEST(NcclInit, SeveralInitsInOneGroup) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(kRanks, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclCommInitRank(&comms[static_cast<size_t>(r)], kRanks, id, r), ncclSuccess)
        << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  // One thread drives all ranks: their collectives go in one group too.
  std::vector<int64_t> v(kRanks), sum(kRanks);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    v[static_cast<size_t>(r)] = r + 1;
    ASSERT_EQ(ncclAllReduce(&v[static_cast<size_t>(r)], &sum[static_cast<size_t>(r)], 1, ncclInt64,
                            ncclSum, comms[static_cast<size_t>(r)], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(sum[static_cast<size_t>(r)], 6);
  destroyAll(comms);
}

TEST(NcclInit, ScalableInitUsesTheIds) {
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  std::vector<ncclComm_t> comms(2, nullptr);
  onRanks(comms, [&](int r, ncclComm_t) {
    ncclComm_t c = nullptr;
    ASSERT_EQ(ncclCommInitRankScalable(&c, 2, r, 2, ids, nullptr), ncclSuccess)
        << ncclGetLastError(nullptr);
    allReduceCheck(c, r, 2);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  });
  ncclComm_t c;
  EXPECT_EQ(ncclCommInitRankScalable(&c, 2, 0, 0, ids, nullptr), ncclInvalidArgument);
}

// TESSERA_NCCL_FALLBACK is read once per process: the fallback tests run in processes of their
// own (tests/nccl/CMakeLists.txt), selected by NCCL_SHIM_TEST_FALLBACK.
TEST(NcclFallback, AsConfigured) {
  const char* mode = std::getenv("NCCL_SHIM_TEST_FALLBACK");
  if (mode == nullptr) GTEST_SKIP() << "run by the nccl.fallback.* tests with their settings";
  std::vector<ncclComm_t> comms(2, nullptr);
  ncclUniqueId id;
  ncclResult_t ur = ncclGetUniqueId(&id);
  if (std::strcmp(mode, "unopenable") == 0) {
    // tessera validates its variables at the first call: a path that cannot be read is refused.
    EXPECT_EQ(ur, ncclInvalidArgument);
    std::string why = ncclGetLastError(nullptr);
    EXPECT_NE(why.find("TESSERA_NCCL_FALLBACK"), std::string::npos) << why;
    return;
  }
  ASSERT_EQ(ur, ncclSuccess) << ncclGetLastError(nullptr);
  onRanks(comms, [&](int r, ncclComm_t) {
    ncclComm_t c = nullptr;
    ncclResult_t ir = ncclCommInitRank(&c, 2, id, r);
    if (std::strcmp(mode, "self") == 0) {
      // A fallback that cannot serve is a bad setting: the init fails and says why.
      EXPECT_EQ(ir, ncclInvalidArgument);
      std::string why = ncclGetLastError(nullptr);
      EXPECT_NE(why.find("TESSERA_NCCL_FALLBACK"), std::string::npos) << why;
      return;
    }
    ASSERT_EQ(ir, ncclSuccess) << ncclGetLastError(nullptr);
    if (std::strcmp(mode, "fake") == 0) {
      // tessera refuses every all-reduce (TESSERA_ALGO excludes every family): the call goes to
      // the stand-in library, which fills the output with 0x7f bytes; an all-gather stays here.
      float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {};
      ASSERT_EQ(ncclAllReduce(in, out, 8, ncclFloat32, ncclSum, c, nullptr), ncclSuccess)
          << ncclGetLastError(nullptr);
      unsigned char want[sizeof out];
      std::memset(want, 0x7f, sizeof want);
      EXPECT_EQ(0, std::memcmp(out, want, sizeof out)) << "the all-reduce was not forwarded";
      auto* calls = static_cast<int*>(dlsym(RTLD_DEFAULT, "fakeNcclAllReduceCalls"));
      EXPECT_EQ(calls, nullptr) << "the stand-in must be opened RTLD_LOCAL";
      int64_t mine = r + 10, all[2] = {};
      ASSERT_EQ(ncclAllGather(&mine, all, 1, ncclInt64, c, nullptr), ncclSuccess);
      EXPECT_EQ(all[0], 10);
      EXPECT_EQ(all[1], 11);
    } else {
      // The real NCCL opened; without a GPU its communicator cannot be made: tessera runs
      // everything it can and the communicator works.
      allReduceCheck(c, r, 2);
    }
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  });
  if (std::strcmp(mode, "self") == 0) return;
  // One thread creating both ranks inside a group gets no shadow (attaching one is a collective
  // that thread could not drive for two ranks at once): the group ends, it does not hang.
  ncclUniqueId gid;
  ASSERT_EQ(ncclGetUniqueId(&gid), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclCommInitRank(&comms[static_cast<size_t>(r)], 2, gid, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  destroyAll(comms);
}
