// reduce_scatter_perf: tsrReduceScatter as nccl-tests' reduce_scatter_perf measures
// ncclReduceScatter.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

// The size is the buffer being reduced; each rank receives its share of it.
void sizes(size_t count, size_t elt, int n, CollSizes* s) {
  size_t per = perRankCount(count, elt, n);
  *s = {per * static_cast<size_t>(n), per, per, 0, per};
}

tsrResult_t run(const CollArgs& a) {
  return tsrReduceScatter(a.send, a.recv, a.count, a.dtype, a.op, a.comm, a.stream);
}

Source source(const CollArgs& a, size_t i) {
  return {Source::kReduce, 0, static_cast<size_t>(a.rank) * a.count + i};
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{"reduce_scatter",
                               true,
                               false,
                               true,
                               busFactorShare,
                               sizes,
                               run,
                               source,
                               MpiColl::kReduceScatterBlock};
  return collPerfMain(argc, argv, hooks);
}
