// Registered user memory over shm: a pointer inside a tsrMemAlloc allocation (host_alloc.hpp) is
// shareable with other processes, at its offset; memory from malloc is not, and the shm section
// says why. Also the allocation table's own checks.
#include <cstdlib>
#include <cstring>

#include "transport/host_alloc.hpp"
#include "transport/semaphore.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

constexpr size_t kAlloc = 3 * 4096 + 100;
constexpr size_t kOffset = 4096 + 24;  // a sub-range not at a page boundary
constexpr size_t kBytes = 5000;

TEST(SharedHostAlloc, TableChecks) {
  void* p = nullptr;
  EXPECT_EQ(sharedHostAlloc(0, &p), tsrInvalidArgument);
  EXPECT_EQ(sharedHostAlloc(16, nullptr), tsrInvalidArgument);
  ASSERT_EQ(sharedHostAlloc(kAlloc, &p), tsrSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(static_cast<unsigned char*>(p)[kAlloc - 1], 0u);  // zero-filled
  SharedHostRegion r;
  ASSERT_TRUE(sharedHostLookup(static_cast<char*>(p) + kOffset, kBytes, &r));
  EXPECT_EQ(r.base, p);
  EXPECT_GE(r.bytes, kAlloc);
  EXPECT_GE(r.fd, 0);
  close(r.fd);
  EXPECT_FALSE(sharedHostLookup(static_cast<char*>(p) + kOffset, r.bytes, &r));  // runs past
  int onStack = 0;
  EXPECT_FALSE(sharedHostLookup(&onStack, sizeof onStack, &r));
  EXPECT_EQ(sharedHostFree(static_cast<char*>(p) + 8), tsrInvalidArgument);  // not the start
  EXPECT_EQ(sharedHostFree(p), tsrSuccess);
  EXPECT_EQ(sharedHostFree(p), tsrInvalidArgument);  // twice
  EXPECT_EQ(sharedHostFree(nullptr), tsrSuccess);
}

// Each rank registers [kOffset, +kBytes) of its allocation; its peer writes a pattern there
// through the mapping and signals; the owner checks the bytes around the range are untouched.
std::string peerWritesMyRange(TransportContext& ctx) {
  const int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> c;
  TT_CHECK_OK(ctx.connect(peer, &c));
  TT_CHECK(c->kind() == TransportKind::kShm, "picked %s", transportName(c->kind()));
  void* base = nullptr;
  TT_CHECK_OK(sharedHostAlloc(kAlloc, &base));
  auto* bytes = static_cast<unsigned char*>(base);
  std::memset(bytes, 0xEE, kAlloc);
  std::shared_ptr<Memory> mine, malloced;
  TT_CHECK_OK(ctx.registerMemory(bytes + kOffset, kBytes, MemoryKind::kHost, &mine));
  TT_CHECK(mine->memfd() >= 0 && mine->memfdOffset() == kOffset, "memfd %d offset %zu",
           mine->memfd(), mine->memfdOffset());
  std::vector<unsigned char> heap(kBytes);
  TT_CHECK_OK(ctx.registerMemory(heap.data(), heap.size(), MemoryKind::kHost, &malloced));
  TT_CHECK(malloced->memfd() < 0, "malloc memory has no memfd");

  std::shared_ptr<RemoteMemory> theirs;
  TT_CHECK_OK(ctx.exchangeMemory(*c, *mine, &theirs));
  TT_CHECK(theirs->mapped() != nullptr && theirs->size() == kBytes, "mapped %zu bytes",
           static_cast<size_t>(theirs->size()));
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctx.createSemaphore(c, &sem));
  auto* dst = static_cast<unsigned char*>(theirs->mapped());
  for (size_t i = 0; i < kBytes; ++i) dst[i] = static_cast<unsigned char>(i * 7 + me);
  TT_CHECK_OK(sem->signal());
  TT_CHECK_OK(sem->wait());
  for (size_t i = 0; i < kAlloc; ++i) {
    bool inside = i >= kOffset && i < kOffset + kBytes;
    unsigned char want = inside ? static_cast<unsigned char>((i - kOffset) * 7 + peer) : 0xEE;
    TT_CHECK(bytes[i] == want, "byte %zu: %u, expected %u", i, bytes[i], want);
  }

  // malloc memory: the import fails with the owner's reason, nothing is mapped.
  std::string blob;
  TT_CHECK_OK(malloced->serialize(&blob));
  std::string theirBlob(blob.size() + 4096, '\0');
  size_t n = blob.size();
  TT_CHECK_OK(ctx.bootstrap().send(peer, 77, &n, sizeof n));
  TT_CHECK_OK(ctx.bootstrap().send(peer, 78, blob.data(), n));
  size_t m = 0;
  TT_CHECK_OK(ctx.bootstrap().recv(peer, 77, &m, sizeof m));
  theirBlob.resize(m);
  TT_CHECK_OK(ctx.bootstrap().recv(peer, 78, theirBlob.data(), m));
  std::shared_ptr<RemoteMemory> none;
  TT_CHECK(c->importMemory(theirBlob, &none) == tsrInvalidArgument, "malloc memory imported");
  TT_CHECK(std::strstr(lastErrorMessage(), "tsrMemAlloc") != nullptr, "sentence: %s",
           lastErrorMessage());

  TT_CHECK_OK(ctx.bootstrap().barrier());
  theirs.reset();
  mine.reset();
  TT_CHECK_OK(sharedHostFree(base));
  return "";
}

TEST(TransportShm, RegisteredSharedHostMemoryAtAnOffset) {
  expectAllRanksOk(runTransportRanks(RankMode::kProcesses, 2, peerWritesMyRange));
  EXPECT_TRUE(tesseraShmEntries().empty());
}

}  // namespace
}  // namespace tessera::test
