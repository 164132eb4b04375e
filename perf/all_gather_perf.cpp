// all_gather_perf: tsrAllGather as nccl-tests' all_gather_perf measures ncclAllGather.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

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

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  // In place: the rank's send block is its own block of the receive buffer.
  static const CollHooks hooks{
      "all_gather", false, false, true, busFactorShare, sizes, run, source, MpiColl::kAllgather};
  return collPerfMain(argc, argv, hooks);
}
