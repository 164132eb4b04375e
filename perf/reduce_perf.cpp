// reduce_perf: tsrReduce as nccl-tests' reduce_perf measures ncclReduce.
#include "coll_perf_common.hpp"
#include "coll_perf_mpi.hpp"

namespace tessera::perf {
namespace {

double busFactor(int) { return 1.0; }

void sizes(size_t count, size_t, int, CollSizes* s) { *s = {count, count, count, 0, 0}; }

tsrResult_t run(const CollArgs& a) {
  return tsrReduce(a.send, a.recv, a.count, a.dtype, a.op, a.root, a.comm, a.stream);
}

// Only the root's output is defined.
Source source(const CollArgs& a, size_t i) {
  return {a.rank == a.root ? Source::kReduce : Source::kUnwritten, 0, i};
}

#if TESSERA_HAVE_MPI
int mpiRun(const MpiArgs& m) {
  return MPI_Reduce(m.send, m.recv, m.count, m.type, m.op, m.root, m.comm);
}
#else
constexpr int (*mpiRun)(const MpiArgs&) = nullptr;
#endif

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{"reduce", true, true, true, busFactor, sizes, run, source, mpiRun};
  return collPerfMain(argc, argv, hooks);
}
