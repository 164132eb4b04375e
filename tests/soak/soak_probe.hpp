// What the soak watches in its own process: resident memory, open descriptors, shared-memory
// mappings, and the entries of /dev/shm.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace soak {

// A line "Name:   123 kB" of /proc/self/status, in KiB (0 if absent).
inline long statusKiB(const char* name) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long kib = 0;
  const size_t len = std::strlen(name);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, name, len) == 0 && line[len] == ':') {
      kib = std::strtol(line + len + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib;
}

// Resident memory of this process in KiB: all of it (VmRSS), and its anonymous part (the heap)
// and shared part (memfd pages of this process and of its peers that it touched).
inline long residentKiB() { return statusKiB("VmRSS"); }

// Names in a directory, without . and ..
inline std::set<std::string> listDir(const char* path) {
  std::set<std::string> names;
  DIR* d = opendir(path);
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.insert(e->d_name);
  }
  closedir(d);
  return names;
}

// Open descriptors of this process (the one listing /proc/self/fd is not counted).
inline int openFds() { return static_cast<int>(listDir("/proc/self/fd").size()) - 1; }

// What each open descriptor is (/proc/self/fd/N's link: "/memfd:tessera (deleted)",
// "socket:[123]", "anon_inode:[eventfd]", a path), one entry per descriptor.
inline std::multiset<std::string> fdLinks() {
  std::multiset<std::string> out;
  for (const std::string& n : listDir("/proc/self/fd")) {
    char link[512];
    const std::string path = "/proc/self/fd/" + n;
    const ssize_t len = readlink(path.c_str(), link, sizeof link - 1);
    if (len <= 0) continue;  // the descriptor of the listing itself, closed by now
    link[len] = '\0';
    out.insert(link);
  }
  return out;
}

// Descriptors of shared memory (memfd): the library's scratch, semaphores and registrations and
// its imports of the peers'.
inline int memfdCount(const std::multiset<std::string>& links) {
  int n = 0;
  for (const std::string& l : links) n += l.rfind("/memfd:", 0) == 0;
  return n;
}

struct Mappings {
  int total = 0;   // lines of /proc/self/maps
  int shared = 0;  // of them memfd or /dev/shm mappings: what the shm transport maps
};

inline Mappings mappings() {
  Mappings m;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return m;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    ++m.total;
    if (std::strstr(line, "/memfd:") != nullptr || std::strstr(line, "/dev/shm/") != nullptr)
      ++m.shared;
  }
  std::fclose(f);
  return m;
}

// Entries of /dev/shm that are not Open MPI's own (its shared-memory BTL keeps one segment per
// rank of every running job, this one's and those of other jobs on the machine).
inline std::set<std::string> shmEntries() {
  std::set<std::string> out;
  for (const std::string& n : listDir("/dev/shm")) {
    if (n.rfind("vader_segment.", 0) == 0 || n.rfind("sm_segment.", 0) == 0) continue;
    out.insert(n);
  }
  return out;
}

}  // namespace soak
