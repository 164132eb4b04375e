// shm failures: memory that cannot be shared, damaged or stale blobs, and a peer process that
// is SIGKILLed while this rank waits for its signal.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "transport/semaphore.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

constexpr int kBlobTag = 7;

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

Result sendBlob(Bootstrap& b, int peer, const std::string& blob) {
  uint64_t n = blob.size();
  TSR_CHECK(b.send(peer, kBlobTag, &n, sizeof n));
  return b.send(peer, kBlobTag, blob.data(), blob.size());
}

Result recvBlob(Bootstrap& b, int peer, std::string* blob) {
  uint64_t n = 0;
  TSR_CHECK(b.recv(peer, kBlobTag, &n, sizeof n));
  blob->assign(n, '\0');
  return b.recv(peer, kBlobTag, blob->data(), n);
}

TEST(TransportShmFailures, UserRegisteredMemoryIsNotShareable) {
  auto results = runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
    int peer = 1 - ctx.rank();
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(peer, &conn));
    TT_CHECK(conn->kind() == TransportKind::kShm, "kind %s", transportName(conn->kind()));
    std::vector<uint8_t> user(4096);
    std::shared_ptr<Memory> mem;
    TT_CHECK_OK(ctx.registerMemory(user.data(), user.size(), MemoryKind::kHost, &mem));
    TT_CHECK(mem->memfd() < 0, "user memory has no memfd");
    std::shared_ptr<RemoteMemory> remote;
    Result r = ctx.exchangeMemory(*conn, *mem, &remote);
    std::string why = lastErrorMessage();
    TT_CHECK(r == tsrInvalidArgument, "import of user memory gave %s: %s", resultName(r),
             why.c_str());
    TT_CHECK(contains(why, "user pointer") && contains(why, "TransportContext::allocate"),
             "the sentence says why: %s", why.c_str());
    TT_CHECK(remote == nullptr, "nothing imported");
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  expectAllRanksOk(results);
  EXPECT_TRUE(tesseraShmEntries().empty());
}

// Each rank sends the peer a live blob, a damaged one and one whose memory is already gone.
TEST(TransportShmFailures, DamagedAndStaleBlobs) {
  auto results = runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) {
    int peer = 1 - ctx.rank();
    Bootstrap& b = ctx.bootstrap();
    std::shared_ptr<Connection> conn;
    TT_CHECK_OK(ctx.connect(peer, TransportKind::kShm, &conn));
    std::shared_ptr<Memory> live, dead;
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &live));
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &dead));
    std::memset(live->data(), 0x40 + ctx.rank(), 4096);
    std::string liveBlob, deadBlob;
    TT_CHECK_OK(live->serialize(&liveBlob));
    TT_CHECK_OK(dead->serialize(&deadBlob));
    dead.reset();  // withdraws its key
    TT_CHECK_OK(sendBlob(b, peer, liveBlob));
    TT_CHECK_OK(sendBlob(b, peer, deadBlob));

    std::string theirs, theirsDead;
    TT_CHECK_OK(recvBlob(b, peer, &theirs));
    TT_CHECK_OK(recvBlob(b, peer, &theirsDead));
    MemoryBlobHeader h;
    std::string section, whyNot;
    TT_CHECK_OK(parseMemoryBlob(theirs, TransportKind::kShm, &h, &section, &whyNot));
    TT_CHECK(!section.empty() && theirs.size() > section.size(), "shm section present");
    // The context made only shm, so its section ends the blob.
    size_t at = theirs.size() - section.size();
    TT_CHECK(theirs.compare(at, section.size(), section) == 0, "section at the end");

    std::shared_ptr<RemoteMemory> remote;
    std::string bad = theirs;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);  // the section's magic
    Result r = conn->importMemory(bad, &remote);
    TT_CHECK(r == tsrInvalidArgument && contains(lastErrorMessage(), "malformed"),
             "damaged section: %s: %s", resultName(r), lastErrorMessage());
    bad = theirs;
    bad[at + 8] = static_cast<char>(bad[at + 8] ^ 0x01);  // the key
    r = conn->importMemory(bad, &remote);
    TT_CHECK(r == tsrRemoteError && contains(lastErrorMessage(), "refused"), "wrong key: %s: %s",
             resultName(r), lastErrorMessage());
    bad = theirs;
    bad.resize(bad.size() - 1);
    r = conn->importMemory(bad, &remote);
    TT_CHECK(r == tsrInvalidArgument, "cut blob: %s: %s", resultName(r), lastErrorMessage());
    r = conn->importMemory(theirsDead, &remote);
    TT_CHECK(r == tsrRemoteError && contains(lastErrorMessage(), "refused"),
             "memory freed by its owner: %s: %s", resultName(r), lastErrorMessage());
    TT_CHECK(remote == nullptr, "nothing imported from a bad blob");

    TT_CHECK_OK(conn->importMemory(theirs, &remote));
    auto* p = static_cast<uint8_t*>(remote->mapped());
    TT_CHECK(p != nullptr && p != live->data(), "a second mapping of the peer's pages");
    TT_CHECK(p[0] == 0x40 + peer && p[4095] == 0x40 + peer, "peer bytes %#x", p[0]);
    TT_CHECK_OK(b.barrier());
    return std::string();
  });
  expectAllRanksOk(results);
  EXPECT_TRUE(tesseraShmEntries().empty());
}

// Rank 1 puts half its data and dies by SIGKILL before signalling; rank 0 waits with a 30 s
// deadline and must learn of the death from the fd server watch instead.
TEST(TransportShmFailures, PeerKilledMidTransferIsARemoteError) {
  RankOptions options;
  options.timeoutSeconds = 30;
  options.runSeconds = 60;
  auto results = runTransportRanks(
      RankMode::kProcesses, 2,
      [](TransportContext& ctx) {
        int peer = 1 - ctx.rank();
        std::shared_ptr<Connection> conn;
        TT_CHECK_OK(ctx.connect(peer, &conn));
        TT_CHECK(conn->kind() == TransportKind::kShm, "kind %s", transportName(conn->kind()));
        std::shared_ptr<Memory> mem;
        TT_CHECK_OK(ctx.allocate(1 << 20, MemoryKind::kHost, &mem));
        std::shared_ptr<RemoteMemory> remote;
        TT_CHECK_OK(ctx.exchangeMemory(*conn, *mem, &remote));
        std::shared_ptr<Semaphore> sem;
        TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
        TT_CHECK_OK(ctx.bootstrap().barrier());
        if (ctx.rank() == 1) {
          TT_CHECK_OK(conn->put(*remote, 0, *mem, 0, 1 << 19));
          raise(SIGKILL);
          return std::string("still alive after SIGKILL");
        }
        auto start = std::chrono::steady_clock::now();
        Result r = sem->wait(30);
        double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::string why = lastErrorMessage();
        std::fprintf(stderr, "rank 0: wait returned %s after %.3f s: %s\n", resultName(r), took,
                     why.c_str());
        TT_CHECK(r == tsrRemoteError, "wait on a killed peer gave %s after %.3f s: %s",
                 resultName(r), took, why.c_str());
        TT_CHECK(contains(why, "peer rank 1 exited"), "the sentence names the peer: %s",
                 why.c_str());
        TT_CHECK(conn->peerStatus() == tsrRemoteError, "peerStatus stays an error");
        return std::string();
      },
      options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1].rfind("killed by signal 9", 0), 0u) << results[1];
  EXPECT_TRUE(tesseraShmEntries().empty());
}

}  // namespace
}  // namespace tessera::test
