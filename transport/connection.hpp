// A Connection joins this rank to one peer over one transport (DESIGN.md, "Transport"). It
// imports the peer's Memory blobs and then either maps them (RemoteMemory::mapped() is a pointer
// usable for loads and stores: inproc, shm, cuda_ipc, p2p) or carries out one-sided operations
// (ucx). Every transport offers put/get/atomicAdd/flush; on mapping transports they are
// loads and stores on the mapping.
//
// The public calls check everything before a byte moves: that the context is alive, that both
// memories belong to it (or came from the peer through it), and that both ranges fit; otherwise
// tsrInvalidArgument with a sentence and nothing is written. The transport's work is in the
// do* functions.
//
// Ordering: atomicAdd (a semaphore signal) is ordered after every put this connection issued
// before it, as seen by a reader of the peer's memory that acquires the added value. Each
// transport documents how it gets there next to its code. Calls on one Connection may come from
// several threads (an executor and the proxy).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/deadline.hpp"
#include "core/status.hpp"
#include "transport/memory.hpp"
#include "transport/types.hpp"

namespace tessera {

class Connection {
 public:
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int rank() const;
  int peer() const { return peer_; }
  // Unique in the process, never reused.
  uint64_t id() const { return id_; }
  TransportKind kind() const { return kind_; }
  const std::shared_ptr<ContextState>& context() const { return context_; }
  // Whether imported memory is mapped (RemoteMemory::mapped() is usable).
  virtual bool mapsMemory() const = 0;

  // Imports a blob the peer made with Memory::serialize. tsrInvalidArgument when the blob is
  // malformed, belongs to another context (communicator), was made by a rank other than the
  // peer, or has no section for this transport (the sentence says why the owner could not
  // export it).
  Result importMemory(const std::string& blob, std::shared_ptr<RemoteMemory>* out);
  // The same, except that a memory this connection imported before through this call and still
  // holds (a RemoteMemory of it is alive) is not imported again: that RemoteMemory is returned.
  // Semaphores use it: their counters share slabs, and a slab is mapped once per connection
  // however many of its slots the peer's semaphores use.
  Result importMemoryOnce(const std::string& blob, std::shared_ptr<RemoteMemory>* out);

  // local src[srcOffset, +bytes) -> peer's dst[dstOffset, +bytes). Returns once issued, as an
  // RDMA put does: the source must stay unchanged, and the data is known to be at the peer, only
  // after a later flush() returns (mapping transports copy before returning, so for them both
  // hold at once). Many puts may be in flight; a signal (atomicAdd) after them still lands last.
  Result put(const RemoteMemory& dst, size_t dstOffset, const Memory& src, size_t srcOffset,
             size_t bytes);
  // The same with a source pointer, which must lie inside memory registered with this context.
  Result put(const RemoteMemory& dst, size_t dstOffset, const void* src, size_t bytes);
  // peer's src[srcOffset, +bytes) -> local dst[dstOffset, +bytes); complete when it returns.
  Result get(const Memory& dst, size_t dstOffset, const RemoteMemory& src, size_t srcOffset,
             size_t bytes);
  // Atomically adds `value` to the 8-byte-aligned 64-bit word at dst+offset, after every put
  // issued before on this connection (release).
  Result atomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value);
  // Completes every operation issued so far; waits at most the context's timeout.
  Result flush();

  // tsrSuccess while the peer may be alive; tsrRemoteError with a sentence once the transport
  // knows it is gone (a closed socket, a failed endpoint). Waits poll it.
  virtual Result peerStatus() { return tsrSuccess; }

  // Cross-memory attach: reads or writes the peer's memory at any address of its process, no
  // registration needed, in one copy (shm: the kernel's process_vm_readv / process_vm_writev;
  // inproc: the peer shares this address space, a memcpy). False, with *whyNot, where the
  // transport has none for this peer (ucx, the GPU transports) or the kernel refused it when the
  // connection was made (shm/cross_memory.hpp says when it does).
  virtual bool crossMemory(std::string* whyNot) const;
  // Whether the peer shares this process's address space: its addresses are usable here as they
  // are (thread ranks).
  virtual bool sharesAddressSpace() const { return false; }
  // peer[peerAddress, +bytes) -> dst, and src -> peer[peerAddress, +bytes); complete on return.
  // The caller vouches that the peer's range is alive and meant for this (a collective's buffer
  // the peer announced for the call). tsrInvalidUsage with the reason where crossMemory() is
  // false.
  Result readPeerAddress(void* dst, uint64_t peerAddress, size_t bytes);
  Result writePeerAddress(uint64_t peerAddress, const void* src, size_t bytes);

  // Lets the transport move pending work while a thread waits for its peer (a semaphore wait):
  // UCX over emulated transports completes a peer's puts only when this side progresses.
  // Never blocks; the default does nothing.
  virtual void progress() {}

 protected:
  Connection(std::shared_ptr<ContextState> context, int peer, TransportKind kind);

  // `section` is this transport's part of the blob. A mapping transport sets *mapped.
  virtual Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                          std::unique_ptr<RemoteMapping>* mapping) = 0;
  virtual Result doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src,
                       size_t srcOffset, size_t bytes) = 0;
  virtual Result doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src,
                       size_t srcOffset, size_t bytes) = 0;
  virtual Result doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) = 0;
  virtual Result doFlush(const Deadline& deadline) = 0;
  // Cross-memory attach (called only where crossMemory() is true).
  virtual Result doCrossRead(void* dst, uint64_t peerAddress, size_t bytes);
  virtual Result doCrossWrite(uint64_t peerAddress, const void* src, size_t bytes);

  // Records an error whose sentence starts "<transport> connection rank r -> peer p: ".
  Result fail(Result code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

 private:
  Result checkAlive(const char* op) const;
  Result checkRemote(const RemoteMemory& m, const char* op) const;
  Result checkLocal(const Memory& m, const char* op) const;

  std::shared_ptr<ContextState> context_;
  int peer_;
  TransportKind kind_;
  uint64_t id_;
  // importMemoryOnce's imports by the peer's memory id (ids are never reused within a context).
  std::mutex importsMutex_;
  std::map<uint32_t, std::weak_ptr<RemoteMemory>> imports_;
};

// Host memcpy / atomics for mapping transports whose memory is host memory (inproc, shm).
// Ordering: the copy is plain stores; the add is a release fetch_add on the mapped word, so a
// reader that acquires the counter sees the stores before it (x86-64 and aarch64 alike).
class HostMappedConnection : public Connection {
 public:
  bool mapsMemory() const override { return true; }

 protected:
  using Connection::Connection;
  Result doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src, size_t srcOffset,
               size_t bytes) override;
  Result doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src, size_t srcOffset,
               size_t bytes) override;
  Result doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) override;
  Result doFlush(const Deadline& deadline) override;
};

}  // namespace tessera
