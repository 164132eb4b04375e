// Qualifiers for code shared by host and device (DESIGN.md, "One algorithm, two executors"):
// the same function compiles with nvcc for a kernel and with the host compiler for a host thread.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TSR_HOST_DEVICE __host__ __device__
#define TSR_DEVICE __device__
#else
#define TSR_HOST_DEVICE
#define TSR_DEVICE
#endif

#define TSR_INLINE TSR_HOST_DEVICE inline
