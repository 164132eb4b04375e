// fused_perf: the fused GEMM + communication ops (tsrGemmReduceScatter, tsrAllGatherGemm,
// tsrGemmAllReduce) on thread ranks of one process, beside what they replace, measured in the
// same run: the GEMM followed by tessera's collective (the collective first for AllGather+GEMM),
// the GEMM alone and the collective alone. On the host the GEMM is the host executor's tiled
// GEMM; on a GPU (-d device, ranks sharing GPU 0) it is cuBLAS (cublasGemmEx) on each rank's own
// stream, and the collective runs on device buffers. Every figure is the median over -i
// iterations (after -w warmups) of the time from the first rank's start to the last rank's end;
// each iteration starts all ranks together. Ratios: fused / (GEMM + collective), and the overlap
// efficiency as FLUX defines it, 1 - (T_fused - T_gemm) / T_comm. The fused result is compared with
// the baseline's (column err: max |difference| / max |C|; it must stay within (n + 3) units of
// roundoff of the output type).
//
//   fused_perf [-d host|device] [-O rs,ag,ar] [-n ranks,...] [-M list|a:b[:f]] [-N ...] [-K ...]
//              [-t bf16|fp16|float] [-o bf16|fp16|float] [-i iters] [-w warmup] [-J file.json]
//
// M is the full row count (a multiple of the rank count); K is each rank's inner size for the
// reducing ops and the full K for AllGather+GEMM; N is each rank's column count for
// AllGather+GEMM and the full N otherwise (fused.hpp's FusedShape).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fused_perf_backend.hpp"
#include "perf_json_text.hpp"
#include "perf_util.hpp"

namespace tessera::perf {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "fused_perf: %s\n", why);
  std::fprintf(
      stderr,
      "usage: fused_perf [options]\n"
      "  -d host|device  buffers and executors (host)\n"
      "  -O <ops>        rs, ag, ar, comma-separated (rs): GEMM+ReduceScatter, AllGather+GEMM,\n"
      "                  GEMM+AllReduce\n"
      "  -n <ranks>      thread rank counts, comma-separated (device 4, host 2)\n"
      "  -M, -N, -K      sizes: a list (128,256), or a range a:b doubling, or a:b:factor\n"
      "                  (device: M 128:16384, N 8192, K 2048; host: M 64:512, N 256, K 256)\n"
      "  -t <type>       input type bf16, fp16 or float (device bf16, host float)\n"
      "  -o <type>       output type (the input type)\n"
      "  -i <iters>      timed iterations per figure (device 10, host 5)\n"
      "  -w <iters>      warmup iterations per figure (device 3, host 1)\n"
      "  -J <file>       also write the results as JSON\n");
  std::exit(2);
}

struct Options {
  bool device = false;
  std::vector<tsrFusedOp_t> ops{tsrFusedGemmReduceScatter};
  std::vector<int> ranks;
  std::vector<uint64_t> ms, ns, ks;
  tsrDataType_t in = tsrNumTypes, out = tsrNumTypes;
  int iters = -1, warmup = -1;
  std::string json;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t at = s.find(sep, pos);
    out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) return out;
    pos = at + 1;
  }
}

uint64_t parseCount(const std::string& s, const char* what) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v == 0) usage((std::string(what) + ": bad value " + s).c_str());
  return v;
}

// "128,256", "128:16384" (doubling) or "128:16384:4".
std::vector<uint64_t> parseSizes(const std::string& s, const char* what) {
  std::vector<uint64_t> out;
  for (const std::string& item : split(s, ',')) {
    std::vector<std::string> r = split(item, ':');
    if (r.size() == 1) {
      out.push_back(parseCount(r[0], what));
      continue;
    }
    if (r.size() > 3) usage((std::string(what) + ": a range is a:b or a:b:factor").c_str());
    uint64_t lo = parseCount(r[0], what), hi = parseCount(r[1], what);
    uint64_t f = r.size() == 3 ? parseCount(r[2], what) : 2;
    if (f < 2 || hi < lo) usage((std::string(what) + ": need a <= b and factor >= 2").c_str());
    for (uint64_t v = lo; v <= hi; v *= f) out.push_back(v);
  }
  return out;
}

tsrDataType_t parseType(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return tsrBfloat16;
  if (s == "fp16" || s == "float16" || s == "half") return tsrFloat16;
  if (s == "float" || s == "fp32" || s == "float32") return tsrFloat32;
  usage(("unknown type " + s + " (bf16, fp16, float)").c_str());
}

Options parse(int argc, char** argv) {
  Options o;
  std::string ms, ns, ks;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "-d") {
      std::string d = next();
      if (d != "host" && d != "device") usage("-d takes host or device");
      o.device = d == "device";
    } else if (a == "-O") {
      o.ops.clear();
      for (const std::string& op : split(next(), ',')) {
        if (op == "rs")
          o.ops.push_back(tsrFusedGemmReduceScatter);
        else if (op == "ag")
          o.ops.push_back(tsrFusedAllGatherGemm);
        else if (op == "ar")
          o.ops.push_back(tsrFusedGemmAllReduce);
        else
          usage(("-O: unknown op " + op + " (rs, ag, ar)").c_str());
      }
    } else if (a == "-n") {
      for (const std::string& r : split(next(), ','))
        o.ranks.push_back(static_cast<int>(parseCount(r, "-n")));
    } else if (a == "-M") {
      ms = next();
    } else if (a == "-N") {
      ns = next();
    } else if (a == "-K") {
      ks = next();
    } else if (a == "-t") {
      o.in = parseType(next());
    } else if (a == "-o") {
      o.out = parseType(next());
    } else if (a == "-i") {
      o.iters = static_cast<int>(parseCount(next(), "-i"));
    } else if (a == "-w") {
      o.warmup = std::atoi(next().c_str());
    } else if (a == "-J") {
      o.json = next();
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  const bool d = o.device;
  o.ms = parseSizes(ms.empty() ? (d ? "128:16384" : "64:512") : ms, "-M");
  o.ns = parseSizes(ns.empty() ? (d ? "8192" : "256") : ns, "-N");
  o.ks = parseSizes(ks.empty() ? (d ? "2048" : "256") : ks, "-K");
  if (o.ranks.empty()) o.ranks.push_back(d ? 4 : 2);
  if (o.in == tsrNumTypes) o.in = d ? tsrBfloat16 : tsrFloat32;
  if (o.out == tsrNumTypes) o.out = o.in;
  if (o.iters < 0) o.iters = d ? 10 : 5;
  if (o.warmup < 0) o.warmup = d ? 3 : 1;
  if (d && o.in == tsrFloat32)
    usage("-d device: -t must be bf16 or fp16 (the GPU kernels' inputs)");
  return o;
}

const char* opName(tsrFusedOp_t op) {
  return op == tsrFusedGemmReduceScatter ? "gemm_reducescatter"
         : op == tsrFusedAllGatherGemm   ? "allgather_gemm"
                                         : "gemm_allreduce";
}
const char* typeName(tsrDataType_t t) {
  return t == tsrBfloat16 ? "bf16" : t == tsrFloat16 ? "fp16" : "float";
}
double unitRoundoff(tsrDataType_t t) {
  return t == tsrFloat32 ? 0x1p-24 : t == tsrFloat16 ? 0x1p-11 : 0x1p-8;
}

struct Row {
  tsrFusedOp_t op;
  uint64_t m, n, k;
  int ranks;
  double fusedUs = 0, seqUs = 0, gemmUs = 0, collUs = 0;
  double err = 0;  // max |fused - baseline| / max |baseline|
  bool ok = false;
};

// What the rank threads of one (op, ranks, shape) share.
struct Shared {
  const Options& o;
  tsrFusedOp_t op;
  int n;
  uint64_t m, cols, k;
  std::vector<tsrComm_t> comms;
  std::barrier<> barrier;
  std::vector<Clock::time_point> starts, ends;  // per rank, one iteration
  std::vector<double> errs, mags;
  std::atomic<bool> failed{false};
  std::string why;
  std::mutex whyMutex;
  Shared(const Options& opt, tsrFusedOp_t p, int ranks)
      : o(opt),
        op(p),
        n(ranks),
        barrier(ranks),
        starts(static_cast<size_t>(ranks)),
        ends(static_cast<size_t>(ranks)),
        errs(static_cast<size_t>(ranks)),
        mags(static_cast<size_t>(ranks)) {}
  // The first failure stops every rank: the others' calls return instead of waiting.
  void fail(const std::string& w) {
    {
      std::lock_guard<std::mutex> lock(whyMutex);
      if (why.empty()) why = w;
    }
    if (!failed.exchange(true))
      for (tsrComm_t c : comms) tsrCommAbort(c);
  }
};

// One rank's part: buffers, the four figures, the check.
class RankRun {
 public:
  RankRun(Shared& s, int rank, RankBackend& be) : s_(s), rank_(rank), be_(be) {}

  void run(Row* row) {
    const Options& o = s_.o;
    const uint64_t n = static_cast<uint64_t>(s_.n), m = s_.m, cols = s_.cols, k = s_.k;
    const size_t in = dtypeBytes(o.in), out = dtypeBytes(o.out);
    const bool gather = s_.op == tsrFusedAllGatherGemm;
    const uint64_t cRows = s_.op == tsrFusedGemmReduceScatter ? m / n : m;
    // AllGather: A is the shard, G the gathered A, P unused; else P is the GEMM's partial.
    aBytes_ = (gather ? m / n : m) * k * in;
    ok(be_.alloc(&a_, aBytes_), "A");
    ok(be_.alloc(&b_, k * cols * in), "B");
    ok(be_.alloc(&g_, gather ? m * k * in : 1), "gathered A");
    ok(be_.alloc(&p_, gather ? 1 : m * cols * out), "partial");
    cBytes_ = cRows * cols * out;
    ok(be_.alloc(&cBase_, cBytes_), "C (baseline)");
    ok(be_.alloc(&cFused_, cBytes_), "C (fused)");
    ok(be_.fillRandom(a_, o.in, aBytes_ / in, 11 + static_cast<uint64_t>(rank_)), "fill A");
    ok(be_.fillRandom(b_, o.in, k * cols, 101 + static_cast<uint64_t>(rank_)), "fill B");
    if (gather) collective();  // G holds the gathered A before the GEMM alone is timed
    be_.sync();

    double fused = time([&] { fusedCall(); });
    double seq = time([&] {
      if (gather) collective();
      gemm();
      if (!gather) collective();
    });
    double g = time([&] { gemm(); });
    double c = time([&] { collective(); });
    check();
    if (rank_ == 0 && !s_.failed.load()) {
      row->fusedUs = fused;
      row->seqUs = seq;
      row->gemmUs = g;
      row->collUs = c;
      double mag = *std::max_element(s_.mags.begin(), s_.mags.end());
      double err = *std::max_element(s_.errs.begin(), s_.errs.end());
      row->err = mag > 0 ? err / mag : err;
      row->ok = row->err <= (static_cast<double>(s_.n) + 3) * unitRoundoff(o.out) + 1e-6;
    }
    for (void* p : {a_, b_, g_, p_, cBase_, cFused_}) be_.release(p);
  }

 private:
  void ok(const std::string& e, const char* what) {
    if (!e.empty()) s_.fail("rank " + std::to_string(rank_) + ": " + what + ": " + e);
  }
  void api(tsrResult_t r, const char* what) {
    if (r != tsrSuccess)
      s_.fail("rank " + std::to_string(rank_) + ": " + what + ": " + tsrGetErrorString(r) + ": " +
              tsrGetLastError(nullptr));
  }

  void fusedCall() {
    if (s_.failed.load()) return;
    const Options& o = s_.o;
    tsrComm_t comm = s_.comms[static_cast<size_t>(rank_)];
    auto stream = static_cast<tsrStream_t>(be_.stream());
    switch (s_.op) {
      case tsrFusedGemmReduceScatter:
        return api(tsrGemmReduceScatter(a_, b_, nullptr, cFused_, s_.m, s_.cols, s_.k, o.in, o.out,
                                        0, comm, stream),
                   "tsrGemmReduceScatter");
      case tsrFusedAllGatherGemm:
        return api(tsrAllGatherGemm(a_, b_, nullptr, cFused_, nullptr, s_.m, s_.cols, s_.k, o.in,
                                    o.out, 0, comm, stream),
                   "tsrAllGatherGemm");
      case tsrFusedGemmAllReduce:
        return api(tsrGemmAllReduce(a_, b_, nullptr, cFused_, s_.m, s_.cols, s_.k, o.in, o.out, 0,
                                    comm, stream),
                   "tsrGemmAllReduce");
    }
  }

  // The baseline's GEMM: the gathered A for AllGather, else this rank's A into the partial.
  void gemm() {
    if (s_.failed.load()) return;
    const bool gather = s_.op == tsrFusedAllGatherGemm;
    ok(be_.gemm(gather ? g_ : a_, b_, gather ? cBase_ : p_, s_.m, s_.cols, s_.k), "GEMM");
  }

  void collective() {
    if (s_.failed.load()) return;
    const Options& o = s_.o;
    tsrComm_t comm = s_.comms[static_cast<size_t>(rank_)];
    auto stream = static_cast<tsrStream_t>(be_.stream());
    const uint64_t n = static_cast<uint64_t>(s_.n);
    switch (s_.op) {
      case tsrFusedGemmReduceScatter:
        return api(tsrReduceScatter(p_, cBase_, s_.m / n * s_.cols, o.out, tsrSum, comm, stream),
                   "tsrReduceScatter");
      case tsrFusedAllGatherGemm:
        return api(tsrAllGather(a_, g_, s_.m / n * s_.k, o.in, comm, stream), "tsrAllGather");
      case tsrFusedGemmAllReduce:
        return api(tsrAllReduce(p_, cBase_, s_.m * s_.cols, o.out, tsrSum, comm, stream),
                   "tsrAllReduce");
    }
  }

  // Median over iterations of the time of `body` on all ranks (until their streams are idle).
  template <class F>
  double time(F&& body) {
    for (int i = 0; i < s_.o.warmup; ++i) {
      s_.barrier.arrive_and_wait();
      body();
      be_.sync();
    }
    std::vector<double> samples;
    for (int i = 0; i < s_.o.iters; ++i) {
      s_.barrier.arrive_and_wait();
      const auto r = static_cast<size_t>(rank_);
      s_.starts[r] = Clock::now();
      body();
      std::string e = be_.sync();
      if (!e.empty()) ok(e, "stream");
      s_.ends[r] = Clock::now();
      s_.barrier.arrive_and_wait();
      // From the first rank's start: a rank the OS runs late still counts its wait.
      samples.push_back(std::chrono::duration<double, std::micro>(
                            *std::max_element(s_.ends.begin(), s_.ends.end()) -
                            *std::min_element(s_.starts.begin(), s_.starts.end()))
                            .count());
      s_.barrier.arrive_and_wait();  // nobody overwrites them before all have read them
    }
    return medianOf(samples);
  }

  void check() {
    std::vector<double> base, fused;
    ok(be_.read(cBase_, s_.o.out, cBytes_ / dtypeBytes(s_.o.out), &base), "read C");
    ok(be_.read(cFused_, s_.o.out, cBytes_ / dtypeBytes(s_.o.out), &fused), "read C");
    double err = 0, mag = 0;
    for (size_t i = 0; i < base.size() && i < fused.size(); ++i) {
      err = std::max(err, std::fabs(base[i] - fused[i]));
      mag = std::max(mag, std::fabs(base[i]));
      if (std::isnan(fused[i])) err = INFINITY;
    }
    s_.errs[static_cast<size_t>(rank_)] = err;
    s_.mags[static_cast<size_t>(rank_)] = mag;
    s_.barrier.arrive_and_wait();
  }

  Shared& s_;
  int rank_;
  RankBackend& be_;
  void *a_ = nullptr, *b_ = nullptr, *g_ = nullptr, *p_ = nullptr, *cBase_ = nullptr,
       *cFused_ = nullptr;
  uint64_t aBytes_ = 0, cBytes_ = 0;
};

void printHeader(const Options& o, tsrFusedOp_t op, int n) {
  std::printf(
      "#\n# %s, %s buffers, %s -> %s, %d thread rank%s, medians of %d iterations after %d "
      "warmups\n",
      opName(op), o.device ? "device (GPU 0, cuBLAS baseline)" : "host", typeName(o.in),
      typeName(o.out), n, n == 1 ? "" : "s", o.iters, o.warmup);
  std::printf("# %7s %7s %7s %5s %11s %11s %11s %11s %8s %8s %8s %9s\n", "M", "N", "K", "ranks",
              "fused(us)", "gemm+coll", "gemm(us)", "coll(us)", "f/(g+c)", "overlap", "f/gemm",
              "err");
}

void printRow(const Row& r) {
  double ratio = r.seqUs > 0 ? r.fusedUs / r.seqUs : 0;
  double overlap = r.collUs > 0 ? 1 - (r.fusedUs - r.gemmUs) / r.collUs : 0;
  double vsGemm = r.gemmUs > 0 ? r.fusedUs / r.gemmUs : 0;
  std::printf("  %7llu %7llu %7llu %5d %11.1f %11.1f %11.1f %11.1f %8.3f %8.3f %8.3f %9.2e%s\n",
              static_cast<unsigned long long>(r.m), static_cast<unsigned long long>(r.n),
              static_cast<unsigned long long>(r.k), r.ranks, r.fusedUs, r.seqUs, r.gemmUs, r.collUs,
              ratio, overlap, vsGemm, r.err, r.ok ? "" : "  WRONG");
  std::fflush(stdout);
}

bool writeJson(const Options& o, const std::vector<Row>& rows) {
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fused_perf: cannot write %s\n", o.json.c_str());
    return false;
  }
  std::fprintf(f, "{\"tool\": \"fused_perf\", \"buffers\": %s, \"in\": %s, \"out\": %s, ",
               jsonQuoted(o.device ? "device" : "host").c_str(), jsonQuoted(typeName(o.in)).c_str(),
               jsonQuoted(typeName(o.out)).c_str());
  std::fprintf(f, "\"iters\": %d, \"warmup\": %d, \"rows\": [", o.iters, o.warmup);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    double overlap = r.collUs > 0 ? 1 - (r.fusedUs - r.gemmUs) / r.collUs : NAN;
    std::fprintf(
        f,
        "%s\n  {\"op\": %s, \"M\": %llu, \"N\": %llu, \"K\": %llu, \"ranks\": %d, "
        "\"fused_us\": %s, \"gemm_coll_us\": %s, \"gemm_us\": %s, \"coll_us\": %s, "
        "\"fused_over_gemm_coll\": %s, \"overlap_efficiency\": %s, \"err\": %s, "
        "\"ok\": %s}",
        i ? "," : "", jsonQuoted(opName(r.op)).c_str(), static_cast<unsigned long long>(r.m),
        static_cast<unsigned long long>(r.n), static_cast<unsigned long long>(r.k), r.ranks,
        jsonNumber(r.fusedUs, 6).c_str(), jsonNumber(r.seqUs, 6).c_str(),
        jsonNumber(r.gemmUs, 6).c_str(), jsonNumber(r.collUs, 6).c_str(),
        jsonNumber(r.seqUs > 0 ? r.fusedUs / r.seqUs : NAN, 4).c_str(),
        jsonNumber(overlap, 4).c_str(), jsonNumber(r.err, 3).c_str(), r.ok ? "true" : "false");
  }
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

// Every shape of the sweep for one op and rank count, on fresh communicators. Returns false when
// a call failed (the communicators are then aborted).
bool runRanks(const Options& o, tsrFusedOp_t op, int n, std::vector<Row>* rows) {
  std::vector<std::unique_ptr<RankBackend>> backends;
  for (int r = 0; r < n; ++r) {
    std::unique_ptr<RankBackend> be;
    std::string e = makeBackend(o.device, o.in, o.out, &be);
    if (!e.empty()) {
      std::printf("# ERROR: rank %d: %s\n", r, e.c_str());
      return false;
    }
    backends.push_back(std::move(be));
  }
  std::vector<tsrComm_t> comms(static_cast<size_t>(n), nullptr);
  std::vector<int> devs(static_cast<size_t>(n), o.device ? 0 : TSR_DEVICE_HOST);
  if (tsrCommInitAll(comms.data(), n, devs.data()) != tsrSuccess) {
    std::printf("# ERROR: tsrCommInitAll: %s\n", tsrGetLastError(nullptr));
    return false;
  }
  printHeader(o, op, n);
  bool good = true;
  for (uint64_t m : o.ms)
    for (uint64_t cols : o.ns)
      for (uint64_t k : o.ks) {
        if (!good) break;
        if (m % static_cast<uint64_t>(n) != 0) {
          std::printf("# M=%llu skipped: not a multiple of %d ranks\n",
                      static_cast<unsigned long long>(m), n);
          continue;
        }
        Shared s(o, op, n);
        s.m = m;
        s.cols = cols;
        s.k = k;
        s.comms = comms;
        Row row{op, m, cols, k, n};
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r)
          threads.emplace_back([&, r] {
            ScopedDevice dev(o.device);
            RankRun(s, r, *backends[static_cast<size_t>(r)]).run(&row);
          });
        for (std::thread& t : threads) t.join();
        if (s.failed.load()) {
          std::printf("# ERROR: M=%llu N=%llu K=%llu: %s\n", static_cast<unsigned long long>(m),
                      static_cast<unsigned long long>(cols), static_cast<unsigned long long>(k),
                      s.why.c_str());
          good = false;  // the communicators are aborted
          break;
        }
        printRow(row);
        rows->push_back(row);
      }
  // Aborted handles are gone already; destroying them again only returns an error.
  for (tsrComm_t c : comms)
    if (good) tsrCommDestroy(c);
  return good;
}

int runAll(const Options& o) {
  std::string whyNot;
  if (o.device && !deviceUsable(&whyNot)) {
    std::printf("# fused_perf: -d device skipped: %s\n", whyNot.c_str());
    return 0;
  }
  std::vector<Row> rows;
  bool good = true;
  for (tsrFusedOp_t op : o.ops)
    for (int n : o.ranks)
      if (good) good = runRanks(o, op, n, &rows);
  size_t wrong = 0;
  for (const Row& r : rows) wrong += r.ok ? 0 : 1;
  if (!o.json.empty() && !writeJson(o, rows)) good = false;
  if (good && wrong == 0)
    std::printf("# fused_perf: %zu shapes, every fused result agrees with GEMM + collective\n",
                rows.size());
  else if (wrong > 0)
    std::printf("# fused_perf: %zu of %zu shapes WRONG (err above (n + 3) units of roundoff)\n",
                wrong, rows.size());
  return good && wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) { return tessera::perf::runAll(tessera::perf::parse(argc, argv)); }
