#include "transport/cuda_ipc/cu_driver.hpp"

#include <mutex>

#include "core/cuda_driver.hpp"
#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kCuda;

// Looks `name` up as it was in CUDA `version` (the version that introduced the signature the
// table declares) and stores it; records the first miss in `why`.
template <typename Fn>
void lookUp(Fn* slot, const char* name, unsigned version, std::string* why) {
  std::string miss;
  *slot = reinterpret_cast<Fn>(cudaDriverEntryPoint(name, version, &miss));
  if (*slot == nullptr && why->empty()) *why = miss;
}

CuDriver loadDriver() {
  CuDriver d;
  lookUp(&d.deviceGetAttribute, "cuDeviceGetAttribute", 2000, &d.why);
  lookUp(&d.memGetAddressRange, "cuMemGetAddressRange", 3020, &d.why);
  lookUp(&d.memGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, &d.why);
  lookUp(&d.memCreate, "cuMemCreate", 10020, &d.why);
  lookUp(&d.memRelease, "cuMemRelease", 10020, &d.why);
  lookUp(&d.memAddressReserve, "cuMemAddressReserve", 10020, &d.why);
  lookUp(&d.memAddressFree, "cuMemAddressFree", 10020, &d.why);
  lookUp(&d.memMap, "cuMemMap", 10020, &d.why);
  lookUp(&d.memUnmap, "cuMemUnmap", 10020, &d.why);
  lookUp(&d.memSetAccess, "cuMemSetAccess", 10020, &d.why);
  lookUp(&d.memExportToShareableHandle, "cuMemExportToShareableHandle", 10020, &d.why);
  lookUp(&d.memImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020, &d.why);
  d.vmm = d.why.empty();
  if (!d.vmm) TSR_INFO("CUDA VMM is unavailable: %s", d.why.c_str());
  return d;
}
}  // namespace

const CuDriver& cuDriver() {
  static const CuDriver table = loadDriver();
  return table;
}

}  // namespace tessera
