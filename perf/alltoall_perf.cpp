// alltoall_perf: tsrAlltoAll as nccl-tests' alltoall_perf measures ncclAllToAll.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

// Both buffers hold one block per rank; the size is the whole buffer.
void sizes(size_t count, size_t elt, int n, CollSizes* s) {
  size_t per = perRankCount(count, elt, n);
  *s = {per * static_cast<size_t>(n), per * static_cast<size_t>(n), per, 0, 0};
}

tsrResult_t run(const CollArgs& a) {
  return tsrAlltoAll(a.send, a.recv, a.count, a.dtype, a.comm, a.stream);
}

// Block p of the output is block `rank` of rank p's input.
Source source(const CollArgs& a, size_t i) {
  return {Source::kCopy, static_cast<int>(i / a.count),
          static_cast<size_t>(a.rank) * a.count + i % a.count};
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  // No in-place form (tessera.h).
  static const CollHooks hooks{
      "alltoall", false, false, false, busFactorShare, sizes, run, source, MpiColl::kAlltoall};
  return collPerfMain(argc, argv, hooks);
}
