// tessera_info: what this build of tessera is and what it sees on this machine.
//   tessera_info          version, build options, CUDA devices, topology, transports
//   tessera_info --env    also every TESSERA_* variable with its value, default, meaning and
//                         NCCL_* alias
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/build_config.hpp"
#include "core/cuda_driver.hpp"
#include "core/env.hpp"
#include "tessera/tessera.h"
#include "topology/placement.hpp"
#include "topology/topology.hpp"
#include "transport/select.hpp"
#include "transport/transport.hpp"

namespace {

using namespace tessera;

void section(const char* title) { std::printf("\n== %s ==\n", title); }

void printVersion() {
  int v = 0;
  tsrGetVersion(&v);
  std::printf("tessera %s (version code %d)\n", TESSERA_VERSION_STRING, v);
  section("Build");
  std::printf("  build type      %s\n", TESSERA_BUILD_TYPE);
  std::printf("  compiler        %s\n", TESSERA_CXX_COMPILER);
  std::printf("  CUDA            %s\n", TESSERA_HAVE_CUDA
                                            ? "yes (toolkit " TESSERA_CUDA_TOOLKIT_VERSION
                                              ", sm " TESSERA_CUDA_ARCHS ")"
                                            : "no");
  std::printf("  MPI             %s\n",
              TESSERA_HAVE_MPI ? "yes (MPI " TESSERA_MPI_VERSION ")" : "no");
  // The ucx transport is compiled in exactly when UCX was found; it then carries every pair of
  // ranks on different hosts and can be forced for any pair with TESSERA_TRANSPORT=ucx.
  std::printf("  UCX             %s\n",
              TESSERA_HAVE_UCX ? "yes (" TESSERA_UCX_VERSION
                                 "): the ucx transport is built in and selectable at run time "
                                 "(peers on other hosts; TESSERA_TRANSPORT=ucx forces it)"
                               : "no: the ucx transport is not built in, so it cannot be "
                                 "selected at run time (ranks on other hosts cannot connect)");
  std::printf("  hwloc           %s\n",
              TESSERA_HAVE_HWLOC ? "yes (" TESSERA_HWLOC_VERSION ")" : "no");
  std::printf("  NVML            %s\n", TESSERA_NVML_ENABLED
                                            ? "loaded at run time with dlopen when present"
                                            : "left out (TESSERA_WITH_NVML=OFF)");
}

void printCuda() {
  section("CUDA devices");
  if (!cudaBuilt()) {
    std::printf("  none: this build has no CUDA\n");
    return;
  }
  std::string why;
  int rt = cudaRuntimeVersion();
  std::printf("  runtime         %d.%d (linked statically)\n", rt / 1000, (rt % 1000) / 10);
  int drv = cudaDriverVersion(&why);
  if (drv > 0)
    std::printf("  driver          CUDA %d.%d\n", drv / 1000, (drv % 1000) / 10);
  else
    std::printf("  driver          none (%s)\n", why.c_str());
  why.clear();
  int n = cudaDeviceCount(&why);
  if (n == 0) {
    std::printf("  devices         none (%s)\n", why.c_str());
    return;
  }
  for (int d = 0; d < n; ++d) {
    CudaDeviceInfo info;
    if (cudaGetDeviceInfo(d, &info) != tsrSuccess) {
      std::printf("  [%d] unavailable: %s\n", d, tsrGetLastError(nullptr));
      continue;
    }
    std::printf("  [%d] %s  bus %s  sm_%d%d  %.1f GiB  %d SMs\n", d, info.name.c_str(),
                info.busId.c_str(), info.ccMajor, info.ccMinor,
                static_cast<double>(info.totalMemory) / (1024.0 * 1024 * 1024),
                info.multiProcessors);
  }
}

void printTopology() {
  section("Topology");
  std::string host;
  if (hostId(&host) == tsrSuccess)
    std::printf("  host id         %s\n", host.c_str());
  else
    std::printf("  host id         error: %s\n", tsrGetLastError(nullptr));
  std::unique_ptr<Topology> topo;
  if (Topology::load(&topo) != tsrSuccess) {
    std::printf("  unavailable: %s\n", tsrGetLastError(nullptr));
    return;
  }
  std::string s = topo->summary();
  // Indent every line of the summary.
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    std::printf("  %s\n", line.c_str());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
}

void printTransports() {
  section("Bootstrap and transports");
  std::printf("  bootstrap       inproc (threads), tcp (unique id)%s\n",
              TESSERA_HAVE_MPI ? ", mpi (tsrCommInitMpi)" : "; mpi: not built (no MPI found)");
  std::string built, missing;
  for (int k = 0; k < kTransportKinds; ++k) {
    std::string why;
    auto kind = static_cast<TransportKind>(k);
    if (transportBuilt(kind, &why)) {
      built += std::string(built.empty() ? "" : ", ") + transportName(kind);
    } else {
      missing +=
          strprintf("                  %s: not built (%s)\n", transportName(kind), why.c_str());
    }
  }
  std::printf("  transports      %s\n%s", built.c_str(), missing.c_str());

  // What each class of peer would use here, as TransportContext::connect picks it (with
  // TESSERA_TRANSPORT and TESSERA_P2P_LEVEL as set now).
  SelectInput base;
  if (readSelectEnv(&base) != tsrSuccess) {
    std::printf("  per peer class  (cannot say: %s)\n", lastErrorMessage());
    return;
  }
  for (int k = 0; k < kTransportKinds; ++k) {
    std::string why;
    base.built[k] = transportBuilt(static_cast<TransportKind>(k), &why);
  }
  struct PeerClass {
    const char* name;
    Locality locality;
    bool gpu;
    PathClass path;
  };
  const PeerClass classes[] = {
      {"same process, host ranks", Locality::kSameProcess, false, PathClass::kSys},
      {"same process, GPU ranks (NVL)", Locality::kSameProcess, true, PathClass::kNvl},
      {"same host, host ranks", Locality::kSameHost, false, PathClass::kSys},
      {"same host, GPU ranks (NVL)", Locality::kSameHost, true, PathClass::kNvl},
      {"same host, GPU ranks (SYS)", Locality::kSameHost, true, PathClass::kSys},
      {"other host", Locality::kOtherHost, false, PathClass::kNet},
  };
  std::printf("  per peer class  (P2P level %s%s)\n", pathClassName(base.p2pLevel),
              base.forced ? ", TESSERA_TRANSPORT set" : "");
  for (const PeerClass& c : classes) {
    SelectInput in = base;
    in.locality = c.locality;
    in.gpuRanks = c.gpu;
    in.gpuPath = c.path;
    TransportKind kind;
    std::string why;
    if (selectTransportFor(in, &kind, &why) == tsrSuccess)
      std::printf("    %-30s -> %s\n", c.name, transportName(kind));
    else
      std::printf("    %-30s -> none: %s\n", c.name, lastErrorMessage());
  }
}

void printEnv() {
  section("Environment (TESSERA_*)");
  // Whether NCCL_* aliases are read: a variable's value may be its alias's (shown by name).
  std::printf(
      "  NCCL_* aliases  %s\n",
      envNcclAliasesActive()
          ? "active (TESSERA_NCCL_ENV=1): an unset TESSERA_* variable takes its alias's value"
          : "inactive (TESSERA_NCCL_ENV is not 1): NCCL_* variables are not read");
  for (const EnvVarInfo& v : envRegistry()) {
    const char* value = envRaw(v.name);
    const char* source = envSourceName(v.name);
    std::string shown = value == nullptr ? "(unset)"
                        : std::strcmp(source, v.name) != 0
                            ? strprintf("%s (from %s)", value, source)
                            : std::string(value);
    std::printf("  %-26s %-6s value: %-12s default: %s\n", v.name, envTypeName(v.type),
                shown.c_str(), v.defaultValue[0] ? v.defaultValue : "(none)");
    if (const char* alias = envNcclAlias(v.name))
      std::printf("  %-26s alias: %s%s\n", "", alias,
                  envNcclAliasesActive() ? "" : " (read with TESSERA_NCCL_ENV=1)");
    std::printf("  %-26s %s\n", "", v.meaning);
  }
  if (envValidateAll() != tsrSuccess) std::printf("\n  INVALID: %s\n", tsrGetLastError(nullptr));
}

void usage() {
  std::printf(
      "usage: tessera_info [--env] [--help]\n"
      "  --env   also list every TESSERA_* environment variable: value, default, meaning and\n"
      "          NCCL_* alias (read where TESSERA_NCCL_ENV=1)\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool env = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--env") == 0)
      env = true;
    else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "tessera_info: unknown option '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  printVersion();
  printCuda();
  printTopology();
  printTransports();
  if (env) printEnv();
  return 0;
}
