// The TCP root against what other processes may send it: a stray hello with another id's
// nonce, an absurd rank count, and nobody at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <thread>

#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_wire.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap_test_util.hpp"
#include "support/harness.hpp"

namespace tessera::test {
namespace {

// Sends one raw hello to the root of `id` and returns the status of its reply.
uint32_t rawHello(const tsrUniqueId& id, uint64_t nonce, int rank, int nranks) {
  UniqueIdContents c;
  EXPECT_EQ(decodeUniqueId(id, &c), tsrSuccess);
  int fd = -1, err = 0;
  Deadline d = Deadline::after(10);
  EXPECT_EQ(connectWithin(c.root, d, -1, &fd, &err), Io::kOk);
  RootHello h{};
  h.magic = kRootHelloMagic;
  h.protocol = kTcpProtocol;
  h.version = c.version;
  h.rank = rank;
  h.nranks = nranks;
  h.timeoutMs = 10000;
  h.nonce = nonce;
  EXPECT_EQ(writeFull(fd, &h, sizeof(h), d, -1, &err), Io::kOk);
  RootReply r{};
  Io io = readFull(fd, &r, sizeof(r), d, -1, &err);
  closeFd(&fd);
  EXPECT_EQ(io, Io::kOk);
  EXPECT_EQ(r.magic, kRootReplyMagic);
  return r.status;
}

TEST(BootstrapRoot, StrayHelloWithAnotherNonceDoesNotSpoilTheCommunicator) {
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess);
  UniqueIdContents c;
  ASSERT_EQ(decodeUniqueId(id, &c), tsrSuccess);
  EXPECT_EQ(rawHello(id, c.nonce ^ 0x5555, 0, 2), static_cast<uint32_t>(kRootRejected));
  // The real ranks still form their communicator.
  BootstrapOptions o;
  o.timeoutSeconds = 20;
  runRanks(2, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(TcpBootstrap::create(id, r, 2, o, &b), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(b->barrier(), tsrSuccess);
  });
}

TEST(BootstrapRoot, AbsurdRankCountIsRefusedAndTheRootSurvives) {
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess);
  UniqueIdContents c;
  ASSERT_EQ(decodeUniqueId(id, &c), tsrSuccess);
  // Would be ~60 GB of tables if the root believed it.
  EXPECT_EQ(rawHello(id, c.nonce, 0, INT_MAX - 1), static_cast<uint32_t>(kRootRejected));
  // This process is still alive (a bad_alloc in the root thread would have terminated it), and
  // the rank side refuses such a count before it connects.
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(TcpBootstrap::create(id, 0, kMaxBootstrapRanks + 1, BootstrapOptions{}, &b),
            tsrInvalidArgument);
}

TEST(BootstrapRoot, UnusedIdReleasesItsRootAfterTheTimeout) {
  ScopedEnv timeout("TESSERA_BOOTSTRAP_TIMEOUT", "1");
  tsrUniqueId id;
  ASSERT_EQ(createUniqueId(&id), tsrSuccess);
  // Lets the root's 1 s deadline expire: the point of the test.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  // Nothing listens any more: a late rank hears that at once instead of waiting.
  BootstrapOptions o;
  o.timeoutSeconds = 30;
  Stopwatch sw;
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(TcpBootstrap::create(id, 0, 1, o, &b), tsrRemoteError);
  EXPECT_LT(sw.seconds(), 2.0 + kSlackSeconds);
  EXPECT_TRUE(contains(lastErrorMessage(), "nothing listens")) << lastErrorMessage();
}

}  // namespace
}  // namespace tessera::test
