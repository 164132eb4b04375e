// The fd server on its own: offer / fetch / withdraw in one process, refusals, and watches that
// notice a serving process die (also when that process left a forked child behind).
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "support/harness.hpp"
#include "transport/common/fd_server.hpp"
#include "transport_test_util.hpp"

namespace tessera::test {
namespace {

int makeMemfd(size_t bytes, uint8_t fill) {
  int fd = memfd_create("tessera-test", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return -1;
  std::string data(bytes, static_cast<char>(fill));
  if (pwrite(fd, data.data(), bytes, 0) != static_cast<ssize_t>(bytes)) return -1;
  return fd;
}

// Reads exactly `bytes` from a pipe, waiting at most `ms` in all.
bool readFull(int fd, void* data, size_t bytes, int ms = 10000) {
  auto* p = static_cast<char*>(data);
  Deadline d = Deadline::after(ms / 1000.0);
  while (bytes > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, d.remainingMs()) <= 0) return false;
    ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool sendAddress(int fd, const std::string& a) {
  uint32_t n = static_cast<uint32_t>(a.size());
  return write(fd, &n, sizeof n) == sizeof n &&
         write(fd, a.data(), a.size()) == static_cast<ssize_t>(a.size());
}

bool readAddress(int fd, std::string* a) {
  uint32_t n = 0;
  if (!readFull(fd, &n, sizeof n) || n == 0 || n > 200) return false;
  a->assign(n, '\0');
  return readFull(fd, a->data(), n);
}

// Polls peerGone for up to `seconds`.
bool goneWithin(int sock, double seconds) {
  return test::waitUntil([&] { return peerGone(sock); }, seconds);
}

TEST(FdServer, OfferFetchGivesAWorkingDuplicateUntilWithdrawn) {
  FdServer* server = nullptr;
  ASSERT_EQ(FdServer::instance(&server), tsrSuccess) << lastErrorMessage();
  const std::string& address = server->address();
  EXPECT_NE(address.find("tessera"), std::string::npos) << address;
  EXPECT_NE(address.find(std::to_string(getpid())), std::string::npos) << address;
  FdServer* again = nullptr;
  ASSERT_EQ(FdServer::instance(&again), tsrSuccess);
  EXPECT_EQ(again, server);

  constexpr size_t kBytes = 8192;
  int fd = makeMemfd(kBytes, 0x5a);
  ASSERT_GE(fd, 0);
  uint64_t key = 0;
  ASSERT_EQ(server->offer(fd, &key), tsrSuccess) << lastErrorMessage();
  EXPECT_NE(key, 0u);
  close(fd);  // the server keeps its own duplicate

  int got = -1;
  ASSERT_EQ(fetchFd(address, key, Deadline::after(5), &got), tsrSuccess) << lastErrorMessage();
  ASSERT_GE(got, 0);
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0);
  ASSERT_NE(p, MAP_FAILED);
  close(got);
  auto* bytes = static_cast<uint8_t*>(p);
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[kBytes - 1], 0x5a);
  bytes[100] = 0x11;

  // A second fetch maps the same pages.
  int second = -1;
  ASSERT_EQ(fetchFd(address, key, Deadline::after(5), &second), tsrSuccess) << lastErrorMessage();
  void* q = mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, second, 0);
  ASSERT_NE(q, MAP_FAILED);
  close(second);
  EXPECT_EQ(static_cast<uint8_t*>(q)[100], 0x11);
  munmap(q, kBytes);
  munmap(p, kBytes);

  server->withdraw(key);
  int refused = 123;
  EXPECT_EQ(fetchFd(address, key, Deadline::after(5), &refused), tsrRemoteError);
  EXPECT_EQ(refused, -1);
  EXPECT_NE(std::string(lastErrorMessage()).find("refused"), std::string::npos)
      << lastErrorMessage();
  server->withdraw(key);  // twice is harmless
}

TEST(FdServer, UnknownKeyIsRefusedWithoutADescriptor) {
  FdServer* server = nullptr;
  ASSERT_EQ(FdServer::instance(&server), tsrSuccess) << lastErrorMessage();
  int fd = makeMemfd(4096, 1);
  ASSERT_GE(fd, 0);
  uint64_t key = 0;
  ASSERT_EQ(server->offer(fd, &key), tsrSuccess);
  close(fd);
  int got = 7;
  EXPECT_EQ(fetchFd(server->address(), key ^ 0x8000000000000001ull, Deadline::after(5), &got),
            tsrRemoteError);
  EXPECT_EQ(got, -1);
  EXPECT_NE(std::string(lastErrorMessage()).find("unknown key"), std::string::npos)
      << lastErrorMessage();
  server->withdraw(key);
}

TEST(FdServer, NoServerAtAnAddressIsARemoteError) {
  int got = 7, sock = 7;
  EXPECT_EQ(fetchFd("tessera-fd-nobody-listens-here", 1, Deadline::after(5), &got), tsrRemoteError);
  EXPECT_EQ(got, -1);
  EXPECT_EQ(watchFdServer("tessera-fd-nobody-listens-here", Deadline::after(5), &sock),
            tsrRemoteError);
  EXPECT_EQ(sock, -1);
  EXPECT_EQ(fetchFd("", 1, Deadline::after(5), &got), tsrInvalidArgument);
}

TEST(FdServer, WatchSeesAForkedChildsServerExit) {
  FdServer* mine = nullptr;
  ASSERT_EQ(FdServer::instance(&mine), tsrSuccess);  // started before the fork
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    FdServer* s = nullptr;
    if (FdServer::instance(&s) != tsrSuccess || !sendAddress(up[1], s->address())) _exit(1);
    char c;
    (void)!read(down[0], &c, 1);  // until told (or the parent is gone)
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  std::string address;
  ASSERT_TRUE(readAddress(up[0], &address));
  EXPECT_NE(address, mine->address()) << "a forked child must start its own server";
  EXPECT_NE(address.find(std::to_string(pid)), std::string::npos) << address;
  int watch = -1;
  // A bound, not a timing: under ASan on a loaded 2-core machine the child's new server thread
  // once took over 5 s to answer (a CI run while two builds ran).
  ASSERT_EQ(watchFdServer(address, Deadline::after(30), &watch), tsrSuccess) << lastErrorMessage();
  EXPECT_FALSE(peerGone(watch));
  int got = -1;
  EXPECT_EQ(fetchFd(address, 42, Deadline::after(5), &got), tsrRemoteError);
  EXPECT_FALSE(peerGone(watch)) << "a fetch on another connection must not end the watch";

  ASSERT_EQ(write(down[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(goneWithin(watch, 5));
  EXPECT_EQ(fetchFd(address, 42, Deadline::after(5), &got), tsrRemoteError);
  close(watch);
  close(up[0]);
  close(down[1]);
}

// The serving process forks a child after the watch was accepted, then exits: the child must not
// keep the server's sockets (else the watcher would never learn of the exit).
TEST(FdServer, AGrandchildDoesNotKeepADeadServerAlive) {
  int up[2], down[2], hold[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(hold), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    close(hold[1]);
    FdServer* s = nullptr;
    if (FdServer::instance(&s) != tsrSuccess || !sendAddress(up[1], s->address())) _exit(1);
    char c = 0;
    if (read(down[0], &c, 1) != 1 || c != 'f') _exit(2);
    if (fork() == 0) {
      char b;
      while (read(hold[0], &b, 1) > 0) {
      }
      _exit(0);  // the test closed its end of `hold`
    }
    if (write(up[1], "g", 1) != 1) _exit(3);
    if (read(down[0], &c, 1) != 1) _exit(4);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  close(hold[0]);
  std::string address;
  ASSERT_TRUE(readAddress(up[0], &address));
  int watch = -1;
  ASSERT_EQ(watchFdServer(address, Deadline::after(5), &watch), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(write(down[1], "f", 1), 1);
  char g = 0;
  ASSERT_TRUE(readFull(up[0], &g, 1));
  EXPECT_FALSE(peerGone(watch));
  ASSERT_EQ(write(down[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(goneWithin(watch, 5)) << "the grandchild kept the server's connection open";
  int got = -1;
  EXPECT_EQ(fetchFd(address, 1, Deadline::after(5), &got), tsrRemoteError)
      << "the grandchild kept the server's listening socket";
  close(watch);
  close(hold[1]);  // the grandchild exits
  close(up[0]);
  close(down[1]);
}

}  // namespace
}  // namespace tessera::test
