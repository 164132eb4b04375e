// tsrCommShrink across processes, checked against MPI on the survivors.
//
// KilledPeer: the mpirun ranks and one extra process forked by rank 0 (not an MPI process, so
// its death does not end the MPI job) form a tessera communicator over the TCP bootstrap; the
// extra rank is SIGKILLed in the middle of an all-reduce. Every survivor's call must fail within
// 10 s with a sentence; they shrink without it (TSR_SHRINK_ABORT), destroy the broken
// communicator, and the shrunk one's collectives must equal MPI's on MPI_COMM_WORLD.
//
// OverMpiBootstrap: a communicator from tsrCommInitMpi shrinks without its last rank (alive, it
// just does not call), through MPI_Comm_create_group, and is checked against MPI_Comm_split.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mpi/mpi_test_util.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera_mpi.h"

namespace {

using tessera::test::worldRank;
using tessera::test::worldSize;
using Clock = std::chrono::steady_clock;

// 64 MiB of floats: a call takes longer than the 20 ms after which the extra rank dies. The
// warm-up calls have the same size, so the failing call's plan is set up already and the failure
// is met in its transfers (not in a setup exchange through the bootstrap).
constexpr size_t kCount = size_t{16} << 20;
constexpr size_t kLargeCount = kCount;

// Collectives on `comm` (the survivors) against MPI's on `reference` (the same processes).
void expectMatchesMpi(tsrComm_t comm, MPI_Comm reference) {
  int me = -1, n = -1;
  MPI_Comm_rank(reference, &me);
  MPI_Comm_size(reference, &n);
  int rank = -1, size = -1;
  ASSERT_EQ(tsrCommUserRank(comm, &rank), tsrSuccess);
  ASSERT_EQ(tsrCommCount(comm, &size), tsrSuccess);
  EXPECT_EQ(rank, me);
  EXPECT_EQ(size, n);
  const size_t count = 100003;  // prime: uneven chunks
  std::vector<int64_t> in(count), got(count), want(count);
  for (size_t i = 0; i < count; ++i) in[i] = int64_t{me + 1} * 7919 + int64_t(i % 1000) - 500;
  ASSERT_EQ(tsrAllReduce(in.data(), got.data(), count, tsrInt64, tsrSum, comm, nullptr), tsrSuccess)
      << tsrGetLastError(comm);
  MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), MPI_INT64_T, MPI_SUM, reference);
  EXPECT_EQ(got, want) << "all-reduce (sum)";
  ASSERT_EQ(tsrAllReduce(in.data(), got.data(), count, tsrInt64, tsrMax, comm, nullptr), tsrSuccess)
      << tsrGetLastError(comm);
  MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), MPI_INT64_T, MPI_MAX, reference);
  EXPECT_EQ(got, want) << "all-reduce (max)";
  std::vector<int64_t> gathered(count * static_cast<size_t>(n)), refGathered(gathered.size());
  ASSERT_EQ(tsrAllGather(in.data(), gathered.data(), count, tsrInt64, comm, nullptr), tsrSuccess)
      << tsrGetLastError(comm);
  MPI_Allgather(in.data(), static_cast<int>(count), MPI_INT64_T, refGathered.data(),
                static_cast<int>(count), MPI_INT64_T, reference);
  EXPECT_EQ(gathered, refGathered) << "all-gather";
  std::vector<int64_t> b = in, refB = in;
  ASSERT_EQ(tsrBroadcast(b.data(), b.data(), count, tsrInt64, n - 1, comm, nullptr), tsrSuccess)
      << tsrGetLastError(comm);
  MPI_Bcast(refB.data(), static_cast<int>(count), MPI_INT64_T, n - 1, reference);
  EXPECT_EQ(b, refB) << "broadcast from the last survivor";
}

// The extra rank: joins, takes part in `warmups` all-reduces, then starts another and is killed
// (by itself, from another thread) 20 ms into it. Never returns.
[[noreturn]] void victim(const tsrUniqueId& id, int nranks, int warmups) {
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.timeoutMs = 5000;
  tsrComm_t comm = nullptr;
  if (tsrCommInitRankConfig(&comm, nranks, id, nranks - 1, &config) != tsrSuccess) _exit(3);
  std::vector<float> buf(kCount);
  for (int i = 0; i < warmups; ++i) {
    std::fill(buf.begin(), buf.end(), 1.0f);
    if (tsrAllReduce(buf.data(), buf.data(), kCount, tsrFloat32, tsrSum, comm, nullptr) !=
        tsrSuccess)
      _exit(4);
  }
  std::vector<float> large(kLargeCount, 1.0f);
  std::thread killer([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the death lands mid-call
    raise(SIGKILL);
  });
  for (;;) tsrAllReduce(large.data(), large.data(), kLargeCount, tsrFloat32, tsrSum, comm, nullptr);
}

TEST(ShrinkMpi, KilledPeerSurvivorsShrinkAndMatchMpi) {
  const int me = worldRank(), survivors = worldSize(), n = survivors + 1;
  const int warmups = 2;
  tsrUniqueId id;
  if (me == 0) {
    ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  pid_t child = -1;
  if (me == 0) {
    child = fork();
    ASSERT_GE(child, 0) << std::strerror(errno);
    if (child == 0) victim(id, n, warmups);
  }
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.timeoutMs = 5000;
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitRankConfig(&comm, n, id, me, &config), tsrSuccess)
      << tsrGetLastError(nullptr);
  std::vector<float> buf(kCount);
  for (int i = 0; i < warmups; ++i) {
    std::fill(buf.begin(), buf.end(), 1.0f);
    ASSERT_EQ(tsrAllReduce(buf.data(), buf.data(), kCount, tsrFloat32, tsrSum, comm, nullptr),
              tsrSuccess)
        << tsrGetLastError(comm);
    ASSERT_EQ(buf[kCount - 1], static_cast<float>(n));
  }
  // The calls during which the extra rank dies: the first, or (were it finished before the
  // kill) the next. Either way a call fails, and within 10 s.
  std::vector<float> large(kLargeCount, 1.0f);
  tsrResult_t res = tsrSuccess;
  double took = 0;
  for (int attempt = 0; attempt < 3 && res == tsrSuccess; ++attempt) {
    auto start = Clock::now();
    res = tsrAllReduce(large.data(), large.data(), kLargeCount, tsrFloat32, tsrSum, comm, nullptr);
    took = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const std::string why = tsrGetLastError(comm);
  EXPECT_NE(res, tsrSuccess) << "rank " << me << ": calls cannot all succeed without rank "
                             << n - 1;
  EXPECT_LT(took, 10.0) << why;
  EXPECT_FALSE(why.empty());
  std::printf("rank %d: the call failed after %.2f s: %s\n", me, took, why.c_str());

  const int dead[] = {n - 1};
  tsrComm_t shrunk = nullptr;
  ASSERT_EQ(tsrCommShrink(comm, dead, 1, &shrunk, nullptr, TSR_SHRINK_ABORT), tsrSuccess)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
  ASSERT_NE(shrunk, nullptr);
  expectMatchesMpi(shrunk, MPI_COMM_WORLD);
  EXPECT_EQ(tsrCommDestroy(shrunk), tsrSuccess);
  if (me == 0) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the extra rank ended otherwise (status " << status << ")";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(ShrinkMpi, OverMpiBootstrapWithoutTheLastRank) {
  const int me = worldRank(), n = worldSize();
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  MPI_Comm reference = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, me == n - 1 ? MPI_UNDEFINED : 0, me, &reference);
  if (me != n - 1) {
    const int excluded[] = {n - 1};
    tsrComm_t shrunk = nullptr;
    ASSERT_EQ(tsrCommShrink(comm, excluded, 1, &shrunk, nullptr, TSR_SHRINK_DEFAULT), tsrSuccess)
        << tsrGetLastError(nullptr);
    ASSERT_NE(shrunk, nullptr);
    expectMatchesMpi(shrunk, reference);
    EXPECT_EQ(tsrCommDestroy(shrunk), tsrSuccess);
    MPI_Comm_free(&reference);
  }
  // The parent, with every rank, is still usable after a default shrink.
  int64_t mine = me + 1, sum = 0;
  ASSERT_EQ(tsrAllReduce(&mine, &sum, 1, tsrInt64, tsrSum, comm, nullptr), tsrSuccess)
      << tsrGetLastError(comm);
  EXPECT_EQ(sum, int64_t{n} * (n + 1) / 2);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

}  // namespace
