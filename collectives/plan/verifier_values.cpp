// Symbolic chunk values of the verifier (verifier_values.hpp).
#include "collectives/plan/verifier_values.hpp"

#include <algorithm>

#include "core/status.hpp"

namespace tessera::verifier {

void ValueTable::init(int nranks, int64_t inputChunks, int32_t chunksPerSegment) {
  inputChunks_ = inputChunks;
  values_.clear();
  values_.reserve(static_cast<size_t>(2 * nranks * inputChunks));
  for (int r = 0; r < nranks; ++r) {
    for (int64_t c = 0; c < inputChunks; ++c) {
      Value leaf;
      leaf.contrib.push_back(key(r, c));
      leaf.canonical = r == 0;
      leaf.raw = true;
      leaf.position = static_cast<int32_t>(c % chunksPerSegment);
      values_.push_back(leaf);
      leaf.raw = false;
      values_.push_back(std::move(leaf));
    }
  }
  entries_ = values_.size();
}

bool ValueTable::extendsChain(const Value& acc, const Value& leaf) {
  if (!acc.canonical || leaf.contrib.size() != 1) return false;
  uint64_t last = acc.contrib.back();  // the highest rank of the chain
  uint64_t next = leaf.contrib[0];
  return keyRank(next) == keyRank(last) + 1 && keyChunk(next) == keyChunk(last);
}

int32_t ValueTable::combine(const std::vector<int32_t>& srcs, bool* doubled, bool* canonical) {
  *doubled = false;
  *canonical = true;
  Value acc = values_[static_cast<size_t>(srcs[0])];
  acc.raw = false;
  std::vector<uint64_t> merged;
  for (size_t i = 1; i < srcs.size(); ++i) {
    const Value& v = values_[static_cast<size_t>(srcs[i])];
    bool chain = extendsChain(acc, v) || extendsChain(v, acc);
    merged.clear();
    merged.reserve(acc.contrib.size() + v.contrib.size());
    size_t a = 0, b = 0;
    while (a < acc.contrib.size() || b < v.contrib.size()) {
      if (b == v.contrib.size() || (a < acc.contrib.size() && acc.contrib[a] < v.contrib[b])) {
        merged.push_back(acc.contrib[a++]);
      } else if (a == acc.contrib.size() || v.contrib[b] < acc.contrib[a]) {
        merged.push_back(v.contrib[b++]);
      } else {
        *doubled = true;  // keep one copy and go on; the caller reports it
        merged.push_back(acc.contrib[a++]);
        ++b;
      }
    }
    acc.contrib.swap(merged);
    acc.canonical = chain;
    if (v.position != acc.position) acc.position = kMixedPosition;
    if (!chain) *canonical = false;
  }
  entries_ += acc.contrib.size();
  values_.push_back(std::move(acc));
  return static_cast<int32_t>(values_.size() - 1);
}

std::string ValueTable::describe(const std::vector<uint64_t>& contrib) {
  constexpr size_t kShown = 6;
  std::string s = "{";
  for (size_t i = 0; i < contrib.size() && i < kShown; ++i) {
    if (i > 0) s += ", ";
    s += strprintf("rank %d chunk %lld", keyRank(contrib[i]),
                   static_cast<long long>(keyChunk(contrib[i])));
  }
  if (contrib.size() > kShown) s += strprintf(", ... (%zu in all)", contrib.size());
  return s + "}";
}

}  // namespace tessera::verifier
