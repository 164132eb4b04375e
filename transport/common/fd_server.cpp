// The process-wide descriptor server (fd_server.hpp).
//
// The wire protocol is in fd_wire.hpp; the client side in fd_client.cpp.
//
// Lifetime: the server object is never freed, so no destructor can race with its thread or
// terminate on a joinable std::thread. An atexit handler wakes the thread, which closes every
// socket, and joins it before static destructors run (a thread still exiting while the process
// tears down is what crashes). In a forked child (pthread_atfork),
// the parent's listening socket, accepted connections and offered duplicates are closed: a
// child keeping them would hide the parent's death from its watchers, and keep memory alive.
#include "transport/common/fd_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/hash.hpp"
#include "transport/common/fd_wire.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

using namespace fdwire;

class FdServerImpl final : public FdServer {
 public:
  const std::string& address() const override { return address_; }
  pid_t pid() const { return pid_; }

  Result start() {
    pid_ = getpid();
    address_ = strprintf("tessera-fd-%d-%016llx", static_cast<int>(pid_),
                         static_cast<unsigned long long>(randomNonce64()));
    sockaddr_un sa;
    socklen_t len;
    if (!makeAddress(address_, &sa, &len))
      return TSR_FAIL(tsrInternalError, "fd server: address %s is too long", address_.c_str());
    listenFd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listenFd_ < 0)
      return TSR_FAIL(tsrSystemError, "fd server: socket(AF_UNIX) failed: %s",
                      std::strerror(errno));
    if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
        ::listen(listenFd_, 128) != 0) {
      int e = errno;
      closeAll();
      return TSR_FAIL(tsrSystemError, "fd server: bind/listen on abstract socket %s failed: %s",
                      address_.c_str(), std::strerror(e));
    }
    wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeFd_ < 0) {
      int e = errno;
      closeAll();
      return TSR_FAIL(tsrSystemError, "fd server: eventfd failed: %s", std::strerror(e));
    }
    running_ = true;
    try {
      thread_ = std::thread(&FdServerImpl::serve, this);
    } catch (const std::exception& ex) {
      running_ = false;
      closeAll();
      return TSR_FAIL(tsrSystemError, "fd server: cannot start its thread: %s", ex.what());
    }
    // Until the thread runs, a fork (instance()'s caller may fork next) could copy its start-up
    // half done, with a lock of the thread library or of a sanitizer's allocator held; after it,
    // the thread allocates only under mutex_, which the fork handlers hold across a fork. A
    // thread that has not run after 10 s (a starved machine) is waited for no longer.
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_.wait_for(lock, std::chrono::seconds(10), [this] { return serving_; }))
      TSR_WARN("fd server %s: its thread has not started after 10 s; going on", address_.c_str());
    return tsrSuccess;
  }

  Result offer(int fd, uint64_t* key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_)
      return TSR_FAIL(tsrInternalError, "fd server %s: offer while the process is exiting",
                      address_.c_str());
    int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0)
      return TSR_FAIL(tsrSystemError, "fd server %s: dup of fd %d to offer it failed: %s",
                      address_.c_str(), fd, std::strerror(errno));
    uint64_t k;
    do k = randomNonce64();
    while (offers_.count(k) != 0);
    offers_.emplace(k, dup);
    *key = k;
    return tsrSuccess;
  }

  void withdraw(uint64_t key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = offers_.find(key);
    if (it == offers_.end()) return;
    ::close(it->second);
    offers_.erase(it);
  }

  // atexit: ask the thread to close everything and join it, so that it has fully exited before
  // static destructors run. It never blocks for long; should it not answer within a second, it is
  // detached and the process exits around it.
  void stop() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!running_ || stopping_) return;
    stopping_ = true;
    uint64_t one = 1;
    ssize_t n = ::write(wakeFd_, &one, sizeof one);
    (void)n;
    bool done = stopped_.wait_for(lock, std::chrono::seconds(1), [this] { return !running_; });
    lock.unlock();
    if (!thread_.joinable()) return;
    if (done)
      thread_.join();
    else
      thread_.detach();
  }

  // fork: the child has no thread; the mutex was held by the prepare handler and is released
  // here. Closes what the child inherited (see the file comment).
  void abandonInChild() {
    for (auto& c : clients_) ::close(c.fd);
    clients_.clear();
    for (auto& o : offers_) ::close(o.second);
    offers_.clear();
    if (listenFd_ >= 0) ::close(listenFd_);
    if (wakeFd_ >= 0) ::close(wakeFd_);
    listenFd_ = wakeFd_ = -1;
    running_ = false;
    stopping_ = true;
  }

  std::mutex& mutex() { return mutex_; }

 private:
  struct Client {
    int fd;
    size_t got;  // request bytes read so far
    Request request;
    bool watching;
  };

  void closeAll() {
    if (listenFd_ >= 0) ::close(listenFd_);
    if (wakeFd_ >= 0) ::close(wakeFd_);
    listenFd_ = wakeFd_ = -1;
  }

  // Every allocation and free of this thread happens under mutex_, which the fork handlers hold
  // across a fork: a forked child never inherits an allocator lock this thread held, which
  // glibc's malloc survives but a sanitizer's allocator (GCC 12's ASan) does not — the child's
  // own server thread then waited forever on it (FdServer.WatchSeesAForkedChildsServerExit
  // under ASan, once in a CI run).
  void serve() {
    std::vector<pollfd> fds;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fds.reserve(16);
      serving_ = true;
    }
    started_.notify_all();
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        fds.clear();
        fds.push_back({wakeFd_, POLLIN, 0});
        fds.push_back({listenFd_, POLLIN, 0});
        for (const auto& c : clients_) fds.push_back({c.fd, POLLIN | POLLRDHUP, 0});
      }
      int n = ::poll(fds.data(), fds.size(), -1);
      if (n <= 0) {
        // EINTR, or a shortage (ENOMEM) that may pass: a server that quit would look like a
        // dead process to every peer.
        if (n < 0 && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (fds[0].revents != 0) break;  // stop()
      // Under the lock: a fork (whose prepare handler takes it) never sees clients_ half-changed,
      // and withdraw() cannot close a descriptor while it is being sent. Nothing here blocks.
      std::lock_guard<std::mutex> lock(mutex_);
      // Clients first (their indices match fds), then new connections.
      std::vector<Client> keep;
      keep.reserve(clients_.size());
      for (size_t i = 0; i < clients_.size(); ++i) {
        Client c = clients_[i];
        if (fds[i + 2].revents == 0 || serviceClient(&c)) {
          keep.push_back(c);
        } else {
          ::close(c.fd);
        }
      }
      clients_.swap(keep);
      if (fds[1].revents & POLLIN) acceptAll();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : clients_) ::close(c.fd);
    clients_.clear();
    for (auto& o : offers_) ::close(o.second);
    offers_.clear();
    closeAll();
    running_ = false;
    stopped_.notify_all();
  }

  void acceptAll() {
    for (;;) {
      int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        // Out of descriptors: back off rather than spin on a listening socket that stays ready.
        if (errno == EMFILE || errno == ENFILE)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;  // EAGAIN, or a transient error: poll tells us again
      }
      clients_.push_back({fd, 0, {}, false});
    }
  }

  // Reads what the client sent; answers a complete request. False: close the connection.
  bool serviceClient(Client* c) {
    if (c->watching) {
      // A watcher never sends; readable means it closed its end (or misbehaves).
      char b;
      ssize_t r = ::recv(c->fd, &b, 1, MSG_DONTWAIT);
      return r < 0 && (errno == EAGAIN || errno == EINTR);
    }
    auto* dst = reinterpret_cast<char*>(&c->request) + c->got;
    ssize_t r = ::recv(c->fd, dst, sizeof(Request) - c->got, MSG_DONTWAIT);
    if (r < 0) return errno == EAGAIN || errno == EINTR;
    if (r == 0) return false;
    c->got += static_cast<size_t>(r);
    if (c->got < sizeof(Request)) return true;
    const Request& q = c->request;
    Reply reply{kReplyMagic, kBadRequest};
    if (q.magic != kRequestMagic || (q.op != kOpFetch && q.op != kOpWatch)) {
      sendReply(c->fd, reply, -1);
      return false;
    }
    if (q.op == kOpWatch) {
      reply.status = kGranted;
      c->watching = sendReply(c->fd, reply, -1);
      return c->watching;
    }
    auto it = offers_.find(q.key);
    reply.status = it == offers_.end() ? kUnknownKey : kGranted;
    sendReply(c->fd, reply, it == offers_.end() ? -1 : it->second);
    return false;
  }

  // An 8-byte reply to a fresh socket fits its buffer: MSG_DONTWAIT never has to wait.
  static bool sendReply(int sock, const Reply& reply, int fd) {
    iovec iov{const_cast<Reply*>(&reply), sizeof reply};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    return ::sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof reply);
  }

  pid_t pid_ = 0;
  std::string address_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  std::vector<Client> clients_;  // changed by the server thread only, under mutex_
  std::mutex mutex_;
  std::condition_variable stopped_;
  std::condition_variable started_;
  bool serving_ = false;  // the thread runs (start() waits for it)
  std::thread thread_;    // joined by stop(); in a forked child it names no thread and is left
  bool running_ = false;
  bool stopping_ = false;
  std::unordered_map<uint64_t, int> offers_;
};

// Never destroyed (see the file comment).
std::mutex& instanceMutex() {
  static auto* m = new std::mutex;
  return *m;
}
FdServerImpl* gServer = nullptr;

void atExitStop() {
  std::lock_guard<std::mutex> lock(instanceMutex());
  if (gServer != nullptr && gServer->pid() == getpid()) gServer->stop();
}
void forkPrepare() {
  instanceMutex().lock();
  if (gServer != nullptr) gServer->mutex().lock();
}
void forkParent() {
  if (gServer != nullptr) gServer->mutex().unlock();
  instanceMutex().unlock();
}
void forkChild() {
  if (gServer != nullptr) {
    gServer->mutex().unlock();
    gServer->abandonInChild();
    gServer = nullptr;  // leaked on purpose: the child starts its own on first use
  }
  instanceMutex().unlock();
}

}  // namespace

Result FdServer::instance(FdServer** out) {
  std::lock_guard<std::mutex> lock(instanceMutex());
  static bool hooked = false;
  if (!hooked) {
    if (pthread_atfork(forkPrepare, forkParent, forkChild) != 0 || std::atexit(atExitStop) != 0)
      return TSR_FAIL(tsrSystemError, "fd server: cannot register its fork/exit handlers");
    hooked = true;
  }
  // A child made without the fork handlers (a raw clone) still gets its own server.
  if (gServer != nullptr && gServer->pid() != getpid()) {
    gServer->abandonInChild();
    gServer = nullptr;
  }
  if (gServer == nullptr) {
    auto* s = new FdServerImpl();
    Result r = s->start();
    if (r != tsrSuccess) {
      delete s;
      return r;
    }
    gServer = s;
  }
  *out = gServer;
  return tsrSuccess;
}

}  // namespace tessera
