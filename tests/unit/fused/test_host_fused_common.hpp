// Helpers of the host fused executor's tests: make a rank's executor, and run one case on it and
// check the result against the serial reference (fused_test_ref.hpp). Bodies return "" or a
// sentence, so they work on thread and process ranks alike (transport_test_util.hpp).
#pragma once

#include <memory>
#include <string>

#include "fused/fused.hpp"
#include "transport/context.hpp"
#include "unit/fused/fused_test_ref.hpp"

namespace tessera::fusedtest {

// Waits in the tests get this deadline: long enough for 8 thread ranks on 2 busy cores, short
// enough that a protocol bug fails instead of hanging ctest.
inline constexpr double kTestTimeoutSeconds = 30;

inline fused::TileConfig tiles(uint32_t m, uint32_t n, uint32_t commM, uint32_t commN) {
  fused::TileConfig cfg;
  cfg.tileM = m;
  cfg.tileN = n;
  cfg.commM = commM;
  cfg.commN = commN;
  return cfg;
}

Result makeExecutor(TransportContext& ctx, const fused::TileConfig& cfg,
                    std::unique_ptr<fused::HostFusedExecutor>* out,
                    double timeoutSeconds = kTestTimeoutSeconds);

// The FusedCall of case `c` on rank `rank` over the given buffers.
fused::FusedCall makeCall(const FusedCase& c, const RankInputs& in, void* out, void* gathered,
                          int rank, int nranks);

// Runs `c` `repeat` times in a row on this rank (the calls after the first exercise the credits
// of a kept workspace) and checks C and the gathered A each time; in the deterministic mode also
// that every repetition is bitwise identical to the first.
std::string runCase(fused::HostFusedExecutor& ex, int rank, int nranks, const FusedCase& c,
                    int repeat = 1);

}  // namespace tessera::fusedtest
