// mrcheck-prolog's decisions against a fake slurmctld: drain with mrcheck's reason, never touch a foreign
// reason, resume only its own drains, retry an unreachable slurmctld inside the budget, and the state
// directory that keeps an action that did not land.
#include "prolog/node_action.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

using namespace std::chrono_literals;

// A slurmctld in memory. `down_for` calls answer EAGAIN first (unreachable), as the libslurm child does.
class fake_ctld final : public node_control {
 public:
  node_status node;
  int down_for = 0;
  bool refuse = false;
  int queries = 0, drains = 0, resumes = 0;
  std::vector<std::chrono::milliseconds> timeouts;

  result<node_status> query(const std::string&, std::chrono::milliseconds t) override {
    ++queries;
    timeouts.push_back(t);
    if (down_for > 0) {
      --down_for;
      return status::from_errno("slurm_load_node_single: Unable to contact slurm controller", EAGAIN);
    }
    return node;
  }
  status drain(const std::string&, const std::string& reason, std::chrono::milliseconds t) override {
    timeouts.push_back(t);
    if (down_for > 0) {
      --down_for;
      return status::from_errno("slurm_update_node: Unable to contact slurm controller", EAGAIN);
    }
    if (refuse) return status::error("slurm_update_node: Access/permission denied (slurm error 2002)");
    ++drains;
    node.drain = true;
    node.reason = reason;
    return status::ok();
  }
  status resume(const std::string&, std::chrono::milliseconds t) override {
    timeouts.push_back(t);
    ++resumes;
    node.drain = false;
    node.reason.clear();
    return status::ok();
  }
};

// A clock that advances only when the code sleeps or a call "takes" time.
struct fake_time {
  std::chrono::steady_clock::time_point t{};
  std::vector<std::chrono::milliseconds> sleeps;
  retry_clock clock() {
    retry_clock c;
    c.now = [this] { return t; };
    c.sleep = [this](std::chrono::milliseconds d) {
      sleeps.push_back(d);
      t += d;
    };
    return c;
  }
};

check_result failing(std::string id, std::string summary) {
  check_result c;
  c.id = std::move(id);
  c.result = verdict::fail;
  c.summary = std::move(summary);
  return c;
}

TEST(PrologReason, PrefixEscapeAndBound) {
  EXPECT_EQ(drain_reason(failing("hca_fw", "mlx5_0 ConnectX-7 fw 28.33.1000 < 28.35.1012")),
            "mrcheck: hca_fw (node): mlx5_0 ConnectX-7 fw 28.33.1000 < 28.35.1012");
  std::string evil = drain_reason(failing("rdma_stack", "ver \n\x1b[2Jx\xff"));
  EXPECT_EQ(evil, "mrcheck: rdma_stack (node): ver \\x0a\\x1b[2Jx\\xff");
  std::string long_reason = drain_reason(failing("bar1", std::string(500, 'a')));
  EXPECT_EQ(long_reason.size(), k_max_reason);
  EXPECT_TRUE(long_reason.ends_with("..."));
  EXPECT_TRUE(is_mrcheck_reason(long_reason));
  EXPECT_FALSE(is_mrcheck_reason("maintenance"));
  EXPECT_FALSE(is_mrcheck_reason("Prolog error"));
}

TEST(PrologPlan, FailDrainsErrorDependsOnPolicyElseResume) {
  report r;
  check_result p;
  p.id = "hca_fw";
  p.result = verdict::pass;
  check_result w = p;
  w.id = "bar1";
  w.result = verdict::warn;
  check_result e = p;
  e.id = "slurmd_memlock";
  e.result = verdict::error;
  e.summary = "slurmd pid 7 limits unreadable";
  r.checks = {p, w};
  EXPECT_EQ(plan_action(r, fail_policy::warn).what, desired_action::kind::resume);
  r.checks.push_back(e);
  EXPECT_EQ(plan_action(r, fail_policy::warn).what, desired_action::kind::none);
  auto on_error = plan_action(r, fail_policy::fail);
  EXPECT_EQ(on_error.what, desired_action::kind::drain);
  EXPECT_EQ(on_error.reason, "mrcheck: slurmd_memlock (node): checker error: slurmd pid 7 limits unreadable");
  r.checks.push_back(failing("gpudirect", "no nvidia_peermem and no DMA-BUF (driver is not the open kernel module)"));
  auto d = plan_action(r, fail_policy::warn);
  EXPECT_EQ(d.what, desired_action::kind::drain);
  EXPECT_EQ(d.reason,
            "mrcheck: gpudirect (node): no nvidia_peermem and no DMA-BUF (driver is not the open kernel module)");
}

// Only the node's fails drain; the site's with drain_site=yes; the job's never (docs/drain-reasons.md).
TEST(PrologPlan, DrainsOnlyForTheNodeAndTheSiteWhenAsked) {
  report r;
  r.checks = {failing("propagate_limits", "PropagateResourceLimits sends MEMLOCK")};
  EXPECT_EQ(plan_action(r, fail_policy::warn).what, desired_action::kind::resume);
  auto site = plan_action(r, fail_policy::warn, true);
  EXPECT_EQ(site.what, desired_action::kind::drain);
  EXPECT_EQ(site.reason, "mrcheck: propagate_limits (site): PropagateResourceLimits sends MEMLOCK");
  check_result job = failing("hca_fw", "fw old");
  job.owner = fix_owner::job;  // a verdict that names its owner overrides the check's
  r.checks = {job};
  EXPECT_EQ(plan_action(r, fail_policy::warn, true).what, desired_action::kind::resume);
  // The node's fail drains even after a site's and a job's that come first.
  r.checks = {failing("propagate_limits", "x"), job, failing("bar1", "BAR1 256 MiB < memory 141 GiB")};
  auto d = plan_action(r, fail_policy::warn);
  EXPECT_EQ(d.what, desired_action::kind::drain);
  EXPECT_EQ(d.reason, "mrcheck: bar1 (node): BAR1 256 MiB < memory 141 GiB");
}

desired_action drain_want() {
  return {desired_action::kind::drain, "mrcheck: hca_fw: mlx5_0 fw 28.33.1000 < 28.35.1012"};
}
desired_action resume_want() { return {desired_action::kind::resume, ""}; }

TEST(PrologApply, DrainsAnIdleNode) {
  fake_ctld c;
  fake_time ft;
  auto o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::drained);
  EXPECT_EQ(c.node.reason, drain_want().reason);
  EXPECT_EQ(c.queries, 1);
  EXPECT_EQ(c.drains, 1);
  // A second failing run changes nothing: one query, no update (O(1) controller load).
  o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::already);
  EXPECT_EQ(c.drains, 1);
  // A different failing check replaces mrcheck's own reason.
  desired_action other{desired_action::kind::drain, "mrcheck: rdma_stack: inbox mlx5_core under OFED"};
  EXPECT_EQ(apply_action(c, "n1", other, false, 10s, ft.clock()).what, apply_outcome::kind::drained);
  EXPECT_EQ(c.node.reason, other.reason);
}

TEST(PrologApply, ForeignReasonIsNeverTouched) {
  fake_ctld c;
  c.node = {true, false, "maintenance"};
  fake_time ft;
  auto o = apply_action(c, "n1", resume_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::left_alone);
  o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::left_alone);
  EXPECT_EQ(c.node.reason, "maintenance");
  EXPECT_EQ(c.drains + c.resumes, 0);
  // "Prolog error" is foreign too, unless our own pending drain explains it.
  c.node = {true, false, "Prolog error"};
  EXPECT_EQ(apply_action(c, "n1", drain_want(), false, 10s, ft.clock()).what, apply_outcome::kind::left_alone);
  EXPECT_EQ(apply_action(c, "n1", drain_want(), true, 10s, ft.clock()).what, apply_outcome::kind::drained);
  EXPECT_EQ(c.node.reason, drain_want().reason);
  // ... and a pending drain does not make other foreign reasons ours.
  c.node = {true, false, "maintenance"};
  EXPECT_EQ(apply_action(c, "n1", drain_want(), true, 10s, ft.clock()).what, apply_outcome::kind::left_alone);
}

TEST(PrologApply, ResumesOnlyItsOwnDrain) {
  fake_ctld c;
  fake_time ft;
  EXPECT_EQ(apply_action(c, "n1", resume_want(), false, 10s, ft.clock()).what, apply_outcome::kind::nothing);
  c.node = {true, false, "mrcheck: hca_fw: old"};
  EXPECT_EQ(apply_action(c, "n1", resume_want(), false, 10s, ft.clock()).what, apply_outcome::kind::resumed);
  EXPECT_FALSE(c.node.drain);
  EXPECT_EQ(c.resumes, 1);
  EXPECT_EQ(apply_action(c, "n1", desired_action{}, false, 10s, ft.clock()).what, apply_outcome::kind::nothing);
  EXPECT_EQ(c.queries, 2);  // kind::none asks nothing
}

TEST(PrologApply, RetriesWithBackoffUntilSlurmctldAnswers) {
  fake_ctld c;
  c.down_for = 3;
  fake_time ft;
  auto o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::drained);
  EXPECT_EQ(ft.sleeps, (std::vector<std::chrono::milliseconds>{250ms, 500ms, 1000ms}));
  EXPECT_EQ(c.queries, 4);
}

TEST(PrologApply, GivesUpAtTheBudgetAndSaysUnreachable) {
  fake_ctld c;
  c.down_for = 1000;
  fake_time ft;
  auto o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::unreachable);
  EXPECT_NE(o.message.find("slurmctld unreachable"), std::string::npos);
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(ft.t - std::chrono::steady_clock::time_point{});
  EXPECT_LE(spent, 10s);
  EXPECT_GE(spent, 5s);  // it kept trying for most of the budget
  for (auto t : c.timeouts) EXPECT_LE(t, 4s);
  // A 2 s step limit between tries.
  for (auto s : ft.sleeps) EXPECT_LE(s, 2s);
}

TEST(PrologApply, RefusalIsFinalNotRetried) {
  fake_ctld c;
  c.refuse = true;
  fake_time ft;
  auto o = apply_action(c, "n1", drain_want(), false, 10s, ft.clock());
  EXPECT_EQ(o.what, apply_outcome::kind::failed);
  EXPECT_NE(o.message.find("Access/permission denied"), std::string::npos);
  EXPECT_TRUE(ft.sleeps.empty());
}

class StateStore : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mrcheck-prolog-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::string base_;
};

TEST_F(StateStore, CreatesPrivateDirAndRoundTrips) {
  std::string dir = base_ + "/state";
  auto s = state_store::open(dir, ::geteuid());
  ASSERT_TRUE(s) << s.error().message();
  struct stat sb {};
  ASSERT_EQ(::stat(dir.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0700u);
  auto none = s->load("n1");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(s->save("n1", drain_want()));
  auto back = s->load("n1");
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ(**back, drain_want());
  ASSERT_EQ(::stat((dir + "/pending-n1").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  ASSERT_TRUE(s->save("n1", resume_want()));
  EXPECT_EQ(**s->load("n1"), resume_want());
  ASSERT_TRUE(s->clear("n1"));
  EXPECT_FALSE(s->load("n1")->has_value());
  EXPECT_TRUE(s->clear("n1"));  // clearing nothing is fine
}

TEST_F(StateStore, RefusesSymlinkWritableOrForeignDirs) {
  std::string real = base_ + "/real";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  std::string link = base_ + "/link";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  auto s = state_store::open(link, ::geteuid());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("symlink"), std::string::npos);
  ASSERT_EQ(::chmod(real.c_str(), 0777), 0);
  s = state_store::open(real, ::geteuid());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("writable by group or others"), std::string::npos);
  ASSERT_EQ(::chmod(real.c_str(), 0700), 0);
  s = state_store::open(real, ::geteuid() + 1);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("owned by uid"), std::string::npos);
  EXPECT_FALSE(state_store::open("relative/dir", ::geteuid()));
}

// A state_dir under a directory a user can change is theirs to redirect between two runs (hardening e2e
// finding: /tmp/w/mine/state with mine owned by the user, or reached through their symlink).
TEST_F(StateStore, RefusesParentsAUserCanChange) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  std::string mine = base_ + "/mine";
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  ASSERT_EQ(::chown(mine.c_str(), 65534, 65534), 0);
  auto s = state_store::open(mine + "/state", 0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("owned by uid 65534"), std::string::npos) << s.error().message();
  struct stat sb {};
  EXPECT_NE(::lstat((mine + "/state").c_str(), &sb), 0) << "nothing may be created under a refused parent";

  std::string root_dir = base_ + "/rootdir";
  ASSERT_EQ(::mkdir(root_dir.c_str(), 0755), 0);
  std::string link = base_ + "/p";
  ASSERT_EQ(::symlink(root_dir.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  s = state_store::open(link + "/state", 0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("symlink owned by uid 65534"), std::string::npos) << s.error().message();
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);
  EXPECT_TRUE(state_store::open(link + "/state", 0)) << "a root-owned symlink to a root-owned directory is fine";

  std::string shared = base_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  s = state_store::open(shared + "/state", 0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("writable by group or others"), std::string::npos) << s.error().message();
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  EXPECT_TRUE(state_store::open(shared + "/state", 0)) << "a sticky shared directory (/tmp) is fine";
}

TEST_F(StateStore, RejectsBadFilesAndNames) {
  auto s = state_store::open(base_, ::geteuid());
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->save("../etc/passwd", drain_want()));
  EXPECT_FALSE(s->load("a/b"));
  EXPECT_FALSE(valid_node_name(".hidden"));
  EXPECT_TRUE(valid_node_name("gpu-node01.cluster"));
  {
    std::ofstream f(base_ + "/pending-n2");
    f << "action drain\nreason maintenance\n";  // a drain whose reason is not ours: refused
  }
  ::chmod((base_ + "/pending-n2").c_str(), 0600);
  auto bad = s->load("n2");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("does not start with"), std::string::npos);
  {
    std::ofstream f(base_ + "/pending-n3");
    f << "action explode\n";
  }
  ::chmod((base_ + "/pending-n3").c_str(), 0600);
  EXPECT_FALSE(s->load("n3"));
  // A symlinked pending file is not followed.
  ASSERT_EQ(::symlink("/etc/hostname", (base_ + "/pending-n4").c_str()), 0);
  EXPECT_FALSE(s->load("n4"));
  // A group-writable one is ignored.
  {
    std::ofstream f(base_ + "/pending-n5");
    f << "action resume\n";
  }
  ::chmod((base_ + "/pending-n5").c_str(), 0660);
  EXPECT_FALSE(s->load("n5"));
}

}  // namespace
}  // namespace mrcheck
