// core_probe: the round trip of one cache line between two cores, a process pinned to each (CPU 0
// and CPU 1 unless given), in nanoseconds. The machine's state, not tessera's: on the CI machine
// class (a virtual machine whose two vCPUs the host places) it reads about 120 ns when both vCPUs
// share a last-level cache and about 550 ns when they do not, for tens of seconds at a time, and
// every byte a staged collective moves between the ranks crosses that path; perf/steadiness.sh
// prints it beside each launch.
//   core_probe [cpuA cpuB] [round trips]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int cpu[2] = {argc > 2 ? std::atoi(argv[1]) : 0, argc > 2 ? std::atoi(argv[2]) : 1};
  long trips = argc > 3 ? std::atol(argv[3]) : 100000;
  auto* line = static_cast<volatile uint64_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (line == MAP_FAILED) return 1;
  pid_t child = fork();
  int me = child == 0 ? 1 : 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu[me], &set);
  (void)sched_setaffinity(0, sizeof set, &set);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= static_cast<uint64_t>(trips); ++i) {
    if (me == 0) {
      __atomic_store_n(&line[0], i, __ATOMIC_RELEASE);
      while (__atomic_load_n(&line[8], __ATOMIC_ACQUIRE) != i) {
      }
    } else {
      while (__atomic_load_n(&line[0], __ATOMIC_ACQUIRE) != i) {
      }
      __atomic_store_n(&line[8], i, __ATOMIC_RELEASE);
    }
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  if (me == 1) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("%.0f\n", ns / static_cast<double>(trips));
  return 0;
}
