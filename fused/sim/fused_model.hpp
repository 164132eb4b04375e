// The fused operations on a model of one node (DESIGN.md, "Workloads"): the fused layer's third
// executor. It walks the same tile order as the host reference and the GPU kernels
// (tile_scheduler.hpp) and charges time instead of computing:
// - GEMM tiles run on `sms` SMs, each taking `tileUs` (a tile of an edge costs a whole tile), a
//   tile starting as soon as an SM is free and its input has arrived;
// - GEMM+ReduceScatter and GEMM+AllReduce: when a communication tile's last GEMM tile ends, its
//   bytes are put to the segment's owner over this rank's link into the switch (one transfer at
//   a time, `linkBytesPerUs`, plus `linkLatencyUs`; by the scheduler's order the n ranks write
//   to n distinct owners at every step, so a rank's way in carries what its way out does); the
//   owner's rows are reduced (n partials read, one result written at `memBytesPerUs`) once every
//   partial has landed; GEMM+AllReduce then sends the reduced rows to every peer;
// - AllGather+GEMM: the owner of a shard sends it to the rank that reads it at step j, in step
//   order (tile_scheduler.hpp's shardPeerAt), and that segment's tiles start when it has landed.
// Every rank does the same work at the same times, so one rank's timeline is the operation's.
// Plain numbers in and out: the workload layer supplies the GPU's and the link's rates.
#pragma once

#include <cstdint>

#include "fused/tile_scheduler.hpp"

namespace tessera::fused {

struct FusedModelInput {
  FusedOp op = FusedOp::kGemmReduceScatter;
  uint32_t nranks = 1;
  // One rank's GEMM: C[m x n] = A[m x k] B[k x n] (ReduceScatter, AllReduce: a partial of the whole
  // C over this rank's share of k; AllGather: the whole gathered A times this rank's columns).
  uint64_t m = 0, n = 0, k = 0;
  uint32_t elemBytes = 2;
  TileConfig tiles;  // tileM, tileN and the communication tile
  uint32_t sms = 1;
  double tileUs = 0;          // one full GEMM tile
  double linkBytesPerUs = 0;  // this rank's link into the switch, per direction
  double linkLatencyUs = 0;
  double memBytesPerUs = 0;  // the reduction's memory rate
};

struct FusedModelResult {
  double us = 0;          // the operation, start to end
  double gemmUs = 0;      // when the last GEMM tile ended
  double commTailUs = 0;  // us - gemmUs: communication the GEMM did not hide
  uint64_t tiles = 0;
  uint64_t puts = 0;  // communication tiles put to peers
};

// False when a size is zero or m is not a multiple of nranks.
bool simulateFused(const FusedModelInput& in, FusedModelResult* out);

}  // namespace tessera::fused
