// The tree family: double binary tree allreduce (as NCCL uses for latency-bound sizes).
//
// Two binary trees span the ranks. Tree 0 is an in-order tree over positions 0..n-1: the root of
// a range of positions is the one whose (position + 1) has the most trailing zero bits, so the
// even positions are exactly the leaves. Tree 1 is the same tree with every position moved to the
// next rank (position p holds rank (p + t) % n in tree t), which turns tree 0's leaves (even
// ranks) into tree 1's interior nodes and back: each rank forwards data in at most one tree, so
// both trees together keep every link busy without doubling any rank's traffic.
//
// Each tree carries half of the chunks (cps = 2 * pipeline): tree t owns chunks
// [t * pipeline, (t + 1) * pipeline). Per chunk, leaves put their input to their parent's
// scratch; interior nodes reduce their children's partials with their own input and send the sum
// up (reduceSend); the root reduces into its output, then the result flows down: each node puts
// its output chunk to its children, which copy it into their output. A node runs its reduce step
// for chunk k + lag before its broadcast step for chunk k, so a leaf keeps sending while the first
// chunks travel up and down; any lag is deadlock-free (both phases move one chunk at a time along
// the tree) and the lag only tunes overlap.
//
// Scratch: a rank has one slot per child (written by that child in the reduce phase) and one for
// its parent (written in the broadcast phase), shared by both trees since they use disjoint
// chunks. The next slice reuses every slot, yet no credits are needed: a chunk's round trip
// orders the reuse. A child writes its parent's slot for chunk k again only after it received
// the broadcast of chunk k of the previous slice, which the parent sends after reading that slot;
// the parent writes the child's broadcast slot for chunk k again only after the child's partial
// of chunk k of the new slice arrived, which the child sends after reading that slot.
//
// Zero-copy: the broadcast puts straight into the children's output (no copy); the
// child's wait for that data is also the handshake that keeps the parent's writes inside the
// child's call.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr int kDefaultPipeline = 4;
constexpr int kTrees = 2;
// Channels of tree t are kChannelsPerTree * t + one of these: a tree's signals never
// share a semaphore with the other tree's, even between the same two ranks.
constexpr int kChannelsPerTree = 2;
constexpr int kUpData = 0;    // child -> parent: a partial sum landed in the parent's scratch
constexpr int kDownData = 1;  // parent -> child: a result chunk landed at the child

// Scratch slots of a rank (compacted per rank to the ones it uses).
enum Slot { kFromChild0, kFromChild1, kFromParent, kSlotKinds };

struct BinaryTree {
  int root = 0;
  int height = 0;                         // edges from the root to the deepest leaf
  std::vector<int> parent;                // by rank; -1 at the root
  std::vector<int> slotAtParent;          // 0 or 1: which child of its parent the rank is
  std::vector<std::array<int, 2>> child;  // by rank; -1 where absent
};

int lowBit(int q) { return q & -q; }

// Builds the in-order subtree over positions [lo, hi] and returns its root position.
int buildRange(int lo, int hi, int depth, int shift, BinaryTree* tree) {
  const int n = static_cast<int>(tree->parent.size());
  // The position whose (p + 1) is divisible by the largest power of two in the range.
  int top = lo;
  for (int p = lo; p <= hi; ++p) {
    if (lowBit(p + 1) > lowBit(top + 1)) top = p;
  }
  const int rank = (top + shift) % n;
  tree->height = std::max(tree->height, depth);
  const std::array<std::array<int, 2>, 2> sides = {{{lo, top - 1}, {top + 1, hi}}};
  for (int side = 0; side < 2; ++side) {
    if (sides[side][0] > sides[side][1]) continue;
    const int childPos = buildRange(sides[side][0], sides[side][1], depth + 1, shift, tree);
    const int childRank = (childPos + shift) % n;
    tree->child[static_cast<size_t>(rank)][static_cast<size_t>(side)] = childRank;
    tree->parent[static_cast<size_t>(childRank)] = rank;
    tree->slotAtParent[static_cast<size_t>(childRank)] = side;
  }
  return top;
}

BinaryTree makeTree(int nranks, int shift) {
  BinaryTree tree;
  tree.parent.assign(static_cast<size_t>(nranks), -1);
  tree.slotAtParent.assign(static_cast<size_t>(nranks), 0);
  tree.child.assign(static_cast<size_t>(nranks), {-1, -1});
  tree.root = (buildRange(0, nranks - 1, 0, shift, &tree) + shift) % nranks;
  return tree;
}

class TreeAllReduce {
 public:
  TreeAllReduce(GenParams params, int pipeline)
      : params_(std::move(params)),
        pipeline_(pipeline),
        workers_(std::min(params_.workers, kTrees)),
        builder_(params_, kTrees * pipeline, workers_) {
    for (int t = 0; t < kTrees; ++t) trees_.push_back(makeTree(params_.nranks, t));
    assignSlots();
  }

  void generate(Plan* out) {
    int height = 0;
    for (const BinaryTree& tree : trees_) height = std::max(height, tree.height);
    // A chunk needs about 2 * height hops to come back down to a leaf.
    const int lag = std::min(pipeline_, 2 * height);
    for (int rank = 0; rank < params_.nranks; ++rank) {
      for (int step = 0; step < pipeline_ + lag; ++step) {
        for (int t = 0; t < kTrees; ++t) {
          if (step < pipeline_) reduceStep(rank, t, step);
        }
        for (int t = 0; t < kTrees; ++t) {
          if (step >= lag) broadcastStep(rank, t, step - lag);
        }
      }
    }
    builder_.finish(out);
  }

 private:
  // Gives each rank's used slots consecutive scratch segments.
  void assignSlots() {
    const size_t n = static_cast<size_t>(params_.nranks);
    segmentOf_.assign(n, {-1, -1, -1});
    for (size_t rank = 0; rank < n; ++rank) {
      std::array<bool, kSlotKinds> used = {false, false, false};
      for (const BinaryTree& tree : trees_) {
        used[kFromChild0] = used[kFromChild0] || tree.child[rank][0] >= 0;
        used[kFromChild1] = used[kFromChild1] || tree.child[rank][1] >= 0;
        used[kFromParent] = used[kFromParent] || (tree.parent[rank] >= 0 && !params_.zeroCopy);
      }
      int next = 0;
      for (int s = 0; s < kSlotKinds; ++s) {
        if (used[static_cast<size_t>(s)]) segmentOf_[rank][static_cast<size_t>(s)] = next++;
      }
      if (next > 0) builder_.useScratch(static_cast<int>(rank), next);
    }
  }

  int channel(int tree, int kind) const { return kChannelsPerTree * tree + kind; }
  int worker(int tree) const { return tree % workers_; }
  // The scratch chunk of `rank`'s slot `slot` that holds chunk `c`.
  ChunkRef slotRef(int rank, int slot, int c) const {
    const int seg = segmentOf_[static_cast<size_t>(rank)][static_cast<size_t>(slot)];
    return scratchRef(seg * builder_.cps() + c);
  }

  std::vector<int> childrenOf(const BinaryTree& tree, int rank) const {
    std::vector<int> kids;
    for (int k : tree.child[static_cast<size_t>(rank)]) {
      if (k >= 0) kids.push_back(k);
    }
    return kids;
  }

  // Chunk k of tree t: sum the children's partials with the input and pass it up.
  void reduceStep(int rank, int t, int k) {
    const BinaryTree& tree = trees_[static_cast<size_t>(t)];
    const int c = t * pipeline_ + k;
    OpWriter ops = builder_.ops(rank, worker(t));
    std::vector<ChunkRef> srcs = {inRef(c)};
    for (int side = 0; side < 2; ++side) {
      const int kid = tree.child[static_cast<size_t>(rank)][static_cast<size_t>(side)];
      if (kid < 0) continue;
      ops.wait(kid, channel(t, kUpData));
      srcs.push_back(slotRef(rank, kFromChild0 + side, c));
    }
    const int parent = tree.parent[static_cast<size_t>(rank)];
    if (parent >= 0) {
      const int slot = kFromChild0 + tree.slotAtParent[static_cast<size_t>(rank)];
      const ChunkRef dst = onRank(parent, slotRef(parent, slot, c));
      if (srcs.size() == 1) {
        ops.put(dst, srcs[0]);
      } else {
        ops.reduceSend(dst, srcs);
      }
      ops.signal(parent, channel(t, kUpData));
    } else if (srcs.size() == 1) {
      ops.copy(outRef(c), srcs[0]);  // a single rank
    } else {
      ops.reduce(outRef(c), srcs);
    }
  }

  // Chunk k of tree t: receive the result from the parent and pass it down.
  void broadcastStep(int rank, int t, int k) {
    const BinaryTree& tree = trees_[static_cast<size_t>(t)];
    const int c = t * pipeline_ + k;
    OpWriter ops = builder_.ops(rank, worker(t));
    const int parent = tree.parent[static_cast<size_t>(rank)];
    if (parent >= 0) {
      ops.wait(parent, channel(t, kDownData));
      if (!params_.zeroCopy) ops.copy(outRef(c), slotRef(rank, kFromParent, c));
    }
    for (int kid : childrenOf(tree, rank)) {
      const ChunkRef dst = params_.zeroCopy ? outRef(c) : slotRef(kid, kFromParent, c);
      ops.put(onRank(kid, dst), outRef(c));
      ops.signal(kid, channel(t, kDownData));
    }
  }

  GenParams params_;
  int pipeline_;
  int workers_;
  PlanBuilder builder_;
  std::vector<BinaryTree> trees_;
  std::vector<std::array<int, kSlotKinds>> segmentOf_;
};

}  // namespace

Result generateTree(const GenParams& params, Plan* out) {
  if (params.collective != Collective::kAllReduce) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm tree generates allreduce only, not %s",
                    collectiveName(params.collective));
  }
  if (params.nranks < 1 || params.nranks > kMaxPlanRanks) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm tree: nranks %d is outside 1..%d", params.nranks,
                    kMaxPlanRanks);
  }
  if (params.workers < 1 || params.pipeline < 0) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm tree: workers %d must be >= 1 and pipeline %d >= 0 (0: default)",
                    params.workers, params.pipeline);
  }
  const int pipeline = std::min(params.pipeline > 0 ? params.pipeline : kDefaultPipeline,
                                kMaxChunksPerSegment / kTrees);
  GenParams named = params;
  named.algorithm = "tree";
  if (params.nranks == 1) {
    singleRankPlan(named, kTrees * pipeline, out);
  } else {
    TreeAllReduce(std::move(named), pipeline).generate(out);
  }
  return tsrSuccess;
}

}  // namespace tessera
