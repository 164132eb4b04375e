// The rhd family: recursive halving / doubling (Thakur, Rabenseifner and Gropp), for allreduce,
// reducescatter and allgather. log2(p) steps each way, every step with one partner.
//
// Virtual ranks. p is the largest power of two <= n and extra = n - p. The first 2 * extra ranks
// pair up: the odd rank of each pair folds its input into the even one (which becomes vrank
// rank / 2) and takes no part in the exchanges; ranks >= 2 * extra are vranks rank - extra. After
// the power-of-two algorithm the even rank hands the odd one its result (unfold).
//
// Items. The data is a row of items (chunks) that is cut among the p vranks in order: vrank v
// owns items [start(v), start(v + 1)). For allreduce the row is the one segment and vrank v owns
// `pipeline` chunks (cps = p * pipeline). For reducescatter the row is the input (n segments) and
// for allgather the output (n segments): vrank v owns the segments of the real ranks it stands
// for (two for a folded pair, one otherwise), so uneven shares are what make non-powers of two
// work there: the halving and doubling split ranges of vranks, not of items.
//
// Reduce-scatter by recursive halving: at the step with mask m (p/2 first), v and v ^ m split
// their common vrank range in half; each sends the other half's partial sums and keeps its own.
// A partial sum is never stored: each rank keeps, per item, the list of local chunks whose sum
// it is (its input, the folded partner's input, then every received slot), and sends that list
// with reduceSend. The received slots of every step get their own scratch region, so one step
// never overwrites data a later step still reads. After the last step v reduces its own items
// into its output (or, for reducescatter, its folded partner's items into that rank's scratch).
//
// All-gather by recursive doubling: at the step with mask m (1 first), v and v ^ m exchange the
// ranges they hold, so the range doubles each step. Allgather starts from the inputs (the folded
// odd rank's input arrives in the even rank's scratch), allreduce from the reduce-scatter.
//
// Within a step the two partners alternate "send one chunk, take one chunk", so the receiver can
// use the first chunks while the later ones travel. Each scratch region is written once per
// slice. Before the next slice overwrites it, the reader must be done with it; a message of the
// next slice usually proves that already, and then no credit is spent:
//  - fold: the odd rank starts the next slice only after the unfold, which comes after the even
//    rank's last read of the folded input;
//  - unfold: the even rank unfolds again only after the odd rank's next fold, sent after it
//    copied the previous result out;
//  - allreduce: partners of a halving step meet again at the doubling step with the same mask
//    (after the receiver's last read of the halving region), and the next slice's halving step
//    with the same partner precedes each doubling step.
// Reducescatter's halving regions and allgather's doubling regions have no such later message:
// there the writer waits for a credit (initial 1) that the reader returns after its last read.
// Zero-copy: the doubling and unfold steps put straight into the partner's output (no copy, no
// credit; the receiver's wait for the data is the handshake that keeps the writes inside its
// call). Allgather partners first signal that they are in the call (kReady): nothing else has
// come from them before the first doubling write.
#include <algorithm>
#include <utility>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr int kDefaultPipeline = 1;

enum Channel : int {
  kRsData,      // halving step: a partial sum chunk landed
  kRsCredit,    // the receiver finished with that step's region
  kAgData,      // doubling step: a result chunk landed
  kAgCredit,    // the receiver copied that step's chunks out
  kFoldData,    // odd -> even: an input chunk landed
  kUnfoldData,  // even -> odd: a result chunk landed
  kReady,       // zero-copy allgather: this rank is in the call, its output may be written
};

struct ItemRange {
  int lo = 0;
  int hi = 0;  // items [lo, hi)
  int size() const { return hi - lo; }
};

// One exchange: the partner (a real rank), the items sent and the items received.
struct Step {
  int partner = 0;
  ItemRange send;
  ItemRange recv;
};

// Where each region of a rank's scratch starts (chunk index), -1 where the rank has none.
struct Layout {
  int fold = -1;             // folded partner's input (even ranks of pairs)
  std::vector<int> halving;  // one region per halving step
  int doubling = -1;         // indexed by item
  int unfold = -1;           // the result, at the folded odd rank
  int total = 0;
  int alloc(int chunks) {
    const int base = total;
    total += chunks;
    return base;
  }
};

class Rhd {
 public:
  Rhd(GenParams params, int pipeline)
      : params_(std::move(params)),
        n_(params_.nranks),
        p_(largestPowerOfTwo(n_)),
        extra_(n_ - p_),
        pipeline_(pipeline),
        allreduce_(params_.collective == Collective::kAllReduce),
        builder_(params_, allreduce_ ? p_ * pipeline : pipeline, 1) {
    cps_ = builder_.cps();
    zeroCopy_ = params_.zeroCopy && params_.collective != Collective::kReduceScatter;
    // Items per row: the one segment of allreduce, or n segments (reducescatter input,
    // allgather output).
    items_ = allreduce_ ? cps_ : n_ * cps_;
    for (int rank = 0; rank < n_; ++rank) layouts_.push_back(layoutOf(rank));
  }

  void generate(Plan* out) {
    for (int rank = 0; rank < n_; ++rank) {
      const Layout& l = layouts_[static_cast<size_t>(rank)];
      if (l.total > 0) builder_.useScratch(rank, (l.total + cps_ - 1) / cps_);
      if (vrankOf(rank) < 0) {
        foldedRank(rank);
      } else {
        participant(rank);
      }
    }
    if (!zeroCopy_) builder_.plan().zeroCopy = false;
    builder_.finish(out);
  }

 private:
  static int largestPowerOfTwo(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
  }
  bool reduces() const { return params_.collective != Collective::kAllGather; }
  bool gathers() const { return params_.collective != Collective::kReduceScatter; }

  int vrankOf(int rank) const {
    if (rank >= 2 * extra_) return rank - extra_;
    return rank % 2 == 0 ? rank / 2 : -1;
  }
  // The real rank of vrank v (v == p gives n, the end of the row).
  int realOf(int v) const { return v < extra_ ? 2 * v : v + extra_; }
  bool receivesFold(int rank) const { return rank < 2 * extra_ && rank % 2 == 0; }
  int start(int v) const { return allreduce_ ? v * pipeline_ : realOf(v) * cps_; }
  ItemRange span(int vlo, int vhi) const { return ItemRange{start(vlo), start(vhi)}; }
  // Items the odd rank of a pair sends when it folds (its input).
  int foldItems() const { return params_.collective == Collective::kAllGather ? cps_ : items_; }

  std::vector<Step> halvingSteps(int v) const {
    std::vector<Step> steps;
    int vlo = 0;
    int vhi = p_;
    for (int mask = p_ / 2; mask >= 1; mask /= 2) {
      const int mid = vlo + (vhi - vlo) / 2;
      const bool lower = (v & mask) == 0;
      Step s;
      s.partner = realOf(v ^ mask);
      s.send = lower ? span(mid, vhi) : span(vlo, mid);
      s.recv = lower ? span(vlo, mid) : span(mid, vhi);
      steps.push_back(s);
      if (lower) {
        vhi = mid;
      } else {
        vlo = mid;
      }
    }
    return steps;
  }

  std::vector<Step> doublingSteps(int v) const {
    std::vector<Step> steps;
    for (int mask = 1; mask < p_; mask *= 2) {
      const int mine = v & ~(mask - 1);
      const int theirs = (v ^ mask) & ~(mask - 1);
      steps.push_back(Step{realOf(v ^ mask), span(mine, mine + mask), span(theirs, theirs + mask)});
    }
    return steps;
  }

  Layout layoutOf(int rank) const {
    Layout l;
    const int v = vrankOf(rank);
    if (v < 0) {
      // The result comes back: allreduce and allgather by item (straight into the output when
      // zero-copy), reducescatter its output segment.
      if (!gathers()) {
        l.unfold = l.alloc(cps_);
      } else if (!zeroCopy_) {
        l.unfold = l.alloc(items_);
      }
      return l;
    }
    if (receivesFold(rank)) l.fold = l.alloc(foldItems());
    if (reduces()) {
      for (const Step& s : halvingSteps(v)) l.halving.push_back(l.alloc(s.recv.size()));
    }
    if (gathers() && !zeroCopy_ && p_ > 1) l.doubling = l.alloc(items_);
    return l;
  }
  const Layout& layout(int rank) const { return layouts_[static_cast<size_t>(rank)]; }

  // A wait on (peer, channel) whose first use in each slice is free (initial credit 1).
  void creditWait(OpWriter& ops, int peer, int channel) {
    builder_.credit(ops.rank(), peer, channel, 1);
    ops.wait(peer, channel);
  }

  void participant(int rank) {
    OpWriter ops = builder_.ops(rank);
    const int v = vrankOf(rank);
    const Layout& mine = layout(rank);
    const int odd = rank + 1;  // the folded partner, when receivesFold(rank)
    if (zeroCopy_ && !reduces()) {
      for (const Step& s : doublingSteps(v)) ops.signal(s.partner, kReady);
    }

    if (reduces()) {
      // Per item, the local chunks whose sum is this rank's partial sum.
      std::vector<std::vector<ChunkRef>> partial(static_cast<size_t>(items_));
      for (int x = 0; x < items_; ++x) partial[static_cast<size_t>(x)] = {inRef(x)};
      if (receivesFold(rank)) {
        for (int x = 0; x < items_; ++x) {
          ops.wait(odd, kFoldData);
          partial[static_cast<size_t>(x)].push_back(scratchRef(mine.fold + x));
        }
      }
      const std::vector<Step> steps = halvingSteps(v);
      for (size_t j = 0; j < steps.size(); ++j) {
        const Step& s = steps[j];
        // The partner keeps what this rank sends: its region of step j is indexed from s.send.lo.
        const int theirs = layout(s.partner).halving[j];
        if (!allreduce_) creditWait(ops, s.partner, kRsCredit);
        for (int k = 0; k < std::max(s.send.size(), s.recv.size()); ++k) {
          if (k < s.send.size()) {
            const int x = s.send.lo + k;
            ops.send(onRank(s.partner, scratchRef(theirs + k)), partial[static_cast<size_t>(x)]);
            ops.signal(s.partner, kRsData);
          }
          if (k < s.recv.size()) {
            ops.wait(s.partner, kRsData);
            partial[static_cast<size_t>(s.recv.lo + k)].push_back(scratchRef(mine.halving[j] + k));
          }
        }
      }
      // This rank's own items are complete: store them (the folded partner's go to it).
      for (int x = start(v); x < start(v + 1); ++x) {
        const std::vector<ChunkRef>& srcs = partial[static_cast<size_t>(x)];
        const int owner = allreduce_ ? rank : x / cps_;
        if (owner == rank) {
          ops.store(outRef(allreduce_ ? x : x - rank * cps_), srcs);
          continue;
        }
        ops.send(onRank(owner, scratchRef(layout(owner).unfold + x - owner * cps_)), srcs);
        ops.signal(owner, kUnfoldData);
      }
      if (!allreduce_) {
        for (const Step& s : steps) ops.signal(s.partner, kRsCredit);
      }
    } else {
      // Allgather: this rank's own segment, and its folded partner's from the scratch.
      ops.copy(outRef(rank * cps_, cps_), inRef(0, cps_));
      if (receivesFold(rank)) {
        for (int j = 0; j < cps_; ++j) {
          ops.wait(odd, kFoldData);
          ops.copy(outRef(odd * cps_ + j), scratchRef(mine.fold + j));
        }
      }
    }
    if (!gathers()) return;

    // Zero-copy allgather writes a partner's output before anything came from it: the partner
    // first says it is in the call. (Allreduce partners have already exchanged while halving.)
    const bool ready = zeroCopy_ && !allreduce_;
    for (const Step& s : doublingSteps(v)) {
      const bool credit = !zeroCopy_ && !allreduce_;
      if (ready) ops.wait(s.partner, kReady);
      if (credit) creditWait(ops, s.partner, kAgCredit);
      for (int k = 0; k < std::max(s.send.size(), s.recv.size()); ++k) {
        if (k < s.send.size()) {
          const int x = s.send.lo + k;
          const ChunkRef dst = zeroCopy_ ? outRef(x) : scratchRef(layout(s.partner).doubling + x);
          ops.put(onRank(s.partner, dst), outRef(x));
          ops.signal(s.partner, kAgData);
        }
        if (k < s.recv.size()) {
          const int y = s.recv.lo + k;
          ops.wait(s.partner, kAgData);
          if (!zeroCopy_) ops.copy(outRef(y), scratchRef(mine.doubling + y));
        }
      }
      if (credit) ops.signal(s.partner, kAgCredit);
    }
    if (!receivesFold(rank)) return;
    // Unfold: the odd partner gets every result item it does not hold yet.
    for (int x = 0; x < items_; ++x) {
      if (!allreduce_ && x / cps_ == odd) continue;  // its own allgather segment
      const ChunkRef dst = zeroCopy_ ? outRef(x) : scratchRef(layout(odd).unfold + x);
      ops.put(onRank(odd, dst), outRef(x));
      ops.signal(odd, kUnfoldData);
    }
  }

  // The odd rank of a pair: hand the input to the even partner, take the result back.
  void foldedRank(int rank) {
    OpWriter ops = builder_.ops(rank);
    const int even = rank - 1;
    const Layout& mine = layout(rank);
    for (int x = 0; x < foldItems(); ++x) {
      ops.put(onRank(even, scratchRef(layout(even).fold + x)), inRef(x));
      ops.signal(even, kFoldData);
    }
    if (params_.collective == Collective::kAllGather) {
      ops.copy(outRef(rank * cps_, cps_), inRef(0, cps_));
    }
    // Reducescatter returns this rank's segment only; the others return the whole row.
    const bool segmentOnly = !gathers();
    for (int x = 0; x < (segmentOnly ? cps_ : items_); ++x) {
      if (!allreduce_ && !segmentOnly && x / cps_ == rank) continue;
      ops.wait(even, kUnfoldData);
      if (!zeroCopy_) ops.copy(outRef(x), scratchRef(mine.unfold + x));
    }
  }

  GenParams params_;
  int n_;
  int p_;
  int extra_;
  int pipeline_;
  bool allreduce_;
  PlanBuilder builder_;
  int cps_ = 1;
  int items_ = 1;
  bool zeroCopy_ = false;
  std::vector<Layout> layouts_;
};

}  // namespace

Result generateRhd(const GenParams& params, Plan* out) {
  const Collective c = params.collective;
  if (c != Collective::kAllReduce && c != Collective::kReduceScatter &&
      c != Collective::kAllGather) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm rhd generates allreduce, reducescatter and allgather, not %s",
                    collectiveName(c));
  }
  if (params.nranks < 1 || params.nranks > kMaxPlanRanks) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm rhd: nranks %d is outside 1..%d", params.nranks,
                    kMaxPlanRanks);
  }
  if (params.workers < 1 || params.pipeline < 0) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm rhd: workers %d must be >= 1 and pipeline %d >= 0 (0: default)",
                    params.workers, params.pipeline);
  }
  int p = 1;
  while (p * 2 <= params.nranks) p *= 2;
  // Allreduce cuts its segment into p * pipeline chunks.
  const int rowChunks = c == Collective::kAllReduce ? p : 1;
  const int pipeline =
      std::max(1, std::min(params.pipeline > 0 ? params.pipeline : kDefaultPipeline,
                           kMaxChunksPerSegment / rowChunks));
  GenParams named = params;
  named.algorithm = "rhd";
  if (params.nranks == 1) {
    singleRankPlan(named, pipeline, out);
  } else {
    Rhd(std::move(named), pipeline).generate(out);
  }
  return tsrSuccess;
}

}  // namespace tessera
