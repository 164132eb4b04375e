#include "coll_perf_ranks.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/build_config.hpp"

#if TESSERA_HAVE_MPI
#include <mpi.h>
#endif

namespace tessera::perf {
namespace {

bool launchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

constexpr size_t kLineBytes = 160;

}  // namespace

bool worldInit(int* argc, char*** argv, const Options& o, World* out, std::string* why) {
  World w;
  w.threads = o.threads;
  bool want = launchedByMpi() || o.mpiBaseline;
#if TESSERA_HAVE_MPI
  (void)why;
  if (want) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.proc);
    MPI_Comm_size(MPI_COMM_WORLD, &w.nprocs);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.proc, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &w.localProc);
    MPI_Comm_free(&local);
    w.mpi = true;
  }
#else
  (void)argc;
  (void)argv;
  if (want) {
    *why = o.mpiBaseline ? "--baseline mpi needs a build with MPI (this one has none)"
                         : "launched by an MPI launcher, but this build has no MPI: every process "
                           "would run alone";
    return false;
  }
#endif
  *out = w;
  return true;
}

void worldFinalize(const World& w) {
#if TESSERA_HAVE_MPI
  if (w.mpi) MPI_Finalize();
#else
  (void)w;
#endif
}

int worldAgree(const World& w, int status) {
#if TESSERA_HAVE_MPI
  if (w.mpi && w.nprocs > 1) {
    int worst = status;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  }
#else
  (void)w;
#endif
  return status;
}

RankGroup::RankGroup(const World& w)
    : world_(w), local_(w.threads), slots_(static_cast<size_t>(w.threads), 0.0) {}

void RankGroup::barrier(int thread) {
  local_.arrive_and_wait();
#if TESSERA_HAVE_MPI
  if (world_.mpi && world_.nprocs > 1) {
    if (thread == 0) MPI_Barrier(MPI_COMM_WORLD);
    local_.arrive_and_wait();
  }
#else
  (void)thread;
#endif
}

double RankGroup::reduce(int thread, double v, How how) {
  slots_[static_cast<size_t>(thread)] = v;
  local_.arrive_and_wait();
  if (thread == 0) {
    double x = slots_[0];
    for (size_t t = 1; t < slots_.size(); ++t) {
      if (how == kSum) x += slots_[t];
      if (how == kMin) x = std::min(x, slots_[t]);
      if (how == kMax) x = std::max(x, slots_[t]);
    }
#if TESSERA_HAVE_MPI
    if (world_.mpi && world_.nprocs > 1) {
      if (how == kFirst) {
        MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      } else {
        double in = x;
        MPI_Allreduce(&in, &x, 1, MPI_DOUBLE,
                      how == kSum   ? MPI_SUM
                      : how == kMin ? MPI_MIN
                                    : MPI_MAX,
                      MPI_COMM_WORLD);
      }
    }
#endif
    result_ = x;
  }
  local_.arrive_and_wait();
  double r = result_;
  local_.arrive_and_wait();  // nobody overwrites result_ before every thread read it
  return r;
}

std::vector<std::string> gatherRankLines(const World& w, const std::vector<int>& devices) {
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> mine(kLineBytes * static_cast<size_t>(w.threads), '\0');
  for (int t = 0; t < w.threads; ++t) {
    int d = devices[static_cast<size_t>(t)];
    std::snprintf(mine.data() + kLineBytes * static_cast<size_t>(t), kLineBytes,
                  "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s]", w.proc * w.threads + t,
                  static_cast<int>(getpid()), host, d, d < 0 ? "host" : "cuda");
  }
  std::vector<char> all = mine;
#if TESSERA_HAVE_MPI
  if (w.mpi && w.nprocs > 1) {
    all.assign(mine.size() * static_cast<size_t>(w.nprocs), '\0');
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
               static_cast<int>(mine.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  }
#endif
  std::vector<std::string> lines;
  if (w.proc != 0) return lines;
  for (size_t i = 0; i < all.size() / kLineBytes; ++i)
    lines.emplace_back(all.data() + i * kLineBytes,
                       strnlen(all.data() + i * kLineBytes, kLineBytes));
  return lines;
}

void broadcastUniqueId(const World& w, tsrUniqueId* id) {
#if TESSERA_HAVE_MPI
  if (w.mpi && w.nprocs > 1)
    MPI_Bcast(id->internal, TSR_UNIQUE_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
#else
  (void)w;
  (void)id;
#endif
}

RankBuffers::~RankBuffers() { release(); }

void RankBuffers::release() {
  if (sendHandle_ != nullptr) tsrCommDeregister(comm_, sendHandle_);
  if (recvHandle_ != nullptr) tsrCommDeregister(comm_, recvHandle_);
  sendHandle_ = recvHandle_ = nullptr;
  // Windows: collective, every rank releases its buffers at the same point.
  if (sendWin_ != nullptr) tsrCommWindowDeregister(comm_, sendWin_);
  if (recvWin_ != nullptr) tsrCommWindowDeregister(comm_, recvWin_);
  sendWin_ = recvWin_ = nullptr;
  for (void* p : {send_, recv_}) {
    if (p == nullptr) continue;
    if (memAlloc_ && !device_)
      tsrMemFree(p);
    else if (device_)
      cudaRelease(p, stream_);
    else
      std::free(p);
  }
  send_ = recv_ = nullptr;
}

std::string RankBuffers::allocate(tsrComm_t comm, size_t bytes, bool device, bool registered,
                                  void* stream) {
  release();
  comm_ = comm;
  device_ = device;
  stream_ = stream;
  memAlloc_ = registered;
  // At least one page each, so that no size (not even 0) hands the library a null pointer.
  size_t n = std::max<size_t>((bytes + 4095) & ~size_t{4095}, 4096);
  for (void** p : {&send_, &recv_}) {
    if (registered && !device) {
      if (tsrMemAlloc(p, n) != tsrSuccess)
        return std::string("tsrMemAlloc: ") + tsrGetLastError(comm);
      if (!device && cudaIsDevicePointer(*p))
        return "tsrMemAlloc returned device memory, but -m host asks for host buffers";
    } else if (device) {
      std::string e = cudaAllocate(p, n, stream);
      if (!e.empty()) return e;
    } else {
      *p = std::aligned_alloc(4096, n);
      if (*p == nullptr) return "out of host memory for the buffers";
    }
  }
  if (!device) {
    // First-touch page faults belong to setup, not to the first timed call.
    std::memset(send_, 0, n);
    std::memset(recv_, 0, n);
  }
  if (registered && device) {
    // Device buffers: windows (collective), so that device calls run zero-copy plans on them.
    if (tsrCommWindowRegister(comm, send_, n, &sendWin_, TSR_WIN_COLL_SYMMETRIC) != tsrSuccess ||
        tsrCommWindowRegister(comm, recv_, n, &recvWin_, TSR_WIN_COLL_SYMMETRIC) != tsrSuccess)
      return std::string("tsrCommWindowRegister: ") + tsrGetLastError(comm);
  } else if (registered) {
    if (tsrCommRegister(comm, send_, n, &sendHandle_) != tsrSuccess ||
        tsrCommRegister(comm, recv_, n, &recvHandle_) != tsrSuccess)
      return std::string("tsrCommRegister: ") + tsrGetLastError(comm);
  }
  return "";
}

std::string RankBuffers::fillRegion(void* dst, size_t bytes,
                                    const std::function<void(void*)>& fill) {
  if (!device_) {
    fill(dst);
    return "";
  }
  staging_.resize(std::max<size_t>(bytes, 1));
  fill(staging_.data());
  return cudaCopy(dst, staging_.data(), bytes, true, stream_);
}

std::string RankBuffers::viewRegion(const void* src, size_t bytes, const void** host) {
  if (!device_) {
    *host = src;
    return "";
  }
  staging_.resize(std::max<size_t>(bytes, 1));
  *host = staging_.data();
  return cudaCopy(staging_.data(), src, bytes, false, stream_);
}

}  // namespace tessera::perf
