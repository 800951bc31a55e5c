// The shipped examples must say what they claim: etc/mrcheck.conf parses with every key at its documented
// default, and the plugstack drop-in's arguments parse with the same parser.
#include <mrcheck/config.h>
#include <mrcheck/units.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#ifndef MRCHECK_SOURCE_ETC
#define MRCHECK_SOURCE_ETC MRCHECK_FIXTURES_DIR "/../../etc"
#endif

namespace mrcheck {
namespace {

TEST(SpankConfigExample, MrcheckConfParsesToTheDocumentedDefaults) {
  config c;
  auto s = load_config_file(c, MRCHECK_SOURCE_ETC "/mrcheck.conf");
  ASSERT_TRUE(s) << s.message();
  config defaults;
  EXPECT_FALSE(c.default_checks.any()) << c.default_checks.to_string();
  EXPECT_EQ(c.memlock_min, k_unlimited);
  EXPECT_EQ(c.enforce, defaults.enforce);
  EXPECT_EQ(c.on_fail, defaults.on_fail);
  EXPECT_EQ(c.on_error, defaults.on_error);
  EXPECT_EQ(c.allow_user_off, defaults.allow_user_off);
  EXPECT_EQ(c.probe_timeout, defaults.probe_timeout);
  EXPECT_EQ(c.nccl_timeout, defaults.nccl_timeout);
}

TEST(SpankConfigExample, EveryKeyIsDocumentedInMrcheckConf) {
  std::ifstream f(MRCHECK_SOURCE_ETC "/mrcheck.conf");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  for (const auto& k : config_keys()) {
    EXPECT_NE(text.find(std::string(k.key) + "="), std::string::npos) << k.key << " is not in etc/mrcheck.conf";
  }
}

TEST(SpankConfigExample, PlugstackArgumentsOverrideTheFile) {
  std::string file = std::string("config=") + MRCHECK_SOURCE_ETC "/mrcheck.conf";
  std::vector<std::string_view> args = {file, "memlock_min=8M", "enforce=yes"};
  auto c = parse_config_args(args, "plugstack.conf");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->memlock_min, 8ull << 20);
  EXPECT_TRUE(c->enforce);
  std::vector<std::string_view> bad = {"memlock_min=8Q"};
  auto e = parse_config_args(bad, "plugstack.conf");
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("plugstack.conf argument 1"), std::string::npos) << e.error().message();
}

}  // namespace
}  // namespace mrcheck
