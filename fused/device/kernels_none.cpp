// DeviceFusedExecutor in a build without the fused GPU kernels (no CUDA compiler, or no CUTLASS
// headers): it cannot be made, and says which of the two is missing.
#include "core/build_config.hpp"
#include "fused/fused.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

const char* missing() {
  return TESSERA_HAVE_CUDA
             ? "tessera was built without the CUTLASS headers (pip install nvidia-cutlass, or "
               "-DTESSERA_CUTLASS_DIR=<include folder>, then reconfigure)"
             : "tessera was built without CUDA (configured without a CUDA compiler)";
}
}  // namespace

Result DeviceFusedExecutor::create(const FusedOptions& options,
                                   std::unique_ptr<DeviceFusedExecutor>* out) {
  out->reset();
  return TSR_FAIL(tsrInvalidUsage,
                  "rank %d: fused GEMM calls on device buffers need the fused GPU kernels, but %s; "
                  "pass host buffers to use the host executor",
                  options.rank, missing());
}

bool DeviceFusedExecutor::available(std::string* whyNot) {
  if (whyNot != nullptr) *whyNot = missing();
  return false;
}

}  // namespace tessera::fused
