// What the device executor's kernel files share (their public face is kernels.hpp). The kernels
// are spread over several .cu files so that nvcc compiles them in parallel: each kernel that runs
// the interpreter (item_runner.hpp and all it reaches, inlined whole into every kernel) has a file
// of its own, kernels_resident.cu, kernels_item.cu and kernels_sendrecv_item.cu; kernels.cu holds
// the two trigger kernels, the kernel table and the checks below. In one file the three
// interpreter copies were compiled one after the other, for every architecture, and that file
// was the longest step of a build. Each kernel is defined and launched in its own file (whole-
// program compilation, no relocatable device code: all device code is header-inlined); the other
// files reach it only through the functions declared here. The no-spill check
// (tests/unit/collectives/device_spill.cmake) reads ptxas's report of every one of these files.
#pragma once

#include <stdint.h>

#include "core/status.hpp"

namespace tessera::exec::devkernels {

// Most threads per CTA of the resident and item kernels: they are compiled with
// __launch_bounds__(kThreads, 1) (256, the executor's default CTA size). At 512 the bound capped
// registers at 128 per thread and ptxas spilled 16-24 bytes in the interpreter (sm_80, sm_90);
// at 256 it may use up to 255. A launch with more threads than the bound would fail in the
// driver, so the launchers refuse it first with a sentence (checkShape). The no-spill check reads
// this constant to derive the register limit it enforces.
inline constexpr uint32_t kThreads = 256;

// Fails with a sentence (tsrInvalidArgument) unless the launch has 1 or more CTAs of 1 to
// kThreads threads.
Result checkShape(const char* kernel, uint32_t nctas, uint32_t threads);

// After a launch: launches are asynchronous, so this reports configuration errors (and any sticky
// error of the context); a fault inside the kernel shows up in the queue's error record or a later
// call.
Result checkLaunch(const char* kernel, uint32_t nctas, uint32_t threads);

// The interpreter kernels (their host stubs), for the kernel table of kernels.cu: what
// preloadDeviceKernels() loads and deviceKernelInfo() lists. Functions rather than constants so
// that the table never reads another file's object before its static initialization.
const void* residentKernelFn();
const void* itemKernelFn();
const void* sendRecvItemKernelFn();

}  // namespace tessera::exec::devkernels
