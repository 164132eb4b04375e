// The machines tessera_sim simulates (DESIGN.md, "Simulation"): a small description that
// netzones.cpp turns into a SimGrid platform. Two kinds:
//
//   gpu  nodes of `ranksPerNode` GPUs. Each GPU is a SimGrid host whose speed stands for its
//        memory bandwidth (copies and reductions are executions that move bytes through it); it
//        reaches the GPUs of its node through a switch (one split-duplex link per GPU to the
//        switch: NVLink into NVSwitch), and the other nodes through the NIC of its rail (GPU i
//        uses NIC i * nicsPerNode / ranksPerNode) into a non-blocking fabric (one split-duplex
//        link per NIC; a non-blocking rail-optimized fat tree carries any permutation at the
//        NICs' rate, so its switches add latency, `fabricLatencyUs`, and no sharing).
//   cpu  nodes whose ranks are processes on `cores` CPU cores: a put into a peer's shared memory
//        is a memcpy by the sender's core, so transfers inside a node are executions on the
//        node's cores at `copyGBs` per core (reductions at `reduceGBs`), and a signal takes
//        `signalUs` (one way, as the host executor's semaphores deliver it). Between nodes: NICs
//        as above.
//
// Presets (platformPreset): dgx-h100, dgx-a100, hgx-h200 (gpu, any number of nodes) and
// this-host (cpu, one node, calibrated at start: calibrate.hpp). Each names the source of its
// numbers in `source`.
//
// A machine file (JSON) gives the same fields:
//   {"format": "tessera-machine", "version": 1, "name": "...", "source": "...", "kind": "gpu",
//    "nodes": 2, "ranksPerNode": 8, "memGBs": 3350, "intraGBs": 450, "intraLatencyUs": 0.5,
//    "intraEfficiency": 0.84,
//    "nicsPerNode": 8, "nicGBs": 50, "nicLatencyUs": 1.0, "fabricLatencyUs": 0.5,
//    "signalBytes": 8, "workerGBs": 0}
// (cpu: "cores", "copyGBs", "reduceGBs", "signalUs", "cacheBytes", "cacheCopyGBs",
// "cacheReduceGBs" instead of "memGBs" / "intra*"). Reading never
// trusts the file: unknown fields, wrong types, values out of range give a sentence naming the
// field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace tessera::sim {

enum class MachineKind : uint8_t { kGpu, kCpu };

struct Machine {
  std::string name;
  std::string source;  // where the numbers come from
  MachineKind kind = MachineKind::kGpu;
  int nodes = 1;
  int ranksPerNode = 1;
  // gpu: memory bandwidth of one GPU (bytes read plus bytes written per second), GB/s.
  double memGBs = 0;
  // gpu: one GPU's link into its node's switch, per direction; latency of that link (a route
  // inside a node crosses two: the sender's and the receiver's).
  double intraGBs = 0;
  double intraLatencyUs = 0;
  // gpu: the fraction of intraGBs that data gets (protocol headers, flow control): the link is
  // modelled at intraGBs * intraEfficiency.
  double intraEfficiency = 1;
  // cpu: cores the node's ranks share; one core's memcpy rate (bytes copied per second) and its
  // reduction rate (bytes of output per second, two sources); one-way signal latency.
  int cores = 0;
  double copyGBs = 0;
  double reduceGBs = 0;
  double signalUs = 0;
  // cpu: a call whose buffers (every rank's input, output and scratch on the node) fit in
  // `cacheBytes` (the last-level cache) copies and reduces at the cache's rates instead; 0: none.
  double cacheBytes = 0;
  double cacheCopyGBs = 0;
  double cacheReduceGBs = 0;
  // Between nodes: NICs per node, each's rate per direction and latency; fabric switches' latency.
  int nicsPerNode = 1;
  double nicGBs = 0;
  double nicLatencyUs = 0;
  double fabricLatencyUs = 0;
  // Bytes one signal carries over a link (a flag write).
  double signalBytes = 8;
  // The most one worker (a CTA) moves per second over a link, GB/s; 0: no limit of its own.
  double workerGBs = 0;

  int nranks() const { return nodes * ranksPerNode; }
  int nodeOf(int rank) const { return rank / ranksPerNode; }
  int nicOf(int rank) const { return (rank % ranksPerNode) * nicsPerNode / ranksPerNode; }
};

// Names accepted by platformPreset, in order.
const std::vector<std::string>& presetNames();

// A preset with `nodes` nodes (gpu presets) — this-host is one node whose ranks are
// `ranksPerNode` processes and must be calibrated (calibrateThisHost) before use;
// tsrInvalidArgument naming the presets for an unknown name or nodes outside 1..kMaxSimNodes.
Result platformPreset(const std::string& name, int nodes, Machine* out);

// Checks every field (sentences name the field); machineFromJson runs it too.
Result checkMachine(const Machine& m, const std::string& source);

// Parses a machine file's text; `source` names it in sentences.
Result machineFromJson(const std::string& text, const std::string& source, Machine* out);
Result readMachineFile(const std::string& path, Machine* out);
// The machine as JSON (the format above), one field per line.
std::string machineToJson(const Machine& m);

inline constexpr int kMaxSimNodes = 16384;
inline constexpr int kMaxSimRanks = 131072;

}  // namespace tessera::sim
