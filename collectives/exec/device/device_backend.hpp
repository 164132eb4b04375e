// The device backend of ops.hpp and the item runner of the device executor's scheduler
// (work_queue.hpp): how one CTA (Group) runs its share of a WorkItem. __host__ __device__: a CUDA
// kernel instantiates it with BlockGroup, the host-thread emulation and the CPU tests with
// HostGroup, so the logic the GPU runs (ref resolution, staging through port channels, credits,
// barriers, iterations, deadlines, failure) is tested on the CPU.
//
// Contract (implemented in this header):
//
//   template <class Group> struct DeviceItemRunner {
//     WorkQueueHandle queue;
//     bool runItem(const WorkItem& item, const Group& g, uint32_t cta, uint32_t nctas);
//   };
//
// runItem runs the plan `item.plan` once per slice (item.iters iterations; iteration i covers
// elements [i * slice, min(count, (i + 1) * slice)) of every user segment, the SliceLayout of
// host_executor.cpp's beginIteration), the CTA running the plan's workers w with w % nctas == cta
// cooperatively (a worker that blocks on a wait or barrier yields to the CTA's next worker; a CTA
// that made no progress for queue.timeoutNs records kWhyTimeout), with a grid barrier between
// iterations, the avg post-op (item.postAvg) over the iteration's output by all CTAs, and the same
// results, bit for bit, as the host executor (the element functions of reduce_kernels.hpp; on the
// GPU with 16-byte vector loads and stores where every pointer of a piece is 16-byte aligned).
// Ops reach peers through DevicePlan: mapped peers by loads and stores, unmapped peers by puts and
// signals through their port channel, staged in the CTA's part of the staging area (a load from an
// unmapped peer records kWhyUnsupported). On failure it records why (recordError) and returns
// false in every thread.
#pragma once

#include <stdint.h>

#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/ops.hpp"
#include "collectives/exec/reduce_kernels.hpp"

namespace tessera::exec {

// Most workers one CTA runs of a plan, most sources of one op (bindDevicePlan refuses plans
// beyond them with a sentence).
inline constexpr int kMaxCtaWorkers = 16;
inline constexpr int kMaxDeviceSrcs = 64;

template <class Group>
struct DeviceItemRunner {
  WorkQueueHandle queue;
  TSR_INLINE bool runItem(const WorkItem& item, const Group& g, uint32_t cta, uint32_t nctas);
};

}  // namespace tessera::exec
