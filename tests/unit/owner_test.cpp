// Who fixes a finding (include/mrcheck/owner.h): every registered check has an owner, a verdict's own owner wins,
// and the JSON carries it.
#include <mrcheck/check_registry.h>
#include <mrcheck/owner.h>

#include "check_rows.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

TEST(Owner, EveryRegisteredCheckHasOne) {
  for (const check_def* d : test::all_check_rows()) EXPECT_NE(default_owner(d->id), fix_owner::none) << d->id;
  EXPECT_EQ(default_owner("no_such_check"), fix_owner::none);
}

TEST(Owner, TheNodesStackTheSitesConfAndTheJobsLimits) {
  EXPECT_EQ(default_owner("hca_fw"), fix_owner::node);
  EXPECT_EQ(default_owner("slurmd_memlock"), fix_owner::node);
  EXPECT_EQ(default_owner("max_map_count"), fix_owner::node);
  EXPECT_EQ(default_owner("propagate_limits"), fix_owner::site);
  EXPECT_EQ(default_owner("stack"), fix_owner::job);
  EXPECT_EQ(default_owner("container"), fix_owner::job);
}

TEST(Owner, TheVerdictsOwnWinsOverTheChecks) {
  check_result c;
  c.id = "stack";
  EXPECT_EQ(owner_of(c), fix_owner::job);
  c.owner = fix_owner::node;  // slurmd's own limit
  EXPECT_EQ(owner_of(c), fix_owner::node);
}

TEST(Owner, JsonCarriesTheChecksOwnerWhenTheVerdictNamesNone) {
  report r;
  check_result c;
  c.id = "bar1";
  c.result = verdict::fail;
  r.checks.push_back(c);
  c.id = "made_up";
  r.checks.push_back(c);
  auto j = report_to_json(r);
  EXPECT_EQ(j["checks"][0]["owner"], "node");
  EXPECT_FALSE(j["checks"][1].contains("owner"));
  // Read back, the owner is the verdict's: the same word comes out again.
  report back;
  std::string err;
  ASSERT_TRUE(report_from_json(j, back, err)) << err;
  EXPECT_EQ(back.checks.at(0).owner, fix_owner::node);
  EXPECT_EQ(report_to_json(back)["checks"][0]["owner"], "node");
}

}  // namespace
}  // namespace mrcheck
