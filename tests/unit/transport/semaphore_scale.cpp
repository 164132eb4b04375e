#include "semaphore_scale.hpp"

#include <dirent.h>

#include <cstdio>
#include <set>

#include "transport/semaphore.hpp"

namespace tessera::test {
namespace {

// Collective: whether every rank's *failure is empty. A rank that is fine but learns that another
// failed gets a sentence too, so that every rank stops at the same point instead of waiting for
// signals a failed rank will never send.
Result everyRankOk(TransportContext& ctx, std::string* failure) {
  std::vector<int> failed(static_cast<size_t>(ctx.nranks()), 0);
  failed[static_cast<size_t>(ctx.rank())] = failure->empty() ? 0 : 1;
  TSR_CHECK(ctx.bootstrap().allGather(failed.data(), sizeof(int)));
  for (int r = 0; r < ctx.nranks(); ++r)
    if (failed[static_cast<size_t>(r)] != 0 && failure->empty())
      *failure = strprintf("rank %d: stopped because rank %d failed", ctx.rank(), r);
  return tsrSuccess;
}

#define TT_EVERY_RANK_OK(ctx, failure)           \
  do {                                           \
    TT_CHECK_OK(everyRankOk((ctx), &(failure))); \
    if (!(failure).empty()) return failure;      \
  } while (0)

using SemaphoreTable = std::vector<std::vector<std::shared_ptr<Semaphore>>>;

// Each local counter is a 64-byte slot of its own, and the peers' counters come from a few imports
// per peer, not one per semaphore.
std::string slotsAndImports(const SemaphoreTable& sems, int me, size_t importsPerPeer) {
  std::set<const void*> slots;
  for (size_t p = 0; p < sems.size(); ++p) {
    std::set<const void*> imports;
    for (const auto& s : sems[p]) {
      auto h = s->deviceHandle();
      TT_CHECK(reinterpret_cast<uintptr_t>(h.inbound) % Semaphore::kBytes == 0,
               "rank %d: a counter at %p is not on a 64-byte slot", me,
               static_cast<void*>(h.inbound));
      TT_CHECK(slots.insert(h.inbound).second, "rank %d: two semaphores share the counter at %p",
               me, static_cast<void*>(h.inbound));
      imports.insert(s->remote().get());
    }
    TT_CHECK(imports.size() <= importsPerPeer,
             "rank %d: %zu semaphores with peer %zu use %zu imported memories (at most %zu: one "
             "per slab)",
             me, sems[p].size(), p, imports.size(), importsPerPeer);
  }
  return "";
}

// Signals semaphore i of every peer (i % 3 + 1) times, then consumes what each peer sent and checks
// the exact totals: two semaphores sharing a counter would see each other's signals.
std::string countsStaySeparate(const SemaphoreTable& sems, int me) {
  for (const auto& list : sems)
    for (size_t i = 0; i < list.size(); ++i)
      for (size_t k = 0; k < i % 3 + 1; ++k) TT_CHECK_OK(list[i]->signal());
  for (size_t p = 0; p < sems.size(); ++p)
    for (size_t i = 0; i < sems[p].size(); ++i) {
      const auto& s = sems[p][i];
      uint64_t want = i % 3 + 1;
      for (size_t k = 0; k < want; ++k) TT_CHECK_OK(s->wait());
      TT_CHECK(s->received() == want && s->consumed() == want,
               "rank %d: semaphore %zu with peer %zu received %llu and consumed %llu signals, "
               "expected %llu",
               me, i, p, static_cast<unsigned long long>(s->received()),
               static_cast<unsigned long long>(s->consumed()),
               static_cast<unsigned long long>(want));
    }
  return "";
}

}  // namespace

int openFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;
}

int roundPartner(int rank, int round, int n) {
  if (rank == n - 1) return round;
  if (rank == round) return n - 1;
  return ((2 * round - rank) % (n - 1) + (n - 1)) % (n - 1);
}

std::string manySemaphores(TransportContext& ctx, const SemaphoreScale& scale) {
  const int me = ctx.rank(), n = ctx.nranks();
  TT_CHECK(n % 2 == 0, "manySemaphores needs an even number of ranks, not %d", n);
  const bool threads = scale.mode == RankMode::kThreads;
  std::vector<std::shared_ptr<Connection>> conns(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p)
    if (p != me) TT_CHECK_OK(ctx.connect(p, scale.kind, &conns[static_cast<size_t>(p)]));
  // Thread ranks share one descriptor table: rank 0 counts for all of them, between barriers.
  const bool counts = !threads || me == 0;
  const int budget = scale.fdBudgetPerRank * (threads ? n : 1);
  TT_CHECK_OK(ctx.bootstrap().barrier());
  const int before = counts ? openFds() : 0;
  TT_CHECK(before >= 0, "cannot read /proc/self/fd");
  TT_CHECK_OK(ctx.bootstrap().barrier());

  SemaphoreTable sems(static_cast<size_t>(n));
  int made = 0;
  const int total = scale.perPair * (n - 1);
  for (int round = 0; round < n - 1; ++round) {
    int p = roundPartner(me, round, n);
    auto& list = sems[static_cast<size_t>(p)];
    list.resize(static_cast<size_t>(scale.perPair));
    for (auto& s : list) {
      TT_CHECK_OK(ctx.createSemaphore(conns[static_cast<size_t>(p)], &s));
      ++made;
    }
    if (threads) continue;
    // Checked every round, so that a cost per semaphore shows long before any limit is reached.
    std::string over;
    int added = openFds() - before;
    if (added > budget)
      over = strprintf(
          "rank %d: %d semaphores (with %d peers) added %d descriptors; the budget for %d "
          "semaphores is %d",
          me, made, round + 1, added, total, budget);
    TT_EVERY_RANK_OK(ctx, over);
  }
  // Counted between barriers: thread ranks past the second one may already let go of theirs.
  TT_CHECK_OK(ctx.bootstrap().barrier());
  std::string over;
  if (counts) {
    int added = openFds() - before;
    std::printf("[ fds      ] rank %d (%s over %s): %d open before, %d more after %d semaphores\n",
                me, rankModeName(scale.mode), transportName(scale.kind), before, added,
                total * (threads ? n : 1));
    std::fflush(stdout);  // forked ranks leave with _exit
    if (added > budget)
      over = strprintf("rank %d: %d semaphores added %d descriptors (budget %d)", me,
                       total * (threads ? n : 1), added, budget);
  }
  TT_EVERY_RANK_OK(ctx, over);

  std::string bad = slotsAndImports(sems, me, scale.importsPerPeer);
  TT_EVERY_RANK_OK(ctx, bad);
  bad = countsStaySeparate(sems, me);
  TT_EVERY_RANK_OK(ctx, bad);

  // Letting go of the semaphores lets go of their slabs, all but the one the next slot would come
  // from.
  sems.clear();
  TT_CHECK_OK(ctx.bootstrap().barrier());
  std::string stay;
  if (counts) {
    int left = openFds() - before;
    int keep = scale.fdsKeptPerRank * (threads ? n : 1);
    std::printf("[ fds      ] rank %d (%s over %s): %d more than before once they are gone\n", me,
                rankModeName(scale.mode), transportName(scale.kind), left);
    std::fflush(stdout);
    if (left > keep)
      stay = strprintf("rank %d: %d descriptors stay after every semaphore is gone (at most %d)",
                       me, left, keep);
  }
  TT_EVERY_RANK_OK(ctx, stay);
  return "";
}

}  // namespace tessera::test
