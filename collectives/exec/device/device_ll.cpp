// The LL protocol's host side (ll.hpp): the inboxes, their exchange with the peers, and posting an
// LL item. Set up on the first LL call, which every rank makes at the same call (they run the same
// calls and the tuner decides identically), pairwise in increasing peer order.
#include <cstring>
#include <vector>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/device/ll.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "core/datatype.hpp"
#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// The bootstrap tag of the inbox exchange (a user tag of the transport layer: "LL").
constexpr int kLLExchangeTag = 0x4c4c;

static_assert(exec::kLLAllReduce == static_cast<uint8_t>(Collective::kAllReduce));
static_assert(exec::kLLReduceScatter == static_cast<uint8_t>(Collective::kReduceScatter));
static_assert(exec::kLLAllGather == static_cast<uint8_t>(Collective::kAllGather));
static_assert(exec::kLLBroadcast == static_cast<uint8_t>(Collective::kBroadcast));
static_assert(exec::kLLReduce == static_cast<uint8_t>(Collective::kReduce));
static_assert(exec::kLLAllToAll == static_cast<uint8_t>(Collective::kAllToAll));

// The premulsum scalar as RedCompute<T>'s bytes, little end first (WorkItem::scalarBits).
uint64_t scalarBitsOf(const RedOpDesc& op, tsrDataType_t dtype) {
  return dtypeVisit(dtype, [&](auto t) -> uint64_t {
    using T = decltype(t);
    auto s = preMulScalar<T>(op);
    uint64_t bits = 0;
    std::memcpy(&bits, &s, sizeof s);
    return bits;
  });
}

}  // namespace

struct DeviceExecutor::LLState {
  std::shared_ptr<Memory> inbox;                     // [2 parities][nranks senders][kLLSlotBytes]
  std::vector<std::shared_ptr<RemoteMemory>> peers;  // by rank
  std::shared_ptr<Memory> image;             // DeviceLL, peerInbox[nranks], epoch[kLLMaxCtas]
  const exec::DeviceLL* deviceLL = nullptr;  // inside `image`
  bool usable = false;                       // every peer maps the inbox
  uint64_t calls = 0;                        // LL items posted with this inbox
  // An inbox replaced at kLLEpochLimit stays alive: items posted before may still use it.
  std::unique_ptr<LLState, LLDeleter> previous;

  static Result create(DeviceExecutor& ex, std::unique_ptr<LLState>* out) {
    const int n = ex.options_.nranks, rank = ex.options_.rank;
    auto st = std::make_unique<LLState>();
    const size_t inboxBytes = 2 * static_cast<size_t>(n) * exec::kLLSlotBytes;
    TSR_CHECK(ex.allocate(inboxBytes, &st->inbox));
    {
      // Zero before any peer can write (they learn the inbox only from the exchange below):
      // flag 0 never matches an epoch.
      std::vector<char> zeros(inboxBytes, 0);
      TSR_CHECK(ex.upload(st->inbox->data(), zeros.data(), inboxBytes));
    }
    st->peers.resize(static_cast<size_t>(n));
    bool mapped = true;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      std::shared_ptr<Connection> conn;
      TSR_CHECK(ex.connection(peer, &conn));
      TSR_CHECK(ex.options_.transports->exchangeMemory(
          *conn, *st->inbox, &st->peers[static_cast<size_t>(peer)], kLLExchangeTag));
      if (st->peers[static_cast<size_t>(peer)]->mapped() == nullptr) mapped = false;
    }
    // The image: DeviceLL, then the peers' inbox pointers, then the epoch words (all zero).
    const size_t ptrOff = (sizeof(exec::DeviceLL) + 15) / 16 * 16;
    const size_t epochOff = ptrOff + static_cast<size_t>(n) * sizeof(char*);
    const size_t imageBytes = epochOff + exec::kLLMaxCtas * sizeof(uint32_t);
    TSR_CHECK(ex.allocate(imageBytes, &st->image));
    char* base = static_cast<char*>(st->image->data());
    std::vector<char> host(imageBytes, 0);
    std::vector<char*> inboxes(static_cast<size_t>(n), nullptr);
    for (int r = 0; r < n; ++r)
      inboxes[static_cast<size_t>(r)] =
          r == rank ? static_cast<char*>(st->inbox->data())
                    : static_cast<char*>(st->peers[static_cast<size_t>(r)]->mapped());
    exec::DeviceLL d{};
    d.inbox = static_cast<char*>(st->inbox->data());
    d.peerInbox = reinterpret_cast<char* const*>(base + ptrOff);
    d.epoch = reinterpret_cast<uint32_t*>(base + epochOff);
    d.slotBytes = exec::kLLSlotBytes;
    d.rank = rank;
    d.nranks = n;
    std::memcpy(host.data(), &d, sizeof d);
    std::memcpy(host.data() + ptrOff, inboxes.data(), inboxes.size() * sizeof(char*));
    TSR_CHECK(ex.upload(base, host.data(), imageBytes));
    st->deviceLL = reinterpret_cast<const exec::DeviceLL*>(base);
    st->usable = mapped;
    if (!mapped)
      TSR_INFO("rank %d: LL protocol off: a peer's inbox is not mapped (port channel peers)", rank);
    *out = std::move(st);
    return tsrSuccess;
  }
};

void DeviceExecutor::LLDeleter::operator()(LLState* p) const { delete p; }

Result DeviceExecutor::enqueueLL(const CollCall& call, uint64_t callNo, void* stream, bool* used) {
  *used = false;
  const uint64_t payload = static_cast<uint64_t>(call.count) * dtypeSize(call.dtype);
  if (!exec::llSupports(static_cast<uint8_t>(call.collective), payload, options_.nranks) ||
      options_.ctas < 1 || static_cast<uint32_t>(options_.ctas) > exec::kLLMaxCtas)
    return tsrSuccess;
  if (!ll_ || ll_->calls >= exec::kLLEpochLimit) {
    bool capturing = false;
    if (!emulated() && exec::streamIsCapturing(stream, &capturing) == tsrSuccess && capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: call %llu would set up the LL protocol's buffers while its stream "
                      "is being captured into a graph, which forbids allocations: make one small "
                      "device collective outside the capture first",
                      options_.rank, static_cast<unsigned long long>(callNo));
    // Every rank posted the same number of LL calls, so all replace their inboxes at this call.
    std::unique_ptr<LLState> fresh;
    TSR_CHECK(LLState::create(*this, &fresh));
    fresh->previous = std::move(ll_);
    ll_.reset(fresh.release());
  }
  if (!ll_->usable) return tsrSuccess;
  exec::WorkItem item{};
  item.kind = exec::kItemLL;
  item.ll = ll_->deviceLL;
  item.collective = static_cast<uint8_t>(call.collective);
  item.root = call.root;
  item.input = static_cast<const char*>(call.sendbuf);
  item.output = static_cast<char*>(call.recvbuf);
  item.count = call.count;
  item.dtype = static_cast<uint8_t>(call.dtype);
  item.redKind = static_cast<uint8_t>(call.op.kind);
  item.preOp = call.op.kind == RedKind::kPreMulSum ? 1 : 0;
  item.scalarBits = item.preOp != 0 ? scalarBitsOf(call.op, call.dtype) : 0;
  item.postAvg = call.op.kind == RedKind::kAvg ? 1 : 0;
  item.callNo = callNo;
  item.slice = call.count;
  item.iters = 1;
  TSR_CHECK(post(item, stream));
  ++ll_->calls;
  *used = true;
  return tsrSuccess;
}

}  // namespace tessera
