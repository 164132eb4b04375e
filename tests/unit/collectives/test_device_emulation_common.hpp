// Shared by the device-emulation tests: an engine whose device executor runs on host threads
// (EngineOptions::deviceEmulation), and one collective call run through enqueue +
// deviceSynchronize, checked bit for bit against the host executor's result on the same inputs and
// against a serial reference in double precision.
#pragma once

#include <memory>
#include <string>

#include "collectives/exec/engine.hpp"
#include "transport/context.hpp"

namespace tessera::devtest {

struct DevSetup {
  size_t scratchBytes = 8 << 10;  // small: calls of a few thousand elements take several slices
  double timeoutSeconds = 20;
  int ctas = 2;
};

Result makeDeviceEngine(TransportContext& ctx, const DevSetup& setup,
                        std::unique_ptr<CollectiveEngine>* out);

struct DevCase {
  Collective coll = Collective::kAllReduce;
  std::string algorithm;  // "" lets the tuner choose
  tsrDataType_t dtype = tsrFloat32;
  RedKind op = RedKind::kSum;
  size_t count = 1000;
  int root = 0;
  bool inPlace = false;
  int salt = 0;
};

std::string devCaseName(const DevCase& c, int nranks);

// Runs the case through the device executor and through the host executor; "" when both match
// each other bit for bit and the reference (exact, or within rounding for avg of narrow types).
std::string runDeviceCase(CollectiveEngine& e, int rank, int nranks, const DevCase& c);

// The same on the device executor with its buffers inside [window, window + windowBytes) (the
// input at the start, the output after it, 64-byte aligned; in place: both at the start), e.g. a
// window registered with registerWindow; the host executor's run uses fresh buffers.
std::string runDeviceCaseIn(CollectiveEngine& e, int rank, int nranks, const DevCase& c,
                            char* window, size_t windowBytes);

}  // namespace tessera::devtest
