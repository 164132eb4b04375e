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
  int32_t maxScratchSegments;  // over all ranks: sets the slice
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
  uint8_t zeroCopy;  // refs reach peers' input or output (WorkItem::peerUser is set)
  uint8_t anyUnmapped;
  uint8_t pad[6];
  uint64_t fingerprint;
};

// A peer's user buffers mapped here for one zero-copy call (index = peer slot).
struct PeerUserDevice {
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

}  // namespace tessera::exec
