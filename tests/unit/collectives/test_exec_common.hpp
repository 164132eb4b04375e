// Shared by the engine tests (test_exec_*.cpp): an engine per rank over the rank's
// TransportContext, calls run to completion, and a serial reference computed outside the engine
// (core's reduceAllHost over every rank's regenerated input).
//
// Inputs are small integers (exact in float32 and int32 alike), so sums, products, min, max, avg
// and premulsum by 2 are exact whatever order an algorithm combines them in: results must match
// the reference bit for bit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/engine.hpp"
#include "transport/context.hpp"

namespace tessera::exectest {

struct EngineSetup {
  size_t scratchBytes = 64 << 10;
  double timeoutSeconds = 20;
  // Host index of each rank (empty: one host); hier needs more than one.
  std::vector<int> hostOf;
};

Result makeEngine(TransportContext& ctx, const EngineSetup& setup,
                  std::unique_ptr<CollectiveEngine>* out);

// Runs body on `processes` forked processes of `threadsPerProcess` thread ranks each (rank =
// process * threadsPerProcess + thread; tcp bootstrap over loopback), so that a rank has peers over
// inproc and peers over shm at once. One sentence per rank, "" for success (as
// test::runTransportRanks).
std::vector<std::string> runMixedRanks(
    int processes, int threadsPerProcess,
    const std::function<std::string(TransportContext& ctx)>& body, double runSeconds = 60);

// Starts the call and drives it to completion.
Result runCall(CollectiveEngine& e, const CollCall& call, double timeoutSeconds = 20);
// The same for a send/recv group.
Result runP2P(CollectiveEngine& e, const std::vector<P2PCall>& calls, double timeoutSeconds = 20);

// One collective call and how to check it.
// A plan family and a collective it generates: a row of the tests' case lists.
struct FamilyColl {
  const char* family;  // "" lets the tuner choose
  Collective coll;
};

struct CollCase {
  Collective coll = Collective::kAllReduce;
  std::string algorithm;  // "" lets the tuner choose
  tsrDataType_t dtype = tsrFloat32;
  RedKind op = RedKind::kSum;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
  int salt = 0;
  // Zero-copy: user buffers come from `alloc` and are registered with the engine first.
  bool registerBuffers = false;
  bool sharedAlloc = false;  // tsrMemAlloc-style shareable memory instead of malloc
};
std::string caseName(const CollCase& c, int nranks);

// Runs the case on this rank and checks its output (and that its input was left alone) against
// the reference. Returns "" when right, else what differs. `described` (optional) receives the
// operation's describe() after it completed.
std::string runAndCheck(CollectiveEngine& e, int rank, int nranks, const CollCase& c,
                        std::string* described = nullptr);

// A (family, collective, root) whose plan generates and verifies for `nranks`: decided once on
// the test's thread so every rank sees the same list. `skipped` collects why others are left out.
struct Usable {
  std::string family;
  Collective coll;
  int root;
};
std::vector<Usable> usablePlans(int nranks, const std::vector<int>& hostOf,
                                std::vector<std::string>* skipped);

}  // namespace tessera::exectest
