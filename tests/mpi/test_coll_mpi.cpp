// Collectives across mpirun processes through the C API, checked against MPI's own collectives
// (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce, MPI_Alltoall):
// integers exactly, floats within (n + 1) * 2^-(p-1) * sum|x| (p: significand bits), since the
// two libraries add in different orders. collectives.cmake runs this over the default transports
// (shm between processes of one host) and again with TESSERA_TRANSPORT=ucx (UCX over TCP);
// CollMpiHosts runs on two emulated hosts of two ranks with the hierarchical algorithm.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
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

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
const char* collName(Coll c) {
  static const char* kNames[] = {"allreduce", "reducescatter", "allgather",
                                 "broadcast", "reduce",        "alltoall"};
  return kNames[static_cast<int>(c)];
}
bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

struct Type {
  tsrDataType_t tsr;
  MPI_Datatype mpi;
  size_t size;
  int significand;  // 0: integer
};
const Type kFloat32{tsrFloat32, MPI_FLOAT, 4, 24};
const Type kInt32{tsrInt32, MPI_INT32_T, 4, 0};
const Type kFloat64{tsrFloat64, MPI_DOUBLE, 8, 53};

struct Op {
  tsrRedOp_t tsr;
  MPI_Op mpi;
  const char* name;
};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of rank r's input: any rank can compute any rank's (for tolerances).
double valueAt(const Type& t, tsrRedOp_t op, uint64_t seed, int r, size_t i) {
  uint64_t x = mix(seed ^ mix(static_cast<uint64_t>(r) * 7919 + i));
  if (op == tsrProd) {
    static constexpr double kFactors[] = {1, -1, 2, -2, 3, 0.5};
    return kFactors[x % (t.significand == 0 ? 5 : 6)];  // integers: no 0.5
  }
  if (t.significand == 0) return static_cast<double>(static_cast<int64_t>(x % 2001) - 1000);
  return static_cast<double>(x >> 11) * 0x1p-53 * 2 - 1;  // [-1, 1)
}

void store(const Type& t, void* p, size_t i, double v) {
  if (t.tsr == tsrFloat32) static_cast<float*>(p)[i] = static_cast<float>(v);
  if (t.tsr == tsrFloat64) static_cast<double*>(p)[i] = v;
  if (t.tsr == tsrInt32) static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
}

double load(const Type& t, const void* p, size_t i) {
  if (t.tsr == tsrFloat32) return static_cast<const float*>(p)[i];
  if (t.tsr == tsrFloat64) return static_cast<const double*>(p)[i];
  return static_cast<const int32_t*>(p)[i];
}

struct MpiCase {
  Coll coll;
  Type type;
  Op op;
  bool inPlace;
  size_t count;
  int root;
  uint64_t seed;
};

// Runs one case on this rank with tessera and with MPI and compares; "" when they agree.
std::string runCase(tsrComm_t comm, const MpiCase& c) {
  const int n = worldSize(), me = worldRank();
  const auto un = static_cast<size_t>(n), ume = static_cast<size_t>(me);
  const size_t sz = c.type.size, block = c.count;
  const size_t inElems =
      c.coll == Coll::kReduceScatter || c.coll == Coll::kAllToAll ? block * un : block;
  const size_t outElems =
      c.coll == Coll::kAllGather || c.coll == Coll::kAllToAll ? block * un : block;
  auto inputOf = [&](int r, size_t i) { return valueAt(c.type, c.op.tsr, c.seed, r, i); };
  // +1: MPI gets a valid pointer at count 0.
  std::vector<uint8_t> in((inElems + 1) * sz), ref((outElems + 1) * sz, 0);
  for (size_t i = 0; i < inElems; ++i) store(c.type, in.data(), i, inputOf(me, i));

  // tessera, on its own buffers (in place: one buffer laid out as NCCL says).
  std::vector<uint8_t> send = in, recv((std::max(inElems, outElems) + 1) * sz, 0xa5);
  uint8_t* s = send.data();
  uint8_t* r = recv.data();
  if (c.inPlace) {
    if (c.coll == Coll::kAllGather) {
      std::memcpy(r + ume * block * sz, in.data(), block * sz);
      s = r + ume * block * sz;
    } else if (c.coll == Coll::kReduceScatter) {
      std::memcpy(r, in.data(), inElems * sz);
      s = r;
      r = r + ume * block * sz;
    } else {
      std::memcpy(r, in.data(), inElems * sz);
      s = r;
    }
  }
  tsrResult_t res = tsrInternalError;
  const tsrDataType_t dt = c.type.tsr;
  switch (c.coll) {
    case Coll::kAllReduce: res = tsrAllReduce(s, r, block, dt, c.op.tsr, comm, nullptr); break;
    case Coll::kReduceScatter:
      res = tsrReduceScatter(s, r, block, dt, c.op.tsr, comm, nullptr);
      break;
    case Coll::kAllGather: res = tsrAllGather(s, r, block, dt, comm, nullptr); break;
    case Coll::kBroadcast: res = tsrBroadcast(s, r, block, dt, c.root, comm, nullptr); break;
    case Coll::kReduce: res = tsrReduce(s, r, block, dt, c.op.tsr, c.root, comm, nullptr); break;
    case Coll::kAllToAll: res = tsrAlltoAll(s, r, block, dt, comm, nullptr); break;
  }
  // Even when tessera failed, MPI's call runs: every rank must make it.
  const std::string failed = res == tsrSuccess
                                 ? ""
                                 : std::string("tessera failed: ") + tsrGetErrorString(res) + ": " +
                                       tsrGetLastError(nullptr);
  const uint8_t* got = c.inPlace && c.coll == Coll::kReduceScatter ? r : recv.data();

  // MPI's answer.
  const auto cnt = static_cast<int>(block);
  MPI_Comm w = MPI_COMM_WORLD;
  switch (c.coll) {
    case Coll::kAllReduce:
      MPI_Allreduce(in.data(), ref.data(), cnt, c.type.mpi, c.op.mpi, w);
      break;
    case Coll::kReduceScatter:
      MPI_Reduce_scatter_block(in.data(), ref.data(), cnt, c.type.mpi, c.op.mpi, w);
      break;
    case Coll::kAllGather:
      MPI_Allgather(in.data(), cnt, c.type.mpi, ref.data(), cnt, c.type.mpi, w);
      break;
    case Coll::kBroadcast:
      if (me == c.root) std::memcpy(ref.data(), in.data(), block * sz);
      MPI_Bcast(ref.data(), cnt, c.type.mpi, c.root, w);
      break;
    case Coll::kReduce:
      MPI_Reduce(in.data(), ref.data(), cnt, c.type.mpi, c.op.mpi, c.root, w);
      break;
    case Coll::kAllToAll:
      MPI_Alltoall(in.data(), cnt, c.type.mpi, ref.data(), cnt, c.type.mpi, w);
      break;
  }
  if (!failed.empty()) return failed;
  if (c.coll == Coll::kReduce && me != c.root) return "";  // nothing to compare on other ranks

  const bool exact = c.type.significand == 0 || !reduces(c.coll) || c.op.tsr != tsrSum;
  const double eps = c.type.significand == 0 ? 0 : std::ldexp(1.0, 1 - c.type.significand);
  for (size_t i = 0; i < outElems; ++i) {
    const double want = load(c.type, ref.data(), i), have = load(c.type, got, i);
    double tol = 0;
    if (!exact) {
      // The block this element reduces: reducescatter's is this rank's block of every input.
      const size_t at = c.coll == Coll::kReduceScatter ? ume * block + i : i;
      double mag = 0;
      for (int q = 0; q < n; ++q) mag += std::fabs(inputOf(q, at));
      tol = (n + 1) * eps * mag;
    }
    if (!(std::fabs(have - want) <= tol))
      return "element " + std::to_string(i) + ": tessera " + std::to_string(have) + ", MPI " +
             std::to_string(want) + " (tolerance " + std::to_string(tol) + ")";
  }
  return "";
}

// Every collective x float32 / int32 / float64 x sum, max (and prod for int32) x in place / out
// of place x counts 0, 1, 7, 100003; roots vary.
void runMatrix(tsrComm_t comm, const std::vector<size_t>& counts, bool reducingOnlySum) {
  const Op kSum{tsrSum, MPI_SUM, "sum"}, kMax{tsrMax, MPI_MAX, "max"},
      kProd{tsrProd, MPI_PROD, "prod"};
  const std::vector<std::pair<Type, std::vector<Op>>> typeOps = {
      {kFloat32, {kSum, kMax}}, {kInt32, {kSum, kMax, kProd}}, {kFloat64, {kSum, kMax}}};
  uint64_t seed = 500;
  int failures = 0;
  for (int ci = 0; ci < 6; ++ci) {
    const auto coll = static_cast<Coll>(ci);
    for (const auto& [type, ops] : typeOps) {
      std::vector<Op> useOps = reduces(coll) ? ops : std::vector<Op>{kSum};
      if (reducingOnlySum) useOps.resize(1);
      for (const Op& op : useOps)
        for (int inPlace = 0; inPlace < (coll == Coll::kAllToAll ? 1 : 2); ++inPlace)
          for (size_t count : counts) {
            MpiCase c{coll,  type,
                      op,    inPlace != 0,
                      count, static_cast<int>((seed + count) % static_cast<uint64_t>(worldSize())),
                      ++seed};
            std::string bad = runCase(comm, c);
            // Every rank learns whether any failed, so all stop together.
            int mine = bad.empty() ? 0 : 1, any = 0;
            MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (!bad.empty())
              ADD_FAILURE() << collName(coll) << " " << (type.significand ? "" : "int ")
                            << type.size * 8 << "-bit " << (reduces(coll) ? op.name : "")
                            << (inPlace ? " in-place" : " out-of-place") << " count " << count
                            << " root " << c.root << " rank " << worldRank() << ": " << bad;
            if (any != 0 && ++failures >= 3) return;
          }
    }
  }
}

TEST(CollMpi, EveryCollectiveAgainstMpi) {
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  runMatrix(comm, {0, 1, 7, 100003}, false);
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

// A ring exchange in a group (even ranks post the receive first), checked against
// MPI_Sendrecv of the same data.
TEST(CollMpi, GroupedSendRecvRing) {
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  const int n = worldSize(), me = worldRank(), next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int count : {1, 4097, 300000}) {
    std::vector<int32_t> out(static_cast<size_t>(count)), got(out.size(), -1), ref(out.size(), -2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(mix(i + 1000u * me));
    ASSERT_EQ(tsrGroupStart(), tsrSuccess);
    if (me % 2 == 0) {
      ASSERT_EQ(tsrRecv(got.data(), got.size(), tsrInt32, prev, comm, nullptr), tsrSuccess);
      ASSERT_EQ(tsrSend(out.data(), out.size(), tsrInt32, next, comm, nullptr), tsrSuccess);
    } else {
      ASSERT_EQ(tsrSend(out.data(), out.size(), tsrInt32, next, comm, nullptr), tsrSuccess);
      ASSERT_EQ(tsrRecv(got.data(), got.size(), tsrInt32, prev, comm, nullptr), tsrSuccess);
    }
    ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
    MPI_Sendrecv(out.data(), count, MPI_INT32_T, next, 7, ref.data(), count, MPI_INT32_T, prev, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT_EQ(got, ref) << "count " << count;
  }
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

// Two emulated hosts of two ranks: ranks of one host meet over shm, of different hosts over
// ucx, and the hierarchical family runs every collective it generates.
TEST(CollMpiHosts, HierarchicalOnTwoEmulatedHosts) {
  if (worldSize() != 4) GTEST_SKIP() << "needs 4 ranks (two hosts of two), has " << worldSize();
  const std::string host = "h" + std::to_string(worldRank() / 2);
  tessera::test::ScopedEnv hostId("TESSERA_HOST_ID", host.c_str());
  tessera::test::ScopedEnv algo(
      "TESSERA_ALGO",
      "allreduce:hier;reducescatter:hier;allgather:hier;broadcast:hier;reduce:hier");
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  {
    std::shared_ptr<tessera::Communicator> c;
    ASSERT_EQ(tessera::handleLookup(comm, "test", &c), tsrSuccess);
    tessera::TransportContext* ctx = nullptr;
    ASSERT_EQ(tessera::commImpl(*c)->transports(&ctx), tsrSuccess) << tsrGetLastError(nullptr);
    for (int p = 0; p < 4; ++p) {
      if (p == worldRank()) continue;
      tessera::TransportKind kind;
      std::string why;
      ASSERT_EQ(ctx->selectTransport(p, &kind, &why), tsrSuccess) << tsrGetLastError(nullptr);
      EXPECT_EQ(kind, p / 2 == worldRank() / 2 ? tessera::TransportKind::kShm
                                               : tessera::TransportKind::kUcx)
          << "peer " << p << ": " << why;
    }
  }
  runMatrix(comm, {1, 7, 100003}, true);
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

}  // namespace
