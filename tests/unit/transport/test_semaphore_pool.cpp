// Semaphores at communicator scale (DESIGN.md, "Transport"): 8 ranks, each making a few plans'
// worth of semaphores with every peer, must not cost a file descriptor (or an import) per
// semaphore; semaphores are carved out of shared slabs (semaphore_scale.hpp says what is
// checked). And a slot freed by one semaphore never hands a late signal of it to a later one.
#include "semaphore_scale.hpp"
#include "transport/semaphore.hpp"
#include "transport/semaphore_wire.hpp"

namespace tessera::test {
namespace {

// 8 ranks sharing one GPU's host, 256 semaphores per pair (a few plans, each making one or two per
// peer and channel): 1,792 per rank, more than a 1,024-descriptor limit holds when each costs one
// (a memfd, and over shm also the fd server's duplicate of it). The budget allows a handful of
// descriptors per slab and none per semaphore.
constexpr int kRanks = 8;

SemaphoreScale scale(TransportKind kind, RankMode mode) {
  SemaphoreScale s;
  s.kind = kind;
  s.mode = mode;
  s.perPair = 256;
  s.fdBudgetPerRank = 32;
  s.importsPerPeer = 4;
  s.fdsKeptPerRank = 4;
  return s;
}

RankOptions options() {
  RankOptions o;
  o.timeoutSeconds = 60;
  o.runSeconds = 240;
  return o;
}

// Rank 0 lets go of a semaphore whose peer still holds its end; the peer signals it late. The next
// semaphore between them starts from zero and never counts that signal: a slot is not handed to a
// new semaphore while a peer may still add to it.
std::string lateSignal(TransportContext& ctx, TransportKind kind) {
  const int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, kind, &conn));
  std::shared_ptr<Semaphore> a, b;
  TT_CHECK_OK(ctx.createSemaphore(conn, &a));
  if (me == 1) {
    TT_CHECK_OK(a->signal());
    TT_CHECK_OK(a->signal());
  } else {
    TT_CHECK_OK(a->wait());
    TT_CHECK_OK(a->wait());
  }
  if (me == 0) a.reset();
  TT_CHECK_OK(ctx.createSemaphore(conn, &b));
  TT_CHECK(b->received() == 0 && b->consumed() == 0,
           "rank %d: a new semaphore starts at %llu received, %llu consumed", me,
           static_cast<unsigned long long>(b->received()),
           static_cast<unsigned long long>(b->consumed()));
  if (me == 1) TT_CHECK_OK(a->signal());  // lands in rank 0's freed slot
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 0)
    TT_CHECK(b->received() == 0, "rank 0: a late signal of a freed semaphore reached a new one");
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 1) TT_CHECK_OK(b->signal());
  if (me == 0) {
    TT_CHECK_OK(b->wait());
    TT_CHECK(b->received() == 1, "rank 0: received %llu signals, expected 1",
             static_cast<unsigned long long>(b->received()));
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

// Rank 1 forges what a peer sends to make a semaphore; rank 0's createSemaphore must refuse each
// forgery with a sentence saying what is wrong, and a real semaphore made afterwards must work.
std::string forgedHello(TransportContext& ctx, TransportKind kind) {
  const int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, kind, &conn));
  const int tag = transportTag(0, TransportTagPurpose::kSemaphore);
  struct Forgery {
    uint32_t magic;
    uint64_t offset;
    Result code;
    const char* words;
  };
  const Forgery forgeries[] = {
      {0x12345678, 0, tsrInternalError, "malformed"},
      {kSemaphoreHelloMagic, 8, tsrInvalidArgument, "not a 64-byte slot"},
      {kSemaphoreHelloMagic, 4096, tsrInvalidArgument, "not a 64-byte slot"},
  };
  std::shared_ptr<Memory> mem;
  TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &mem));
  std::string blob;
  TT_CHECK_OK(mem->serialize(&blob));
  for (const Forgery& f : forgeries) {
    if (me == 0) {
      clearLastError();
      std::shared_ptr<Semaphore> sem;
      Result r = ctx.createSemaphore(conn, &sem);
      std::string msg = lastErrorMessage();
      TT_CHECK(r == f.code && msg.find(f.words) != std::string::npos && !sem,
               "a forged hello (magic %08x, offset %llu) gave %s: \"%s\" (expected %s and \"%s\")",
               f.magic, static_cast<unsigned long long>(f.offset), resultName(r), msg.c_str(),
               resultName(f.code), f.words);
    } else {
      SemaphoreHello h{f.magic, kSemaphoreWireVersion, f.offset, blob.size()};
      TT_CHECK_OK(ctx.bootstrap().send(peer, tag, &h, sizeof h));
      if (f.magic == kSemaphoreHelloMagic)
        TT_CHECK_OK(ctx.bootstrap().send(peer, tag, blob.data(), blob.size()));
      // What rank 0 sent before it found out.
      SemaphoreHello theirs{};
      TT_CHECK_OK(ctx.bootstrap().recv(peer, tag, &theirs, sizeof theirs));
      std::string skip(theirs.blobBytes, '\0');
      TT_CHECK_OK(ctx.bootstrap().recv(peer, tag, skip.data(), skip.size()));
    }
  }
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
  TT_CHECK_OK(sem->signal());
  TT_CHECK_OK(sem->wait());
  return "";
}

TEST(SemaphorePool, ShmProcessesFdsGrowWithSlabsNotSemaphores) {
  SemaphoreScale s = scale(TransportKind::kShm, RankMode::kProcesses);
  expectAllRanksOk(runTransportRanks(
      s.mode, kRanks, [&](TransportContext& ctx) { return manySemaphores(ctx, s); }, options()));
}

TEST(SemaphorePool, InprocThreadsFdsGrowWithSlabsNotSemaphores) {
  SemaphoreScale s = scale(TransportKind::kInproc, RankMode::kThreads);
  expectAllRanksOk(runTransportRanks(
      s.mode, kRanks, [&](TransportContext& ctx) { return manySemaphores(ctx, s); }, options()));
}

TEST(SemaphorePool, ShmLateSignalOfAFreedSlotReachesNoNewSemaphore) {
  expectAllRanksOk(runTransportRanks(
      RankMode::kProcesses, 2,
      [](TransportContext& ctx) { return lateSignal(ctx, TransportKind::kShm); }, options()));
}

TEST(SemaphorePool, InprocLateSignalOfAFreedSlotReachesNoNewSemaphore) {
  expectAllRanksOk(runTransportRanks(
      RankMode::kThreads, 2,
      [](TransportContext& ctx) { return lateSignal(ctx, TransportKind::kInproc); }, options()));
}

TEST(SemaphorePool, InprocForgedHellosAreRefused) {
  expectAllRanksOk(runTransportRanks(
      RankMode::kThreads, 2,
      [](TransportContext& ctx) { return forgedHello(ctx, TransportKind::kInproc); }, options()));
}

TEST(SemaphorePool, ShmForgedHellosAreRefused) {
  expectAllRanksOk(runTransportRanks(
      RankMode::kProcesses, 2,
      [](TransportContext& ctx) { return forgedHello(ctx, TransportKind::kShm); }, options()));
}

}  // namespace
}  // namespace tessera::test
