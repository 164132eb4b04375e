// The alpha-beta cost model: one closed form per family and collective.
//
// Notation (every formula below): B = TuneInput::bytes, which is the size nccl-tests reports:
// the per-rank buffer for allreduce, broadcast and reduce, and the larger of the two buffers
// for reducescatter (input, n blocks), allgather (output, n blocks) and alltoall (n blocks).
// n = ranks, H = hosts, m = most ranks on one host, P = pipeline (pieces per step).
// A link L has latency a_L (alphaUs) and bandwidth b_L (betaGBs, as bytes per microsecond);
// within a host L = intraHost (i; device calls whose GPUs only PCIe joins, TuneInput::devicePcie:
// devicePcie), between hosts L = interHost (e). The inter-host bandwidth is
// the host's: k ranks of one host crossing at once get b_e / k each. Device calls: e is one NIC
// (deviceNet) and the host has N of them (TuneInput::nicsPerHost, rails): k crossing ranks get
// b_e / ceil(k / N) each. g = reduction throughput (gammaGBs; device calls: deviceGammaGBs, the
// GPU's memory); c = local copy throughput (device calls: deviceCopyGBs); o = call overhead,
// added to every family. Device calls price the ring as TuneInput::workers concurrent rings.
// A staged call through a scratch (TuneInput::scratchBytes) runs once per slice: I =
// ceil(segment / slice) calls of B / I each.
// Staged plans (not zero-copy) pay a copy at c where data lands in scratch (s = c below); the
// zero-copy forms (hasZeroCopyForm) put into or read from user buffers directly (s = 0).
// h = kHalfBandwidthBytes: the link time each piece beyond the first wastes.
//
// Building blocks:
//   overlapStep(L, tx, pr): one step moving data in tx and processing it in pr, in P pieces
//     that overlap transfer and processing: a + (P-1)(a + h/b) + max(tx, pr) + min(tx, pr)/P;
//     spread over W concurrent streams (the device ring's rings, one per CTA), each stream's
//     pieces follow one another: a + (ceil(P/W)-1)(a + h/b) + max(tx, pr) + min(tx, pr)/P
//   concurrent(S, D, L, r): S dependent steps in which every rank moves D bytes over L and
//     processes them at rate r (reduce: g, copy-out: s, none: 0): S overlapStep(D/b, D/r)
//   pipeline: pieces of d = B/P crossing a series of stages; the first piece pays every stage
//     (a + tx + pr each), the others follow one interval apart, the interval being the busiest
//     stage's (or resource's) time per piece plus a + h/b: fill + (P-1) interval.
// All are increasing in B, so every family's time grows with the message size.
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "collectives/tuner/ll_limits.hpp"

namespace tessera {
namespace {

struct Link {
  double alpha = 1;    // us
  double bytesUs = 1;  // bytes per us
};

Link linkOf(const TunerParams& p, TransportKind kind) {
  const LinkModel& m = p.links[static_cast<size_t>(kind)];
  return Link{m.alphaUs, m.betaGBs * 1e3};  // 1 GB/s = 1e3 bytes per microsecond
}

// The link between two ranks of a host: the transport's, or PCIe where a device call's GPUs have
// no NVLink between them (TuneInput::devicePcie).
Link intraLinkOf(const TunerParams& p, const TuneInput& in) {
  if (in.deviceExecutor && in.devicePcie)
    return Link{p.devicePcie.alphaUs, p.devicePcie.betaGBs * 1e3};
  return linkOf(p, in.intraHost);
}

Link shared(Link l, int streams) {
  l.bytesUs /= std::max(streams, 1);
  return l;
}

// k streams leaving a host over its `nics` NICs (one per stream while they last): each NIC
// carries ceil(k / nics) of them.
Link overNics(Link l, int streams, int nics) {
  const int n = std::max(nics, 1);
  return shared(l, (std::max(streams, 1) + n - 1) / n);
}

double perUs(double bytes, double rate) { return rate > 0 ? bytes / rate : 0.0; }
double pieceWaste(const Link& l) { return l.alpha + kHalfBandwidthBytes / l.bytesUs; }

double overlapStep(const Link& l, double tx, double pr, int pieces, int streams = 1) {
  const int serial = (pieces + streams - 1) / std::max(streams, 1);
  return l.alpha + (serial - 1) * pieceWaste(l) + std::max(tx, pr) + std::min(tx, pr) / pieces;
}

double concurrent(int steps, double bytes, int pieces, const Link& l, double rate,
                  int streams = 1) {
  if (steps <= 0) return 0;
  return steps * overlapStep(l, bytes / l.bytesUs, perUs(bytes, rate), pieces, streams);
}

// The pipeline block: stages are added in order, each `count` times.
struct Pipe {
  double fill = 0, interval = 0;
  void stage(int count, const Link& l, double tx, double pr) {
    if (count <= 0) return;
    fill += count * (l.alpha + tx + pr);
    interval = std::max(interval, pieceWaste(l) + std::max(tx, pr));
  }
  double total(int pieces) const { return fill + (pieces - 1) * interval; }
};

int ceilLog2(int n) {
  return n <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1)));
}

struct Model {
  const TuneInput& in;
  const HostLayout& hl;
  Link intra, inter;  // inter: the host's link (host calls) or one NIC (device calls)
  double g, s;        // reduce rate; copy rate of staged plans (0: zero-copy, no copy)
  int n, p;
  double b;
  int nics = 1;  // NICs the host's crossing streams spread over

  // The link of a step in which every rank r talks to r + dist (mod n): within the host when no
  // pair crosses, else the inter-host link shared by the busiest host's crossing ranks.
  Link stepLink(int dist) const { return stepLink(dist, 1); }
  // The same when the step's bytes travel in `streams` rings at once (the device ring's workers,
  // which ringOrders rotates within each host so that they leave it from different ranks): the
  // host's crossing streams multiply, each carrying 1/streams of the bytes.
  Link stepLink(int dist, int streams) const {
    if (hl.hosts < 2) return intra;
    std::array<uint16_t, kMaxPlanRanks> crossing{};  // per host
    int busiest = 0;
    for (int r = 0; r < n; ++r)
      if (hl.crosses(r, (r + dist) % n)) {
        uint16_t& k = crossing[static_cast<size_t>(hl.hostOf[static_cast<size_t>(r)])];
        busiest = std::max(busiest, static_cast<int>(++k));
      }
    if (busiest == 0) return intra;
    Link l = overNics(inter, busiest * streams, nics);
    l.bytesUs *= streams;
    return l;
  }

  // ring: reduce-scatter then all-gather around the ring, 2(n-1) steps of B/n (allreduce);
  // reducescatter and allgather are one half each:
  //   allreduce concurrent(n-1, B/n, g) + concurrent(n-1, B/n, s); reducescatter the first term;
  //   allgather the second.
  // broadcast and reduce are a pipelined chain of n-1 hops (every ring edge but the one into
  // the root, resp. out of it), each hop taking a piece at the edge's link then copying (s) or
  // reducing (g) it.
  double ring() const {
    // The device ring: a ring per CTA (TuneInput::workers), min(W, P) streams.
    const int w = in.deviceExecutor ? std::min(std::max(in.workers, 1), p) : 1;
    Link l = stepLink(1, w);
    double blk = b / n;
    switch (in.collective) {
      case Collective::kAllReduce:
        return concurrent(n - 1, blk, p, l, g, w) + concurrent(n - 1, blk, p, l, s, w);
      case Collective::kReduceScatter: return concurrent(n - 1, blk, p, l, g, w);
      case Collective::kAllGather: return concurrent(n - 1, blk, p, l, s, w);
      case Collective::kBroadcast:
      case Collective::kReduce: {
        double rate = in.collective == Collective::kReduce ? g : s, d = b / p;
        int unused = in.collective == Collective::kBroadcast ? (in.root + n - 1) % n : in.root;
        Pipe pipe;
        for (int r = 0; r < n; ++r) {
          if (r == unused) continue;
          const Link& hop = hl.crosses(r, (r + 1) % n) ? inter : intra;
          pipe.stage(1, hop, d / hop.bytesUs, perUs(d, rate));
        }
        return pipe.total(p);
      }
      default: return -1;
    }
  }

  // tree (allreduce): two binary trees of depth ceil(log2 n), half the data each, reduce up and
  // broadcast down at once, so a piece of d = B/P travels 2 ceil(log2 n) hops; a rank inner in
  // one tree takes d/2 from each of two children and d/2 from its parent in the other (1.5 d
  // per link), reduces on the way up and copies out on the way down:
  //   pipeline of 2 ceil(log2 n) stages (tx = 1.5 d/b, pr = d/g + d/s)
  double tree() const {
    if (in.collective != Collective::kAllReduce) return -1;
    Link l = stepLink(1);
    double d = b / p;
    Pipe pipe;
    pipe.stage(2 * ceilLog2(n), l, 1.5 * d / l.bytesUs, perUs(d, g) + perUs(d, s));
    return pipe.total(p);
  }

  // rhd: q = 2^floor(log2 n), k = log2 q. Halving: step j = 1..k exchanges B/2^j with the
  // partner at distance q/2^j (the farthest first) and reduces it; doubling mirrors it with
  // copies (s). Ranks beyond q fold into a neighbour first (B, reduced) and get the result at
  // the end (B, copied); reducescatter unfolds only B/n and allgather folds only B/n:
  //   allreduce      sum_j [concurrent(1, B/2^j, g) + concurrent(1, B/2^j, s)] + fold + unfold
  //   reducescatter  sum_j concurrent(1, B/2^j, g) + fold + concurrent(1, B/n, 0)
  //   allgather      sum_j concurrent(1, B/2^j, s) + concurrent(1, B/n, 0) + unfold
  double rhd() const {
    int q = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
    int k = static_cast<int>(std::countr_zero(static_cast<unsigned>(q)));
    double halving = 0, doubling = 0;
    for (int j = 1; j <= k; ++j) {
      Link l = stepLink(q >> j);
      double d = b / static_cast<double>(1 << j);
      halving += concurrent(1, d, p, l, g);
      doubling += concurrent(1, d, p, l, s);
    }
    bool extra = q < n;
    Link f = extra ? stepLink(1) : intra;  // the first 2(n - q) ranks pair up
    double fold = extra ? concurrent(1, b, p, f, g) : 0;
    double unfold = extra ? concurrent(1, b, p, f, s) : 0;
    double small = extra ? concurrent(1, b / n, 1, f, 0) : 0;
    switch (in.collective) {
      case Collective::kAllReduce: return halving + doubling + fold + unfold;
      case Collective::kReduceScatter: return halving + fold + small;
      case Collective::kAllGather: return doubling + small + unfold;
      default: return -1;
    }
  }

  // The time for one rank to take X bytes from each of its peers: its own host's over the
  // intra-host link, the others' over the inter-host link that the host's m ranks share.
  double fanIn(double bytes) const {
    double local = (hl.maxLocal - 1) * bytes / intra.bytesUs;
    double remote = (n - hl.maxLocal) * bytes / overNics(inter, hl.maxLocal, nics).bytesUs;
    return local + remote;
  }
  Link peerLink() const { return hl.hosts > 1 ? inter : intra; }

  // oneshot, one step with every peer at once (staged: the data lands in scratch first, one
  // pass at s):
  //   allreduce, reduce  [B/s] + overlapStep(fanIn(B), (n-1) B/g)   each rank (the root)
  //                                                                  combines every input
  //   allgather          [B/(n s)] + overlapStep(fanIn(B/n), [(n-1) B/(n s)])  (staged: the
  //                                                  n-1 blocks are copied out of the scratch)
  //   broadcast          [B/s] + overlapStep(fanIn(B), 0)            the root serves n-1 peers
  double oneShot() const {
    Link l = peerLink();
    switch (in.collective) {
      case Collective::kAllReduce:
      case Collective::kReduce: return perUs(b, s) + overlapStep(l, fanIn(b), (n - 1) * b / g, p);
      case Collective::kAllGather:
        return perUs(b / n, s) + overlapStep(l, fanIn(b / n), perUs((n - 1) * b / n, s), p);
      case Collective::kBroadcast: return perUs(b, s) + overlapStep(l, fanIn(b), 0, p);
      default: return -1;
    }
  }

  // twoshot: a direct reduce-scatter, each rank taking its block (B/n) from the n-1 peers and
  // reducing it in rank order; allreduce then spreads the n-1 reduced blocks directly:
  //   reducescatter  [B/s] + overlapStep(fanIn(B/n), (n-1)(B/n)/g)
  //   allreduce      that + overlapStep(fanIn(B/n), (n-1)(B/n)/s)
  double twoShot() const {
    double blk = b / n;
    Link l = peerLink();
    double rs = perUs(b, s) + overlapStep(l, fanIn(blk), (n - 1) * blk / g, p);
    switch (in.collective) {
      case Collective::kReduceScatter: return rs;
      case Collective::kAllReduce:
        return rs + overlapStep(l, fanIn(blk), perUs((n - 1) * blk, s), p);
      default: return -1;
    }
  }

  // pairwise (alltoall): n-1 steps, step t exchanging one block of B/n with ranks r +- t: the
  // m-1 partners on the rank's host over the intra-host link, the n-m others over the inter-host
  // link shared by the host's m ranks:
  //   concurrent(m-1, B/n, intra, s) + concurrent(n-m, B/n, inter/m, s)
  double pairwise() const {
    if (in.collective != Collective::kAllToAll) return -1;
    int local = hl.hosts > 1 ? hl.maxLocal : n;
    return concurrent(local - 1, b / n, p, intra, s) +
           concurrent(n - local, b / n, p, overNics(inter, local, nics), s);
  }

  double hier() const;
};

// hier (H > 1), the generator's leader scheme: within a host every rank talks only to its
// leader, and only leaders cross hosts (one stream per host pair). Pieces of d = B/P flow
//   up    non-leaders put their share to the leader, which reduces the m-1 of them (u, ug)
//   ring  H-1 (reduce-scatter) and H-1 (all-gather) steps of d/H between leaders, or for
//         broadcast / reduce a chain of H-1 leader hops of d (x per step, xg reduced, xs copied)
//   down  the leader puts each non-leader its share (m-1 of them, w), which copies it out (ws)
// The first piece pays every stage; later pieces follow at the pace of the busiest resource:
// the leader's processor (ug/g + xg/g + xs/s + w/b_i), its inter-host link (steps x/b_e) or a
// non-leader (u/b_i + ws/s), plus a + h/b of the inter-host link.
//   allreduce      u = d, ug = (m-1)d, 2(H-1) steps, x = d/H, xg = xs = (H-1)d/H, w = (m-1)d, ws =
//   d reducescatter  u = d, ug = (m-1)d, H-1 steps, x = d/H, xg = (H-1)d/H, w = (m-1)d/n, ws = d/n
//   allgather      u = d/n, H-1 steps, x = d/H, xs = (H-1)d/H, w = (m-1)(n-1)d/n, ws = d
//   broadcast      H-1 hops, x = d, xs = d, w = (m-1)d, ws = d
//   reduce         u = d, ug = (m-1)d, H-1 hops, x = d, xg = d
double Model::hier() const {
  if (hl.hosts < 2) return -1;
  struct Flow {
    double u = 0, ug = 0;          // up: bytes a non-leader sends, bytes the leader reduces
    int steps = 0;                 // leader ring steps or chain hops
    double x = 0, xg = 0, xs = 0;  // bytes per step; bytes reduced, copied over all steps
    double w = 0, ws = 0;          // down: bytes the leader sends, bytes a non-leader copies
  };
  const int m = hl.maxLocal, h = hl.hosts;
  const double d = b / p, share = d / h, rest = (h - 1) * share;
  Flow f;
  switch (in.collective) {
    case Collective::kAllReduce:
      f = {.u = d,
           .ug = (m - 1) * d,
           .steps = 2 * (h - 1),
           .x = share,
           .xg = rest,
           .xs = rest,
           .w = (m - 1) * d,
           .ws = d};
      break;
    case Collective::kReduceScatter:
      f = {.u = d,
           .ug = (m - 1) * d,
           .steps = h - 1,
           .x = share,
           .xg = rest,
           .w = (m - 1) * d / n,
           .ws = d / n};
      break;
    case Collective::kAllGather:
      f = {.u = d / n,
           .steps = h - 1,
           .x = share,
           .xs = rest,
           .w = (m - 1) * (n - 1) * d / n,
           .ws = d};
      break;
    case Collective::kBroadcast:
      f = {.steps = h - 1, .x = d, .xs = d, .w = (m - 1) * d, .ws = d};
      break;
    case Collective::kReduce:
      f = {.u = d, .ug = (m - 1) * d, .steps = h - 1, .x = d, .xg = d};
      break;
    default: return -1;
  }
  if (m == 1) f.u = f.ug = f.w = f.ws = 0;  // one rank per host: only the leaders' ring or chain
  double up = f.u > 0 ? intra.alpha + f.u / intra.bytesUs + f.ug / g : 0;
  double ring = f.steps * (inter.alpha + f.x / inter.bytesUs) + perUs(f.xg, g) + perUs(f.xs, s);
  double down = f.w > 0 ? intra.alpha + f.w / intra.bytesUs + perUs(f.ws, s) : 0;
  double leader = f.ug / g + perUs(f.xg, g) + perUs(f.xs, s) + f.w / intra.bytesUs;
  double nic = f.steps * f.x / inter.bytesUs;
  double member = f.u / intra.bytesUs + perUs(f.ws, s);
  double interval = pieceWaste(inter) + std::max({leader, nic, member});
  return up + ring + down + (p - 1) * interval;
}

}  // namespace

size_t llPayloadBytes(const TuneInput& in) {
  switch (in.collective) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return in.bytes / static_cast<size_t>(std::max(in.nranks, 1));
    default: return in.bytes;
  }
}

// LL: one direct exchange (oneshot's pattern: allreduce and reduce reduce every rank's payload P
// in rank order, the others copy) in which data and flag travel in the same 8-byte line. The
// latency is half a Simple step's alpha (a Simple step is data, then the signal that covers it;
// an LL line is both), no staging copy (lines are read straight from the inbox), but every byte
// moved costs two (half of each line is flag):
//   allreduce, reduce    o + a/2 + fanIn(2 P) + (n-1) P/g      (P = B; the root's fan-in)
//   reducescatter        o + a/2 + fanIn(2 P) + (n-1) P/g      (P = B/n)
//   allgather, alltoall  o + a/2 + fanIn(2 P)                  (P = B/n)
//   broadcast            o + a/2 + fanIn(2 P)                  (P = B; the root serves n-1)
double llCostUs(const TunerParams& params, const TuneInput& in, const HostLayout& layout) {
  const TransportKind k = in.intraHost;
  const bool maps = k == TransportKind::kInproc || k == TransportKind::kShm ||
                    k == TransportKind::kCudaIpc || k == TransportKind::kP2p;
  const size_t payload = llPayloadBytes(in);
  if (!in.deviceExecutor || layout.hosts > 1 || !maps ||
      !exec::llSupports(static_cast<uint8_t>(in.collective), payload, layout.nranks))
    return -1;
  const Link l = intraLinkOf(params, in);
  const double p = static_cast<double>(payload), n = layout.nranks;
  const double wire = (n - 1) * 2 * p / l.bytesUs;
  const bool reduces = collectiveReduces(in.collective);
  const double reduce = reduces ? (n - 1) * p / (params.deviceGammaGBs * 1e3) : 0;
  return params.callOverheadUs + l.alpha / 2 + wire + reduce;
}

constexpr double kHostHalvingPenalty = 1.4;

double familyCostUs(const TunerParams& params, const TuneInput& in, const HostLayout& layout,
                    CostFamily family, int pipeline, bool zeroCopy, double sliceBytes) {
  Link intra = intraLinkOf(params, in);
  Link inter = layout.hosts > 1 ? linkOf(params, in.interHost) : intra;
  int nics = 1;
  if (in.deviceExecutor && layout.hosts > 1) {  // one NIC per link, the host's NICs as rails
    inter = Link{params.deviceNet.alphaUs, params.deviceNet.betaGBs * 1e3};
    nics = std::min(std::max(in.nicsPerHost, 1), layout.maxLocal);
  }
  // A local copy runs at host memory speed, or at the intra-host link's when that is faster
  // (device memory behind cuda_ipc / p2p); on the device executor, at the GPU's memory speed.
  double copy = in.deviceExecutor
                    ? params.deviceCopyGBs * 1e3
                    : std::max(linkOf(params, TransportKind::kInproc).bytesUs, intra.bytesUs);
  const double gamma = (in.deviceExecutor ? params.deviceGammaGBs : params.gammaGBs) * 1e3;
  // Cross-memory attach: every move of a zero-copy form within the host is a kernel copy.
  if (zeroCopy && in.crossMemory) {
    intra = Link{params.crossMemory.alphaUs, params.crossMemory.betaGBs * 1e3};
    if (layout.hosts < 2) inter = intra;
  }
  // A staged call of more than one slice runs as `iterations` calls of a slice each, every one
  // paying its steps' latencies (the ring's credits let a sender run a message ahead into the
  // next iteration, which this leaves out: it is charged as the others).
  double iterations = 1;
  if (!zeroCopy && sliceBytes > 0) {
    const bool blocks = in.collective == Collective::kAllGather ||
                        in.collective == Collective::kReduceScatter ||
                        in.collective == Collective::kAllToAll;
    const double segment = static_cast<double>(in.bytes) / (blocks ? layout.nranks : 1);
    iterations = std::max(1.0, std::ceil(segment / sliceBytes));
  }
  Model m{in,
          layout,
          intra,
          inter,
          gamma,
          zeroCopy ? 0.0 : copy,
          layout.nranks,
          std::max(pipeline, 1),
          static_cast<double>(in.bytes) / iterations,
          nics};
  double t = -1;
  switch (family) {
    case CostFamily::kRing: t = m.ring(); break;
    case CostFamily::kTree: t = m.tree(); break;
    case CostFamily::kRhd: t = m.rhd(); break;
    case CostFamily::kOneShot: t = m.oneShot(); break;
    case CostFamily::kTwoShot: t = m.twoShot(); break;
    case CostFamily::kPairwise: t = m.pairwise(); break;
    case CostFamily::kHier: t = m.hier(); break;
    case CostFamily::kUnknown: break;
  }
  if (t > 0) t *= iterations;
  // Measured, not modelled: on host memory the ring's and the direct plans' chunks stay in
  // cache between a rank's reduce and its next send, while rhd's halving steps and the trees'
  // pipelines move whole halves; all_reduce_perf on the 2-core CI machine class (4 thread ranks,
  // 64 MiB, same run) gave busbw ring 2.73, twoshot 2.91, rhd 1.93, tree 1.84 GB/s.
  bool hostMemory = in.intraHost == TransportKind::kInproc || in.intraHost == TransportKind::kShm;
  if (t > 0 && hostMemory && (family == CostFamily::kRhd || family == CostFamily::kTree))
    t *= kHostHalvingPenalty;
  return t < 0 ? -1 : params.callOverheadUs + t;
}

}  // namespace tessera
