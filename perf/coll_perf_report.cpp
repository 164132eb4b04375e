#include "coll_perf_report.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "perf_json_text.hpp"

namespace tessera::perf {
namespace {

// As nccl-tests: large times lose decimals so the column keeps its width.
std::string timeText(double us) {
  char b[32];
  if (us >= 1e4)
    std::snprintf(b, sizeof b, "%7.0f", us);
  else if (us >= 100)
    std::snprintf(b, sizeof b, "%7.1f", us);
  else
    std::snprintf(b, sizeof b, "%7.2f", us);
  return b;
}

// `text` centred in `width` columns.
std::string centred(const std::string& text, size_t width) {
  if (text.size() >= width) return text;
  size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text + std::string(width - text.size() - left, ' ');
}

// Widths of the row's parts, so the group labels sit over their columns.
constexpr size_t kVariantWidth = 2 + 7 + 2 + 6 + 2 + 6 + 2 + 6;
constexpr size_t kMpiWidth = 2 + 12 + 2 + 10 + 2 + 6;

void printVariant(const VariantResult& v) {
  if (!v.ran) {
    std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  char wrong[32];
  if (v.wrong < 0)
    std::snprintf(wrong, sizeof wrong, "N/A");
  else
    std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(v.wrong));
  std::printf("  %7s  %6.2f  %6.2f  %6s", timeText(v.timeUs).c_str(), v.algbw, v.busbw, wrong);
}

std::string quoted(const std::string& s) { return jsonQuoted(s); }

std::string num(double v) { return jsonNumber(v, 10); }

std::string variantJson(const VariantResult& v) {
  if (!v.ran) return "null";
  return "{\"time_us\": " + num(v.timeUs) + ", \"algbw_gbps\": " + num(v.algbw) +
         ", \"busbw_gbps\": " + num(v.busbw) +
         ", \"wrong\": " + (v.wrong < 0 ? std::string("null") : std::to_string(v.wrong)) + "}";
}

}  // namespace

void printHeader(const Options& o, const RunInfo& info) {
  std::printf("# Collective test starting: %s\n", info.program.c_str());
  bool factor = o.stepFactor > 1;
  std::printf(
      "# nThread %d nGpus 1 minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      info.threads, static_cast<unsigned long long>(o.minBytes),
      static_cast<unsigned long long>(o.maxBytes),
      factor ? static_cast<unsigned long long>(o.stepFactor)
             : static_cast<unsigned long long>(o.stepBytes),
      factor ? "factor" : "bytes", o.warmup, o.iters, o.check ? 1 : 0);
  std::printf("#\n");
  for (const std::string& n : info.notes) std::printf("# tessera: %s\n", n.c_str());
  std::printf("#\n# Using devices\n");
  for (const std::string& l : info.rankLines) std::printf("%s\n", l.c_str());
  std::printf("#\n");
  std::fflush(stdout);
}

namespace {
const char* gBaseline = "mpi";
}  // namespace

void setBaselineName(const char* name) { gBaseline = name; }

void printTableHeader(bool baseline) {
  std::printf("# %10s  %12s  %8s  %9s  %6s%s%s", "", "", "", "", "",
              centred("out-of-place", kVariantWidth).c_str(),
              centred("in-place", kVariantWidth).c_str());
  if (baseline)
    std::printf("%s", centred(std::string(gBaseline) + ", beside out-of-place", kMpiWidth).c_str());
  std::printf("\n# %10s  %12s  %8s  %9s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong");
  if (baseline)
    std::printf("  %12s  %10s  %6s", (std::string(gBaseline) + " time(us)").c_str(),
                std::strcmp(gBaseline, "mpi") == 0 ? "mpi busbw" : "memcpy bw", "ratio");
  std::printf("\n# %10s  %12s  %8s  %9s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  if (baseline) std::printf("  %12s  %10s  %6s", "", "(GB/s)", "");
  std::printf("\n");
  std::fflush(stdout);
}

void printRow(const Row& row, bool baseline) {
  std::printf("%12llu  %12zu  %8s  %9s  %6d", static_cast<unsigned long long>(row.size), row.count,
              typeName(row.type), row.redop, row.root);
  printVariant(row.outOfPlace);
  printVariant(row.inPlace);
  if (baseline) {
    if (row.mpiRan)
      std::printf("  %12s  %10.2f  %6.2f", timeText(row.mpiTimeUs).c_str(), row.mpiBusbw,
                  row.ratio());
    else
      std::printf("  %12s  %10s  %6s", "N/A", "N/A", "N/A");
  }
  std::printf("\n");
  std::fflush(stdout);
}

void printSummary(int64_t wrong, double avgBusbw) {
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
              wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g \n", avgBusbw);
  std::printf("#\n");
  std::fflush(stdout);
}

void printNote(const std::string& text) {
  std::printf("# %s\n", text.c_str());
  std::fflush(stdout);
}

std::string writeJson(const std::string& path, const Options& o, const RunInfo& info,
                      const std::vector<Row>& rows, int64_t wrong, double avgBusbw) {
  std::string d =
      "{\n  \"program\": " + quoted(info.program) +
      ",\n  \"config\": {\"nranks\": " + std::to_string(info.nranks) +
      ", \"processes\": " + std::to_string(info.nprocs) +
      ", \"threads\": " + std::to_string(info.threads) +
      ", \"min_bytes\": " + num(static_cast<double>(o.minBytes)) +
      ", \"max_bytes\": " + num(static_cast<double>(o.maxBytes)) +
      ", \"step_factor\": " + num(o.stepFactor) +
      ", \"step_bytes\": " + num(static_cast<double>(o.stepBytes)) +
      ", \"iters\": " + std::to_string(o.iters) + ", \"warmup\": " + std::to_string(o.warmup) +
      ", \"check\": " + (o.check ? "true" : "false") +
      ", \"average\": " + std::to_string(static_cast<int>(o.average)) +
      ", \"memory\": " + quoted(o.device ? "device" : "host") +
      ", \"registered\": " + (o.registerBuffers ? "true" : "false") +
      ", \"algo\": " + quoted(o.algo) + ", \"plan\": " + quoted(o.planPath) + ", \"baseline\": " +
      quoted(o.mpiBaseline      ? "mpi"
             : o.memcpyBaseline ? "memcpy"
                                : "") +
      "},\n  \"notes\": [";
  for (size_t i = 0; i < info.notes.size(); ++i) d += (i ? ", " : "") + quoted(info.notes[i]);
  d += "],\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    d += i ? ",\n    {" : "\n    {";
    d += "\"size\": " + num(static_cast<double>(r.size)) +
         ", \"count\": " + num(static_cast<double>(r.count)) +
         ", \"type\": " + quoted(typeName(r.type)) + ", \"redop\": " + quoted(r.redop) +
         ", \"root\": " + std::to_string(r.root) +
         ", \"out_of_place\": " + variantJson(r.outOfPlace) +
         ", \"in_place\": " + variantJson(r.inPlace);
    if (r.mpiRan)
      d += ", \"mpi\": {\"time_us\": " + num(r.mpiTimeUs) + ", \"busbw_gbps\": " + num(r.mpiBusbw) +
           ", \"ratio\": " + num(r.ratio()) + "}";
    d += "}";
  }
  d += "\n  ],\n  \"wrong\": " + std::to_string(wrong) +
       ",\n  \"avg_busbw_gbps\": " + num(avgBusbw) + "\n}\n";
  std::ofstream f(path);
  f << d;
  if (!f) return "could not write " + path;
  return "";
}

}  // namespace tessera::perf
