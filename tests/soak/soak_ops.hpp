// One operation of the soak: how it is drawn (the same on every rank, from the shared stream),
// laid into this rank's buffers, issued through the C API, and checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "soak_values.hpp"
#include "tessera/tessera.h"

namespace soak {

enum class Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kAlltoAllv,
  kSendRecv,
  kNumColls
};
constexpr int kNumColls = static_cast<int>(Coll::kNumColls);
inline const char* collName(Coll c) {
  static const char* kNames[] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                 "reduce",    "alltoall",      "alltoallv", "sendrecv"};
  return kNames[static_cast<int>(c)];
}
inline bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

constexpr size_t kMaxBytes = size_t{4} << 20;  // the largest buffer of any call, on any rank
constexpr size_t kHead = 64;                   // room before a buffer: the front guard
constexpr size_t kTail = 4096;                 // after: offsets, alltoallv gaps, back guard
constexpr size_t kRegionBytes = kHead + kMaxBytes + kTail;
constexpr int kSlots = 4;  // ops of one group use distinct slots
constexpr size_t kGuard = 32;
constexpr uint8_t kSentinel = 0xe7;

// A slot's two buffers (each kRegionBytes, the usable part starting kHead bytes in).
struct Slot {
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
};

struct OpSpec {
  Coll coll = Coll::kAllReduce;
  tsrDataType_t dtype = tsrFloat32;
  OpKind op = OpKind::kSum;
  bool inPlace = false;
  bool zeroCopy = false;    // buffers of tsrMemAlloc, registered with the communicator
  bool nullUnused = false;  // broadcast's send / reduce's receive buffer NULL off the root
  bool inGroup = false;
  size_t count = 0;
  size_t bytes = 0;  // what the size draw gave: the largest buffer of the call on a rank
  int root = 0;
  int peer = 0;  // sendrecv: in a group, the shift (to me + peer, from me - peer); else an xor mask
  bool sendFirst = true;
  int slot = 0;
  size_t sendOff = 0, recvOff = 0;  // bytes after a slot buffer's start (element multiples)
  uint64_t seed = 0;
  // alltoallv, nranks x nranks, row p: what rank p sends to each q and where (elements).
  std::vector<size_t> a2avCount, a2avSendDispl, a2avRecvDispl;  // RecvDispl[q * n + p]
};

// Draws one op (collective `coll`, or random where coll == kNumColls; bytes < 0: random size).
OpSpec drawOp(Rng& rng, int nranks, Coll coll, long long bytes, bool inGroup, int slot);

// A prepared op on this rank: its pointers, and what it should leave where.
struct Prepared {
  const OpSpec* spec = nullptr;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  uint8_t* guardLo = nullptr;  // [guardLo, usedLo) and [usedHi, usedHi + kGuard): sentinels
  uint8_t* usedLo = nullptr;
  uint8_t* usedHi = nullptr;
  bool participates = true;  // standalone sendrecv: a rank without a partner sits out
  int sendPeer = -1, recvPeer = -1;
  tsrRedOp_t redOp = tsrSum;
  bool ownsRedOp = false;
};

// Writes the inputs and guards of `spec` into `slot`, creating a premulsum op if it needs one.
// "" on success, else what went wrong.
std::string prepareOp(const OpSpec& spec, const Slot& slot, int me, int nranks, tsrComm_t comm,
                      Prepared* p);

// Issues the prepared op (or its part: the group's caller brackets them).
tsrResult_t issueOp(const Prepared& p, tsrComm_t comm);

// Checks outputs (every element when `full`, else a sample plus each block's ends), guards and
// an unchanged sample of an out-of-place input; destroys a premulsum op. "" when right.
std::string checkOp(Prepared& p, int me, int nranks, bool full, tsrComm_t comm);

}  // namespace soak
