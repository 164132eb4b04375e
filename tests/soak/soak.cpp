// Soak: random calls of every collective, point-to-point pair and group through the C API, on
// process ranks started by mpirun, for TESSERA_SOAK_SECONDS (default 120; 0: no limit) or
// TESSERA_SOAK_CALLS calls (default 100000; 0: no limit), whichever ends first.
//
// Every rank draws the same calls from one seed (printed; TESSERA_TEST_SEED replays it):
//   82% single calls: allreduce 16, reducescatter 10, allgather 10, broadcast 10, reduce 10,
//     alltoall 8, alltoallv 8, send/recv pair 10 (weights); 18% groups of 2 to 4 of those ops
//     between tsrGroupStart and tsrGroupEnd (sends and receives in a ring of random shift).
//   Sizes: the largest buffer of an op on a rank is 0 B (3%) or log-uniform in [1 B, 4 MiB]
//     (median 2 KiB, mean 270 KiB). Every datatype, every op (sum, prod, max, min, avg and a
//     premulsum created and destroyed per call), 40% in place, 30% on tsrMemAlloc buffers
//     registered with the communicator (re-registered every ~500 calls), buffers offset by up to
//     7 elements.
// Each result is checked (soak_values.hpp): copies fully, reductions on a sample of 1040
// elements (fully when small and every 8th call), the bytes around each output, and that an
// out-of-place input was left alone. Any error or wrong result stops the run (MPI_Abort).
//
// After a warm-up (the first 10% of the calls or of the time) and at the end, each rank settles
// (the same 64 fixed calls) and measures its resident memory, open descriptors and mappings;
// /dev/shm is listed before init, then, and after destroy. The run fails when anonymous resident
// memory (the heap) grew by 5% or more on any rank, a rank's descriptors other than shared
// memory changed, its shared-memory descriptors grew by more than the plan cache explains (a
// quarter), descriptors are left after destroy beyond shm's process-wide fd server, or /dev/shm's
// entries (other than Open MPI's own) differ between any two of those points.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "soak_ops.hpp"
#include "soak_probe.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera_mpi.h"

namespace {

using namespace soak;

int gRank = 0;
long long gCall = -1;
uint64_t gSeed = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "[rank %d] soak FAILED at call %lld (TESSERA_TEST_SEED=%llu): %s\n", gRank,
               gCall, static_cast<unsigned long long>(gSeed), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void expectOk(tsrResult_t rc, const char* what, tsrComm_t comm) {
  if (rc != tsrSuccess)
    fail(std::string(what) + ": " + tsrGetErrorString(rc) + ": " + tsrGetLastError(comm));
}

long long envInt(const char* name, long long fallback) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::strtoll(s, nullptr, 0) : fallback;
}

// The buffers: pool 0 from malloc, pool 1 from tsrMemAlloc and registered (zero-copy).
struct Pools {
  Slot slots[2][kSlots];
  void* handles[kSlots][2] = {};

  void allocate(tsrComm_t comm) {
    for (int s = 0; s < kSlots; ++s) {
      for (uint8_t** b : {&slots[0][s].send, &slots[0][s].recv}) {
        *b = static_cast<uint8_t*>(std::aligned_alloc(64, kRegionBytes));
        if (*b == nullptr) fail("out of memory");
        std::memset(*b, 0, kRegionBytes);  // resident from the start, not during the soak
      }
      for (uint8_t** b : {&slots[1][s].send, &slots[1][s].recv}) {
        void* p = nullptr;
        expectOk(tsrMemAlloc(&p, kRegionBytes), "tsrMemAlloc", comm);
        *b = static_cast<uint8_t*>(p);
        std::memset(*b, 0, kRegionBytes);
      }
    }
    registerAll(comm);
  }
  void registerAll(tsrComm_t comm) {
    for (int s = 0; s < kSlots; ++s) {
      expectOk(tsrCommRegister(comm, slots[1][s].send, kRegionBytes, &handles[s][0]),
               "tsrCommRegister", comm);
      expectOk(tsrCommRegister(comm, slots[1][s].recv, kRegionBytes, &handles[s][1]),
               "tsrCommRegister", comm);
    }
  }
  void deregisterAll(tsrComm_t comm) {
    for (auto& h : handles) {
      for (void*& x : h) {
        expectOk(tsrCommDeregister(comm, x), "tsrCommDeregister", comm);
        x = nullptr;
      }
    }
  }
  void release() {
    for (int s = 0; s < kSlots; ++s) {
      std::free(slots[0][s].send);
      std::free(slots[0][s].recv);
      expectOk(tsrMemFree(slots[1][s].send), "tsrMemFree", nullptr);
      expectOk(tsrMemFree(slots[1][s].recv), "tsrMemFree", nullptr);
    }
  }
};

struct Stats {
  long long single[kNumColls] = {}, grouped[kNumColls] = {};
  long long groups = 0, empty = 0, inPlace = 0, zeroCopy = 0, reregistrations = 0;
  long long sizes[4] = {};  // ops of < 4 KiB, < 256 KiB, < 1 MiB, <= 4 MiB (drawn bytes)
  double bytes = 0;
  void count(const OpSpec& s) {
    (s.inGroup ? grouped : single)[static_cast<int>(s.coll)]++;
    empty += s.bytes == 0;
    inPlace += s.inPlace;
    zeroCopy += s.zeroCopy;
    sizes[s.bytes < 4096 ? 0 : s.bytes < (256 << 10) ? 1 : s.bytes < (1 << 20) ? 2 : 3]++;
    bytes += static_cast<double>(s.bytes);
  }
};

// Runs ops as one call (a group when there are several) and checks them.
void runOps(std::vector<OpSpec>& ops, Pools& pools, tsrComm_t comm, int me, int n, bool full) {
  std::vector<Prepared> prep(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Slot& slot = pools.slots[ops[i].zeroCopy ? 1 : 0][ops[i].slot];
    if (std::string e = prepareOp(ops[i], slot, me, n, comm, &prep[i]); !e.empty()) fail(e);
  }
  const bool group = ops.size() > 1;
  if (group) expectOk(tsrGroupStart(), "tsrGroupStart", comm);
  for (size_t i = 0; i < ops.size(); ++i) {
    const tsrResult_t rc = issueOp(prep[i], comm);
    if (rc != tsrSuccess) {
      fail(std::string(collName(ops[i].coll)) + " (" + typeInfo(ops[i].dtype).name + ", count " +
           std::to_string(ops[i].count) + "): " + tsrGetErrorString(rc) + ": " +
           tsrGetLastError(comm));
    }
  }
  if (group) expectOk(tsrGroupEnd(), "tsrGroupEnd", comm);
  for (Prepared& p : prep) {
    if (std::string e = checkOp(p, me, n, full, comm); !e.empty()) fail(e);
  }
}

// The same fixed calls at both measuring points: every collective on every slot and pool.
void settle(Pools& pools, tsrComm_t comm, int me, int n) {
  Rng rng{0x5e771e};
  for (int zc = 0; zc < 2; ++zc) {
    for (int slot = 0; slot < kSlots; ++slot) {
      for (int c = 0; c < kNumColls; ++c) {
        std::vector<OpSpec> ops{drawOp(rng, n, static_cast<Coll>(c), 1 << 20, false, slot)};
        ops[0].zeroCopy = zc != 0;
        runOps(ops, pools, comm, me, n, false);
      }
    }
  }
}

// The warm-up starts with every plan the random calls can need: each collective (each root of
// broadcast and reduce) on either pool, at 0 B and four sizes per octave up to 4 MiB. The library
// makes a plan on first use and keeps it (one per collective, algorithm, root, pipeline depth and
// staging), with its own scratch and mappings of the peers' scratch: a plan first needed late in
// the run would otherwise show as growth. Returns the calls made.
long long sweep(Pools& pools, tsrComm_t comm, int me, int n) {
  static constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather,
                                    Coll::kBroadcast, Coll::kReduce,        Coll::kAlltoAll};
  Rng rng{0x5eeb};
  long long calls = 0;
  for (Coll c : kColls) {
    const int roots = c == Coll::kBroadcast || c == Coll::kReduce ? n : 1;
    for (int zc = 0; zc < 2; ++zc) {
      for (int root = 0; root < roots; ++root) {
        for (int k = -1; k <= 88; ++k) {
          const auto bytes = k < 0 ? 0LL : static_cast<long long>(std::exp2(k / 4.0));
          for (int inPlace = 0; inPlace < (c == Coll::kAlltoAll ? 1 : 2); ++inPlace) {
            std::vector<OpSpec> ops{drawOp(rng, n, c, bytes, false, 0)};
            ops[0].zeroCopy = zc != 0;
            ops[0].root = root;
            ops[0].inPlace = inPlace != 0;
            if (ops[0].inPlace) ops[0].nullUnused = false;
            // The largest size on every slot: the pages of the peers' registered buffers that
            // zero-copy calls touch are resident from here on, not first touched mid-run.
            for (int slot = 0; slot < (k == 88 ? kSlots : 1); ++slot) {
              ops[0].slot = slot;
              runOps(ops, pools, comm, me, n, false);
              ++calls;
            }
          }
        }
      }
    }
  }
  return calls;
}

struct Probe {
  long long rss = 0, anon = 0, shmem = 0, fds = 0, memfds = 0, maps = 0, sharedMaps = 0;
};
constexpr int kProbeFields = 7;
constexpr long long kFdServerFds = 3;  // shm's process-wide fd server: socket, eventfd, epoll
Probe probe() {
  Mappings m = mappings();
  const std::multiset<std::string> links = fdLinks();
  return {residentKiB(),
          statusKiB("RssAnon"),
          statusKiB("RssShmem"),
          static_cast<long long>(links.size()),
          memfdCount(links),
          m.total,
          m.shared};
}

std::string joinNames(const std::set<std::string>& names) {
  std::string s;
  for (const auto& x : names) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "-" : s;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  gRank = me;
  long long maxCalls = envInt("TESSERA_SOAK_CALLS", 100000);
  const double maxSeconds = static_cast<double>(envInt("TESSERA_SOAK_SECONDS", 120));
  if (maxCalls <= 0 && maxSeconds <= 0) maxCalls = 100000;
  unsigned long long seed =
      std::random_device{}() * 0x100000001ull ^
      static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* s = std::getenv("TESSERA_TEST_SEED"); s != nullptr && *s != '\0')
    seed = std::strtoull(s, nullptr, 0);
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  gSeed = seed;
  // The library warns about TESSERA_* variables it does not know: these are the soak's own.
  for (const char* v : {"TESSERA_SOAK_CALLS", "TESSERA_SOAK_SECONDS", "TESSERA_TEST_SEED"})
    unsetenv(v);
  if (me == 0) {
    std::printf("soak: %d ranks, TESSERA_TEST_SEED=%llu, up to %lld calls / %.0f s (0: no limit)\n",
                n, seed, maxCalls, maxSeconds);
    std::fflush(stdout);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  const std::set<std::string> shmBefore = shmEntries();
  const Probe before = probe();
  tsrComm_t comm = nullptr;
  expectOk(tsrCommInitMpi(&comm, MPI_COMM_WORLD, nullptr), "tsrCommInitMpi", nullptr);
  Pools pools;
  pools.allocate(comm);

  Rng rng{seed};
  Stats stats;
  Probe warm, end;
  std::set<std::string> shmWarm, shmEnd;
  long long warmCall = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double lastReport = 0, warmSeconds = 0, seconds = 0;
  bool warmed = false;
  int lastFds = -1, fdChanges = 0;
  const long long sweepCalls = sweep(pools, comm, me, n);
  for (gCall = 0;; ++gCall) {
    if (gCall % 16 == 0) {
      // Rank 0's clock decides for all, so every rank stops at the same call.
      int flags[2] = {0, 0};  // stop, warm-up over
      if (me == 0) {
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        flags[0] = (maxCalls > 0 && gCall >= maxCalls) || (maxSeconds > 0 && seconds >= maxSeconds);
        flags[1] = !warmed && ((maxCalls > 0 && gCall >= maxCalls / 10) ||
                               (maxSeconds > 0 && seconds >= maxSeconds / 10));
        if (seconds - lastReport >= 10 && !flags[0]) {
          lastReport = seconds;
          std::printf("  %lld calls, %.0f s, %.0f calls/s, RSS %ld KiB\n", gCall, seconds,
                      static_cast<double>(gCall) / seconds, residentKiB());
          std::fflush(stdout);
        }
      }
      MPI_Bcast(flags, 2, MPI_INT, 0, MPI_COMM_WORLD);
      if (flags[1] || (flags[0] && !warmed)) {  // a run too short to warm up measures once
        settle(pools, comm, me, n);
        MPI_Barrier(MPI_COMM_WORLD);
        warm = probe();
        shmWarm = shmEntries();
        warmed = true;
        warmCall = gCall;
        warmSeconds = seconds;
      }
      if (flags[0]) break;
    }
    const bool full = gCall % 8 == 0;
    std::vector<OpSpec> ops;
    if (rng.below(100) < 18) {
      const int k = 2 + static_cast<int>(rng.below(3));
      for (int i = 0; i < k; ++i) ops.push_back(drawOp(rng, n, Coll::kNumColls, -1, true, i));
      stats.groups++;
    } else {
      ops.push_back(drawOp(rng, n, Coll::kNumColls, -1, false, 0));
    }
    for (const OpSpec& s : ops) stats.count(s);
    runOps(ops, pools, comm, me, n, full);
    bool reregistered = false;
    if (rng.chance(0.002)) {
      pools.deregisterAll(comm);
      pools.registerAll(comm);
      stats.reregistrations++;
      reregistered = true;
    }
    if (warmed && fdChanges < 8) {
      // Which calls open (or close) descriptors after the warm-up: what the sweep missed.
      const int fds = openFds();
      if (lastFds >= 0 && fds != lastFds) {
        std::string what;
        for (const OpSpec& o : ops)
          what += std::string(what.empty() ? "" : ", ") + collName(o.coll) + " " +
                  std::to_string(o.bytes) + " B" + (o.zeroCopy ? " zero-copy" : "") +
                  (o.inPlace ? " in place" : "") + " root " + std::to_string(o.root);
        std::fprintf(stderr,
                     "soak rank %d: call %lld (%s%s)%s changed the open descriptors: %d -> %d\n",
                     me, gCall, ops.size() > 1 ? "group: " : "", what.c_str(),
                     reregistered ? " and a re-registration" : "", lastFds, fds);
        ++fdChanges;
      }
      lastFds = fds;
    }
  }
  const long long calls = gCall;
  settle(pools, comm, me, n);
  MPI_Barrier(MPI_COMM_WORLD);
  end = probe();
  shmEnd = shmEntries();
  tsrResult_t async = tsrSuccess;
  expectOk(tsrCommGetAsyncError(comm, &async), "tsrCommGetAsyncError", comm);
  expectOk(async, "asynchronous error", comm);
  pools.deregisterAll(comm);
  expectOk(tsrCommFinalize(comm), "tsrCommFinalize", comm);
  expectOk(tsrCommDestroy(comm), "tsrCommDestroy", nullptr);
  pools.release();
  MPI_Barrier(MPI_COMM_WORLD);
  const Probe after = probe();
  const std::set<std::string> shmAfter = shmEntries();

  // Rank 0 reports and judges every rank's figures.
  const Probe mine[4] = {before, warm, end, after};
  std::vector<Probe> all(static_cast<size_t>(n) * 4);
  MPI_Gather(mine, 4 * kProbeFields, MPI_LONG_LONG, all.data(), 4 * kProbeFields, MPI_LONG_LONG, 0,
             MPI_COMM_WORLD);
  int failed = 0;
  if (me == 0) {
    std::printf("\n%-28s %lld\n", "calls", calls);
    std::printf(
        "%-28s %.1f (warm-up: %lld sweep calls, then random calls up to call %lld, %.1f s)\n",
        "seconds", seconds, sweepCalls, warmCall, warmSeconds);
    std::printf("%-28s %.0f (sweep and random calls)\n", "calls/s",
                static_cast<double>(calls + sweepCalls) / seconds);
    std::printf("%-28s %.2f GiB per rank (largest buffer per op)\n", "bytes drawn",
                stats.bytes / (1 << 30));
    std::printf("\n%4s %10s %10s %10s %8s %10s %10s %10s %10s\n", "rank", "RSS init", "RSS warm",
                "RSS end", "growth%", "anon warm", "anon end", "shmem warm", "shmem end");
    for (int r = 0; r < n; ++r) {
      const Probe* p = &all[static_cast<size_t>(r) * 4];
      const double growth =
          100.0 * static_cast<double>(p[2].rss - p[1].rss) / static_cast<double>(p[1].rss);
      std::printf("%4d %10lld %10lld %10lld %8.2f %10lld %10lld %10lld %10lld   (KiB)\n", r,
                  p[0].rss, p[1].rss, p[2].rss, growth, p[1].anon, p[2].anon, p[1].shmem,
                  p[2].shmem);
      // The heap (anonymous memory) is where a leak per call would land. Resident shared
      // memory also counts pages of the peers' registered buffers and scratch that this process
      // first touches late (a size or offset the warm-up did not reach), bounded by what is
      // mapped, so it is reported, not judged.
      const double anonGrowth =
          100.0 * static_cast<double>(p[2].anon - p[1].anon) / static_cast<double>(p[1].anon);
      if (anonGrowth >= 5.0) {
        std::printf(
            "FAIL: rank %d's anonymous resident memory grew by %.2f%% after the warm-up "
            "(all resident memory: %.2f%%)\n",
            r, anonGrowth, growth);
        failed = 1;
      }
    }
    // Descriptors: those that are not shared memory (sockets, eventfds, files) must not change
    // after the warm-up. Shared memory (memfd) may grow with the plan cache only: a plan first
    // needed after the warm-up (the tuner's choice for a size the sweep did not try) brings its
    // scratch and the peers' (the log names each such call), bounded by the plans there are; a
    // leak per call would add thousands. After destroy, only shm's process-wide fd server (kept
    // until exit by design) may remain.
    std::printf("\n%4s %9s %9s %9s %12s %11s %11s %10s %10s\n", "rank", "fds init", "fds warm",
                "fds end", "fds destroy", "memfd warm", "memfd end", "maps warm", "maps end");
    for (int r = 0; r < n; ++r) {
      const Probe* p = &all[static_cast<size_t>(r) * 4];
      std::printf("%4d %9lld %9lld %9lld %12lld %11lld %11lld %10lld %10lld\n", r, p[0].fds,
                  p[1].fds, p[2].fds, p[3].fds, p[1].memfds, p[2].memfds, p[1].maps, p[2].maps);
      const long long otherWarm = p[1].fds - p[1].memfds, otherEnd = p[2].fds - p[2].memfds;
      if (otherWarm != otherEnd) {
        std::printf(
            "FAIL: rank %d had %lld descriptors other than shared memory open after the "
            "warm-up, %lld at the end\n",
            r, otherWarm, otherEnd);
        failed = 1;
      }
      if (p[2].memfds < p[1].memfds || p[2].memfds - p[1].memfds > p[1].memfds / 4) {
        std::printf(
            "FAIL: rank %d's shared-memory descriptors went from %lld after the warm-up "
            "to %lld at the end (more than the plan cache explains)\n",
            r, p[1].memfds, p[2].memfds);
        failed = 1;
      }
      if (p[3].fds > p[0].fds + kFdServerFds || p[3].memfds != p[0].memfds) {
        std::printf(
            "FAIL: rank %d had %lld descriptors (%lld shared memory) before init and "
            "%lld (%lld) after destroy\n",
            r, p[0].fds, p[0].memfds, p[3].fds, p[3].memfds);
        failed = 1;
      }
    }
    std::printf(
        "\n/dev/shm entries (not Open MPI's): before init %zu, warm %zu, end %zu, after "
        "destroy %zu\n",
        shmBefore.size(), shmWarm.size(), shmEnd.size(), shmAfter.size());
    if (shmBefore != shmAfter || shmBefore != shmWarm || shmWarm != shmEnd) {
      std::printf("FAIL: /dev/shm changed: before [%s] warm [%s] end [%s] after [%s]\n",
                  joinNames(shmBefore).c_str(), joinNames(shmWarm).c_str(),
                  joinNames(shmEnd).c_str(), joinNames(shmAfter).c_str());
      failed = 1;
    }
    std::printf("\n%-14s %9s %9s\n", "op", "single", "in group");
    for (int c = 0; c < kNumColls; ++c)
      std::printf("%-14s %9lld %9lld\n", collName(static_cast<Coll>(c)), stats.single[c],
                  stats.grouped[c]);
    std::printf(
        "groups %lld; ops: empty %lld, in place %lld, zero-copy %lld; re-registrations "
        "%lld\n",
        stats.groups, stats.empty, stats.inPlace, stats.zeroCopy, stats.reregistrations);
    std::printf("op sizes: < 4 KiB %lld, < 256 KiB %lld, < 1 MiB %lld, <= 4 MiB %lld\n",
                stats.sizes[0], stats.sizes[1], stats.sizes[2], stats.sizes[3]);
    std::printf("%s\n", failed ? "soak FAILED" : "soak passed");
    std::fflush(stdout);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
