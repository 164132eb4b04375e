#include "transport_test_util.hpp"

#include <dirent.h>
#include <sys/mman.h>

#include <cstring>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "support/harness.hpp"

namespace tessera::test {

const char* rankModeName(RankMode mode) {
  return mode == RankMode::kThreads ? "threads" : "processes";
}

namespace {

std::string runOne(Bootstrap& b, const RankBody& body, const RankOptions& options) {
  TransportContextOptions o;
  o.bootstrap = &b;
  o.cudaDevice = options.cudaDevice;
  if (!options.cudaDevices.empty())
    o.cudaDevice = options.cudaDevices[static_cast<size_t>(b.rank()) % options.cudaDevices.size()];
  o.timeoutSeconds = options.timeoutSeconds;
  std::unique_ptr<TransportContext> ctx;
  Result r = TransportContext::create(o, &ctx);
  if (r != tsrSuccess)
    return std::string("TransportContext::create: ") + resultName(r) + ": " + lastErrorMessage();
  std::string out;
  try {
    out = body(*ctx);
  } catch (const std::exception& e) {
    out = std::string("exception: ") + e.what();
  }
  return out;
}

}  // namespace

std::vector<std::string> runTransportRanks(RankMode mode, int nranks, const RankBody& body,
                                           const RankOptions& options) {
  std::vector<std::string> results(static_cast<size_t>(nranks));
  BootstrapOptions bo;
  bo.timeoutSeconds = options.timeoutSeconds;
  if (mode == RankMode::kThreads) {
    std::shared_ptr<InprocGroup> group;
    if (InprocBootstrap::createGroup(nranks, bo, &group) != tsrSuccess) {
      results.assign(results.size(), std::string("createGroup: ") + lastErrorMessage());
      return results;
    }
    runRanks(
        nranks,
        [&](int rank) {
          std::unique_ptr<Bootstrap> b;
          if (group->join(rank, &b) != tsrSuccess) {
            results[static_cast<size_t>(rank)] = std::string("join: ") + lastErrorMessage();
            return;
          }
          results[static_cast<size_t>(rank)] = runOne(*b, body, options);
        },
        options.runSeconds);
    return results;
  }

  // Processes: each child writes its sentence into a shared page; the exit code says whether
  // it got there.
  ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id{};
  {
    // No root thread in this process while it forks (forkRanks says why): rank 0 starts it.
    ScopedEnv commId("TESSERA_COMM_ID", loopbackCommId().c_str());
    if (createUserUniqueId(&id) != tsrSuccess) {
      results.assign(results.size(), std::string("createUserUniqueId: ") + lastErrorMessage());
      return results;
    }
  }
  constexpr size_t kSlot = 4096;
  size_t bytes = kSlot * static_cast<size_t>(nranks);
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    results.assign(results.size(), "mmap for results failed");
    return results;
  }
  std::memset(shared, 0, bytes);
  std::vector<int> codes = forkRanks(
      nranks,
      [&](int r) {
        std::string out;
        std::unique_ptr<Bootstrap> b;
        if (TcpBootstrap::create(id, r, nranks, bo, &b) != tsrSuccess)
          out = std::string("TcpBootstrap::create: ") + lastErrorMessage();
        else
          out = runOne(*b, body, options);
        if (out.empty()) out = "ok";
        std::strncpy(static_cast<char*>(shared) + kSlot * static_cast<size_t>(r), out.c_str(),
                     kSlot - 1);
        return 0;
      },
      options.runSeconds);
  for (size_t i = 0; i < codes.size(); ++i) {
    const char* text = static_cast<const char*>(shared) + kSlot * i;
    if (codes[i] == -1) {
      results[i] = "fork failed";
    } else if (codes[i] >= 128) {
      results[i] = strprintf("killed by signal %d%s", codes[i] - 128,
                             text[0] ? (std::string(" after: ") + text).c_str() : "");
    } else if (codes[i] == 0 && std::strcmp(text, "ok") == 0) {
      results[i] = "";
    } else {
      results[i] = text[0] ? text : strprintf("exited with code %d without a result", codes[i]);
    }
  }
  munmap(shared, bytes);
  return results;
}

void expectAllRanksOk(const std::vector<std::string>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r], "") << "rank " << r << " of " << results.size();
}

Result connectAll(TransportContext& ctx, std::vector<std::shared_ptr<Connection>>* out) {
  out->assign(static_cast<size_t>(ctx.nranks()), nullptr);
  // Bootstrap sends never wait for the receiver, so every rank may go through its peers in
  // rank order.
  for (int p = 0; p < ctx.nranks(); ++p) {
    if (p == ctx.rank()) continue;
    TSR_CHECK(ctx.connect(p, &(*out)[static_cast<size_t>(p)]));
  }
  return tsrSuccess;
}

std::vector<std::string> tesseraShmEntries() {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (std::strstr(e->d_name, "tessera") != nullptr) out.push_back(e->d_name);
  closedir(d);
  return out;
}

}  // namespace tessera::test
