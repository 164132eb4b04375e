// The transport core over inproc: memory exchange, put/get, semaphores, both channel kinds and
// their device handles used from host threads; lifetimes and abort.
#include <chrono>
#include <cstring>

#include "transport/channel.hpp"
#include "transport/proxy.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

// Two thread ranks joined by a connection, one exchanged region each and a semaphore.
struct Pair {
  std::shared_ptr<Connection> conn;
  std::shared_ptr<Memory> mem;
  std::shared_ptr<RemoteMemory> remote;
  std::shared_ptr<Semaphore> sem;
};

Result connectPair(TransportContext& ctx, size_t bytes, Pair* out) {
  TSR_CHECK(ctx.connect(1 - ctx.rank(), &out->conn));
  TSR_CHECK(ctx.allocate(bytes, MemoryKind::kHost, &out->mem));
  TSR_CHECK(ctx.exchangeMemory(*out->conn, *out->mem, &out->remote));
  return ctx.createSemaphore(out->conn, &out->sem);
}

TEST(TransportInproc, PutSignalWaitAndChannels) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) -> std::string {
    int peer = 1 - ctx.rank();
    Pair pair;
    TT_CHECK_OK(connectPair(ctx, 4096, &pair));
    auto& [conn, mem, remote, sem] = pair;
    TT_CHECK(conn->kind() == TransportKind::kInproc, "kind %s", transportName(conn->kind()));
    auto* bytes = static_cast<uint8_t*>(mem->data());
    for (size_t i = 0; i < 1024; ++i) bytes[i] = pattern(ctx.rank(), 0, i);
    TT_CHECK_OK(conn->put(*remote, 2048, *mem, 0, 1024));
    TT_CHECK_OK(sem->signal());
    TT_CHECK_OK(sem->wait());
    for (size_t i = 0; i < 1024; ++i)
      TT_CHECK(bytes[2048 + i] == pattern(peer, 0, i), "byte %zu", i);

    std::unique_ptr<MemoryChannel> mc;
    TT_CHECK_OK(ctx.createMemoryChannel(conn, remote, mem, sem, &mc));
    auto h = mc->deviceHandle();
    TT_CHECK(h.putWithSignal(1024, 0, 100), "device put");
    TT_CHECK(!h.put(4000, 0, 100), "out-of-range device put must fail");
    TT_CHECK(h.wait(5'000'000'000ull), "device wait");

    std::unique_ptr<PortChannel> pc;
    TT_CHECK_OK(ctx.createPortChannel(conn, remote, mem, sem, &pc));
    for (size_t i = 0; i < 512; ++i) bytes[i] = pattern(ctx.rank(), 1, i);
    TT_CHECK_OK(pc->putWithSignal(3000, 0, 512));
    TT_CHECK_OK(pc->flush());
    TT_CHECK_OK(pc->wait());
    for (size_t i = 0; i < 512; ++i)
      TT_CHECK(bytes[3000 + i] == pattern(peer, 1, i), "port byte %zu", i);
    TT_CHECK(pc->put(4000, 0, 200) == tsrInvalidArgument, "out-of-range port put");
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return "";
  });
  expectAllRanksOk(results);
}

// A port channel that goes away with puts still queued: they run on it, never on a channel made
// after it (channel ids are not reused, and the channel leaves the proxy after its triggers).
TEST(TransportInproc, QueuedTriggersOfADroppedPortChannelStayWithIt) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) -> std::string {
    int peer = 1 - ctx.rank();
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(peer, &conn));
    std::shared_ptr<Memory> a, b;
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &a));
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &b));
    std::shared_ptr<RemoteMemory> ra, rb;
    TT_CHECK_OK(ctx.exchangeMemory(*conn, *a, &ra));
    TT_CHECK_OK(ctx.exchangeMemory(*conn, *b, &rb));
    std::shared_ptr<Semaphore> sem;
    TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
    std::memset(a->data(), 0, 4096);
    std::memset(b->data(), 0, 4096);
    TT_CHECK_OK(ctx.bootstrap().barrier());
    auto* bytesA = static_cast<uint8_t*>(a->data());
    for (size_t i = 0; i < 64; ++i) bytesA[i] = static_cast<uint8_t>(0xa0 + ctx.rank());
    {
      std::unique_ptr<PortChannel> first;
      TT_CHECK_OK(ctx.createPortChannel(conn, ra, a, sem, &first));
      for (int k = 0; k < 32; ++k) TT_CHECK_OK(first->put(2048 + 64 * (k % 8), 0, 64));
    }  // dropped with its puts possibly still queued
    std::unique_ptr<PortChannel> second;
    TT_CHECK_OK(ctx.createPortChannel(conn, rb, b, sem, &second));
    TT_CHECK_OK(second->signal());
    TT_CHECK_OK(second->flush());
    TT_CHECK_OK(sem->wait(10));
    for (size_t i = 0; i < 64 * 8; ++i)
      TT_CHECK(bytesA[2048 + i] == 0xa0 + peer, "A byte %zu is %u", i, bytesA[2048 + i]);
    auto* bytesB = static_cast<uint8_t*>(b->data());
    for (size_t i = 0; i < 4096; ++i) TT_CHECK(bytesB[i] == 0, "B byte %zu was written", i);
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return "";
  });
  expectAllRanksOk(results);
}

// An import keeps the owner's region alive: a peer that writes after the owner let go of its
// Memory writes into memory that still exists (as a shm mapping would).
TEST(TransportInproc, ImportKeepsTheRegionAlive) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) -> std::string {
    int peer = 1 - ctx.rank();
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(peer, &conn));
    std::shared_ptr<Memory> mine;
    TT_CHECK_OK(ctx.allocate(1 << 16, MemoryKind::kHost, &mine));
    std::shared_ptr<RemoteMemory> theirs;
    TT_CHECK_OK(ctx.exchangeMemory(*conn, *mine, &theirs));
    std::shared_ptr<Memory> src;
    TT_CHECK_OK(ctx.allocate(1 << 16, MemoryKind::kHost, &src));
    std::memset(src->data(), 0x5a, 1 << 16);
    TT_CHECK_OK(ctx.bootstrap().barrier());  // both imported
    mine.reset();                            // the owner lets go
    TT_CHECK_OK(ctx.bootstrap().barrier());
    TT_CHECK_OK(conn->put(*theirs, 0, *src, 0, 1 << 16));
    std::memset(src->data(), 0, 1 << 16);
    TT_CHECK_OK(conn->get(*src, 0, *theirs, 0, 1 << 16));
    TT_CHECK(static_cast<uint8_t*>(src->data())[12345] == 0x5a, "read back");
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return "";
  });
  expectAllRanksOk(results);
}

// After abort, waits and port-channel calls fail at once with tsrRemoteError (not at their
// deadline, and not as a destroyed communicator).
TEST(TransportInproc, AbortInterruptsWaitsAndPortChannels) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) -> std::string {
    Pair pair;
    TT_CHECK_OK(connectPair(ctx, 4096, &pair));
    auto& [conn, mem, remote, sem] = pair;
    std::unique_ptr<PortChannel> pc;
    TT_CHECK_OK(ctx.createPortChannel(conn, remote, mem, sem, &pc));
    TT_CHECK_OK(ctx.bootstrap().barrier());
    ctx.abort();
    auto start = std::chrono::steady_clock::now();
    TT_CHECK(sem->wait(30) == tsrRemoteError, "wait after abort: %s", lastErrorMessage());
    TT_CHECK(pc->flush() == tsrRemoteError, "flush after abort: %s", lastErrorMessage());
    TT_CHECK(pc->put(0, 0, 8) == tsrRemoteError, "put after abort: %s", lastErrorMessage());
    TT_CHECK(conn->put(*remote, 0, *mem, 0, 8) == tsrRemoteError, "connection put after abort");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TT_CHECK(s < 5, "took %.1f s", s);
    return "";
  });
  expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::test
