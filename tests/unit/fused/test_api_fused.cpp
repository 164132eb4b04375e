// The fused API (tsrGemmReduceScatter, tsrAllGatherGemm, tsrGemmAllReduce, tsrFusedWorkspaceSize,
// FusedGemm, and the descriptor form tsrFusedGemm) on thread ranks with host buffers: bad input
// (bad descriptors included) gets a clear error and nothing written;
// every op on 1-4 ranks equals a serial double-precision GEMM followed by the collective, written
// here; deterministic calls repeat bitwise, and give the same bytes through the descriptor;
// FusedGemm reuses its workspace for smaller shapes.
//
// Inputs are multiples of 1/64 in [-1, 1): exact in float16, bfloat16 and float32. Tolerance of an
// element of C, with S = sum of |a b| over its terms plus |bias|, T = its number of terms, n ranks
// and u the unit roundoff of the output type (2^-24 float32, 2^-11 float16, 2^-8 bfloat16):
//   |got - ref| <= (T + n + 2) * 2^-24 * S + u * |ref|
// (float accumulation rounds at most once per term and once per partial added, the output once).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/handles.hpp"
#include "core/datatype.hpp"
#include "core/float_convert.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"
#include "unit/collectives/test_api_common.hpp"
#include "unit/fused/fused_test_ref.hpp"

namespace tessera {
namespace {

using apitest::ThreadComms;

constexpr uint8_t kSentinel = 0x7b;

size_t elemBytes(tsrDataType_t t) { return tessera::dtypeSize(t); }

// One element of a C/bias/A buffer of type `t`, exactly (fused_test_ref.hpp).
double decode(tsrDataType_t t, const std::vector<uint8_t>& v, size_t i) {
  return tessera::fusedtest::elementValue(t, v.data(), i);
}

void encode(tsrDataType_t t, std::vector<uint8_t>* v, size_t i, double x) {
  if (t == tsrFloat32) {
    auto f = static_cast<float>(x);
    std::memcpy(v->data() + 4 * i, &f, 4);
    return;
  }
  uint16_t h = t == tsrFloat16 ? encodeFloat16(static_cast<float>(x))
                               : encodeBFloat16(static_cast<float>(x));
  std::memcpy(v->data() + 2 * i, &h, 2);
}

std::string typeName(tsrDataType_t t) {
  return t == tsrFloat32 ? "float32" : t == tsrFloat16 ? "float16" : "bfloat16";
}

double unitRoundoff(tsrDataType_t t) {
  return t == tsrFloat32 ? 0x1p-24 : t == tsrFloat16 ? 0x1p-11 : 0x1p-8;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Multiples of 1/64 in [-1, 1).
std::vector<uint8_t> randomMatrix(tsrDataType_t t, size_t elems, uint64_t seed) {
  std::vector<uint8_t> v(elems * elemBytes(t));
  for (size_t i = 0; i < elems; ++i)
    encode(t, &v, i,
           static_cast<double>(static_cast<int>(mix(seed * 1000003 + i) % 128) - 64) / 64);
  return v;
}

struct FusedCase {
  tsrFusedOp_t op;
  tsrDataType_t in, out;
  size_t m, n, k;  // as the API takes them (n: this rank's columns, k: this rank's inner size)
  bool bias = false;
  bool gathered = false;  // AllGather: ask for the gathered A
  int flags = TSR_FUSED_DEFAULT;
};

std::string describe(const FusedCase& c, int nranks) {
  static const char* kOps[] = {"gemm_reducescatter", "allgather_gemm", "gemm_allreduce"};
  return std::string(kOps[c.op]) + " n=" + std::to_string(nranks) + " M=" + std::to_string(c.m) +
         " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " " + typeName(c.in) + "->" +
         typeName(c.out) + (c.bias ? " bias" : "") + (c.gathered ? " gatheredA" : "") +
         (c.flags & TSR_FUSED_ATOMIC ? " atomic" : "");
}

// One rank's buffers and what they must hold after the call.
struct RankData {
  std::vector<uint8_t> a, b, bias, c, gathered;
  std::vector<double> want, tol;
  std::vector<uint8_t> wantGathered;
};

// Rank r's reference C, M x N (AllGather: C_r; the reducing ops: the sum, whatever r), and the
// tolerance of each element.
void reference(const FusedCase& c, const std::vector<RankData>& d, size_t r,
               std::vector<double>* want, std::vector<double>* tol) {
  const size_t n = d.size(), seg = c.m / n;
  const bool gather = c.op == tsrFusedAllGatherGemm;
  const double terms = static_cast<double>(gather ? c.k : c.k * n);
  want->assign(c.m * c.n, 0);
  tol->assign(c.m * c.n, 0);
  for (size_t i = 0; i < c.m; ++i)
    for (size_t j = 0; j < c.n; ++j) {
      double s = 0, mag = 0;
      for (size_t q = 0; q < (gather ? 1 : n); ++q)
        for (size_t kk = 0; kk < c.k; ++kk) {
          // AllGather: row i of the gathered A is row i % seg of rank i / seg's shard.
          const std::vector<uint8_t>& a = gather ? d[i / seg].a : d[q].a;
          const size_t ai = gather ? (i % seg) * c.k + kk : i * c.k + kk;
          const std::vector<uint8_t>& b = gather ? d[r].b : d[q].b;
          const double p = decode(c.in, a, ai) * decode(c.in, b, kk * c.n + j);
          s += p;
          mag += std::fabs(p);
        }
      if (c.bias) {
        const double bj = decode(c.out, d[r].bias, j);
        s += bj;
        mag += std::fabs(bj);
      }
      (*want)[i * c.n + j] = s;
      (*tol)[i * c.n + j] =
          (terms + static_cast<double>(n) + 2) * 0x1p-24 * mag + unitRoundoff(c.out) * std::fabs(s);
    }
}

// The buffers of every rank (C and gatheredA filled with a sentinel) and their references.
std::vector<RankData> makeData(const FusedCase& c, int nranks, uint64_t seed) {
  const auto n = static_cast<size_t>(nranks);
  const size_t seg = c.m / n;
  const bool gather = c.op == tsrFusedAllGatherGemm;
  std::vector<RankData> d(n);
  for (size_t r = 0; r < n; ++r) {
    d[r].a = randomMatrix(c.in, (gather ? seg : c.m) * c.k, seed + 10 * r + 1);
    d[r].b = randomMatrix(c.in, c.k * c.n, seed + 10 * r + 2);
    // The same bias on every rank, except AllGather's (each rank's own columns).
    if (c.bias) d[r].bias = randomMatrix(c.out, c.n, seed + (gather ? 10 * r : 0) + 3);
  }
  std::vector<double> want, tol;
  for (size_t r = 0; r < n; ++r) {
    if (gather) {
      reference(c, d, r, &d[r].want, &d[r].tol);
    } else {
      if (r == 0) reference(c, d, 0, &want, &tol);
      // ReduceScatter: rank r's rows [r M/n, (r+1) M/n) of the sum.
      const size_t from = c.op == tsrFusedGemmReduceScatter ? r * seg * c.n : 0;
      const size_t count = c.op == tsrFusedGemmReduceScatter ? seg * c.n : c.m * c.n;
      d[r].want.assign(want.begin() + static_cast<ptrdiff_t>(from),
                       want.begin() + static_cast<ptrdiff_t>(from + count));
      d[r].tol.assign(tol.begin() + static_cast<ptrdiff_t>(from),
                      tol.begin() + static_cast<ptrdiff_t>(from + count));
    }
  }
  for (size_t r = 0; r < n; ++r) {
    d[r].c.assign(d[r].want.size() * elemBytes(c.out), kSentinel);
    if (!c.gathered) continue;
    d[r].gathered.assign(c.m * c.k * elemBytes(c.in), kSentinel);
    for (size_t q = 0; q < n; ++q)
      d[r].wantGathered.insert(d[r].wantGathered.end(), d[q].a.begin(), d[q].a.end());
  }
  return d;
}

tsrResult_t callOp(tsrComm_t comm, const FusedCase& c, RankData& d) {
  const void* bias = c.bias ? d.bias.data() : nullptr;
  switch (c.op) {
    case tsrFusedGemmReduceScatter:
      return tsrGemmReduceScatter(d.a.data(), d.b.data(), bias, d.c.data(), c.m, c.n, c.k, c.in,
                                  c.out, c.flags, comm, nullptr);
    case tsrFusedAllGatherGemm:
      return tsrAllGatherGemm(d.a.data(), d.b.data(), bias, d.c.data(),
                              c.gathered ? d.gathered.data() : nullptr, c.m, c.n, c.k, c.in, c.out,
                              c.flags, comm, nullptr);
    case tsrFusedGemmAllReduce:
      return tsrGemmAllReduce(d.a.data(), d.b.data(), bias, d.c.data(), c.m, c.n, c.k, c.in, c.out,
                              c.flags, comm, nullptr);
  }
  return tsrInternalError;
}

// "" when C (and the gathered A) hold the reference.
std::string checkRank(const FusedCase& c, const RankData& d) {
  std::string bad;
  int shown = 0;
  for (size_t i = 0; i < d.want.size() && shown < 3; ++i) {
    double got = decode(c.out, d.c, i);
    if (std::fabs(got - d.want[i]) <= d.tol[i]) continue;
    bad += " C[" + std::to_string(i / c.n) + "," + std::to_string(i % c.n) +
           "] = " + std::to_string(got) + ", reference " + std::to_string(d.want[i]) + ";";
    ++shown;
  }
  if (c.gathered && d.gathered != d.wantGathered) bad += " gatheredA differs from [A_0; ...];";
  return bad;
}

// Runs every case on every rank (one thread each) and checks it; deterministic calls run twice
// and must give the same bytes. The first failure aborts every rank, so none waits out its
// deadline.
std::vector<std::string> runCases(const ThreadComms& comms, const std::vector<FusedCase>& cases) {
  const int n = comms.size();
  std::vector<std::vector<RankData>> data;
  for (size_t i = 0; i < cases.size(); ++i) data.push_back(makeData(cases[i], n, 100 * i + 7));
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<bool> stopped{false};
  auto fail = [&](const std::string& s, bool stop) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (failures.size() < 20) failures.push_back(s);
    }
    if (stop && !stopped.exchange(true))
      for (int q = 0; q < n; ++q) tsrCommAbort(comms[q]);
  };
  test::runRanks(
      n,
      [&](int rank) {
        for (size_t i = 0; i < cases.size(); ++i) {
          const FusedCase& c = cases[i];
          RankData& d = data[i][static_cast<size_t>(rank)];
          const std::string what = "rank " + std::to_string(rank) + ": " + describe(c, n);
          tsrResult_t r = callOp(comms[rank], c, d);
          if (r != tsrSuccess)
            return fail(what + ": " + tsrGetErrorString(r) + ": " + tsrGetLastError(nullptr), true);
          std::string bad = checkRank(c, d);
          // Every rank repeats, whatever its check said, so the ranks stay in step.
          if (!(c.flags & TSR_FUSED_ATOMIC)) {
            std::vector<uint8_t> first = d.c;
            std::fill(d.c.begin(), d.c.end(), kSentinel);
            r = callOp(comms[rank], c, d);
            if (r != tsrSuccess) return fail(what + " (again): " + tsrGetLastError(nullptr), true);
            if (bad.empty() && d.c != first) bad = " the same call twice gave different bytes;";
          }
          if (!bad.empty()) fail(what + ":" + bad, false);
        }
      },
      120);
  return failures;
}

std::vector<FusedCase> casesFor(int nranks) {
  const auto n = static_cast<size_t>(nranks);
  std::vector<FusedCase> cases;
  for (tsrFusedOp_t op :
       {tsrFusedGemmReduceScatter, tsrFusedAllGatherGemm, tsrFusedGemmAllReduce}) {
    const bool gather = op == tsrFusedAllGatherGemm;
    cases.push_back({op, tsrFloat32, tsrFloat32, n * 37, 45, 19, true});
    // More than one 64 x 64 host tile per segment, with edge tiles.
    cases.push_back({op, tsrBfloat16, tsrFloat32, n * 70, 130, 33, false, gather});
    cases.push_back({op, tsrFloat16, tsrFloat16, n * 8, 16, 8, true});
    cases.push_back({op, tsrBfloat16, tsrBfloat16, n * 65, 64, 70, true, gather});
    if (!gather)
      cases.push_back({op, tsrFloat32, tsrFloat32, n * 37, 45, 19, true, false, TSR_FUSED_ATOMIC});
  }
  return cases;
}

class FusedApiResults : public ::testing::TestWithParam<int> {};

TEST_P(FusedApiResults, EveryOpEqualsGemmThenCollective) {
  apitest::setTestEnvironment();
  ThreadComms comms(GetParam());
  ASSERT_TRUE(comms.ok()) << comms.error();
  for (const std::string& f : runCases(comms, casesFor(GetParam()))) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, FusedApiResults, ::testing::Values(1, 2, 3, 4));

// Small tiles and communication tiles of several GEMM tiles: many tiles, edge tiles in both
// directions, counters covering partial communication tiles.
TEST(FusedApiSmallTiles, ThreeRanks) {
  apitest::setTestEnvironment();
  test::ScopedEnv tm("TESSERA_FUSED_TILE_M", "16"), tn("TESSERA_FUSED_TILE_N", "8"),
      cm("TESSERA_FUSED_COMM_M", "2"), cn("TESSERA_FUSED_COMM_N", "3");
  ThreadComms comms(3);
  ASSERT_TRUE(comms.ok()) << comms.error();
  for (const std::string& f : runCases(comms, casesFor(3))) ADD_FAILURE() << f;
}

// ---- bad input: checks fail before any peer is involved, so one thread calls on one rank
// ---------

class FusedApiBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    apitest::setTestEnvironment();
    comms_ = std::make_unique<ThreadComms>(2);
    ASSERT_TRUE(comms_->ok()) << comms_->error();
    a_ = randomMatrix(tsrFloat32, kM * kK, 1);
    b_ = randomMatrix(tsrFloat32, kK * kN, 2);
    c_.assign(kM * kN * 4, kSentinel);
  }
  tsrComm_t comm() const { return (*comms_)[0]; }

  // The call fails with `code`, says something containing `words`, and writes nothing.
  void expectRefused(const char* what, tsrResult_t code, const char* words,
                     const std::function<tsrResult_t()>& call) {
    SCOPED_TRACE(what);
    const std::vector<uint8_t> a = a_, b = b_;
    EXPECT_EQ(call(), code);
    const std::string msg = tsrGetLastError(nullptr);
    EXPECT_NE(msg.find(words), std::string::npos) << "sentence: " << msg;
    EXPECT_EQ(c_, std::vector<uint8_t>(kM * kN * 4, kSentinel)) << "C written";
    EXPECT_EQ(a_, a) << "A written";
    EXPECT_EQ(b_, b) << "B written";
  }
  tsrResult_t rs(const void* a, const void* b, void* c, size_t m, size_t n, size_t k,
                 tsrDataType_t in = tsrFloat32, tsrDataType_t out = tsrFloat32, int flags = 0) {
    return tsrGemmReduceScatter(a, b, nullptr, c, m, n, k, in, out, flags, comm(), nullptr);
  }
  tsrResult_t ag(const void* a, const void* b, void* c, size_t m, int flags = 0) {
    return tsrAllGatherGemm(a, b, nullptr, c, nullptr, m, kN, kK, tsrFloat32, tsrFloat32, flags,
                            comm(), nullptr);
  }
  tsrResult_t ar(const void* a, const void* b, void* c, size_t m, int flags = 0) {
    return tsrGemmAllReduce(a, b, nullptr, c, m, kN, kK, tsrFloat32, tsrFloat32, flags, comm(),
                            nullptr);
  }

  static constexpr size_t kM = 8, kN = 8, kK = 8;
  std::unique_ptr<ThreadComms> comms_;
  std::vector<uint8_t> a_, b_, c_;
};

TEST_F(FusedApiBadInput, NullPointersAndCommunicator) {
  uint8_t *a = a_.data(), *b = b_.data(), *c = c_.data();
  expectRefused("rs A", tsrInvalidArgument, "A is NULL",
                [&] { return rs(nullptr, b, c, 8, 8, 8); });
  expectRefused("rs B", tsrInvalidArgument, "B is NULL",
                [&] { return rs(a, nullptr, c, 8, 8, 8); });
  expectRefused("rs C", tsrInvalidArgument, "C is NULL",
                [&] { return rs(a, b, nullptr, 8, 8, 8); });
  expectRefused("ag A", tsrInvalidArgument, "A is NULL", [&] { return ag(nullptr, b, c, 8); });
  expectRefused("ag C", tsrInvalidArgument, "C is NULL", [&] { return ag(a, b, nullptr, 8); });
  expectRefused("ar B", tsrInvalidArgument, "B is NULL", [&] { return ar(a, nullptr, c, 8); });
  expectRefused("null comm", tsrInvalidArgument, "NULL", [&] {
    return tsrGemmAllReduce(a, b, nullptr, c, 8, 8, 8, tsrFloat32, tsrFloat32, 0, nullptr, nullptr);
  });
}

TEST_F(FusedApiBadInput, ShapesTypesFlagsAndOverlap) {
  uint8_t *a = a_.data(), *b = b_.data(), *c = c_.data();
  expectRefused("M odd on 2 ranks", tsrInvalidArgument, "not a multiple",
                [&] { return rs(a, b, c, 7, 8, 8); });
  expectRefused("M zero", tsrInvalidArgument, "positive", [&] { return rs(a, b, c, 0, 8, 8); });
  expectRefused("N zero", tsrInvalidArgument, "positive", [&] { return rs(a, b, c, 8, 0, 8); });
  expectRefused("K zero", tsrInvalidArgument, "positive", [&] { return rs(a, b, c, 8, 8, 0); });
  expectRefused("int32 input", tsrInvalidArgument, "input type",
                [&] { return rs(a, b, c, 8, 8, 8, tsrInt32); });
  expectRefused("float64 output", tsrInvalidArgument, "output type",
                [&] { return rs(a, b, c, 8, 8, 8, tsrFloat32, tsrFloat64); });
  expectRefused("unknown flag", tsrInvalidArgument, "unknown bits",
                [&] { return rs(a, b, c, 8, 8, 8, tsrFloat32, tsrFloat32, 4); });
  expectRefused("negative flags", tsrInvalidArgument, "unknown bits",
                [&] { return ar(a, b, c, 8, -1); });
  expectRefused("atomic allgather", tsrInvalidArgument, "TSR_FUSED_ATOMIC",
                [&] { return ag(a, b, c, 8, TSR_FUSED_ATOMIC); });
  expectRefused("copy engine reducescatter", tsrInvalidArgument, "TSR_FUSED_COPY_ENGINE", [&] {
    return rs(a, b, c, 8, 8, 8, tsrFloat32, tsrFloat32, TSR_FUSED_COPY_ENGINE);
  });
  // C is the tail of A's buffer: its first rows overlap A's last.
  std::vector<uint8_t> big(kM * kK * 4 * 2, kSentinel);
  std::memcpy(big.data(), a_.data(), a_.size());
  expectRefused("C overlaps A", tsrInvalidArgument, "overlaps", [&] {
    return tsrGemmAllReduce(big.data(), b, nullptr, big.data() + 64, 8, 8, 8, tsrFloat32,
                            tsrFloat32, 0, comm(), nullptr);
  });
  expectRefused("gatheredA overlaps C", tsrInvalidArgument, "gatheredA overlaps", [&] {
    return tsrAllGatherGemm(a, b, nullptr, c, c, 8, 8, 8, tsrFloat32, tsrFloat32, 0, comm(),
                            nullptr);
  });
}

TEST_F(FusedApiBadInput, InsideAGroupIsRefusedAndFailsTheGroup) {
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  expectRefused("group", tsrInvalidUsage, "tsrGroupStart",
                [&] { return rs(a_.data(), b_.data(), c_.data(), 8, 8, 8); });
  EXPECT_NE(tsrGroupEnd(), tsrSuccess);
}

TEST_F(FusedApiBadInput, WorkspaceSizeQuery) {
  size_t bytes = 0;
  EXPECT_EQ(tsrFusedWorkspaceSize(tsrFusedGemmReduceScatter, 8, 8, 8, tsrFloat32, tsrFloat32, 0, 0,
                                  comm(), nullptr),
            tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("bytes is NULL"), std::string::npos);
  auto query = [&](tsrFusedOp_t op, size_t m, tsrDataType_t in, int flags, int onDevice) {
    bytes = 0;
    return tsrFusedWorkspaceSize(op, m, 8, 8, in, tsrFloat32, flags, onDevice, comm(), &bytes);
  };
  EXPECT_EQ(query(tsrFusedGemmReduceScatter, 7, tsrFloat32, 0, 0), tsrInvalidArgument);
  EXPECT_EQ(query(tsrFusedGemmReduceScatter, 0, tsrFloat32, 0, 0), tsrInvalidArgument);
  EXPECT_EQ(query(static_cast<tsrFusedOp_t>(9), 8, tsrFloat32, 0, 0), tsrInvalidArgument);
  EXPECT_EQ(query(tsrFusedGemmAllReduce, 8, tsrFloat32, 8, 0), tsrInvalidArgument);
  EXPECT_EQ(query(tsrFusedAllGatherGemm, 8, tsrFloat32, TSR_FUSED_ATOMIC, 0), tsrInvalidArgument);
  // float32 inputs are for host buffers only.
  EXPECT_EQ(query(tsrFusedGemmAllReduce, 8, tsrFloat32, 0, 1), tsrInvalidArgument);
  EXPECT_EQ(query(tsrFusedGemmAllReduce, 8, tsrFloat32, 0, 0), tsrSuccess);
  EXPECT_EQ(query(tsrFusedGemmAllReduce, 8, tsrBfloat16, 0, 1), tsrSuccess);
  EXPECT_EQ(tsrFusedWorkspaceSize(tsrFusedGemmReduceScatter, 8, 8, 8, tsrFloat32, tsrFloat32, 0, 0,
                                  nullptr, &bytes),
            tsrInvalidArgument);
  // Positive and monotone in M, host and device tiles alike; atomic accumulation needs one slot
  // instead of one per rank.
  for (tsrFusedOp_t op : {tsrFusedGemmReduceScatter, tsrFusedAllGatherGemm, tsrFusedGemmAllReduce})
    for (int onDevice : {0, 1}) {
      SCOPED_TRACE("op " + std::to_string(op) + " onDevice " + std::to_string(onDevice));
      size_t last = 0;
      for (size_t m = 2; m <= 8192; m *= 2) {
        ASSERT_EQ(query(op, m, tsrBfloat16, 0, onDevice), tsrSuccess) << tsrGetLastError(nullptr);
        EXPECT_GT(bytes, 0u);
        EXPECT_GE(bytes, last) << "M " << m;
        last = bytes;
      }
      size_t small = 0;
      ASSERT_EQ(query(op, 2, tsrBfloat16, 0, onDevice), tsrSuccess);
      small = bytes;
      EXPECT_GT(last, small) << "M 8192 needs no more than M 2";
      if (op == tsrFusedAllGatherGemm) continue;
      ASSERT_EQ(query(op, 8192, tsrBfloat16, TSR_FUSED_ATOMIC, onDevice), tsrSuccess);
      EXPECT_LT(bytes, last) << "atomic needs as much as rank-ordered";
    }
}

// ---- the descriptor form (tsrFusedGemm): one path with the positional calls ---------------------

tsrResult_t callOpDesc(tsrComm_t comm, const FusedCase& c, RankData& d) {
  tsrFusedDesc_t desc = TSR_FUSED_DESC_INITIALIZER;
  desc.op = c.op;
  desc.A = d.a.data();
  desc.B = d.b.data();
  desc.bias = c.bias ? d.bias.data() : nullptr;
  desc.C = d.c.data();
  desc.gatheredA = c.gathered ? d.gathered.data() : nullptr;
  desc.M = c.m;
  desc.N = c.n;
  desc.K = c.k;
  desc.intype = c.in;
  desc.outtype = c.out;
  desc.flags = c.flags;
  return tsrFusedGemm(&desc, comm, nullptr);
}

// Every deterministic case gives the same bytes (C and the gathered A) through the descriptor as
// through the positional call, and both hold the reference.
TEST(FusedApiDescriptor, SameBytesAsThePositionalCalls) {
  apitest::setTestEnvironment();
  const int n = 2;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<FusedCase> cases;
  for (const FusedCase& c : casesFor(n))
    if (!(c.flags & TSR_FUSED_ATOMIC)) cases.push_back(c);
  std::vector<std::vector<RankData>> data;
  for (size_t i = 0; i < cases.size(); ++i) data.push_back(makeData(cases[i], n, 31 * i + 5));
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(s);
  };
  test::runRanks(
      n,
      [&](int rank) {
        for (size_t i = 0; i < cases.size(); ++i) {
          const FusedCase& c = cases[i];
          RankData& d = data[i][static_cast<size_t>(rank)];
          const std::string what = "rank " + std::to_string(rank) + ": " + describe(c, n);
          if (callOp(comms[rank], c, d) != tsrSuccess)
            return fail(what + ": " + tsrGetLastError(nullptr));
          const std::vector<uint8_t> c1 = d.c, g1 = d.gathered;
          std::fill(d.c.begin(), d.c.end(), kSentinel);
          std::fill(d.gathered.begin(), d.gathered.end(), kSentinel);
          if (callOpDesc(comms[rank], c, d) != tsrSuccess)
            return fail(what + " (descriptor): " + tsrGetLastError(nullptr));
          if (d.c != c1 || d.gathered != g1) fail(what + ": the descriptor gave other bytes");
          const std::string bad = checkRank(c, d);
          if (!bad.empty()) fail(what + ":" + bad);
        }
      },
      120);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

TEST_F(FusedApiBadInput, BadDescriptors) {
  auto good = [&] {
    tsrFusedDesc_t d = TSR_FUSED_DESC_INITIALIZER;
    d.op = tsrFusedGemmAllReduce;
    d.A = a_.data();
    d.B = b_.data();
    d.C = c_.data();
    d.M = d.N = d.K = 8;
    d.intype = d.outtype = tsrFloat32;
    return d;
  };
  tsrFusedDesc_t d = good();
  expectRefused("NULL desc", tsrInvalidArgument, "desc is NULL",
                [&] { return tsrFusedGemm(nullptr, comm(), nullptr); });
  d.size = sizeof(tsrFusedDesc_t) - 8;
  expectRefused("short struct", tsrInvalidArgument, "desc->size",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.size = sizeof(tsrFusedDesc_t) + 16;
  expectRefused("longer struct", tsrInvalidArgument, "TSR_FUSED_DESC_INITIALIZER",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.version = 0;
  expectRefused("version 0", tsrInvalidArgument, "desc->version",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.op = static_cast<tsrFusedOp_t>(7);
  expectRefused("unknown op", tsrInvalidArgument, "not a tsrFusedOp_t",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.flags = 0x40;
  expectRefused("unknown flag", tsrInvalidArgument, "unknown bits",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.A = nullptr;
  expectRefused("NULL A", tsrInvalidArgument, "A is NULL",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  d = good();
  d.M = 7;  // not a multiple of the 2 ranks
  expectRefused("M odd", tsrInvalidArgument, "not a multiple",
                [&] { return tsrFusedGemm(&d, comm(), nullptr); });
  // The sentences name the entry point the caller used.
  d = good();
  d.version = 99;
  EXPECT_EQ(tsrFusedGemm(&d, comm(), nullptr), tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("tsrFusedGemm"), std::string::npos);
  // The workspace query reads the same descriptor and agrees with the positional one.
  d = good();
  size_t viaDesc = 0, positional = 0;
  ASSERT_EQ(tsrFusedGemmWorkspaceSize(&d, 0, comm(), &viaDesc), tsrSuccess)
      << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrFusedWorkspaceSize(tsrFusedGemmAllReduce, 8, 8, 8, tsrFloat32, tsrFloat32, 0, 0,
                                  comm(), &positional),
            tsrSuccess);
  EXPECT_EQ(viaDesc, positional);
  EXPECT_EQ(tsrFusedGemmWorkspaceSize(nullptr, 0, comm(), &viaDesc), tsrInvalidArgument);
  EXPECT_EQ(tsrFusedGemmWorkspaceSize(&d, 0, comm(), nullptr), tsrInvalidArgument);
}

// ---- FusedGemm: one workspace for shapes up to the maximum --------------------------------------

// Three FusedGemm objects alive at once on one communicator, each running its maximum shape, a
// smaller one and the maximum again, interleaved with each other and with calls of the C API
// (the communicator's own workspace): each keeps its workspace and its results.
class FusedGemmReuse : public ::testing::TestWithParam<int> {};

TEST_P(FusedGemmReuse, SmallerShapesReuseTheWorkspace) {
  apitest::setTestEnvironment();
  const int n = GetParam();
  const auto un = static_cast<size_t>(n);
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(s);
  };
  // A failed call leaves the ranks out of step: stop them all rather than wait for deadlines.
  auto stop = [&](const std::string& s) {
    fail(s);
    for (int q = 0; q < n; ++q) tsrCommAbort(comms[q]);
  };
  const std::vector<tsrFusedOp_t> ops = {tsrFusedGemmReduceScatter, tsrFusedAllGatherGemm,
                                         tsrFusedGemmAllReduce};
  // Per op: the maximum, a smaller shape, the maximum again.
  std::vector<std::vector<FusedCase>> shapes;
  std::vector<std::vector<std::vector<RankData>>> data;
  for (tsrFusedOp_t op : ops) {
    shapes.push_back({{op, tsrBfloat16, tsrFloat32, un * 40, 50, 20, true},
                      {op, tsrBfloat16, tsrFloat32, un * 17, 31, 9, true},
                      {op, tsrBfloat16, tsrFloat32, un * 40, 50, 20, false}});
    data.emplace_back();
    for (const FusedCase& c : shapes.back()) data.back().push_back(makeData(c, n, 77 + c.m));
  }
  const FusedCase viaComm{tsrFusedGemmReduceScatter, tsrFloat32, tsrFloat32, un * 24, 36, 12};
  std::vector<RankData> viaCommData = makeData(viaComm, n, 5);
  test::runRanks(
      n,
      [&](int rank) {
        const auto ur = static_cast<size_t>(rank);
        std::shared_ptr<Communicator> comm;
        if (handleLookup(comms[rank], "test", &comm) != tsrSuccess) return stop("handleLookup");
        const std::string who = "rank " + std::to_string(rank) + ": ";
        // A host-only rank has no GPU kernels.
        std::unique_ptr<FusedGemm> dev;
        if (FusedGemm::create(*comm, ops[0], un * 8, 8, 8, tsrBfloat16, tsrFloat32, 0, true,
                              &dev) != tsrInvalidUsage ||
            dev != nullptr)
          fail(who + "FusedGemm on device buffers of a host-only rank was not refused");
        auto cApiCall = [&](const char* when) {
          tsrResult_t r = callOp(comms[rank], viaComm, viaCommData[ur]);
          if (r != tsrSuccess) return stop(who + "C API " + when + ": " + tsrGetLastError(nullptr));
          std::string bad = checkRank(viaComm, viaCommData[ur]);
          if (!bad.empty()) fail(who + "C API " + when + ":" + bad);
        };
        cApiCall("before the FusedGemm objects");
        std::vector<std::unique_ptr<FusedGemm>> g(ops.size());
        for (size_t o = 0; o < ops.size(); ++o) {
          const FusedCase& mx = shapes[o][0];
          if (FusedGemm::create(*comm, ops[o], mx.m, mx.n, mx.k, mx.in, mx.out, 0, false, &g[o]) !=
              tsrSuccess)
            return stop(who + "create: " + tsrGetLastError(nullptr));
          // What the query says one call of the maximum shape needs, the object holds.
          size_t query = 0;
          if (tsrFusedWorkspaceSize(ops[o], mx.m, mx.n, mx.k, mx.in, mx.out, 0, 0, comms[rank],
                                    &query) != tsrSuccess ||
              query == 0 || g[o]->workspaceBytes() < query)
            fail(who + "FusedGemm holds " + std::to_string(g[o]->workspaceBytes()) +
                 " workspace bytes, tsrFusedWorkspaceSize says " + std::to_string(query));
        }
        for (size_t s = 0; s < 3; ++s) {
          for (size_t o = 0; o < ops.size(); ++o) {
            const FusedCase& c = shapes[o][s];
            RankData& d = data[o][s][ur];
            tsrResult_t r = g[o]->run(d.a.data(), d.b.data(), c.bias ? d.bias.data() : nullptr,
                                      d.c.data(), nullptr, c.m, c.n, c.k);
            if (r != tsrSuccess)
              return stop(who + describe(c, n) + ": " + tsrGetLastError(nullptr));
            std::string bad = checkRank(c, d);
            if (!bad.empty()) fail(who + "FusedGemm " + describe(c, n) + ":" + bad);
          }
          cApiCall("between FusedGemm runs");
        }
        // Larger than the maximum: refused on every rank before anything is written.
        for (size_t o = 0; o < ops.size(); ++o) {
          const FusedCase& mx = shapes[o][0];
          RankData& d = data[o][0][ur];
          std::fill(d.c.begin(), d.c.end(), kSentinel);
          if (g[o]->run(d.a.data(), d.b.data(), nullptr, d.c.data(), nullptr, mx.m, mx.n + 1,
                        mx.k) != tsrInvalidArgument ||
              d.c != std::vector<uint8_t>(d.c.size(), kSentinel))
            fail(who + "a shape above the maximum was not refused cleanly");
        }
      },
      120);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, FusedGemmReuse, ::testing::Values(2, 3));

}  // namespace
}  // namespace tessera
