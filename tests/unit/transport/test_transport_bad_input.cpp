// Bad input on every host transport: each bad call must return tsrInvalidArgument with a
// sentence that names the problem, and nothing may change at the peer (the peer fills its buffer
// with a pattern first and checks it afterwards, and counts the signals it received). After the
// bad calls a good put+signal goes through, so the checks could have seen a write.
#include <cstring>

#include "transport/channel.hpp"
#include "transport/semaphore.hpp"
#include "transport_matrix.hpp"

namespace tessera::test {
namespace {

constexpr size_t kBytes = 4099;  // odd: the last word is partial
constexpr int kUserTag = 77;     // bootstrap tag of the blobs the tests pass around
constexpr uint64_t kFillRound = 7;

// "" when `r` is tsrInvalidArgument and the sentence mentions every one of `words`.
std::string rejected(Result r, const char* expr, std::initializer_list<const char*> words) {
  std::string msg = lastErrorMessage();
  if (r != tsrInvalidArgument)
    return strprintf("%s returned %s, expected tsrInvalidArgument (sentence: \"%s\")", expr,
                     resultName(r), msg.c_str());
  if (msg.empty()) return strprintf("%s failed without a sentence", expr);
  for (const char* w : words)
    if (msg.find(w) == std::string::npos)
      return strprintf("%s: the sentence \"%s\" does not mention \"%s\"", expr, msg.c_str(), w);
  return "";
}

#define TT_REJECTED(expr, ...)                                                      \
  do {                                                                              \
    ::tessera::clearLastError();                                                    \
    std::string tt_e_ = rejected((expr), #expr, {__VA_ARGS__});                     \
    if (!tt_e_.empty()) return "rank " + std::to_string(ctx.rank()) + ": " + tt_e_; \
  } while (0)

void fill(Memory& m, int rank) {
  auto* b = static_cast<uint8_t*>(m.data());
  for (size_t i = 0; i < m.size(); ++i) b[i] = pattern(rank, kFillRound, i);
}

// "" when `m` still holds `rank`'s fill, except [skip, skip + skipBytes).
std::string unchanged(const Memory& m, int rank, const char* what, size_t skip = 0,
                      size_t skipBytes = 0) {
  const auto* b = static_cast<const uint8_t*>(m.data());
  for (size_t i = 0; i < m.size(); ++i) {
    if (i >= skip && i < skip + skipBytes) continue;
    if (b[i] != pattern(rank, kFillRound, i))
      return strprintf("rank %d: byte %zu of %s changed to 0x%02x (expected 0x%02x)", rank, i, what,
                       b[i], pattern(rank, kFillRound, i));
  }
  return "";
}

Result sendBlob(Bootstrap& b, int peer, const std::string& blob) {
  uint64_t n = blob.size();
  Result r = b.send(peer, kUserTag, &n, sizeof n);
  return r != tsrSuccess ? r : b.send(peer, kUserTag, blob.data(), blob.size());
}

Result recvBlob(Bootstrap& b, int peer, std::string* blob) {
  uint64_t n = 0;
  Result r = b.recv(peer, kUserTag, &n, sizeof n);
  if (r != tsrSuccess) return r;
  blob->assign(n, '\0');
  return b.recv(peer, kUserTag, blob->data(), n);
}

Result makeContext(TransportContext& like, std::unique_ptr<TransportContext>* out) {
  TransportContextOptions o;
  o.bootstrap = &like.bootstrap();
  o.timeoutSeconds = like.timeoutSeconds();
  return TransportContext::create(o, out);
}

// Rank 0 tries every out-of-range operation on rank 1's memory; rank 1 checks nothing changed.
std::string badRanges(TransportContext& ctx, const TransportCase& c) {
  const int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, c.kind, &conn));
  std::shared_ptr<Memory> mem;
  TT_CHECK_OK(ctx.allocate(kBytes, MemoryKind::kHost, &mem));
  fill(*mem, me);
  std::shared_ptr<RemoteMemory> remote;
  TT_CHECK_OK(ctx.exchangeMemory(*conn, *mem, &remote));
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
  std::unique_ptr<PortChannel> pc;
  TT_CHECK_OK(ctx.createPortChannel(conn, remote, mem, sem, &pc));
  std::unique_ptr<MemoryChannel> mc;
  if (conn->mapsMemory()) TT_CHECK_OK(ctx.createMemoryChannel(conn, remote, mem, sem, &mc));
  TT_CHECK_OK(ctx.bootstrap().barrier());

  if (me == 0) {
    const auto* src = static_cast<const char*>(mem->data());
    TT_REJECTED(conn->put(*remote, kBytes - 10, *mem, 0, 11), "does not fit", "peer's memory");
    TT_REJECTED(conn->put(*remote, kBytes + 1, *mem, 0, 0), "does not fit");
    TT_REJECTED(conn->put(*remote, SIZE_MAX - 2, *mem, 0, 8), "does not fit");
    TT_REJECTED(conn->put(*remote, 0, *mem, kBytes - 5, 6), "does not fit", "local memory");
    TT_REJECTED(conn->put(*remote, 8, *mem, 8, SIZE_MAX), "does not fit");
    TT_REJECTED(conn->get(*mem, 0, *remote, kBytes - 1, 2), "does not fit", "peer's memory");
    TT_REJECTED(conn->get(*mem, kBytes - 1, *remote, 0, 2), "does not fit", "local memory");
    std::vector<char> unregistered(256, 'x');
    TT_REJECTED(conn->put(*remote, 0, unregistered.data(), 16), "no memory registered");
    TT_REJECTED(conn->put(*remote, 0, src + kBytes - 4, 8), "no memory registered");
    TT_REJECTED(conn->put(*remote, 0, static_cast<const void*>(nullptr), 8), "null");
    TT_REJECTED(conn->atomicAdd(*remote, 3, 1), "aligned");
    TT_REJECTED(conn->atomicAdd(*remote, kBytes - 4, 1), "out of range");
    TT_REJECTED(pc->put(kBytes - 10, 0, 11), "does not fit");
    TT_REJECTED(pc->put(0, kBytes - 10, 11), "does not fit");
    TT_REJECTED(pc->putWithSignal(0, kBytes, 1), "does not fit");
    auto ph = pc->deviceHandle();
    TT_CHECK(!ph.put(kBytes - 10, 0, 11), "port device put past the peer's end succeeded");
    TT_CHECK(!ph.put(0, kBytes - 3, 4), "port device put past the local end succeeded");
    TT_CHECK(!ph.putWithSignal(SIZE_MAX, 0, 2), "port device putWithSignal succeeded");
    if (mc) {
      TT_REJECTED(mc->put(kBytes - 10, 0, 11), "does not fit");
      TT_REJECTED(mc->get(0, kBytes, 1), "does not fit");
      auto h = mc->deviceHandle();
      TT_CHECK(!h.put(kBytes - 10, 0, 11), "memory device put past the peer's end succeeded");
      TT_CHECK(!h.put(0, 1, kBytes), "memory device put past the local end succeeded");
      TT_CHECK(!h.get(kBytes - 1, 0, 2), "memory device get past the local end succeeded");
      TT_CHECK(!h.get(0, kBytes - 1, 2), "memory device get past the peer's end succeeded");
      TT_CHECK(!h.putWithSignal(kBytes, 0, 1), "memory device putWithSignal succeeded");
    }
    // Nothing above may have queued work or poisoned the proxy.
    TT_CHECK_OK(conn->flush());
    TT_CHECK_OK(pc->flush());
    std::string e = unchanged(*mem, me, "rank 0's memory (bad gets must not write)");
    if (!e.empty()) return e;
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 1) {
    std::string e = unchanged(*mem, me, "the target of the rejected puts");
    if (!e.empty()) return e;
    TT_CHECK(sem->received() == 0, "rank 1 received %llu signals from rejected calls",
             static_cast<unsigned long long>(sem->received()));
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  // A good put+signal arrives, and only where it was put.
  if (me == 0) {
    TT_CHECK_OK(pc->putWithSignal(100, 7, 50));
    TT_CHECK_OK(pc->flush());
  } else {
    TT_CHECK_OK(pc->wait());
    const auto* b = static_cast<const uint8_t*>(mem->data());
    for (size_t j = 0; j < 50; ++j)
      TT_CHECK(b[100 + j] == pattern(0, kFillRound, 7 + j), "good put byte %zu", j);
    std::string e = unchanged(*mem, me, "memory around the good put", 100, 50);
    if (!e.empty()) return e;
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

// Three ranks; rank 0 is handed blobs that its connections must refuse: from another
// communicator, from a rank other than the connection's peer, cut short or garbage.
std::string foreignBlobs(TransportContext& ctx, const TransportCase& c, uint64_t seed) {
  const int me = ctx.rank();
  std::vector<std::shared_ptr<Connection>> connsA;
  TT_CHECK_OK(connectAllKind(ctx, c.kind, &connsA));
  std::unique_ptr<TransportContext> ctxB;  // declared before its objects: destroyed after them
  TT_CHECK_OK(makeContext(ctx, &ctxB));
  std::vector<std::shared_ptr<Connection>> connsB;
  TT_CHECK(ctxB->state()->contextId != ctx.state()->contextId, "two contexts share an id");
  TT_CHECK_OK(connectAllKind(*ctxB, c.kind, &connsB));
  std::shared_ptr<Memory> memA, memB;
  TT_CHECK_OK(ctx.allocate(kBytes, MemoryKind::kHost, &memA));
  TT_CHECK_OK(ctxB->allocate(kBytes, MemoryKind::kHost, &memB));
  fill(*memA, me);
  fill(*memB, me);
  std::string blobA;
  TT_CHECK_OK(memA->serialize(&blobA));
  if (me != 0) TT_CHECK_OK(sendBlob(ctx.bootstrap(), 0, blobA));
  if (me == 0) {
    std::string blob1, blob2;
    TT_CHECK_OK(recvBlob(ctx.bootstrap(), 1, &blob1));
    TT_CHECK_OK(recvBlob(ctx.bootstrap(), 2, &blob2));
    Connection& to1 = *connsA[1];
    // A blob of context A through a connection of context B (same peer, same transport).
    std::shared_ptr<RemoteMemory> r;
    TT_REJECTED(connsB[1]->importMemory(blob1, &r), "another communicator");
    TT_CHECK(r == nullptr, "a refused import produced a RemoteMemory");
    // A blob of rank 2 (or this rank's own) through the connection to rank 1.
    TT_REJECTED(to1.importMemory(blob2, &r), "made by rank 2", "not by this peer");
    TT_REJECTED(to1.importMemory(blobA, &r), "made by rank 0", "not by this peer");
    // Cut short, garbage, a wrong magic, trailing bytes.
    TT_REJECTED(to1.importMemory(blob1.substr(0, blob1.size() - 1), &r), "blob");
    TT_REJECTED(to1.importMemory(blob1.substr(0, 12), &r), "not a tessera memory blob");
    TT_REJECTED(to1.importMemory(std::string(), &r), "not a tessera memory blob");
    auto rng = rngFor(seed, 5);
    std::string garbage(blob1.size(), '\0');
    for (char& ch : garbage) ch = static_cast<char>(rng());
    TT_REJECTED(to1.importMemory(garbage, &r), "blob");
    std::string badMagic = blob1;
    badMagic[0] ^= 0x20;
    TT_REJECTED(to1.importMemory(badMagic, &r), "magic");
    TT_REJECTED(to1.importMemory(blob1 + "xyz", &r), "trailing");
    TT_CHECK(r == nullptr, "a refused import produced a RemoteMemory");
    // The untouched blob imports (the refusals above were for what was changed).
    std::shared_ptr<RemoteMemory> remote1;
    TT_CHECK_OK(to1.importMemory(blob1, &remote1));
    // Memory and connections of the two contexts do not mix.
    TT_REJECTED(connsB[1]->put(*remote1, 0, *memB, 0, 8), "not imported through this connection");
    TT_REJECTED(to1.put(*remote1, 0, *memB, 0, 8), "another communicator");
    TT_REJECTED(to1.put(*remote1, 0, memB->data(), 8), "no memory registered");
    TT_REJECTED(to1.get(*memB, 0, *remote1, 0, 8), "another communicator");
    TT_REJECTED(connsA[2]->put(*remote1, 0, *memA, 0, 8), "not imported through this connection");
    std::shared_ptr<Semaphore> sem;
    TT_REJECTED(ctx.createSemaphore(connsB[1], &sem), "another communicator");
    TT_CHECK_OK(to1.flush());
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  std::string e = unchanged(*memA, me, "context A's memory");
  if (e.empty()) e = unchanged(*memB, me, "context B's memory");
  if (!e.empty()) return e;
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

// Objects outlive their context: every call fails with tsrInvalidArgument instead of crashing,
// and the peer sees nothing.
std::string afterDestroy(TransportContext& ctx, const TransportCase& c) {
  const int me = ctx.rank(), peer = 1 - me;
  std::unique_ptr<TransportContext> ctxB;
  TT_CHECK_OK(makeContext(ctx, &ctxB));
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctxB->connect(peer, c.kind, &conn));
  std::shared_ptr<Memory> mem;
  TT_CHECK_OK(ctxB->allocate(kBytes, MemoryKind::kHost, &mem));
  fill(*mem, me);
  std::shared_ptr<RemoteMemory> remote;
  TT_CHECK_OK(ctxB->exchangeMemory(*conn, *mem, &remote));
  std::string blob;
  TT_CHECK_OK(mem->serialize(&blob));
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctxB->createSemaphore(conn, &sem));
  std::unique_ptr<PortChannel> pc;
  TT_CHECK_OK(ctxB->createPortChannel(conn, remote, mem, sem, &pc));
  std::unique_ptr<MemoryChannel> mc;
  if (conn->mapsMemory()) TT_CHECK_OK(ctxB->createMemoryChannel(conn, remote, mem, sem, &mc));
  TT_CHECK_OK(ctx.bootstrap().barrier());
  ctxB.reset();
  TT_CHECK_OK(ctx.bootstrap().barrier());

  if (me == 0) {
    TT_REJECTED(conn->put(*remote, 0, *mem, 0, 8), "destroyed");
    TT_REJECTED(conn->put(*remote, 0, mem->data(), 8), "destroyed");
    TT_REJECTED(conn->get(*mem, 0, *remote, 0, 8), "destroyed");
    TT_REJECTED(conn->atomicAdd(*remote, 0, 1), "destroyed");
    TT_REJECTED(conn->flush(), "destroyed");
    std::shared_ptr<RemoteMemory> again;
    TT_REJECTED(conn->importMemory(blob, &again), "destroyed");
    TT_REJECTED(sem->signal(), "destroyed");
    TT_REJECTED(sem->wait(0.5), "destroyed");
    TT_REJECTED(pc->put(0, 0, 8), "destroyed");
    TT_REJECTED(pc->signal(), "destroyed");
    TT_REJECTED(pc->putWithSignal(0, 0, 8), "destroyed");
    TT_REJECTED(pc->flush(), "destroyed");
    if (mc) {
      TT_REJECTED(mc->put(0, 0, 8), "destroyed");
      TT_REJECTED(mc->get(0, 0, 8), "destroyed");
      TT_REJECTED(mc->signal(), "destroyed");
    }
    std::string e = unchanged(*mem, me, "rank 0's memory (a get after destroy must not write)");
    if (!e.empty()) return e;
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 1) {
    std::string e = unchanged(*mem, me, "memory of a destroyed context");
    if (!e.empty()) return e;
    TT_CHECK(sem->received() == 0, "rank 1 received %llu signals after destroy",
             static_cast<unsigned long long>(sem->received()));
  }
  // The objects are released here, after their context, in the order a user might drop them.
  mc.reset();
  pc.reset();
  sem.reset();
  remote.reset();
  conn.reset();
  mem.reset();
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

class TransportBadInput : public ::testing::TestWithParam<TransportCase> {
 protected:
  static RankOptions options() {
    RankOptions o;
    o.timeoutSeconds = 10;
    o.runSeconds = 45;
    return o;
  }
};
class TransportBadInput3 : public TransportBadInput {};

TEST_P(TransportBadInput, OutOfRangeOperationsChangeNothing) {
  TransportCase c = GetParam();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return badRanges(ctx, c); }, options()));
}

TEST_P(TransportBadInput, ObjectsOutliveTheirContext) {
  TransportCase c = GetParam();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return afterDestroy(ctx, c); }, options()));
}

TEST_P(TransportBadInput3, ForeignAndMalformedBlobsAreRefused) {
  TransportCase c = GetParam();
  uint64_t seed = testSeed();
  expectAllRanksOk(runCase(
      c, [&](TransportContext& ctx) { return foreignBlobs(ctx, c, seed); }, options()));
}

INSTANTIATE_TEST_SUITE_P(HostTransports, TransportBadInput,
                         ::testing::ValuesIn(hostTransportCases({2})), TransportCaseName());
INSTANTIATE_TEST_SUITE_P(HostTransports, TransportBadInput3,
                         ::testing::ValuesIn(hostTransportCases({3})), TransportCaseName());

}  // namespace
}  // namespace tessera::test
