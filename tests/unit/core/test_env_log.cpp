// The env registry, log configuration and last-error sentences.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "core/env.hpp"
#include "core/log.hpp"
#include "core/status.hpp"
#include "support/harness.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kEnv;

TEST(EnvRegistry, EveryEntryIsDocumentedAndItsDefaultParses) {
  std::set<std::string> names;
  for (const EnvVarInfo& v : envRegistry()) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(std::string(v.name).rfind("TESSERA_", 0), 0u);
    EXPECT_TRUE(names.insert(v.name).second) << "registered twice";
    ASSERT_NE(v.meaning, nullptr);
    EXPECT_GT(std::strlen(v.meaning), 10u);
    test::ScopedEnv unset(v.name, nullptr);
    int64_t i;
    bool b;
    double d;
    std::string s;
    switch (v.type) {
      case EnvType::kInt: EXPECT_EQ(envInt(v.name, &i), tsrSuccess); break;
      case EnvType::kBool: EXPECT_EQ(envBool(v.name, &b), tsrSuccess); break;
      case EnvType::kDouble: EXPECT_EQ(envDouble(v.name, &d), tsrSuccess); break;
      case EnvType::kString: EXPECT_EQ(envString(v.name, &s), tsrSuccess); break;
      case EnvType::kEnum:
        EXPECT_EQ(envEnum(v.name, &s), tsrSuccess);
        EXPECT_NE(v.choices, nullptr);
        break;
    }
  }
  EXPECT_GE(names.size(), 10u);
}

TEST(EnvRegistry, TypedReadsAndDefaults) {
  test::ScopedEnv t("TESSERA_BOOTSTRAP_TIMEOUT", nullptr);
  double d = 0;
  ASSERT_EQ(envDouble("TESSERA_BOOTSTRAP_TIMEOUT", &d), tsrSuccess);
  EXPECT_EQ(d, 120.0);
  test::ScopedEnv t2("TESSERA_BOOTSTRAP_TIMEOUT", "2.5");
  ASSERT_EQ(envDouble("TESSERA_BOOTSTRAP_TIMEOUT", &d), tsrSuccess);
  EXPECT_EQ(d, 2.5);
  test::ScopedEnv e("TESSERA_DEBUG", "info");
  std::string s;
  ASSERT_EQ(envEnum("TESSERA_DEBUG", &s), tsrSuccess);
  EXPECT_EQ(s, "INFO");
  test::ScopedEnv b("TESSERA_NVML_DISABLE", "yes");
  bool flag = false;
  ASSERT_EQ(envBool("TESSERA_NVML_DISABLE", &flag), tsrSuccess);
  EXPECT_TRUE(flag);
}

TEST(EnvRegistry, InvalidValuesAreErrorsWithASentence) {
  struct Case {
    const char* name;
    const char* value;
  } cases[] = {
      {"TESSERA_BOOTSTRAP_TIMEOUT", "soon"},
      {"TESSERA_BOOTSTRAP_TIMEOUT", "-1"},
      {"TESSERA_BOOTSTRAP_TIMEOUT", "nan"},
      {"TESSERA_DEBUG", "LOUD"},
      {"TESSERA_DEBUG_SUBSYS", "INIT,BOGUS"},
      {"TESSERA_NVML_DISABLE", "maybe"},
      {"TESSERA_MIN_CTAS", "0"},
      {"TESSERA_MIN_CTAS", "12abc"},
      {"TESSERA_SOCKET_IFNAME", "^"},
      {"TESSERA_SOCKET_FAMILY", "AF_UNIX"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    test::ScopedEnv env(c.name, c.value);
    clearLastError();
    EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
    std::string why = lastErrorMessage();
    EXPECT_NE(why.find(c.name), std::string::npos) << why;
    EXPECT_NE(why.find(c.value), std::string::npos) << why;
  }
}

TEST(EnvRegistry, IntegersAreDecimal) {
  test::ScopedEnv v("TESSERA_MAX_CTAS", "010");
  int64_t x = 0;
  ASSERT_EQ(envInt("TESSERA_MAX_CTAS", &x), tsrSuccess);
  EXPECT_EQ(x, 10);
}

TEST(EnvRegistry, TheFirstInvalidVariableIsTheOneReported) {
  // Registry order: TESSERA_NVML_DISABLE comes before TESSERA_SPLIT_SHARE.
  test::ScopedEnv a("TESSERA_NVML_DISABLE", "maybe");
  test::ScopedEnv b("TESSERA_SPLIT_SHARE", "7");
  EXPECT_EQ(envValidateAll(), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("TESSERA_NVML_DISABLE"), std::string::npos)
      << lastErrorMessage();
}

TEST(Log, EmptyVariablesMeanTheDefaults) {
  test::ScopedEnv level("TESSERA_DEBUG", "");
  test::ScopedEnv subsys("TESSERA_DEBUG_SUBSYS", "");
  LogConfig c = logConfigFromEnv();
  EXPECT_EQ(c.level, LogLevel::kWarn);
  EXPECT_NE(c.subsysMask & static_cast<uint32_t>(Subsys::kInit), 0u);
  EXPECT_EQ(envValidateAll(), tsrSuccess);
}

TEST(EnvRegistry, ReadingAnUnregisteredNameIsAnInternalError) {
  int64_t v;
  EXPECT_EQ(envInt("TESSERA_NOT_A_VARIABLE", &v), tsrInternalError);
  double d;
  EXPECT_EQ(envDouble("TESSERA_MIN_CTAS", &d), tsrInternalError);  // registered as int
}

TEST(Log, ParseSubsysMask) {
  uint32_t m = 0;
  std::string why;
  ASSERT_TRUE(parseSubsysMask("INIT,coll", &m, &why));
  EXPECT_EQ(m, static_cast<uint32_t>(Subsys::kInit) | static_cast<uint32_t>(Subsys::kColl));
  ASSERT_TRUE(parseSubsysMask("^TOPO", &m, &why));
  EXPECT_EQ(m & static_cast<uint32_t>(Subsys::kTopo), 0u);
  EXPECT_NE(m & static_cast<uint32_t>(Subsys::kInit), 0u);
  ASSERT_TRUE(parseSubsysMask("ALL", &m, &why));
  EXPECT_EQ(m, 0xffffffffu);
  EXPECT_FALSE(parseSubsysMask("INIT,NOPE", &m, &why));
  EXPECT_NE(why.find("NOPE"), std::string::npos);
}

TEST(Log, ParseLevel) {
  LogLevel l;
  std::string why;
  EXPECT_TRUE(parseLogLevel("trace", &l, &why));
  EXPECT_EQ(l, LogLevel::kTrace);
  EXPECT_FALSE(parseLogLevel("verbose", &l, &why));
}

TEST(Log, FileNameExpansion) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string h = host;
  h = h.substr(0, h.find('.'));
  EXPECT_EQ(expandLogFileName("/tmp/t.%h.%p.log"),
            "/tmp/t." + h + "." + std::to_string(getpid()) + ".log");
  EXPECT_EQ(expandLogFileName("100%%"), "100%");
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Log, LinesCarryHostPidRankAndSubsystemAndFollowTheFilter) {
  std::string path = "/tmp/tessera_log_test." + std::to_string(getpid()) + ".log";
  std::remove(path.c_str());
  LogConfig config;
  config.level = LogLevel::kInfo;
  ASSERT_TRUE(parseSubsysMask("^TOPO", &config.subsysMask, nullptr));
  config.file = path;
  logConfigure(config);
  {
    ScopedRank rank(5);
    TSR_LOG_IMPL(LogLevel::kInfo, Subsys::kBootstrap, "hello %d", 42);
    TSR_LOG_IMPL(LogLevel::kInfo, Subsys::kTopo, "filtered out");
    TSR_LOG_IMPL(LogLevel::kTrace, Subsys::kBootstrap, "too detailed");
    TSR_LOG_IMPL(LogLevel::kWarn, Subsys::kTopo, "warnings pass the filter");
  }
  logConfigure(logConfigFromEnv());
  std::string text = slurp(path);
  std::remove(path.c_str());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string h = host;
  h = h.substr(0, h.find('.'));
  std::string prefix = h + ":" + std::to_string(getpid()) + ":";
  EXPECT_NE(text.find(prefix), std::string::npos) << text;
  EXPECT_NE(text.find("[5] tessera INFO BOOTSTRAP hello 42"), std::string::npos) << text;
  EXPECT_EQ(text.find("filtered out"), std::string::npos) << text;
  EXPECT_EQ(text.find("too detailed"), std::string::npos) << text;
  EXPECT_NE(text.find("WARN TOPO warnings pass the filter"), std::string::npos) << text;
}

TEST(Status, LastErrorIsPerThreadAndNamesTheRank) {
  clearLastError();
  {
    ScopedRank rank(3);
    EXPECT_EQ(TSR_FAIL(tsrInvalidArgument, "count %d is too large", 7), tsrInvalidArgument);
  }
  EXPECT_STREQ(lastErrorMessage(), "rank 3: count 7 is too large");
  std::string other;
  std::thread([&] { other = lastErrorMessage(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(addContext(tsrTimeout, "while joining"), tsrTimeout);
  EXPECT_STREQ(lastErrorMessage(), "while joining: rank 3: count 7 is too large");
}

TEST(Status, ErrorStringsForEveryCode) {
  std::set<std::string> seen;
  for (int c = 0; c < tsrNumResults; ++c) {
    std::string s = tsrGetErrorString(static_cast<tsrResult_t>(c));
    EXPECT_FALSE(s.empty());
    EXPECT_TRUE(seen.insert(s).second) << s;
  }
  EXPECT_STREQ(tsrGetErrorString(static_cast<tsrResult_t>(99)), "unknown result code");
}

}  // namespace
}  // namespace tessera
