// Which CUDA calls block while a kernel runs (issue 28, Part A 5; DESIGN.md, "Known hazards").
//
// A persistent kernel never ends on its own, so any call that waits for an idle device (or
// context) never returns while one runs. This program asks the GPU instead of the documentation:
// a "spinner" kernel (one CTA) spins on a host-mapped flag, and another host thread times each
// call of the list below. A call that has not returned within --block-ms is reported as BLOCKS;
// the flag is then raised, the spinner ends, the call's real return time is recorded, and a new
// spinner starts for the next call. Where the spinner runs:
//   thread   another thread of this process (the thread ranks' case: one context)
//   process  another process on the same GPU (the cross-process case: two contexts, time-sliced
//            unless MPS runs)
// The spinner ends by itself after --spin-s seconds (read off %globaltimer), so nothing here can
// hang the GPU. Output: one line per call and place, then a table; exit code 0 when every call
// was probed (a BLOCKS is a finding, not a failure).
//
// Usage: blocking_probe [--block-ms 500] [--spin-s 20] [--where thread,process]
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

double nowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until *flag != 0 or `ns` nanoseconds passed; sets *started first so the host knows it
// runs.
__global__ void spinner(volatile unsigned* flag, volatile unsigned* started,
                        unsigned long long ns) {
  const unsigned long long t0 = globalTimer();
  *started = 1;
  __threadfence_system();
  while (*flag == 0 && globalTimer() - t0 < ns) {
  }
}

// A kernel with a large stack frame (more than 1 KiB of local memory per thread): its first
// launch may make the driver grow the context's local-memory reservation.
__global__ void bigLocal(int* out, int n) {
  volatile int buf[640];  // 2.5 KiB per thread
  for (int i = 0; i < 640; ++i) buf[i] = i * n;
  int s = 0;
  for (int i = 0; i < 640; i += 7) s += buf[(i * 13) % 640];
  if (out != nullptr) out[threadIdx.x] = s;
}

__global__ void tiny(int* p) {
  if (p != nullptr) *p = 1;
}

// Launched first while a spinner runs: with lazy module loading its function is loaded then.
__global__ void lazyOnly(int* p) {
  if (p != nullptr) *p = 2;
}

// Driver entry points (the library never links libcuda either).
struct Drv {
  decltype(&cuMemCreate) memCreate = nullptr;
  decltype(&cuMemRelease) memRelease = nullptr;
  decltype(&cuMemAddressReserve) memAddressReserve = nullptr;
  decltype(&cuMemAddressFree) memAddressFree = nullptr;
  decltype(&cuMemMap) memMap = nullptr;
  decltype(&cuMemUnmap) memUnmap = nullptr;
  decltype(&cuMemSetAccess) memSetAccess = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuStreamWaitValue32) waitValue32 = nullptr;
};

template <typename F>
void entry(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    *fn = reinterpret_cast<F>(p);
}

Drv loadDrv() {
  Drv d;
  entry("cuMemCreate", &d.memCreate);
  entry("cuMemRelease", &d.memRelease);
  entry("cuMemAddressReserve", &d.memAddressReserve);
  entry("cuMemAddressFree", &d.memAddressFree);
  entry("cuMemMap", &d.memMap);
  entry("cuMemUnmap", &d.memUnmap);
  entry("cuMemSetAccess", &d.memSetAccess);
  entry("cuMemGetAllocationGranularity", &d.granularity);
  entry("cuStreamWaitValue32", &d.waitValue32);
  return d;
}

struct Options {
  double blockMs = 500;
  double spinS = 20;
  std::vector<std::string> where{"thread", "process"};
};

// A spinner somewhere: start() launches it and returns once it runs, release() ends it and waits.
class Spinner {
 public:
  virtual ~Spinner() = default;
  virtual bool start() = 0;
  virtual void release() = 0;
};

class ThreadSpinner final : public Spinner {
 public:
  explicit ThreadSpinner(double spinS) : ns_(static_cast<unsigned long long>(spinS * 1e9)) {
    void* w = nullptr;
    CK(cudaHostAlloc(&w, 64, cudaHostAllocMapped));
    words_ = static_cast<volatile unsigned*>(w);
    CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~ThreadSpinner() override {
    cudaStreamDestroy(stream_);
    cudaFreeHost(const_cast<unsigned*>(words_));
  }
  bool start() override {
    words_[0] = 0;
    words_[1] = 0;
    spinner<<<1, 32, 0, stream_>>>(words_, words_ + 1, ns_);
    if (cudaGetLastError() != cudaSuccess) return false;
    const double t0 = nowS();
    while (words_[1] == 0)
      if (nowS() - t0 > 10) return false;
    return true;
  }
  void release() override {
    words_[0] = 1;
    cudaStreamSynchronize(stream_);
  }

 private:
  volatile unsigned* words_ = nullptr;
  cudaStream_t stream_ = nullptr;
  unsigned long long ns_;
};

// The spinner in a child process: it starts a spinner when it reads 's' on its pipe, answers 'r'
// once the kernel runs, ends it on 'e' and answers 'd'; 'q' quits. The child is forked before this
// process touches CUDA.
class ProcessSpinner final : public Spinner {
 public:
  explicit ProcessSpinner(double spinS) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) std::exit(2);
    pid_ = fork();
    if (pid_ == 0) {
      close(down[1]);
      close(up[0]);
      ThreadSpinner s(spinS);
      char c;
      while (read(down[0], &c, 1) == 1) {
        char a = 'x';
        if (c == 's') a = s.start() ? 'r' : 'f';
        if (c == 'e') {
          s.release();
          a = 'd';
        }
        if (c == 'q') break;
        if (write(up[1], &a, 1) != 1) break;
      }
      _exit(0);
    }
    close(down[0]);
    close(up[1]);
    to_ = down[1];
    from_ = up[0];
  }
  ~ProcessSpinner() override {
    char q = 'q';
    if (write(to_, &q, 1) != 1) kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    close(to_);
    close(from_);
  }
  bool start() override { return ask('s') == 'r'; }
  void release() override { (void)ask('e'); }

 private:
  char ask(char c) {
    char a = 0;
    if (write(to_, &c, 1) != 1 || read(from_, &a, 1) != 1) return 0;
    return a;
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

struct Probe {
  std::string name;
  std::function<void()> before;  // untimed set-up (no spinner running)
  std::function<cudaError_t()> call;
  std::function<void()> after;  // untimed clean-up
};

struct Row {
  std::string where, name, verdict;
  double ms = 0;
  std::string error;
};

std::vector<Probe> makeProbes(const Drv& d, cudaStream_t other) {
  static void* p = nullptr;
  static void* h = nullptr;
  static void* pageable = nullptr;
  static void* dev = nullptr;
  static CUmemGenericAllocationHandle vh = 0;
  static CUdeviceptr va = 0;
  static size_t gran = 0;
  static CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (d.granularity) d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  const size_t mb = size_t{1} << 20;
  auto cu = [](CUresult r) { return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown; };
  std::vector<Probe> v;
  v.push_back({"cudaMalloc 1 MiB", nullptr, [] { return cudaMalloc(&p, size_t{1} << 20); },
               [] { cudaFree(p); }});
  v.push_back({"cudaFree 1 MiB", [] { cudaMalloc(&p, size_t{1} << 20); },
               [] { return cudaFree(p); }, nullptr});
  v.push_back({"cudaMalloc 1 GiB", nullptr, [] { return cudaMalloc(&p, size_t{1} << 30); },
               [] { cudaFree(p); }});
  v.push_back({"cudaFree 1 GiB", [] { cudaMalloc(&p, size_t{1} << 30); },
               [] { return cudaFree(p); }, nullptr});
  v.push_back({"cudaFree(nullptr)", nullptr, [] { return cudaFree(nullptr); }, nullptr});
  // What starts a context instead (transport/cuda_ipc: CudaDeviceGuard), on the probe's new thread.
  v.push_back({"cudaSetDevice(0) (new thread)", nullptr, [] { return cudaSetDevice(0); }, nullptr});
  v.push_back({"cudaInitDevice(0)", nullptr, [] { return cudaInitDevice(0, 0, 0); }, nullptr});
  v.push_back({"cudaHostAlloc mapped 1 MiB", nullptr,
               [] { return cudaHostAlloc(&h, size_t{1} << 20, cudaHostAllocMapped); },
               [] { cudaFreeHost(h); }});
  v.push_back({"cudaFreeHost 1 MiB",
               [] { cudaHostAlloc(&h, size_t{1} << 20, cudaHostAllocMapped); },
               [] { return cudaFreeHost(h); }, nullptr});
  v.push_back({"cudaHostRegister 1 MiB", [] { pageable = std::malloc(size_t{1} << 20); },
               [] {
                 return cudaHostRegister(pageable, size_t{1} << 20,
                                         cudaHostRegisterPortable | cudaHostRegisterMapped);
               },
               [] {
                 cudaHostUnregister(pageable);
                 std::free(pageable);
               }});
  v.push_back({"cudaHostUnregister 1 MiB",
               [] {
                 pageable = std::malloc(size_t{1} << 20);
                 cudaHostRegister(pageable, size_t{1} << 20,
                                  cudaHostRegisterPortable | cudaHostRegisterMapped);
               },
               [] { return cudaHostUnregister(pageable); }, [] { std::free(pageable); }});
  if (d.memCreate && gran > 0) {
    const size_t sz = ((2 * mb + gran - 1) / gran) * gran;
    v.push_back({"cuMemCreate+Reserve+Map+SetAccess 2 MiB", nullptr,
                 [&d, cu, sz] {
                   CUresult r = d.memCreate(&vh, sz, &prop, 0);
                   if (r == CUDA_SUCCESS) r = d.memAddressReserve(&va, sz, gran, 0, 0);
                   if (r == CUDA_SUCCESS) r = d.memMap(va, sz, 0, vh, 0);
                   CUmemAccessDesc a{};
                   a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   a.location.id = 0;
                   a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                   if (r == CUDA_SUCCESS) r = d.memSetAccess(va, sz, &a, 1);
                   return cu(r);
                 },
                 [&d, sz] {
                   d.memUnmap(va, sz);
                   d.memAddressFree(va, sz);
                   d.memRelease(vh);
                 }});
    v.push_back({"cuMemUnmap+AddressFree+Release 2 MiB",
                 [&d, sz] {
                   d.memCreate(&vh, sz, &prop, 0);
                   d.memAddressReserve(&va, sz, gran, 0, 0);
                   d.memMap(va, sz, 0, vh, 0);
                   CUmemAccessDesc a{};
                   a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   a.location.id = 0;
                   a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                   d.memSetAccess(va, sz, &a, 1);
                 },
                 [&d, cu, sz] {
                   CUresult r = d.memUnmap(va, sz);
                   if (r == CUDA_SUCCESS) r = d.memAddressFree(va, sz);
                   if (r == CUDA_SUCCESS) r = d.memRelease(vh);
                   return cu(r);
                 },
                 nullptr});
  }
  if (d.memCreate && gran > 0) {
    // The import path releases its handle right after mapping (the mapping keeps the memory).
    const size_t sz = ((2 * mb + gran - 1) / gran) * gran;
    v.push_back({"cuMemRelease of a mapped handle (mapping kept)",
                 [&d, sz] {
                   d.memCreate(&vh, sz, &prop, 0);
                   d.memAddressReserve(&va, sz, gran, 0, 0);
                   d.memMap(va, sz, 0, vh, 0);
                 },
                 [&d, cu] { return cu(d.memRelease(vh)); },
                 [&d, sz] {
                   d.memUnmap(va, sz);
                   d.memAddressFree(va, sz);
                 }});
  }
  v.push_back({"cudaMallocAsync+cudaFreeAsync (other stream) + its sync", nullptr,
               [other] {
                 cudaError_t e = cudaMallocAsync(&dev, size_t{1} << 20, other);
                 if (e == cudaSuccess) e = cudaFreeAsync(dev, other);
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               nullptr});
  v.push_back({"cudaFreeAsync of cudaMalloc memory + its sync",
               [] { cudaMalloc(&dev, size_t{1} << 20); },
               [other] {
                 cudaError_t e = cudaFreeAsync(dev, other);
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               nullptr});
  v.push_back({"cudaMemcpy pageable H2D 1 MiB (legacy stream)",
               [] {
                 pageable = std::malloc(size_t{1} << 20);
                 cudaMalloc(&dev, size_t{1} << 20);
               },
               [] { return cudaMemcpy(dev, pageable, size_t{1} << 20, cudaMemcpyHostToDevice); },
               [] {
                 cudaFree(dev);
                 std::free(pageable);
               }});
  v.push_back({"cudaMemcpyAsync pageable H2D 1 MiB (other stream) + sync",
               [] {
                 pageable = std::malloc(size_t{1} << 20);
                 cudaMalloc(&dev, size_t{1} << 20);
               },
               [other] {
                 cudaError_t e =
                     cudaMemcpyAsync(dev, pageable, size_t{1} << 20, cudaMemcpyHostToDevice, other);
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               [] {
                 cudaFree(dev);
                 std::free(pageable);
               }});
  v.push_back({"launch tiny kernel (other stream) + sync", nullptr,
               [other] {
                 tiny<<<1, 1, 0, other>>>(nullptr);
                 cudaError_t e = cudaGetLastError();
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               nullptr});
  v.push_back({"first launch of a kernel not loaded yet (other stream) + sync", nullptr,
               [other] {
                 lazyOnly<<<1, 1, 0, other>>>(nullptr);
                 cudaError_t e = cudaGetLastError();
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               nullptr});
  v.push_back({"launch kernel with 2.5 KiB local memory (other stream) + sync",
               [] {
                 cudaFuncAttributes a;
                 cudaFuncGetAttributes(&a, bigLocal);  // loaded: only the local memory is new
               },
               [other] {
                 bigLocal<<<132, 1024, 0, other>>>(nullptr, 3);
                 cudaError_t e = cudaGetLastError();
                 if (e == cudaSuccess) e = cudaStreamSynchronize(other);
                 return e;
               },
               nullptr});
  v.push_back({"cudaStreamCreate+Destroy", nullptr,
               [] {
                 cudaStream_t s;
                 cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
                 if (e == cudaSuccess) e = cudaStreamDestroy(s);
                 return e;
               },
               nullptr});
  v.push_back({"cudaEventCreate+Destroy", nullptr,
               [] {
                 cudaEvent_t ev;
                 cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
                 if (e == cudaSuccess) e = cudaEventDestroy(ev);
                 return e;
               },
               nullptr});
  v.push_back({"cudaIpcGetMemHandle", [] { cudaMalloc(&dev, size_t{1} << 20); },
               [] {
                 cudaIpcMemHandle_t hnd;
                 return cudaIpcGetMemHandle(&hnd, dev);
               },
               [] { cudaFree(dev); }});
  v.push_back({"cudaDeviceSynchronize (control: expected to block in-thread)", nullptr,
               [] { return cudaDeviceSynchronize(); }, nullptr});
  return v;
}

Row runOne(Spinner& sp, const Probe& pr, const std::string& where, double blockMs) {
  Row row{where, pr.name, "", 0, ""};
  if (pr.before) pr.before();
  cudaGetLastError();
  if (!sp.start()) {
    row.verdict = "NO-SPINNER";
    if (pr.after) pr.after();
    return row;
  }
  std::atomic<int> done{0};
  cudaError_t err = cudaSuccess;
  double t0 = nowS(), t1 = 0;
  std::thread th([&] {
    err = pr.call();
    t1 = nowS();
    done.store(1);
  });
  while (!done.load() && (nowS() - t0) * 1e3 < blockMs)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const bool blocked = !done.load();
  sp.release();
  th.join();
  row.ms = (t1 - t0) * 1e3;
  row.verdict = blocked ? "BLOCKS" : "returns";
  if (err != cudaSuccess) row.error = cudaGetErrorString(err);
  if (pr.after) pr.after();
  cudaGetLastError();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--block-ms")
      o.blockMs = std::atof(next().c_str());
    else if (a == "--spin-s")
      o.spinS = std::atof(next().c_str());
    else if (a == "--where") {
      o.where.clear();
      std::string w = next();
      for (size_t s = 0; s <= w.size();) {
        size_t e = w.find(',', s);
        if (e == std::string::npos) e = w.size();
        o.where.push_back(w.substr(s, e - s));
        s = e + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--block-ms MS] [--spin-s S] [--where thread,process]\n",
                   argv[0]);
      return 2;
    }
  }
  // The process spinner forks before this process touches CUDA.
  std::unique_ptr<Spinner> procSpinner;
  for (const std::string& w : o.where)
    if (w == "process") procSpinner = std::make_unique<ProcessSpinner>(o.spinS);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("blocking_probe: skipped: no usable CUDA device\n");
    return 0;
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  const char* lazy = std::getenv("CUDA_MODULE_LOADING");
  std::printf(
      "blocking_probe: device 0, CUDA_MODULE_LOADING=%s, a call still running after %.0f ms "
      "BLOCKS\n",
      lazy ? lazy : "(unset)", o.blockMs);
  const Drv d = loadDrv();
  cudaStream_t other;
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  // Load the probe's own kernels (and warm every call once) before any spinner runs.
  tiny<<<1, 1, 0, other>>>(nullptr);
  CK(cudaStreamSynchronize(other));
  std::vector<Probe> probes = makeProbes(d, other);
  std::vector<Row> rows;
  for (const std::string& w : o.where) {
    std::unique_ptr<Spinner> local;
    Spinner* sp = nullptr;
    if (w == "thread") {
      local = std::make_unique<ThreadSpinner>(o.spinS);
      sp = local.get();
    } else if (w == "process") {
      sp = procSpinner.get();
    } else {
      std::fprintf(stderr, "unknown --where %s\n", w.c_str());
      return 2;
    }
    for (const Probe& pr : probes) {
      // cudaDeviceSynchronize waits for the other process's kernel only under MPS; keep it.
      Row r = runOne(*sp, pr, w, o.blockMs);
      std::printf("%-8s %-62s %-10s %9.1f ms %s\n", r.where.c_str(), r.name.c_str(),
                  r.verdict.c_str(), r.ms, r.error.c_str());
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  std::printf("\nblocking_probe summary (spinner in another thread / another process):\n");
  std::printf("%-62s %-10s %-10s\n", "call", "thread", "process");
  for (const Probe& pr : probes) {
    std::string t = "-", p = "-";
    for (const Row& r : rows) {
      if (r.name != pr.name) continue;
      (r.where == "thread" ? t : p) = r.verdict + (r.error.empty() ? "" : "*");
    }
    std::printf("%-62s %-10s %-10s\n", pr.name.c_str(), t.c_str(), p.c_str());
  }
  std::printf("(* the call returned an error; see its line above)\n");
  return 0;
}
