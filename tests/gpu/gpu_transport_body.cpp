#include "gpu_transport_body.hpp"

#include <memory>
#include <vector>

#include "gpu_transport_kernels.hpp"
#include "transport/channel.hpp"
#include "transport/cuda_ipc/cuda_memory.hpp"
#include "transport/semaphore.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::test {
namespace {

// Each peer gets one memory of 9 slots of n bytes on this rank (rounds: 0 host, 1 memory channel
// kernel, 2 port channel kernel):
//   0..2: this rank's data for rounds 0..2 (never written after the exchange)
//   3: the peer's host put   4: host get of the peer's slot 0
//   5: the peer's kernel put 6: kernel get of the peer's slot 1
//   7: the peer's port channel put   8: the peer's single-thread putWithSignal (kTail bytes)
constexpr int kSlots = 9;
constexpr size_t kTail = 1003;  // odd: the byte-wise tail of the copy loops

struct Peer {
  int rank = -1;
  std::shared_ptr<Connection> conn;
  std::shared_ptr<Memory> mem;
  std::shared_ptr<RemoteMemory> remote;
  std::shared_ptr<Semaphore> sem;
  std::unique_ptr<MemoryChannel> memoryChannel;
  std::unique_ptr<PortChannel> portChannel;
};

std::vector<uint8_t> patternBytes(int rank, uint64_t round, size_t n, size_t skip = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(rank, round, i + skip);
  return v;
}

// Reads `bytes` at `offset` of `mem` and compares with the peer's pattern of `round`.
std::string expectSlot(const Peer& p, int device, size_t offset, size_t bytes, uint64_t round,
                       double seconds, const char* what) {
  std::vector<uint8_t> got(bytes);
  std::string s =
      gpuCopy(device, got.data(), static_cast<char*>(p.mem->data()) + offset, bytes, seconds);
  if (!s.empty()) return s;
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != pattern(p.rank, round, i))
      return strprintf("%s from peer %d: byte %zu is %u, expected %u", what, p.rank, i, got[i],
                       pattern(p.rank, round, i));
  return "";
}

}  // namespace

#define TT_STR(expr)                  \
  do {                                \
    std::string tt_s_ = (expr);       \
    if (!tt_s_.empty()) return tt_s_; \
  } while (0)

std::string gpuTransportRoundTrip(TransportContext& ctx, const GpuRoundTrip& o) {
  const int me = ctx.rank();
  const int dev = ctx.state()->cudaDevice;
  const double secs = ctx.timeoutSeconds();
  const size_t n = o.slotBytes;
  TT_CHECK(dev >= 0, "rank %d has no GPU", me);
  cudaPreferLegacyAllocation(o.legacyAllocation);
  std::vector<Peer> peers;
  for (int p = 0; p < ctx.nranks(); ++p) {
    if (p == me) continue;
    Peer peer;
    peer.rank = p;
    if (o.autoSelect)
      TT_CHECK_OK(ctx.connect(p, &peer.conn));
    else
      TT_CHECK_OK(ctx.connect(p, o.kind, &peer.conn));
    TT_CHECK(peer.conn->kind() == o.kind, "peer %d: picked %s, expected %s", p,
             transportName(peer.conn->kind()), transportName(o.kind));
    TT_CHECK(peer.conn->mapsMemory(), "%s must map memory", transportName(o.kind));
    TT_CHECK_OK(ctx.allocate(kSlots * n, MemoryKind::kCuda, &peer.mem));
    for (uint64_t round = 0; round < 3; ++round) {
      auto bytes = patternBytes(me, round, n);
      TT_STR(gpuCopy(dev, static_cast<char*>(peer.mem->data()) + round * n, bytes.data(), n, secs));
    }
    TT_CHECK_OK(ctx.exchangeMemory(*peer.conn, *peer.mem, &peer.remote));
    TT_CHECK(peer.remote->mapped() != nullptr, "peer %d: memory not mapped", p);
    TT_CHECK_OK(ctx.createSemaphore(peer.conn, &peer.sem));
    TT_CHECK(peer.sem->mapped(), "peer %d: semaphore not mapped", p);
    peers.push_back(std::move(peer));
  }

  // Round 0: host calls. A put is in the peer's memory once the signal after it is seen.
  for (Peer& p : peers) {
    TT_CHECK_OK(p.conn->put(*p.remote, 3 * n, *p.mem, 0, n));
    TT_CHECK_OK(p.sem->signal());
  }
  for (Peer& p : peers) {
    TT_CHECK_OK(p.sem->wait());
    TT_STR(expectSlot(p, dev, 3 * n, n, 0, secs, "host put"));
    TT_CHECK_OK(p.conn->get(*p.mem, 4 * n, *p.remote, 0, n));
    TT_STR(expectSlot(p, dev, 4 * n, n, 0, secs, "host get"));
    TT_CHECK(p.conn->put(*p.remote, kSlots * n - 8, *p.mem, 0, 16) == tsrInvalidArgument,
             "an out-of-range put must fail");
    TT_CHECK_OK(p.conn->flush());
    TT_CHECK(p.sem->received() == 1 && p.sem->consumed() == 1, "counters %llu/%llu",
             static_cast<unsigned long long>(p.sem->received()),
             static_cast<unsigned long long>(p.sem->consumed()));
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());

  // Round 1: memory channel handles in a kernel, one block per peer.
  std::vector<device::MemoryChannelDeviceHandle> mh;
  for (Peer& p : peers) {
    TT_CHECK_OK(ctx.createMemoryChannel(p.conn, p.remote, p.mem, p.sem, &p.memoryChannel));
    mh.push_back(p.memoryChannel->deviceHandle());
  }
  TT_STR(runMemoryChannelKernel(dev, mh, n, kTail, 20, secs));
  for (Peer& p : peers) {
    TT_STR(expectSlot(p, dev, 5 * n, n, 1, secs, "kernel put"));
    TT_STR(expectSlot(p, dev, 6 * n, n, 1, secs, "kernel get"));
    TT_STR(expectSlot(p, dev, 8 * n, kTail, 1, secs, "kernel putWithSignal"));
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());

  // Round 2: port channels driven from a kernel; this rank's proxy does the copies.
  std::vector<device::PortChannelDeviceHandle> ph;
  for (Peer& p : peers) {
    TT_CHECK_OK(ctx.createPortChannel(p.conn, p.remote, p.mem, p.sem, &p.portChannel));
    ph.push_back(p.portChannel->deviceHandle());
  }
  TT_STR(runPortChannelKernel(dev, ph, n, secs));
  for (Peer& p : peers) TT_STR(expectSlot(p, dev, 7 * n, n, 2, secs, "port channel put"));
  // Nothing is freed while a peer's kernel may still run (freeing can synchronize the device).
  TT_CHECK_OK(ctx.bootstrap().barrier());

  // Imports go before any rank frees what they map (a legacy IPC mapping of freed memory is
  // undefined behaviour).
  for (Peer& p : peers) {
    p.portChannel.reset();
    p.memoryChannel.reset();
    p.sem.reset();
    p.remote.reset();
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

}  // namespace tessera::test
