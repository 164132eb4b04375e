// NCCL_* variables as aliases of TESSERA_* ones (TESSERA_NCCL_ENV=1): when they are read, which
// wins, and that a bad alias value is refused naming the NCCL_* variable the user set.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/env.hpp"
#include "core/log.hpp"
#include "core/status.hpp"
#include "support/harness.hpp"

namespace tessera {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every test starts with no NCCL_* alias set (a machine's own NCCL_DEBUG must not change what a
// test sees) and restores them after.
class EnvNcclAlias : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const EnvAlias& a : envNcclAliases())
      unset_.push_back(std::make_unique<test::ScopedEnv>(a.alias, nullptr));
  }
  void TearDown() override { unset_.clear(); }

 private:
  std::vector<std::unique_ptr<test::ScopedEnv>> unset_;
};

TEST_F(EnvNcclAlias, EveryAliasIsANcclNameOfARegisteredVariable) {
  std::set<std::string> aliases;
  for (const EnvAlias& a : envNcclAliases()) {
    SCOPED_TRACE(std::string(a.name) + " <- " + a.alias);
    EXPECT_NE(envFind(a.name), nullptr) << "not in the registry";
    EXPECT_EQ(std::string(a.alias).rfind("NCCL_", 0), 0u);
    EXPECT_TRUE(aliases.insert(a.alias).second) << "alias listed twice";
    EXPECT_STREQ(envNcclAlias(a.name), a.alias);
  }
  EXPECT_GE(aliases.size(), 10u);
  EXPECT_STREQ(envNcclAlias("TESSERA_DEBUG"), "NCCL_DEBUG");
  EXPECT_EQ(envNcclAlias("TESSERA_SCRATCH_BYTES"), nullptr);
  EXPECT_EQ(envNcclAlias("TESSERA_NOT_A_VARIABLE"), nullptr);
  EXPECT_EQ(envNcclAlias(nullptr), nullptr);
  // The switch itself and the fallback path are registered (listed and validated).
  EXPECT_NE(envFind("TESSERA_NCCL_ENV"), nullptr);
  EXPECT_NE(envFind("TESSERA_NCCL_FALLBACK"), nullptr);
}

TEST_F(EnvNcclAlias, ReadWhenActiveAndTheTesseraVariableIsUnset) {
  test::ScopedEnv on("TESSERA_NCCL_ENV", "1");
  test::ScopedEnv own("TESSERA_MAX_CTAS", nullptr);
  test::ScopedEnv alias("NCCL_MAX_CTAS", "7");
  EXPECT_TRUE(envNcclAliasesActive());
  EXPECT_STREQ(envRaw("TESSERA_MAX_CTAS"), "7");
  EXPECT_STREQ(envSourceName("TESSERA_MAX_CTAS"), "NCCL_MAX_CTAS");
  int64_t v = 0;
  ASSERT_EQ(envInt("TESSERA_MAX_CTAS", &v), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(v, 7);

  // An alias whose name differs from the TESSERA_* one, and an enum (canonical case).
  test::ScopedEnv share("TESSERA_SPLIT_SHARE", nullptr);
  test::ScopedEnv shareAlias("NCCL_COMM_SPLIT_SHARE_RESOURCES", "1");
  ASSERT_EQ(envInt("TESSERA_SPLIT_SHARE", &v), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(v, 1);
  test::ScopedEnv level("TESSERA_DEBUG", nullptr);
  test::ScopedEnv levelAlias("NCCL_DEBUG", "info");
  std::string s;
  ASSERT_EQ(envEnum("TESSERA_DEBUG", &s), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(s, "INFO");
  // The log configuration reads through envRaw too.
  EXPECT_EQ(logConfigFromEnv().level, LogLevel::kInfo);
  // Every subsystem name NCCL documents is taken (NCCL-only ones map onto tessera's).
  test::ScopedEnv subsys("TESSERA_DEBUG_SUBSYS", nullptr);
  test::ScopedEnv subsysAlias("NCCL_DEBUG_SUBSYS",
                              "INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,ALLOC,CALL,PROXY,NVLS,"
                              "BOOTSTRAP,REG,PROFILE,RAS");
  EXPECT_EQ(envValidateAll(), tsrSuccess) << lastErrorMessage();
}

TEST_F(EnvNcclAlias, IgnoredUnlessTesseraNcclEnvIsOne) {
  test::ScopedEnv own("TESSERA_MAX_CTAS", nullptr);
  test::ScopedEnv alias("NCCL_MAX_CTAS", "7");
  for (const char* off : {static_cast<const char*>(nullptr), "0", "", "off", "maybe"}) {
    SCOPED_TRACE(off == nullptr ? "TESSERA_NCCL_ENV unset"
                                : std::string("TESSERA_NCCL_ENV=") + off);
    test::ScopedEnv sw("TESSERA_NCCL_ENV", off);
    EXPECT_FALSE(envNcclAliasesActive());
    EXPECT_EQ(envRaw("TESSERA_MAX_CTAS"), nullptr);
    EXPECT_STREQ(envSourceName("TESSERA_MAX_CTAS"), "TESSERA_MAX_CTAS");
    int64_t v = 0;
    ASSERT_EQ(envInt("TESSERA_MAX_CTAS", &v), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(v, 2);  // the registered default
  }
  // A bad alias value is not an error while aliases are off.
  test::ScopedEnv sw("TESSERA_NCCL_ENV", nullptr);
  test::ScopedEnv bad("NCCL_DEBUG", "BOGUS");
  EXPECT_EQ(envValidateAll(), tsrSuccess) << lastErrorMessage();
}

TEST_F(EnvNcclAlias, TheTesseraVariableWinsOverItsAlias) {
  test::ScopedEnv on("TESSERA_NCCL_ENV", "1");
  test::ScopedEnv own("TESSERA_MAX_CTAS", "3");
  test::ScopedEnv alias("NCCL_MAX_CTAS", "7");
  int64_t v = 0;
  ASSERT_EQ(envInt("TESSERA_MAX_CTAS", &v), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(v, 3);
  EXPECT_STREQ(envSourceName("TESSERA_MAX_CTAS"), "TESSERA_MAX_CTAS");
  // A bad alias value is not read (nor refused) when the TESSERA_* variable is set.
  test::ScopedEnv level("TESSERA_DEBUG", "WARN");
  test::ScopedEnv levelAlias("NCCL_DEBUG", "BOGUS");
  EXPECT_EQ(envValidateAll(), tsrSuccess) << lastErrorMessage();
  // An empty TESSERA_* value counts as unset, as everywhere: the alias is read.
  test::ScopedEnv empty("TESSERA_MAX_CTAS", "");
  ASSERT_EQ(envInt("TESSERA_MAX_CTAS", &v), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(v, 7);
}

TEST_F(EnvNcclAlias, ABadAliasValueIsRefusedNamingTheNcclVariable) {
  test::ScopedEnv on("TESSERA_NCCL_ENV", "1");
  struct Case {
    const char* name;
    const char* alias;
    const char* value;
  } cases[] = {
      {"TESSERA_DEBUG", "NCCL_DEBUG", "BOGUS"},
      {"TESSERA_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "INIT,NOPE"},
      {"TESSERA_MAX_CTAS", "NCCL_MAX_CTAS", "65"},
      {"TESSERA_COMM_BLOCKING", "NCCL_COMM_BLOCKING", "2"},
      {"TESSERA_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", "AF_UNIX"},
      {"TESSERA_P2P_LEVEL", "NCCL_P2P_LEVEL", "3"},  // NCCL's legacy numbers: not tessera's
      {"TESSERA_COMM_ID", "NCCL_COMM_ID", "no-port"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.alias) + "=" + c.value);
    test::ScopedEnv own(c.name, nullptr);
    test::ScopedEnv alias(c.alias, c.value);
    clearLastError();
    EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
    std::string why = lastErrorMessage();
    EXPECT_TRUE(contains(why, std::string(c.alias) + " ")) << why;
    EXPECT_TRUE(contains(why, c.value)) << why;
    EXPECT_TRUE(contains(why, c.name)) << why;  // and what it stands for
  }
}

TEST_F(EnvNcclAlias, TheSwitchItselfIsValidated) {
  test::ScopedEnv sw("TESSERA_NCCL_ENV", "maybe");
  clearLastError();
  EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
  EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_NCCL_ENV")) << lastErrorMessage();
}

TEST_F(EnvNcclAlias, FallbackMustBeAReadablePath) {
  {
    test::ScopedEnv bare("TESSERA_NCCL_FALLBACK", "libnccl.so.2");
    EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
    EXPECT_TRUE(contains(lastErrorMessage(), "TESSERA_NCCL_FALLBACK")) << lastErrorMessage();
  }
  {
    test::ScopedEnv missing("TESSERA_NCCL_FALLBACK", "/nonexistent/libnccl.so.2");
    EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
  }
  test::ScopedEnv readable("TESSERA_NCCL_FALLBACK", "/proc/self/exe");
  EXPECT_EQ(envValidateAll(), tsrSuccess) << lastErrorMessage();
}

TEST_F(EnvNcclAlias, CommIdSyntax) {
  for (const char* good : {"127.0.0.1:29500", "node-1.example:1", "[::1]:65535", "[fd00::2]:80"}) {
    test::ScopedEnv v("TESSERA_COMM_ID", good);
    EXPECT_EQ(envValidateAll(), tsrSuccess) << good << ": " << lastErrorMessage();
  }
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", ":29500", "::1:29500", "[::1]29500", "host:0",
                          "host:65536", "host:+5", "[]:5"}) {
    test::ScopedEnv v("TESSERA_COMM_ID", bad);
    EXPECT_EQ(envValidateAll(), tsrInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tessera
