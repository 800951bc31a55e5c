// The basic checks of `mrcheck report` on fixture trees and on hand-made facts.
#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

#include "judge.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

node_facts fixture(const std::string& name) {
  auto root = sysroot::open(fs::path(MRCHECK_FIXTURES_DIR) / name);
  EXPECT_TRUE(root.is_ok());
  return collect_facts(*root, {});
}

process_fact proc(pid_t pid, const std::string& comm, std::uint64_t soft, std::uint64_t hard) {
  process_fact p;
  p.pid = pid;
  p.comm = comm;
  p.memlock = memlock_limit{soft, hard};
  return p;
}

TEST(basic_checks, memlock_pass_when_unlimited) {
  config c;  // memlock_min defaults to unlimited
  auto r = check_memlock(fixture("gpu_h200"), c);
  EXPECT_EQ(r.id, "memlock");
  EXPECT_EQ(r.result, verdict::pass) << r.summary;
}

TEST(basic_checks, memlock_fail_names_the_hop) {
  config c;
  auto r = check_memlock(fixture("hca_inbox_open"), c);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_NE(r.summary.find("64 KiB"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("lowered at bash (3100)"), std::string::npos) << r.summary;
  EXPECT_NE(r.hint.find("hard limit is 8 MiB"), std::string::npos) << r.hint;  // the hard limit blocks ulimit
  EXPECT_NE(r.detail.find("<- lowered here"), std::string::npos);
}

TEST(basic_checks, memlock_threshold_from_config_and_soft_only_hint) {
  node_facts f;
  f.chain = {proc(30, "bash", 64 << 10, 8 << 20), proc(20, "sshd", 8 << 20, 8 << 20),
             proc(1, "init", 8 << 20, 8 << 20)};
  mark_lowered(f.chain);
  config c;
  c.memlock_min = 8 << 20;
  auto r = check_memlock(f, c);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_NE(r.hint.find("ulimit -l 8192"), std::string::npos) << r.hint;  // hard allows raising it
  c.memlock_min = 64 << 10;
  EXPECT_EQ(check_memlock(f, c).result, verdict::pass);
  c.memlock_min = (64 << 10) + 1;
  EXPECT_EQ(check_memlock(f, c).result, verdict::fail);
}

TEST(basic_checks, memlock_errors_when_unknown) {
  node_facts f;
  f.chain_status = status::error("readlink /proc/self: No such file or directory");
  config c;
  auto r = check_memlock(f, c);
  EXPECT_EQ(r.result, verdict::error);
  EXPECT_NE(r.summary.find("/proc/self"), std::string::npos);
  process_fact p = proc(5, "x", 0, 0);
  p.memlock = status::error("read /proc/5/limits: Permission denied");
  f.chain = {p};
  r = check_memlock(f, c);
  EXPECT_EQ(r.result, verdict::error);
  EXPECT_NE(r.summary.find("Permission denied"), std::string::npos);
}

TEST(basic_checks, max_map_count_thresholds) {
  const matrix_rules c = default_matrix_rules();
  node_facts f;
  f.max_map_count = std::uint64_t{65530};
  auto r = check_max_map_count(f, c);
  EXPECT_EQ(r.result, verdict::warn);
  EXPECT_NE(r.summary.find("kernel default"), std::string::npos);
  ASSERT_TRUE(c.max_map_count_recommended.has_value());
  f.max_map_count = *c.max_map_count_recommended - 1;
  EXPECT_EQ(check_max_map_count(f, c).result, verdict::warn);
  f.max_map_count = *c.max_map_count_recommended;
  EXPECT_EQ(check_max_map_count(f, c).result, verdict::pass);
  f.max_map_count = status::error("read /proc/sys/vm/max_map_count: No such file or directory");
  EXPECT_EQ(check_max_map_count(f, c).result, verdict::error);
  EXPECT_EQ(check_max_map_count(fixture("gpu_h200"), c).result, verdict::pass);
}

TEST(basic_checks, hugepages_branches) {
  const matrix_rules c = default_matrix_rules();
  EXPECT_EQ(check_hugepages(fixture("gpu_h200"), c).result, verdict::pass);          // none reserved
  EXPECT_EQ(check_hugepages(fixture("hca_ofed_peermem"), c).result, verdict::pass);  // 512 of 1024 free
  auto used = check_hugepages(fixture("hca_inbox_open"), c);
  EXPECT_EQ(used.result, verdict::warn);
  EXPECT_NE(used.summary.find("all 1024 hugepages"), std::string::npos) << used.summary;
  EXPECT_EQ(check_hugepages(fixture("garbage"), c).result, verdict::error);
}

TEST(basic_checks, report_over_fixtures) {
  config c;
  const matrix_rules d = default_matrix_rules();
  auto gpu = run_basic_checks(fixture("gpu_h200"), c, d);
  ASSERT_NE(gpu.find("memlock"), nullptr);
  ASSERT_NE(gpu.find("max_map_count"), nullptr);
  ASSERT_NE(gpu.find("hugepages"), nullptr);
  EXPECT_EQ(gpu.overall(), verdict::pass);
  auto cpu = run_basic_checks(fixture("cpu_debian12"), c, d);
  EXPECT_EQ(cpu.overall(), verdict::fail);
  EXPECT_EQ(cpu.find("max_map_count")->result, verdict::warn);
  auto junk = run_basic_checks(fixture("garbage"), c, d);
  for (const auto& r : junk.checks) EXPECT_EQ(r.result, verdict::error) << r.id;
}

// `mrcheck report` judges max_map_count and hugepages by the site's rules, as mrcheck-prolog does: a site that
// turned a check off, or raised a threshold, sees the same verdict from both.
TEST(basic_checks, report_follows_the_site_rules) {
  config c;
  matrix_rules site = default_matrix_rules();
  site.max_map_count = rule_action::off;
  site.hugepages = rule_action::off;
  auto off = run_basic_checks(fixture("cpu_debian12"), c, site);
  EXPECT_EQ(off.find("max_map_count")->result, verdict::skip);
  EXPECT_EQ(off.find("hugepages")->result, verdict::skip);
  matrix_rules strict = default_matrix_rules();
  strict.max_map_count_min = std::uint64_t{1} << 30;
  strict.max_map_count_recommended = std::uint64_t{1} << 30;
  auto raised = run_basic_checks(fixture("gpu_h200"), c, strict);
  EXPECT_EQ(raised.find("max_map_count")->result, verdict::fail);
  EXPECT_EQ(raised.find("max_map_count")->result, check_max_map_count(fixture("gpu_h200"), strict).result);
}

}  // namespace
}  // namespace mrcheck
