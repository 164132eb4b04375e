// tessera_tune --device, the family measurements on device buffers: n thread ranks sharing GPU 0
// (tsrCommInitAll), a communicator set per family (TESSERA_ALGO while its engines are made), the
// device executor's own defaults (grid, scratch), one non-blocking stream per rank. Per size, the
// families in turn over rounds as on the host (tessera_tune_families.cpp): as many calls as fill
// -m milliseconds, enqueued on every rank's stream at once, timed from a common start to the last
// stream's end, the median over rounds. The table's sets for these carry transport p2p (the ranks
// of one process reach each other's GPU memory through it), which the tuner reads only for device
// calls over p2p (tuner.cpp, measuredPoint).
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "core/build_config.hpp"
#include "core/status.hpp"
#include "tessera_tune.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::tune {

#if TESSERA_HAVE_CUDA
namespace {

tsrResult_t deviceCall(Collective c, const void* in, void* out, size_t count, tsrComm_t comm,
                       cudaStream_t s) {
  auto st = static_cast<tsrStream_t>(s);
  switch (c) {
    case Collective::kAllReduce: return tsrAllReduce(in, out, count, tsrFloat32, tsrSum, comm, st);
    case Collective::kAllGather: return tsrAllGather(in, out, count, tsrFloat32, comm, st);
    case Collective::kReduceScatter:
      return tsrReduceScatter(in, out, count, tsrFloat32, tsrSum, comm, st);
    case Collective::kBroadcast: return tsrBroadcast(in, out, count, tsrFloat32, 0, comm, st);
    case Collective::kReduce: return tsrReduce(in, out, count, tsrFloat32, tsrSum, 0, comm, st);
    case Collective::kAllToAll: return tsrAlltoAll(in, out, count, tsrFloat32, comm, st);
  }
  return tsrInvalidArgument;
}

std::string cudaText(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// Runs body(rank) on n threads (GPU 0 current on each); the first failure, or "".
std::string onRanks(int n, const std::function<std::string(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaError_t e = cudaSetDevice(0);
      errors[static_cast<size_t>(r)] = e != cudaSuccess ? cudaText("cudaSetDevice", e) : body(r);
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<size_t>(r)].empty())
      return "rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)];
  return "";
}

}  // namespace

std::string measureDeviceFamilies(const Options& o, int n, Shared* sh) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    (void)cudaGetLastError();
    return "--device: no usable GPU here";
  }
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) return cudaText("cudaSetDevice", e);
  const auto& all = algorithms();
  const size_t un = static_cast<size_t>(n);
  const size_t maxElems = static_cast<size_t>(o.maxBytes / sizeof(float)) + 64;
  // Streams and buffers before any communicator, stream-ordered (a plain cudaFree would wait for
  // the resident grids).
  std::vector<cudaStream_t> streams(un, nullptr);
  std::vector<void*> in(un, nullptr), out(un, nullptr);
  std::string err;
  for (size_t r = 0; r < un && err.empty(); ++r) {
    cudaError_t e = cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMallocAsync(&in[r], maxElems * sizeof(float), streams[r]);
    if (e == cudaSuccess) e = cudaMallocAsync(&out[r], maxElems * sizeof(float), streams[r]);
    if (e == cudaSuccess) e = cudaMemsetAsync(in[r], 0, maxElems * sizeof(float), streams[r]);
    if (e == cudaSuccess) e = cudaStreamSynchronize(streams[r]);
    if (e != cudaSuccess) err = cudaText("setting up the buffers", e);
  }
  // A communicator set per family that generates one of the collectives on one host, its
  // engines made (and TESSERA_ALGO read) by a first call on every rank.
  std::vector<std::vector<tsrComm_t>> comms(all.size());
  for (size_t f = 0; f < all.size() && err.empty(); ++f) {
    Collective first{};
    bool any = false;
    for (Collective c : o.collectives)
      if (generatesOnOneHost(all[f], c) && !any) first = c, any = true;
    if (!any) continue;
    comms[f].assign(un, nullptr);
    std::vector<int> devs(un, 0);
    // Simple only: the tuner would give small calls LL whatever the family, and LL is priced by
    // the model, not by this table.
    setenv("TESSERA_ALGO", all[f].name, 1);
    setenv("TESSERA_PROTO", "Simple", 1);
    if (tsrCommInitAll(comms[f].data(), n, devs.data()) != tsrSuccess) {
      err = std::string("tsrCommInitAll: ") + tsrGetLastError(nullptr);
      comms[f].clear();
    } else {
      err = onRanks(n, [&](int r) -> std::string {
        const size_t ur = static_cast<size_t>(r);
        if (deviceCall(first, in[ur], out[ur], 1, comms[f][ur], streams[ur]) != tsrSuccess)
          return std::string(all[f].name) + ": " + tsrGetLastError(comms[f][ur]);
        cudaError_t e = cudaStreamSynchronize(streams[ur]);
        return e == cudaSuccess ? "" : cudaText("cudaStreamSynchronize", e);
      });
    }
    unsetenv("TESSERA_ALGO");
    unsetenv("TESSERA_PROTO");
  }
  // `calls` calls of family f on every rank at once; the seconds from their common start to the
  // last stream's end.
  auto timed = [&](size_t f, Collective c, size_t count, int calls, double* seconds) {
    std::vector<double> ends(un, 0);
    const double t0 = nowSeconds();
    std::string e = onRanks(n, [&](int r) -> std::string {
      const size_t ur = static_cast<size_t>(r);
      for (int j = 0; j < calls; ++j)
        if (deviceCall(c, in[ur], out[ur], count, comms[f][ur], streams[ur]) != tsrSuccess)
          return std::string(all[f].name) + ": " + tsrGetLastError(comms[f][ur]);
      cudaError_t ce = cudaStreamSynchronize(streams[ur]);
      ends[ur] = nowSeconds();
      return ce == cudaSuccess ? "" : cudaText("cudaStreamSynchronize", ce);
    });
    *seconds = *std::max_element(ends.begin(), ends.end()) - t0;
    return e;
  };
  for (Collective c : o.collectives) {
    if (!err.empty()) break;
    std::vector<size_t> fams;
    for (size_t f = 0; f < all.size(); ++f)
      if (generatesOnOneHost(all[f], c) && !comms[f].empty()) fams.push_back(f);
    if (fams.size() < 2) continue;
    for (uint64_t b : sizeLadder(o)) {
      const size_t count = countFor(c, b, n);
      const uint64_t bytes = callBytesOf(c, count, n);
      if (bytes > o.maxBytes) break;
      double probe = 0;
      if (!(err = timed(fams[0], c, count, 1, &probe)).empty()) break;
      const int calls =
          static_cast<int>(std::clamp(o.targetMs * 1e-3 / std::max(probe, 1e-7), 1.0, 20000.0));
      std::vector<std::vector<double>> us(fams.size());
      for (int round = 0; round < o.rounds && err.empty(); ++round) {
        for (size_t k = 0; k < fams.size() && err.empty(); ++k) {
          const size_t i = (k + static_cast<size_t>(round)) % fams.size();
          double warm = 0, t = 0;
          err = timed(fams[i], c, count, 1, &warm);
          if (err.empty()) err = timed(fams[i], c, count, calls, &t);
          us[i].push_back(t / calls * 1e6);
        }
      }
      if (!err.empty()) break;
      for (size_t i = 0; i < fams.size(); ++i) {
        std::sort(us[i].begin(), us[i].end());
        if (sh->count >= kMaxEntries) {
          err = "too many measurements for the table";
          break;
        }
        sh->e[sh->count++] = Entry{static_cast<int>(c), n, static_cast<int>(fams[i]), bytes,
                                   us[i][us[i].size() / 2]};
      }
    }
  }
  for (std::vector<tsrComm_t>& set : comms)
    for (tsrComm_t comm : set)
      if (comm != nullptr) tsrCommDestroy(comm);
  for (size_t r = 0; r < un; ++r) {
    if (streams[r] == nullptr) continue;
    for (void* p : {in[r], out[r]})
      if (p != nullptr) (void)cudaFreeAsync(p, streams[r]);
    (void)cudaStreamSynchronize(streams[r]);
    (void)cudaStreamDestroy(streams[r]);
  }
  return err;
}

#else

std::string measureDeviceFamilies(const Options&, int, Shared*) {
  return "--device: this build has no CUDA";
}

#endif

}  // namespace tessera::tune
