#include "transport_perf_report.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "perf_json_text.hpp"

#if TESSERA_PERF_HAVE_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

namespace tessera::perf {
namespace {

// The targets of the issue, checked at >= 1 MiB and printed as a verdict line (not asserted:
// timing belongs to humans reading the run, never to a test).
constexpr uint64_t kTargetFrom = uint64_t{1} << 20;
constexpr double kShmTarget = 0.80;  // shm put bandwidth vs memcpy
constexpr double kUcxTarget = 0.90;  // ucx put bandwidth vs ucx_perftest

double gbps(uint64_t bytes, uint32_t puts, double us) {
  return us > 0 ? static_cast<double>(bytes) * puts / us / 1e3 : 0;
}

// One row of a bandwidth table, with its reference (refGbps < 0: none).
struct Row {
  StepTiming t;
  double gbps = 0;
  double refGbps = -1;
  std::string refError;
  double ratio() const { return refGbps > 0 ? gbps / refGbps : -1; }
};

const char* refName(const TransportResult& r) {
  return r.run.kind == TransportKind::kUcx ? "ucx_perftest" : "memcpy";
}

std::vector<Row> rowsOf(const TransportResult& r) {
  std::vector<Row> rows;
  for (size_t i = 0; i < r.run.bandwidth.size(); ++i) {
    Row row;
    row.t = r.run.bandwidth[i];
    row.gbps = gbps(row.t.bytes, row.t.puts, row.t.medianUs);
    if (i < r.memcpy.size() && r.memcpy[i].bytes == row.t.bytes)
      row.refGbps = gbps(r.memcpy[i].bytes, r.memcpy[i].puts, r.memcpy[i].medianUs);
    if (i < r.perftest.size() && r.perftest[i].bytes == row.t.bytes) {
      if (r.perftest[i].error.empty())
        row.refGbps = r.perftest[i].gbps;
      else
        row.refError = r.perftest[i].error;
    }
    rows.push_back(row);
  }
  return rows;
}

std::string hostName() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

void printHeader(const Options& o, const RankPlan& plan) {
  std::printf("# transport_perf: one-sided put bandwidth and signal round trip, 2 ranks\n");
  std::printf("#  host %s  pid %d\n", hostName().c_str(), static_cast<int>(getpid()));
  std::printf("#  transports: %s  (inproc: 2 threads; shm, ucx: 2 forked processes)\n",
              o.transports.c_str());
  std::printf(
      "#  minBytes %llu maxBytes %llu step: %g(factor)  warmup iters: %d  iters: %d  "
      "puts/iter: %s  bytes per size before capping: %llu\n",
      static_cast<unsigned long long>(o.minBytes), static_cast<unsigned long long>(o.maxBytes),
      o.factor, o.warmup, o.iters,
      o.puts > 0 ? std::to_string(o.puts).c_str() : "auto (4 MiB / size, 1..1024)",
      static_cast<unsigned long long>(o.budgetBytes));
  std::printf(
      "#  UCX_TLS=%s (tessera's ucx ranks and ucx_perftest -t ucp_put_bw -O %s)  path: %s  "
      "timeout %g s\n",
      o.ucxTls.c_str(),
      o.perftestOutstanding < 0
          ? "<count>"
          : (o.perftestOutstanding == 0 ? "unlimited"
                                        : std::to_string(o.perftestOutstanding).c_str()),
      plan.viaProxy ? "port channel (proxy thread)" : "direct Connection calls", o.timeoutSeconds);
  std::printf(
      "#  bandwidth: per iteration rank 0 puts `count` x `size` bytes back to back and flushes "
      "(timed: first put to flush done, as ucx_perftest times put_bw), then signals; rank 1 "
      "waits and acknowledges (untimed); time = median iteration (min too)\n");
  std::printf(
      "#  algbw = count * size / time.  memcpy: the same bytes by plain memcpy to the same "
      "destination pages, interleaved with the puts.  latency: ping-pong, each way put "
      "(size > 0) + flush + signal; size 0 = bare signal round trip\n");
  std::fflush(stdout);
}

void printTransport(const TransportResult& r) {
  const char* name = transportName(r.run.kind);
  std::printf("#\n");
  if (!r.skipped.empty()) {
    std::printf("# %s: skipped: %s\n", name, r.skipped.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("# %s: 2 ranks (%s)%s%s\n", name, r.run.mode.c_str(),
              r.run.error.empty() ? "" : "  FAILED: ", r.run.error.c_str());
  std::vector<Row> rows = rowsOf(r);
  if (!rows.empty()) {
    std::printf("# %12s %6s %6s %11s %11s %11s %13s %7s\n", "size", "count", "iters", "time(us)",
                "min(us)", "algbw(GB/s)", (std::string(refName(r)) + "(GB/s)").c_str(), "ratio");
    double worst = -1;
    uint64_t worstAt = 0;
    std::vector<std::string> refErrors;
    for (const Row& row : rows) {
      std::printf("  %12llu %6u %6u %11.2f %11.2f %11.3f",
                  static_cast<unsigned long long>(row.t.bytes), row.t.puts, row.t.iters,
                  row.t.medianUs, row.t.minUs, row.gbps);
      if (row.refGbps > 0)
        std::printf(" %13.3f %7.2f\n", row.refGbps, row.ratio());
      else
        std::printf(" %13s %7s\n", "n/a", "n/a");
      if (!row.refError.empty()) refErrors.push_back(row.refError);
      if (row.t.bytes >= kTargetFrom && row.refGbps > 0 && (worst < 0 || row.ratio() < worst)) {
        worst = row.ratio();
        worstAt = row.t.bytes;
      }
    }
    for (size_t i = 0; i < refErrors.size() && i < 3; ++i)
      std::printf("# %s: %s\n", refName(r), refErrors[i].c_str());
    double target = r.run.kind == TransportKind::kUcx   ? kUcxTarget
                    : r.run.kind == TransportKind::kShm ? kShmTarget
                                                        : -1;
    if (target > 0 && worst >= 0)
      std::printf("# %s / %s at >= 1 MiB: worst ratio %.2f at %llu bytes (target >= %.2f): %s\n",
                  name, refName(r), worst, static_cast<unsigned long long>(worstAt), target,
                  worst >= target ? "met" : "NOT met");
  }
  if (!r.run.latency.empty()) {
    std::printf("# %12s %6s %11s %11s\n", "size", "iters", "rtt(us)", "min(us)");
    for (const StepTiming& t : r.run.latency)
      std::printf("  %12llu %6u %11.2f %11.2f\n", static_cast<unsigned long long>(t.bytes), t.iters,
                  t.medianUs, t.minUs);
  }
  std::fflush(stdout);
}

#if TESSERA_PERF_HAVE_NLOHMANN_JSON

bool writeJson(const std::string& path, const Options& o, const RankPlan& plan,
               const std::vector<TransportResult>& results) {
  using nlohmann::json;
  json doc;
  doc["config"] = {{"host", hostName()},
                   {"ranks", 2},
                   {"min_bytes", o.minBytes},
                   {"max_bytes", o.maxBytes},
                   {"factor", o.factor},
                   {"iters", o.iters},
                   {"warmup", o.warmup},
                   {"puts_per_iter", o.puts},
                   {"budget_bytes", o.budgetBytes},
                   {"ucx_tls", o.ucxTls},
                   {"perftest_outstanding", o.perftestOutstanding},
                   {"via_proxy", plan.viaProxy},
                   {"timeout_s", o.timeoutSeconds}};
  json list = json::array();
  for (const TransportResult& r : results) {
    json t = {{"transport", transportName(r.run.kind)}, {"mode", r.run.mode}};
    if (!r.skipped.empty()) t["skipped"] = r.skipped;
    if (!r.run.error.empty()) t["error"] = r.run.error;
    json bw = json::array();
    for (const Row& row : rowsOf(r)) {
      json e = {{"bytes", row.t.bytes},        {"puts", row.t.puts},    {"iters", row.t.iters},
                {"median_us", row.t.medianUs}, {"min_us", row.t.minUs}, {"algbw_gbps", row.gbps}};
      e["reference"] = refName(r);
      if (row.refGbps > 0) {
        e["reference_gbps"] = row.refGbps;
        e["ratio"] = row.ratio();
      }
      if (!row.refError.empty()) e["reference_error"] = row.refError;
      bw.push_back(e);
    }
    t["bandwidth"] = bw;
    json lat = json::array();
    for (const StepTiming& s : r.run.latency)
      lat.push_back({{"bytes", s.bytes},
                     {"iters", s.iters},
                     {"rtt_median_us", s.medianUs},
                     {"rtt_min_us", s.minUs}});
    t["latency"] = lat;
    list.push_back(t);
  }
  doc["results"] = list;
  std::ofstream f(path);
  f << doc.dump(2) << "\n";
  if (!f) {
    std::fprintf(stderr, "transport_perf: could not write %s\n", path.c_str());
    return false;
  }
  return true;
}

#else  // no nlohmann/json at build time: the same document, written by hand

namespace {
std::string quoted(const std::string& s) { return perf::jsonQuoted(s); }
std::string num(double v) { return perf::jsonNumber(v, 17); }
}  // namespace

bool writeJson(const std::string& path, const Options& o, const RankPlan& plan,
               const std::vector<TransportResult>& results) {
  std::string d = "{\n  \"config\": {";
  d += "\"host\": " + quoted(hostName()) + ", \"ranks\": 2, \"min_bytes\": " + num(o.minBytes) +
       ", \"max_bytes\": " + num(o.maxBytes) + ", \"factor\": " + num(o.factor) +
       ", \"iters\": " + num(o.iters) + ", \"warmup\": " + num(o.warmup) +
       ", \"puts_per_iter\": " + num(o.puts) + ", \"budget_bytes\": " + num(o.budgetBytes) +
       ", \"ucx_tls\": " + quoted(o.ucxTls) +
       ", \"perftest_outstanding\": " + num(o.perftestOutstanding) +
       ", \"via_proxy\": " + (plan.viaProxy ? "true" : "false") +
       ", \"timeout_s\": " + num(o.timeoutSeconds) + "},\n  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const TransportResult& r = results[i];
    d += i ? ",\n    {" : "\n    {";
    d +=
        "\"transport\": " + quoted(transportName(r.run.kind)) + ", \"mode\": " + quoted(r.run.mode);
    if (!r.skipped.empty()) d += ", \"skipped\": " + quoted(r.skipped);
    if (!r.run.error.empty()) d += ", \"error\": " + quoted(r.run.error);
    d += ",\n     \"bandwidth\": [";
    std::vector<Row> rows = rowsOf(r);
    for (size_t k = 0; k < rows.size(); ++k) {
      const Row& row = rows[k];
      d += k ? ",\n       {" : "\n       {";
      d += "\"bytes\": " + num(row.t.bytes) + ", \"puts\": " + num(row.t.puts) +
           ", \"iters\": " + num(row.t.iters) + ", \"median_us\": " + num(row.t.medianUs) +
           ", \"min_us\": " + num(row.t.minUs) + ", \"algbw_gbps\": " + num(row.gbps) +
           ", \"reference\": " + quoted(refName(r));
      if (row.refGbps > 0)
        d += ", \"reference_gbps\": " + num(row.refGbps) + ", \"ratio\": " + num(row.ratio());
      if (!row.refError.empty()) d += ", \"reference_error\": " + quoted(row.refError);
      d += "}";
    }
    d += "],\n     \"latency\": [";
    for (size_t k = 0; k < r.run.latency.size(); ++k) {
      const StepTiming& s = r.run.latency[k];
      d += k ? ",\n       {" : "\n       {";
      d += "\"bytes\": " + num(s.bytes) + ", \"iters\": " + num(s.iters) +
           ", \"rtt_median_us\": " + num(s.medianUs) + ", \"rtt_min_us\": " + num(s.minUs) + "}";
    }
    d += "]}";
  }
  d += "\n  ]\n}\n";
  std::ofstream f(path);
  f << d;
  if (!f) {
    std::fprintf(stderr, "transport_perf: could not write %s\n", path.c_str());
    return false;
  }
  return true;
}

#endif

}  // namespace tessera::perf
