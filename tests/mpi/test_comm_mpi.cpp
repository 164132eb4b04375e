// Communicators across mpirun processes, checked against MPI's own answers: tsrCommInitMpi,
// tsrCommInitRank over TCP with the id broadcast by MPI, tsrCommSplit against MPI_Comm_split,
// and hosts emulated with TESSERA_HOST_ID.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "mpi/mpi_test_util.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera_mpi.h"

namespace {

using tessera::test::worldRank;
using tessera::test::worldSize;

tessera::CommImpl* implOf(tsrComm_t comm) {
  std::shared_ptr<tessera::Communicator> c;
  if (tessera::handleLookup(comm, "test", &c) != tsrSuccess) return nullptr;
  return tessera::commImpl(*c);  // the handle table keeps it alive until tsrCommDestroy
}

void expectRankAndCount(tsrComm_t comm, int rank, int count) {
  int r = -1, n = -1;
  ASSERT_EQ(tsrCommUserRank(comm, &r), tsrSuccess) << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrCommCount(comm, &n), tsrSuccess);
  EXPECT_EQ(r, rank);
  EXPECT_EQ(n, count);
}

TEST(CommMpi, InitFromMpiCommunicator) {
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  expectRankAndCount(comm, worldRank(), worldSize());
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

TEST(CommMpi, InitRankOverTcpWithIdFromMpiBcast) {
  tsrUniqueId id;
  if (worldRank() == 0) {
    ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitRank(&comm, worldSize(), id, worldRank()), tsrSuccess)
      << tsrGetLastError(nullptr);
  expectRankAndCount(comm, worldRank(), worldSize());
  tessera::CommImpl* impl = implOf(comm);
  ASSERT_NE(impl, nullptr);
  // Processes of one host: same host, other process.
  for (int p = 0; p < worldSize(); ++p)
    EXPECT_EQ(impl->localityOf(p),
              p == worldRank() ? tessera::Locality::kSameProcess : tessera::Locality::kSameHost);
  EXPECT_EQ(impl->localRanks(), worldSize());
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

// Splits a communicator and compares each rank's new number and size with MPI_Comm_split of
// the same (color, key).
void checkSplitAgainstMpi(tsrComm_t comm, int color, int key) {
  tsrComm_t child = nullptr;
  ASSERT_EQ(tsrCommSplit(comm, color, key, &child, nullptr), tsrSuccess)
      << tsrGetLastError(nullptr);
  MPI_Comm mpiChild = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color == TSR_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key,
                 &mpiChild);
  if (color == TSR_SPLIT_NOCOLOR) {
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(mpiChild, MPI_COMM_NULL);
    return;
  }
  ASSERT_NE(child, nullptr);
  int mr = -1, mn = -1;
  MPI_Comm_rank(mpiChild, &mr);
  MPI_Comm_size(mpiChild, &mn);
  expectRankAndCount(child, mr, mn);
  // The child works: its collectives agree with MPI's on the MPI child (a prime count, so the
  // chunks are uneven).
  const size_t count = 1009;
  std::vector<int64_t> in(count), mine(count), ref(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(worldRank() + 1) * 1000003 + i;
  ASSERT_EQ(tsrAllReduce(in.data(), mine.data(), count, tsrInt64, tsrSum, child, nullptr),
            tsrSuccess)
      << tsrGetLastError(child);
  MPI_Allreduce(in.data(), ref.data(), static_cast<int>(count), MPI_INT64_T, MPI_SUM, mpiChild);
  EXPECT_EQ(mine, ref);
  std::vector<int64_t> gathered(count * static_cast<size_t>(mn)), refGathered(gathered.size());
  ASSERT_EQ(tsrAllGather(in.data(), gathered.data(), count, tsrInt64, child, nullptr), tsrSuccess)
      << tsrGetLastError(child);
  MPI_Allgather(in.data(), static_cast<int>(count), MPI_INT64_T, refGathered.data(),
                static_cast<int>(count), MPI_INT64_T, mpiChild);
  EXPECT_EQ(gathered, refGathered);
  EXPECT_EQ(tsrCommDestroy(child), tsrSuccess);
  MPI_Comm_free(&mpiChild);
}

TEST(CommMpi, SplitMatchesMpiCommSplit) {
  const int me = worldRank(), n = worldSize();
  tsrComm_t viaMpi = nullptr, viaTcp = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&viaMpi, MPI_COMM_WORLD, nullptr), tsrSuccess);
  tsrUniqueId id;
  if (me == 0) {
    ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ASSERT_EQ(tsrCommInitRank(&viaTcp, n, id, me), tsrSuccess);
  struct Case {
    int color, key;
  } cases[] = {
      {me % 2, me},                                   // even/odd
      {me % 2, -me},                                  // reversed
      {0, (me * 7) % 3},                              // one color, tied keys
      {me == n - 1 ? TSR_SPLIT_NOCOLOR : me / 2, 0},  // last rank out
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("color " + std::to_string(c.color) + " key " + std::to_string(c.key));
    checkSplitAgainstMpi(viaMpi, c.color, c.key);
    checkSplitAgainstMpi(viaTcp, c.color, c.key);
  }
  EXPECT_EQ(tsrCommDestroy(viaMpi), tsrSuccess);
  EXPECT_EQ(tsrCommDestroy(viaTcp), tsrSuccess);
}

TEST(CommMpi, HostsEmulatedWithHostId) {
  const int me = worldRank(), n = worldSize();
  // Two ranks per emulated host.
  std::string host = "emulated-host-" + std::to_string(me / 2);
  tessera::test::ScopedEnv hostId("TESSERA_HOST_ID", host.c_str());
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  tessera::CommImpl* impl = implOf(comm);
  ASSERT_NE(impl, nullptr);
  int expectedLocal = std::min(2, n - (me / 2) * 2);
  EXPECT_EQ(impl->localRanks(), expectedLocal);
  EXPECT_EQ(impl->localRank(), me % 2);
  for (int p = 0; p < n; ++p) {
    tessera::Locality want = p == me           ? tessera::Locality::kSameProcess
                             : p / 2 == me / 2 ? tessera::Locality::kSameHost
                                               : tessera::Locality::kOtherHost;
    EXPECT_EQ(impl->localityOf(p), want) << "peer " << p;
    tessera::PathClass c = tessera::PathClass::kLoc;
    ASSERT_EQ(impl->pathClassTo(p, &c), tsrSuccess) << tsrGetLastError(nullptr);
    // Host-only ranks here: other hosts are NET, this host's ranks meet in host memory (SYS).
    EXPECT_EQ(c, want == tessera::Locality::kOtherHost ? tessera::PathClass::kNet
                                                       : tessera::PathClass::kSys)
        << "peer " << p;
  }
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

TEST(CommMpi, NonBlockingInitBelowThreadMultipleCompletesInTheCall) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.blocking = 0;
  tsrComm_t comm = nullptr;
  tsrResult_t r = tsrCommInitMpi(&comm, MPI_COMM_WORLD, &config);
  if (level < MPI_THREAD_MULTIPLE) {
    // No MPI call from a background thread: the init finished before returning.
    EXPECT_EQ(r, tsrSuccess) << tsrGetLastError(nullptr);
  } else {
    EXPECT_TRUE(r == tsrSuccess || r == tsrInProgress);
  }
  tsrResult_t state = tsrInProgress;
  for (int i = 0; i < 60000 && state == tsrInProgress; ++i) {
    ASSERT_EQ(tsrCommGetAsyncError(comm, &state), tsrSuccess);
    if (state == tsrInProgress) usleep(1000);
  }
  EXPECT_EQ(state, tsrSuccess);
  expectRankAndCount(comm, worldRank(), worldSize());
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

TEST(CommMpi, DestroyedCommunicatorIsRefused) {
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess);
  ASSERT_EQ(tsrCommDestroy(comm), tsrSuccess);
  int n = 0;
  EXPECT_EQ(tsrCommCount(comm, &n), tsrInvalidUsage);
  EXPECT_EQ(tsrCommInitMpi(&comm, MPI_COMM_NULL, nullptr), tsrInvalidArgument);
}

}  // namespace
