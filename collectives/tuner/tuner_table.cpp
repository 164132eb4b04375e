#include "collectives/tuner/tuner_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/hash.hpp"

namespace tessera {

const MeasuredSet* MeasuredTable::find(Collective c, int nranks, TransportKind transport) const {
  for (const MeasuredSet& s : sets)
    if (s.collective == c && s.nranks == nranks && s.transport == transport) return &s;
  return nullptr;
}

uint64_t MeasuredTable::digest() const {
  std::string bytes;
  for (const MeasuredSet& s : sets) {
    bytes += strprintf("%d/%d/%d:", static_cast<int>(s.collective), s.nranks,
                       static_cast<int>(s.transport));
    for (const MeasuredPoint& p : s.points) {
      bytes += strprintf("%llu{", static_cast<unsigned long long>(p.bytes));
      // In name order: a file's objects may list families in any order.
      std::vector<const MeasuredFamily*> order;
      for (const MeasuredFamily& f : p.families) order.push_back(&f);
      std::sort(order.begin(), order.end(), [](const MeasuredFamily* a, const MeasuredFamily* b) {
        return a->family < b->family;
      });
      for (const MeasuredFamily* f : order)
        bytes += strprintf("%s=%.17g,", f->family.c_str(), f->us);
      bytes += strprintf("x%.17g}", p.crossUs);
    }
  }
  return fnv1a64(bytes.data(), bytes.size());
}

const MeasuredPoint* nearestPoint(const MeasuredSet& set, uint64_t bytes) {
  const MeasuredPoint* best = nullptr;
  double bestDist = 0;
  double x = std::log2(static_cast<double>(bytes < 1 ? 1 : bytes));
  for (const MeasuredPoint& p : set.points) {
    double d = std::fabs(std::log2(static_cast<double>(p.bytes < 1 ? 1 : p.bytes)) - x);
    if (best == nullptr || d <= bestDist) {  // ties: the later (larger) point
      best = &p;
      bestDist = d;
    }
  }
  return best;
}

}  // namespace tessera
