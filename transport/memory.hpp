// Registered memory (DESIGN.md, "Transport"): a region (pointer, size, kind) that peers may
// reach. A Memory is made by a TransportContext, either allocated by it (shareable between
// processes: a memfd for host memory, a cuMem allocation with a POSIX-FD handle or a cudaMalloc
// with a legacy IPC handle for device memory) or registered from the user's pointer.
//
// serialize() produces a blob for peers: a header (the context it belongs to, owner rank, id,
// size, kind) followed by one section per transport that can export it. A Connection imports the
// blob as a RemoteMemory, using its own transport's section.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.hpp"
#include "transport/types.hpp"

namespace tessera {

struct ContextState;

// What a transport keeps about a local Memory (an rkey, a memfd, an IPC handle) and the section it
// adds to the blob. Destroyed with the Memory.
struct MemoryExport {
  virtual ~MemoryExport() = default;
  std::string section;  // empty: this transport cannot export the memory (see `whyNot`)
  std::string whyNot;
};

class Memory : public std::enable_shared_from_this<Memory> {
 public:
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  uint32_t id() const { return id_; }
  void* data() const { return ptr_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  int cudaDevice() const { return device_; }  // -1 for host memory
  bool owned() const { return owned_; }       // allocated by the context (freed with it)
  int rank() const;

  // The descriptor other processes map it through: the memfd of host memory the context
  // allocated or of a registered pointer inside a tsrMemAlloc allocation (host_alloc.hpp), the
  // POSIX-FD handle of a cuMem (VMM) device allocation; -1 otherwise.
  int memfd() const { return memfd_; }
  // Where data() lies inside what memfd() maps (non-zero for a registered sub-range).
  size_t memfdOffset() const { return memfdOffset_; }

  // The blob for peers (see the file comment).
  Result serialize(std::string* blob) const;

  // Whether [offset, offset + bytes) lies inside the region.
  bool contains(size_t offset, size_t bytes) const {
    return offset <= size_ && bytes <= size_ - offset;
  }

  const std::shared_ptr<ContextState>& context() const { return context_; }
  MemoryExport* exportOf(TransportKind kind) const {
    return exports_[static_cast<size_t>(kind)].get();
  }

 private:
  friend class TransportContext;
  Memory() = default;

  std::shared_ptr<ContextState> context_;
  uint32_t id_ = 0;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  MemoryKind kind_ = MemoryKind::kHost;
  int device_ = -1;
  bool owned_ = false;
  int memfd_ = -1;
  size_t memfdOffset_ = 0;
  std::function<void()> release_;  // frees an owned allocation
  std::array<std::unique_ptr<MemoryExport>, kTransportKinds> exports_;
};

// The live Memory of `context` that holds [ptr, ptr + bytes), or null.
std::shared_ptr<Memory> findRegisteredMemory(ContextState& context, const void* ptr, size_t bytes);

// The parsed header of a Memory blob.
struct MemoryBlobHeader {
  uint64_t contextId = 0;
  int32_t ownerRank = -1;
  uint32_t memoryId = 0;
  uint64_t size = 0;
  uint64_t address = 0;  // in the owner's address space
  MemoryKind kind = MemoryKind::kHost;
  int32_t cudaDevice = -1;
};

// Parses `blob`; finds the section of `transport` (empty when there is none: `whyNot` then says
// what the owner reported). tsrInvalidArgument for anything malformed.
Result parseMemoryBlob(const std::string& blob, TransportKind transport, MemoryBlobHeader* header,
                       std::string* section, std::string* whyNot);

// What a transport keeps about a peer's memory it imported (a mapping, an rkey). Destroyed with
// the RemoteMemory.
struct RemoteMapping {
  virtual ~RemoteMapping() = default;
};

// A peer's Memory imported through one Connection.
class RemoteMemory {
 public:
  int ownerRank() const { return header_.ownerRank; }
  uint32_t id() const { return header_.memoryId; }
  size_t size() const { return header_.size; }
  MemoryKind kind() const { return header_.kind; }
  uint64_t remoteAddress() const { return header_.address; }
  // Loads and stores reach the peer's memory through this pointer; nullptr where the transport
  // does not map (ucx).
  void* mapped() const { return mapped_; }
  bool contains(size_t offset, size_t bytes) const {
    return offset <= header_.size && bytes <= header_.size - offset;
  }
  RemoteMapping* mapping() const { return mapping_.get(); }
  const MemoryBlobHeader& header() const { return header_; }

  // The id of the connection that imported it (only that connection may use it). Ids are never
  // reused, unlike addresses of destroyed connections.
  uint64_t importer() const { return importer_; }

  RemoteMemory(const MemoryBlobHeader& header, void* mapped, std::unique_ptr<RemoteMapping> m,
               uint64_t importer)
      : header_(header), mapped_(mapped), mapping_(std::move(m)), importer_(importer) {}

 private:
  MemoryBlobHeader header_;
  void* mapped_ = nullptr;
  std::unique_ptr<RemoteMapping> mapping_;
  uint64_t importer_ = 0;
};

}  // namespace tessera
