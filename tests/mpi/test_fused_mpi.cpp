// The fused ops across mpirun processes through the C API, checked against an outside reference:
// each rank's GEMM in double precision, then MPI's own collectives (MPI_Allreduce of the local
// products for GEMM+ReduceScatter and GEMM+AllReduce, MPI_Allgather of the A shards for
// AllGather+GEMM). float32 and bfloat16 inputs, shapes that are not multiples of the host tile.
//
// Inputs are multiples of 1/64 in [-1, 1) (exact in every input type). Tolerance of an element,
// with S = sum of |a b| over its terms plus |bias|, T its number of terms, n ranks and u the unit
// roundoff of the output type (2^-24 float32, 2^-8 bfloat16):
//   |got - ref| <= (T + n + 2) * 2^-24 * S + u * |ref|
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/datatype.hpp"
#include "core/float_convert.hpp"
#include "mpi/mpi_test_util.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera_mpi.h"
#include "unit/fused/fused_test_ref.hpp"

namespace {

using tessera::test::worldRank;
using tessera::test::worldSize;

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
  const auto f = static_cast<float>(x);
  uint16_t h = t == tsrFloat16 ? tessera::encodeFloat16(f) : tessera::encodeBFloat16(f);
  std::memcpy(v->data() + 2 * i, &h, 2);
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A rows x cols matrix of multiples of 1/64 in [-1, 1): its bytes in `t` and its values.
void randomMatrix(tsrDataType_t t, size_t elems, uint64_t seed, std::vector<uint8_t>* bytes,
                  std::vector<double>* values) {
  bytes->assign(elems * elemBytes(t), 0);
  values->assign(elems, 0);
  for (size_t i = 0; i < elems; ++i) {
    (*values)[i] = static_cast<double>(static_cast<int>(mix(seed * 1000003 + i) % 128) - 64) / 64;
    encode(t, bytes, i, (*values)[i]);
  }
}

// rows x cols += A (rows x k) B (k x cols) in double, with the magnitudes |a||b| beside.
void gemm(const std::vector<double>& a, const std::vector<double>& b, size_t rows, size_t cols,
          size_t k, std::vector<double>* c, std::vector<double>* mag) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t kk = 0; kk < k; ++kk) {
      const double x = a[i * k + kk];
      for (size_t j = 0; j < cols; ++j) {
        (*c)[i * cols + j] += x * b[kk * cols + j];
        (*mag)[i * cols + j] += std::fabs(x * b[kk * cols + j]);
      }
    }
}

struct MpiFusedCase {
  tsrFusedOp_t op;
  tsrDataType_t in, out;
  size_t segRows, n, k;  // M = segRows * ranks
  bool bias;
  bool gathered;
};

const char* opName(tsrFusedOp_t op) {
  return op == tsrFusedGemmReduceScatter ? "gemm_reducescatter"
         : op == tsrFusedAllGatherGemm   ? "allgather_gemm"
                                         : "gemm_allreduce";
}

// Runs one case with tessera and with the reference; "" when they agree. Every rank makes the
// same MPI calls whatever tessera did.
std::string runCase(tsrComm_t comm, const MpiFusedCase& c, uint64_t seed) {
  const int nranks = worldSize(), me = worldRank();
  const auto un = static_cast<size_t>(nranks), ume = static_cast<size_t>(me);
  const size_t m = c.segRows * un, seg = c.segRows;
  const bool gather = c.op == tsrFusedAllGatherGemm;
  const size_t aRows = gather ? seg : m;
  std::vector<uint8_t> aBytes, bBytes, biasBytes;
  std::vector<double> a, b, bias;
  randomMatrix(c.in, aRows * c.k, seed + 10 * ume + 1, &aBytes, &a);
  randomMatrix(c.in, c.k * c.n, seed + 10 * ume + 2, &bBytes, &b);
  // The same bias on every rank for the reducing ops; AllGather's is each rank's own.
  if (c.bias) randomMatrix(c.out, c.n, seed + (gather ? 10 * ume : 0) + 3, &biasBytes, &bias);

  const size_t cRows = c.op == tsrFusedGemmReduceScatter ? seg : m;
  std::vector<uint8_t> out(cRows * c.n * elemBytes(c.out), kSentinel);
  std::vector<uint8_t> gatheredA(c.gathered ? m * c.k * elemBytes(c.in) : 0, kSentinel);
  const void* biasPtr = c.bias ? biasBytes.data() : nullptr;
  tsrResult_t res = tsrInternalError;
  switch (c.op) {
    case tsrFusedGemmReduceScatter:
      res = tsrGemmReduceScatter(aBytes.data(), bBytes.data(), biasPtr, out.data(), m, c.n, c.k,
                                 c.in, c.out, TSR_FUSED_DEFAULT, comm, nullptr);
      break;
    case tsrFusedAllGatherGemm:
      res = tsrAllGatherGemm(aBytes.data(), bBytes.data(), biasPtr, out.data(),
                             c.gathered ? gatheredA.data() : nullptr, m, c.n, c.k, c.in, c.out,
                             TSR_FUSED_DEFAULT, comm, nullptr);
      break;
    case tsrFusedGemmAllReduce:
      res = tsrGemmAllReduce(aBytes.data(), bBytes.data(), biasPtr, out.data(), m, c.n, c.k, c.in,
                             c.out, TSR_FUSED_DEFAULT, comm, nullptr);
      break;
  }
  const std::string failed = res == tsrSuccess
                                 ? ""
                                 : std::string("tessera failed: ") + tsrGetErrorString(res) + ": " +
                                       tsrGetLastError(nullptr);

  // The reference: full M x N in double and the magnitudes of its terms.
  std::vector<double> ref(m * c.n, 0), mag(m * c.n, 0);
  std::vector<uint8_t> refGathered;
  size_t terms = c.k;
  if (gather) {
    std::vector<double> all(m * c.k);
    MPI_Allgather(a.data(), static_cast<int>(a.size()), MPI_DOUBLE, all.data(),
                  static_cast<int>(a.size()), MPI_DOUBLE, MPI_COMM_WORLD);
    refGathered.resize(m * c.k * elemBytes(c.in));
    MPI_Allgather(aBytes.data(), static_cast<int>(aBytes.size()), MPI_BYTE, refGathered.data(),
                  static_cast<int>(aBytes.size()), MPI_BYTE, MPI_COMM_WORLD);
    gemm(all, b, m, c.n, c.k, &ref, &mag);
  } else {
    std::vector<double> local(m * c.n, 0), localMag(m * c.n, 0);
    gemm(a, b, m, c.n, c.k, &local, &localMag);
    MPI_Allreduce(local.data(), ref.data(), static_cast<int>(ref.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    MPI_Allreduce(localMag.data(), mag.data(), static_cast<int>(mag.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    terms = c.k * un;
  }
  if (!failed.empty()) return failed;

  const size_t row0 = c.op == tsrFusedGemmReduceScatter ? ume * seg : 0;
  const double u = c.out == tsrFloat32 ? 0x1p-24 : c.out == tsrFloat16 ? 0x1p-11 : 0x1p-8;
  for (size_t i = 0; i < cRows; ++i)
    for (size_t j = 0; j < c.n; ++j) {
      const size_t at = (row0 + i) * c.n + j;
      double want = ref[at], s = mag[at];
      if (c.bias) {
        want += bias[j];
        s += std::fabs(bias[j]);
      }
      const double tol = (static_cast<double>(terms + un) + 2) * 0x1p-24 * s + u * std::fabs(want);
      const double got = decode(c.out, out, i * c.n + j);
      if (!(std::fabs(got - want) <= tol))
        return "C[" + std::to_string(i) + "," + std::to_string(j) + "]: tessera " +
               std::to_string(got) + ", reference " + std::to_string(want) + " (tolerance " +
               std::to_string(tol) + ")";
    }
  if (c.gathered && gatheredA != refGathered) return "gatheredA differs from MPI_Allgather of A";
  return "";
}

TEST(FusedMpi, EveryOpAgainstMpi) {
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  std::vector<MpiFusedCase> cases;
  for (tsrFusedOp_t op :
       {tsrFusedGemmReduceScatter, tsrFusedAllGatherGemm, tsrFusedGemmAllReduce}) {
    const bool gather = op == tsrFusedAllGatherGemm;
    cases.push_back({op, tsrFloat32, tsrFloat32, 16, 32, 16, false, false});
    // Segments of 70 rows and 130 columns: edge tiles of the 64 x 64 host tile both ways.
    cases.push_back({op, tsrFloat32, tsrFloat32, 70, 130, 33, true, gather});
    cases.push_back({op, tsrBfloat16, tsrFloat32, 70, 130, 33, false, gather});
    cases.push_back({op, tsrBfloat16, tsrBfloat16, 33, 65, 40, true, false});
  }
  uint64_t seed = 900;
  int failures = 0;
  for (const MpiFusedCase& c : cases) {
    std::string bad = runCase(comm, c, seed += 100);
    // Every rank learns whether any failed, so all stop together.
    int mine = bad.empty() ? 0 : 1, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!bad.empty())
      ADD_FAILURE() << opName(c.op) << " M=" << c.segRows * static_cast<size_t>(worldSize())
                    << " N=" << c.n << " K=" << c.k << " in " << elemBytes(c.in) * 8 << "-bit"
                    << (c.in == tsrBfloat16 ? " bf16" : "") << " out " << elemBytes(c.out) * 8
                    << "-bit" << (c.bias ? " bias" : "") << " rank " << worldRank() << ": " << bad;
    if (any != 0 && ++failures >= 2) break;
  }
  EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

}  // namespace
