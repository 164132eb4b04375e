// The engine on ranks that reach some peers over inproc and others over shm (2 processes x 2
// thread ranks). The tuner must see the same transports on every rank: a rank that judged its
// host by its last peer (inproc here, shm there) picked another algorithm than its peers, and the
// call hung or was refused as a plan mismatch.
#include <gtest/gtest.h>

#include "test_exec_common.hpp"
#include "transport/transport.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

constexpr int kProcesses = 2;
constexpr int kThreads = 2;

TEST(ExecMixed, TunerAgreesAcrossInprocAndShmPeers) {
  auto results = runMixedRanks(kProcesses, kThreads, [&](TransportContext& ctx) {
    int n = ctx.nranks();
    for (int p = 0; p < n; ++p) {
      if (p == ctx.rank()) continue;
      TransportKind k;
      std::string why;
      TT_CHECK_OK(ctx.selectTransport(p, &k, &why));
      TransportKind want =
          p / kThreads == ctx.rank() / kThreads ? TransportKind::kInproc : TransportKind::kShm;
      TT_CHECK(k == want, "rank %d reaches %d over %s, expected %s", ctx.rank(), p,
               transportName(k), transportName(want));
    }
    EngineSetup setup;
    setup.timeoutSeconds = 10;
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, setup, &e));
    // Sizes from one element to several scratch slices: the tuner's choice changes on the way.
    int salt = 0;
    for (size_t count = 1; count <= (size_t{1} << 17); count *= 2) {
      for (Collective coll : {Collective::kAllReduce, Collective::kReduceScatter}) {
        CollCase c;
        c.coll = coll;
        c.count = count;
        c.salt = ++salt;
        std::string err = runAndCheck(*e, ctx.rank(), n, c);
        if (!err.empty()) return err;
      }
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
