#include "bootstrap_test_util.hpp"

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

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tessera::test
