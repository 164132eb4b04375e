// The transport choice per pair of ranks (transport/select.hpp) and its two variables.
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "transport/select.hpp"

namespace tessera {
namespace {

SelectInput allBuilt(Locality where, bool gpu, PathClass path = PathClass::kNvl) {
  SelectInput in;
  in.locality = where;
  in.gpuRanks = gpu;
  in.gpuPath = path;
  for (bool& b : in.built) b = true;
  return in;
}

TransportKind pick(const SelectInput& in) {
  TransportKind k = TransportKind::kInproc;
  std::string why;
  EXPECT_EQ(selectTransportFor(in, &k, &why), tsrSuccess) << lastErrorMessage();
  EXPECT_FALSE(why.empty());
  return k;
}

TEST(TransportSelect, DefaultsPerPeerClass) {
  EXPECT_EQ(pick(allBuilt(Locality::kSameProcess, false)), TransportKind::kInproc);
  EXPECT_EQ(pick(allBuilt(Locality::kSameProcess, true)), TransportKind::kP2p);
  EXPECT_EQ(pick(allBuilt(Locality::kSameProcess, true, PathClass::kLoc)), TransportKind::kP2p);
  EXPECT_EQ(pick(allBuilt(Locality::kSameHost, false)), TransportKind::kShm);
  EXPECT_EQ(pick(allBuilt(Locality::kSameHost, true)), TransportKind::kCudaIpc);
  EXPECT_EQ(pick(allBuilt(Locality::kOtherHost, false)), TransportKind::kUcx);
  EXPECT_EQ(pick(allBuilt(Locality::kOtherHost, true)), TransportKind::kUcx);
}

TEST(TransportSelect, P2pLevelSendsFarGpusThroughHostMemory) {
  for (int level = 0; level <= static_cast<int>(PathClass::kSys); ++level) {
    for (int path = 1; path <= static_cast<int>(PathClass::kSys); ++path) {
      SelectInput in = allBuilt(Locality::kSameHost, true, static_cast<PathClass>(path));
      in.p2pLevel = static_cast<PathClass>(level);
      TransportKind want = path <= level ? TransportKind::kCudaIpc : TransportKind::kUcx;
      EXPECT_EQ(pick(in), want) << "path " << path << " level " << level;
      in.locality = Locality::kSameProcess;
      want = path <= level ? TransportKind::kP2p : TransportKind::kUcx;
      EXPECT_EQ(pick(in), want) << "same process, path " << path << " level " << level;
    }
  }
  // The same GPU never needs peer access, whatever the level.
  SelectInput same = allBuilt(Locality::kSameProcess, true, PathClass::kLoc);
  same.p2pLevel = PathClass::kLoc;
  EXPECT_EQ(pick(same), TransportKind::kP2p);
}

TEST(TransportSelect, ForcedTransportAndWhatItCannotReach) {
  SelectInput in = allBuilt(Locality::kSameHost, false);
  in.forced = true;
  in.forcedKind = TransportKind::kUcx;
  EXPECT_EQ(pick(in), TransportKind::kUcx);
  in.forcedKind = TransportKind::kShm;
  EXPECT_EQ(pick(in), TransportKind::kShm);

  struct Bad {
    TransportKind kind;
    Locality where;
    bool gpu;
  };
  const Bad bad[] = {{TransportKind::kShm, Locality::kOtherHost, false},
                     {TransportKind::kInproc, Locality::kSameHost, false},
                     {TransportKind::kP2p, Locality::kSameProcess, false},
                     {TransportKind::kCudaIpc, Locality::kSameProcess, true},
                     {TransportKind::kCudaIpc, Locality::kOtherHost, true}};
  for (const Bad& b : bad) {
    SelectInput f = allBuilt(b.where, b.gpu);
    f.forced = true;
    f.forcedKind = b.kind;
    TransportKind k;
    std::string why;
    EXPECT_EQ(selectTransportFor(f, &k, &why), tsrInvalidUsage) << transportName(b.kind);
    EXPECT_NE(std::string(lastErrorMessage()).find(transportName(b.kind)), std::string::npos)
        << lastErrorMessage();
  }
}

TEST(TransportSelect, MissingTransportIsAnErrorNamingIt) {
  SelectInput in = allBuilt(Locality::kOtherHost, false);
  in.built[static_cast<int>(TransportKind::kUcx)] = false;
  TransportKind k;
  std::string why;
  EXPECT_EQ(selectTransportFor(in, &k, &why), tsrInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("ucx"), std::string::npos) << lastErrorMessage();
}

TEST(TransportSelect, ReadsBothVariables) {
  {
    test::ScopedEnv t("TESSERA_TRANSPORT", "UCX");
    test::ScopedEnv l("TESSERA_P2P_LEVEL", "pxb");
    SelectInput in;
    ASSERT_EQ(readSelectEnv(&in), tsrSuccess) << lastErrorMessage();
    EXPECT_TRUE(in.forced);
    EXPECT_EQ(in.forcedKind, TransportKind::kUcx);
    EXPECT_EQ(in.p2pLevel, PathClass::kPxb);
  }
  {
    test::ScopedEnv t("TESSERA_TRANSPORT", "carrier-pigeon");
    SelectInput in;
    EXPECT_EQ(readSelectEnv(&in), tsrInvalidArgument);
    EXPECT_NE(std::string(lastErrorMessage()).find("carrier-pigeon"), std::string::npos);
  }
  {
    test::ScopedEnv l("TESSERA_P2P_LEVEL", "NET");
    SelectInput in;
    EXPECT_EQ(readSelectEnv(&in), tsrInvalidArgument);
  }
  SelectInput in;
  ASSERT_EQ(readSelectEnv(&in), tsrSuccess);
  EXPECT_FALSE(in.forced);
  EXPECT_EQ(in.p2pLevel, PathClass::kSys);
}

}  // namespace
}  // namespace tessera
