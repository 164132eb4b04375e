// shm between processes (the transport that connect picks for ranks of one host) and between
// threads (forced): put, get, signals, memory channels; nothing left in /dev/shm.
#include <cstring>

#include "transport/channel.hpp"
#include "transport/semaphore.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

constexpr size_t kSlot = 64 * 1024;  // what one rank writes into a peer's inbox

// Every rank writes its slot of every peer's inbox three ways (put, local store + get, memory
// channel) and checks what the peers wrote into its own.
std::string exchangeWithAllPeers(TransportContext& ctx, RankMode mode) {
  const int me = ctx.rank(), n = ctx.nranks();
  std::vector<std::shared_ptr<Connection>> conns(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& c = conns[static_cast<size_t>(p)];
    if (mode == RankMode::kProcesses) {
      TT_CHECK_OK(ctx.connect(p, &c));
      TT_CHECK(c->kind() == TransportKind::kShm, "peer %d picked %s, expected shm", p,
               transportName(c->kind()));
    } else {
      TT_CHECK_OK(ctx.connect(p, TransportKind::kShm, &c));
    }
    TT_CHECK(c->mapsMemory(), "shm maps memory");
    TT_CHECK_OK(c->peerStatus());
  }
  std::shared_ptr<Memory> inbox, outbox, scratch;
  TT_CHECK_OK(ctx.allocate(kSlot * static_cast<size_t>(n), MemoryKind::kHost, &inbox));
  TT_CHECK_OK(ctx.allocate(kSlot, MemoryKind::kHost, &outbox));
  TT_CHECK_OK(ctx.allocate(kSlot, MemoryKind::kHost, &scratch));
  TT_CHECK(inbox->memfd() >= 0, "allocated host memory has a memfd");
  std::vector<std::shared_ptr<RemoteMemory>> remote(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Semaphore>> sems(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& c = conns[static_cast<size_t>(p)];
    TT_CHECK_OK(ctx.exchangeMemory(*c, *inbox, &remote[static_cast<size_t>(p)]));
    TT_CHECK_OK(ctx.createSemaphore(c, &sems[static_cast<size_t>(p)]));
    TT_CHECK(remote[static_cast<size_t>(p)]->mapped() != nullptr, "peer %d memory mapped", p);
  }
  auto* in = static_cast<uint8_t*>(inbox->data());
  auto* out = static_cast<uint8_t*>(outbox->data());
  auto* tmp = static_cast<uint8_t*>(scratch->data());
  const size_t mySlot = kSlot * static_cast<size_t>(me);

  // Round 0: put into each peer's inbox, then signal.
  for (size_t i = 0; i < kSlot; ++i) out[i] = pattern(me, 0, i);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    TT_CHECK_OK(conns[static_cast<size_t>(p)]->put(*remote[static_cast<size_t>(p)], mySlot, *outbox,
                                                   0, kSlot));
    TT_CHECK_OK(sems[static_cast<size_t>(p)]->signal());
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    TT_CHECK_OK(sems[static_cast<size_t>(p)]->wait());
    for (size_t i = 0; i < kSlot; ++i)
      TT_CHECK(in[kSlot * static_cast<size_t>(p) + i] == pattern(p, 0, i),
               "round 0: byte %zu from peer %d", i, p);
  }

  // Round 1: store into my own inbox, signal; peers get it.
  for (size_t i = 0; i < kSlot; ++i) in[mySlot + i] = pattern(me, 1, i);
  for (int p = 0; p < n; ++p)
    if (p != me) TT_CHECK_OK(sems[static_cast<size_t>(p)]->signal());
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    TT_CHECK_OK(sems[static_cast<size_t>(p)]->wait());
    TT_CHECK_OK(conns[static_cast<size_t>(p)]->get(*scratch, 0, *remote[static_cast<size_t>(p)],
                                                   kSlot * static_cast<size_t>(p), kSlot));
    for (size_t i = 0; i < kSlot; ++i)
      TT_CHECK(tmp[i] == pattern(p, 1, i), "round 1: got byte %zu of peer %d", i, p);
  }
  // Nobody overwrites a slot a peer may still be reading.
  TT_CHECK_OK(ctx.bootstrap().barrier());

  // Round 2: memory channels' device handles, used from this host thread.
  for (size_t i = 0; i < kSlot; ++i) out[i] = pattern(me, 2, i);
  std::vector<std::unique_ptr<MemoryChannel>> channels(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& ch = channels[static_cast<size_t>(p)];
    TT_CHECK_OK(ctx.createMemoryChannel(conns[static_cast<size_t>(p)],
                                        remote[static_cast<size_t>(p)], outbox,
                                        sems[static_cast<size_t>(p)], &ch));
    TT_CHECK(ch->deviceHandle().putWithSignal(mySlot, 0, kSlot), "device put to peer %d", p);
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    TT_CHECK(channels[static_cast<size_t>(p)]->deviceHandle().wait(10'000'000'000ull),
             "device wait on peer %d", p);
    for (size_t i = 0; i < kSlot; ++i)
      TT_CHECK(in[kSlot * static_cast<size_t>(p) + i] == pattern(p, 2, i),
               "round 2: byte %zu from peer %d", i, p);
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

TEST(TransportShm, TwoProcesses) {
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    return exchangeWithAllPeers(ctx, RankMode::kProcesses);
  }));
  EXPECT_TRUE(tesseraShmEntries().empty());
}

TEST(TransportShm, FourProcesses) {
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 4, [](TransportContext& ctx) {
    return exchangeWithAllPeers(ctx, RankMode::kProcesses);
  }));
  EXPECT_TRUE(tesseraShmEntries().empty());
}

TEST(TransportShm, TwoThreadsForced) {
  expectAllRanksOk(runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) {
    return exchangeWithAllPeers(ctx, RankMode::kThreads);
  }));
  EXPECT_TRUE(tesseraShmEntries().empty());
}

}  // namespace
}  // namespace tessera::test
