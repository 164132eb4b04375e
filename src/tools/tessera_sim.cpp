// tessera_sim: tessera's plans simulated on a machine model (collectives/sim, SimGrid).
// Exit codes: 0 ok, 1 simulation or I/O failure, 2 usage.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/engine.hpp"
#include "collectives/exec/planner.hpp"
#include "collectives/plan/plan_json.hpp"
#include "collectives/sim/calibrate.hpp"
#include "collectives/sim/simulator.hpp"
#include "core/build_config.hpp"
#include "core/log.hpp"
#include "tessera_sim_cli.hpp"

#if TESSERA_HAVE_JSON
#include <nlohmann/json.hpp>
#endif

namespace {

using namespace tessera;
using namespace tessera::sim;

using simcli::kExitFailed;
using simcli::kExitOk;
using simcli::kExitUsage;

// The usage names the device executor's defaults.
static_assert(kDeviceCtas == 8 && kDeviceScratchBytes == 64u << 20, "update kUsage");
constexpr const char* kUsage =
    "usage: tessera_sim [--coll C] [--algo A | --plan FILE] [--nranks N | --nodes K]\n"
    "                   [--platform P | --machine FILE] [-b MIN] [-e MAX] [-f FACTOR]\n"
    "                   [--pipeline P] [--workers W] [--zero-copy] [--registered] [--root R]\n"
    "                   [--scratch-bytes B] [--elem-size S] [--no-verify] [--json]\n"
    "                   [--compare measured.json] [--show-machine] [--choice]\n"
    "  Simulates a collective plan on a machine model and prints nccl-tests' columns (size,\n"
    "  count, time, algbw, busbw) with the busiest resource (link or memory) per size.\n"
    "  --coll        allreduce (default), reducescatter, allgather, broadcast, reduce, alltoall\n"
    "  --algo        a generator family: ring, tree, rhd, oneshot, twoshot, pairwise, hier\n"
    "                (hier: nodes are its hosts). Without --algo, --plan, --zero-copy,\n"
    "                --workers and --pipeline on a GPU machine: what tessera runs for device\n"
    "                buffers there (the tuner's choice per size, the device executor's 8 CTAs\n"
    "                and 64 MiB scratch), the plan named per row; on a CPU machine: ring\n"
    "  --registered  the device choice for buffers in windows (tsrCommWindowRegister): the\n"
    "                tuner may pick zero-copy plans (GPU machines; not with --algo or --plan)\n"
    "  --plan        a plan file (tessera_plan generate / a hand-written plan); it is verified\n"
    "                first (tessera_plan verify says the same), up to 64 ranks\n"
    "  --platform    dgx-h100 (default), dgx-a100, hgx-a800, hgx-h200, hgx-h800\n"
    "                (8 GPUs per node), this-host (this machine's processes, calibrated at start)\n"
    "  --machine     a machine file (JSON, collectives/sim/platform.hpp) instead of a preset\n"
    "  --nranks      ranks: on a GPU preset fewer than 8 is one partial node, more is whole nodes\n"
    "  --nodes       nodes of the preset (GPU presets)\n"
    "  -b -e -f      sizes from MIN to MAX bytes, times FACTOR (default 8 B .. 256 MiB, x2);\n"
    "                K, M, G suffixes\n"
    "  --workers     workers (channels, CTAs) per rank the plan spreads over (default 1)\n"
    "  --scratch-bytes  staging memory per rank and plan (default 2M; the device choice: 64M)\n"
    "  --json        the report as JSON on standard output\n"
    "  --compare     a perf binary's -J output: adds its out-of-place time and the error per row\n"
    "  --show-machine  print the machine (JSON) and exit\n"
    "  --choice      print the device choice per size (plan, protocol, the tuner's predicted\n"
    "                time) without simulating it\n"
    "  --workload    a training or inference step instead (tessera_sim --workload --help)\n"
    "Research workflow: tessera_plan generate ... -o my.json (or write one), tessera_plan verify\n"
    "my.json, then tessera_sim --plan my.json --nodes 64 beside --algo ring and --algo hier.\n"
    "exit codes: 0 ok, 1 simulation or I/O failure, 2 usage\n";

int usage(const std::string& why) { return simcli::usage(why, kUsage); }
using simcli::failed;
using simcli::parseInt;

// "64K", "256M", "8": bytes.
bool parseSize(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno != 0 || end == s || !(v >= 0) || v > 1e15) return false;
  double mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    mult = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    mult = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0' || v * mult > 1e15) return false;
  *out = static_cast<uint64_t>(v * mult);
  return true;
}

// Measured out-of-place times per size from a perf binary's -J file.
int readMeasured(const std::string& path, std::map<uint64_t, double>* out) {
#if TESSERA_HAVE_JSON
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "tessera_sim: --compare %s: cannot open the file\n", path.c_str());
    return kExitFailed;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array()) {
    std::fprintf(stderr, "tessera_sim: --compare %s: not a perf binary's -J output (no rows)\n",
                 path.c_str());
    return kExitFailed;
  }
  for (const auto& row : doc["rows"]) {
    if (!row.is_object() || !row.contains("size") || !row["size"].is_number() ||
        !row.contains("out_of_place") || !row["out_of_place"].is_object() ||
        !row["out_of_place"].contains("time_us") || !row["out_of_place"]["time_us"].is_number())
      continue;
    (*out)[row["size"].get<uint64_t>()] = row["out_of_place"]["time_us"].get<double>();
  }
  return kExitOk;
#else
  (void)out;
  std::fprintf(stderr, "tessera_sim: --compare %s: JSON support was not built in\n", path.c_str());
  return kExitFailed;
#endif
}

std::string timeText(double us) {
  char b[32];
  std::snprintf(b, sizeof b, us >= 1e4 ? "%.0f" : us >= 100 ? "%.1f" : "%.2f", us);
  return b;
}

}  // namespace

// tessera_sim --workload (tessera_sim_workload.cpp).
int workloadMain(int argc, char** argv);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--workload") == 0) return workloadMain(argc, argv);
  SimSpec spec;
  std::string platform = "dgx-h100", machineFile, planFile, compareFile, coll = "allreduce";
  int nranks = 0, nodes = 0;
  uint64_t minBytes = 8, maxBytes = 256ull << 20;
  double factor = 2;
  bool json = false, showMachine = false, registered = false, choiceOnly = false;
  bool algoGiven = false, workersGiven = false, pipelineGiven = false, scratchGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char** v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return kExitOk;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--zero-copy") {
      spec.zeroCopy = true;
    } else if (a == "--registered") {
      registered = true;
    } else if (a == "--no-verify") {
      spec.verify = false;
    } else if (a == "--show-machine") {
      showMachine = true;
    } else if (a == "--choice") {
      choiceOnly = true;
    } else if (!value(&v)) {
      return usage(a.rfind("-", 0) == 0 ? a + " needs a value" : "unexpected argument " + a);
    } else if (a == "--coll") {
      coll = v;
    } else if (a == "--algo") {
      spec.algorithm = v;
      algoGiven = true;
    } else if (a == "--plan") {
      planFile = v;
    } else if (a == "--platform") {
      platform = v;
    } else if (a == "--machine") {
      machineFile = v;
    } else if (a == "--compare") {
      compareFile = v;
    } else if (a == "--nranks") {
      if (!parseInt(v, 1, kMaxSimRanks, &nranks))
        return usage("--nranks: expected 1.." + std::to_string(kMaxSimRanks));
    } else if (a == "--nodes") {
      if (!parseInt(v, 1, kMaxSimNodes, &nodes))
        return usage("--nodes: expected 1.." + std::to_string(kMaxSimNodes));
    } else if (a == "--pipeline") {
      if (!parseInt(v, 0, kMaxChunksPerSegment, &spec.pipeline))
        return usage("--pipeline: expected 0..4096");
      pipelineGiven = true;
    } else if (a == "--workers") {
      if (!parseInt(v, 1, kMaxWorkers, &spec.workers)) return usage("--workers: expected 1..64");
      workersGiven = true;
    } else if (a == "--root") {
      if (!parseInt(v, 0, kMaxSimRanks, &spec.root)) return usage("--root: expected a rank");
    } else if (a == "--elem-size") {
      if (!parseInt(v, 1, 8, &spec.elemSize)) return usage("--elem-size: expected 1, 2, 4 or 8");
    } else if (a == "--scratch-bytes") {
      if (!parseSize(v, &spec.scratchBytes) || spec.scratchBytes == 0)
        return usage("--scratch-bytes: expected a size");
      scratchGiven = true;
    } else if (a == "-b" || a == "--minbytes") {
      if (!parseSize(v, &minBytes)) return usage("-b: expected a size (8, 64K, 256M)");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!parseSize(v, &maxBytes)) return usage("-e: expected a size (8, 64K, 256M)");
    } else if (a == "-f" || a == "--stepfactor") {
      char* end = nullptr;
      factor = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(factor > 1) || factor > 1024)
        return usage("-f: expected a factor > 1");
    } else {
      return usage("unknown option " + a);
    }
  }
  if (collectiveParse(coll, &spec.collective) != tsrSuccess) return usage(lastErrorMessage());
  if (minBytes > maxBytes) return usage("-b is larger than -e");
  if (!planFile.empty()) {
    auto plan = std::make_shared<Plan>();
    if (readPlanFile(planFile, plan.get()) != tsrSuccess) return failed("--plan");
    spec.plan = plan;
    spec.collective = plan->collective;
    if (nranks == 0 && nodes == 0) nranks = plan->nranks;
  }

  // The machine.
  Machine m;
  if (!machineFile.empty()) {
    if (readMachineFile(machineFile, &m) != tsrSuccess) return failed("--machine");
    if (nodes > 0) m.nodes = nodes;
    if (nranks > 0 && nranks != m.nranks()) {
      if (nranks % m.ranksPerNode != 0)
        return usage("--nranks " + std::to_string(nranks) + " is not whole nodes of " +
                     std::to_string(m.ranksPerNode) + " ranks");
      m.nodes = nranks / m.ranksPerNode;
    }
    if (checkMachine(m, machineFile) != tsrSuccess) return failed("--machine");
  } else if (platform == "this-host") {
    if (nodes > 1) return usage("this-host has one node");
    if (platformPreset(platform, 1, &m) != tsrSuccess) return failed("--platform");
    Calibration c;
    if (calibrateThisHost(&c) != tsrSuccess) return failed("calibration");
    m = thisHostMachine(c, nranks > 0 ? nranks : 2);
  } else {
    if (platformPreset(platform, 1, &m) != tsrSuccess) return failed("--platform");
    if (nranks > 0 && nodes > 0 && nranks != nodes * m.ranksPerNode)
      return usage("--nranks and --nodes disagree");
    if (nodes > 0) {
      m.nodes = nodes;
    } else if (nranks > 0 && nranks < m.ranksPerNode) {
      m.ranksPerNode = nranks;  // one partial node
      m.nicsPerNode = std::min(m.nicsPerNode, nranks);
    } else if (nranks > 0) {
      if (nranks % m.ranksPerNode != 0)
        return usage("--nranks " + std::to_string(nranks) + " is not whole nodes of " +
                     std::to_string(m.ranksPerNode) + " GPUs");
      m.nodes = nranks / m.ranksPerNode;
    }
    if (checkMachine(m, platform) != tsrSuccess) return failed("--platform");
  }
  if (showMachine) {
    std::printf("%s", machineToJson(m).c_str());
    return kExitOk;
  }
  spec.machine = m;
  for (uint64_t s = minBytes;;) {
    spec.sizes.push_back(s);
    if (spec.sizes.size() > 4096) return usage("too many sizes");
    uint64_t next = static_cast<uint64_t>(std::llround(static_cast<double>(s) * factor));
    if (next <= s) next = s + 1;
    if (next > maxBytes) break;
    s = next;
  }
  std::map<uint64_t, double> measured;
  if (!compareFile.empty() && readMeasured(compareFile, &measured) != kExitOk) return kExitFailed;

  SimReport rep;
  std::vector<std::string> rowPlans;  // the device choice: each row's plan
  const bool deviceChoice = m.kind == MachineKind::kGpu && !algoGiven && planFile.empty() &&
                            !spec.zeroCopy && !workersGiven && !pipelineGiven;
  // --registered and --choice are about the device choice, which the other plan options replace.
  for (const auto& [given, what] :
       {std::pair{registered, "--registered simulates the device choice on windows"},
        std::pair{choiceOnly, "--choice prints the device choice"}})
    if (given && !deviceChoice)
      return usage(
          std::string(what) +
          ": a GPU machine, without --algo, --plan, --zero-copy, --workers and --pipeline");
  if (deviceChoice && !scratchGiven) spec.scratchBytes = kDeviceScratchBytes;
  if (choiceOnly) {
    std::vector<DeviceChoice> picks;
    if (deviceChoices(spec, registered, &picks) != tsrSuccess) return failed("--choice");
    std::printf("# tessera_sim: the device choice for %s on %s (%d nodes x %d ranks)%s\n",
                collectiveName(spec.collective), m.name.c_str(), m.nodes, m.ranksPerNode,
                registered ? ", buffers in windows" : "");
    std::printf("#%11s  %-10s %8s %8s %-9s %-8s %14s\n", "size (B)", "algorithm", "pipeline",
                "workers", "zero-copy", "protocol", "predicted (us)");
    for (size_t i = 0; i < picks.size(); ++i) {
      const DeviceChoice& c = picks[i];
      std::printf("%12llu  %-10s %8d %8d %-9s %-8s %14.1f\n",
                  static_cast<unsigned long long>(spec.sizes[i]), c.key.algorithm.c_str(),
                  c.key.pipeline, c.key.workers, c.key.zeroCopy ? "yes" : "no",
                  c.ll ? "LL" : "Simple", c.predictedUs);
    }
    return kExitOk;
  }
  if (deviceChoice) {
    if (simulateDeviceChoice(spec, registered, &rep, &rowPlans) != tsrSuccess)
      return failed("simulation");
  } else if (simulate(spec, &rep) != tsrSuccess) {
    return failed("simulation");
  }

  const bool compare = !compareFile.empty();
  std::vector<double> errors;
  if (json) {
#if TESSERA_HAVE_JSON
    nlohmann::json doc;
    doc["program"] = "tessera_sim";
    doc["plan"] = rep.plan;
    doc["collective"] = collectiveName(spec.collective);
    doc["machine"] = nlohmann::json::parse(machineToJson(m));
    doc["events"] = rep.events;
    doc["wall_seconds"] = rep.wallSeconds;
    doc["engine_seconds"] = rep.simSeconds;
    doc["rows"] = nlohmann::json::array();
    for (const SimRow& r : rep.rows) {
      nlohmann::json row = {{"size", r.bytes},
                            {"count", r.count},
                            {"iterations", r.iterations},
                            {"time_us", r.us},
                            {"algbw_gbps", r.algbw},
                            {"busbw_gbps", r.busbw},
                            {"bottleneck", r.bottleneck},
                            {"bottleneck_busy", r.bottleneckBusy}};
      if (deviceChoice) row["plan"] = rowPlans[static_cast<size_t>(&r - rep.rows.data())];
      auto it = measured.find(r.bytes);
      if (it != measured.end() && it->second > 0) {
        row["measured_us"] = it->second;
        row["error"] = (r.us - it->second) / it->second;
      }
      doc["rows"].push_back(row);
    }
    std::printf("%s\n", doc.dump(1).c_str());
    return kExitOk;
#else
    std::fprintf(stderr, "tessera_sim: --json: JSON support was not built in\n");
    return kExitFailed;
#endif
  }
  std::printf("# tessera_sim: %s on %s (%d nodes x %d ranks)\n", rep.plan.c_str(), m.name.c_str(),
              m.nodes, m.ranksPerNode);
  std::printf("# machine: %s\n", m.source.c_str());
  std::printf("# %10s  %12s  %6s  %10s  %7s  %7s  %5s  %s%s%s\n", "size", "count", "iters", "time",
              "algbw", "busbw", "busy", "bottleneck", compare ? "  measured  error" : "",
              deviceChoice ? "  plan" : "");
  std::printf("# %10s  %12s  %6s  %10s  %7s  %7s  %5s  %s%s\n", "(B)", "(elements)", "", "(us)",
              "(GB/s)", "(GB/s)", "(%)", "", compare ? "      (us)    (%)" : "");
  for (const SimRow& r : rep.rows) {
    std::printf("%12llu  %12llu  %6llu  %10s  %7.2f  %7.2f  %5.1f  %s",
                static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
                static_cast<unsigned long long>(r.iterations), timeText(r.us).c_str(), r.algbw,
                r.busbw, 100 * r.bottleneckBusy, r.bottleneck.empty() ? "-" : r.bottleneck.c_str());
    if (compare) {
      auto it = measured.find(r.bytes);
      if (it != measured.end() && it->second > 0) {
        double err = (r.us - it->second) / it->second;
        errors.push_back(std::fabs(err));
        std::printf("  %8s  %+6.1f", timeText(it->second).c_str(), 100 * err);
      } else {
        std::printf("  %8s  %6s", "N/A", "N/A");
      }
    }
    if (deviceChoice)
      std::printf("  %s", rowPlans[static_cast<size_t>(&r - rep.rows.data())].c_str());
    std::printf("\n");
  }
  if (compare && !errors.empty()) {
    std::sort(errors.begin(), errors.end());
    std::printf("# median |error| %.1f%% over %zu sizes (max %.1f%%)\n",
                100 * errors[errors.size() / 2], errors.size(), 100 * errors.back());
  }
  std::printf("# %llu events in %.2f s (engine %.2f s): %.0f events/s\n",
              static_cast<unsigned long long>(rep.events), rep.wallSeconds, rep.simSeconds,
              rep.simSeconds > 0 ? static_cast<double>(rep.events) / rep.simSeconds : 0.0);
  return kExitOk;
}
