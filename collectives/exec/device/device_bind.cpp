// Binding a plan for the device executor (device_executor.hpp): the compiled program, the plan's
// scratch where the executing side reaches it (device memory on a GPU, host memory in the
// emulation), the peers' scratch mapped here or reached through a port channel (ucx), one
// semaphore per (peer, channel), and one `image` holding the DevicePlan and its arrays.
//
// Pairwise like the host engine's bindPlan (bind.cpp): a rank sets up its pairs in increasing peer
// order, and within a pair both sides go hello, scratch blob, semaphores; bootstrap sends never
// wait for the receiver, so the earliest pending pair always has both ranks at it. The tags are
// the device executor's own (kTagDevicePlanSetup, kDeviceTransportTag), so a host-engine setup and
// a device setup between the same pair cannot take each other's messages.
#include <algorithm>
#include <cstring>

#include "collectives/exec/device/device_backend.hpp"
#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr size_t kMaxBlobBytes = 1 << 20;
// Staging for stores to unmapped peers, per CTA (a ring the runner flushes before it wraps).
constexpr uint64_t kStagingBytesPerCta = 1 << 20;

struct DeviceHello {
  uint64_t fingerprint;
  uint64_t scratchBytes;
};

size_t alignUp(size_t v) { return (v + 15) / 16 * 16; }

Result sendBlob(Bootstrap& b, int peer, const Memory* memory) {
  std::string blob;
  if (memory != nullptr) TSR_CHECK(memory->serialize(&blob));
  uint64_t len = blob.size();
  TSR_CHECK(b.send(peer, kEngineTagBase + kTagDevicePlanSetup, &len, sizeof len));
  if (len > 0) TSR_CHECK(b.send(peer, kEngineTagBase + kTagDevicePlanSetup, blob.data(), len));
  return tsrSuccess;
}

Result recvBlob(Bootstrap& b, int rank, int peer, std::string* blob) {
  uint64_t len = 0;
  TSR_CHECK(b.recv(peer, kEngineTagBase + kTagDevicePlanSetup, &len, sizeof len));
  if (len > kMaxBlobBytes)
    return TSR_FAIL(tsrInternalError, "rank %d: peer %d announced a %llu-byte memory blob", rank,
                    peer, static_cast<unsigned long long>(len));
  blob->assign(len, '\0');
  if (len > 0) TSR_CHECK(b.recv(peer, kEngineTagBase + kTagDevicePlanSetup, blob->data(), len));
  return tsrSuccess;
}

// What the plan needs beyond the device runner's fixed limits (checked before talking to peers:
// every rank compiles the same plan, so every rank refuses alike).
Result checkLimits(const BoundPlan& bp, int rank, int ctas) {
  if (bp.maxSrcs > exec::kMaxDeviceSrcs)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: plan %s has an op with %d sources; the device executor takes at "
                    "most %d",
                    rank, bp.label.c_str(), bp.maxSrcs, exec::kMaxDeviceSrcs);
  int perCta = (bp.workers() + ctas - 1) / ctas;
  if (perCta > exec::kMaxCtaWorkers)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: plan %s has %d workers, %d per CTA over %d CTAs; the device "
                    "executor runs at most %d per CTA (raise TESSERA_MIN_CTAS)",
                    rank, bp.label.c_str(), bp.workers(), perCta, ctas, exec::kMaxCtaWorkers);
  return tsrSuccess;
}

// Lays out DevicePlan and its arrays in one block at device address `base`, filled on the host
// (`host`, same size) and then uploaded.
Result buildImage(DeviceExecutor* ex, int ctas, DeviceBoundPlan* dbp) {
  const BoundPlan& bp = dbp->compiled;
  size_t at = alignUp(sizeof(exec::DevicePlan));
  auto place = [&](size_t bytes) {
    size_t off = at;
    at = alignUp(at + bytes);
    return off;
  };
  size_t oOps = place(bp.ops.size() * sizeof(exec::ExecOp));
  size_t oRefs = place(bp.refs.size() * sizeof(exec::ExecRef));
  size_t oBegin = place(bp.workerBegin.size() * sizeof(uint32_t));
  size_t oIndex = place(bp.planOpIndex.size() * sizeof(int32_t));
  size_t oPeers = place(bp.peers.size() * sizeof(exec::DevicePeer));
  size_t oSems = place(bp.sems.size() * sizeof(exec::DeviceSem));
  size_t oBarriers = place(static_cast<size_t>(bp.workers()) * sizeof(uint32_t));
  size_t total = at;
  TSR_CHECK(ex->allocate(total, &dbp->image));
  char* base = static_cast<char*>(dbp->image->data());
  std::vector<char> host(total, 0);

  exec::DevicePlan dp{};
  dp.ops = reinterpret_cast<const exec::ExecOp*>(base + oOps);
  dp.refs = reinterpret_cast<const exec::ExecRef*>(base + oRefs);
  dp.workerBegin = reinterpret_cast<const uint32_t*>(base + oBegin);
  dp.planOpIndex = reinterpret_cast<const int32_t*>(base + oIndex);
  dp.workers = bp.workers();
  dp.cps = bp.cps;
  dp.maxSrcs = bp.maxSrcs;
  dp.scratchChunks = bp.scratchChunks;
  dp.rank = bp.rank;
  dp.nranks = bp.plan->nranks;
  dp.scratch = dbp->scratch ? static_cast<char*>(dbp->scratch->data()) : nullptr;
  dp.scratchBytes = dbp->scratch ? dbp->scratch->size() : 0;
  dp.peers = reinterpret_cast<exec::DevicePeer*>(base + oPeers);
  dp.npeers = static_cast<int32_t>(bp.peers.size());
  dp.nsems = static_cast<int32_t>(bp.sems.size());
  dp.sems = reinterpret_cast<exec::DeviceSem*>(base + oSems);
  dp.barrierCounts = reinterpret_cast<uint32_t*>(base + oBarriers);
  dp.staging = dbp->staging ? static_cast<char*>(dbp->staging->data()) : nullptr;
  dp.stagingBytes = dbp->staging ? dbp->staging->size() / static_cast<uint64_t>(ctas) : 0;
  dp.zeroCopy = bp.zeroCopy ? 1 : 0;
  dp.anyUnmapped = bp.anyUnmapped ? 1 : 0;
  dp.fingerprint = bp.fingerprint;
  std::memcpy(host.data(), &dp, sizeof dp);

  auto copyIn = [&](size_t off, const void* src, size_t bytes) {
    if (bytes > 0) std::memcpy(host.data() + off, src, bytes);
  };
  copyIn(oOps, bp.ops.data(), bp.ops.size() * sizeof(exec::ExecOp));
  copyIn(oRefs, bp.refs.data(), bp.refs.size() * sizeof(exec::ExecRef));
  copyIn(oBegin, bp.workerBegin.data(), bp.workerBegin.size() * sizeof(uint32_t));
  copyIn(oIndex, bp.planOpIndex.data(), bp.planOpIndex.size() * sizeof(int32_t));
  for (size_t s = 0; s < bp.peers.size(); ++s) {
    const PeerLink& link = bp.peers[s];
    exec::DevicePeer p{};
    p.scratch = link.mapped ? link.scratchMapped : nullptr;
    p.scratchBytes = link.scratch ? link.scratch->size() : 0;
    p.rank = link.peer;
    p.mapped = link.mapped ? 1 : 0;
    // A peer without a put port flushes through its first semaphore's port (same connection).
    const PortChannel* port = dbp->ports[s].get();
    p.putPort = port ? 1 : 0;
    for (size_t i = 0; i < bp.sems.size() && port == nullptr; ++i)
      if (bp.sems[i].peerSlot == static_cast<int>(s)) port = dbp->semPorts[i].get();
    p.hasPort = port ? 1 : 0;
    if (port) p.port = port->deviceHandle();
    std::memcpy(host.data() + oPeers + s * sizeof p, &p, sizeof p);
  }
  for (size_t i = 0; i < bp.sems.size(); ++i) {
    const SemLink& sl = bp.sems[i];
    exec::DeviceSem d{};
    d.handle = sl.handle;
    d.credits = sl.credits;
    d.peerSlot = static_cast<int16_t>(sl.peerSlot);
    d.channel = static_cast<int16_t>(sl.channel);
    d.mapped = bp.peers[static_cast<size_t>(sl.peerSlot)].mapped ? 1 : 0;
    const auto& port = dbp->semPorts[i];
    d.hasPort = port ? 1 : 0;
    if (port) d.port = port->deviceHandle();
    std::memcpy(host.data() + oSems + i * sizeof d, &d, sizeof d);
  }
  TSR_CHECK(ex->upload(base, host.data(), total));
  dbp->devicePlan = reinterpret_cast<exec::DevicePlan*>(base);
  return tsrSuccess;
}

}  // namespace

Result bindDevicePlan(DeviceExecutor* ex, std::shared_ptr<const Plan> plan, int ctas,
                      DeviceBoundPlan* dbp) {
  EngineImpl* e = ex->engine();
  const int rank = e->rank();
  TSR_CHECK(compilePlan(plan, rank, &dbp->compiled));
  BoundPlan& bp = dbp->compiled;
  TSR_CHECK(checkLimits(bp, rank, ctas));
  TransportContext& ctx = e->transports();
  const size_t scratchBytes = e->deviceScratchBytes();
  if (bp.plan->ranks[static_cast<size_t>(rank)].scratchSegments > 0) {
    TSR_CHECK(ex->allocate(scratchBytes, &dbp->scratch));
    bp.scratchBase = static_cast<char*>(dbp->scratch->data());
  }
  DeviceHello mine{bp.fingerprint, scratchBytes};
  Bootstrap& b = ctx.bootstrap();
  dbp->peerScratch.resize(bp.peers.size());
  dbp->ports.resize(bp.peers.size());
  size_t sem = 0;
  for (size_t s = 0; s < bp.peers.size(); ++s) {
    PeerLink& link = bp.peers[s];
    TSR_CHECK(ex->connection(link.peer, &link.connection));
    link.mapped = link.connection->mapsMemory();
    TSR_CHECK(b.send(link.peer, kEngineTagBase + kTagDevicePlanSetup, &mine, sizeof mine));
    TSR_CHECK(sendBlob(b, link.peer, dbp->scratch.get()));
    DeviceHello theirs{};
    TSR_CHECK(b.recv(link.peer, kEngineTagBase + kTagDevicePlanSetup, &theirs, sizeof theirs));
    std::string blob;
    TSR_CHECK(recvBlob(b, rank, link.peer, &blob));
    if (theirs.fingerprint != mine.fingerprint || theirs.scratchBytes != mine.scratchBytes)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d and rank %d set up different device plans for the same call (%s "
                      "here; scratch %llu bytes here, %llu there): are TESSERA_ALGO, "
                      "TESSERA_SCRATCH_BYTES and the calls the same on every rank?",
                      rank, link.peer, plan->name.c_str(),
                      static_cast<unsigned long long>(mine.scratchBytes),
                      static_cast<unsigned long long>(theirs.scratchBytes));
    if (!blob.empty()) {
      TSR_CHECK(link.connection->importMemory(blob, &link.scratch));
      link.scratchMapped = static_cast<char*>(link.scratch->mapped());
      dbp->peerScratch[s] = link.scratch;
    }
    for (; sem < bp.sems.size() && bp.sems[sem].peerSlot == static_cast<int>(s); ++sem) {
      SemLink& sl = bp.sems[sem];
      TSR_CHECK(ctx.createSemaphore(link.connection, &sl.semaphore, kDeviceTransportTag));
      sl.handle = sl.semaphore->deviceHandle();
    }
    bp.anyUnmapped = bp.anyUnmapped || !link.mapped;
  }
  // A zero-copy plan loads and stores the peers' windows (WorkItem::peerInput), which only a
  // memory channel maps; the engine chooses one only where every peer mapped the windows
  // (DeviceWindow::usable), so this is a plan given or named by the caller.
  if (bp.zeroCopy && bp.anyUnmapped)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: plan %s is zero-copy, and a peer of it is reached through a port "
                    "channel (not mapped): the device executor runs zero-copy plans only where "
                    "every peer maps this rank's windows",
                    rank, plan->name.c_str());
  dbp->semPorts.resize(bp.sems.size());
  if (bp.anyUnmapped) {
    TSR_CHECK(ex->allocate(kStagingBytesPerCta * static_cast<uint64_t>(ctas), &dbp->staging));
    for (size_t s = 0; s < bp.peers.size(); ++s) {
      PeerLink& link = bp.peers[s];
      if (link.mapped) continue;
      // A port channel's signal adds to the peer's counter of the semaphore it was made with, so
      // every (peer, channel) semaphore gets a port channel of its own, whose remote memory is
      // that semaphore's (it only signals and flushes: a peer without scratch, e.g. a broadcast
      // root, still gets credits back). Puts go through the peer's port, over its scratch (made
      // with its first semaphore, which that port never signals). All of them share the
      // context's proxy FIFO and the pair's connection: the proxy carries out one FIFO's
      // triggers in order on that connection, whose atomicAdd lands after every earlier put
      // (connection.hpp), so a put pushed before a signal is visible when the signal is.
      std::shared_ptr<Semaphore> first;
      for (size_t i = 0; i < bp.sems.size(); ++i) {
        const SemLink& sl = bp.sems[i];
        if (sl.peerSlot != static_cast<int>(s)) continue;
        if (!first) first = sl.semaphore;
        TSR_CHECK(ctx.createPortChannel(link.connection, sl.semaphore->remote(), dbp->staging,
                                        sl.semaphore, &dbp->semPorts[i]));
      }
      // Without the peer's scratch there is nothing to put to (the runner records
      // kWhyUnsupported if a put reaches it anyway).
      if (first && link.scratch)
        TSR_CHECK(ctx.createPortChannel(link.connection, link.scratch, dbp->staging, first,
                                        &dbp->ports[s]));
    }
  }
  TSR_CHECK(buildImage(ex, ctas, dbp));
  bp.bound = true;
  TSR_INFO("rank %d: plan %s bound for the device executor (%zu peers, %zu semaphores, %s)", rank,
           plan->name.c_str(), bp.peers.size(), bp.sems.size(),
           bp.anyUnmapped ? "port channels for unmapped peers" : "every peer mapped");
  return tsrSuccess;
}

}  // namespace tessera
