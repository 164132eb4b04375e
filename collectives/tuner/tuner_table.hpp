// Measured costs (tessera_tune): per collective, rank count and intra-host transport, the time of
// each family at a ladder of message sizes on the machine that measured them. Where a table
// applies (one host, buffers staged through the scratch, the same transport), the tuner picks the
// family measured fastest at the nearest measured size among those its filters allow, and keeps
// the cost model for everything else (several hosts, zero-copy, sizes or rank counts that were
// not measured). The model's parameters (links, crossMemory, gammaGBs, callOverheadUs) live
// beside the table in the same file (tuner_params_json.cpp).
//
// In the tuner file:
//   "measured": [ {"collective": "allreduce", "nranks": 2, "transport": "shm",
//                  "points": [ {"bytes": 8, "us": {"oneshot": 0.41, "ring": 0.62, ...}},
//                              {"bytes": 4194304, "us": {...}, "crossUs": 512.0}, ... ]},
//                 ... ]
// A point's families are those that generate the collective; a family absent from a point was
// not measured there (the tuner then looks only at the families that were). Where the table
// applies, cross-memory attach runs only where it was measured faster than the staged family
// the tuner picks ("crossUs").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"
#include "transport/types.hpp"

namespace tessera {

struct MeasuredFamily {
  std::string family;
  double us = 0;
};

struct MeasuredPoint {
  uint64_t bytes = 0;
  std::vector<MeasuredFamily> families;
  // The call on unregistered buffers run zero-copy by cross-memory attach (the model's plan for
  // it); 0: not measured (then the tuner never prefers cross-memory attach at this size).
  double crossUs = 0;
};

struct MeasuredSet {
  Collective collective = Collective::kAllReduce;
  int nranks = 2;
  TransportKind transport = TransportKind::kShm;
  std::vector<MeasuredPoint> points;  // sorted by bytes, no two alike
};

struct MeasuredTable {
  std::vector<MeasuredSet> sets;

  bool empty() const { return sets.empty(); }
  const MeasuredSet* find(Collective c, int nranks, TransportKind transport) const;
  // A digest of the whole table (ranks compare theirs before they trust it).
  uint64_t digest() const;
};

// The point nearest to `bytes` on a log scale (the larger of two equally near); null when the set
// has none.
const MeasuredPoint* nearestPoint(const MeasuredSet& set, uint64_t bytes);

}  // namespace tessera
