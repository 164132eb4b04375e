#include "collectives/exec/profile.hpp"

#include "core/env.hpp"
#include "core/park.hpp"
#include "core/status.hpp"

namespace tessera {

bool execProfiling() {
  static const bool on = [] {
    bool v = false;
    return envBool("TESSERA_PROFILE", &v) == tsrSuccess && v;
  }();
  return on;
}

std::string ExecProfile::summary(int rank) const {
  static const char* const kNames[kKinds] = {"put",    "get",  "copy",  "reduce", "reduceSend",
                                             "signal", "wait", "flush", "barrier"};
  uint64_t ops = 0;
  std::string parts;
  for (int k = 0; k < kKinds; ++k) {
    ops += opNs[k];
    if (opCount[k] == 0) continue;
    parts += strprintf("; %s %.3f ms (%llu)", kNames[k], opNs[k] * 1e-6,
                       static_cast<unsigned long long>(opCount[k]));
  }
  uint64_t waited = callNs > ops ? callNs - ops : 0;
  const WaitStats& w = threadWaitStats();
  uint64_t dataNs = opNs[0] + opNs[1] + opNs[2] + opNs[3] + opNs[4];
  return strprintf(
      "tessera profile: rank %d: %llu calls in %.3f ms; data ops %.3f ms (%.2f GB/s written)%s; "
      "waits and overhead %.3f ms; parks %llu (%.3f ms asleep)",
      rank, static_cast<unsigned long long>(calls), callNs * 1e-6, dataNs * 1e-6,
      dataNs > 0 ? static_cast<double>(dataBytes) / static_cast<double>(dataNs) : 0.0,
      parts.c_str(), waited * 1e-6, static_cast<unsigned long long>(w.parks - parksAtStart),
      (w.parkedNs - parkedNsAtStart) * 1e-6);
}

}  // namespace tessera
