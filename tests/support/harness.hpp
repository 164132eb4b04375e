// Test helpers: run a body on N in-process ranks (threads) with a deadline, and skip GPU tests
// with the reason where there is no device.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace tessera::test {

// Runs body(rank) on `nranks` threads and joins them. If they have not all returned after
// `deadlineSeconds`, the test fails naming the ranks still running, and the process exits
// (a hung rank cannot be cancelled; ending the process is the only way not to hang ctest).
void runRanks(int nranks, const std::function<void(int rank)>& body, double deadlineSeconds = 60);

// Polls `done` every millisecond until it holds or `seconds` pass; false on the deadline. A
// test that must wait until something has happened (a thread is running, a peer has posted, a
// file exists) waits on that, not on a guessed sleep: a guess flakes on a slow machine and
// wastes time on a fast one.
bool waitUntil(const std::function<bool()>& done, double seconds);

// Forks `n` children (ranks as processes); child r runs body(r) and _exits with its return
// value (an exception: 98). Call it from a process with no other thread running: a child
// inherits every lock another thread held at the fork, and where no fork handler releases it
// (ASan's allocator in GCC 12 has none, unlike glibc's malloc) the child hangs on its first use.
// So ranks that join one unique id get an id whose root rank 0 starts (loopbackCommId), not one
// with a root thread in the parent. Waits at most `timeoutSeconds`, then kills what is left.
// Returns each child's exit code (128 + signal when it was killed; -1 when the fork failed).
std::vector<int> forkRanks(int n, const std::function<int(int rank)>& body, double timeoutSeconds);

// "127.0.0.1:<port>" with a port that was free a moment ago: with TESSERA_COMM_ID set to it,
// tsrGetUniqueId (createUserUniqueId) makes an id without starting a root in this process, and
// rank 0 starts the root when it joins.
std::string loopbackCommId();

// Sets an environment variable for the life of the object, then restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);  // value == nullptr: unset
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool hadOld_ = false;
};

// Refuses process_vm_readv / process_vm_writev to this process from now on (EPERM), as a
// container's seccomp filter does; true when the filter is in place. Call it in a forked rank.
bool denyCrossMemoryForTest();

// Empty when a CUDA device is usable; otherwise why not (no CUDA in this build, no driver,
// no device). Every test binary links tessera_core, which answers this.
std::string gpuUnavailableReason();

// Folder of shared test topologies (../shared/topologies next to the source tree), or "" when
// absent, as in a user's clone.
std::string sharedTopologiesDir();
// Folder of this repository's test data (tests/data).
std::string testDataDir();

}  // namespace tessera::test

#define TSR_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                          \
    std::string tsr_reason_ = ::tessera::test::gpuUnavailableReason();          \
    if (!tsr_reason_.empty()) GTEST_SKIP() << "no usable GPU: " << tsr_reason_; \
  } while (0)
