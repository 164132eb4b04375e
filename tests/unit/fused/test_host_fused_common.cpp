#include "unit/fused/test_host_fused_common.hpp"

#include <cstring>
#include <vector>

#include "core/datatype.hpp"
#include "core/status.hpp"

namespace tessera::fusedtest {

Result makeExecutor(TransportContext& ctx, const fused::TileConfig& cfg,
                    std::unique_ptr<fused::HostFusedExecutor>* out, double timeoutSeconds) {
  fused::FusedOptions o;
  o.transports = &ctx;
  o.rank = ctx.rank();
  o.nranks = ctx.nranks();
  o.timeoutSeconds = timeoutSeconds;
  Result r = fused::HostFusedExecutor::create(o, out);
  if (r == tsrSuccess) (*out)->setTileConfig(cfg);
  return r;
}

fused::FusedCall makeCall(const FusedCase& c, const RankInputs& in, void* out, void* gathered,
                          int rank, int nranks) {
  fused::FusedCall call;
  call.op = c.op;
  call.a = in.a.data();
  call.b = in.b.data();
  call.bias = c.bias ? in.bias.data() : nullptr;
  call.c = out;
  call.gatheredA = gathered;
  call.shape = rankShape(c, rank, nranks);
  call.inType = c.inType;
  call.outType = c.outType;
  call.atomic = c.atomic;
  return call;
}

std::string runCase(fused::HostFusedExecutor& ex, int rank, int nranks, const FusedCase& c,
                    int repeat) {
  const RankInputs in = makeInputs(c, rank, nranks);
  const Expected e = reference(c, rank, nranks);
  const size_t outBytes = e.rows * e.cols * dtypeSize(c.outType);
  // All-ones bytes are NaN in every output type: an element the executor never wrote fails.
  std::vector<uint8_t> out(outBytes, 0xFF), first;
  std::vector<uint8_t> wantGathered = c.gatheredA ? gatheredA(c, nranks) : std::vector<uint8_t>();
  std::vector<uint8_t> gathered(wantGathered.size(), 0xFF);
  fused::FusedCall call =
      makeCall(c, in, out.data(), c.gatheredA ? gathered.data() : nullptr, rank, nranks);
  Result r = fused::checkFusedCall(call, nranks, false, "test");
  if (r != tsrSuccess) return describe(c, nranks) + ": checkFusedCall: " + lastErrorMessage();
  for (int rep = 0; rep < repeat; ++rep) {
    std::memset(out.data(), 0xFF, out.size());
    if (!gathered.empty()) std::memset(gathered.data(), 0xFF, gathered.size());
    r = ex.run(call);
    if (r != tsrSuccess)
      return strprintf("%s rank %d call %d: %s: %s", describe(c, nranks).c_str(), rank, rep,
                       resultName(r), lastErrorMessage());
    std::string err = compare(c, rank, nranks, out.data(), e);
    if (!err.empty()) return strprintf("call %d: %s", rep, err.c_str());
    if (gathered != wantGathered)
      return strprintf("%s rank %d call %d: the gathered A differs from the shards",
                       describe(c, nranks).c_str(), rank, rep);
    if (rep == 0) first = out;
    if (!c.atomic && out != first)
      return strprintf("%s rank %d call %d: not bitwise identical to call 0 (deterministic mode)",
                       describe(c, nranks).c_str(), rank, rep);
  }
  return "";
}

}  // namespace tessera::fusedtest
