// tessera_tune, the cost model's parameters (collectives/tuner): measured on this machine between
// two ranks, processes over shm and threads over inproc, with the transport layer itself.
//   alpha (alphaUs)  half a semaphore round trip (signal, the peer waits and signals back)
//   beta (betaGBs)   bytes per second of a stream of 256 KiB puts into the peer's memory
//   crossMemory      the same over cross-memory attach (readPeerAddress of the peer's malloc
//                    memory): alpha of an 8-byte read, beta of 16 MiB reads
//   gammaGBs         bytes of output per second of a two-input float sum (hostReduce)
//   callOverheadUs   an all-reduce of one float on one rank, through the public API
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "collectives/exec/host_ops.hpp"
#include "tessera/tessera.h"
#include "tessera_tune.hpp"
#include "transport/channel.hpp"
#include "transport/context.hpp"
#include "transport/semaphore.hpp"

namespace tessera::tune {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int kRoundTrips = 4000;
constexpr size_t kChunk = 256 << 10;
constexpr size_t kStream = 64 << 20;
constexpr size_t kCross = 16 << 20;

struct LinkFigures {
  double alphaUs = 0, betaGBs = 0;
  double crossAlphaUs = 0, crossBetaGBs = 0;
  bool cross = false;
};

// Rank 0 measures, rank 1 answers. Returns "" or what failed.
std::string measurePair(TransportContext& ctx, TransportKind kind, LinkFigures* out) {
  const int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  if (ctx.connect(peer, kind, &conn) != tsrSuccess) return lastErrorMessage();
  std::shared_ptr<Semaphore> sem;
  std::shared_ptr<Memory> mine;
  std::shared_ptr<RemoteMemory> theirs;
  if (ctx.createSemaphore(conn, &sem) != tsrSuccess ||
      ctx.allocate(kStream, MemoryKind::kHost, &mine) != tsrSuccess ||
      ctx.exchangeMemory(*conn, *mine, &theirs, 0) != tsrSuccess)
    return lastErrorMessage();
  std::unique_ptr<MemoryChannel> mc;
  if (ctx.createMemoryChannel(conn, theirs, mine, sem, &mc) != tsrSuccess)
    return lastErrorMessage();
  std::memset(mine->data(), me + 1, kStream);
  if (ctx.bootstrap().barrier() != tsrSuccess) return lastErrorMessage();
  // Round trips.
  auto t0 = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    if (me == 0) {
      if (sem->signal() != tsrSuccess || sem->wait() != tsrSuccess) return lastErrorMessage();
    } else {
      if (sem->wait() != tsrSuccess || sem->signal() != tsrSuccess) return lastErrorMessage();
    }
  }
  if (me == 0) out->alphaUs = secondsSince(t0) / kRoundTrips / 2 * 1e6;
  // A stream of puts, then the peer's acknowledgement; best of three.
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    if (ctx.bootstrap().barrier() != tsrSuccess) return lastErrorMessage();
    t0 = Clock::now();
    if (me == 0) {
      for (size_t off = 0; off < kStream; off += kChunk)
        if (mc->put(off, off, kChunk) != tsrSuccess) return lastErrorMessage();
      if (mc->signal() != tsrSuccess || sem->wait() != tsrSuccess) return lastErrorMessage();
      best = std::min(best, secondsSince(t0));
    } else {
      if (sem->wait() != tsrSuccess || sem->signal() != tsrSuccess) return lastErrorMessage();
    }
  }
  if (me == 0) out->betaGBs = kStream / best / 1e9;
  // Cross-memory attach of the peer's malloc memory.
  std::vector<char> plain(kCross, static_cast<char>(me + 7));
  uint64_t addrs[2] = {};
  addrs[me] = reinterpret_cast<uintptr_t>(plain.data());
  if (ctx.bootstrap().allGather(addrs, sizeof(uint64_t)) != tsrSuccess) return lastErrorMessage();
  std::string why;
  // Both ranks ask (a thread pair shares `out`): only rank 0 writes the figures.
  const bool cross = conn->crossMemory(&why) && kind != TransportKind::kInproc;
  if (me == 0) out->cross = cross;
  if (me == 0 && cross) {
    std::vector<char> got(kCross);
    t0 = Clock::now();
    for (int i = 0; i < 1000; ++i)
      if (conn->readPeerAddress(got.data(), addrs[peer], 8) != tsrSuccess)
        return lastErrorMessage();
    out->crossAlphaUs = secondsSince(t0) / 1000 * 1e6;
    best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      t0 = Clock::now();
      if (conn->readPeerAddress(got.data(), addrs[peer], kCross) != tsrSuccess)
        return lastErrorMessage();
      best = std::min(best, secondsSince(t0));
    }
    out->crossBetaGBs = kCross / best / 1e9;
  }
  if (ctx.bootstrap().barrier() != tsrSuccess) return lastErrorMessage();
  return "";
}

std::string processPair(LinkFigures* out) {
  auto* shared = static_cast<LinkFigures*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return "mmap failed";
  // The id is made by rank 0 after the fork (shareIds says why).
  auto* sharedIds = static_cast<SharedIds*>(
      mmap(nullptr, sizeof(SharedIds), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sharedIds == MAP_FAILED) {
    munmap(shared, 4096);
    return "mmap failed";
  }
  char* why = reinterpret_cast<char*>(shared + 1);
  pid_t kids[2];
  for (int r = 0; r < 2; ++r) {
    kids[r] = fork();
    if (kids[r] == 0) {
      std::unique_ptr<Bootstrap> b;
      std::unique_ptr<TransportContext> ctx;
      BootstrapOptions bo;
      bo.timeoutSeconds = 60;
      TransportContextOptions o;
      std::vector<tsrUniqueId> ids;
      std::string err = shareIds(sharedIds, r, 1, &ids, 60);
      if (err.empty() && TcpBootstrap::create(ids[0], r, 2, bo, &b) != tsrSuccess) {
        err = lastErrorMessage();
      } else if (err.empty()) {
        o.bootstrap = b.get();
        o.timeoutSeconds = 60;
        err = TransportContext::create(o, &ctx) != tsrSuccess
                  ? lastErrorMessage()
                  : measurePair(*ctx, TransportKind::kShm, shared);
      }
      if (!err.empty()) std::snprintf(why, 1024, "rank %d: %s", r, err.c_str());
      _exit(err.empty() ? 0 : 1);
    }
  }
  int failed = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::string err = failed ? (why[0] ? why : "a measuring process died") : "";
  *out = *shared;
  munmap(shared, 4096);
  munmap(sharedIds, sizeof(SharedIds));
  return err;
}

std::string threadPair(LinkFigures* out) {
  std::shared_ptr<InprocGroup> group;
  BootstrapOptions bo;
  bo.timeoutSeconds = 60;
  if (InprocBootstrap::createGroup(2, bo, &group) != tsrSuccess) return lastErrorMessage();
  std::string errs[2];
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      if (group->join(r, &b) != tsrSuccess) {
        errs[r] = lastErrorMessage();
        return;
      }
      TransportContextOptions o;
      o.bootstrap = b.get();
      o.timeoutSeconds = 60;
      std::unique_ptr<TransportContext> ctx;
      errs[r] = TransportContext::create(o, &ctx) != tsrSuccess
                    ? lastErrorMessage()
                    : measurePair(*ctx, TransportKind::kInproc, out);
    });
  for (auto& t : th) t.join();
  return !errs[0].empty() ? errs[0] : errs[1];
}

double gammaGBs() {
  constexpr size_t kCount = (16 << 20) / sizeof(float);
  std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f), d(kCount);
  const void* srcs[2] = {a.data(), b.data()};
  RedOpDesc op;
  op.kind = RedKind::kSum;
  HostReduceArgs args{op, tsrFloat32, srcs, 2, nullptr, d.data(), nullptr, kCount};
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    if (hostReduce(args) != tsrSuccess) return 0;
    best = std::min(best, secondsSince(t0));
  }
  return kCount * sizeof(float) / best / 1e9;
}

double callOverheadUs() {
  tsrComm_t comm;
  int dev = -1;
  if (tsrCommInitAll(&comm, 1, &dev) != tsrSuccess) return 0;
  float x = 1, y = 0;
  for (int i = 0; i < 100; ++i) (void)tsrAllReduce(&x, &y, 1, tsrFloat32, tsrSum, comm, nullptr);
  constexpr int kCalls = 20000;
  auto t0 = Clock::now();
  for (int i = 0; i < kCalls; ++i) (void)tsrAllReduce(&x, &y, 1, tsrFloat32, tsrSum, comm, nullptr);
  double us = secondsSince(t0) / kCalls * 1e6;
  tsrCommDestroy(comm);
  return us;
}

}  // namespace

std::string shareIds(SharedIds* s, int rank, int count, std::vector<tsrUniqueId>* out,
                     double timeoutSeconds) {
  if (count < 1 || count > SharedIds::kMax) return "shareIds: bad count";
  if (rank == 0) {
    for (int i = 0; i < count; ++i) {
      if (tsrGetUniqueId(&s->ids[i]) != tsrSuccess) {
        std::snprintf(s->why, sizeof s->why, "rank 0: %s", tsrGetLastError(nullptr));
        s->state.store(-1, std::memory_order_release);
        return s->why;
      }
    }
    s->state.store(1, std::memory_order_release);
  } else {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    int st = 0;
    while ((st = s->state.load(std::memory_order_acquire)) == 0) {
      if (std::chrono::steady_clock::now() > deadline)
        return "rank 0 made no unique id within " + std::to_string(timeoutSeconds) + " s";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (st < 0) return s->why;
  }
  out->assign(s->ids, s->ids + count);
  return "";
}

std::string measureLinks(TunerParams* params, std::string* report) {
  LinkFigures shm, inproc;
  std::string err = processPair(&shm);
  if (!err.empty()) return "shm between two processes: " + err;
  err = threadPair(&inproc);
  if (!err.empty()) return "inproc between two threads: " + err;
  params->links[static_cast<size_t>(TransportKind::kShm)] = LinkModel{shm.alphaUs, shm.betaGBs};
  params->links[static_cast<size_t>(TransportKind::kInproc)] =
      LinkModel{inproc.alphaUs, inproc.betaGBs};
  if (shm.cross) params->crossMemory = LinkModel{shm.crossAlphaUs, shm.crossBetaGBs};
  params->gammaGBs = gammaGBs();
  params->callOverheadUs = callOverheadUs();
  *report = strprintf(
      "# links: shm alpha %.2f us beta %.1f GB/s; inproc alpha %.2f us beta %.1f GB/s; "
      "cross-memory %s; gamma %.1f GB/s; call overhead %.2f us",
      shm.alphaUs, shm.betaGBs, inproc.alphaUs, inproc.betaGBs,
      shm.cross
          ? strprintf("alpha %.2f us beta %.1f GB/s", shm.crossAlphaUs, shm.crossBetaGBs).c_str()
          : "refused (the model keeps its default)",
      params->gammaGBs, params->callOverheadUs);
  if (params->gammaGBs <= 0 || params->callOverheadUs <= 0)
    return "the reduce or call timing failed";
  return "";
}

}  // namespace tessera::tune
