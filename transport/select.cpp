#include "transport/select.hpp"

#include "core/env.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

constexpr const char* kOtherNetNs =
    "the peer runs in another network namespace, which the fd server's abstract Unix socket does "
    "not reach";

// Same host, but shm and cuda_ipc cannot pass descriptors between the two network namespaces.
bool fdPassing(const SelectInput& in) {
  return in.locality == Locality::kSameProcess || in.sameNetNs;
}

bool p2pAllowed(const SelectInput& in) {
  return in.gpuPath == PathClass::kLoc ||
         static_cast<int>(in.gpuPath) <= static_cast<int>(in.p2pLevel);
}
}  // namespace

Result readSelectEnv(SelectInput* in) {
  std::string forced, level;
  TSR_CHECK(envString("TESSERA_TRANSPORT", &forced));
  TSR_CHECK(envString("TESSERA_P2P_LEVEL", &level));
  in->forced = !forced.empty();
  if (in->forced && !parseTransportKind(forced, &in->forcedKind))
    return TSR_FAIL(tsrInvalidArgument, "TESSERA_TRANSPORT=%s is not a transport", forced.c_str());
  if (!level.empty()) TSR_CHECK(parsePathClass(level.c_str(), &in->p2pLevel));
  return tsrSuccess;
}

Result selectTransportFor(const SelectInput& in, TransportKind* out, std::string* why) {
  const char* where = localityName(in.locality);
  if (in.forced) {
    TransportKind k = in.forcedKind;
    bool ok = in.built[static_cast<int>(k)];
    const char* reason = ok ? nullptr : "it is not built into this library";
    if (ok) {
      switch (k) {
        case TransportKind::kInproc:
          ok = in.locality == Locality::kSameProcess;
          reason = "inproc joins only ranks of one process";
          break;
        case TransportKind::kP2p:
          ok = in.locality == Locality::kSameProcess && in.gpuRanks;
          reason = "p2p joins only GPU ranks of one process";
          break;
        case TransportKind::kShm:
          ok = in.locality != Locality::kOtherHost && fdPassing(in);
          reason = in.locality == Locality::kOtherHost ? "shm joins only ranks of one host"
                                                       : kOtherNetNs;
          break;
        case TransportKind::kCudaIpc:
          // cudaIpcOpenMemHandle refuses handles of its own process (DESIGN.md, hazards).
          ok = in.locality == Locality::kSameHost && in.gpuRanks && fdPassing(in);
          reason = ok || !in.gpuRanks || in.locality != Locality::kSameHost
                       ? "cuda_ipc joins only GPU ranks of different processes on one host"
                       : kOtherNetNs;
          break;
        case TransportKind::kUcx: ok = true; break;
      }
    }
    if (!ok)
      return TSR_FAIL(tsrInvalidUsage, "TESSERA_TRANSPORT=%s cannot reach a peer on the %s: %s",
                      transportName(k), where, reason);
    *out = k;
    *why = strprintf("%s (TESSERA_TRANSPORT)", transportName(k));
    return tsrSuccess;
  }

  TransportKind pick = TransportKind::kUcx;
  std::string reason;
  switch (in.locality) {
    case Locality::kSameProcess:
      if (!in.gpuRanks) {
        pick = TransportKind::kInproc;
        reason = "same process, host ranks";
      } else if (p2pAllowed(in)) {
        pick = TransportKind::kP2p;
        reason = strprintf("same process, GPU path %s within P2P level %s",
                           pathClassName(in.gpuPath), pathClassName(in.p2pLevel));
      } else {
        reason = strprintf("same process, GPU path %s beyond P2P level %s",
                           pathClassName(in.gpuPath), pathClassName(in.p2pLevel));
      }
      break;
    case Locality::kSameHost:
      if (!in.sameNetNs) {
        reason = "same host, other network namespace (no fd passing between them)";
      } else if (!in.gpuRanks) {
        pick = TransportKind::kShm;
        reason = "same host, host ranks";
      } else if (p2pAllowed(in)) {
        pick = TransportKind::kCudaIpc;
        reason = strprintf("same host, GPU path %s within P2P level %s", pathClassName(in.gpuPath),
                           pathClassName(in.p2pLevel));
      } else {
        reason = strprintf("same host, GPU path %s beyond P2P level %s", pathClassName(in.gpuPath),
                           pathClassName(in.p2pLevel));
      }
      break;
    case Locality::kOtherHost: reason = "other host"; break;
  }
  if (!in.built[static_cast<int>(pick)])
    return TSR_FAIL(tsrInvalidUsage,
                    "no transport reaches a peer on the %s: it needs %s (%s), which this build "
                    "does not have",
                    where, transportName(pick), reason.c_str());
  *out = pick;
  *why = strprintf("%s: %s", reason.c_str(), transportName(pick));
  return tsrSuccess;
}

}  // namespace tessera
