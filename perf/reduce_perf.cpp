// reduce_perf: tsrReduce as nccl-tests' reduce_perf measures ncclReduce.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

tsrResult_t run(const CollArgs& a) {
  return tsrReduce(a.send, a.recv, a.count, a.dtype, a.op, a.root, a.comm, a.stream);
}

// Only the root's output is defined.
Source source(const CollArgs& a, size_t i) {
  return {a.rank == a.root ? Source::kReduce : Source::kUnwritten, 0, i};
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{
      "reduce", true, true, true, busFactorOne, sizesOfCount, run, source, MpiColl::kReduce};
  return collPerfMain(argc, argv, hooks);
}
