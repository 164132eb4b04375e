// all_gather_perf: tsrAllGather as nccl-tests' all_gather_perf measures ncclAllGather.
#include "coll_perf_common.hpp"
#include "coll_perf_mpi.hpp"

namespace tessera::perf {
namespace {

double busFactor(int n) { return n > 0 ? static_cast<double>(n - 1) / n : 0.0; }

// The size is the gathered buffer; each rank sends its share of it.
void sizes(size_t count, size_t elt, int n, CollSizes* s) {
  size_t per = perRankCount(count, elt, n);
  *s = {per, per * static_cast<size_t>(n), per, per, 0};
}

tsrResult_t run(const CollArgs& a) {
  return tsrAllGather(a.send, a.recv, a.count, a.dtype, a.comm, a.stream);
}

Source source(const CollArgs& a, size_t i) {
  return {Source::kCopy, static_cast<int>(i / a.count), i % a.count};
}

#if TESSERA_HAVE_MPI
int mpiRun(const MpiArgs& m) {
  return MPI_Allgather(m.send, m.count, m.type, m.recv, m.count, m.type, m.comm);
}
#else
constexpr int (*mpiRun)(const MpiArgs&) = nullptr;
#endif

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  // In place: the rank's send block is its own block of the receive buffer.
  static const CollHooks hooks{"all_gather", false, false,  true,  busFactor,
                               sizes,        run,   source, mpiRun};
  return collPerfMain(argc, argv, hooks);
}
