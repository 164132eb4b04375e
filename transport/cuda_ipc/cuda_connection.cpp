#include "transport/cuda_ipc/cuda_connection.hpp"

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_stream.hpp"
#include "core/cuda/device_guard.hpp"
#include "transport/cuda_ipc/cuda_word_kernel.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;
}  // namespace

CudaConnection::CudaConnection(std::shared_ptr<ContextState> context, int peer, TransportKind kind)
    : Connection(std::move(context), peer, kind) {}

CudaConnection::~CudaConnection() {
  if (stream_ == nullptr) return;
  CudaDeviceGuard guard(device());
  // Work still queued (a put that timed out) finishes first; destroying never blocks on it.
  cudaStreamDestroy(stream_);
  cudaGetLastError();
}

Result CudaConnection::init() {
  if (device() < 0)
    return fail(tsrInvalidUsage, "this rank has no GPU (TransportContextOptions::cudaDevice)");
  CudaDeviceGuard guard(device());
  if (guard.status() != cudaSuccess)
    return fail(tsrUnhandledCudaError, "cudaSetDevice(%d): %s", device(),
                cudaErrorText(guard.status()).c_str());
  return tsrSuccess;
}

Result CudaConnection::stream(cudaStream_t* out) {
  if (stream_ == nullptr) {
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
      return fail(tsrUnhandledCudaError, "cudaStreamCreateWithFlags on device %d: %s", device(),
                  cudaErrorText(e).c_str());
    stream_ = s;
  }
  *out = stream_;
  return tsrSuccess;
}

Result CudaConnection::copy(void* dst, const void* src, size_t bytes, const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  CudaDeviceGuard guard(device());
  cudaStream_t s = nullptr;
  TSR_CHECK(stream(&s));
  // cudaMemcpyDefault: unified addressing tells device, peer device, pinned or pageable host.
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e != cudaSuccess)
    return fail(tsrUnhandledCudaError, "%s of %zu bytes (%p -> %p) on device %d: %s", op, bytes,
                src, dst, device(), cudaErrorText(e).c_str());
  Result r = waitStream(s, Deadline::after(context()->timeoutSeconds), op);
  if (r != tsrSuccess)
    return addContext(r, "%s connection rank %d -> peer %d: ", transportName(kind()), rank(),
                      peer());
  return tsrSuccess;
}

Result CudaConnection::doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src,
                             size_t srcOffset, size_t bytes) {
  return copy(static_cast<char*>(dst.mapped()) + dstOffset,
              static_cast<const char*>(src.data()) + srcOffset, bytes, "put");
}

Result CudaConnection::doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src,
                             size_t srcOffset, size_t bytes) {
  return copy(static_cast<char*>(dst.data()) + dstOffset,
              static_cast<const char*>(src.mapped()) + srcOffset, bytes, "get");
}

Result CudaConnection::doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) {
  if (dst.kind() != MemoryKind::kCuda)
    return fail(tsrInvalidUsage,
                "atomicAdd on the peer's %s memory %u: the GPU add needs device memory",
                memoryKindName(dst.kind()), dst.id());
  auto* word = reinterpret_cast<uint64_t*>(static_cast<char*>(dst.mapped()) + offset);
  std::lock_guard<std::mutex> lock(mutex_);
  CudaDeviceGuard guard(device());
  cudaStream_t s = nullptr;
  TSR_CHECK(stream(&s));
  cudaError_t e = launchAddWord(word, value, s);
  if (e != cudaSuccess)
    return fail(tsrUnhandledCudaError, "atomicAdd of %llu at offset %zu of memory %u: %s",
                static_cast<unsigned long long>(value), offset, dst.id(), cudaErrorText(e).c_str());
  Result r = waitStream(s, Deadline::after(context()->timeoutSeconds), "atomicAdd");
  if (r != tsrSuccess)
    return addContext(r, "%s connection rank %d -> peer %d: ", transportName(kind()), rank(),
                      peer());
  return tsrSuccess;
}

Result CudaConnection::doFlush(const Deadline& deadline) {
  // Every call already waited for its own work; this catches anything left by a call that
  // timed out. No stream yet: nothing was ever issued.
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream_ == nullptr) return tsrSuccess;
  Result r = waitStream(stream_, deadline, "flush");
  if (r != tsrSuccess)
    return addContext(r, "%s connection rank %d -> peer %d: ", transportName(kind()), rank(),
                      peer());
  return tsrSuccess;
}

}  // namespace tessera
