// A stand-in for NVIDIA's libnccl.so.2 in the forwarding test (TESSERA_NCCL_FALLBACK): it has the
// functions the drop-in binds, creates its communicators without a GPU, and answers a forwarded
// all-reduce by filling the output with 0x7f bytes and counting the call, so the test can tell
// that the call went here and not to tessera. Built against nothing but its own prototypes.
#include <cstddef>
#include <cstring>

extern "C" {
struct FakeComm {
  int rank, nranks;
};
static FakeComm gComms[64];
static int gUsed = 0;
int fakeNcclAllReduceCalls = 0;

__attribute__((visibility("default"))) int ncclGetUniqueId(char* id) {
  std::memset(id, 'F', 128);
  return 0;
}
__attribute__((visibility("default"))) int ncclCommInitRank(void** comm, int nranks, const char* id,
                                                            int rank) {
  (void)id;
  if (gUsed >= 64) return 3;
  FakeComm* c = &gComms[__atomic_fetch_add(&gUsed, 1, __ATOMIC_SEQ_CST)];
  c->rank = rank;
  c->nranks = nranks;
  *comm = c;
  return 0;
}
__attribute__((visibility("default"))) int ncclCommDestroy(void*) { return 0; }
__attribute__((visibility("default"))) int ncclCommAbort(void*) { return 0; }
__attribute__((visibility("default"))) const char* ncclGetLastError(void*) { return "fake"; }
__attribute__((visibility("default"))) int ncclAllReduce(const void*, void* recv, size_t count,
                                                         int datatype, int, void*, void*) {
  static const size_t kSize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  std::memset(recv, 0x7f, count * kSize[datatype]);
  __atomic_fetch_add(&fakeNcclAllReduceCalls, 1, __ATOMIC_SEQ_CST);
  return 0;
}
__attribute__((visibility("default"))) int ncclBroadcast() { return 5; }
__attribute__((visibility("default"))) int ncclReduce() { return 5; }
__attribute__((visibility("default"))) int ncclAllGather() { return 5; }
__attribute__((visibility("default"))) int ncclReduceScatter() { return 5; }
__attribute__((visibility("default"))) int ncclAlltoAll() { return 5; }
}
