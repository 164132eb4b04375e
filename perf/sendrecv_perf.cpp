// sendrecv_perf: a ring of point-to-point transfers, as nccl-tests' sendrecv_perf: rank r sends
// to r + 1 and receives from r - 1, both in one group.
#include "coll_perf_common.hpp"

namespace tessera::perf {
namespace {

tsrResult_t run(const CollArgs& a) {
  int next = (a.rank + 1) % a.nranks;
  int prev = (a.rank + a.nranks - 1) % a.nranks;
  tsrResult_t r = tsrGroupStart();
  if (r != tsrSuccess) return r;
  tsrResult_t s = tsrSend(a.send, a.count, a.dtype, next, a.comm, a.stream);
  tsrResult_t v = s == tsrSuccess ? tsrRecv(a.recv, a.count, a.dtype, prev, a.comm, a.stream) : s;
  r = tsrGroupEnd();  // always, so the group is closed whatever failed inside it
  return v != tsrSuccess ? v : r;
}

Source source(const CollArgs& a, size_t i) {
  return {Source::kCopy, (a.rank + a.nranks - 1) % a.nranks, i};
}

}  // namespace
}  // namespace tessera::perf

int main(int argc, char** argv) {
  using namespace tessera::perf;
  // No in-place form: sending from the buffer being received into would race.
  static const CollHooks hooks{"sendrecv", false,        false,
                               false,      busFactorOne, sizesOfCount,
                               run,        source,       MpiColl::kSendrecvRing};
  return collPerfMain(argc, argv, hooks);
}
