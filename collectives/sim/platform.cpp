// Machine presets, checks and machine files (platform.hpp).
#include "collectives/sim/platform.hpp"

#include <cmath>

#include "core/build_config.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"

#if TESSERA_HAVE_JSON
#include <nlohmann/json.hpp>
#endif

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Link latencies are not on any datasheet: the values below are assumptions, said as such in
// each preset's source, and the closing figures of issue 17 say which were calibrated.
constexpr double kNvlinkLatencyUs = 0.5;  // one GPU's link into NVSwitch (a route crosses two)
constexpr double kNicLatencyUs = 1.0;     // one NIC's link into the fabric (a route crosses two)
constexpr double kFabricLatencyUs = 0.5;  // the fabric's switches, once per route
// The share of NVLink's line rate that data gets, calibrated on one published figure only:
// NCCL's ring all-reduce busbw on 8 H100 at >= 256 MiB, 365-370 GB/s (NVIDIA/nccl issue 1455,
// nccl-tests issue 212), against tessera_sim's zero-copy ring on dgx-h100 at 450 GB/s (438.25).
// Every other NVLink4 figure (H100, H800, H200) is a prediction with this value.
constexpr double kNvlinkEfficiency = 0.8386;
// The same share for the A100's NVLink3 (12 links of 25 GB/s per direction; the A800 keeps 8 of
// them), calibrated on one published table: NCCL's ring all-reduce busbw on one node of 8 A100
// SXM4 at 1 GiB, 230.1 GB/s (Oracle's OCI GPU-cluster tutorial, BM.GPU4.8, all_reduce_perf -g 8;
// Meta's gcm health-check sample on 8 A100 80GB, NCCL 2.16.2: 231.7; MSCCL++'s NDmv4 page, NCCL
// 2.17.1, in place: 231.5; NCCL's maintainers: "~230GB/s", nccl-tests issue 149), against
// tessera_sim's zero-copy ring with 8 workers on dgx-a100. H100's value gave 250.6 there (+8.9%):
// NVLink3 delivers a smaller share of its line rate than NVLink4. The A800's all-reduce, FLUX's
// A800 collectives and every A100 training figure are predictions with it.
constexpr double kNvlink3Efficiency = 0.7697;

Machine gpuPreset(const char* name, const char* source, int nodes, double mem, double nvlink,
                  double nic, double nvlinkEfficiency = kNvlinkEfficiency) {
  Machine m;
  m.name = name;
  m.source = source;
  m.kind = MachineKind::kGpu;
  m.nodes = nodes;
  m.ranksPerNode = 8;
  m.memGBs = mem;
  m.intraGBs = nvlink;
  m.intraLatencyUs = kNvlinkLatencyUs;
  m.intraEfficiency = nvlinkEfficiency;
  m.nicsPerNode = 8;
  m.nicGBs = nic;
  m.nicLatencyUs = kNicLatencyUs;
  m.fabricLatencyUs = kFabricLatencyUs;
  return m;
}

bool finitePositive(double v) { return std::isfinite(v) && v > 0; }

// The largest cache a machine may declare: 1e15 bytes, a petabyte.
constexpr double kMaxCacheBytes = 1e15;

}  // namespace

const std::vector<std::string>& presetNames() {
  static const std::vector<std::string> kNames = {"dgx-h100", "dgx-a100", "hgx-h200",
                                                  "hgx-h800", "hgx-a800", "this-host"};
  return kNames;
}

Result platformPreset(const std::string& name, int nodes, Machine* out) {
  if (nodes < 1 || nodes > kMaxSimNodes)
    return TSR_FAIL(tsrInvalidArgument, "platform %s: %d nodes is outside 1..%d", name.c_str(),
                    nodes, kMaxSimNodes);
  if (name == "dgx-h100") {
    *out = gpuPreset(
        "dgx-h100",
        "NVIDIA DGX H100 user guide and H100 SXM5 datasheet: 8 H100 SXM5 per node, "
        "HBM3 3.35 TB/s, NVLink4 900 GB/s per GPU (450 GB/s per direction) into "
        "NVSwitch, 8 ConnectX-7 400 Gb/s (50 GB/s per direction) NICs; link "
        "latencies assumed (0.5 us per NVLink, 1 us per NIC, 0.5 us fabric); NVLink efficiency "
        "0.8386 calibrated on NCCL's 8 x H100 ring all-reduce (nccl#1455)",
        nodes, 3350, 450, 50);
  } else if (name == "dgx-a100") {
    *out = gpuPreset(
        "dgx-a100",
        "NVIDIA DGX A100 user guide and A100 SXM4 80GB datasheet: 8 A100 per node, "
        "HBM2e 2.039 TB/s, NVLink3 600 GB/s per GPU (300 GB/s per direction) into "
        "NVSwitch, 8 ConnectX-6 200 Gb/s (25 GB/s per direction) NICs; link "
        "latencies assumed (0.5 us per NVLink, 1 us per NIC, 0.5 us fabric); NVLink3 efficiency "
        "0.7697 calibrated on NCCL's 8 x A100 ring all-reduce (230.1 GB/s busbw at 1 GiB, OCI "
        "BM.GPU4.8)",
        nodes, 2039, 300, 25, kNvlink3Efficiency);
  } else if (name == "hgx-h200") {
    *out =
        gpuPreset("hgx-h200",
                  "NVIDIA H200 SXM datasheet and HGX H200 reference design: 8 H200 per node, "
                  "HBM3e 4.8 TB/s, NVLink4 900 GB/s per GPU (450 GB/s per direction) into "
                  "NVSwitch, 8 400 Gb/s (50 GB/s per direction) NICs; link latencies assumed "
                  "(0.5 us per NVLink, 1 us per NIC, 0.5 us fabric); NVLink efficiency 0.8386 as "
                  "calibrated on H100 (nccl#1455)",
                  nodes, 4800, 450, 50);
  } else if (name == "hgx-h800") {
    *out = gpuPreset("hgx-h800",
                     "NVIDIA H800 SXM5 (the H100 SXM5 with NVLink cut to 400 GB/s per GPU, 200 "
                     "GB/s per direction) in an HGX board: 8 per node, HBM3 3.35 TB/s, NVSwitch, 8 "
                     "400 Gb/s (50 GB/s per direction) NICs; link latencies assumed (0.5 us per "
                     "NVLink, 1 us per NIC, 0.5 us fabric); NVLink efficiency 0.8386 as "
                     "calibrated on H100 (nccl#1455)",
                     nodes, 3350, 200, 50);
  } else if (name == "hgx-a800") {
    *out = gpuPreset("hgx-a800",
                     "NVIDIA A800 SXM4 80GB (the A100 SXM4 80GB with NVLink cut to 400 GB/s per "
                     "GPU, 200 GB/s per direction) in an HGX board: 8 per node, HBM2e 2.039 TB/s, "
                     "NVSwitch, 8 200 Gb/s (25 GB/s per direction) NICs; link latencies assumed "
                     "(0.5 us per NVLink, 1 us per NIC, 0.5 us fabric); NVLink3 efficiency "
                     "0.7697 as calibrated on 8 x A100 (230.1 GB/s ring all-reduce busbw)",
                     nodes, 2039, 200, 25, kNvlink3Efficiency);
  } else if (name == "this-host") {
    if (nodes != 1)
      return TSR_FAIL(tsrInvalidArgument, "platform this-host has one node, not %d", nodes);
    Machine m;
    m.name = "this-host";
    m.source = "this machine, calibrated at start (not yet calibrated)";
    m.kind = MachineKind::kCpu;
    m.nodes = 1;
    *out = m;
  } else {
    std::string names;
    for (const std::string& n : presetNames()) names += (names.empty() ? "" : ", ") + n;
    return TSR_FAIL(tsrInvalidArgument, "unknown platform \"%s\" (presets: %s, or a machine file)",
                    name.c_str(), names.c_str());
  }
  return tsrSuccess;
}

Result checkMachine(const Machine& m, const std::string& source) {
  const char* s = source.c_str();
  auto bad = [&](const char* field, double v, const char* want) {
    return TSR_FAIL(tsrInvalidArgument, "%s: %s = %g: %s", s, field, v, want);
  };
  if (m.nodes < 1 || m.nodes > kMaxSimNodes)
    return bad("nodes", m.nodes, strprintf("expected 1..%d", kMaxSimNodes).c_str());
  if (m.ranksPerNode < 1 || m.ranksPerNode > 1024)
    return bad("ranksPerNode", m.ranksPerNode, "expected 1..1024");
  if (static_cast<int64_t>(m.nodes) * m.ranksPerNode > kMaxSimRanks)
    return TSR_FAIL(tsrInvalidArgument, "%s: %d nodes of %d ranks is more than %d ranks", s,
                    m.nodes, m.ranksPerNode, kMaxSimRanks);
  if (m.kind == MachineKind::kGpu) {
    if (!finitePositive(m.memGBs)) return bad("memGBs", m.memGBs, "expected a positive number");
    if (m.ranksPerNode > 1 && !finitePositive(m.intraGBs))
      return bad("intraGBs", m.intraGBs, "expected a positive number");
  } else {
    if (m.cores < 1 || m.cores > 4096) return bad("cores", m.cores, "expected 1..4096");
    if (!finitePositive(m.copyGBs)) return bad("copyGBs", m.copyGBs, "expected a positive number");
    if (!finitePositive(m.reduceGBs))
      return bad("reduceGBs", m.reduceGBs, "expected a positive number");
  }
  if (!(m.intraEfficiency > 0 && m.intraEfficiency <= 1))
    return bad("intraEfficiency", m.intraEfficiency, "expected a fraction in (0, 1]");
  if (m.kind == MachineKind::kCpu && m.cacheBytes > 0 &&
      !(finitePositive(m.cacheCopyGBs) && finitePositive(m.cacheReduceGBs)))
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: cacheBytes is set, so cacheCopyGBs and cacheReduceGBs must be positive",
                    s);
  if (m.nodes > 1) {
    if (m.nicsPerNode < 1 || m.nicsPerNode > m.ranksPerNode)
      return bad("nicsPerNode", m.nicsPerNode, "expected 1..ranksPerNode");
    if (!finitePositive(m.nicGBs)) return bad("nicGBs", m.nicGBs, "expected a positive number");
  }
  const std::pair<const char*, double> nonNegative[] = {
      {"intraLatencyUs", m.intraLatencyUs},  {"signalUs", m.signalUs},
      {"nicLatencyUs", m.nicLatencyUs},      {"fabricLatencyUs", m.fabricLatencyUs},
      {"signalBytes", m.signalBytes},        {"workerGBs", m.workerGBs},
      {"intraEfficiency", m.intraEfficiency}};
  for (const auto& [field, v] : nonNegative)
    if (!std::isfinite(v) || v < 0 || v > 1e9) return bad(field, v, "expected a number in 0..1e9");
  // cacheBytes is a size, not a latency or a rate: the bound above (1e9) would refuse the largest
  // last-level caches (over 1 GB), so it has its own, far beyond any cache.
  if (!std::isfinite(m.cacheBytes) || m.cacheBytes < 0 || m.cacheBytes > kMaxCacheBytes)
    return bad("cacheBytes", m.cacheBytes, "expected a number of bytes in 0..1e15");
  const std::pair<const char*, double> rates[] = {{"memGBs", m.memGBs},
                                                  {"intraGBs", m.intraGBs},
                                                  {"copyGBs", m.copyGBs},
                                                  {"reduceGBs", m.reduceGBs},
                                                  {"nicGBs", m.nicGBs},
                                                  {"cacheCopyGBs", m.cacheCopyGBs},
                                                  {"cacheReduceGBs", m.cacheReduceGBs}};
  for (const auto& [field, v] : rates)
    if (!std::isfinite(v) || v < 0 || v > 1e7) return bad(field, v, "expected 0..1e7 GB/s");
  return tsrSuccess;
}

#if TESSERA_HAVE_JSON
namespace {
using nlohmann::json;

Result readNumber(const json& doc, const char* field, const std::string& source, double* out) {
  auto it = doc.find(field);
  if (it == doc.end()) return tsrSuccess;
  if (!it->is_number())
    return TSR_FAIL(tsrInvalidArgument, "%s: %s: expected a number, found %s", source.c_str(),
                    field, it->dump().substr(0, 40).c_str());
  *out = it->get<double>();
  return tsrSuccess;
}

Result readInt(const json& doc, const char* field, const std::string& source, int* out) {
  auto it = doc.find(field);
  if (it == doc.end()) return tsrSuccess;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxSimRanks)
    return TSR_FAIL(tsrInvalidArgument, "%s: %s: expected an integer in 0..%d, found %s",
                    source.c_str(), field, kMaxSimRanks, it->dump().substr(0, 40).c_str());
  *out = static_cast<int>(it->get<int64_t>());
  return tsrSuccess;
}

Result readString(const json& doc, const char* field, const std::string& source, std::string* out) {
  auto it = doc.find(field);
  if (it == doc.end()) return tsrSuccess;
  if (!it->is_string() || it->get<std::string>().size() > 4096)
    return TSR_FAIL(tsrInvalidArgument, "%s: %s: expected a string of at most 4096 bytes",
                    source.c_str(), field);
  *out = it->get<std::string>();
  return tsrSuccess;
}
}  // namespace

Result machineFromJson(const std::string& text, const std::string& source, Machine* out) {
  const char* s = source.c_str();
  if (text.size() > (1u << 20))
    return TSR_FAIL(tsrInvalidArgument, "%s: %zu bytes is larger than a machine file may be", s,
                    text.size());
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return TSR_FAIL(tsrInvalidArgument, "%s: not valid JSON", s);
  if (!doc.is_object()) return TSR_FAIL(tsrInvalidArgument, "%s: expected a JSON object", s);
  static const char* const kFields[] = {
      "format",       "version",         "name",           "source",
      "kind",         "nodes",           "ranksPerNode",   "memGBs",
      "intraGBs",     "intraLatencyUs",  "cores",          "copyGBs",
      "reduceGBs",    "signalUs",        "nicsPerNode",    "nicGBs",
      "nicLatencyUs", "fabricLatencyUs", "signalBytes",    "workerGBs",
      "cacheBytes",   "cacheCopyGBs",    "cacheReduceGBs", "intraEfficiency"};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool known = false;
    for (const char* f : kFields) known = known || it.key() == f;
    if (!known)
      return TSR_FAIL(tsrInvalidArgument, "%s: unknown field \"%s\"", s,
                      it.key().substr(0, 64).c_str());
  }
  std::string format;
  TSR_CHECK(readString(doc, "format", source, &format));
  if (format != "tessera-machine")
    return TSR_FAIL(tsrInvalidArgument, "%s: format: expected \"tessera-machine\"", s);
  int version = 0;
  TSR_CHECK(readInt(doc, "version", source, &version));
  if (version != 1) return TSR_FAIL(tsrInvalidArgument, "%s: version: expected 1", s);
  Machine m;
  m.name = source;
  m.source = source;
  std::string kind = "gpu";
  TSR_CHECK(readString(doc, "name", source, &m.name));
  TSR_CHECK(readString(doc, "source", source, &m.source));
  TSR_CHECK(readString(doc, "kind", source, &kind));
  if (kind == "gpu") {
    m.kind = MachineKind::kGpu;
  } else if (kind == "cpu") {
    m.kind = MachineKind::kCpu;
  } else {
    return TSR_FAIL(tsrInvalidArgument, "%s: kind: expected \"gpu\" or \"cpu\"", s);
  }
  TSR_CHECK(readInt(doc, "nodes", source, &m.nodes));
  TSR_CHECK(readInt(doc, "ranksPerNode", source, &m.ranksPerNode));
  TSR_CHECK(readInt(doc, "cores", source, &m.cores));
  TSR_CHECK(readInt(doc, "nicsPerNode", source, &m.nicsPerNode));
  const std::pair<const char*, double*> numbers[] = {{"memGBs", &m.memGBs},
                                                     {"intraGBs", &m.intraGBs},
                                                     {"intraLatencyUs", &m.intraLatencyUs},
                                                     {"copyGBs", &m.copyGBs},
                                                     {"reduceGBs", &m.reduceGBs},
                                                     {"signalUs", &m.signalUs},
                                                     {"nicGBs", &m.nicGBs},
                                                     {"nicLatencyUs", &m.nicLatencyUs},
                                                     {"fabricLatencyUs", &m.fabricLatencyUs},
                                                     {"signalBytes", &m.signalBytes},
                                                     {"workerGBs", &m.workerGBs},
                                                     {"cacheBytes", &m.cacheBytes},
                                                     {"cacheCopyGBs", &m.cacheCopyGBs},
                                                     {"cacheReduceGBs", &m.cacheReduceGBs},
                                                     {"intraEfficiency", &m.intraEfficiency}};
  for (const auto& [field, v] : numbers) TSR_CHECK(readNumber(doc, field, source, v));
  TSR_CHECK(checkMachine(m, source));
  *out = std::move(m);
  return tsrSuccess;
}

std::string machineToJson(const Machine& m) {
  json doc = {{"format", "tessera-machine"},
              {"version", 1},
              {"name", m.name},
              {"source", m.source},
              {"kind", m.kind == MachineKind::kGpu ? "gpu" : "cpu"},
              {"nodes", m.nodes},
              {"ranksPerNode", m.ranksPerNode},
              {"nicsPerNode", m.nicsPerNode},
              {"nicGBs", m.nicGBs},
              {"nicLatencyUs", m.nicLatencyUs},
              {"fabricLatencyUs", m.fabricLatencyUs},
              {"signalBytes", m.signalBytes},
              {"workerGBs", m.workerGBs}};
  if (m.kind == MachineKind::kGpu) {
    doc["memGBs"] = m.memGBs;
    doc["intraGBs"] = m.intraGBs;
    doc["intraLatencyUs"] = m.intraLatencyUs;
    doc["intraEfficiency"] = m.intraEfficiency;
  } else {
    doc["cores"] = m.cores;
    doc["copyGBs"] = m.copyGBs;
    doc["reduceGBs"] = m.reduceGBs;
    doc["signalUs"] = m.signalUs;
    doc["cacheBytes"] = m.cacheBytes;
    doc["cacheCopyGBs"] = m.cacheCopyGBs;
    doc["cacheReduceGBs"] = m.cacheReduceGBs;
  }
  return doc.dump(1) + "\n";
}
#else
Result machineFromJson(const std::string&, const std::string& source, Machine*) {
  return TSR_FAIL(tsrInvalidUsage, "%s: machine files need JSON support, not built in",
                  source.c_str());
}
std::string machineToJson(const Machine& m) { return "{\"name\": \"" + m.name + "\"}\n"; }
#endif

Result readMachineFile(const std::string& path, Machine* out) {
  std::string text;
  TSR_CHECK(readTextFile(path, "the machine file", &text));
  return machineFromJson(text, path, out);
}

}  // namespace tessera::sim
