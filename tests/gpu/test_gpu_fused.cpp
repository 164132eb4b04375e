// The fused GPU executor (gpu label): GEMM+ReduceScatter, AllGather+GEMM and GEMM+AllReduce on 2,
// 4 and 8 thread ranks sharing GPU 0. Each rank drives its own DeviceFusedExecutor over its own
// TransportContext (p2p between the ranks) on a stream of its own; the reference is cuBLAS
// (cublasGemmEx, float accumulation) per rank followed by the collective done serially on the
// host in double precision.
//
// Inputs are multiples of 1/4 in [-1, 1] (exact in bf16 and fp16), so every product is a multiple
// of 1/16 and every sum of them, at these sizes, is exact in float: the fused result and the
// reference round the same float, whatever the accumulation order. The comparison still allows
// one unit in the last place of the output type (and 1e-3 for float), which no wrong element
// with these values passes. Deterministic mode must also give the same bytes on 3 runs.
//
// Each rank-count x op runs four sub-cases in a row on the same executors, with different shapes,
// types, communication tiles and flags, so the workspace is re-baselined between them; shapes are
// not multiples of the 128 x 128 tile (nor K of the 32-deep k-tile), K_r differs per rank for the
// reducing ops and N_r for AllGather+GEMM. A kernel wait that times out surfaces at the next call:
// each sub-case ends with reserve(), which reports it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/build_config.hpp"
#include "core/float_convert.hpp"
#include "fused/fused.hpp"
#include "gpu_fused_support.hpp"
#include "support/harness.hpp"
#include "test_gpu_coll_ranks.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::gputest {
namespace {

using fused::FusedOp;

#define TF_STR(expr)                  \
  do {                                \
    std::string tf_s_ = (expr);       \
    if (!tf_s_.empty()) return tf_s_; \
  } while (0)

// The test's own waits (copies, stream syncs) outlast the executor's deadline, so that a kernel
// wait that times out is reported with the executor's sentence rather than as a busy stream.
constexpr double kExecutorSeconds = 8;
constexpr double kSeconds = 40;

struct Sub {
  tsrDataType_t in = tsrBfloat16;
  tsrDataType_t out = tsrFloat32;
  bool atomic = false;
  bool copyEngine = false;
  bool bias = true;
  bool gathered = false;
  uint32_t commM = 1, commN = 1;
  uint64_t segRows = 200;  // M / n
  uint64_t cols = 264;     // N (+ 8 r for AllGather's N_r)
  uint64_t inner = 136;    // K (+ 16 r for the reducing ops' K_r)
  uint32_t seed = 1;
};

// Every rank's inputs and expected outputs of one sub-case.
struct SubData {
  uint64_t m = 0;
  std::vector<uint64_t> n, k;               // per rank: the call's shape.n and shape.k
  std::vector<std::vector<uint16_t>> a, b;  // per rank, row-major
  std::vector<std::vector<uint8_t>> bias;   // per rank, output type; empty: none
  std::vector<std::vector<float>> expect;   // per rank: C as the output type's values
  std::vector<uint16_t> gathered;           // AllGather+GEMM: [A_0; ...; A_{n-1}]
};

uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

// -1, -0.75, ..., 1: exact in every 16-bit type.
float value(uint32_t seed, uint32_t tensor, uint32_t rank, uint64_t i) {
  const uint32_t h = mix(seed * 0x9e3779b9U ^ mix(tensor * 131u + rank) ^
                         mix(static_cast<uint32_t>(i) ^ static_cast<uint32_t>(i >> 32) * 7u));
  return (static_cast<float>(h % 9u) - 4.0f) * 0.25f;
}

uint16_t encode16(float v, tsrDataType_t t) {
  return t == tsrBfloat16 ? encodeBFloat16(v) : encodeFloat16(v);
}

// The value the output type holds for v (round to nearest even).
float roundTo(float v, tsrDataType_t t) {
  if (t == tsrBfloat16) return decodeBFloat16(encodeBFloat16(v));
  if (t == tsrFloat16) return decodeFloat16(encodeFloat16(v));
  return v;
}

size_t outBytes(tsrDataType_t t) { return t == tsrFloat32 ? 4 : 2; }

std::vector<uint8_t> encodeOut(const std::vector<float>& v, tsrDataType_t t) {
  std::vector<uint8_t> bytes(v.size() * outBytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == tsrFloat32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = encode16(v[i], t);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

float decodeOut(const uint8_t* p, tsrDataType_t t) {
  if (t == tsrFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == tsrBfloat16 ? decodeBFloat16(h) : decodeFloat16(h);
}

std::vector<uint16_t> makeMatrix(const Sub& s, uint32_t tensor, uint32_t rank, uint64_t count) {
  std::vector<uint16_t> m(count);
  for (uint64_t i = 0; i < count; ++i) m[i] = encode16(value(s.seed, tensor, rank, i), s.in);
  return m;
}

// Inputs, cuBLAS products and the serial collective for every rank of `n`.
std::string prepare(FusedOp op, int n, const Sub& s, SubData* d) {
  const auto nr = static_cast<uint64_t>(n);
  const bool gather = op == FusedOp::kAllGatherGemm;
  const bool bf16 = s.in == tsrBfloat16;
  d->m = s.segRows * nr;
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<uint32_t>(r);
    const uint64_t cols = gather ? s.cols + 8 * ur : s.cols;
    const uint64_t inner = gather ? s.inner : s.inner + 16 * ur;
    d->n.push_back(cols);
    d->k.push_back(inner);
    d->a.push_back(makeMatrix(s, 0, ur, (gather ? s.segRows : d->m) * inner));
    d->b.push_back(makeMatrix(s, 1, ur, inner * cols));
    std::vector<float> bias(cols, 0.0f);
    // The reducing ops' bias is C's, the same on every rank (tensor tensor-parallel layers pass
    // one bias); AllGather's is each rank's own.
    for (uint64_t j = 0; s.bias && j < cols; ++j) bias[j] = value(s.seed, 2, gather ? ur : 0, j);
    d->bias.push_back(s.bias ? encodeOut(bias, s.out) : std::vector<uint8_t>());
  }
  auto biasAt = [&](int r, uint64_t j) {
    return s.bias ? decodeOut(d->bias[static_cast<size_t>(r)].data() + j * outBytes(s.out), s.out)
                  : 0.0f;
  };
  if (gather) {
    for (int r = 0; r < n; ++r) {
      const auto& a = d->a[static_cast<size_t>(r)];
      d->gathered.insert(d->gathered.end(), a.begin(), a.end());
    }
    for (int r = 0; r < n; ++r) {
      const uint64_t cols = d->n[static_cast<size_t>(r)];
      std::vector<float> c;
      TF_STR(
          cublasProduct(d->gathered, d->b[static_cast<size_t>(r)], d->m, cols, s.inner, bf16, &c));
      for (uint64_t i = 0; i < c.size(); ++i) c[i] = roundTo(c[i] + biasAt(r, i % cols), s.out);
      d->expect.push_back(std::move(c));
    }
    return "";
  }
  std::vector<double> sum(d->m * s.cols, 0.0);
  for (int r = 0; r < n; ++r) {
    std::vector<float> c;
    TF_STR(cublasProduct(d->a[static_cast<size_t>(r)], d->b[static_cast<size_t>(r)], d->m, s.cols,
                         d->k[static_cast<size_t>(r)], bf16, &c));
    for (uint64_t i = 0; i < c.size(); ++i) sum[i] += c[i];
  }
  std::vector<float> full(sum.size());
  for (uint64_t i = 0; i < sum.size(); ++i)
    full[i] = roundTo(static_cast<float>(sum[i] + biasAt(0, i % s.cols)), s.out);
  for (int r = 0; r < n; ++r) {
    if (op == FusedOp::kGemmAllReduce) {
      d->expect.push_back(full);
      continue;
    }
    const auto begin = full.begin() + static_cast<std::ptrdiff_t>(r * s.segRows * s.cols);
    d->expect.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(s.segRows * s.cols));
  }
  return "";
}

// "" when C matches: one ulp of the output type, 1e-3 for float.
std::string compare(const std::vector<uint8_t>& got, const std::vector<float>& expect,
                    tsrDataType_t t, uint64_t cols, const char* what) {
  const double ulp = t == tsrBfloat16 ? 1.0 / 128 : t == tsrFloat16 ? 1.0 / 1024 : 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    const float g = decodeOut(got.data() + i * outBytes(t), t);
    const double tol = std::max(1e-3, std::fabs(expect[i]) * ulp);
    if (!(std::fabs(static_cast<double>(g) - expect[i]) <= tol))
      return strprintf("%s: C[%zu][%zu] is %.6g, expected %.6g", what,
                       static_cast<size_t>(i / cols), static_cast<size_t>(i % cols), g,
                       static_cast<double>(expect[i]));
  }
  return "";
}

struct Buffers {
  void *a = nullptr, *b = nullptr, *bias = nullptr, *c = nullptr, *gathered = nullptr;
  size_t cBytes = 0, gatheredBytes = 0;
  ~Buffers() {
    for (void* p : {a, b, bias, c, gathered}) deviceFree(p);
  }
};

std::string allocate(const Sub& s, const SubData& d, int r, FusedOp op, Buffers* bf, void* stream) {
  const auto i = static_cast<size_t>(r);
  const uint64_t cRows = op == FusedOp::kGemmReduceScatter ? s.segRows : d.m;
  bf->cBytes = cRows * d.n[i] * outBytes(s.out);
  bf->gatheredBytes = d.gathered.size() * 2;
  TF_STR(deviceAlloc(d.a[i].size() * 2, &bf->a));
  TF_STR(deviceAlloc(d.b[i].size() * 2, &bf->b));
  TF_STR(deviceAlloc(bf->cBytes, &bf->c));
  TF_STR(upload(bf->a, d.a[i].data(), d.a[i].size() * 2, stream, kSeconds));
  TF_STR(upload(bf->b, d.b[i].data(), d.b[i].size() * 2, stream, kSeconds));
  if (s.bias) {
    TF_STR(deviceAlloc(d.bias[i].size(), &bf->bias));
    TF_STR(upload(bf->bias, d.bias[i].data(), d.bias[i].size(), stream, kSeconds));
  }
  if (s.gathered) TF_STR(deviceAlloc(bf->gatheredBytes, &bf->gathered));
  return "";
}

// Three runs of one sub-case on this rank; C is overwritten with 0xff bytes before each run, so a
// run that writes nothing cannot pass on an earlier run's result.
std::string runSub(fused::DeviceFusedExecutor& ex, FusedOp op, int r, int n, const Sub& s,
                   const SubData& d, const Buffers& bf, void* stream, const std::string& name) {
  const auto i = static_cast<size_t>(r);
  ex.setTileConfig({128, 128, s.commM, s.commN});
  fused::FusedCall call;
  call.op = op;
  call.a = bf.a;
  call.b = bf.b;
  call.bias = bf.bias;
  call.c = bf.c;
  call.gatheredA = bf.gathered;
  call.shape = {d.m, d.n[i], d.k[i]};
  call.inType = s.in;
  call.outType = s.out;
  call.atomic = s.atomic;
  call.copyEngine = s.copyEngine;
  TT_CHECK_OK(fused::checkFusedCall(call, n, true, name.c_str()));
  std::vector<std::vector<uint8_t>> runs(3, std::vector<uint8_t>(bf.cBytes));
  for (size_t run = 0; run < runs.size(); ++run) {
    TF_STR(fill(bf.c, 0xff, bf.cBytes, stream));
    if (bf.gathered != nullptr) TF_STR(fill(bf.gathered, 0xff, bf.gatheredBytes, stream));
    TT_CHECK_OK(ex.enqueue(call, stream));
    TF_STR(download(runs[run].data(), bf.c, bf.cBytes, stream, kSeconds));
    const std::string what = name + " run " + std::to_string(run);
    TF_STR(compare(runs[run], d.expect[i], s.out, d.n[i], what.c_str()));
    if (!s.atomic)
      TT_CHECK(runs[run] == runs[0], "%s: C differs from run 0's bytes (deterministic mode)",
               what.c_str());
  }
  if (bf.gathered != nullptr) {
    std::vector<uint16_t> got(d.gathered.size());
    TF_STR(download(got.data(), bf.gathered, bf.gatheredBytes, stream, kSeconds));
    for (size_t j = 0; j < got.size(); ++j)
      TT_CHECK(got[j] == d.gathered[j], "%s: gathered A element %zu is 0x%04x, expected 0x%04x",
               name.c_str(), j, got[j], d.gathered[j]);
  }
  // The kernels' waits report a timeout at the next call; the last run's verdict comes here.
  TT_CHECK_OK(ex.reserve(call, stream));
  return "";
}

// This rank's fused GPU executor on GPU 0, whose waits last `seconds`.
std::string makeExecutor(TransportContext& ctx, double seconds,
                         std::unique_ptr<fused::DeviceFusedExecutor>* ex) {
  TF_STR(useGpu0());
  fused::FusedOptions o;
  o.transports = &ctx;
  o.rank = ctx.rank();
  o.nranks = ctx.nranks();
  o.timeoutSeconds = seconds;
  o.cudaDevice = 0;
  TT_CHECK_OK(fused::DeviceFusedExecutor::create(o, ex));
  return "";
}

std::string rankBody(TransportContext& ctx, FusedOp op, const std::vector<Sub>& subs,
                     const std::vector<SubData>& data) {
  const int r = ctx.rank(), n = ctx.nranks();
  std::unique_ptr<fused::DeviceFusedExecutor> ex;
  TF_STR(makeExecutor(ctx, kExecutorSeconds, &ex));
  void* stream = nullptr;
  TF_STR(streamCreate(&stream));
  // Every buffer exists before any rank's first kernel: freeing or allocating device memory may
  // wait for the whole GPU, i.e. for peers' kernels that wait for this rank.
  std::vector<Buffers> bufs(subs.size());
  std::string failure;
  for (size_t i = 0; i < subs.size() && failure.empty(); ++i)
    failure = allocate(subs[i], data[i], r, op, &bufs[i], stream);
  if (failure.empty() && ctx.bootstrap().barrier() != tsrSuccess)
    failure = std::string("barrier: ") + lastErrorMessage();
  for (size_t i = 0; i < subs.size() && failure.empty(); ++i)
    failure = runSub(*ex, op, r, n, subs[i], data[i], bufs[i], stream,
                     strprintf("%s sub-case %zu", fused::fusedOpName(op), i));
  // Teardown that never frees what a kernel uses: this rank's stream, then the executor (it waits
  // until every peer finished its calls), then every rank, then the buffers.
  std::string waited = streamWait(stream, kSeconds);
  if (failure.empty()) failure = waited;
  ex.reset();
  if (ctx.bootstrap().barrier() != tsrSuccess && failure.empty())
    failure = std::string("closing barrier: ") + lastErrorMessage();
  bufs.clear();
  streamDestroy(stream);
  return failure;
}

std::vector<Sub> subCases(FusedOp op) {
  std::vector<Sub> subs(4);
  // 1: bf16 -> float with bias, one GEMM tile per communication tile, edge tiles everywhere.
  subs[0].gathered = op == FusedOp::kAllGatherGemm;
  // 2: fp16 -> bf16, no bias, 2 x 2 communication tiles (2 x 1 for AllGather's chunks), three
  //    tile rows and four tile columns of which the last is 8 wide; copy engine for AllGather.
  subs[1].in = tsrFloat16;
  subs[1].out = tsrBfloat16;
  subs[1].bias = false;
  subs[1].commM = 2;
  subs[1].commN = op == FusedOp::kAllGatherGemm ? 1 : 2;
  subs[1].segRows = 328;
  subs[1].cols = 392;
  subs[1].inner = 72;
  subs[1].copyEngine = op == FusedOp::kAllGatherGemm;
  subs[1].seed = 2;
  // 3: bf16 -> bf16; atomic accumulation for the reducing ops, copy engine + gathered A for
  //    AllGather.
  subs[2].out = tsrBfloat16;
  subs[2].atomic = op != FusedOp::kAllGatherGemm;
  subs[2].copyEngine = op == FusedOp::kAllGatherGemm;
  subs[2].gathered = op == FusedOp::kAllGatherGemm;
  subs[2].commN = 2;
  subs[2].seed = 3;
  // 4: whole tiles only (M/n, N and K multiples of the tiles).
  subs[3].segRows = 256;
  subs[3].cols = 256;
  subs[3].inner = 128;
  subs[3].seed = 4;
  return subs;
}

void runCase(FusedOp op, int n) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  if (!fused::DeviceFusedExecutor::available(&why)) GTEST_SKIP() << why;
  why = fusedCublasMissing();
  if (!why.empty()) GTEST_SKIP() << "no cuBLAS for the reference GEMMs: " << why;
  const std::vector<Sub> subs = subCases(op);
  std::vector<SubData> data(subs.size());
  for (size_t i = 0; i < subs.size(); ++i) {
    why = prepare(op, n, subs[i], &data[i]);
    ASSERT_EQ(why, "") << "reference of sub-case " << i;
  }
  test::RankOptions options;
  options.cudaDevice = 0;
  options.timeoutSeconds = kSeconds;
  options.runSeconds = 240;
  auto results = test::runTransportRanks(
      test::RankMode::kThreads, n,
      [&](TransportContext& ctx) { return rankBody(ctx, op, subs, data); }, options);
  test::expectAllRanksOk(results);
}

TEST(GpuFused, ReduceScatter2Ranks) { runCase(FusedOp::kGemmReduceScatter, 2); }
TEST(GpuFused, ReduceScatter4Ranks) { runCase(FusedOp::kGemmReduceScatter, 4); }
TEST(GpuFused, ReduceScatter8Ranks) { runCase(FusedOp::kGemmReduceScatter, 8); }
TEST(GpuFused, AllGather2Ranks) { runCase(FusedOp::kAllGatherGemm, 2); }
TEST(GpuFused, AllGather4Ranks) { runCase(FusedOp::kAllGatherGemm, 4); }
TEST(GpuFused, AllGather8Ranks) { runCase(FusedOp::kAllGatherGemm, 8); }
TEST(GpuFused, AllReduce2Ranks) { runCase(FusedOp::kGemmAllReduce, 2); }
TEST(GpuFused, AllReduce4Ranks) { runCase(FusedOp::kGemmAllReduce, 4); }
TEST(GpuFused, AllReduce8Ranks) { runCase(FusedOp::kGemmAllReduce, 8); }

// What the executor refuses, with nothing launched: shapes the kernels cannot load, tiles they
// are not built for, and ranks whose calls disagree.
TEST(GpuFused, RefusesWhatTheKernelsCannotDo) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  if (!fused::DeviceFusedExecutor::available(&why)) GTEST_SKIP() << why;
  auto body = [](TransportContext& ctx) -> std::string {
    const int r = ctx.rank();
    std::unique_ptr<fused::DeviceFusedExecutor> ex;
    TF_STR(makeExecutor(ctx, kExecutorSeconds, &ex));
    void* mem = nullptr;
    TF_STR(deviceAlloc(1 << 20, &mem));
    Buffers own;  // frees `mem`
    own.a = mem;
    fused::FusedCall call;
    call.op = FusedOp::kGemmReduceScatter;
    call.a = mem;
    call.b = static_cast<char*>(mem) + (256 << 10);
    call.c = static_cast<char*>(mem) + (512 << 10);
    call.shape = {256, 64, 12};  // K = 12: not a multiple of 8
    call.inType = tsrBfloat16;
    Result res = ex->enqueue(call, nullptr);
    TT_CHECK(res == tsrInvalidArgument && std::strstr(lastErrorMessage(), "multiples of 8"),
             "K=12 gave %s: %s", resultName(res), lastErrorMessage());
    call.shape.k = 64;
    ex->setTileConfig({64, 64, 1, 1});
    res = ex->enqueue(call, nullptr);
    TT_CHECK(res == tsrInvalidUsage, "64 x 64 tiles gave %s: %s", resultName(res),
             lastErrorMessage());
    ex->setTileConfig({128, 128, 1, 1});
    call.shape.m = r == 0 ? 256 : 512;  // the ranks disagree on M
    res = ex->reserve(call, nullptr);
    TT_CHECK(res == tsrInvalidUsage && std::strstr(lastErrorMessage(), "differs"),
             "mismatched M gave %s: %s", resultName(res), lastErrorMessage());
    return "";
  };
  test::RankOptions options;
  options.cudaDevice = 0;
  options.timeoutSeconds = kSeconds;
  test::expectAllRanksOk(test::runTransportRanks(test::RankMode::kThreads, 2, body, options));
}

// A peer that never makes its call: rank 0's kernels wait for it, and abort() (tsrCommAbort) makes
// them give up long before their deadline, so the stream they hold goes on; asyncError() then
// says aborted and later calls fail.
TEST(GpuFused, AbortReleasesAStreamWaitingForAMissingPeer) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  if (!fused::DeviceFusedExecutor::available(&why)) GTEST_SKIP() << why;
  auto body = [](TransportContext& ctx) -> std::string {
    const int r = ctx.rank();
    std::unique_ptr<fused::DeviceFusedExecutor> ex;
    // Waits far beyond the test's own: only abort() can end them in time.
    TF_STR(makeExecutor(ctx, 30, &ex));
    void* mem = nullptr;
    TF_STR(deviceAlloc(8 << 20, &mem));
    Buffers own;  // frees `mem`
    own.a = mem;
    TF_STR(fill(mem, 0, 8 << 20, nullptr));
    TF_STR(streamWait(nullptr, kSeconds));
    fused::FusedCall call;
    call.op = FusedOp::kGemmReduceScatter;
    call.a = mem;
    call.b = static_cast<char*>(mem) + (2 << 20);
    call.c = static_cast<char*>(mem) + (4 << 20);
    call.shape = {256, 128, 64};
    call.inType = tsrBfloat16;
    call.outType = tsrFloat32;
    TT_CHECK_OK(ex->reserve(call, nullptr));  // collective: both ranks
    // Rank 1 never makes the call, but keeps its workspace (rank 0's GEMM stores into it) until
    // rank 0 is through.
    if (r == 1) {
      TT_CHECK_OK(ctx.bootstrap().barrier());
      return "";
    }
    void* stream = nullptr;
    TF_STR(streamCreate(&stream));
    TT_CHECK_OK(ex->enqueue(call, stream));
    // Late on purpose: the abort must end a call that already waits for rank 1.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    TT_CHECK(ex->asyncError() == tsrSuccess, "asyncError before abort: %s",
             resultName(ex->asyncError()));
    ex->abort();
    std::string waited = streamWait(stream, 10);
    streamDestroy(stream);
    TT_CHECK(waited.empty(), "the stream did not go on within 10 s of abort(): %s", waited.c_str());
    TT_CHECK(ex->asyncError() == tsrRemoteError, "asyncError after abort: %s",
             resultName(ex->asyncError()));
    const Result again = ex->enqueue(call, nullptr);
    TT_CHECK(again == tsrRemoteError, "a call after abort gave %s: %s", resultName(again),
             lastErrorMessage());
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return "";
  };
  test::RankOptions options;
  options.cudaDevice = 0;
  options.timeoutSeconds = kSeconds;
  test::expectAllRanksOk(test::runTransportRanks(test::RankMode::kThreads, 2, body, options));
}

// Runs everywhere: the build says whether the kernels are in, and an executor without a transport
// context is refused with a sentence.
TEST(GpuFused, AvailabilityMatchesTheBuild) {
  std::string why;
  const bool built = TESSERA_HAVE_CUDA && TESSERA_HAVE_CUTLASS;
  EXPECT_EQ(fused::DeviceFusedExecutor::available(&why), built) << why;
  EXPECT_EQ(why.empty(), built) << why;
  fused::FusedOptions o;
  o.cudaDevice = 0;
  std::unique_ptr<fused::DeviceFusedExecutor> ex;
  EXPECT_EQ(fused::DeviceFusedExecutor::create(o, &ex), tsrInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()), "");
  EXPECT_EQ(ex, nullptr);
}

}  // namespace
}  // namespace tessera::gputest
