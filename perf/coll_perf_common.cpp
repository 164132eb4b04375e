// collPerfMain: options, ranks and communicators, the header, the sweep on every rank, the
// summary (coll_perf_common.hpp).
#include "coll_perf_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "coll_perf_bench.hpp"
#include "coll_perf_mpi.hpp"
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/plan_json.hpp"
#include "collectives/plan/verifier.hpp"
#include "collectives/tuner/tuner.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_MPI
#include "tessera/tessera_mpi.h"
#endif

namespace tessera::perf {
namespace {

// --plan: the file is proved correct here (so a bad file stops the run before any rank starts),
// then every rank's communicator runs it for every call (CommImpl::setCallOverride: the C API
// has no per-call plan argument). Returns "" or why the run must stop.
std::string loadPlan(Options* o, const CollHooks& h, int nranks, std::shared_ptr<const Plan>* out,
                     std::vector<std::string>* notes) {
  Collective want;
  if (collectiveParse(h.name, &want) != tsrSuccess)
    return std::string("--plan: ") + h.name + " has no plans (plans describe collectives)";
  auto plan = std::make_shared<Plan>();
  if (readPlanFile(o->planPath, plan.get()) != tsrSuccess)
    return "--plan: " + std::string(lastErrorMessage());
  if (plan->collective != want)
    return "--plan: " + o->planPath + " is a " + collectiveName(plan->collective) + " plan, not " +
           collectiveName(want);
  if (plan->nranks != nranks)
    return "--plan: " + o->planPath + " is for " + std::to_string(plan->nranks) +
           " ranks, this run has " + std::to_string(nranks);
  VerifyReport report;
  if (verifyPlan(*plan, &report) != tsrSuccess)
    return "--plan: " + o->planPath + " fails verification: " + report.message;
  if (plan->zeroCopy && !o->registerBuffers)
    return "--plan: " + o->planPath + " is a zero-copy plan: it needs registered buffers (-R 1)";
  if (h.rooted && o->root != plan->root) {
    notes->push_back("--plan: root " + std::to_string(plan->root) + " from the plan (not -r)");
    o->root = plan->root;
  }
  notes->push_back("--plan " + o->planPath + ": verified ('" + plan->name + "', algorithm '" +
                   plan->algorithm + "', " + std::to_string(plan->nranks) +
                   " ranks); every call runs this plan");
  *out = std::move(plan);
  return "";
}

std::string applyAlgorithm(Options* o, const CollHooks& h, int nranks,
                           std::shared_ptr<const Plan>* plan, std::vector<std::string>* notes) {
  if (!o->planPath.empty()) return loadPlan(o, h, nranks, plan, notes);
  if (!o->algo.empty()) {
    AlgoFilter filter;
    if (parseAlgoFilter(o->algo, &filter) != tsrSuccess)
      return "-A " + o->algo + ": " + lastErrorMessage();
    setenv("TESSERA_ALGO", o->algo.c_str(), 1);
    notes->push_back("algorithm: -A " + o->algo + " (TESSERA_ALGO=" + o->algo + " for this run)");
  } else if (const char* e = std::getenv("TESSERA_ALGO"); e != nullptr && *e != '\0') {
    notes->push_back(std::string("algorithm: TESSERA_ALGO=") + e + " (from the environment)");
  } else {
    notes->push_back(
        "algorithm: the tuner's choice per call (TESSERA_DEBUG_SUBSYS=TUNING logs it)");
  }
  return "";
}

// Makes rank `thread`'s communicator where the main thread did not (processes x threads).
void makeComm(Shared& s, int thread, const tsrUniqueId& id, std::string* why) {
  tsrComm_t& comm = s.comms[static_cast<size_t>(thread)];
  int dev = s.devices[static_cast<size_t>(thread)];
  if (dev >= 0) {
    *why = cudaSelect(dev);
    if (!why->empty()) return;
  }
  if (comm != nullptr || s.world.nprocs == 1) return;  // made by the main thread, or it failed
  tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
  cfg.device = dev >= 0 ? dev : TSR_DEVICE_HOST;
#if TESSERA_HAVE_MPI
  if (s.world.threads == 1) {
    if (tsrCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != tsrSuccess)
      *why = std::string("tsrCommInitMpi: ") + tsrGetLastError(nullptr);
    return;
  }
#endif
  int rank = s.world.proc * s.world.threads + thread;
  if (tsrCommInitRankConfig(&comm, s.world.nranks(), id, rank, &cfg) != tsrSuccess)
    *why = std::string("tsrCommInitRank: ") + tsrGetLastError(nullptr);
}

std::string overridePlan(tsrComm_t comm, const std::shared_ptr<const Plan>& plan) {
  std::shared_ptr<Communicator> c;
  if (handleLookup(comm, "--plan", &c) != tsrSuccess) return lastErrorMessage();
  tessera::commImpl(*c)->setCallOverride("", plan);
  return "";
}

void rankThread(Shared& s, int thread, const tsrUniqueId& id, const std::string& initError) {
  std::string why = initError;
  if (why.empty()) makeComm(s, thread, id, &why);
  if (why.empty() && s.comms[static_cast<size_t>(thread)] == nullptr) why = "no communicator";
  // On this thread, after cudaSelect: the stream belongs to the rank's device.
  if (why.empty() && s.devices[static_cast<size_t>(thread)] >= 0)
    why = cudaStreamMake(&s.streams[static_cast<size_t>(thread)]);
  if (why.empty() && s.plan != nullptr)
    why = overridePlan(s.comms[static_cast<size_t>(thread)], s.plan);
  // Every rank learns whether all of them have a communicator before any collective.
  if (s.group.max(thread, why.empty() ? 0.0 : 1.0) > 0) {
    if (!why.empty())
      std::fprintf(stderr, "# ERROR rank %d: %s\n", s.world.proc * s.world.threads + thread,
                   why.c_str());
    if (thread == 0) s.status = 1;
  } else {
    runRank(s, thread);
  }
  tsrComm_t comm = s.comms[static_cast<size_t>(thread)];
  if (comm != nullptr) {
    tsrCommFinalize(comm);
    tsrCommDestroy(comm);
  }
  cudaStreamFree(s.streams[static_cast<size_t>(thread)]);  // after the communicator
}

}  // namespace

size_t perRankCount(size_t count, size_t eltSize, int nranks) {
  size_t align = eltSize >= 16 ? 1 : 16 / eltSize;
  return count / static_cast<size_t>(nranks) / align * align;
}

double busFactorOne(int) { return 1.0; }

double busFactorShare(int n) { return n > 0 ? static_cast<double>(n - 1) / n : 0.0; }

void sizesOfCount(size_t count, size_t, int, CollSizes* s) { *s = {count, count, count, 0, 0}; }

int collPerfMain(int argc, char** argv, const CollHooks& hooks) {
  Options o = parseOptions(argc, argv, hooks);
  World w;
  std::string why;
  std::string program = std::string(hooks.name) + "_perf";
  if (!worldInit(&argc, &argv, o, &w, &why)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), why.c_str());
    return 2;
  }
  auto stop = [&](const std::string& text) {
    if (w.proc == 0) std::fprintf(stderr, "%s: %s\n", program.c_str(), text.c_str());
    worldFinalize(w);
    return 2;
  };
  int nranks = w.nranks();
  if (hooks.rooted && o.root >= nranks)
    return stop("-r " + std::to_string(o.root) + ": there are only " + std::to_string(nranks) +
                " ranks");
  RunInfo info;
  info.program = program;
  info.nranks = nranks;
  info.nprocs = w.nprocs;
  info.threads = w.threads;
  std::vector<int> devices(static_cast<size_t>(w.threads), -1);
  if (o.device) {
    int n = cudaDevices(&why);
    if (n == 0) return stop("-m device: " + why);
    for (int t = 0; t < w.threads; ++t)
      devices[static_cast<size_t>(t)] = (w.localProc * w.threads + t) % n;
  }
  info.notes.push_back(std::to_string(nranks) + " ranks (" + std::to_string(w.nprocs) +
                       " process(es) x " + std::to_string(w.threads) + " thread(s)), " +
                       (o.device ? "device" : "host") + " buffers, " +
                       (!o.registerBuffers ? "not registered"
                        : o.device         ? "windows (tsrCommWindowRegister)"
                                           : "tsrMemAlloc'ed and registered (tsrCommRegister)"));
  std::shared_ptr<const Plan> plan;
  why = applyAlgorithm(&o, hooks, nranks, &plan, &info.notes);
  if (!why.empty()) return stop(why);
  if (o.check)
    info.notes.push_back(
        "check: inputs are small integers by rank and index, expected results computed in "
        "double (perf/coll_perf_data.hpp)");
  if (o.mpiBaseline)
    info.notes.push_back("--baseline mpi: " + mpiLibraryText() +
                         ", MPI's own collective on the same buffers, timed in blocks that "
                         "alternate with tessera's out-of-place calls; ratio = tessera "
                         "out-of-place busbw / mpi busbw");
  if (o.memcpyBaseline)
    info.notes.push_back(
        "--baseline memcpy: every rank memcpy()s min(send, recv) bytes of its own buffers, timed "
        "in blocks that alternate with tessera's out-of-place calls; ratio = tessera out-of-place "
        "busbw / memcpy bandwidth");
  info.rankLines = gatherRankLines(w, devices);

  Shared s(o, hooks, w);
  s.plan = plan;
  s.devices = devices;
  s.comms.assign(static_cast<size_t>(w.threads), nullptr);
  s.streams.assign(static_cast<size_t>(w.threads), nullptr);
  s.bufferBytes = largestBufferBytes(o, hooks, nranks);
  std::string initError;
  tsrUniqueId id{};
  if (w.nprocs == 1) {
    if (tsrCommInitAll(s.comms.data(), w.threads, devices.data()) != tsrSuccess)
      initError = std::string("tsrCommInitAll: ") + tsrGetLastError(nullptr);
  } else if (w.threads > 1) {
    if (w.proc == 0 && tsrGetUniqueId(&id) != tsrSuccess)
      initError = std::string("tsrGetUniqueId: ") + tsrGetLastError(nullptr);
    broadcastUniqueId(w, &id);
  }
  if (w.proc == 0) {
    printHeader(o, info);
    setBaselineName(o.memcpyBaseline ? "memcpy" : "mpi");
    printTableHeader(o.baseline());
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < w.threads; ++t)
    threads.emplace_back([&, t] { rankThread(s, t, id, initError); });
  rankThread(s, 0, id, initError);  // on the main thread: the only one that calls MPI
  for (auto& t : threads) t.join();

  int status = s.status;
  if (w.proc == 0) {
    double avg = s.busbwCount > 0 ? s.busbwSum / s.busbwCount : 0;
    if (status != 0) {
      std::printf("# Out of bounds values : %lld FAILED (the run stopped on an error)\n",
                  static_cast<long long>(s.wrong));
      std::fflush(stdout);
    } else {
      printSummary(s.wrong, avg);
      if (s.wrong > 0) status = 1;
    }
    if (!o.jsonPath.empty()) {
      why = writeJson(o.jsonPath, o, info, s.rows, s.wrong, avg);
      if (!why.empty()) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), why.c_str());
        if (status == 0) status = 1;
      }
    }
  }
  status = worldAgree(w, status);
  worldFinalize(w);
  return status;
}

}  // namespace tessera::perf
