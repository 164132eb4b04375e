#include "support/harness.hpp"

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
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
