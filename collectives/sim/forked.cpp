// simulateForked (simulator.hpp): SimGrid keeps one engine per process, so each simulation that
// must not be the process's only one runs in a child; its report comes back as text lines.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "collectives/sim/simulator.hpp"
#include "core/log.hpp"

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

std::string encode(Result r, const SimReport& rep) {
  std::ostringstream o;
  o.precision(17);
  if (r != tsrSuccess) {
    o << "ERR " << static_cast<int>(r) << ' ' << lastErrorMessage() << '\n';
    return o.str();
  }
  o << "OK " << rep.rows.size() << ' ' << rep.events << ' ' << rep.wallSeconds << ' '
    << rep.simSeconds << ' ' << rep.plan << '\n';
  for (const SimRow& row : rep.rows)
    o << row.bytes << ' ' << row.count << ' ' << row.iterations << ' ' << row.us << ' ' << row.algbw
      << ' ' << row.busbw << ' ' << row.bottleneckBusy << ' '
      << (row.bottleneck.empty() ? "-" : row.bottleneck) << '\n';
  return o.str();
}

Result decode(const std::string& text, SimReport* out) {
  std::istringstream in(text);
  std::string tag;
  in >> tag;
  if (tag == "ERR") {
    int code = 0;
    in >> code;
    std::string why;
    std::getline(in, why);
    if (!why.empty() && why[0] == ' ') why.erase(0, 1);
    return TSR_FAIL(static_cast<Result>(code), "%s", why.c_str());
  }
  size_t rows = 0;
  SimReport rep;
  if (tag != "OK" || !(in >> rows >> rep.events >> rep.wallSeconds >> rep.simSeconds))
    return TSR_FAIL(tsrInternalError, "simulateForked: the child's report is unreadable");
  in.get();
  std::getline(in, rep.plan);
  for (size_t i = 0; i < rows; ++i) {
    SimRow row;
    if (!(in >> row.bytes >> row.count >> row.iterations >> row.us >> row.algbw >> row.busbw >>
          row.bottleneckBusy >> row.bottleneck))
      return TSR_FAIL(tsrInternalError,
                      "simulateForked: row %zu of the child's report is "
                      "unreadable",
                      i);
    if (row.bottleneck == "-") row.bottleneck.clear();
    rep.rows.push_back(row);
  }
  *out = std::move(rep);
  return tsrSuccess;
}

}  // namespace

Result simulateForked(const SimSpec& spec, SimReport* out) {
  int fds[2];
  if (pipe(fds) != 0) return TSR_FAIL(tsrSystemError, "simulateForked: pipe: %s", strerror(errno));
  fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return TSR_FAIL(tsrSystemError, "simulateForked: fork: %s", strerror(errno));
  }
  if (child == 0) {
    close(fds[0]);
    SimReport rep;
    Result r = simulate(spec, &rep);
    std::string text = encode(r, rep);
    for (size_t off = 0; off < text.size();) {
      ssize_t k = write(fds[1], text.data() + off, text.size() - off);
      if (k <= 0) _exit(3);
      off += static_cast<size_t>(k);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t k = read(fds[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    text.append(buf, static_cast<size_t>(k));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty())
    return TSR_FAIL(tsrInternalError, "simulateForked: the simulation process %s",
                    WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "ended without a report");
  return decode(text, out);
}

}  // namespace tessera::sim
