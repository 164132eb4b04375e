// tessera_tune's parts (tessera_tune.cpp: options, the family measurements, the file;
// tessera_tune_links.cpp: the cost model's parameters).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "collectives/tuner/tuner.hpp"
#include "tessera/tessera.h"

namespace tessera::tune {

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

}  // namespace tessera::tune
