// Ranks of the collective perf binaries: threads of this process (-t), MPI processes (when
// launched by mpirun or asked for --baseline mpi), or both (global rank = process * threads +
// thread). Thread 0 of each process runs on the main thread and is the only one that calls MPI,
// so MPI_THREAD_FUNNELED is all that is needed.
#pragma once

#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coll_perf_options.hpp"
#include "tessera/tessera.h"

namespace tessera::perf {

struct World {
  bool mpi = false;  // MPI_Init was called (and MPI_Finalize is due)
  int proc = 0;
  int nprocs = 1;
  int threads = 1;
  int localProc = 0;  // index among the processes of this host (the CUDA device to pick)
  int nranks() const { return nprocs * threads; }
};

// Initializes MPI when this process was launched by an MPI launcher (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_RANK) or the options ask for the MPI baseline. Returns false with `why` when
// that needs MPI and this build has none.
bool worldInit(int* argc, char*** argv, const Options& o, World* out, std::string* why);
void worldFinalize(const World& w);
// The largest of every process's `status` (its own without MPI); called by the main thread only.
int worldAgree(const World& w, int status);

// What the ranks of all processes do together: barriers and reductions of one value.
class RankGroup {
 public:
  explicit RankGroup(const World& w);
  void barrier(int thread);
  // Every rank passes a value and every rank gets the result over all ranks.
  double sum(int thread, double v) { return reduce(thread, v, kSum); }
  double min(int thread, double v) { return reduce(thread, v, kMin); }
  double max(int thread, double v) { return reduce(thread, v, kMax); }
  // Rank 0's value, to every rank.
  double fromRank0(int thread, double v) { return reduce(thread, v, kFirst); }

 private:
  enum How { kSum, kMin, kMax, kFirst };
  double reduce(int thread, double v, How how);
  World world_;
  std::barrier<> local_;
  std::vector<double> slots_;
  double result_ = 0;
};

// "#  Rank  0 Group  0 Pid  1234 on host device  -1 [host]" for every rank, gathered on rank 0
// (empty elsewhere). `devices[t]`: the CUDA device of thread t's rank, or -1.
std::vector<std::string> gatherRankLines(const World& w, const std::vector<int>& devices);

// Broadcasts a unique id from process 0 to every process (MPI only).
void broadcastUniqueId(const World& w, tsrUniqueId* id);

// Buffers of one rank: send and receive, each `bytes`, host or device, plain or registered
// (-R 1: host buffers tsrMemAlloc'ed and registered with tsrCommRegister; device buffers made
// windows with tsrCommWindowRegister, collectively). Device buffers are filled and read through a
// host staging copy, on the rank's stream, and allocated and freed stream-ordered (cudaMallocAsync
// / cudaFreeAsync): a plain cudaFree waits for the whole device, which never goes idle while a
// communicator's resident kernel runs.
class RankBuffers {
 public:
  RankBuffers() = default;
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  // Returns "" or why it failed.
  // `stream`: the rank's CUDA stream (device buffers; null otherwise).
  std::string allocate(tsrComm_t comm, size_t bytes, bool device, bool registered, void* stream);
  void* send() const { return send_; }
  void* recv() const { return recv_; }
  // Runs `fill` on a host view of [dst, dst + bytes) (dst inside this rank's buffers), which then
  // becomes the buffer's content. Returns "" or why it failed.
  std::string fillRegion(void* dst, size_t bytes, const std::function<void(void*)>& fill);
  // A host view of [src, src + bytes), valid until the next call on this object.
  std::string viewRegion(const void* src, size_t bytes, const void** host);

 private:
  void release();
  tsrComm_t comm_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* sendHandle_ = nullptr;
  void* recvHandle_ = nullptr;
  tsrWindow_t sendWin_ = nullptr;
  tsrWindow_t recvWin_ = nullptr;
  bool device_ = false;
  bool memAlloc_ = false;
  void* stream_ = nullptr;
  std::vector<unsigned char> staging_;
};

// The CUDA side (coll_perf_device.cpp); without CUDA they report that. Nothing here waits for
// the whole device (no cudaDeviceSynchronize, no plain cudaFree): only for one stream.
int cudaDevices(std::string* why);
std::string cudaSelect(int device);
// A non-blocking stream of the current device (the legacy default stream never waits for it).
std::string cudaStreamMake(void** stream);
void cudaStreamFree(void* stream);
std::string cudaStreamWait(void* stream);
std::string cudaAllocate(void** ptr, size_t bytes, void* stream);
void cudaRelease(void* ptr, void* stream);
std::string cudaCopy(void* dst, const void* src, size_t bytes, bool toDevice, void* stream);
// -G: captures what `record` puts on `stream` into a graph (*exec), launches it, frees it.
std::string cudaGraphRecord(void* stream, const std::function<void()>& record, void** exec);
std::string cudaGraphRun(void* exec, void* stream);
void cudaGraphFree(void* exec);
// Whether `ptr` is device memory (false without CUDA).
bool cudaIsDevicePointer(const void* ptr);

}  // namespace tessera::perf
