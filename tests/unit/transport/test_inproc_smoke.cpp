// First checks of the transport core over inproc: memory exchange, put/get, semaphores, both
// channel kinds and their device handles used from host threads.
#include <cstring>

#include "transport/channel.hpp"
#include "transport/proxy.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

TEST(TransportInproc, PutSignalWaitAndChannels) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) -> std::string {
    int peer = 1 - ctx.rank();
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(peer, &conn));
    TT_CHECK(conn->kind() == TransportKind::kInproc, "kind %s", transportName(conn->kind()));
    std::shared_ptr<Memory> mem;
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &mem));
    std::shared_ptr<RemoteMemory> remote;
    TT_CHECK_OK(ctx.exchangeMemory(*conn, *mem, &remote));
    std::shared_ptr<Semaphore> sem;
    TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
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

}  // namespace
}  // namespace tessera::test
