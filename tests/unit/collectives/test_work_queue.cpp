// The device executor's work queue and persistent scheduler loop (work_queue.hpp) on host threads:
// each "CTA" is one thread running runScheduler<HostGroup> against host memory, posters are other
// threads calling postItem, and a fake runner counts which CTA ran which item. Every wait in the
// tests has a deadline (runRanks ends the process on a hang), and the queue's own deadlines are
// short (50-200 ms), so a broken protocol fails fast instead of hanging ctest.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/exec/device/work_queue.hpp"
#include "support/harness.hpp"

namespace tessera::exec {
namespace {

constexpr uint64_t kMs = 1000000;        // ns
constexpr double kDeadlineSeconds = 30;  // generous: a loaded 2-core machine
constexpr double kWaitSeconds = 10;      // a test's own waits: fail before runRanks' deadline

// The queue's memory, as device_executor.cpp would allocate it (here: host memory).
struct Queue {
  std::vector<WorkItem> items;
  uint64_t posted = 0;
  uint64_t consumed = 0;
  uint32_t abortFlag = 0;
  uint32_t stopFlag = 0;
  ErrorRecord error{};
  GridSync grid{};
  WorkQueueHandle h{};

  Queue(uint32_t size, uint64_t timeoutNs, uint64_t first = 0)
      : items(size), posted(first), consumed(first) {
    h.items = items.data();
    h.posted = &posted;
    h.consumed = &consumed;
    h.abortFlag = &abortFlag;
    h.stopFlag = &stopFlag;
    h.error = &error;
    h.grid = &grid;
    h.size = size;
    h.timeoutNs = timeoutNs;
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  void raise(uint32_t* flag) { storeRelease32(flag, 1); }
  uint64_t consumedNow() const { return device::loadAcquire(&consumed); }
  bool recorded() const { return device::loadAcquire(&error.valid) == 1; }
};

WorkItem makeItem(uint64_t callNo, uint32_t* doneWord, uint32_t doneValue,
                  uint8_t kind = kItemRun) {
  WorkItem it{};
  it.callNo = callNo;
  it.doneWord = doneWord;
  it.doneValue = doneValue;
  it.kind = kind;
  it.count = callNo * 3 + 1;  // checked by the runner: the slot carried the whole item
  return it;
}

bool waitFor(const std::function<bool()>& pred, double seconds = kWaitSeconds) {
  return test::waitUntil(pred, seconds);
}

// The fake Runner. Every CTA adds one to ran[callNo]; each CTA checks it sees the sequence
// numbers in order; with `barrier`, the CTAs also meet at a grid barrier inside the item (as plan
// barriers do). `blockCallNo`: the CTAs in `blockMask` poll queueFailed() there instead of running
// (an op waiting on a peer that never answers), and give up when the queue dies.
struct Runner {
  const WorkQueueHandle* q = nullptr;
  std::vector<std::atomic<uint32_t>> ran;
  std::vector<uint64_t> nextSeq;  // per CTA, only its own thread touches it
  std::atomic<int> errors{0};
  std::atomic<int> blocked{0};  // CTAs that entered the blocking item
  bool barrier = false;
  uint64_t blockCallNo = UINT64_MAX;
  uint32_t blockMask = 0;
  std::vector<uint64_t> completionOrder;  // seqs CTA 0 ran, in order

  Runner(const WorkQueueHandle& queue, size_t calls, uint32_t nctas, uint64_t first = 0)
      : q(&queue), ran(calls), nextSeq(nctas, first) {}

  bool runItem(const WorkItem& item, const HostGroup& g, uint32_t cta, uint32_t nctas) {
    if (item.callNo >= ran.size() || item.count != item.callNo * 3 + 1) {
      errors.fetch_add(1);
      return false;
    }
    // In order, none skipped (healthy queue): this CTA's previous item was seq - 1.
    if (item.seq != nextSeq[cta]) errors.fetch_add(1);
    nextSeq[cta] = item.seq + 1;
    // consumed: CTA 0 completes seq - 1 after the barrier, so another CTA may run ahead of it.
    uint64_t done = device::loadAcquire(q->consumed);
    if (done > item.seq || done + (cta == 0 ? 0 : 1) < item.seq) errors.fetch_add(1);
    if (cta == 0) completionOrder.push_back(item.seq);
    ran[item.callNo].fetch_add(1);
    if (item.callNo == blockCallNo && (blockMask >> cta & 1) != 0) {
      blocked.fetch_add(1);
      bool gaveUp = waitFor([&] { return queueFailed(*q); });
      if (!gaveUp) errors.fetch_add(1);
      return false;  // like gridBarrier: a wait that sees the dead queue records nothing
    }
    if (barrier) return gridBarrier(*q, g, nctas, item.seq, item.callNo, static_cast<int32_t>(cta));
    return true;
  }
};

// Runs `nctas` scheduler threads (ranks 0..nctas-1, returns in ret[cta]) and `others` more
// threads calling other(i), all under one deadline.
void runGrid(Queue& queue, Runner& runner, uint32_t nctas, uint64_t first,
             std::vector<uint64_t>* ret, int others, const std::function<void(int)>& other) {
  ret->assign(nctas, 0);
  test::runRanks(
      static_cast<int>(nctas) + others,
      [&](int r) {
        if (r < static_cast<int>(nctas)) {
          HostGroup g;
          (*ret)[static_cast<size_t>(r)] =
              runScheduler(queue.h, g, static_cast<uint32_t>(r), nctas, first, runner);
        } else {
          other(r - static_cast<int>(nctas));
        }
      },
      kDeadlineSeconds);
}

class WorkQueueGrid : public ::testing::TestWithParam<uint32_t> {};

// One poster, more items than slots, an eager-style monotonic done word (value = ticket): items
// complete in order, every CTA runs every item once, a stop item ends every CTA's loop.
TEST_P(WorkQueueGrid, EnqueueAndCompleteInOrder) {
  const uint32_t nctas = GetParam();
  constexpr uint64_t kCalls = 40;
  Queue queue(8, 200 * kMs);
  Runner runner(queue.h, kCalls, nctas);
  runner.barrier = nctas > 1;
  uint32_t eager = 0;
  uint32_t stopDone = 0;
  std::atomic<bool> posting{true};
  std::atomic<int> regressions{0};
  std::vector<uint64_t> seqs;
  std::vector<uint64_t> ret;
  runGrid(queue, runner, nctas, 0, &ret, 2, [&](int i) {
    if (i == 0) {
      for (uint64_t c = 0; c < kCalls; ++c)
        seqs.push_back(postItem(queue.h, makeItem(c, &eager, static_cast<uint32_t>(c + 1))));
      seqs.push_back(postItem(queue.h, makeItem(0, &stopDone, 7, kItemStop)));
      posting = false;
    } else {  // watcher: the eager word never goes back
      uint32_t last = 0;
      while (posting || loadAcquire32(&eager) < kCalls) {
        uint32_t now = loadAcquire32(&eager);
        if (now < last) regressions.fetch_add(1);
        last = now;
        std::this_thread::yield();
      }
    }
  });
  for (uint64_t s = 0; s <= kCalls; ++s) EXPECT_EQ(seqs[s], s);
  for (uint32_t c = 0; c < nctas; ++c) EXPECT_EQ(ret[c], kCalls + 1) << "cta " << c;
  for (uint64_t c = 0; c < kCalls; ++c) EXPECT_EQ(runner.ran[c].load(), nctas) << "call " << c;
  ASSERT_EQ(runner.completionOrder.size(), kCalls);
  for (uint64_t s = 0; s < kCalls; ++s) EXPECT_EQ(runner.completionOrder[s], s);
  EXPECT_EQ(runner.errors.load(), 0);
  EXPECT_EQ(regressions.load(), 0);
  EXPECT_EQ(eager, kCalls);
  EXPECT_EQ(stopDone, 7u);
  EXPECT_EQ(queue.consumed, kCalls + 1);
  EXPECT_EQ(queue.posted, kCalls + 1);
  EXPECT_EQ(queue.error.code, 0u);
  EXPECT_EQ(queue.error.valid, 0u);
}

// Several posters at once, four slots for 150 items (posters block until slots free), each item
// with a done word of its own.
TEST_P(WorkQueueGrid, ManyInFlightSeveralPosters) {
  const uint32_t nctas = GetParam();
  constexpr int kPosters = 3;
  constexpr uint64_t kPerPoster = 50;
  constexpr uint64_t kCalls = kPosters * kPerPoster;
  Queue queue(4, 200 * kMs);
  queue.h.timeoutNs = 20000 * kMs;  // posters wait for slots; this test is not about deadlines
  Runner runner(queue.h, kCalls, nctas);
  runner.barrier = nctas > 1;
  std::vector<uint32_t> done(kCalls, 0);
  std::vector<std::vector<uint64_t>> seqs(kPosters);
  std::atomic<int> postersLeft{kPosters};
  std::vector<uint64_t> ret;
  runGrid(queue, runner, nctas, 0, &ret, kPosters, [&](int p) {
    for (uint64_t k = 0; k < kPerPoster; ++k) {
      uint64_t c = static_cast<uint64_t>(p) * kPerPoster + k;
      seqs[static_cast<size_t>(p)].push_back(
          postItem(queue.h, makeItem(c, &done[c], static_cast<uint32_t>(1000 + c))));
    }
    if (postersLeft.fetch_sub(1) == 1) postItem(queue.h, makeItem(0, nullptr, 0, kItemStop));
  });
  std::vector<int> seen(kCalls, 0);
  for (const auto& s : seqs) {
    for (size_t k = 1; k < s.size(); ++k) EXPECT_LT(s[k - 1], s[k]);  // one poster: in order
    for (uint64_t v : s) {
      ASSERT_LT(v, kCalls);
      ++seen[v];
    }
  }
  for (uint64_t s = 0; s < kCalls; ++s) EXPECT_EQ(seen[s], 1) << "seq " << s;
  for (uint32_t c = 0; c < nctas; ++c) EXPECT_EQ(ret[c], kCalls + 1);
  for (uint64_t c = 0; c < kCalls; ++c) {
    EXPECT_EQ(runner.ran[c].load(), nctas) << "call " << c;
    EXPECT_EQ(done[c], 1000 + c) << "call " << c;
  }
  ASSERT_EQ(runner.completionOrder.size(), kCalls);
  for (uint64_t s = 0; s < kCalls; ++s) EXPECT_EQ(runner.completionOrder[s], s);
  EXPECT_EQ(runner.errors.load(), 0);
  EXPECT_EQ(queue.consumed, kCalls + 1);
  EXPECT_EQ(queue.error.code, 0u);
}

// The stop flag ends an idle loop, which returns the first sequence number it did not take; a
// grid started at `first` > 0 (after an earlier grid's stop) takes items from there.
TEST_P(WorkQueueGrid, StopFlagEndsIdleLoopAndFirstIsHonoured) {
  const uint32_t nctas = GetParam();
  constexpr uint64_t kFirst = 13;  // not a multiple of the size: the ring is mid-lap
  Queue queue(4, 200 * kMs, kFirst);
  Runner runner(queue.h, 8, nctas, kFirst);
  runner.barrier = nctas > 1;
  std::vector<uint32_t> done(8, 0);
  std::vector<uint64_t> ret;
  runGrid(queue, runner, nctas, kFirst, &ret, 1, [&](int) {
    for (uint64_t c = 0; c < 6; ++c) postItem(queue.h, makeItem(c, &done[c], 1));
    ASSERT_TRUE(waitFor([&] { return queue.consumedNow() == kFirst + 6; }));
    // Not synchronisation (consumed says the items are done): the CTAs' leaders go on into the
    // idle backoff, down to its sleeps, which the stop must end.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    queue.raise(&queue.stopFlag);
  });
  for (uint32_t c = 0; c < nctas; ++c) EXPECT_EQ(ret[c], kFirst + 6) << "cta " << c;
  for (uint64_t c = 0; c < 6; ++c) {
    EXPECT_EQ(runner.ran[c].load(), nctas);
    EXPECT_EQ(done[c], 1u);
  }
  EXPECT_EQ(runner.errors.load(), 0);
  EXPECT_EQ(queue.error.code, 0u);
}

// tsrCommAbort while an item blocks and more are queued: the record says abort, every item
// (queued before or posted after the abort) gets its done word, none runs, nothing hangs.
TEST_P(WorkQueueGrid, AbortWhileItemsPending) {
  const uint32_t nctas = GetParam();
  constexpr uint64_t kCalls = 20;
  Queue queue(4, 150 * kMs);
  queue.h.timeoutNs = 20000 * kMs;  // the abort, not a deadline, must end the blocked wait
  Runner runner(queue.h, kCalls, nctas);
  runner.barrier = nctas > 1;
  runner.blockCallNo = 0;
  runner.blockMask = (1u << nctas) - 1;  // every CTA waits on its "peer"
  std::vector<uint32_t> done(kCalls, 0);
  std::vector<uint64_t> seqs(kCalls, 0);
  std::vector<uint64_t> ret;
  runGrid(queue, runner, nctas, 0, &ret, 1, [&](int) {
    for (uint64_t c = 0; c < 4; ++c) seqs[c] = postItem(queue.h, makeItem(c, &done[c], 5));
    ASSERT_TRUE(waitFor([&] { return runner.blocked.load() == static_cast<int>(nctas); }));
    EXPECT_EQ(loadAcquire32(&done[0]), 0u);  // still blocked: nothing completed
    queue.raise(&queue.abortFlag);
    for (uint64_t c = 4; c < kCalls; ++c) {
      seqs[c] = postItem(queue.h, makeItem(c, &done[c], 5));
      EXPECT_EQ(seqs[c], c);  // the dead queue is drained, so the post finds its slot
    }
    EXPECT_TRUE(waitFor([&] {
      for (uint64_t c = 0; c < kCalls; ++c)
        if (loadAcquire32(&done[c]) != 5) return false;
      return true;
    }));
    // A dead queue may refuse the stop item (no free slot): the stop flag ends the loop then.
    if (postItem(queue.h, makeItem(0, nullptr, 0, kItemStop)) == UINT64_MAX)
      queue.raise(&queue.stopFlag);
  });
  for (uint64_t c = 0; c < 4; ++c) EXPECT_EQ(seqs[c], c);
  EXPECT_EQ(runner.ran[0].load(), nctas);
  for (uint64_t c = 1; c < kCalls; ++c) EXPECT_EQ(runner.ran[c].load(), 0u) << "call " << c;
  ASSERT_TRUE(queue.recorded());
  EXPECT_EQ(queue.error.code, 6u);  // tsrRemoteError
  EXPECT_EQ(queue.error.why, kWhyAbort);
  EXPECT_EQ(queue.error.seq, 0u);
  EXPECT_EQ(queue.error.callNo, 0u);
  EXPECT_EQ(runner.errors.load(), 0);
}

// A grid barrier that one CTA never reaches (it waits on something that never comes): the others
// give up at the deadline and record tsrTimeout with the item's seq and callNo; later items
// complete at once without running.
TEST_P(WorkQueueGrid, DeadlineExpiryAtGridBarrier) {
  const uint32_t nctas = GetParam();
  if (nctas < 2) GTEST_SKIP() << "a grid barrier needs two CTAs";
  constexpr uint64_t kCalls = 16;
  constexpr uint64_t kTimeout = 100 * kMs;
  Queue queue(4, kTimeout);
  Runner runner(queue.h, kCalls, nctas);
  runner.barrier = true;
  runner.blockCallNo = 2;
  runner.blockMask = 1u << (nctas - 1);  // the last CTA never arrives
  std::vector<uint32_t> done(kCalls, 0);
  std::vector<uint64_t> ret;
  uint64_t start = 0;
  uint64_t failedAfter = 0;
  runGrid(queue, runner, nctas, 0, &ret, 1, [&](int) {
    start = device::clockNs();
    // No more than the ring holds until the failure: a poster waiting for a slot meanwhile would
    // have a deadline of its own racing the barrier's (kWhyQueueFull could be recorded first).
    for (uint64_t c = 0; c < 4; ++c) postItem(queue.h, makeItem(c, &done[c], 9));
    ASSERT_TRUE(waitFor([&] { return queue.recorded(); }));
    failedAfter = device::clockNs() - start;
    for (uint64_t c = 4; c < kCalls; ++c)
      EXPECT_NE(postItem(queue.h, makeItem(c, &done[c], 9)), UINT64_MAX);
    EXPECT_TRUE(waitFor([&] {
      for (uint64_t c = 0; c < kCalls; ++c)
        if (loadAcquire32(&done[c]) != 9) return false;
      return true;
    }));
    if (postItem(queue.h, makeItem(0, nullptr, 0, kItemStop)) == UINT64_MAX)
      queue.raise(&queue.stopFlag);
  });
  EXPECT_GE(failedAfter, kTimeout);  // a lower bound only: never flaky under load
  EXPECT_EQ(queue.error.code, 8u);   // tsrTimeout
  EXPECT_EQ(queue.error.why, kWhyTimeout);
  EXPECT_EQ(queue.error.seq, 2u);
  EXPECT_EQ(queue.error.callNo, 2u);
  EXPECT_GE(queue.error.cta, 0);
  EXPECT_LT(queue.error.cta, static_cast<int32_t>(nctas - 1));  // a CTA that did arrive
  for (uint64_t c = 0; c < 3; ++c) EXPECT_EQ(runner.ran[c].load(), nctas) << "call " << c;
  for (uint64_t c = 3; c < kCalls; ++c) EXPECT_EQ(runner.ran[c].load(), 0u) << "call " << c;
  for (uint64_t c = 0; c < kCalls; ++c) EXPECT_EQ(done[c], 9u) << "call " << c;
  EXPECT_EQ(runner.errors.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ctas, WorkQueueGrid, ::testing::Values(1u, 2u, 3u));

// No scheduler: the (size+1)-th post finds no free slot before its deadline.
TEST(WorkQueue, QueueFullWithoutScheduler) {
  Queue queue(4, 50 * kMs);
  std::vector<uint32_t> done(7, 0);
  for (uint64_t c = 0; c < 4; ++c) EXPECT_EQ(postItem(queue.h, makeItem(c, &done[c], 3)), c);
  EXPECT_FALSE(queue.recorded());
  uint64_t t0 = device::clockNs();
  EXPECT_EQ(postItem(queue.h, makeItem(4, &done[4], 3)), UINT64_MAX);
  EXPECT_GE(device::clockNs() - t0, 50 * kMs);
  EXPECT_EQ(done[4], 3u);  // the caller's wait is released
  ASSERT_TRUE(queue.recorded());
  EXPECT_EQ(queue.error.code, 8u);
  EXPECT_EQ(queue.error.why, kWhyQueueFull);
  EXPECT_EQ(queue.error.seq, 4u);
  EXPECT_EQ(queue.error.callNo, 4u);
  EXPECT_EQ(queue.error.cta, -1);
  // The queue is dead: the next post still waits for a slot (a live scheduler would drain the
  // dead queue), gives up at its deadline, and the record keeps the first failure.
  EXPECT_EQ(postItem(queue.h, makeItem(5, &done[5], 3)), UINT64_MAX);
  EXPECT_EQ(done[5], 3u);
  EXPECT_EQ(queue.error.seq, 4u);
  // Dead and stopped (tsrCommAbort raises both): nobody drains it, so a post gives up at once.
  queue.raise(&queue.stopFlag);
  t0 = device::clockNs();
  EXPECT_EQ(postItem(queue.h, makeItem(6, nullptr, 3)), UINT64_MAX);  // no done word: fine
  EXPECT_LT(device::clockNs() - t0, 40 * kMs);
  EXPECT_EQ(queue.error.seq, 4u);
  storeRelease32(&queue.stopFlag, 0);
  for (uint64_t c = 0; c < 4; ++c) EXPECT_EQ(done[c], 0u);  // published, not yet run

  // A grid started now completes the published items without running them; the refused ones
  // left holes that are never published, so only the stop flag ends it (as destroy does).
  Runner runner(queue.h, 7, 2);
  std::vector<uint64_t> ret;
  runGrid(queue, runner, 2, 0, &ret, 1, [&](int) {
    EXPECT_TRUE(waitFor([&] { return queue.consumedNow() == 4; }));
    queue.raise(&queue.stopFlag);
  });
  for (uint64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(done[c], 3u);
    EXPECT_EQ(runner.ran[c].load(), 0u);
  }
  EXPECT_EQ(ret[0], 4u);
  // CTA 1 leaves the dead queue before it reads any slot; CTA 0 completes the published items
  // alone, each slot freed once CTA 1 was gone (no poster may rewrite a slot a CTA still reads).
  EXPECT_EQ(ret[1], 0u);
  EXPECT_EQ(queue.h.grid->gone, 1u);
  EXPECT_EQ(queue.error.why, kWhyQueueFull);
}

// The first failure is kept; later ones are dropped; recordStop picks abort over a deadline.
TEST(WorkQueue, ErrorRecordKeepsFirst) {
  Queue queue(2, 50 * kMs);
  EXPECT_FALSE(queueFailed(queue.h));
  queue.raise(&queue.abortFlag);
  EXPECT_TRUE(queueFailed(queue.h));  // the abort flag alone
  recordStop(queue.h, 11, 12, 1, 2, 3, 4);
  ASSERT_TRUE(queue.recorded());
  EXPECT_EQ(queue.error.code, 6u);
  EXPECT_EQ(queue.error.why, kWhyAbort);
  EXPECT_EQ(queue.error.seq, 11u);
  EXPECT_EQ(queue.error.callNo, 12u);
  EXPECT_EQ(queue.error.cta, 1);
  EXPECT_EQ(queue.error.worker, 2);
  EXPECT_EQ(queue.error.op, 3);
  EXPECT_EQ(queue.error.peer, 4);
  recordError(queue.h, 8, kWhyTimeout, 99, 99, 9, 9, 9, 9);
  EXPECT_EQ(queue.error.code, 6u);
  EXPECT_EQ(queue.error.seq, 11u);

  Queue timed(2, 50 * kMs);
  recordStop(timed.h, 1, 2, 0, -1, -1, -1);
  EXPECT_EQ(timed.error.code, 8u);
  EXPECT_EQ(timed.error.why, kWhyTimeout);
  EXPECT_TRUE(queueFailed(timed.h));
}

// Racing recorders: exactly one wins, and a reader that sees valid == 1 sees all of its fields.
TEST(WorkQueue, ErrorRecordValidAfterFields) {
  for (int round = 0; round < 200; ++round) {
    Queue queue(2, 50 * kMs);
    std::atomic<int> bad{0};
    test::runRanks(
        4,
        [&](int r) {
          if (r == 3) {  // reader
            while (device::loadAcquire(&queue.error.valid) == 0) std::this_thread::yield();
            const ErrorRecord& e = queue.error;
            auto t = static_cast<int32_t>(device::loadAcquire(&e.code)) - 1;  // losers CAS it
            if (t < 0 || t > 2 || e.seq != static_cast<uint64_t>(t) + 100 ||
                e.callNo != static_cast<uint64_t>(t) + 200 || e.cta != t || e.worker != t ||
                e.op != t || e.peer != t || e.why != kWhyPort)
              bad.fetch_add(1);
            return;
          }
          recordError(queue.h, static_cast<uint64_t>(r) + 1, kWhyPort,
                      static_cast<uint64_t>(r) + 100, static_cast<uint64_t>(r) + 200, r, r, r, r);
        },
        kDeadlineSeconds);
    ASSERT_EQ(bad.load(), 0) << "round " << round;
  }
}

// The grid barrier alone: what each CTA wrote before it is seen by every CTA after it (plain
// writes: under -fsanitize=thread a missing acquire shows up as a race), over many rounds.
TEST(WorkQueue, GridBarrierOrdersWrites) {
  constexpr uint32_t kCtas = 3;
  constexpr int kRounds = 300;
  Queue queue(2, 20000 * kMs);
  std::vector<uint64_t> cell(kCtas * kRounds, 0);
  std::atomic<int> bad{0};
  test::runRanks(
      kCtas,
      [&](int r) {
        HostGroup g;
        auto cta = static_cast<uint32_t>(r);
        for (int k = 0; k < kRounds; ++k) {
          cell[static_cast<size_t>(k) * kCtas + cta] = static_cast<uint64_t>(k * 10 + r);
          if (!gridBarrier(queue.h, g, kCtas, 0, 0, r)) bad.fetch_add(1);
          for (uint32_t o = 0; o < kCtas; ++o)
            if (cell[static_cast<size_t>(k) * kCtas + o] != static_cast<uint64_t>(k * 10) + o)
              bad.fetch_add(1);
        }
      },
      kDeadlineSeconds);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(queue.grid.generation, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(queue.grid.count, 0u);
  EXPECT_FALSE(queue.recorded());
}

// A barrier some CTA never reaches gives up at the deadline (tsrTimeout), and at once on an
// aborted queue (nothing recorded by the barrier: the abort is the scheduler's to report).
TEST(WorkQueue, GridBarrierDeadlineAndAbort) {
  Queue queue(2, 50 * kMs);
  HostGroup g;
  uint64_t t0 = device::clockNs();
  EXPECT_FALSE(gridBarrier(queue.h, g, 2, 5, 6, 1));
  EXPECT_GE(device::clockNs() - t0, 50 * kMs);
  ASSERT_TRUE(queue.recorded());
  EXPECT_EQ(queue.error.code, 8u);
  EXPECT_EQ(queue.error.why, kWhyTimeout);
  EXPECT_EQ(queue.error.seq, 5u);
  EXPECT_EQ(queue.error.callNo, 6u);
  EXPECT_EQ(queue.error.cta, 1);

  Queue aborted(2, 20000 * kMs);
  aborted.raise(&aborted.abortFlag);
  t0 = device::clockNs();
  EXPECT_FALSE(gridBarrier(aborted.h, g, 2, 0, 0, 0));
  EXPECT_LT(device::clockNs() - t0, 10000 * kMs);
  EXPECT_FALSE(aborted.recorded());
  EXPECT_TRUE(gridBarrier(aborted.h, g, 1, 0, 0, 0));  // one CTA: nothing to wait for
}

}  // namespace
}  // namespace tessera::exec
