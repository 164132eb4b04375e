// The host side of the device executor's sends and receives (p2p.hpp): the links to peers, the
// group ring, and a group cut into lanes and posted as one kItemP2P item.
//
// Links are set up pairwise when a group first names a peer (its first send to it or receive from
// it), in increasing peer order within the group, which cannot deadlock (bind.cpp says why): both
// ranks compare their ring geometry, allocate their inbox where the executing side reaches it
// (device memory; host memory in the emulation), exchange them, and make the two semaphores. The
// peer's inbox must be mapped here (p2p, cuda_ipc; inproc, shm in the emulation): a pair reached
// only through a proxy (ucx) is refused with a sentence, on both ranks alike.
#include <cstring>
#include <vector>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "core/datatype.hpp"
#include "transport/semaphore.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// The transport layer's user tag of the links' memory and semaphores ("P2").
constexpr int kP2PExchangeTag = 0x5032;

struct LinkHello {
  uint64_t slotBytes;
  uint32_t slots;
  uint32_t pad;
};

}  // namespace

struct DeviceExecutor::P2PState {
  struct Link {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<Memory> inbox;  // null until the link is set up
    std::shared_ptr<RemoteMemory> peerInbox;
    std::shared_ptr<Semaphore> data, ack;
  };
  std::vector<Link> links;        // by rank
  std::shared_ptr<Memory> image;  // DeviceP2P, then DeviceP2PLink[nranks]
  const exec::DeviceP2P* device = nullptr;
  exec::DeviceP2PLink* deviceLinks = nullptr;
  // Persistent mode: the group ring (P2PGroupDesc per queue slot), written by the triggers.
  std::shared_ptr<Memory> ring;
  exec::P2PGroupDesc* groups = nullptr;
  uint64_t slotBytes = 0;

  static Result create(DeviceExecutor& ex, std::unique_ptr<P2PState>* out) {
    const DeviceExecutorOptions& o = ex.options_;
    auto st = std::make_unique<P2PState>();
    st->slotBytes = o.p2pSlotBytes > 0 ? (o.p2pSlotBytes + 63) / 64 * 64 : kDeviceP2PSlotBytes;
    st->links.resize(static_cast<size_t>(o.nranks));
    const size_t linksOff = (sizeof(exec::DeviceP2P) + 63) / 64 * 64;
    const size_t bytes = linksOff + static_cast<size_t>(o.nranks) * sizeof(exec::DeviceP2PLink);
    TSR_CHECK(ex.allocate(bytes, &st->image));  // zeroed: every link's counters start at 0
    char* base = static_cast<char*>(st->image->data());
    exec::DeviceP2P d{};
    d.links = reinterpret_cast<exec::DeviceP2PLink*>(base + linksOff);
    d.slotBytes = st->slotBytes;
    d.slots = kDeviceP2PSlots;
    d.rank = o.rank;
    d.nranks = o.nranks;
    TSR_CHECK(ex.upload(base, &d, sizeof d));
    st->device = reinterpret_cast<const exec::DeviceP2P*>(base);
    st->deviceLinks = d.links;
    if (o.mode == LaunchMode::kPersistent) {
      TSR_CHECK(ex.allocate(o.queueSlots * sizeof(exec::P2PGroupDesc), &st->ring));
      st->groups = static_cast<exec::P2PGroupDesc*>(st->ring->data());
    }
    *out = std::move(st);
    return tsrSuccess;
  }

  // Pairwise with `peer`, which does the same for this rank.
  Result setUp(DeviceExecutor& ex, int peer) {
    const int rank = ex.options_.rank;
    Link& l = links[static_cast<size_t>(peer)];
    TSR_CHECK(ex.connection(peer, &l.connection));
    TransportContext& ctx = *ex.options_.transports;
    Bootstrap& b = ctx.bootstrap();
    const LinkHello mine{slotBytes, kDeviceP2PSlots, 0};
    LinkHello theirs{};
    TSR_CHECK(b.send(peer, kEngineTagBase + kTagDeviceP2PSetup, &mine, sizeof mine));
    TSR_CHECK(b.recv(peer, kEngineTagBase + kTagDeviceP2PSetup, &theirs, sizeof theirs));
    if (theirs.slotBytes != mine.slotBytes || theirs.slots != mine.slots)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d and rank %d use different send/recv rings on device buffers (%u "
                      "slots of %llu bytes here, %u of %llu there): every rank needs the same",
                      rank, peer, mine.slots, static_cast<unsigned long long>(mine.slotBytes),
                      theirs.slots, static_cast<unsigned long long>(theirs.slotBytes));
    std::shared_ptr<Memory> inbox;
    TSR_CHECK(ex.allocate(kDeviceP2PSlots * (exec::kP2PHeaderBytes + slotBytes), &inbox));
    TSR_CHECK(ctx.exchangeMemory(*l.connection, *inbox, &l.peerInbox, kP2PExchangeTag));
    if (l.peerInbox->mapped() == nullptr)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: send/recv on device buffers with rank %d needs a transport that "
                      "maps the peer's memory (p2p or cuda_ipc), and %s does not; use host "
                      "buffers for this pair",
                      rank, peer, transportName(l.connection->kind()));
    TSR_CHECK(ctx.createSemaphore(l.connection, &l.data, kP2PExchangeTag));
    TSR_CHECK(ctx.createSemaphore(l.connection, &l.ack, kP2PExchangeTag));
    exec::DeviceP2PLink d{};
    d.inbox = static_cast<char*>(inbox->data());
    d.peerInbox = static_cast<char*>(l.peerInbox->mapped());
    d.data = l.data->deviceHandle();
    d.ack = l.ack->deviceHandle();
    // No item has used this entry yet (this is the first group naming the peer), so nothing on
    // the executing side races with the upload.
    TSR_CHECK(ex.upload(&deviceLinks[peer], &d, sizeof d));
    l.inbox = std::move(inbox);
    TSR_INFO("rank %d: device send/recv link to rank %d over %s (%u slots of %llu bytes)", rank,
             peer, transportName(l.connection->kind()), kDeviceP2PSlots,
             static_cast<unsigned long long>(slotBytes));
    return tsrSuccess;
  }
};

void DeviceExecutor::P2PDeleter::operator()(P2PState* p) const { delete p; }

Result DeviceExecutor::enqueueP2P(const std::vector<P2PCall>& calls, uint64_t groupNo,
                                  void* stream) {
  const int n = options_.nranks, me = options_.rank;
  if (calls.size() > exec::kP2PMaxCalls)
    return TSR_FAIL(tsrInvalidUsage, "rank %d: send/recv group %llu has %zu calls, more than %u",
                    me, static_cast<unsigned long long>(groupNo), calls.size(), exec::kP2PMaxCalls);
  std::vector<std::vector<const P2PCall*>> sends(static_cast<size_t>(n)),
      recvs(static_cast<size_t>(n));
  for (const P2PCall& c : calls)
    (c.isSend ? sends : recvs)[static_cast<size_t>(c.peer)].push_back(&c);
  std::vector<int> fresh;  // peers named for the first time, in increasing order
  for (int p = 0; p < n; ++p) {
    const auto up = static_cast<size_t>(p);
    if (p != me && (!sends[up].empty() || !recvs[up].empty()) && (!p2p_ || !p2p_->links[up].inbox))
      fresh.push_back(p);
  }
  if (!p2p_ || !fresh.empty()) {
    bool capturing = false;
    if (!emulated() && exec::streamIsCapturing(stream, &capturing) == tsrSuccess && capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: send/recv group %llu is the first to name %s and is being captured "
                      "into a graph; setting up a link allocates memory, which a capture forbids: "
                      "make the same sends and receives once outside the capture first",
                      me, static_cast<unsigned long long>(groupNo),
                      fresh.empty() ? "any peer" : strprintf("rank %d", fresh[0]).c_str());
    if (!p2p_) {
      std::unique_ptr<P2PState> st;
      TSR_CHECK(P2PState::create(*this, &st));
      p2p_.reset(st.release());
    }
    for (int p : fresh) {
      Result r = p2p_->setUp(*this, p);
      // Setup talks to the peer: a failure half-way leaves the pair out of step for good.
      if (r != tsrSuccess) return options_.engine->poison(r);
    }
  }

  // Lanes, nearest peers first, a send lane and a receive lane in turn (lane l runs on CTA
  // l % ctas, so with two CTAs sends and receives run side by side), sends to self last.
  exec::P2PGroupDesc group{};
  group.state = p2p_->device;
  auto addLane = [&](int peer, uint8_t kind, const std::vector<const P2PCall*>& list) {
    if (list.empty()) return;
    exec::P2PLane& lane = group.lanes[group.nlanes++];
    lane.begin = static_cast<uint16_t>(group.ntransfers);
    lane.peer = static_cast<int16_t>(peer);
    lane.kind = kind;
    for (const P2PCall* c : list) {
      exec::P2PTransfer& t = group.transfers[group.ntransfers++];
      t.buf = kind == exec::kP2PLaneSend ? static_cast<char*>(const_cast<void*>(c->sendbuf))
                                         : static_cast<char*>(c->recvbuf);
      t.bytes = c->count * dtypeSize(c->dtype);
    }
    lane.end = static_cast<uint16_t>(group.ntransfers);
  };
  for (int d = 1; d < n; ++d) {
    addLane((me + d) % n, exec::kP2PLaneSend, sends[static_cast<size_t>((me + d) % n)]);
    addLane((me + n - d) % n, exec::kP2PLaneRecv, recvs[static_cast<size_t>((me + n - d) % n)]);
  }
  const auto& selfSends = sends[static_cast<size_t>(me)];
  const auto& selfRecvs = recvs[static_cast<size_t>(me)];
  for (size_t i = 0; i < selfSends.size() && i < selfRecvs.size(); ++i) {
    exec::P2PLane& lane = group.lanes[group.nlanes++];
    lane.begin = static_cast<uint16_t>(group.ntransfers);
    lane.end = static_cast<uint16_t>(group.ntransfers + 2);
    lane.peer = static_cast<int16_t>(me);
    lane.kind = exec::kP2PLaneSelf;
    group.transfers[group.ntransfers++] =
        exec::P2PTransfer{static_cast<char*>(const_cast<void*>(selfSends[i]->sendbuf)),
                          selfSends[i]->count * dtypeSize(selfSends[i]->dtype)};
    group.transfers[group.ntransfers++] =
        exec::P2PTransfer{static_cast<char*>(selfRecvs[i]->recvbuf),
                          selfRecvs[i]->count * dtypeSize(selfRecvs[i]->dtype)};
  }
  exec::WorkItem item{};
  item.kind = exec::kItemP2P;
  item.callNo = groupNo | exec::kP2PCallBit;
  return post(item, stream, &group, p2p_->groups);
}

std::string p2pFailureText(const exec::ErrorRecord& e, int rank, const char* why) {
  const auto a = static_cast<unsigned long long>(e.arg0);
  const auto b = static_cast<unsigned long long>(e.arg1);
  std::string what;
  switch (e.why) {
    case exec::kWhyP2PSize:
      what = strprintf("rank %d receives %llu bytes from rank %d, which sends %llu bytes", rank, a,
                       e.peer, b);
      break;
    case exec::kWhyP2POrder:
      what = strprintf("a piece from rank %d arrived out of order (offset %llu, expected %llu)",
                       e.peer, b, a);
      break;
    case exec::kWhyP2PSend:
      what = strprintf(
          "a send to rank %d waited past its deadline for a free slot (%llu of %llu bytes sent; "
          "did rank %d post the receive?)",
          e.peer, a, b, e.peer);
      break;
    case exec::kWhyP2PRecv:
      what = strprintf(
          "a receive from rank %d waited past its deadline for data (%llu of %llu bytes "
          "received; did rank %d post the send?)",
          e.peer, a, b, e.peer);
      break;
    default: what = why;
  }
  return strprintf("rank %d: device send/recv group %llu failed: %s (CTA %d, peer rank %d)", rank,
                   static_cast<unsigned long long>(e.callNo & ~exec::kP2PCallBit), what.c_str(),
                   e.cta, e.peer);
}

}  // namespace tessera
