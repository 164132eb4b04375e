#include "comm/revoke.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "bootstrap/socket.hpp"
#include "core/deadline.hpp"
#include "core/env.hpp"
#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kInit;

// On the wire: fixed size, so a reader knows when a notice is whole.
constexpr uint64_t kNoticeMagic = 0x544b564552525354ull;  // "TSRREVKT"
struct WireNotice {
  uint64_t magic;
  uint64_t commId;
  int32_t toRank;
  int32_t fromRank;
  int32_t code;
  uint32_t whyBytes;
  char why[kRevokeWhyBytes];
};
static_assert(sizeof(WireNotice) == 32 + kRevokeWhyBytes);

// A connection that has not yet delivered its whole notice.
struct Pending {
  int fd = -1;
  WireNotice notice{};
  size_t got = 0;
  Clock::time_point since;
};

// The process's service: one listening socket and one thread while any endpoint exists.
class Service {
 public:
  static Service& instance() {
    static Service* s = new Service();  // never destroyed: endpoints may outlive static teardown
    return *s;
  }

  // Returns the address of the running service (starting it), or all zero.
  RevokeAddress join() {
    std::lock_guard<std::mutex> lock(lifeMutex_);
    forgetIfForked();
    if (members_++ == 0) start();
    return address_;
  }

  void leave() {
    std::lock_guard<std::mutex> lock(lifeMutex_);
    if (forgetIfForked()) return;  // an endpoint of the parent process, gone with its service
    if (--members_ == 0) stop();
  }

  void attach(uint64_t commId, int rank, RevokeSink* sink) {
    std::lock_guard<std::mutex> lock(sinkMutex_);
    sinks_[{commId, rank}] = sink;
  }

  // Waits for a delivery in progress (sinkMutex_ is held while a sink runs).
  void detach(uint64_t commId, int rank) {
    std::lock_guard<std::mutex> lock(sinkMutex_);
    sinks_.erase({commId, rank});
  }

  bool running() {
    std::lock_guard<std::mutex> lock(lifeMutex_);
    forgetIfForked();
    return thread_ != nullptr;
  }

 private:
  // A child of fork() has the parent's service state but not its thread: it starts afresh
  // (closing its copies of the parent's descriptors; the thread object is left, never joined).
  bool forgetIfForked() {
    if (pid_ == 0 || pid_ == getpid()) return false;
    (void)thread_.release();
    closeFd(&listenFd_);
    closeFd(&wakeFd_);
    address_ = RevokeAddress{};
    members_ = 0;
    pid_ = 0;
    std::lock_guard<std::mutex> lock(sinkMutex_);
    sinks_.clear();
    return true;
  }

  void start() {
    address_ = RevokeAddress{};
    SocketAddress where;
    std::string ifname;
    Result r = pickBootstrapAddress(&where, &ifname);
    int fd = -1;
    SocketAddress bound;
    if (r == tsrSuccess) r = listenOn(where, &fd, &bound);
    if (r != tsrSuccess) {
      TSR_INFO(
          "revocation notices: no service in this process (%s); its ranks learn of faults "
          "from their own peers and deadlines only",
          lastErrorMessage());
      clearLastError();
      return;
    }
    wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wakeFd_ < 0) {
      closeFd(&fd);
      TSR_INFO("revocation notices: no service in this process (eventfd: %s)", strerror(errno));
      return;
    }
    listenFd_ = fd;
    encodeAddress(bound, address_.data());
    try {
      thread_ = std::make_unique<std::thread>([this] { loop(); });
      pid_ = getpid();
    } catch (...) {
      closeFd(&listenFd_);
      closeFd(&wakeFd_);
      address_ = RevokeAddress{};
      TSR_INFO("revocation notices: no service in this process (no thread)");
    }
  }

  void stop() {
    if (thread_ != nullptr) {
      uint64_t one = 1;
      ssize_t ignored = write(wakeFd_, &one, sizeof(one));
      (void)ignored;
      thread_->join();
      thread_.reset();
    }
    pid_ = 0;
    closeFd(&listenFd_);
    closeFd(&wakeFd_);
    address_ = RevokeAddress{};
  }

  void loop() {
    // Signals sent to the process (SIGUSR1 of TESSERA_DUMP_ON_TIMEOUT, the application's own)
    // go to threads that handle them as the application expects, not to this one.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::vector<Pending> pending;
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wakeFd_, POLLIN, 0}, {listenFd_, POLLIN, 0}});
      for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0});
      int rc = ::poll(fds.data(), fds.size(), 100);
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents != 0) break;  // stop()
      if (fds[1].revents & POLLIN) {
        for (;;) {
          int c = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          if (pending.size() >= 256) {  // a flood: the oldest pending ones are kept
            ::close(c);
            continue;
          }
          pending.push_back(Pending{c, {}, 0, Clock::now()});
        }
      }
      const auto now = Clock::now();
      for (size_t i = 0; i < pending.size();) {
        Pending& p = pending[i];
        bool done = false;
        size_t got = 0;
        int err = 0;
        Io io = readSome(p.fd, reinterpret_cast<uint8_t*>(&p.notice) + p.got,
                         sizeof(WireNotice) - p.got, &got, &err);
        p.got += got;
        if (p.got == sizeof(WireNotice)) {
          deliver(p.notice);
          done = true;
        } else if (io != Io::kOk || now - p.since > std::chrono::seconds(1)) {
          done = true;  // closed early, an error, or too slow: not a notice
        }
        if (done) {
          ::close(p.fd);
          pending[i] = pending.back();
          pending.pop_back();
        } else {
          ++i;
        }
      }
    }
    for (Pending& p : pending) ::close(p.fd);
  }

  void deliver(WireNotice& w) {
    if (w.magic != kNoticeMagic || w.toRank < 0 || w.fromRank < 0) return;
    RevokeNotice n;
    n.commId = w.commId;
    n.toRank = w.toRank;
    n.fromRank = w.fromRank;
    n.code = static_cast<Result>(w.code);
    if (n.code == tsrSuccess || n.code == tsrInProgress || w.code < 0 || w.code > 64)
      n.code = tsrRemoteError;
    n.why.assign(w.why, std::min<size_t>(w.whyBytes, kRevokeWhyBytes - 1));
    n.why.erase(std::find(n.why.begin(), n.why.end(), '\0'), n.why.end());
    std::lock_guard<std::mutex> lock(sinkMutex_);
    auto it = sinks_.find({n.commId, n.toRank});
    if (it != sinks_.end()) it->second->revokedByPeer(n);
  }

  std::mutex lifeMutex_;  // members_, start and stop
  int members_ = 0;
  RevokeAddress address_{};
  int listenFd_ = -1;
  int wakeFd_ = -1;
  std::unique_ptr<std::thread> thread_;
  pid_t pid_ = 0;         // the process that started thread_
  std::mutex sinkMutex_;  // sinks_, held while a sink runs
  std::map<std::pair<uint64_t, int>, RevokeSink*> sinks_;
};

}  // namespace

bool revokeNoticesEnabled() {
  bool on = true;
  if (envBool("TESSERA_REVOKE_NOTICES", &on) != tsrSuccess) {
    TSR_WARN("%s; revocation notices stay on", lastErrorMessage());
    clearLastError();
    on = true;
  }
  return on;
}

std::unique_ptr<RevokeEndpoint> RevokeEndpoint::open() {
  std::unique_ptr<RevokeEndpoint> e(new RevokeEndpoint());
  if (!revokeNoticesEnabled()) return e;
  e->address_ = Service::instance().join();
  e->joined_ = true;
  return e;
}

RevokeEndpoint::~RevokeEndpoint() {
  detach();
  if (joined_) Service::instance().leave();
}

void RevokeEndpoint::attach(uint64_t commId, int rank, RevokeSink* sink) {
  detach();
  if (!joined_) return;
  Service::instance().attach(commId, rank, sink);
  attached_ = true;
  commId_ = commId;
  rank_ = rank;
}

void RevokeEndpoint::detach() {
  if (!attached_) return;
  Service::instance().detach(commId_, rank_);
  attached_ = false;
}

bool revokeServiceRunning() { return Service::instance().running(); }

int sendRevokeNotices(const std::vector<RevokeAddress>& peers, RevokeNotice notice,
                      double seconds) {
  const Deadline deadline = Deadline::after(seconds);
  struct Out {
    int fd;
    WireNotice w;
    size_t put;
  };
  std::vector<Out> outs;
  WireNotice base{};
  base.magic = kNoticeMagic;
  base.commId = notice.commId;
  base.fromRank = notice.fromRank;
  base.code = static_cast<int32_t>(notice.code);
  const size_t whyBytes = std::min(notice.why.size(), kRevokeWhyBytes - 1);
  std::memcpy(base.why, notice.why.data(), whyBytes);
  base.whyBytes = static_cast<uint32_t>(whyBytes);
  const RevokeAddress none{};
  int took = 0;
  // In batches, so a large communicator does not open thousands of sockets at once.
  constexpr size_t kBatch = 128;
  for (size_t first = 0; first < peers.size(); first += kBatch) {
    outs.clear();
    for (size_t p = first; p < std::min(peers.size(), first + kBatch); ++p) {
      if (static_cast<int>(p) == notice.fromRank || peers[p] == none) continue;
      SocketAddress a;
      if (!decodeAddress(peers[p].data(), &a)) continue;
      int fd = ::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      int rc;
      do {
        rc = ::connect(fd, a.get(), a.length);
      } while (rc != 0 && errno == EINTR);
      if (rc != 0 && errno != EINPROGRESS) {
        ::close(fd);
        continue;
      }
      Out o{fd, base, 0};
      o.w.toRank = static_cast<int32_t>(p);
      outs.push_back(o);
    }
    // Each connection writes its notice as soon as it is connected (the notice fits the socket's
    // send buffer, so one write takes it).
    while (!outs.empty()) {
      std::vector<pollfd> fds;
      for (const Out& o : outs) fds.push_back({o.fd, POLLOUT, 0});
      const double left = deadline.remainingSeconds();
      if (left <= 0) break;
      int rc = ::poll(fds.data(), fds.size(), std::max(1, static_cast<int>(left * 1000)));
      if (rc < 0 && errno != EINTR) break;
      for (size_t i = fds.size(); i-- > 0;) {
        if (fds[i].revents == 0) continue;
        Out& o = outs[i];
        bool done = (fds[i].revents & (POLLERR | POLLHUP)) != 0;
        if (!done) {
          size_t put = 0;
          int err = 0;
          Io io = writeSome(o.fd, reinterpret_cast<uint8_t*>(&o.w) + o.put,
                            sizeof(WireNotice) - o.put, &put, &err);
          o.put += put;
          if (o.put == sizeof(WireNotice)) {
            ++took;
            done = true;
          } else if (io != Io::kOk) {
            done = true;
          }
        }
        if (done) {
          ::close(o.fd);
          outs[i] = outs.back();
          outs.pop_back();
        }
      }
    }
    for (Out& o : outs) ::close(o.fd);
  }
  return took;
}

}  // namespace tessera
