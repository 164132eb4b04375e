// all_reduce_perf: tsrAllReduce as nccl-tests' all_reduce_perf measures ncclAllReduce.
#include "coll_perf_common.hpp"
#include "coll_perf_mpi.hpp"

namespace tessera::perf {
namespace {

double busFactor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }

void sizes(size_t count, size_t, int, CollSizes* s) { *s = {count, count, count, 0, 0}; }

tsrResult_t run(const CollArgs& a) {
  return tsrAllReduce(a.send, a.recv, a.count, a.dtype, a.op, a.comm, a.stream);
}

Source source(const CollArgs&, size_t i) { return {Source::kReduce, 0, i}; }

#if TESSERA_HAVE_MPI
int mpiRun(const MpiArgs& m) {
  return MPI_Allreduce(m.send, m.recv, m.count, m.type, m.op, m.comm);
}
#else
constexpr int (*mpiRun)(const MpiArgs&) = nullptr;
#endif

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{"all_reduce", true, false,  true,  busFactor,
                               sizes,        run,  source, mpiRun};
  return collPerfMain(argc, argv, hooks);
}
