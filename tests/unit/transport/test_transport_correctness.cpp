// Correctness of every host transport, independent of which one: every rank puts to every other
// rank at once (64 puts of random sizes at random unaligned offsets, 1 byte and odd sizes
// included, one of about 1 MiB), then one flush and one signal per peer; each rank waits for
// every peer's signal and checks every byte of its buffer against the byte pattern the sender
// wrote (pattern() in transport_test_util.hpp), gaps between puts included. Gets read back the
// peer's pattern. Run through the Connection, a MemoryChannel (host calls and the device handle
// from a host thread) and a PortChannel (the proxy path).
#include <algorithm>
#include <cstring>

#include "transport/channel.hpp"
#include "transport/semaphore.hpp"
#include "transport_matrix.hpp"

namespace tessera::test {
namespace {

constexpr size_t kSendBytes = (size_t{1} << 20) + 8192 + 37;  // odd, so ends are unaligned
constexpr size_t kSlotBytes = (size_t{3} << 19) + 4096;       // one sender's part of a buffer
constexpr size_t kGetBytes = kSendBytes + 64;
constexpr int kPuts = 64;
constexpr int kGets = 16;
constexpr int kRounds = 2;

struct Op {
  size_t dst;
  size_t src;
  size_t bytes;
};

// One byte, one of about 1 MiB (odd), the rest log-uniform up to 8 KiB (every other one odd).
size_t opSize(std::mt19937_64& rng, int k, int count) {
  if (k == 0) return 1;
  if (k == count / 2) return (size_t{1} << 20) - 1 - 2 * (rng() % 512);
  size_t n = 1 + rng() % (size_t{1} << (rng() % 14));
  return k % 2 ? (n | 1) : n;
}

// What `sender` puts into `receiver`'s slot in `round`: disjoint ranges, in increasing order,
// separated by random gaps that must stay untouched. Both sides derive it from the seed.
std::vector<Op> putPlan(uint64_t seed, int round, int sender, int receiver) {
  auto rng = rngFor(seed, static_cast<uint64_t>(round), static_cast<uint64_t>(sender),
                    static_cast<uint64_t>(receiver));
  std::vector<Op> ops;
  size_t cursor = rng() % 16;
  for (int k = 0; k < kPuts; ++k) {
    size_t n = opSize(rng, k, kPuts);
    ops.push_back({cursor, rng() % (kSendBytes - n + 1), n});
    cursor += n + rng() % 32;
  }
  return ops;
}

// Gets of this rank from `peer`'s send buffer into its own get buffer (ranges may overlap: each
// is checked right after it returns).
std::vector<Op> getPlan(uint64_t seed, int round, int rank, int peer) {
  auto rng = rngFor(seed, 1000 + static_cast<uint64_t>(round), static_cast<uint64_t>(rank),
                    static_cast<uint64_t>(peer));
  std::vector<Op> ops;
  for (int k = 0; k < kGets; ++k) {
    size_t n = opSize(rng, k, kGets);
    ops.push_back({rng() % (kGetBytes - n + 1), rng() % (kSendBytes - n + 1), n});
  }
  return ops;
}

// What a receiver's buffer holds where nobody put anything.
uint8_t fillByte(int rank, int round, size_t i) {
  return pattern(1000 + rank, static_cast<uint64_t>(round), i);
}

// Checks the slot `sender` filled in this rank's buffer, gaps included; "" when right.
std::string checkSlot(const uint8_t* buf, uint64_t seed, int round, int sender, int me) {
  auto ops = putPlan(seed, round, sender, me);
  size_t base = static_cast<size_t>(sender) * kSlotBytes;
  size_t at = 0;
  for (size_t k = 0; k <= ops.size(); ++k) {
    size_t gapEnd = k < ops.size() ? ops[k].dst : kSlotBytes;
    for (; at < gapEnd; ++at)
      if (buf[base + at] != fillByte(me, round, base + at))
        return strprintf(
            "rank %d, round %d: byte %zu of sender %d's slot, outside every put "
            "(before put %zu), was overwritten: 0x%02x, expected 0x%02x",
            me, round, at, sender, k, buf[base + at], fillByte(me, round, base + at));
    if (k == ops.size()) break;
    const Op& op = ops[k];
    for (size_t j = 0; j < op.bytes; ++j) {
      uint8_t want = pattern(sender, static_cast<uint64_t>(round), op.src + j);
      if (buf[base + op.dst + j] != want)
        return strprintf(
            "rank %d, round %d: put %zu of %zu bytes from rank %d (src %zu -> dst "
            "%zu): byte %zu is 0x%02x, expected 0x%02x",
            me, round, k, op.bytes, sender, op.src, op.dst, j, buf[base + op.dst + j], want);
    }
    at = op.dst + op.bytes;
  }
  return "";
}

std::string checkGet(const uint8_t* buf, const Op& op, int peer, int round, int me, size_t k) {
  for (size_t j = 0; j < op.bytes; ++j) {
    uint8_t want = pattern(peer, static_cast<uint64_t>(round), op.src + j);
    if (buf[op.dst + j] != want)
      return strprintf(
          "rank %d, round %d: get %zu of %zu bytes from rank %d (src %zu -> dst "
          "%zu): byte %zu is 0x%02x, expected 0x%02x",
          me, round, k, op.bytes, peer, op.src, op.dst, j, buf[op.dst + j], want);
  }
  return "";
}

enum class Path { kConnection, kMemoryChannel, kPortChannel };

// Everything one rank holds for one peer.
struct PeerLink {
  std::shared_ptr<Connection> conn;
  std::shared_ptr<RemoteMemory> recv;  // the peer's receive buffer
  std::shared_ptr<RemoteMemory> send;  // the peer's send buffer (gets read it)
  std::shared_ptr<Semaphore> sem;
  std::unique_ptr<MemoryChannel> mc;     // over (peer's recv, my send)
  std::unique_ptr<MemoryChannel> mcGet;  // over (peer's send, my get buffer)
  std::unique_ptr<PortChannel> pc;
};

std::string runAllPairs(TransportContext& ctx, const TransportCase& c, Path path, uint64_t seed) {
  const int me = ctx.rank(), n = ctx.nranks();
  std::vector<std::shared_ptr<Connection>> conns;
  TT_CHECK_OK(connectAllKind(ctx, c.kind, &conns));
  std::shared_ptr<Memory> send, recv, get;
  TT_CHECK_OK(ctx.allocate(kSendBytes, MemoryKind::kHost, &send));
  TT_CHECK_OK(ctx.allocate(kSlotBytes * static_cast<size_t>(n), MemoryKind::kHost, &recv));
  TT_CHECK_OK(ctx.allocate(kGetBytes, MemoryKind::kHost, &get));
  std::vector<PeerLink> links(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    PeerLink& l = links[static_cast<size_t>(p)];
    l.conn = conns[static_cast<size_t>(p)];
    TT_CHECK(l.conn->kind() == c.kind, "connection to %d is %s", p, transportName(l.conn->kind()));
    TT_CHECK_OK(ctx.exchangeMemory(*l.conn, *recv, &l.recv, 0));
    TT_CHECK_OK(ctx.exchangeMemory(*l.conn, *send, &l.send, 1));
    TT_CHECK_OK(ctx.createSemaphore(l.conn, &l.sem));
    if (path == Path::kMemoryChannel) {
      Result r = ctx.createMemoryChannel(l.conn, l.recv, send, l.sem, &l.mc);
      if (!l.conn->mapsMemory()) {
        // ucx does not map: the channel must be refused, saying to use a port channel.
        TT_CHECK(r == tsrInvalidUsage, "memory channel over %s: %s", transportName(c.kind),
                 resultName(r));
        TT_CHECK(std::strstr(lastErrorMessage(), "port channel") != nullptr, "sentence: %s",
                 lastErrorMessage());
        continue;
      }
      TT_CHECK_OK(r);
      TT_CHECK_OK(ctx.createMemoryChannel(l.conn, l.send, get, l.sem, &l.mcGet));
    }
    if (path == Path::kPortChannel)
      TT_CHECK_OK(ctx.createPortChannel(l.conn, l.recv, send, l.sem, &l.pc));
  }
  if (path == Path::kMemoryChannel && !conns[me == 0 ? 1 : 0]->mapsMemory()) return "";

  auto* sendBytes = static_cast<uint8_t*>(send->data());
  auto* recvBytes = static_cast<uint8_t*>(recv->data());
  auto* getBytes = static_cast<uint8_t*>(get->data());
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < kSendBytes; ++i) sendBytes[i] = pattern(me, round, i);
    for (size_t i = 0; i < recv->size(); ++i) recvBytes[i] = fillByte(me, round, i);
    TT_CHECK_OK(ctx.bootstrap().barrier());

    // Every peer at once: all puts to every peer, then each peer's flush and signal.
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      PeerLink& l = links[static_cast<size_t>(p)];
      auto ops = putPlan(seed, round, me, p);
      size_t base = static_cast<size_t>(me) * kSlotBytes;
      for (size_t k = 0; k < ops.size(); ++k) {
        const Op& op = ops[k];
        size_t dst = base + op.dst;
        switch (path) {
          case Path::kConnection:
            if (k % 2)
              TT_CHECK_OK(l.conn->put(*l.recv, dst, sendBytes + op.src, op.bytes));
            else
              TT_CHECK_OK(l.conn->put(*l.recv, dst, *send, op.src, op.bytes));
            break;
          case Path::kMemoryChannel:
            if (k % 2) {
              auto h = l.mc->deviceHandle();
              for (uint32_t t = 0; t < 3; ++t)
                TT_CHECK(h.put(dst, op.src, op.bytes, t, 3), "device put %zu to %d", k, p);
            } else {
              TT_CHECK_OK(l.mc->put(dst, op.src, op.bytes));
            }
            break;
          case Path::kPortChannel:
            if (k % 2)
              TT_CHECK(l.pc->deviceHandle().put(dst, op.src, op.bytes), "port device put %zu", k);
            else
              TT_CHECK_OK(l.pc->put(dst, op.src, op.bytes));
            break;
        }
      }
      switch (path) {
        case Path::kConnection:
          TT_CHECK_OK(l.conn->flush());
          TT_CHECK_OK(l.sem->signal());
          break;
        case Path::kMemoryChannel:
          if (round % 2)
            l.mc->deviceHandle().signal();
          else
            TT_CHECK_OK(l.mc->signal());
          break;
        case Path::kPortChannel:
          TT_CHECK_OK(l.pc->flush());
          if (round % 2)
            TT_CHECK(l.pc->deviceHandle().signal(), "port device signal");
          else
            TT_CHECK_OK(l.pc->signal());
          TT_CHECK_OK(l.pc->flush());
          break;
      }
    }
    // Then every peer's signal, each covering that peer's puts.
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      PeerLink& l = links[static_cast<size_t>(p)];
      if (path == Path::kMemoryChannel && round % 2)
        TT_CHECK(l.mc->deviceHandle().wait(20'000'000'000ull), "device wait for %d", p);
      else
        TT_CHECK_OK(l.sem->wait());
      std::string bad = checkSlot(recvBytes, seed, round, p, me);
      if (!bad.empty()) return bad;
    }
    // The own slot nobody writes.
    for (size_t i = 0; i < kSlotBytes; ++i) {
      size_t at = static_cast<size_t>(me) * kSlotBytes + i;
      TT_CHECK(recvBytes[at] == fillByte(me, round, at), "own slot byte %zu changed", i);
    }

    // Gets read the peers' patterns back (their send buffers stay until the barrier below).
    if (path != Path::kPortChannel) {
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        PeerLink& l = links[static_cast<size_t>(p)];
        auto ops = getPlan(seed, round, me, p);
        for (size_t k = 0; k < ops.size(); ++k) {
          const Op& op = ops[k];
          uint8_t before = op.dst > 0 ? getBytes[op.dst - 1] : 0;
          uint8_t after = op.dst + op.bytes < kGetBytes ? getBytes[op.dst + op.bytes] : 0;
          if (path == Path::kConnection)
            TT_CHECK_OK(l.conn->get(*get, op.dst, *l.send, op.src, op.bytes));
          else if (k % 2)
            TT_CHECK(l.mcGet->deviceHandle().get(op.dst, op.src, op.bytes, 0, 1), "device get");
          else
            TT_CHECK_OK(l.mcGet->get(op.dst, op.src, op.bytes));
          std::string bad = checkGet(getBytes, op, p, round, me, k);
          if (!bad.empty()) return bad;
          TT_CHECK(op.dst == 0 || getBytes[op.dst - 1] == before, "get %zu wrote before dst", k);
          TT_CHECK(op.dst + op.bytes >= kGetBytes || getBytes[op.dst + op.bytes] == after,
                   "get %zu wrote past its end", k);
        }
      }
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
  }
  return "";
}

class TransportCorrectness : public ::testing::TestWithParam<TransportCase> {};

RankOptions quickOptions() {
  RankOptions o;
  o.timeoutSeconds = 15;
  o.runSeconds = 30;
  return o;
}

TEST_P(TransportCorrectness, ConnectionPutGetSignalAllPeers) {
  TransportCase c = GetParam();
  uint64_t seed = testSeed();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return runAllPairs(ctx, c, Path::kConnection, seed); },
      quickOptions()));
}

TEST_P(TransportCorrectness, MemoryChannelPutGetSignalAllPeers) {
  TransportCase c = GetParam();
  uint64_t seed = testSeed();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return runAllPairs(ctx, c, Path::kMemoryChannel, seed); },
      quickOptions()));
}

TEST_P(TransportCorrectness, PortChannelPutSignalAllPeers) {
  TransportCase c = GetParam();
  uint64_t seed = testSeed();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return runAllPairs(ctx, c, Path::kPortChannel, seed); },
      quickOptions()));
}

INSTANTIATE_TEST_SUITE_P(HostTransports, TransportCorrectness,
                         ::testing::ValuesIn(hostTransportCases({2, 4})), TransportCaseName());

}  // namespace
}  // namespace tessera::test
