// tessera_tune's parts (tessera_tune.cpp: options, the run and the file;
// tessera_tune_families.cpp: the family measurements; tessera_tune_links.cpp: the cost model's
// parameters).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"
#include "tessera/tessera.h"

namespace tessera::tune {

// Calls from this size on run the zero-copy handshake, where cross-memory attach may apply
// (TESSERA_ZERO_COPY_MIN_BYTES' default).
inline constexpr uint64_t kCrossMinBytes = 256 << 10;

struct Options {
  std::vector<int> nranks{2, 4};
  std::vector<Collective> collectives{Collective::kAllReduce, Collective::kAllGather,
                                      Collective::kReduceScatter, Collective::kBroadcast,
                                      Collective::kReduce};
  uint64_t minBytes = 8, maxBytes = uint64_t{256} << 20;
  double factor = 4;
  int rounds = 5;
  double targetMs = 40;
  std::string out;
  // Tuner files for the measuring communicators, both with the measured parameters (so that each
  // family gets the pipeline it will get from the file written): `stagedFile` never prefers
  // cross-memory attach, `crossFile` asks for it at every large size ("" where it is refused).
  std::string stagedFile, crossFile;
  // --device: thread ranks on GPU 0 with device buffers (tessera_tune_device.cpp) instead of
  // processes over shm; the sets go into the file beside its host sets (transport p2p).
  bool device = false;
};

// One measurement: the median time of a family (-1: cross-memory attach) at one size.
struct Entry {
  int coll, nranks, family;
  uint64_t bytes;
  double us;
};
// The measurements of every rank count, recorded by rank 0 of each into a MAP_SHARED page the
// parent reads; `error` holds the first failing rank's sentence.
inline constexpr int kMaxEntries = 8192;
struct Shared {
  int count;
  Entry e[kMaxEntries];
  char error[2048];
};

// Unique ids for ranks forked from this process, made by rank 0 after the fork and passed on in
// shared memory: the parent starts no root thread before it forks (a child inherits every lock
// another thread held at the fork, and not every allocator releases its own; ASan's did not).
// Lives in a MAP_SHARED page made before the fork, zeroed.
struct SharedIds {
  static constexpr int kMax = 64;
  std::atomic<int> state;  // 0: not yet, 1: ready, -1: rank 0 could not make them
  tsrUniqueId ids[kMax];
  char why[512];
};
// Rank 0 makes `count` ids (tsrGetUniqueId) and publishes them; the other ranks wait for them
// (at most timeoutSeconds). "" or why not.
std::string shareIds(SharedIds* s, int rank, int count, std::vector<tsrUniqueId>* out,
                     double timeoutSeconds);

// Measures alpha and beta of shm (two processes) and inproc (two threads), cross-memory attach,
// the reduction rate and the call overhead into *params; *report is a line saying what it found.
// "" or what failed.
std::string measureLinks(TunerParams* params, std::string* report);

// Forks `n` ranks that measure every family of o.collectives at every size into *sh. "" or why not.
std::string measureFamilies(const Options& o, int n, Shared* sh);

// The same on device buffers: n thread ranks sharing GPU 0 (tessera_tune_device.cpp). "" or why
// not (no GPU, a build without CUDA).
std::string measureDeviceFamilies(const Options& o, int n, Shared* sh);

// Shared by both measurements (tessera_tune_families.cpp): whether family `a` generates `c` on
// one host; the sizes from o.minBytes to o.maxBytes, times o.factor, and o.maxBytes itself; the
// elements per rank for a call of about `bytes` as nccl-tests counts them (at least one), and
// the bytes such a call counts.
bool generatesOnOneHost(const AlgorithmInfo& a, Collective c);
std::vector<uint64_t> sizeLadder(const Options& o);
size_t countFor(Collective c, uint64_t bytes, int n);
uint64_t callBytesOf(Collective c, size_t count, int n);

// Seconds on a monotonic clock.
double nowSeconds();

}  // namespace tessera::tune
