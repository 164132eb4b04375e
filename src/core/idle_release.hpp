// Frees that wait for an idle device, kept away from resident grids (DESIGN.md, "Known hazards").
//
// cudaFree, cudaFreeHost and their kin synchronize the device: they do not return while any
// kernel of the process's context runs on it. A resident grid (the device executor's persistent
// kernel) runs until its communicator stops it, so a free issued while another communicator's
// grid lives on the same GPU (thread ranks of one process sharing it; a communicator destroyed
// while the next one lives; an abort while a peer's call waits) never returns. NCCL's users meet
// this as hangs in ncclCommDestroy; NCCL's own kernels end, tessera's do not.
//
// This registry counts, per device, the resident grids this process runs, and holds back every
// release that may synchronize until the last of them has ended: releaseWhenIdle runs it at once
// when none runs, else the thread that ends the last grid runs it. No grid starts while a release
// runs (a free then never waits for a grid that started under it). A grid that never ends (an
// abandoned executor) keeps its device's releases: memory is leaked, nothing hangs.
//
// The device emulation (host threads as CTAs) registers its grids under kEmulatedDevice and models
// the synchronizing free with waitIdleLikeCudaFree, so the CPU suite meets the same hangs a GPU
// would.
#pragma once

#include <cstddef>
#include <functional>

namespace tessera {

// The registry's device for the device emulation's grids (all of a process's emulated ranks share
// it, as thread ranks share one GPU).
inline constexpr int kEmulatedDevice = -2;

// A resident grid of `ctas` CTAs of this process runs on `device` from residentGridStarting (call
// it before the launch: a release that sees no grid must not race one being launched) until
// residentGridEnded (call it once the grid has ended, or when its launch failed). Starting waits
// for releases in progress on the device.
void residentGridStarting(int device, int ctas);
void residentGridEnded(int device, int ctas);

// CTAs of the resident grids this process runs on `device` now.
int residentGridCtas(int device);

// Runs `release`, a free that may wait for the device to go idle, now if no resident grid of this
// process runs on `device`, else on the thread that ends the last one. Never waits for a grid.
// `release` must not start a grid; it may call releaseWhenIdle itself.
void releaseWhenIdle(int device, std::function<void()> release);

// Releases held back on `device` (a grid that never ended keeps them).
size_t heldReleases(int device);

// The emulation's model of cudaFree: waits until no resident grid of this process runs on
// `device`, at most `seconds`. False when one still runs then: on a GPU that free would never
// return.
bool waitIdleLikeCudaFree(int device, double seconds);

}  // namespace tessera
