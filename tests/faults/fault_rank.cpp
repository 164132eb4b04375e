// One rank of the fault tests (tests/faults/README.md), written against the public C API only, as
// a user's program would be. The Python driver starts several of these (in network namespaces
// where it can), injects a fault and reads what each printed.
//
//   fault_rank <rank> <nranks> <id file> <mode>
//     mode run:  init, then FAULT_ITERS calls (0: until one fails or FAULT_MAX_SECONDS pass),
//                cycling all-reduce, all-gather, reduce-scatter and broadcast, each result checked
//     mode hold: rank 0 only: makes the unique id (starting the bootstrap root in this process),
//                publishes it and waits to be killed without joining (the root dies during init)
//     mode grow: a replacement process: reads a grow id from <id file> (written by the shrunk
//                survivors' rank 0) and joins their tsrCommGrow as new rank <rank> of <nranks>
//                (comm NULL), then runs and checks the calls as they do (GROW line)
//
// Rank 0 makes the unique id and writes it to <id file> (written to a temporary name, then
// renamed, so a reader never sees half of it); the others wait for the file.
//
// Lines on stdout, one event each, read by the driver:
//   STAGE rank=R stage=joining|ready|hold   before init; once every plan is bound; holding
//   ERROR rank=R t=<unix seconds> code=<result> call=<n> coll=<name> msg=<tsrGetLastError>
//   OK rank=R calls=<n>                  every call succeeded and was right
//   ABORT rank=R result=<code> seconds=<s>  after an error: tsrCommAbort's result and duration
//   WRONG rank=R call=<n> coll=<name> index=<i> got=<v> want=<w>
//   SHRINK rank=R result=<code> seconds=<s> size=<n> right=<0|1> msg=<error>
//                                        FAULT_SHRINK_EXCLUDE=<rank>: after the error, the
//                                        survivors shrink without that rank (TSR_SHRINK_DEFAULT),
//                                        check one all-reduce on the result and destroy both
//   DESTROY rank=R result=<code> seconds=<s>  FAULT_AFTER=destroy (or a shrink): the failed
//                                        communicator destroyed, not aborted
//   GROW rank=R result=<code> t=<unix seconds> seconds=<s> size=<n> calls=<n> right=<0|1>
//        msg=<error>                     FAULT_GROW=1 (with FAULT_SHRINK_EXCLUDE): the shrunk
//                                        communicator grows back to <nranks> ranks (its rank 0
//                                        writes tsrCommGetUniqueId's id to <id file>.grow), runs
//                                        FAULT_GROW_CALLS calls of the cycle, each checked, and
//                                        is destroyed; t is when the last call was checked
//   FDS rank=R before=<n> after=<n> leaked=<none|fd:target,...>
// Exit: 0 all calls right, 3 a call failed (what the fault tests expect), 1 a wrong result,
// 2 setup failed (no id, init failed, bad arguments).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

double nowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

long envLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtol(v, nullptr, 10) : fallback;
}

// This process's open descriptors and what each one is (readlink of /proc/self/fd/N).
std::map<int, std::string> openFds() {
  std::map<int, std::string> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    char target[512] = {};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    // A descriptor that another thread closed between readdir and readlink (the process-wide
    // fd server dropping a peer's connection) is not open: not listed, never counted a leak.
    if (n <= 0 && fcntl(fd, F_GETFD) < 0 && errno == EBADF) continue;
    out[fd] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
  }
  closedir(d);
  return out;
}

// Names of the Unix sockets of this network namespace, by inode (/proc/net/unix).
std::map<std::string, std::string> unixSocketNames() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // Num RefCount Protocol Flags Type St Inode [Path]
    char inode[32] = {}, path[256] = {};
    if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %*s %*s %31s %255s", inode, path) == 2)
      out[std::string("socket:[") + inode + "]"] = path;
  }
  return out;
}

// Descriptors opened since `before` and still open. The process-wide fd server of the shm and
// cuda_ipc transports (a listening abstract socket "@tessera-fd-<pid>-..." and its wake eventfd)
// lives until the process exits by design: it is named, not counted as a leak.
std::vector<std::string> leakedOnce(const std::map<int, std::string>& before) {
  auto fds = openFds();
  auto names = unixSocketNames();  // after the listing: a socket accepted since is not listed
  std::string me = "@tessera-fd-" + std::to_string(getpid()) + "-";
  std::vector<std::string> leaked;
  bool fdServer = false;
  int eventfds = 0;
  for (const auto& [fd, target] : fds) {
    auto it = before.find(fd);
    if (it != before.end() && it->second == target) continue;
    auto name = names.find(target);
    if (name != names.end() && name->second.rfind(me, 0) == 0) {
      fdServer = true;
      continue;
    }
    if (target == "anon_inode:[eventfd]" && eventfds++ == 0) continue;  // maybe the server's
    leaked.push_back(std::to_string(fd) + ":" + target +
                     (name != names.end() ? "(" + name->second + ")" : ""));
  }
  if (eventfds > 0 && !fdServer)
    leaked.push_back("an eventfd (and no fd server it could belong to)");
  return leaked;
}

// A leak is a descriptor that stays open. The fd server's thread accepts and closes peers'
// connections while this process lists its descriptors, so a listing can catch one mid-change;
// a listing that finds something is taken again (up to three times, 50 ms apart) and the last
// one is reported: a real leak is in every listing.
std::string leakedSince(const std::map<int, std::string>& before, int* count) {
  std::vector<std::string> leaked = leakedOnce(before);
  for (int i = 0; i < 2 && !leaked.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    leaked = leakedOnce(before);
  }
  *count = static_cast<int>(leaked.size());
  std::string s;
  for (const auto& l : leaked) s += (s.empty() ? "" : ",") + l;
  return s.empty() ? "none" : s;
}

bool writeId(const std::string& path, const tsrUniqueId& id) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(&id, sizeof id, 1, f) == 1;
  ok = std::fclose(f) == 0 && ok;
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool readId(const std::string& path, double seconds, tsrUniqueId* id) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      bool ok = std::fread(id, sizeof *id, 1, f) == 1;
      std::fclose(f);
      if (ok) return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polls for the file
  }
}

const char* kColls[] = {"allreduce", "allgather", "reducescatter", "broadcast"};

// tsrResult_t as one word for the event lines.
const char* codeName(tsrResult_t r) {
  static const char* kNames[] = {"success",        "cuda_error",       "system_error",
                                 "internal_error", "invalid_argument", "invalid_usage",
                                 "remote_error",   "in_progress",      "timeout"};
  return r >= 0 && r < tsrNumResults ? kNames[r] : "unknown";
}

// Input of rank r, element i: small integers, so float sums are exact.
float input(int r, size_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 7)); }

struct Check {
  size_t index = 0;
  float got = 0, want = 0;
};

// Runs call `n` (the collective n % 4) and checks the result; false with *bad on a wrong value.
tsrResult_t runCall(tsrComm_t comm, int rank, int nranks, long n, size_t count,
                    std::vector<float>& send, std::vector<float>& recv, bool* right, Check* bad) {
  int kind = static_cast<int>(n % 4);
  size_t block = count / static_cast<size_t>(nranks);
  tsrResult_t r = tsrSuccess;
  float nsum = static_cast<float>(nranks * (nranks + 1) / 2);
  *right = true;
  auto expect = [&](size_t i, float want) {
    if (*right && recv[i] != want) {
      *right = false;
      *bad = {i, recv[i], want};
    }
  };
  switch (kind) {
    case 0:
      for (size_t i = 0; i < count; ++i) send[i] = input(rank, i);
      r = tsrAllReduce(send.data(), recv.data(), count, tsrFloat, tsrSum, comm, nullptr);
      if (r == tsrSuccess)
        for (size_t i = 0; i < count; ++i)
          expect(i, nsum + static_cast<float>(nranks * static_cast<int>(i % 7)));
      break;
    case 1:
      for (size_t i = 0; i < block; ++i) send[i] = input(rank, i);
      r = tsrAllGather(send.data(), recv.data(), block, tsrFloat, comm, nullptr);
      if (r == tsrSuccess)
        for (size_t i = 0; i < block * static_cast<size_t>(nranks); ++i)
          expect(i, input(static_cast<int>(i / block), i % block));
      break;
    case 2:
      for (size_t i = 0; i < block * static_cast<size_t>(nranks); ++i) send[i] = input(rank, i);
      r = tsrReduceScatter(send.data(), recv.data(), block, tsrFloat, tsrSum, comm, nullptr);
      if (r == tsrSuccess)
        for (size_t i = 0; i < block; ++i) {
          size_t g = static_cast<size_t>(rank) * block + i;
          expect(i, nsum + static_cast<float>(nranks * static_cast<int>(g % 7)));
        }
      break;
    default: {
      int root = static_cast<int>((n / 4) % nranks);
      for (size_t i = 0; i < count; ++i) send[i] = input(rank, i);
      r = tsrBroadcast(send.data(), recv.data(), count, tsrFloat, root, comm, nullptr);
      if (r == tsrSuccess)
        for (size_t i = 0; i < count; ++i) expect(i, input(root, i));
    }
  }
  return r;
}

}  // namespace

// The survivors of a failed communicator (every rank but `exclude`) shrink it and run one
// all-reduce on the result, checked; prints SHRINK. Returns the shrunk communicator (null if the
// shrink failed).
tsrComm_t shrinkAndCheck(tsrComm_t comm, int rank, int exclude, size_t count) {
  auto t0 = std::chrono::steady_clock::now();
  tsrComm_t child = nullptr;
  tsrResult_t r = tsrCommShrink(comm, &exclude, 1, &child, nullptr, TSR_SHRINK_DEFAULT);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int size = 0, newRank = -1;
  bool right = false;
  std::string msg = r == tsrSuccess ? "" : tsrGetLastError(nullptr);
  if (r == tsrSuccess && tsrCommCount(child, &size) == tsrSuccess &&
      tsrCommUserRank(child, &newRank) == tsrSuccess) {
    std::vector<float> send(count - count % static_cast<size_t>(size)), recv(send.size());
    Check bad;
    r = runCall(child, newRank, size, 0, send.size(), send, recv, &right, &bad);
    if (r != tsrSuccess) msg = tsrGetLastError(child);
  }
  std::printf("SHRINK rank=%d result=%s seconds=%.3f size=%d right=%d msg=%s\n", rank, codeName(r),
              took, size, right ? 1 : 0, msg.c_str());
  return child;
}

// tsrCommGrow, from an existing communicator (`shrunk`, whose rank 0 makes the id and writes it
// to idPath) or as a new rank (shrunk null: the id is read from idPath), to nranks ranks; then
// FAULT_GROW_CALLS calls of the cycle on the result, each checked, and its destroy. Prints GROW;
// true when the grow and every call were right.
bool growAndCheck(tsrComm_t shrunk, int rank, int nranks, const std::string& idPath, size_t count) {
  const long calls = envLong("FAULT_GROW_CALLS", 16);
  auto t0 = std::chrono::steady_clock::now();
  tsrResult_t r = tsrSuccess;
  std::string msg;
  tsrUniqueId id;
  bool haveId = false;
  int myRank = -1;
  if (shrunk != nullptr) {
    r = tsrCommUserRank(shrunk, &myRank);
    if (r == tsrSuccess && myRank == 0) {
      r = tsrCommGetUniqueId(shrunk, &id);
      if (r == tsrSuccess && !writeId(idPath, id)) {
        r = tsrSystemError;
        msg = "cannot write the grow id to " + idPath;
      }
      haveId = r == tsrSuccess;
    }
  } else if (readId(idPath, 30, &id)) {
    haveId = true;
  } else {
    r = tsrSystemError;
    msg = "no grow id in " + idPath + " within 30 s";
  }
  tsrComm_t grown = nullptr;
  if (r == tsrSuccess) {
    tsrConfig_t config = TSR_CONFIG_INITIALIZER;
    config.device = TSR_DEVICE_HOST;
    r = tsrCommGrow(shrunk, nranks, haveId ? &id : nullptr, shrunk != nullptr ? -1 : rank, &grown,
                    &config);
    if (r != tsrSuccess) msg = tsrGetLastError(nullptr);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int size = 0, newRank = -1;
  bool right = false;
  long n = 0;
  if (r == tsrSuccess && tsrCommCount(grown, &size) == tsrSuccess &&
      tsrCommUserRank(grown, &newRank) == tsrSuccess) {
    std::vector<float> send(count - count % static_cast<size_t>(size)), recv(send.size());
    right = true;
    for (; n < calls && right && r == tsrSuccess; ++n) {
      Check bad;
      r = runCall(grown, newRank, size, n, send.size(), send, recv, &right, &bad);
      if (r != tsrSuccess) {
        msg = tsrGetLastError(grown);
      } else if (!right) {
        msg = std::string(kColls[n % 4]) + " index " + std::to_string(bad.index) + " got " +
              std::to_string(bad.got) + " want " + std::to_string(bad.want);
      }
    }
  }
  std::printf("GROW rank=%d result=%s t=%.6f seconds=%.3f size=%d calls=%ld right=%d msg=%s\n",
              rank, codeName(r), nowUnix(), took, size, n, right && r == tsrSuccess ? 1 : 0,
              msg.c_str());
  if (grown != nullptr) {
    if (r == tsrSuccess) r = tsrCommFinalize(grown);
    tsrCommDestroy(grown);
  }
  return r == tsrSuccess && right;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <rank> <nranks> <id file> run|hold|grow\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int rank = std::atoi(argv[1]), nranks = std::atoi(argv[2]);
  std::string idPath = argv[3], mode = argv[4];
  long iters = envLong("FAULT_ITERS", 0);
  double maxSeconds = static_cast<double>(envLong("FAULT_MAX_SECONDS", 60));
  size_t count = static_cast<size_t>(envLong("FAULT_COUNT", 1 << 18));
  count -= count % static_cast<size_t>(nranks);

  auto fdsBefore = openFds();
  if (mode == "grow") {
    std::printf("STAGE rank=%d stage=joining\n", rank);
    const int code = growAndCheck(nullptr, rank, nranks, idPath, count) ? 0 : 1;
    int leaks = 0;
    std::string leaked = leakedSince(fdsBefore, &leaks);
    std::printf("FDS rank=%d before=%zu after=%zu leaked=%s\n", rank, fdsBefore.size(),
                openFds().size(), leaked.c_str());
    return code;
  }
  tsrUniqueId id;
  if (rank == 0) {
    if (tsrGetUniqueId(&id) != tsrSuccess || !writeId(idPath, id)) {
      std::printf("ERROR rank=%d t=%.6f code=setup call=-1 coll=init msg=unique id: %s\n", rank,
                  nowUnix(), tsrGetLastError(nullptr));
      return 2;
    }
    if (mode == "hold") {
      std::printf("STAGE rank=0 stage=hold\n");
      for (;;) pause();  // the driver kills this process: the root dies with it
    }
  } else if (!readId(idPath, 30, &id)) {
    std::printf("ERROR rank=%d t=%.6f code=setup call=-1 coll=init msg=no unique id in %s\n", rank,
                nowUnix(), idPath.c_str());
    return 2;
  }

  std::printf("STAGE rank=%d stage=joining\n", rank);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.device = TSR_DEVICE_HOST;
  tsrComm_t comm = nullptr;
  tsrResult_t r = tsrCommInitRankConfig(&comm, nranks, id, rank, &config);
  int code = 0;
  long n = 0;
  if (r != tsrSuccess) {
    std::printf("ERROR rank=%d t=%.6f code=%s call=-1 coll=init msg=%s\n", rank, nowUnix(),
                codeName(r), tsrGetLastError(nullptr));
    code = 3;
  } else {
    std::vector<float> send(count), recv(count);
    auto start = std::chrono::steady_clock::now();
    for (; iters == 0 || n < iters; ++n) {
      bool right = true;
      Check bad;
      r = runCall(comm, rank, nranks, n, count, send, recv, &right, &bad);
      if (r != tsrSuccess) {
        std::printf("ERROR rank=%d t=%.6f code=%s call=%ld coll=%s msg=%s\n", rank, nowUnix(),
                    codeName(r), n, kColls[n % 4], tsrGetLastError(comm));
        code = 3;
        break;
      }
      if (!right) {
        std::printf("WRONG rank=%d call=%ld coll=%s index=%zu got=%g want=%g\n", rank, n,
                    kColls[n % 4], bad.index, static_cast<double>(bad.got),
                    static_cast<double>(bad.want));
        code = 1;
        break;
      }
      // Ready once every plan the cycle uses is bound (broadcast's root turns every 4 calls):
      // later calls only move data, the steady state a fault should hit.
      if (n == 4L * nranks) std::printf("STAGE rank=%d stage=ready\n", rank);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          maxSeconds) {
        std::printf(
            "ERROR rank=%d t=%.6f code=none call=%ld coll=%s msg=no call failed within "
            "%g s\n",
            rank, nowUnix(), n, kColls[n % 4], maxSeconds);
        code = 3;
        break;
      }
    }
    if (code == 0) {
      if (tsrCommFinalize(comm) != tsrSuccess || tsrCommDestroy(comm) != tsrSuccess) {
        std::printf("ERROR rank=%d t=%.6f code=teardown call=%ld coll=finalize msg=%s\n", rank,
                    nowUnix(), n, tsrGetLastError(nullptr));
        code = 3;
      } else {
        std::printf("OK rank=%d calls=%ld\n", rank, n);
      }
    } else {
      const long exclude = envLong("FAULT_SHRINK_EXCLUDE", -1);
      const char* after = std::getenv("FAULT_AFTER");
      const bool destroy = exclude >= 0 || (after != nullptr && std::strcmp(after, "destroy") == 0);
      if (exclude >= 0) {
        tsrComm_t shrunk = shrinkAndCheck(comm, rank, static_cast<int>(exclude), count);
        if (shrunk != nullptr && envLong("FAULT_GROW", 0) != 0)
          growAndCheck(shrunk, rank, nranks, idPath + ".grow", count);
        // Finalize first (collective): a rank that destroyed its end while a peer's last flush
        // to it was still in flight would fail that peer's all-reduce (ucx over TCP completes a
        // put only when the target's worker progresses).
        if (shrunk != nullptr) {
          tsrCommFinalize(shrunk);
          tsrCommDestroy(shrunk);
        }
      }
      auto t0 = std::chrono::steady_clock::now();
      auto seconds = [&t0] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      };
      if (destroy) {
        // After a failure the communicator is revoked (its transports stopped): destroy is
        // local and must not touch a dead peer.
        tsrResult_t d = tsrCommDestroy(comm);
        std::printf("DESTROY rank=%d result=%s seconds=%.3f\n", rank, codeName(d), seconds());
      } else {
        // Abort is local and releases the rank (the handle is dead afterwards).
        tsrResult_t a = tsrCommAbort(comm);
        std::printf("ABORT rank=%d result=%s seconds=%.3f\n", rank, codeName(a), seconds());
      }
    }
  }
  int leaks = 0;
  std::string leaked = leakedSince(fdsBefore, &leaks);
  std::printf("FDS rank=%d before=%zu after=%zu leaked=%s\n", rank, fdsBefore.size(),
              openFds().size(), leaked.c_str());
  return code;
}
