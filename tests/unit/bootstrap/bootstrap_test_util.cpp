#include "bootstrap_test_util.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "support/harness.hpp"

namespace tessera::test {

const char* kindName(Kind kind) { return kind == Kind::kInproc ? "inproc" : "tcp"; }

void runBootstrapRanks(Kind kind, int nranks, double timeoutSeconds,
                       const std::function<void(Bootstrap&)>& body) {
  BootstrapOptions options;
  options.timeoutSeconds = timeoutSeconds;
  std::shared_ptr<InprocGroup> group;
  tsrUniqueId id{};
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  if (kind == Kind::kInproc)
    ASSERT_EQ(InprocBootstrap::createGroup(nranks, options, &group), tsrSuccess);
  else
    ASSERT_EQ(createUniqueId(&id), tsrSuccess) << lastErrorMessage();
  runRanks(
      nranks,
      [&](int rank) {
        std::unique_ptr<Bootstrap> b;
        Result r = kind == Kind::kInproc ? group->join(rank, &b)
                                         : TcpBootstrap::create(id, rank, nranks, options, &b);
        ASSERT_EQ(r, tsrSuccess) << lastErrorMessage();
        ASSERT_EQ(b->rank(), rank);
        ASSERT_EQ(b->nranks(), nranks);
        body(*b);
      },
      // Generous: nothing here should take more than a few seconds.
      timeoutSeconds * 4 + 30);
}

std::vector<uint8_t> patternBuffer(int rank, int round, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(rank, round, i);
  return v;
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
  Stopwatch clock;
  for (bool left = true; left && clock.seconds() < timeoutSeconds;) {
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

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tessera::test
