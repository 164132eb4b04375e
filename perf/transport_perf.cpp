// transport_perf: one-sided put bandwidth and signal round-trip latency of each transport between
// two ranks (inproc: threads; shm, ucx: forked processes), printed like nccl-tests, side by side
// with a reference measured in the same run: a plain memcpy of the same bytes to the same
// destination pages, interleaved with the puts (inproc, shm), and ucx_perftest's ucp_put_bw with
// the same UCX_TLS and puts in flight (ucx).
//
//   transport_perf [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-t inproc,shm,ucx]
//                  [-u tcp|sm] [-N puts] [-L max latency bytes] [-B bytes per size] [-P]
//                  [-p port] [-O perftest outstanding] [-T timeout s] [-J file.json]
//
// Bandwidth: per iteration rank 0 issues N puts of `size` bytes back to back from its registered
// memory into rank 1's and flushes (timed), then signals; rank 1 waits for the signal and
// acknowledges (untimed). algbw = N * size / median iteration time.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "perf_util.hpp"
#include "transport/transport.hpp"
#include "transport_perf_baselines.hpp"
#include "transport_perf_report.hpp"

namespace tessera::perf {
namespace {

[[noreturn]] void usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "transport_perf: %s\n", why);
  std::fprintf(
      stderr,
      "usage: transport_perf [options]\n"
      "  -b <bytes>   smallest size (8); K, M, G suffixes\n"
      "  -e <bytes>   largest size (256M)\n"
      "  -f <factor>  size multiplier between steps (2)\n"
      "  -n <iters>   timed iterations per size (20; fewer above -B bytes per size)\n"
      "  -w <iters>   warmup iterations per size (5)\n"
      "  -t <list>    transports, comma-separated: inproc,shm,ucx (all)\n"
      "  -u <tls>     UCX_TLS for tessera's ucx ranks and for ucx_perftest, e.g. tcp, sm, cma,tcp "
      "(tcp)\n"
      "  -N <puts>    puts per iteration (0: 4 MiB / size, between 1 and 1024)\n"
      "  -L <bytes>   largest size of the latency ping-pong (1M; 0: bare signal only)\n"
      "  -B <bytes>   bytes moved per size and table before iterations are capped (512M)\n"
      "  -P           put and signal through a port channel (the proxy thread)\n"
      "  -p <port>    first TCP port for ucx_perftest (one per size; default from the pid)\n"
      "  -O <n>       ucx_perftest -O: at most n puts in flight (default -1: as many as tessera\n"
      "               has per iteration at that size; 0: ucx_perftest's default, no limit)\n"
      "  -T <seconds> timeout of every transport wait (60)\n"
      "  -J <file>    also write the results as JSON\n");
  std::exit(2);
}

uint64_t parseBytes(const char* text) {
  uint64_t v = 0;
  if (!parseByteSize(text, &v)) usage("bad size (a number with an optional K, M or G)");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  o.basePort = 20000 + static_cast<int>(getpid() % 20000);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "-b")
      o.minBytes = parseBytes(next());
    else if (a == "-e")
      o.maxBytes = parseBytes(next());
    else if (a == "-f")
      o.factor = std::atof(next());
    else if (a == "-n")
      o.iters = std::atoi(next());
    else if (a == "-w")
      o.warmup = std::atoi(next());
    else if (a == "-t")
      o.transports = next();
    else if (a == "-u")
      o.ucxTls = next();
    else if (a == "-N")
      o.puts = std::atoi(next());
    else if (a == "-L")
      o.latencyMax = parseBytes(next());
    else if (a == "-B")
      o.budgetBytes = parseBytes(next());
    else if (a == "-P")
      o.viaProxy = true;
    else if (a == "-p")
      o.basePort = std::atoi(next());
    else if (a == "-O")
      o.perftestOutstanding = std::atoi(next());
    else if (a == "-T")
      o.timeoutSeconds = std::atof(next());
    else if (a == "-J")
      o.jsonPath = next();
    else if (a == "-h" || a == "--help")
      usage(nullptr);
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.minBytes < 1 || o.maxBytes < o.minBytes) usage("need 1 <= -b <= -e");
  if (!(o.factor > 1)) usage("-f must be greater than 1");
  if (o.iters < 1 || o.warmup < 0 || o.puts < 0) usage("-n must be >= 1, -w and -N >= 0");
  if (o.ucxTls.empty()) usage("-u takes a UCX_TLS value, e.g. tcp or sm");
  if (o.budgetBytes < 1) usage("-B must be at least 1 byte");
  return o;
}

// Both ranks and the baselines use the same steps: many puts per iteration for small sizes
// (so the signal round trip does not hide the puts), few iterations for large ones (so the whole
// run takes minutes on two cores).
RankPlan makePlan(const Options& o) {
  RankPlan plan;
  plan.viaProxy = o.viaProxy;
  plan.timeoutSeconds = o.timeoutSeconds;
  auto capped = [&](uint64_t perIter, uint32_t want, uint32_t least) {
    uint64_t fit = o.budgetBytes / std::max<uint64_t>(perIter, 1);
    return static_cast<uint32_t>(std::max<uint64_t>(least, std::min<uint64_t>(want, fit)));
  };
  uint64_t last = 0;
  for (double s = static_cast<double>(o.minBytes); s <= static_cast<double>(o.maxBytes) * 1.0000001;
       s *= o.factor) {
    auto bytes = static_cast<uint64_t>(std::llround(s));
    if (bytes == last) continue;
    last = bytes;
    SizeStep st;
    st.bytes = bytes;
    st.puts = o.puts > 0 ? static_cast<uint32_t>(o.puts)
                         : static_cast<uint32_t>(std::clamp<uint64_t>((4u << 20) / bytes, 1, 1024));
    uint64_t perIter = st.puts * bytes;
    st.iters = capped(perIter, static_cast<uint32_t>(o.iters), 3);
    st.warmup = std::min<uint32_t>(static_cast<uint32_t>(o.warmup), capped(4 * perIter, 1000, 1));
    plan.bandwidth.push_back(st);
    if (bytes <= o.latencyMax) {
      SizeStep l;
      l.bytes = bytes;
      l.iters = capped(2 * bytes, static_cast<uint32_t>(std::max(o.iters, 100)), 3);
      l.warmup = std::min<uint32_t>(static_cast<uint32_t>(std::max(o.warmup, 10)),
                                    capped(8 * bytes, 1000, 1));
      plan.latency.push_back(l);
    }
  }
  SizeStep bare;  // the bare signal round trip comes first
  bare.iters = static_cast<uint32_t>(std::max(o.iters, 100));
  bare.warmup = static_cast<uint32_t>(std::max(o.warmup, 10));
  plan.latency.insert(plan.latency.begin(), bare);
  return plan;
}

std::vector<TransportKind> parseTransports(const std::string& list) {
  std::vector<TransportKind> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string name =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    TransportKind k;
    if (!name.empty()) {
      if (!parseTransportKind(name, &k) || k == TransportKind::kCudaIpc || k == TransportKind::kP2p)
        usage(("-t: transport_perf measures inproc, shm and ucx, not '" + name + "'").c_str());
      out.push_back(k);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) usage("-t names no transport");
  return out;
}

int runAll(const Options& o) {
  // tessera's ucx ranks and ucx_perftest both read UCX_TLS; -u sets it for the whole run.
  setenv("UCX_TLS", o.ucxTls.c_str(), 1);
  RankPlan plan = makePlan(o);
  std::vector<TransportKind> kinds = parseTransports(o.transports);
  printHeader(o, plan);
  std::vector<TransportResult> results;
  int rc = 0;
  for (TransportKind k : kinds) {
    TransportResult r;
    r.run.kind = k;
    std::string whyNot;
    if (!transportBuilt(k, &whyNot)) {
      r.skipped = whyNot;
    } else {
      RankPlan p = plan;
      p.memcpyReference = k != TransportKind::kUcx;
      r.run = runTransport(k, p);
      if (!r.run.error.empty()) rc = 1;
      if (k == TransportKind::kUcx) {
        PerftestOptions po;
        po.basePort = o.basePort;
        po.outstanding = o.perftestOutstanding;
        po.timeoutSeconds = std::max(120.0, o.timeoutSeconds);
        r.perftest = runUcxPerftest(plan.bandwidth, po);
      } else {
        r.memcpy = r.run.memcpy;
      }
    }
    printTransport(r);
    results.push_back(std::move(r));
  }
  if (!o.jsonPath.empty() && !writeJson(o.jsonPath, o, plan, results)) rc = 1;
  return rc;
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) { return tessera::perf::runAll(tessera::perf::parse(argc, argv)); }
