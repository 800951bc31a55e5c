// The drain-reason grammar tools may rely on (docs/drain-reasons.md):
//   mrcheck: <check> [<device>] (<owner>): <text>
// <check> a check id ([a-z0-9_], 1-32 bytes), <device> optional (no space), <owner> job, node or site (absent only
// for an id without an owner, and in reasons of releases before owners), <text> printable ASCII; at most 200
// bytes in all. Every reason mrcheck-prolog sets must match it, whatever a summary holds.
#include "prolog/node_action.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace {

// The regular expression docs/drain-reasons.md gives, as a mapper would use it.
const std::regex k_grammar(
    R"(^mrcheck: ([a-z0-9_]{1,32})(?: ([^ :(][^ :]*(?::[^ :]+)*))?(?: \((job|node|site)\))?: ([ -~]*)$)");

mrcheck::check_result fail(std::string id, std::string summary) {
  mrcheck::check_result c;
  c.id = std::move(id);
  c.result = mrcheck::verdict::fail;
  c.summary = std::move(summary);
  return c;
}

}  // namespace

TEST(drain_reason_grammar, every_reason_matches) {
  const std::string hostile[] = {
      "mlx5_0 ConnectX-7 fw 28.33.0800 < 28.35.1012",
      "",
      "a: b: c",
      "line\nbreak\r\ttab and \x01 control",
      "utf-8 \xc3\xa9 and bad \xff bytes",
      std::string(500, 'x'),
      "mrcheck: nested: reason",
      "quote ' and \" and \\ backslash",
  };
  for (const std::string id : {"hca_fw", "slurmd_memlock", "max_map_count", "a"}) {
    for (const auto& s : hostile) {
      std::string r = mrcheck::drain_reason(fail(id, s));
      std::smatch m;
      ASSERT_TRUE(std::regex_match(r, m, k_grammar)) << r;
      EXPECT_EQ(m[1].str(), id) << r;
      EXPECT_LE(r.size(), mrcheck::k_max_reason);
      EXPECT_TRUE(mrcheck::is_mrcheck_reason(r));
    }
  }
}

TEST(drain_reason_grammar, parts_as_a_mapper_reads_them) {
  std::smatch m;
  std::string r = mrcheck::drain_reason(fail("hca_fw", "mlx5_0 ConnectX-7 fw 28.33.0800 < 28.35.1012"));
  ASSERT_TRUE(std::regex_match(r, m, k_grammar));
  EXPECT_EQ(m[1].str(), "hca_fw");
  EXPECT_FALSE(m[2].matched);  // no device part: the device is named in the text
  EXPECT_EQ(m[3].str(), "node");
  EXPECT_EQ(m[4].str(), "mlx5_0 ConnectX-7 fw 28.33.0800 < 28.35.1012");
  // The device form, with a PCI address as the device.
  const std::string with_device = "mrcheck: bar1 0000:3b:00.0 (node): BAR1 16 GiB < GPU memory 141 GiB";
  ASSERT_TRUE(std::regex_match(with_device, m, k_grammar));
  EXPECT_EQ(m[1].str(), "bar1");
  EXPECT_EQ(m[2].str(), "0000:3b:00.0");
  EXPECT_EQ(m[3].str(), "node");
  EXPECT_EQ(m[4].str(), "BAR1 16 GiB < GPU memory 141 GiB");
  // A reason of a release before owners still reads.
  const std::string old_form = "mrcheck: hca_fw mlx5_0: fw old";
  ASSERT_TRUE(std::regex_match(old_form, m, k_grammar));
  EXPECT_EQ(m[2].str(), "mlx5_0");
  EXPECT_FALSE(m[3].matched);
  // Not ours: another tool's reason, NHC's prefix (strip "NHC: " first), a bad check id.
  for (const std::string other :
       {"maintenance", "NHC: mrcheck: hca_fw: x", "mrcheck:hca_fw: x", "mrcheck: HCA: x", "Kill task failed"}) {
    EXPECT_FALSE(std::regex_match(other, m, k_grammar)) << other;
  }
}

// A finding about one device carries it as the <device> part, named once; a name the grammar cannot carry stays in
// the text, and the reason still matches.
TEST(drain_reason_grammar, device_part_when_the_check_names_one_device) {
  std::smatch m;
  mrcheck::check_result fw = fail("hca_fw", "mlx5_0 ConnectX-7 fw 28.33.0800 < 28.35.1012");
  fw.device = "mlx5_0";
  std::string r = mrcheck::drain_reason(fw);
  EXPECT_EQ(r, "mrcheck: hca_fw mlx5_0 (node): ConnectX-7 fw 28.33.0800 < 28.35.1012");
  ASSERT_TRUE(std::regex_match(r, m, k_grammar));
  EXPECT_EQ(m[2].str(), "mlx5_0");

  mrcheck::check_result bar = fail("bar1", "0000:3b:00.0 BAR1 256 MiB < memory 141 GiB");
  bar.device = "0000:3b:00.0";
  r = mrcheck::drain_reason(bar);
  EXPECT_EQ(r, "mrcheck: bar1 0000:3b:00.0 (node): BAR1 256 MiB < memory 141 GiB");
  ASSERT_TRUE(std::regex_match(r, m, k_grammar));
  EXPECT_EQ(m[2].str(), "0000:3b:00.0");

  mrcheck::check_result reg = fail("mr_host", "mlx5_1: ibv_reg_mr_iova2 of 73.5 MiB host memory failed with ENOMEM");
  reg.device = "mlx5_1";
  EXPECT_EQ(mrcheck::drain_reason(reg),
            "mrcheck: mr_host mlx5_1 (node): ibv_reg_mr_iova2 of 73.5 MiB host memory failed with ENOMEM");

  for (const std::string& bad :
       std::vector<std::string>{"mlx5 0", "a::b", ":x", "x:", "ml\x01x", "(job)", std::string(65, 'd')}) {
    mrcheck::check_result c = fail("hca_fw", "fw too old");
    c.device = bad;
    r = mrcheck::drain_reason(c);
    ASSERT_TRUE(std::regex_match(r, m, k_grammar)) << r;
    EXPECT_FALSE(m[2].matched) << r;
    EXPECT_EQ(m[3].str(), "node") << r;
    EXPECT_EQ(m[4].str(), "fw too old");
  }
}

// The owner part: the verdict's own (stack, nofile, the plugin's memlock), else the check's.
TEST(drain_reason_grammar, owner_part_names_who_fixes_it) {
  std::smatch m;
  mrcheck::check_result site = fail("propagate_limits", "PropagateResourceLimits sends MEMLOCK");
  std::string r = mrcheck::drain_reason(site);
  EXPECT_EQ(r, "mrcheck: propagate_limits (site): PropagateResourceLimits sends MEMLOCK");
  ASSERT_TRUE(std::regex_match(r, m, k_grammar));
  EXPECT_EQ(m[3].str(), "site");
  mrcheck::check_result stack = fail("stack", "task will start with stack soft unlimited");
  EXPECT_EQ(mrcheck::drain_reason(stack), "mrcheck: stack (job): task will start with stack soft unlimited");
  stack.owner = mrcheck::fix_owner::node;
  EXPECT_EQ(mrcheck::drain_reason(stack), "mrcheck: stack (node): task will start with stack soft unlimited");
  // An id no check has: no owner part, still the grammar.
  r = mrcheck::drain_reason(fail("a", "x"));
  EXPECT_EQ(r, "mrcheck: a: x");
  ASSERT_TRUE(std::regex_match(r, m, k_grammar));
}
