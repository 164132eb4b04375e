// CUDA tensors: the device communicators of a group and the streams and events that order its
// device calls as ProcessGroupNCCL orders them. A device call runs on the group's stream of that
// device, after what the caller's current stream held when the call was made (an event the
// group's stream waits for); its Work records an event after it, which Work.wait() makes the
// caller's current stream wait for; the tensors are recorded on the group's stream for the caching
// allocator, so memory the caller frees is not reused before the call ran.
//
// Built without CUDA (TESSERA_TORCH_CUDA unset: torch or the toolkit had none), every entry point
// throws a sentence that says so.
#pragma once

#include <ATen/core/Tensor.h>
#include <tessera/tessera.h>

#include <map>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>
#include <vector>

#include "work.hpp"

namespace tessera_torch {

// What the caller's current stream held when a device call was made.
struct Fence {
  std::shared_ptr<void> event;  // at::cuda::CUDAEvent
  int device = -1;
};

class DeviceState {
 public:
  DeviceState(tsrComm_t hostComm, int rank, int size, c10::intrusive_ptr<c10d::Store> store,
              int timeoutMs);
  ~DeviceState();

  // Whether this build handles CUDA tensors (and a GPU is there).
  static bool built();

  // The group's communicator on `device`: a split of the host communicator bound to it, made by
  // the group's first device collective (collective over the group; on the queue only).
  tsrComm_t collComm(int device);
  // The 2-rank communicator of this rank and `peer` on `device` (for device send/recv payloads),
  // made through the store by the first device message between them.
  tsrComm_t pairComm(int peer, int device);
  // The group's stream on `device`.
  void* stream(int device);

  // On the caller's thread, when the call is made.
  Fence capture(int device);
  // On the queue, before the call's tessera calls: the group's stream waits for the fence and is
  // the current stream of its device until the returned guard goes.
  std::shared_ptr<void> before(const Fence& fence);
  // Waits (host) until the group's streams ran what they hold (barrier).
  void synchronize();
  // After them: the end event, the work's device hooks, the tensors recorded on the stream, and
  // the future completed on the stream.
  void after(TesseraWork* work, const std::vector<at::Tensor>& tensors, int device);

  // Communicators end: abort (local, at once), or destroy (after finalize when `orderly`).
  void abortAll();
  void destroyAll(bool orderly);

 private:
  tsrComm_t hostComm_;
  int rank_, size_;
  c10::intrusive_ptr<c10d::Store> store_;
  int timeoutMs_;
  std::map<int, tsrComm_t> coll_;                   // by device
  std::map<std::pair<int, int>, tsrComm_t> pairs_;  // by (peer, device)
  std::map<int, std::shared_ptr<void>> streams_;    // by device: c10::cuda::CUDAStream
  std::mutex mutex_;
};

}  // namespace tessera_torch
