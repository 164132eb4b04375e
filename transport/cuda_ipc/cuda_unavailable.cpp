// cuda_ipc, p2p and CUDA memory in a build without CUDA: every call says CUDA was not built in.
#include "transport/cuda_ipc/cuda_memory.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

Result noCuda(const char* what) {
  return TSR_FAIL(tsrInvalidUsage,
                  "%s: CUDA was not found (or was turned off) when tessera was "
                  "built",
                  what);
}
}  // namespace

Result makeCudaIpcTransport(std::shared_ptr<ContextState>, std::unique_ptr<Transport>*) {
  return noCuda("cuda_ipc transport");
}
Result makeP2pTransport(std::shared_ptr<ContextState>, std::unique_ptr<Transport>*) {
  return noCuda("p2p transport");
}
Result cudaAllocateShareable(size_t, int, CudaAllocation*) { return noCuda("cuda memory"); }
Result cudaAllocateForUser(size_t, int, CudaAllocation*) { return noCuda("device memory"); }
Result cudaPinHostMemory(void*, size_t, std::function<void()>*, int) {
  return noCuda("pinned host memory");
}
Result cudaPointerDevice(const void*, int*, std::string* why) {
  *why = "CUDA was not built in";
  return tsrInvalidUsage;
}
Result cudaReadWord(const uint64_t*, uint64_t*) { return noCuda("reading device memory"); }
Result cudaWriteWord(uint64_t*, uint64_t) { return noCuda("writing device memory"); }
Result cudaAddWord(uint64_t*, uint64_t) { return noCuda("an atomic on device memory"); }
bool cudaVmmAllocationInfo(const void*, size_t*, size_t*) { return false; }
void cudaPreferLegacyAllocation(bool) {}

}  // namespace tessera
