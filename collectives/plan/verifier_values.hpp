// Symbolic chunk values of the verifier (internal to collectives/plan).
//
// A value is the set of (rank, input chunk) contributions combined into a chunk, plus two flags:
//  - raw: the untouched input of a rank (the pre-op not applied). Only the initial content of an
//    input chunk is raw; every value an op stores is not (loads through an input ref apply the
//    pre-op).
//  - canonical: the value is a left-to-right chain x(0) op x(1) op ... op x(k) of the
//    contributions of ranks 0..k to one chunk, each step appending the next rank's single
//    contribution. A leaf of rank 0 is canonical (k = 0). A step may put the new contribution on
//    either side (a op b == b op a exactly for the IEEE sum, product, min and max), so
//    reduce(x1, x0) is canonical too, but (x0 op x1) op (x2 op x3) is not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::verifier {

inline constexpr int32_t kUninit = -1;  // never written
inline constexpr int32_t kPoison = -2;  // computed from an uninitialised read

struct Value {
  std::vector<uint64_t> contrib;  // sorted keys (rank << 32 | chunk)
  bool raw = false;
  bool canonical = false;
  // The chunk position (input chunk % chunksPerSegment) shared by every contribution, or
  // kMixedPosition. A user chunk may only hold data of its own position (plan.hpp: executors size
  // user chunks by position); a scratch slot may hold any.
  int32_t position = 0;
};
inline constexpr int32_t kMixedPosition = -1;

class ValueTable {
 public:
  // Creates the leaves: for every rank and input chunk a raw and a processed value.
  void init(int nranks, int64_t inputChunks, int32_t chunksPerSegment);
  int32_t rawLeaf(int rank, int64_t chunk) const {
    return static_cast<int32_t>(2 * (rank * inputChunks_ + chunk));
  }
  // The value loaded through an input ref from a raw leaf (the pre-op applied).
  static int32_t processed(int32_t rawId) { return rawId + 1; }
  const Value& get(int32_t id) const { return values_[static_cast<size_t>(id)]; }
  // srcs[0] op srcs[1] op ... (ids >= 0). *doubled: some contribution appears twice;
  // *canonical: every step appended the next rank's contribution (see above).
  int32_t combine(const std::vector<int32_t>& srcs, bool* doubled, bool* canonical);
  // Contributions stored over all values (bounds the verifier's memory).
  uint64_t entries() const { return entries_; }

  static uint64_t key(int rank, int64_t chunk) {
    return (static_cast<uint64_t>(rank) << 32) | static_cast<uint64_t>(chunk);
  }
  static int keyRank(uint64_t k) { return static_cast<int>(k >> 32); }
  static int64_t keyChunk(uint64_t k) { return static_cast<int64_t>(k & 0xffffffffu); }
  // "{rank 0 chunk 3, rank 1 chunk 3}", shortened when long.
  static std::string describe(const std::vector<uint64_t>& contrib);

 private:
  // Whether joining `acc` (canonical) with leaf `leaf` extends the chain.
  static bool extendsChain(const Value& acc, const Value& leaf);

  int64_t inputChunks_ = 0;
  std::vector<Value> values_;
  uint64_t entries_ = 0;
};

}  // namespace tessera::verifier
