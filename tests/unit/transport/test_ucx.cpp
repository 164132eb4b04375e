// The ucx transport between processes (over UCX_TLS=tcp and shared memory) and threads: puts of
// random sizes at unaligned offsets, many outstanding then one flush, gets, atomic adds, the
// ordering of a signal after puts without a flush, port channels through the proxy, and a peer
// killed while the other waits.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>

#include "support/harness.hpp"
#include "transport/channel.hpp"
#include "transport/proxy.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

constexpr size_t kHeader = 64;       // the atomic counter lives at offset 0
constexpr size_t kSlot = 256 << 10;  // each sender's part of the receiver's inbox
constexpr int kAdds = 20;

size_t slotBase(int sender) { return kHeader + static_cast<size_t>(sender) * kSlot; }

struct PutOp {
  size_t src, dst, bytes;  // dst is relative to the sender's slot
};

// The puts `sender` makes to `receiver`: 1 byte, one large put, then random odd-ish sizes, with
// small gaps so that every destination is unaligned and bytes between puts must stay zero.
std::vector<PutOp> putPlan(int sender, int receiver) {
  std::mt19937 rng(static_cast<uint32_t>(sender * 1000 + receiver + 7));
  std::vector<PutOp> ops;
  size_t cursor = 0;
  for (int i = 0; i < 40; ++i) {
    size_t bytes = i == 0 ? 1 : i == 1 ? 65536 + 3 : 1 + rng() % 4096;
    size_t dst = cursor + 1 + rng() % 7;
    size_t src = 1 + rng() % (kSlot - bytes - 1);
    ops.push_back({src, dst, bytes});
    cursor = dst + bytes;
  }
  return ops;
}

// What `receiver`'s slot for `sender` holds after round `round` of putPlan.
std::vector<uint8_t> expectedSlot(int sender, int receiver, uint64_t round) {
  std::vector<uint8_t> slot(kSlot, 0);
  for (const PutOp& op : putPlan(sender, receiver))
    for (size_t j = 0; j < op.bytes; ++j) slot[op.dst + j] = pattern(sender, round, op.src + j);
  return slot;
}

void fill(Memory& m, int rank, uint64_t round) {
  auto* p = static_cast<uint8_t*>(m.data());
  for (size_t i = 0; i < m.size(); ++i) p[i] = pattern(rank, round, i);
}

std::string checkSlot(const Memory& inbox, int sender, int receiver, uint64_t round) {
  std::vector<uint8_t> want = expectedSlot(sender, receiver, round);
  const auto* have = static_cast<const uint8_t*>(inbox.data()) + slotBase(sender);
  for (size_t i = 0; i < kSlot; ++i)
    if (have[i] != want[i])
      return strprintf("rank %d round %llu: byte %zu from rank %d is %u, expected %u", receiver,
                       static_cast<unsigned long long>(round), i, sender, have[i], want[i]);
  return "";
}

Result connectUcx(TransportContext& ctx, std::vector<std::shared_ptr<Connection>>* out) {
  out->assign(static_cast<size_t>(ctx.nranks()), nullptr);
  for (int p = 0; p < ctx.nranks(); ++p)
    if (p != ctx.rank())
      TSR_CHECK(ctx.connect(p, TransportKind::kUcx, &(*out)[static_cast<size_t>(p)]));
  return tsrSuccess;
}

std::string rmaBody(TransportContext& ctx) {
  const int me = ctx.rank(), n = ctx.nranks();
  std::vector<std::shared_ptr<Connection>> conns;
  TT_CHECK_OK(connectUcx(ctx, &conns));
  std::shared_ptr<Memory> inbox, src, getBuf;
  TT_CHECK_OK(ctx.allocate(kHeader + static_cast<size_t>(n) * kSlot, MemoryKind::kHost, &inbox));
  TT_CHECK_OK(ctx.allocate(kSlot, MemoryKind::kHost, &src));
  TT_CHECK_OK(ctx.allocate(kSlot + 16, MemoryKind::kHost, &getBuf));
  std::vector<std::shared_ptr<RemoteMemory>> remotes(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Semaphore>> sems(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& c = conns[static_cast<size_t>(p)];
    TT_CHECK(c->kind() == TransportKind::kUcx && !c->mapsMemory(), "kind %s",
             transportName(c->kind()));
    TT_CHECK_OK(ctx.exchangeMemory(*c, *inbox, &remotes[static_cast<size_t>(p)]));
    TT_CHECK(remotes[static_cast<size_t>(p)]->mapped() == nullptr, "ucx must not map");
    TT_CHECK_OK(ctx.createSemaphore(c, &sems[static_cast<size_t>(p)]));
  }
  auto peers = [&](auto&& f) -> std::string {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      std::string e = f(p, *conns[static_cast<size_t>(p)], *remotes[static_cast<size_t>(p)],
                        *sems[static_cast<size_t>(p)]);
      if (!e.empty()) return e;
    }
    return "";
  };

  // Round 0: many outstanding puts, one flush, then the signal.
  fill(*src, me, 0);
  std::string e = peers([&](int p, Connection& c, RemoteMemory& r, Semaphore& s) -> std::string {
    for (const PutOp& op : putPlan(me, p))
      TT_CHECK_OK(c.put(r, slotBase(me) + op.dst, *src, op.src, op.bytes));
    TT_CHECK_OK(c.flush());
    TT_CHECK_OK(s.signal());
    return "";
  });
  if (!e.empty()) return e;
  e = peers([&](int p, Connection&, RemoteMemory&, Semaphore& s) -> std::string {
    TT_CHECK_OK(s.wait());
    return checkSlot(*inbox, p, me, 0);
  });
  if (!e.empty()) return e;

  // Gets read back what this rank put (into an unaligned local offset).
  e = peers([&](int p, Connection& c, RemoteMemory& r, Semaphore&) -> std::string {
    auto plan = putPlan(me, p);
    for (size_t i = 0; i < 6; ++i) {
      const PutOp& op = plan[i];
      TT_CHECK_OK(c.get(*getBuf, 3, r, slotBase(me) + op.dst, op.bytes));
      const auto* got = static_cast<const uint8_t*>(getBuf->data()) + 3;
      for (size_t j = 0; j < op.bytes; ++j)
        TT_CHECK(got[j] == pattern(me, 0, op.src + j), "get %zu from rank %d byte %zu", i, p, j);
    }
    return "";
  });
  if (!e.empty()) return e;
  TT_CHECK_OK(ctx.bootstrap().barrier());

  // Round 1: the puts come from two threads at once on one connection, then the signal right
  // after them, no flush: the fence before the add orders it.
  fill(*src, me, 1);
  e = peers([&](int p, Connection& c, RemoteMemory& r, Semaphore& s) -> std::string {
    auto plan = putPlan(me, p);
    std::string half[2];
    std::vector<std::thread> threads;
    for (size_t t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        half[t] = [&]() -> std::string {
          for (size_t k = t; k < plan.size(); k += 2)
            TT_CHECK_OK(c.put(r, slotBase(me) + plan[k].dst, *src, plan[k].src, plan[k].bytes));
          return "";
        }();
      });
    for (auto& th : threads) th.join();
    if (!half[0].empty() || !half[1].empty()) return half[0] + half[1];
    TT_CHECK_OK(s.signal());
    return "";
  });
  if (!e.empty()) return e;
  e = peers([&](int p, Connection&, RemoteMemory&, Semaphore& s) -> std::string {
    TT_CHECK_OK(s.wait());
    return checkSlot(*inbox, p, me, 1);
  });
  if (!e.empty()) return e;

  // Atomic adds from every peer into one counter.
  e = peers([&](int, Connection& c, RemoteMemory& r, Semaphore&) -> std::string {
    for (int k = 0; k < kAdds; ++k) TT_CHECK_OK(c.atomicAdd(r, 0, static_cast<uint64_t>(me + 1)));
    TT_CHECK_OK(c.flush());
    return "";
  });
  if (!e.empty()) return e;
  TT_CHECK_OK(ctx.bootstrap().barrier());
  uint64_t want = 0;
  for (int p = 0; p < n; ++p)
    if (p != me) want += static_cast<uint64_t>(kAdds) * static_cast<uint64_t>(p + 1);
  uint64_t have = __atomic_load_n(static_cast<uint64_t*>(inbox->data()), __ATOMIC_ACQUIRE);
  TT_CHECK(have == want, "rank %d counter %llu, expected %llu", me,
           static_cast<unsigned long long>(have), static_cast<unsigned long long>(want));

  // Round 2: port channels, the proxy carries out the puts and the signal.
  fill(*src, me, 2);
  std::vector<std::unique_ptr<PortChannel>> pcs(static_cast<size_t>(n));
  e = peers([&](int p, Connection&, RemoteMemory&, Semaphore&) -> std::string {
    auto i = static_cast<size_t>(p);
    TT_CHECK_OK(ctx.createPortChannel(conns[i], remotes[i], src, sems[i], &pcs[i]));
    auto plan = putPlan(me, p);
    for (size_t k = 0; k + 1 < plan.size(); ++k)
      TT_CHECK_OK(pcs[i]->put(slotBase(me) + plan[k].dst, plan[k].src, plan[k].bytes));
    TT_CHECK_OK(
        pcs[i]->putWithSignal(slotBase(me) + plan.back().dst, plan.back().src, plan.back().bytes));
    TT_CHECK_OK(pcs[i]->flush());
    return "";
  });
  if (!e.empty()) return e;
  e = peers([&](int p, Connection&, RemoteMemory&, Semaphore&) -> std::string {
    TT_CHECK_OK(pcs[static_cast<size_t>(p)]->wait());
    return checkSlot(*inbox, p, me, 2);
  });
  if (!e.empty()) return e;
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

// UCX_TLS value, ranks.
class UcxProcesses : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(UcxProcesses, PutGetAtomicPortChannel) {
  ScopedEnv tls("UCX_TLS", std::get<0>(GetParam()));
  RankOptions options;
  options.timeoutSeconds = 10;
  options.runSeconds = 30;
  expectAllRanksOk(
      runTransportRanks(RankMode::kProcesses, std::get<1>(GetParam()), rmaBody, options));
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxProcesses,
                         ::testing::Combine(::testing::Values("tcp", "sm"),
                                            ::testing::Values(2, 4)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

// Rank 1 is killed after the setup; rank 0, waiting for its signal, must get an error (a failed
// endpoint or its deadline) instead of hanging, and so must a put and flush to the dead peer.
class UcxPeerKilled : public ::testing::TestWithParam<const char*> {};

TEST_P(UcxPeerKilled, SurvivorGetsAnError) {
  ScopedEnv tls("UCX_TLS", GetParam());
  RankOptions options;
  options.timeoutSeconds = 1.5;
  options.runSeconds = 20;
  auto results = runTransportRanks(
      RankMode::kProcesses, 2,
      [](TransportContext& ctx) -> std::string {
        int peer = 1 - ctx.rank();
        std::shared_ptr<Connection> conn;
        TT_CHECK_OK(ctx.connect(peer, TransportKind::kUcx, &conn));
        std::shared_ptr<Memory> mem;
        TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &mem));
        std::shared_ptr<RemoteMemory> remote;
        TT_CHECK_OK(ctx.exchangeMemory(*conn, *mem, &remote));
        std::shared_ptr<Semaphore> sem;
        TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
        TT_CHECK_OK(conn->put(*remote, 0, *mem, 0, 100));
        TT_CHECK_OK(conn->flush());
        TT_CHECK_OK(ctx.bootstrap().barrier());
        if (ctx.rank() == 1) raise(SIGKILL);
        auto start = std::chrono::steady_clock::now();
        auto since = [&] {
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        Result waited = sem->wait();
        double waitSeconds = since();
        std::string waitError = lastErrorMessage();
        Result put = conn->put(*remote, 0, *mem, 0, 4096);
        Result flushed = put == tsrSuccess ? conn->flush() : put;
        std::fprintf(stderr,
                     "[ucx peer killed, UCX_TLS=%s] wait -> %s after %.3f s (%s); put+flush -> %s "
                     "after %.3f s\n",
                     std::getenv("UCX_TLS"), resultName(waited), waitSeconds, waitError.c_str(),
                     resultName(flushed), since());
        TT_CHECK(waited == tsrRemoteError || waited == tsrTimeout, "wait returned %s",
                 resultName(waited));
        TT_CHECK(flushed == tsrRemoteError || flushed == tsrTimeout, "put+flush returned %s",
                 resultName(flushed));
        return "";
      },
      options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0], "");
  EXPECT_NE(results[1].find("signal 9"), std::string::npos) << results[1];
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxPeerKilled, ::testing::Values("tcp", "sm"),
                         [](const auto& p) { return std::string(p.param); });

// Thread ranks of one process over ucx, with UCX's default transports.
TEST(UcxThreads, PutGetAtomicPortChannel) {
  RankOptions options;
  options.timeoutSeconds = 10;
  options.runSeconds = 30;
  expectAllRanksOk(runTransportRanks(RankMode::kThreads, 2, rmaBody, options));
}

}  // namespace
}  // namespace tessera::test
