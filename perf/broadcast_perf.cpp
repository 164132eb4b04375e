// broadcast_perf: tsrBroadcast as nccl-tests' broadcast_perf measures ncclBroadcast.
#include "coll_perf_common.hpp"
#include "coll_perf_mpi.hpp"

namespace tessera::perf {
namespace {

double busFactor(int) { return 1.0; }

void sizes(size_t count, size_t, int, CollSizes* s) { *s = {count, count, count, 0, 0}; }

tsrResult_t run(const CollArgs& a) {
  return tsrBroadcast(a.send, a.recv, a.count, a.dtype, a.root, a.comm, a.stream);
}

Source source(const CollArgs& a, size_t i) { return {Source::kCopy, a.root, i}; }

#if TESSERA_HAVE_MPI
// MPI broadcasts in place: the root sends from the receive buffer, which the timing does not
// mind (the check runs tessera only).
int mpiRun(const MpiArgs& m) { return MPI_Bcast(m.recv, m.count, m.type, m.root, m.comm); }
#else
constexpr int (*mpiRun)(const MpiArgs&) = nullptr;
#endif

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{"broadcast", false, true,   true,  busFactor,
                               sizes,       run,   source, mpiRun};
  return collPerfMain(argc, argv, hooks);
}
