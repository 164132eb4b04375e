// broadcast_perf: tsrBroadcast as nccl-tests' broadcast_perf measures ncclBroadcast.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

tsrResult_t run(const CollArgs& a) {
  return tsrBroadcast(a.send, a.recv, a.count, a.dtype, a.root, a.comm, a.stream);
}

Source source(const CollArgs& a, size_t i) { return {Source::kCopy, a.root, i}; }

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{"broadcast",  false, true,   true,           busFactorOne,
                               sizesOfCount, run,   source, MpiColl::kBcast};
  return collPerfMain(argc, argv, hooks);
}
