#include "transport_perf_baselines.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/status.hpp"

namespace tessera::perf {
namespace {

using PerfClock = std::chrono::steady_clock;

double secondsSince(PerfClock::time_point t0) {
  return std::chrono::duration<double>(PerfClock::now() - t0).count();
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout+stderr, when captured
};

// fork + exec; stdout and stderr into a pipe (capture) or /dev/null.
Child spawn(const std::vector<std::string>& args, bool capture) {
  Child c;
  int fds[2] = {-1, -1};
  if (capture && pipe2(fds, O_CLOEXEC) != 0) return c;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int sink = capture ? fds[1] : open("/dev/null", O_WRONLY);
    dup2(sink, 1);
    dup2(sink, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "exec %s failed: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  if (capture) close(fds[1]);
  c.pid = pid;
  c.out = capture ? fds[0] : -1;
  if (pid < 0 && capture) close(fds[0]);
  return c;
}

// Waits for the child to exit (reading its output, if captured) until `seconds` pass, then kills
// it. Returns its wait status, or -1 when it had to be killed.
int finish(Child& c, double seconds, std::string* output) {
  auto t0 = PerfClock::now();
  bool killed = false;
  int status = 0;
  for (;;) {
    if (c.out >= 0) {
      pollfd p{c.out, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        ssize_t n = read(c.out, buf, sizeof buf);
        if (n > 0) {
          output->append(buf, static_cast<size_t>(n));
          continue;
        }
        close(c.out);
        c.out = -1;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) break;
    if (!killed && secondsSince(t0) > seconds) {
      kill(c.pid, SIGKILL);
      killed = true;
    }
  }
  if (c.out >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(c.out, buf, sizeof buf)) > 0) output->append(buf, static_cast<size_t>(n));
    close(c.out);
    c.out = -1;
  }
  return killed ? -1 : status;
}

std::string lastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

bool parsePerftestCsv(const std::string& output, double* overallMBps) {
  std::istringstream in(output);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos || !std::isdigit(static_cast<unsigned char>(line[b]))) continue;
    std::vector<std::string> fields;
    std::stringstream ls(line.substr(b));
    std::string f;
    while (std::getline(ls, f, ',')) fields.push_back(f);
    // iterations, 50%ile lat, avg lat, overall lat, avg bw, overall bw, avg mr, overall mr
    if (fields.size() < 8) continue;
    char* end = nullptr;
    double v = std::strtod(fields[5].c_str(), &end);
    if (end == fields[5].c_str()) continue;
    *overallMBps = v;
    found = true;
  }
  return found;
}

std::vector<PerftestPoint> runUcxPerftest(const std::vector<SizeStep>& steps,
                                          const PerftestOptions& options) {
  std::vector<PerftestPoint> out;
  int port = options.basePort;
  for (const auto& s : steps) {
    PerftestPoint p;
    p.bytes = s.bytes;
    std::string portText = std::to_string(port++);
    Child server = spawn({options.program, "-p", portText}, false);
    if (server.pid < 0) {
      p.error = "could not fork the ucx_perftest server";
      out.push_back(p);
      continue;
    }
    uint64_t n = uint64_t{s.iters} * s.puts;
    uint64_t w = std::max<uint64_t>(1, uint64_t{s.warmup} * s.puts);
    std::string output;
    int status = -1;
    // The server needs a moment to listen; a refused connection is retried.
    for (int attempt = 0; attempt < 30; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(attempt == 0 ? 150 : 100));
      output.clear();
      std::vector<std::string> args = {options.program,
                                       "127.0.0.1",
                                       "-p",
                                       portText,
                                       "-t",
                                       "ucp_put_bw",
                                       "-s",
                                       std::to_string(s.bytes),
                                       "-n",
                                       std::to_string(n),
                                       "-w",
                                       std::to_string(w),
                                       "-v",
                                       "-f"};
      // By default at most as many puts in flight as tessera has in one iteration (its puts
      // between two flushes): the same traffic pattern on both sides.
      int inFlight = options.outstanding < 0 ? static_cast<int>(s.puts) : options.outstanding;
      if (inFlight > 0) {
        args.push_back("-O");
        args.push_back(std::to_string(inFlight));
      }
      Child client = spawn(args, true);
      if (client.pid < 0) break;
      status = finish(client, options.timeoutSeconds, &output);
      if (output.find("Connection refused") == std::string::npos) break;
    }
    int serverStatus = finish(server, 5, &output);
    double mbps = 0;
    if (status == -1) {
      p.error =
          strprintf("the ucx_perftest client did not finish within %.0f s", options.timeoutSeconds);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || serverStatus == -1 ||
               !parsePerftestCsv(output, &mbps)) {
      p.error = strprintf("ucx_perftest (size %llu) failed: %s",
                          static_cast<unsigned long long>(s.bytes), lastLine(output).c_str());
    } else {
      p.gbps = mbps * 1048576.0 / 1e9;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace tessera::perf
