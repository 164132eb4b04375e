// Put bandwidth of the GPU transports beside a plain device-to-device cudaMemcpy of the same size
// on the same GPU (DESIGN.md, principle 6: the reference in the same run). Two ranks: p2p as
// threads of this process, cuda_ipc as forked processes (forked before this process touches
// CUDA). Rank 0 times `iters` host puts (each a copy on the connection's stream, waited for, as
// Connection::put promises) into rank 1's memory; the reference times cudaMemcpyAsync + stream
// wait on two buffers of rank 0's GPU, one per iteration, the same pattern.
//
// Usage: gpu_transport_bw [-d device0,device1] [-i iters] [-m maxMiB]
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "core/cuda_driver.hpp"
#include "transport/context.hpp"

namespace tessera {
namespace {

struct Options {
  int devices[2] = {0, 0};
  int iters = 20;
  size_t maxBytes = size_t{256} << 20;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> v;
  for (size_t s = size_t{64} << 10; s <= o.maxBytes; s *= 8) v.push_back(s);
  return v;
}

// Seconds per plain D2D copy of `bytes` on `device`, best of three batches.
double memcpyBaseline(int device, size_t bytes, int iters) {
  cudaSetDevice(device);
  void *a = nullptr, *b = nullptr;
  cudaStream_t s = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return -1;
  double best = 1e30;
  for (int batch = 0; batch < 4; ++batch) {  // the first batch warms up
    double t0 = now();
    for (int i = 0; i < iters; ++i) {
      cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
      cudaStreamSynchronize(s);
    }
    double t = (now() - t0) / iters;
    if (batch > 0 && t < best) best = t;
  }
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
  return best;
}

// Both ranks: connect over `kind`, exchange one memory of maxBytes, rank 0 puts and prints.
Result runRank(Bootstrap& b, TransportKind kind, const Options& o) {
  TransportContextOptions co;
  co.bootstrap = &b;
  co.cudaDevice = o.devices[b.rank()];
  co.timeoutSeconds = 60;
  std::unique_ptr<TransportContext> ctx;
  TSR_CHECK(TransportContext::create(co, &ctx));
  std::shared_ptr<Connection> conn;
  TSR_CHECK(ctx->connect(1 - b.rank(), kind, &conn));
  std::shared_ptr<Memory> mem;
  TSR_CHECK(ctx->allocate(o.maxBytes, MemoryKind::kCuda, &mem));
  std::shared_ptr<RemoteMemory> remote;
  TSR_CHECK(ctx->exchangeMemory(*conn, *mem, &remote));
  for (size_t bytes : sizes(o)) {
    if (b.rank() == 0) {
      double best = 1e30;
      for (int batch = 0; batch < 4; ++batch) {
        double t0 = now();
        for (int i = 0; i < o.iters; ++i) TSR_CHECK(conn->put(*remote, 0, *mem, 0, bytes));
        double t = (now() - t0) / o.iters;
        if (batch > 0 && t < best) best = t;
      }
      double ref = memcpyBaseline(o.devices[0], bytes, o.iters);
      std::printf("%-9s %-10s %12zu %14.1f %18.1f %8.2f\n", transportName(kind),
                  kind == TransportKind::kP2p ? "threads" : "processes", bytes, bytes / best / 1e9,
                  ref > 0 ? bytes / ref / 1e9 : 0.0, ref > 0 ? ref / best : 0.0);
      std::fflush(stdout);
    }
    TSR_CHECK(b.barrier());
  }
  remote.reset();
  return b.barrier();
}

int runP2p(const Options& o) {
  BootstrapOptions bo;
  bo.timeoutSeconds = 120;
  std::shared_ptr<InprocGroup> group;
  if (InprocBootstrap::createGroup(2, bo, &group) != tsrSuccess) return 1;
  std::atomic<int> failed{0};  // written by both rank threads
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      if (group->join(r, &b) != tsrSuccess || runRank(*b, TransportKind::kP2p, o) != tsrSuccess) {
        std::fprintf(stderr, "p2p rank %d: %s\n", r, lastErrorMessage());
        failed = 1;
      }
    });
  for (auto& t : ranks) t.join();
  return failed.load();
}

int runCudaIpc(const Options& o) {
  setenv("TESSERA_SOCKET_IFNAME", "lo", 1);
  BootstrapOptions bo;
  bo.timeoutSeconds = 120;
  tsrUniqueId id{};
  if (createUniqueId(&id) != tsrSuccess) {
    std::fprintf(stderr, "createUniqueId: %s\n", lastErrorMessage());
    return 1;
  }
  std::fflush(stdout);
  pid_t pids[2] = {-1, -1};
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) {
      // Never waitpid(-1) below; a lone rank 0 would wait for its peer, so stop it.
      std::fprintf(stderr, "fork of cuda_ipc rank %d: %s\n", r, std::strerror(errno));
      if (r == 1) {
        kill(pids[0], SIGKILL);
        waitpid(pids[0], nullptr, 0);
      }
      return 1;
    }
    if (pids[r] == 0) {
      std::unique_ptr<Bootstrap> b;
      Result res = TcpBootstrap::create(id, r, 2, bo, &b);
      if (res == tsrSuccess) res = runRank(*b, TransportKind::kCudaIpc, o);
      if (res != tsrSuccess) std::fprintf(stderr, "cuda_ipc rank %d: %s\n", r, lastErrorMessage());
      std::fflush(stdout);
      _exit(res == tsrSuccess ? 0 : 1);
    }
  }
  int failed = 0;
  double until = now() + 300;
  for (int r = 0; r < 2; ++r) {
    int st = 0;
    pid_t got;
    while ((got = waitpid(pids[r], &st, WNOHANG)) == 0 || (got < 0 && errno == EINTR)) {
      if (now() > until) {
        kill(pids[0], SIGKILL);
        kill(pids[1], SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  return failed;
}

int usageError(const char* program) {
  std::fprintf(stderr, "usage: %s [-d dev0,dev1] [-i iters] [-m maxMiB]\n", program);
  return 2;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  Options o;
  if (argc % 2 == 0) return usageError(argv[0]);  // an option without its value
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-d") == 0) {
      std::sscanf(argv[i + 1], "%d,%d", &o.devices[0], &o.devices[1]);
    } else if (std::strcmp(argv[i], "-i") == 0) {
      o.iters = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "-m") == 0) {
      o.maxBytes = static_cast<size_t>(std::atol(argv[i + 1])) << 20;
    } else {
      return usageError(argv[0]);
    }
  }
  if (o.iters < 1 || o.maxBytes < (size_t{64} << 10)) return 2;
  std::printf("%-9s %-10s %12s %14s %18s %8s\n", "transport", "ranks", "bytes", "put GB/s",
              "cudaMemcpy GB/s", "ratio");
  // cuda_ipc first: its ranks are forked, and this process must not have started CUDA yet.
  int rc = runCudaIpc(o);
  rc |= runP2p(o);
  return rc;
}
