#include "support/harness.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cuda_driver.hpp"

namespace tessera::test {

void runRanks(int nranks, const std::function<void(int rank)>& body, double deadlineSeconds) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> done(static_cast<size_t>(nranks), false);
  int remaining = nranks;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      body(r);
      std::lock_guard<std::mutex> lock(mu);
      done[static_cast<size_t>(r)] = true;
      --remaining;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  bool finished = cv.wait_for(lock, std::chrono::duration<double>(deadlineSeconds),
                              [&] { return remaining == 0; });
  if (!finished) {
    std::string stuck;
    for (int r = 0; r < nranks; ++r)
      if (!done[static_cast<size_t>(r)]) stuck += " " + std::to_string(r);
    std::fprintf(stderr,
                 "runRanks: ranks%s did not finish within %.1f s; aborting the test process\n",
                 stuck.c_str(), deadlineSeconds);
    std::fflush(stderr);
    ADD_FAILURE() << "ranks" << stuck << " did not finish within " << deadlineSeconds << " s";
    std::_Exit(3);
  }
  lock.unlock();
  for (auto& t : threads) t.join();
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) {
    hadOld_ = true;
    old_ = old;
  }
  if (value == nullptr)
    unsetenv(name);
  else
    setenv(name, value, 1);
}

ScopedEnv::~ScopedEnv() {
  if (hadOld_)
    setenv(name_.c_str(), old_.c_str(), 1);
  else
    unsetenv(name_.c_str());
}

bool waitUntil(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the poll step, not a guess
  }
  return true;
}

std::string loopbackCommId() {
  // Bind port 0, read the port the kernel chose, close: free now, and rank 0 binds it soon.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return "127.0.0.1:" + std::to_string(port);
}

std::vector<int> forkRanks(int n, const std::function<int(int rank)>& body, double timeoutSeconds) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 97;
      try {
        code = body(r);
      } catch (...) {
        code = 98;
      }
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);  // -1 (fork failed) shows up as a failed child below
  }
  std::vector<int> codes(static_cast<size_t>(n), -1);
  auto record = [&](size_t i, int status) {
    codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pids[i] = 0;
  };
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (bool left = true; left && elapsed() < timeoutSeconds;) {
    left = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i])
        record(i, status);
      else
        left = true;
    }
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0) continue;
    std::fprintf(stderr, "forkRanks: child %zu still runs after %.0f s; killing it\n", i,
                 timeoutSeconds);
    kill(pids[i], SIGKILL);
    int status = 0;
    waitpid(pids[i], &status, 0);
    record(i, status);
  }
  return codes;
}

std::string gpuUnavailableReason() {
  std::string why;
  return cudaDeviceCount(&why) > 0 ? std::string() : why;
}

static bool isDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string sharedTopologiesDir() {
  std::string p = std::string(TESSERA_SOURCE_DIR) + "/../shared/topologies";
  return isDir(p) ? p : std::string();
}

std::string testDataDir() { return std::string(TESSERA_SOURCE_DIR) + "/tests/data"; }

}  // namespace tessera::test

namespace tessera::test {

bool denyCrossMemoryForTest() {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace tessera::test
