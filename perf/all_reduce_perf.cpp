// all_reduce_perf: tsrAllReduce as nccl-tests' all_reduce_perf measures ncclAllReduce.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

double busFactor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }

tsrResult_t run(const CollArgs& a) {
  return tsrAllReduce(a.send, a.recv, a.count, a.dtype, a.op, a.comm, a.stream);
}

Source source(const CollArgs&, size_t i) { return {Source::kReduce, 0, i}; }

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  static const CollHooks hooks{
      "all_reduce", true, false, true, busFactor, sizesOfCount, run, source, MpiColl::kAllreduce};
  return collPerfMain(argc, argv, hooks);
}
