#include <mrcheck/check.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mrcheck {
namespace {

TEST(report, overall_ignores_skip_and_takes_the_worst) {
  report r;
  EXPECT_EQ(r.overall(), verdict::pass);
  r.checks.push_back({"mr_gpu", verdict::skip, "no GPU", "", ""});
  EXPECT_EQ(r.overall(), verdict::pass);
  r.checks.push_back({"hugepages", verdict::warn, "x", "", "y"});
  EXPECT_EQ(r.overall(), verdict::warn);
  r.checks.push_back({"memlock", verdict::fail, "task memlock 64 KiB", "", "PropagateResourceLimitsExcept=MEMLOCK"});
  EXPECT_EQ(r.overall(), verdict::fail);
  auto lines = failure_lines(r);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "mrcheck: memlock: FAIL: task memlock 64 KiB (fix: PropagateResourceLimitsExcept=MEMLOCK)");
}

TEST(report, json_round_trip_and_unknown_verdict) {
  report r;
  r.checks.push_back({"memlock", verdict::fail, "s", "d", "h"});
  auto j = report_to_json(r);
  EXPECT_EQ(j["verdict"], "fail");
  report back;
  std::string err;
  ASSERT_TRUE(report_from_json(j, back, err)) << err;
  ASSERT_EQ(back.checks.size(), 1u);
  EXPECT_EQ(back.checks[0].hint, "h");
  j["checks"][0]["verdict"] = "great";
  EXPECT_FALSE(report_from_json(j, back, err));
}

}  // namespace
}  // namespace mrcheck
