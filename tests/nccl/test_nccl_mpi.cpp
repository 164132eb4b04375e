// The NCCL drop-in under mpirun, as an MPI-launched NCCL program uses NCCL: rank 0's unique id
// goes to every process with MPI_Bcast, and every collective x datatype x op is compared with
// MPI's own result (MPI_Allreduce, MPI_Reduce, MPI_Reduce_scatter_block, MPI_Allgather,
// MPI_Bcast, MPI_Alltoall, MPI_Gather, MPI_Scatter) where MPI has the type, and otherwise (the
// 16-bit and fp8 types, avg) with a serial reduction in double of the inputs MPI_Allgather
// collected. Includes nccl.h and mpi.h only; links libnccl.so.2 (tessera's).
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference.hpp"

using namespace ncclref;

namespace {

int worldRank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int worldSize() {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// MPI's datatype for an NCCL one, or MPI_DATATYPE_NULL where MPI has none.
MPI_Datatype mpiType(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}
MPI_Op mpiOp(ncclRedOp_t o) {
  switch (o) {
    case ncclSum: return MPI_SUM;
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

// A communicator of every MPI process, its unique id broadcast by MPI.
class NcclMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    ncclUniqueId id;
    if (std::getenv("NCCL_COMM_ID") != nullptr) {
      // NCCL_COMM_ID=host:port: every rank makes the id itself, and rank 0 runs the root there.
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
      ncclUniqueId root;
      std::memcpy(&root, &id, sizeof id);
      MPI_Bcast(&root, sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
      ASSERT_EQ(0, std::memcmp(&root, &id, sizeof id)) << "the ranks made different ids";
    } else {
      if (worldRank() == 0) {
        ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
      }
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    ASSERT_EQ(ncclCommInitRank(&comm_, worldSize(), id, worldRank()), ncclSuccess)
        << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(ncclCommFinalize(comm_), ncclSuccess) << ncclGetLastError(nullptr);
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
  }
  ncclComm_t comm_ = nullptr;
};

// The reference of a reducing call: MPI's collective where MPI has the type and op, else the
// serial reduction of the gathered inputs.
struct Reference {
  ncclDataType_t t;
  ncclRedOp_t o;
  size_t count;
  std::vector<char> gathered;  // every rank's input, rank-major
  int n;

  double at(size_t i) const {
    return reduceValues(t, o, n, [&](int r) {
      return load(t, gathered.data(), static_cast<size_t>(r) * count + i);
    });
  }
};

Reference gatherReference(ncclDataType_t t, ncclRedOp_t o, const std::vector<char>& in,
                          size_t count) {
  Reference ref{t, o, count, {}, worldSize()};
  size_t bytes = count * elemSize(t);
  ref.gathered.resize(bytes * static_cast<size_t>(ref.n) + 1);
  MPI_Allgather(in.data(), static_cast<int>(bytes), MPI_BYTE, ref.gathered.data(),
                static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
  return ref;
}

}  // namespace

TEST_F(NcclMpi, ReducingCollectivesAgainstMpi) {
  const int n = worldSize(), me = worldRank();
  // Every count at small sizes; a seeded sample of large ones (the seed is printed).
  std::vector<size_t> counts = {0, 1, 13, 4099};
  unsigned seed = 20261202;
  if (const char* s = std::getenv("TESSERA_TEST_SEED")) seed = static_cast<unsigned>(std::atoi(s));
  std::mt19937 rng(seed);
  counts.push_back(65537 + rng() % 200000);
  if (me == 0) std::printf("large count %zu (TESSERA_TEST_SEED=%u)\n", counts.back(), seed);
  int checked = 0;
  for (ncclDataType_t t : kTypes)
    for (ncclRedOp_t o : kOps)
      for (size_t count : counts) {
        const size_t es = elemSize(t), bytes = count * es;
        const uint64_t dataSeed = count + 17 * static_cast<uint64_t>(t) + o;
        const std::string what = std::string(typeName(t)) + " " + opName(o) + " count " +
                                 std::to_string(count) + " rank " + std::to_string(me);
        const bool mpiHas = mpiType(t) != MPI_DATATYPE_NULL && mpiOp(o) != MPI_OP_NULL;
        std::vector<char> in = makeInput(t, me, count, dataSeed);
        std::vector<char> got(bytes + 1, 0), want(bytes + 1, 0);
        // all-reduce
        ASSERT_EQ(ncclAllReduce(in.data(), got.data(), count, t, o, comm_, nullptr), ncclSuccess)
            << what << ": " << ncclGetLastError(nullptr);
        if (mpiHas) {
          MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), mpiType(t), mpiOp(o),
                        MPI_COMM_WORLD);
          ASSERT_EQ("", compare(t, o, got.data(), count,
                                [&](size_t i) { return load(t, want.data(), i); }))
              << "allreduce " << what;
        } else {
          Reference ref = gatherReference(t, o, in, count);
          ASSERT_EQ("", compare(t, o, got.data(), count, [&](size_t i) { return ref.at(i); }))
              << "allreduce " << what;
        }
        // reduce onto the last rank
        const int root = n - 1;
        std::fill(got.begin(), got.end(), 0);
        ASSERT_EQ(ncclReduce(in.data(), got.data(), count, t, o, root, comm_, nullptr), ncclSuccess)
            << what << ": " << ncclGetLastError(nullptr);
        if (mpiHas) {
          MPI_Reduce(in.data(), want.data(), static_cast<int>(count), mpiType(t), mpiOp(o), root,
                     MPI_COMM_WORLD);
          if (me == root) {
            ASSERT_EQ("", compare(t, o, got.data(), count,
                                  [&](size_t i) { return load(t, want.data(), i); }))
                << "reduce " << what;
          }
        } else if (me == root) {
          Reference ref = gatherReference(t, o, in, count);
          ASSERT_EQ("", compare(t, o, got.data(), count, [&](size_t i) { return ref.at(i); }))
              << "reduce " << what;
        } else {
          gatherReference(t, o, in, count);  // the collective every rank takes part in
        }
        // reduce-scatter of n blocks of `count`
        std::vector<char> big = makeInput(t, me, count * static_cast<size_t>(n), dataSeed + 1);
        std::fill(got.begin(), got.end(), 0);
        ASSERT_EQ(ncclReduceScatter(big.data(), got.data(), count, t, o, comm_, nullptr),
                  ncclSuccess)
            << what << ": " << ncclGetLastError(nullptr);
        if (mpiHas) {
          MPI_Reduce_scatter_block(big.data(), want.data(), static_cast<int>(count), mpiType(t),
                                   mpiOp(o), MPI_COMM_WORLD);
          ASSERT_EQ("", compare(t, o, got.data(), count,
                                [&](size_t i) { return load(t, want.data(), i); }))
              << "reducescatter " << what;
        } else {
          Reference ref = gatherReference(t, o, big, count * static_cast<size_t>(n));
          ASSERT_EQ("",
                    compare(t, o, got.data(), count,
                            [&](size_t i) { return ref.at(static_cast<size_t>(me) * count + i); }))
              << "reducescatter " << what;
        }
        ++checked;
      }
  EXPECT_EQ(checked, 12 * 5 * static_cast<int>(counts.size()));
}

// Moving collectives: the bytes must equal what MPI's counterpart moved.
TEST_F(NcclMpi, MovingCollectivesAgainstMpi) {
  const int n = worldSize(), me = worldRank();
  const size_t counts[] = {0, 1, 13, 4099, 100003};
  for (ncclDataType_t t : kTypes)
    for (size_t count : counts) {
      const size_t es = elemSize(t), bytes = count * es, nb = bytes * static_cast<size_t>(n);
      const int ib = static_cast<int>(bytes);
      const std::string what = std::string(typeName(t)) + " count " + std::to_string(count) +
                               " rank " + std::to_string(me);
      std::vector<char> in = makeInput(t, me, count, count + 3);
      std::vector<char> inN = makeInput(t, me, count * static_cast<size_t>(n), count + 4);
      std::vector<char> got(nb + 1, 1), want(nb + 1, 2);
      ASSERT_EQ(ncclAllGather(in.data(), got.data(), count, t, comm_, nullptr), ncclSuccess)
          << what;
      MPI_Allgather(in.data(), ib, MPI_BYTE, want.data(), ib, MPI_BYTE, MPI_COMM_WORLD);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), nb)) << "allgather " << what;

      std::vector<char> b = in, bw = in;
      ASSERT_EQ(ncclBroadcast(b.data(), b.data(), count, t, n - 1, comm_, nullptr), ncclSuccess);
      MPI_Bcast(bw.data(), ib, MPI_BYTE, n - 1, MPI_COMM_WORLD);
      ASSERT_EQ(0, std::memcmp(b.data(), bw.data(), bytes)) << "broadcast " << what;

      ASSERT_EQ(ncclAlltoAll(inN.data(), got.data(), count, t, comm_, nullptr), ncclSuccess);
      MPI_Alltoall(inN.data(), ib, MPI_BYTE, want.data(), ib, MPI_BYTE, MPI_COMM_WORLD);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), nb)) << "alltoall " << what;

      std::fill(got.begin(), got.end(), 1);
      std::fill(want.begin(), want.end(), 1);
      ASSERT_EQ(ncclGather(in.data(), got.data(), count, t, 0, comm_, nullptr), ncclSuccess)
          << ncclGetLastError(nullptr);
      MPI_Gather(in.data(), ib, MPI_BYTE, want.data(), ib, MPI_BYTE, 0, MPI_COMM_WORLD);
      if (me == 0) {
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), nb)) << "gather " << what;
      }

      ASSERT_EQ(ncclScatter(inN.data(), got.data(), count, t, 0, comm_, nullptr), ncclSuccess)
          << ncclGetLastError(nullptr);
      MPI_Scatter(inN.data(), ib, MPI_BYTE, want.data(), ib, MPI_BYTE, 0, MPI_COMM_WORLD);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), bytes)) << "scatter " << what;
    }
}

// A group of sends and receives with every peer (an all-to-all written by hand, as PyTorch's
// all_to_all_single does on NCCL), against MPI_Alltoall.
TEST_F(NcclMpi, GroupedSendRecvWithEveryPeer) {
  const int n = worldSize(), me = worldRank();
  const size_t count = 3001, bytes = count * 4;
  std::vector<char> in = makeInput(ncclFloat32, me, count * static_cast<size_t>(n), 77);
  std::vector<char> got(bytes * static_cast<size_t>(n)), want(bytes * static_cast<size_t>(n));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int p = 0; p < n; ++p) {
    ASSERT_EQ(
        ncclSend(in.data() + static_cast<size_t>(p) * bytes, count, ncclFloat32, p, comm_, nullptr),
        ncclSuccess);
    ASSERT_EQ(ncclRecv(got.data() + static_cast<size_t>(p) * bytes, count, ncclFloat32, p, comm_,
                       nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  MPI_Alltoall(in.data(), static_cast<int>(bytes), MPI_BYTE, want.data(), static_cast<int>(bytes),
               MPI_BYTE, MPI_COMM_WORLD);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size()));
}

// Split children (several ranks per color) against MPI_Comm_split's.
TEST_F(NcclMpi, SplitChildrenAgainstMpiSplit) {
  const int me = worldRank();
  const int color = me % 2;
  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(comm_, color, me, &child, nullptr), ncclSuccess)
      << ncclGetLastError(nullptr);
  MPI_Comm mchild;
  MPI_Comm_split(MPI_COMM_WORLD, color, me, &mchild);
  int n = 0, mn = 0, r = -1, mr = -2;
  ASSERT_EQ(ncclCommCount(child, &n), ncclSuccess);
  ASSERT_EQ(ncclCommUserRank(child, &r), ncclSuccess);
  MPI_Comm_size(mchild, &mn);
  MPI_Comm_rank(mchild, &mr);
  EXPECT_EQ(n, mn);
  EXPECT_EQ(r, mr);
  const size_t count = 10007;
  std::vector<char> in = makeInput(ncclFloat64, me, count, 5), got(count * 8), want(count * 8);
  ASSERT_EQ(ncclAllReduce(in.data(), got.data(), count, ncclFloat64, ncclSum, child, nullptr),
            ncclSuccess);
  MPI_Allreduce(in.data(), want.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, mchild);
  EXPECT_EQ("", compare(ncclFloat64, ncclSum, got.data(), count,
                        [&](size_t i) { return load(ncclFloat64, want.data(), i); }));
  MPI_Comm_free(&mchild);
  EXPECT_EQ(ncclCommFinalize(child), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
}

// A receive smaller than the matching send fails with a sentence naming both sizes (the sender
// may complete: its bytes left), never a hang or a silent truncation.
TEST_F(NcclMpi, MismatchedSendRecvCountsFail) {
  const int n = worldSize(), me = worldRank();
  if (n < 2) GTEST_SKIP();
  std::vector<float> buf(100, 1.0f);
  if (me == 0) ncclSend(buf.data(), 100, ncclFloat32, 1, comm_, nullptr);
  if (me == 1) {
    EXPECT_NE(ncclRecv(buf.data(), 50, ncclFloat32, 0, comm_, nullptr), ncclSuccess);
    std::string why = ncclGetLastError(nullptr);
    EXPECT_NE(why.find("ncclRecv"), std::string::npos) << why;
    EXPECT_NE(why.find("400 bytes"), std::string::npos) << why;
  }
  // The communicator may be unusable after the failed pair: abort it everywhere instead.
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  comm_ = nullptr;
}
