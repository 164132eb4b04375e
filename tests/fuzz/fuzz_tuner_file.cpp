// tunerFileFromJson: TESSERA_TUNER_FILE and the cached file tessera_tune writes; and, for inputs
// that are not a JSON object, the TESSERA_ALGO / TESSERA_PROTO values. Garbage must be
// tsrInvalidArgument. A file that reads must write back (tunerFileToJson) to one that reads to the
// same table, and the tuner must choose with its table for every set in it.
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/tuner/tuner.hpp"
#include "collectives/tuner/tuner_table.hpp"
#include "fuzz_common.hpp"

namespace tessera::fuzz {
namespace {

void useTable(const TunerParams& params, const MeasuredTable& table) {
  auto shared = std::make_shared<const MeasuredTable>(table);
  Tuner tuner(params, shared, AlgoFilter{});
  for (const MeasuredSet& set : table.sets) {
    TuneInput in;
    in.collective = set.collective;
    in.nranks = set.nranks;
    in.hostOf.assign(static_cast<size_t>(set.nranks), 0);
    in.intraHost = set.transport;
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1} << 30}) {
      in.bytes = static_cast<size_t>(bytes);
      TuneChoice choice;
      Result r = tuner.choose(in, &choice);
      if (r != tsrSuccess && r != tsrInvalidUsage && r != tsrInvalidArgument)
        broken("Tuner::choose: unexpected code");
    }
    for (const MeasuredPoint& p : set.points)
      if (nearestPoint(set, p.bytes) != &p) broken("nearestPoint misses a measured size");
  }
}

}  // namespace
}  // namespace tessera::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.empty() || text[0] != '{') {
    AlgoFilter algo;
    Result a = parseAlgoFilter(text, &algo);
    ProtoFilter proto;
    Result p = parseProtoFilter(text, &proto);
    if ((a != tsrSuccess && a != tsrInvalidArgument) ||
        (p != tsrSuccess && p != tsrInvalidArgument))
      fuzz::broken("TESSERA_ALGO / TESSERA_PROTO parsing: unexpected code");
    return 0;
  }
  TunerParams params = defaultTunerParams();
  MeasuredTable table;
  Result r = tunerFileFromJson(text, &params, &table);
  if (r != tsrSuccess) {
    if (r != tsrInvalidArgument) fuzz::broken("tunerFileFromJson: unexpected code");
    return 0;
  }
  std::string written = tunerFileToJson(params, table, "fuzz", "host", "now");
  TunerParams params2 = defaultTunerParams();
  MeasuredTable table2;
  if (tunerFileFromJson(written, &params2, &table2) != tsrSuccess)
    fuzz::broken("a tuner file's own JSON does not read back");
  if (table2.digest() != table.digest()) fuzz::broken("a tuner file reads back to another table");
  fuzz::useTable(params, table);
  return 0;
}
