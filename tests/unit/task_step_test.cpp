// task_init's decisions without Slurm (src/step/task_step.cpp): where the probes run, a cancelled step's record,
// and when the admins' record is sent: at once, from the post-exec watcher, or at once when it cannot start.
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

check_result item(std::string id, verdict v) {
  check_result c;
  c.id = std::move(id);
  c.result = v;
  return c;
}

// A verdict the probe runner made for a probe that did not finish (killed from outside, or not run).
check_result cut(std::string id) {
  check_result c = item(std::move(id), verdict::error);
  c.incomplete = true;
  return c;
}

std::vector<std::string> ids(const report& r) {
  std::vector<std::string> out;
  for (const auto& c : r.checks) out.push_back(c.id);
  return out;
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// A record pipe, the records sent through it, and the watcher's arguments.
struct fake_io {
  int pipe_r = -1, pipe_w = -1;
  bool record_fd = true;  // local task 0 with a collector
  std::vector<std::pair<int, report>> sent;
  int spawned = 0;
  status spawn_result = status::ok();
  post_exec_done done;
  int watcher_fd = -2;
  memlock_limit watcher_start;
  bool watcher_imex = false;
  bool placed = false;
  fake_io() {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    pipe_r = p[0];
    pipe_w = p[1];
  }
  ~fake_io() {
    ::close(pipe_r);
    if (is_open(pipe_w)) ::close(pipe_w);
  }
  task_step_io io(task_verdict v, bool stop_probes = false) {
    task_step_io i;
    i.task = [v](const config&, const task_facts&, node_state&, const probe_runner& p) {
      EXPECT_TRUE(static_cast<bool>(p));
      return v;
    };
    i.host_probes = [](const config&, std::chrono::milliseconds, std::shared_ptr<bool>) {
      return probe_runner(
          [](const std::string&, const task_facts&, const memlock_limit&) { return std::vector<check_result>{}; });
    };
    i.place_probes = [this, stop_probes](probe_runner host, std::chrono::milliseconds, std::shared_ptr<bool> stopped) {
      placed = true;
      if (stop_probes) *stopped = true;  // as real_probe_runner_stop does for a probe killed from outside
      return host;
    };
    i.take_record_fd = [this](const task_facts&) { return record_fd ? pipe_w : -1; };
    i.send_record = [this](int fd, const task_facts&, const node_state&, const report& r) { sent.emplace_back(fd, r); };
    i.spawn_watcher = [this](const post_exec_watch& w, const post_exec_done& d, int fd) {
      ++spawned;
      done = d;
      watcher_fd = fd;
      watcher_start = w.predicted;
      watcher_imex = w.node_imex.has_value();
      return spawn_result;
    };
    return i;
  }
};

node_state probing_node() {
  node_state st;
  st.active = true;
  st.checks.memlock = true;
  st.checks.mr = true;
  return st;
}

task_verdict verdict_of(std::vector<check_result> checks, bool watch) {
  task_verdict v;
  v.rep.checks = std::move(checks);
  v.watch_post_exec = watch;
  v.user_lines = {"mrcheck: user line"};
  v.admin_lines = {"mrcheck: admin line"};
  return v;
}

// Left out: the probes that did not finish and the container's verdicts. Kept: the rest, the NCCL version check
// (id "nccl") and a probe that finished before the cancel among them.
TEST(TaskStep, CancelledStepRecordLeavesOutTheProbesThatDidNotFinish) {
  report r;
  r.checks = {item("memlock", verdict::fail),
              item("max_map_count", verdict::pass),
              item("mr_host", verdict::fail),
              item("nccl", verdict::fail),
              cut("nccl_pair"),
              item("container", verdict::error),
              item("container_mr", verdict::error)};
  auto kept = cancelled_step_record(r);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(ids(*kept), (std::vector<std::string>{"memlock", "max_map_count", "mr_host", "nccl"}));
}

TEST(TaskStep, CancelledStepWithNothingFoundHasNoRecord) {
  report r;
  r.checks = {item("memlock", verdict::pass), item("max_map_count", verdict::skip), cut("mr_host")};
  EXPECT_FALSE(cancelled_step_record(r).has_value());
}

TEST(TaskStep, ProbesRunWhereTheTaskIsOnlyWhenTheStepProbes) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  auto o = run_task_step(c, t, st, f.io(verdict_of({}, false)));
  EXPECT_TRUE(f.placed);
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(o.verdict.user_lines, std::vector<std::string>{"mrcheck: user line"});
  fake_io g;
  node_state memlock_only;
  memlock_only.active = true;
  memlock_only.checks.memlock = true;
  run_task_step(c, t, memlock_only, g.io(verdict_of({}, false)));
  EXPECT_FALSE(g.placed);
}

TEST(TaskStep, CancelledStepSendsOnlyItsOwnFindingsAndStartsNoWatcher) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  auto io = f.io(verdict_of({item("memlock", verdict::fail), cut("mr_host")}, true), true);
  auto o = run_task_step(c, t, st, io);
  EXPECT_TRUE(o.stopped);
  EXPECT_TRUE(send_task_record(o, t, st, io).empty());
  EXPECT_EQ(f.spawned, 0);
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(f.sent[0].first, f.pipe_w);
  EXPECT_EQ(ids(f.sent[0].second), std::vector<std::string>{"memlock"});
  EXPECT_FALSE(is_open(f.pipe_w));
}

TEST(TaskStep, CancelledStepWithNothingFoundSendsNothingAndClosesThePipe) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  auto io = f.io(verdict_of({item("memlock", verdict::pass), cut("mr_host")}, false), true);
  auto o = run_task_step(c, t, st, io);
  send_task_record(o, t, st, io);
  EXPECT_TRUE(f.sent.empty());
  EXPECT_FALSE(is_open(f.pipe_w));
}

TEST(TaskStep, WithoutWatcherTheRecordGoesAtOnce) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  auto io = f.io(verdict_of({item("memlock", verdict::pass), item("mr_host", verdict::fail)}, false));
  auto o = run_task_step(c, t, st, io);
  EXPECT_TRUE(send_task_record(o, t, st, io).empty());
  EXPECT_EQ(f.spawned, 0);
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(ids(f.sent[0].second), (std::vector<std::string>{"memlock", "mr_host"}));
  EXPECT_FALSE(is_open(f.pipe_w));
}

TEST(TaskStep, TheWatcherSendsTheRecordWithItsVerdictAfterExec) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  st.prediction.start = {1, 2};
  st.enf = enforcement{};
  st.enf->start = {3, 4};
  auto io = f.io(verdict_of({item("memlock", verdict::pass)}, true));
  auto o = run_task_step(c, t, st, io);
  EXPECT_TRUE(send_task_record(o, t, st, io).empty());
  EXPECT_EQ(f.spawned, 1);
  EXPECT_EQ(f.watcher_fd, f.pipe_w);
  EXPECT_EQ(f.watcher_start, (memlock_limit{3, 4}));  // what enforcement leaves the task, not the prediction
  EXPECT_TRUE(f.sent.empty());                        // not before exec
  EXPECT_FALSE(is_open(f.pipe_w));                    // the watcher holds its own copy
  ASSERT_TRUE(static_cast<bool>(f.done));
  f.done({item("memlock", verdict::fail)}, 7);
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(f.sent[0].first, 7);
  EXPECT_EQ(ids(f.sent[0].second), (std::vector<std::string>{"memlock", "memlock_exec"}));
  f.done({}, 7);  // the task runs as predicted
  EXPECT_EQ(ids(f.sent[1].second), std::vector<std::string>{"memlock"});
  EXPECT_FALSE(f.watcher_imex);  // the node serves no IMEX
}

TEST(TaskStep, OnANodeThatServesImexTheWatcherJudgesTheChannelAndTheRecordCarriesIt) {
  config c;
  task_facts t;
  fake_io f;
  node_state st = probing_node();
  st.imex = imex_facts{};
  st.imex->nodes_config = true;
  auto io = f.io(verdict_of({item("memlock", verdict::pass)}, true));
  auto o = run_task_step(c, t, st, io);
  EXPECT_TRUE(send_task_record(o, t, st, io).empty());
  EXPECT_EQ(f.spawned, 1);
  EXPECT_TRUE(f.watcher_imex);
  ASSERT_TRUE(static_cast<bool>(f.done));
  f.done({item("imex_channel", verdict::fail)}, 7);
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(ids(f.sent[0].second), (std::vector<std::string>{"memlock", "imex_channel"}));
}

TEST(TaskStep, AWatcherThatCannotStartMakesTheRecordGoAtOnce) {
  config c;
  task_facts t;
  fake_io f;
  f.spawn_result = status::error("fork: no");
  node_state st = probing_node();
  auto io = f.io(verdict_of({item("memlock", verdict::warn)}, true));
  auto o = run_task_step(c, t, st, io);
  EXPECT_EQ(send_task_record(o, t, st, io), std::vector<std::string>{"mrcheck: memlock: fork: no"});
  ASSERT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(f.sent[0].first, f.pipe_w);
  EXPECT_EQ(ids(f.sent[0].second), std::vector<std::string>{"memlock"});
  EXPECT_FALSE(is_open(f.pipe_w));
}

TEST(TaskStep, ATaskWithoutTheRecordPipeSendsNothingButStillWatches) {
  config c;
  task_facts t;
  t.local_task_id = 1;
  fake_io f;
  f.record_fd = false;
  node_state st = probing_node();
  auto io = f.io(verdict_of({item("memlock", verdict::fail)}, true));
  auto o = run_task_step(c, t, st, io);
  EXPECT_TRUE(send_task_record(o, t, st, io).empty());
  EXPECT_EQ(f.spawned, 1);
  EXPECT_EQ(f.watcher_fd, -1);
  EXPECT_FALSE(static_cast<bool>(f.done));
  EXPECT_TRUE(f.sent.empty());
  EXPECT_TRUE(is_open(f.pipe_w));
}

}  // namespace
}  // namespace mrcheck
