// What the device executor's kernels read (DESIGN.md, "Executors"): a plan compiled for this rank
// (the flat ExecOp/ExecRef arrays of ops.hpp) and bound to device-side resources, as plain structs
// that live in memory the executing side reaches (device memory on a GPU; host memory when the
// device executor is emulated on host threads, see device_executor.hpp). Nothing here names a
// host-only type: the same structs are read by a CUDA kernel and by the host-thread emulation.
#pragma once

#include <stdint.h>

#include "collectives/exec/ops.hpp"
#include "tessera/device/port_channel_device.hpp"
#include "tessera/device/semaphore_device.hpp"

namespace tessera::exec {

// A peer of the plan (slot = ExecRef::peer).
struct DevicePeer {
  // The peer's scratch for this plan mapped here (memory channel: p2p, cuda_ipc, inproc, shm);
  // nullptr when the peer is reached through `port` (or has no scratch).
  char* scratch;
  uint64_t scratchBytes;
  int32_t rank;     // the peer's rank, for error reports
  uint8_t mapped;   // loads and stores reach the peer's memory
  uint8_t hasPort;  // `port` is valid (unmapped peers): flushes go through it
  uint8_t putPort;  // `port` reaches the peer's scratch: puts go through it too
  uint8_t pad[1];
  // Unmapped peers (ucx): the proxy's channel whose local memory is this rank's staging area
  // (DevicePlan::staging) and whose remote memory is the peer's scratch (putPort), or, for a peer
  // without scratch, one of its semaphores' ports (flush only). Signals go through their
  // semaphore's own port (DeviceSem::port), on the same proxy FIFO and connection, so a put
  // pushed before a signal lands before it. Flush waits for the proxy.
  device::PortChannelDeviceHandle port;
};

// One semaphore (peer, channel) of the plan. `credits`: initial credits left (compilePlan's
// SemLink::credits), consumed by waits before any signal is; the executing side decrements it in
// place (this struct lives in memory the executor writes), so it carries over between calls like
// the host executor's.
struct DeviceSem {
  device::SemaphoreDeviceHandle handle;  // memory semaphore (mapped peer) or wait-only (port)
  int64_t credits;
  int16_t peerSlot;
  int16_t channel;
  uint8_t mapped;   // signal with handle.signal(); else through `port`
  uint8_t hasPort;  // `port` is valid (unmapped peers)
  uint8_t pad[2];
  // Unmapped peers: a port channel made with THIS semaphore (a port channel's signal adds to the
  // peer's counter of the semaphore it was made with, so each (peer, channel) needs its own).
  device::PortChannelDeviceHandle port;
};

// A plan bound for the device executor. Arrays are in memory the executing side reaches.
struct DevicePlan {
  const ExecOp* ops;
  const ExecRef* refs;
  const uint32_t* workerBegin;  // workers + 1 entries
  const int32_t* planOpIndex;   // per compiled op: its index in the plan's worker (errors)
  int32_t workers;
  int32_t cps;
  int32_t maxSrcs;
  int32_t scratchChunks;  // scratchChunksUsed (plan_cache.hpp): sets the slice
  int32_t rank;
  int32_t nranks;
  char* scratch;  // this rank's scratch (nullptr: none)
  uint64_t scratchBytes;
  DevicePeer* peers;
  int32_t npeers;
  int32_t nsems;
  DeviceSem* sems;
  // Per worker, plan barrier ops passed so far (monotonic over calls: a barrier waits until every
  // worker's count reaches its own).
  uint32_t* barrierCounts;
  // Staged stores to unmapped peers: `stagingBytes` per CTA, CTA c at staging + c * stagingBytes,
  // reused as a ring that is flushed (port.flush) before it wraps. nullptr when every peer maps.
  char* staging;
  uint64_t stagingBytes;
  uint8_t zeroCopy;  // refs reach peers' input or output (WorkItem::peerInput / peerOutput)
  uint8_t anyUnmapped;
  uint8_t pad[6];
  uint64_t fingerprint;
};

// A rank's input and output pointers for one call, as it publishes them on its peers' boards
// (WorkItem::peerBoards): ranks of one process reach each other's buffers by these pointers.
struct PeerPointers {
  char* input;
  char* output;
};

// The LL protocol's buffers (ll.hpp): every rank has an inbox with one slot per sender and two
// parities; a sender writes 8-byte lines (4 bytes of data, 4 bytes of flag = the call's epoch) into
// its slot of each receiver's inbox, and the receiver polls the flags, so data and signal travel
// together. Only for peers that are mapped.
struct DeviceLL {
  char* inbox;             // this rank's: [2 parities][nranks senders][slotBytes]
  char* const* peerInbox;  // by rank: the peers' inboxes mapped here (this rank's own at `rank`)
  uint32_t* epoch;     // LL calls this rank has run (this rank's memory; the kernel advances it)
  uint64_t slotBytes;  // bytes of lines per (parity, sender) slot
  int32_t rank;
  int32_t nranks;
};

// ---- send / receive (p2p.hpp) ----

// Most calls (sends and receives, a send to self and its receive counting two) of one group on
// one communicator: a group travels by value in the trigger kernel's parameters (capturable, and
// stream-ordered without host bookkeeping), which must stay under 4 KiB.
inline constexpr uint32_t kP2PMaxCalls = 128;
// Every piece starts with a header (P2PPieceHeader) in the first bytes of its slot.
inline constexpr uint64_t kP2PHeaderBytes = 64;

// One ordered pair's link as the executing side sees it: this rank's ring of `slots` slots that
// the peer fills, the peer's ring that this rank fills (mapped), and two semaphores, each used in
// both directions: `data` (signal: a piece was written into the peer's ring; poll: one arrived in
// this rank's) and `ack` (signal: a slot of this rank's ring was drained; poll: a credit came
// back). The counters persist across groups (this struct lives in memory the executor writes), so
// a slot is never reused before it was drained.
struct DeviceP2PLink {
  char* inbox;
  char* peerInbox;
  device::SemaphoreDeviceHandle data;
  device::SemaphoreDeviceHandle ack;
  uint64_t sent;      // pieces written to the peer
  uint64_t acked;     // credits taken back from the peer
  uint64_t received;  // pieces drained from this rank's ring
};

// A rank's send/receive state: its links by rank (set up when a group first names the peer).
struct DeviceP2P {
  DeviceP2PLink* links;  // nranks entries; the own rank's is unused
  uint64_t slotBytes;    // payload bytes per slot (a slot is kP2PHeaderBytes + slotBytes)
  uint32_t slots;
  int32_t rank;
  int32_t nranks;
  int32_t pad;
};

// The first bytes of a slot: which message the piece belongs to and where it goes.
struct P2PPieceHeader {
  uint64_t messageBytes;  // the whole message: a receive of another size is an error
  uint64_t offset;
  uint64_t bytes;
};

enum : uint8_t { kP2PLaneSend = 0, kP2PLaneRecv = 1, kP2PLaneSelf = 2 };

// A lane: the group's messages of one kind to or from one peer, in call order (transfers
// [begin, end)), moved one piece at a time. A self lane is one send to self: transfers[begin] is
// the source, transfers[begin + 1] the destination.
struct P2PLane {
  uint16_t begin;
  uint16_t end;
  int16_t peer;
  uint8_t kind;
  uint8_t pad;
};

struct P2PTransfer {
  char* buf;  // sends: the source; receives: the destination
  uint64_t bytes;
};

// One group's sends and receives on one rank. Lane l runs on CTA l % nctas; only the first
// `nlanes` lanes and `ntransfers` transfers are meaningful (and copied by postItem).
struct P2PGroupDesc {
  const DeviceP2P* state;
  uint32_t ntransfers;
  uint32_t nlanes;
  P2PLane lanes[kP2PMaxCalls];
  P2PTransfer transfers[kP2PMaxCalls];
};
static_assert(sizeof(P2PGroupDesc) <= 3200, "a group travels in a kernel's parameters");

// Copies what is meaningful of `src` (the header, its lanes and transfers) into `dst`.
TSR_INLINE void copyP2PGroup(P2PGroupDesc* dst, const P2PGroupDesc& src) {
  dst->state = src.state;
  dst->ntransfers = src.ntransfers;
  dst->nlanes = src.nlanes;
  for (uint32_t i = 0; i < src.nlanes && i < kP2PMaxCalls; ++i) dst->lanes[i] = src.lanes[i];
  for (uint32_t i = 0; i < src.ntransfers && i < kP2PMaxCalls; ++i)
    dst->transfers[i] = src.transfers[i];
}

}  // namespace tessera::exec
