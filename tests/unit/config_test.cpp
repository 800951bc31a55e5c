#include <mrcheck/config.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <string>

namespace mrcheck {
namespace {

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/mrcheck_config_test_XXXXXX";
  int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(name) << text;
  return name;
}

TEST(check_groups, lists) {
  auto g = parse_check_groups("memlock,mr");
  ASSERT_TRUE(g.is_ok());
  EXPECT_TRUE(g->memlock && g->mr && !g->nccl);
  auto all = parse_check_groups("all,verbose");
  ASSERT_TRUE(all.is_ok());
  EXPECT_TRUE(all->memlock && all->mr && all->nccl && all->rdma && all->verbose);
  EXPECT_EQ(all->to_string(), "memlock,mr,nccl,rdma,verbose");
  auto rdma = parse_check_groups("rdma");
  ASSERT_TRUE(rdma.is_ok());
  EXPECT_TRUE(rdma->rdma && !rdma->mr && rdma->any());
  auto bare = parse_check_groups(std::nullopt);
  ASSERT_TRUE(bare.is_ok());
  EXPECT_EQ(bare->to_string(), "memlock,mr");
  auto empty = parse_check_groups("");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->to_string(), "memlock,mr");
  auto off = parse_check_groups("off");
  ASSERT_TRUE(off.is_ok());
  EXPECT_TRUE(off->off);
  EXPECT_FALSE(off->any());
}

TEST(check_groups, hostile_values_are_refused) {
  for (const char* bad : {"bogus", "memlock;rm -rf /", "MEMLOCK", "mr,$(id)", "off,mr", "memlock\n", "a b"}) {
    auto g = parse_check_groups(bad);
    EXPECT_FALSE(g.is_ok()) << bad;
  }
  EXPECT_FALSE(parse_check_groups(std::string(200, 'm')).is_ok());
  auto r = parse_check_groups("memlock,evil\x1b[31m");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().message().find('\x1b'), std::string::npos) << "escape byte must not reach a log";
}

TEST(config, items) {
  config c;
  EXPECT_TRUE(apply_config_item(c, "memlock_min=8M", "t"));
  EXPECT_EQ(c.memlock_min, 8u << 20);
  EXPECT_TRUE(apply_config_item(c, " enforce = yes ", "t"));
  EXPECT_TRUE(c.enforce);
  EXPECT_TRUE(apply_config_item(c, "on_fail=warn", "t"));
  EXPECT_EQ(c.on_fail, fail_policy::warn);
  EXPECT_TRUE(apply_config_item(c, "default_checks=memlock", "t"));
  EXPECT_TRUE(c.default_checks.memlock);
  EXPECT_TRUE(apply_config_item(c, "probe_timeout=5s", "t"));
  EXPECT_EQ(c.probe_timeout.count(), 5000);
  EXPECT_TRUE(apply_config_item(c, "report_dir=", "t"));
  EXPECT_EQ(c.report_dir, "");
}

TEST(config, errors_name_their_origin) {
  config c;
  auto s = apply_config_item(c, "memlok_min=8M", "plugstack.conf argument 2");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("plugstack.conf argument 2"), std::string::npos);
  EXPECT_NE(s.message().find("unknown key 'memlok_min'"), std::string::npos);
  EXPECT_FALSE(apply_config_item(c, "enforce=maybe", "t"));
  EXPECT_FALSE(apply_config_item(c, "enforce", "t"));
  EXPECT_FALSE(apply_config_item(c, "helper=relative/path", "t"));
  EXPECT_FALSE(apply_config_item(c, "memlock_min=lots", "t"));
  EXPECT_FALSE(apply_config_item(c, "default_checks=bogus", "t"));
}

TEST(config, file_with_comments_and_bad_line) {
  auto good = write_temp("# site policy\n\nmemlock_min = unlimited  # as NCCL asks\nenforce=no\n");
  config c;
  c.memlock_min = 1;
  ASSERT_TRUE(load_config_file(c, good));
  EXPECT_EQ(c.memlock_min, UINT64_MAX);
  EXPECT_EQ(c.config_file, good);

  auto bad = write_temp("enforce=yes\n\nbogus_key=1\n");
  config d;
  auto s = load_config_file(d, bad);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(bad + ":3"), std::string::npos) << s.message();
  unlink(good.c_str());
  unlink(bad.c_str());
}

TEST(config, plugstack_args_override_file) {
  auto file = write_temp("memlock_min=1G\non_fail=warn\n");
  std::string cfg = "config=" + file;
  std::vector<std::string_view> args{cfg, "on_fail=fail"};
  auto c = parse_config_args(args, "plugstack.conf");
  ASSERT_TRUE(c.is_ok()) << c.error().message();
  EXPECT_EQ(c->memlock_min, 1u << 30);
  EXPECT_EQ(c->on_fail, fail_policy::fail);

  std::vector<std::string_view> missing{"config=/nonexistent/mrcheck.conf"};
  auto m = parse_config_args(missing, "plugstack.conf");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.error().message().find("/nonexistent/mrcheck.conf"), std::string::npos);
  unlink(file.c_str());
}

// config's member initializers are the table's defaults (src/config/config.cpp, k_keys), applied by each key's
// own parser; helper and admin_helper are empty in the struct, meaning this build's paths, which the table shows.
TEST(config, defaults_are_the_tables) {
  config table;
  for (const auto& k : config_keys()) {
    ASSERT_NE(k.apply, nullptr) << k.key;
    auto s = k.apply(table, k.default_value);
    EXPECT_TRUE(s) << k.key << ": " << s.message();
  }
  const config built_in;
  EXPECT_EQ(table.helper, built_in.helper_path());
  EXPECT_EQ(table.admin_helper, built_in.admin_helper_path());
  table.helper = built_in.helper;
  table.admin_helper = built_in.admin_helper;
  EXPECT_TRUE(table == built_in);
  EXPECT_EQ(table.memlock_min, built_in.memlock_min);
  EXPECT_EQ(table.admin_comment_max, built_in.admin_comment_max);
  EXPECT_EQ(table.container_wait, built_in.container_wait);
}

TEST(config, every_documented_key_is_accepted) {
  for (const auto& k : config_keys()) {
    config c;
    std::string v(k.default_value);
    if (k.key == "default_checks") v = "memlock";
    if (v.empty()) v = "/tmp/x";
    std::string item = std::string(k.key) + "=" + v;
    EXPECT_TRUE(apply_config_item(c, item, "doc")) << item;
  }
}

}  // namespace
}  // namespace mrcheck
