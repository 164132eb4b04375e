// One random call of the cross-check: how it is drawn (the same way on every rank of a group)
// and how it reads in a report. Running it is crosscheck_run.cpp.
#include "mpi/crosscheck_coll.hpp"

#include <algorithm>
#include <string>

namespace tessera::test::crosscheck {
namespace {

constexpr size_t kMaxElems = 3000000;  // the largest buffer of a call, in elements

// Edge sizes (vector widths, slices) and primes weigh more than their share of the range.
size_t drawCount(Rng& rng) {
  static const std::vector<size_t> kEdges = {0,   1,   2,   3,    4,    5,    7,    8,   15,  16,
                                             17,  31,  32,  33,   63,   64,   65,   127, 128, 129,
                                             255, 256, 257, 1023, 1024, 1025, 4095, 4097};
  static const std::vector<size_t> kPrimes = {7919,   8191,   65521,  65537, 99991,
                                              131071, 262139, 524287, 786433};
  static const std::vector<size_t> kLarge = {1000003, 2999999, 2097152, 1048577};
  const uint64_t r = rng.below(100);
  if (r < 22) return rng.pick(kEdges);
  if (r < 47) return rng.below(4097);
  if (r < 65) return rng.below(70000);
  if (r < 78) return rng.pick(kPrimes);
  if (r < 88) return (size_t{1} << (10 + rng.below(11))) + rng.below(3) - 1;
  if (r < 97) return rng.below(600000);
  return rng.chance(0.5) ? rng.pick(kLarge) : rng.below(kMaxElems + 1);
}

// Places each rank's blocks in a random order with small gaps; returns the extent.
size_t layoutBlocks(Rng& rng, int n, const std::vector<size_t>& counts, size_t stride, size_t first,
                    std::vector<size_t>* displ) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  size_t at = 0;
  for (int k : order) {
    at += rng.below(4);
    const size_t idx = first + static_cast<size_t>(k) * stride;
    (*displ)[idx] = at;
    at += counts[idx];
  }
  return at;
}

}  // namespace

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool hasInPlace(Coll c) { return c <= Coll::kReduce; }

Shape shapeOf(const Call& c, int rank) {
  const auto n = static_cast<size_t>(c.nranks);
  switch (c.coll) {
    case Coll::kReduceScatter: return {c.count * n, c.count};
    case Coll::kAllGather: return {c.count, c.count * n};
    case Coll::kAllToAll: return {c.count * n, c.count * n};
    case Coll::kAllToAllv:
      return {c.a2aSendExtent[static_cast<size_t>(rank)],
              c.a2aRecvExtent[static_cast<size_t>(rank)]};
    case Coll::kSendRecv: {
      const int prev = (rank - c.shift + c.nranks) % c.nranks;
      return {c.count + static_cast<size_t>(rank % 3), c.count + static_cast<size_t>(prev % 3)};
    }
    default: return {c.count, c.count};
  }
}

const char* collName(Coll c) {
  static const char* kNames[] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                 "reduce",    "alltoall",      "alltoallv", "sendrecv"};
  return kNames[static_cast<int>(c)];
}

Call drawCall(Rng& rng, int nranks, uint64_t dataSeed) {
  // Weights: allreduce, reducescatter, allgather, broadcast, reduce, alltoall, alltoallv, sendrecv.
  static const int kWeights[] = {20, 14, 14, 12, 12, 10, 9, 9};
  Call c;
  c.nranks = nranks;
  c.dataSeed = dataSeed;
  int w = static_cast<int>(rng.below(100));
  int k = 0;
  while (w >= kWeights[k]) w -= kWeights[k++];
  c.coll = static_cast<Coll>(k);
  c.type = &rng.pick(allTypes());
  c.op = reduces(c.coll) ? static_cast<OpKind>(rng.below(6)) : OpKind::kSum;
  const auto n = static_cast<size_t>(nranks);
  c.count = drawCount(rng);
  // Keep the largest buffer within kMaxElems.
  const size_t blocks = c.coll == Coll::kReduceScatter || c.coll == Coll::kAllGather ||
                                c.coll == Coll::kAllToAll || c.coll == Coll::kAllToAllv
                            ? n
                            : 1;
  if (c.count * blocks > kMaxElems - 8) c.count = c.count / blocks;
  if (c.count > kMaxElems - 8) c.count = kMaxElems - 8;
  c.inPlace = hasInPlace(c.coll) && rng.chance(0.5);
  c.grouped = c.coll == Coll::kSendRecv || rng.chance(0.1);
  c.nullOthers = rng.chance(0.5);
  c.zeroCopy = rng.chance(0.25);
  c.root = static_cast<int>(rng.below(n));
  c.shift = static_cast<int>(rng.below(n));
  c.offIn = rng.chance(0.5) ? 0 : rng.below(4);
  c.offOut = rng.chance(0.5) ? 0 : rng.below(4);
  c.scalar = randomScalar(*c.type, rng);
  if (c.coll == Coll::kAllToAllv) {
    c.a2aCount.resize(n * n);
    for (size_t& x : c.a2aCount) x = rng.chance(0.2) ? 0 : rng.below(c.count + 1);
    c.a2aSendDispl.assign(n * n, 0);
    c.a2aRecvDispl.assign(n * n, 0);
    c.a2aSendExtent.resize(n);
    c.a2aRecvExtent.resize(n);
    for (size_t p = 0; p < n; ++p) {
      c.a2aSendExtent[p] = layoutBlocks(rng, nranks, c.a2aCount, 1, p * n, &c.a2aSendDispl);
      c.a2aRecvExtent[p] = layoutBlocks(rng, nranks, c.a2aCount, n, p, &c.a2aRecvDispl);
    }
  }
  return c;
}

std::string describeCall(const Call& c) {
  std::string s = std::string(collName(c.coll)) + " " + c.type->name;
  if (reduces(c.coll)) s += std::string(" ") + opName(c.op);
  if (reduces(c.coll) && c.op == OpKind::kPreMulSum) {
    const uint64_t bits = c.scalar;
    s += "(" + showElement(*c.type, &bits, 0) + ")";
  }
  s += " count " + std::to_string(c.count);
  if (hasInPlace(c.coll)) s += c.inPlace ? " in-place" : " out-of-place";
  if (c.coll == Coll::kBroadcast || c.coll == Coll::kReduce) {
    s += " root " + std::to_string(c.root);
    if (c.nullOthers && !c.inPlace) s += " (NULL buffers off the root)";
  }
  if (c.coll == Coll::kSendRecv) s += " shift " + std::to_string(c.shift);
  if (c.coll == Coll::kAllToAllv) {
    s += " counts [";
    for (size_t i = 0; i < c.a2aCount.size(); ++i)
      s += (i ? " " : "") + std::to_string(c.a2aCount[i]);
    s += "]";
  }
  if (c.grouped) s += " grouped";
  if (c.zeroCopy) s += " registered";
  s += " offsets " + std::to_string(c.offIn) + "/" + std::to_string(c.offOut);
  return s;
}

std::vector<Call> drawCalls(Rng& rng, int nranks, uint64_t dataSeed) {
  std::vector<Call> calls = {drawCall(rng, nranks, dataSeed)};
  // Now and then two or three calls in one group, issued together at its end.
  if (rng.chance(0.1)) {
    const uint64_t more = 1 + rng.below(2);
    for (uint64_t k = 1; k <= more; ++k)
      calls.push_back(drawCall(rng, nranks, mix64(dataSeed + k)));
    for (Call& c : calls) c.grouped = true;
  }
  return calls;
}

std::string describeCalls(const std::vector<Call>& calls) {
  if (calls.size() == 1) return describeCall(calls[0]);
  std::string s = "a group of " + std::to_string(calls.size()) + " calls:";
  for (size_t k = 0; k < calls.size(); ++k)
    s += " [" + std::to_string(k) + "] " + describeCall(calls[k]) +
         (k + 1 < calls.size() ? ";" : "");
  return s;
}

}  // namespace tessera::test::crosscheck
