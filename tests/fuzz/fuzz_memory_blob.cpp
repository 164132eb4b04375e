// Connection::importMemory: the blob a peer sends for each Memory it registered (memory.hpp:
// header + one section per transport), parsed by parseMemoryBlob and then by the connection's
// transport (inproc: a key into the process's live table; shm: the fd server's address and key,
// then SCM_RIGHTS + mmap). Garbage must be an error; an import that succeeds must never describe
// more bytes than the peer registered (puts and gets are bounds-checked against that size).
//
// Two ranks run as threads of this process (inproc bootstrap), set up once: rank 0 registers a
// heap buffer (exported by inproc only) and allocates a memfd (exported by inproc and shm); rank
// 1 holds an inproc and an shm connection to rank 0, and imports every input through both.
//
// The values that make a blob live (context id, process nonce, addresses, the shm key and fd
// server address) differ from run to run, so seeds carry 8-byte tokens instead, which each input
// is also tried with replaced (see kTokens; the fd server token also fixes the two lengths in
// front of it, the layouts of memory.cpp and shm_transport.cpp). TESSERA_FUZZ_SEEDS=<dir> writes
// the live blobs of both memories, tokenized, as seeds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/inproc_bootstrap.hpp"
#include "fuzz_common.hpp"
#include "transport/context.hpp"

namespace tessera::fuzz {
namespace {

constexpr size_t kBytes = 4096;

struct World {
  std::shared_ptr<InprocGroup> group;
  std::unique_ptr<Bootstrap> bootstrap[2];
  std::unique_ptr<TransportContext> ctx[2];
  std::vector<uint8_t> userBuffer = std::vector<uint8_t>(kBytes);
  std::shared_ptr<Memory> user, owned;                      // rank 0's
  std::shared_ptr<Connection> ends[2][2];                   // [rank][inproc, shm]
  std::vector<std::pair<std::string, std::string>> tokens;  // token -> live bytes
  std::string server;                                       // rank 0's fd server address
};

std::string bytesOf(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

void replaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

void addToU32(std::string* s, size_t at, int64_t delta) {
  uint32_t v;
  std::memcpy(&v, s->data() + at, 4);
  v = static_cast<uint32_t>(v + delta);
  std::memcpy(s->data() + at, &v, 4);
}

// Replaces `from` by `to` where `from` is the shm address (after the 32-byte SectionHeader, whose
// addressBytes is at +4, inside a section whose WireSection.bytes is 4 bytes before it).
void replaceAddress(std::string* s, const std::string& from, const std::string& to) {
  const int64_t delta = static_cast<int64_t>(to.size()) - static_cast<int64_t>(from.size());
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
    if (at >= 36) {
      addToU32(s, at - 28, delta);
      addToU32(s, at - 36, delta);
    }
  }
}

const char* kServerToken = "@SHMSRV@";

std::string live(const World& w, std::string blob) {
  for (const auto& [token, value] : w.tokens) replaceAll(&blob, token, value);
  replaceAddress(&blob, kServerToken, w.server);
  return blob;
}

std::string tokenized(const World& w, std::string blob) {
  replaceAddress(&blob, w.server, kServerToken);
  for (const auto& [token, value] : w.tokens) replaceAll(&blob, value, token);
  return blob;
}

void setUpRank(World& w, int rank) {
  auto must = [](Result r, const char* what) {
    if (r != tsrSuccess) {
      std::fprintf(stderr, "memory_blob setup: %s: %s\n", what, lastErrorMessage());
      std::abort();
    }
  };
  must(w.group->join(rank, &w.bootstrap[rank]), "join");
  TransportContextOptions o;
  o.bootstrap = w.bootstrap[rank].get();
  o.timeoutSeconds = 5;
  must(TransportContext::create(o, &w.ctx[rank]), "TransportContext::create");
  TransportContext& ctx = *w.ctx[rank];
  must(ctx.connect(1 - rank, TransportKind::kInproc, &w.ends[rank][0]), "connect inproc");
  must(ctx.connect(1 - rank, TransportKind::kShm, &w.ends[rank][1]), "connect shm");
  if (rank == 0) {
    must(ctx.registerMemory(w.userBuffer.data(), kBytes, MemoryKind::kHost, &w.user), "register");
    must(ctx.allocate(kBytes, MemoryKind::kHost, &w.owned), "allocate");
  }
}

World& world() {
  static World* w = [] {
    auto* n = new World;  // never destroyed: its threads and mappings live as long as the fuzzer
    if (InprocBootstrap::createGroup(2, BootstrapOptions{5.0}, &n->group) != tsrSuccess) {
      std::fprintf(stderr, "memory_blob setup: createGroup: %s\n", lastErrorMessage());
      std::abort();
    }
    std::thread peer([n] { setUpRank(*n, 1); });
    setUpRank(*n, 0);
    peer.join();
    const std::string& shm = n->owned->exportOf(TransportKind::kShm)->section;
    if (shm.size() <= 32) broken("the shm section has no server address");
    uint64_t key;
    std::memcpy(&key, shm.data() + 8, 8);
    n->server = shm.substr(32);
    const auto& state = *n->ctx[0]->state();
    n->tokens = {
        {"@CTXID@@", bytesOf(state.contextId)},
        {"@NONCE@@", bytesOf(state.placements[0].processNonce)},
        {"@ADDR_U@", bytesOf(reinterpret_cast<uintptr_t>(n->user->data()))},
        {"@ADDR_O@", bytesOf(reinterpret_cast<uintptr_t>(n->owned->data()))},
        {"@SHMKEY@", bytesOf(key)},
    };
    return n;
  }();
  return *w;
}

void import(const World& w, const std::string& blob) {
  for (const auto& conn : w.ends[1]) {
    std::shared_ptr<RemoteMemory> remote;
    if (conn->importMemory(blob, &remote) != tsrSuccess) continue;
    // Both memories have kBytes. (The blob's memory id is a label: inproc finds the memory by
    // it, shm by the fd server's key, so an shm import may carry any id.)
    if (remote->size() > kBytes) broken("an import describes more bytes than the peer registered");
    if (remote->mapped() != nullptr && remote->size() > 0) {
      const volatile uint8_t* p = static_cast<const uint8_t*>(remote->mapped());
      (void)p[0];
      (void)p[remote->size() - 1];
    }
  }
}

void writeSeeds(const World& w, const char* dir) {
  int n = 0;
  for (const auto& m : {w.user, w.owned}) {
    std::string blob;
    if (m->serialize(&blob) != tsrSuccess) broken("serialize failed");
    std::string path = std::string(dir) + "/live_" + std::to_string(n++) + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) broken("cannot write a seed");
    std::string t = tokenized(w, blob);
    std::fwrite(t.data(), 1, t.size(), f);
    std::fclose(f);
    if (live(w, t) != blob) broken("tokens do not round-trip");
  }
}

}  // namespace
}  // namespace tessera::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  const auto& w = tessera::fuzz::world();
  if (const char* dir = std::getenv("TESSERA_FUZZ_SEEDS")) tessera::fuzz::writeSeeds(w, dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& w = tessera::fuzz::world();
  std::string blob(reinterpret_cast<const char*>(data), size);
  tessera::fuzz::import(w, blob);
  std::string patched = tessera::fuzz::live(w, blob);
  if (patched != blob) tessera::fuzz::import(w, patched);
  return 0;
}
