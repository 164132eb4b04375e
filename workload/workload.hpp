// A workload (DESIGN.md, "Workloads"): per simulated rank, operations with dependencies between
// them: computation (GEMMs, memory-bound kernels, attention), tessera collectives on groups,
// send/recv between ranks, and the fused GEMM+communication operations.
//
// Each op runs on one of its rank's streams: ops of a stream run in order (as on a CUDA stream),
// and an op also waits for the ops named in `after` (events between streams). A collective
// starts when every member of its group has reached it (the k-th op on a group in each member's
// order are the same call); a send and a recv meet the same way (the k-th send from a to b is the
// k-th recv by b from a) and end together.
//
// A simulated rank may stand for several GPUs (`weight`): a transformer step folds the GPUs that
// run the same program at the same times (the tensor-parallel ranks of a stage, the
// data-parallel replicas) into one, whose groups keep the size and the node span of the real
// ones. `gpu` places the rank on the machine (node = gpu / GPUs per node; its NIC rail from
// gpu % GPUs per node).
//
// The JSON format (docs/WORKLOADS.md says it whole):
//   {"format": "tessera-workload", "version": 1, "name": "...", "gpu": "h100",
//    "platform": "dgx-h100", "nodes": 2, "gpus": 16, "model_flops": 1.2e15,
//    "groups": [{"name": "tp0", "ranks": [0, 1], "size": 8, "nodes": 1}],
//    "ranks": [{"gpu": 0, "weight": 8, "ops": [
//       {"id": "qkv", "op": "gemm", "m": 4096, "n": 3072, "k": 4096, "dtype": "bf16"},
//       {"id": "ar", "op": "allreduce", "group": "tp0", "bytes": 33554432, "stream": "tp",
//        "after": ["qkv"]}, ...]}]}
// Reading never trusts the file: unknown fields, wrong types, values out of range, an `after`
// naming no op of the rank, and a cycle get a sentence naming the rank and op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"
#include "workload/compute.hpp"

namespace tessera::workload {

enum class OpKind : uint8_t {
  kGemm,
  kMemory,     // a memory-bound kernel: `bytes` read plus written
  kAttention,  // `flops` and `bytes`
  kCollective,
  kSend,
  kRecv,
  kFused,  // GEMM+ReduceScatter, AllGather+GEMM, GEMM+AllReduce on a group
  kDelay,  // `us` of host time on its stream (a data loader, an optimizer's host work)
};

enum class FusedKind : uint8_t { kGemmReduceScatter, kAllGatherGemm, kGemmAllReduce };
const char* fusedKindName(FusedKind k);

struct Op {
  OpKind kind = OpKind::kDelay;
  std::string id;  // unique in its rank (the JSON's "id"; generated ops: a readable label)
  uint16_t stream = 0;
  std::vector<uint32_t> after;  // indices of ops of the same rank
  GemmShape gemm;               // gemm and fused (m, n, k of one rank's GEMM, see fused_model)
  double bytes = 0;             // memory, attention, collective (nccl-tests' size), send, recv
  double flops = 0;             // attention
  double us = 0;                // delay
  Collective collective = Collective::kAllReduce;
  FusedKind fused = FusedKind::kGemmReduceScatter;
  int32_t group = -1;  // collective, fused
  int32_t peer = -1;   // send, recv: a simulated rank
  bool isCompute() const {
    return kind == OpKind::kGemm || kind == OpKind::kMemory || kind == OpKind::kAttention;
  }
  bool isComm() const {
    return kind == OpKind::kCollective || kind == OpKind::kSend || kind == OpKind::kRecv;
  }
};

struct Group {
  std::string name;
  std::vector<int32_t> members;  // simulated ranks, each at most once
  int size = 0;                  // the real group's ranks (>= members)
  int nodes = 0;                 // nodes the real group spans
};

struct Rank {
  int gpu = 0;        // its place on the machine
  double weight = 1;  // GPUs it stands for
  std::vector<std::string> streams;
  std::vector<Op> ops;
};

struct Workload {
  std::string name;
  std::string gpu = "h100";           // compute.hpp's preset
  std::string platform = "dgx-h100";  // collectives/sim's preset
  int nodes = 1;
  int gpus = 0;           // GPUs the workload stands for (0: the ranks' weights summed)
  double modelFlops = 0;  // the step's model FLOPs as its source counts them (0: executed ones)
  std::vector<Group> groups;
  std::vector<Rank> ranks;
  int totalGpus() const;
};

inline constexpr size_t kMaxWorkloadRanks = 1u << 17;
// GPUs per node of every GPU preset: a group's node span, where a file does not say it, counts
// its members' GPUs / 8.
inline constexpr int kPresetGpusPerNode = 8;
inline constexpr size_t kMaxOpsPerRank = 1u << 24;

// Everything the reader checks, on a workload built in memory: indices in range, groups' members
// distinct and sizes at least their members, send/recv peers other ranks, and no cycle among a
// rank's ops (stream order plus `after`). Matching across ranks is checked when it runs (a
// collective some member never reaches, a send nobody receives: simulateWorkload's deadlock
// sentence names them).
Result checkWorkload(const Workload& w, const std::string& source);
Result workloadFromJson(const std::string& text, const std::string& source, Workload* out);
Result readWorkloadFile(const std::string& path, Workload* out);
std::string workloadToJson(const Workload& w);

// Stream index of `name` in rank r (added when new).
uint16_t streamOf(Rank& r, const std::string& name);

}  // namespace tessera::workload
