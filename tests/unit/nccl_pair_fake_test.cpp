// The NCCL pair's decisions about its rank processes (src/nccl/pair.cpp) with no process at all: each rank is a
// scripted child_handle (nccl_pair_options::spawn) whose control lines are in its pipe before the pair reads, and
// whose end is what the test says. Nothing here sleeps or races: a rank that "hangs" ends only when killed.
#include <mrcheck/child.h>
#include <mrcheck/nccl_probe.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

constexpr int k_ctl_fd = 3;  // as src/nccl/pair.cpp places them in the rank
constexpr int k_id_fd = 4;
constexpr int k_release_fd = 5;

enum class ends {
  exit_now,            // exits with `code` at the pair's first look
  exit_after_release,  // exits with `code` once its release pipe has "go" or EOF (a real rank's way)
  signal_now,          // dies of signal `code` at the first look
  never,               // runs until the pair kills it
};

struct rank_script {
  std::vector<std::string> ctl;  // its control lines, all written at spawn
  ends how = ends::never;
  int code = 0;
};

// What the pair did to a rank, as the fake saw it.
struct rank_seen {
  int kills_before_end = 0;
  int kills_after_end = 0;       // what the rank left in its group
  int id_fd = -1;                // our copy of the read end of its id pipe (rank 1)
  int release_fd = -1;           // our copy of the read end of its release pipe
  std::vector<std::string> env;  // the environment it was started with
  std::string read_all(int& fd) {
    std::string s;
    char buf[512];
    ssize_t n;
    while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
    if (fd >= 0) ::close(fd);
    fd = -1;
    return s;
  }
  ~rank_seen() {
    if (id_fd >= 0) ::close(id_fd);
    if (release_fd >= 0) ::close(release_fd);
  }
};

bool readable_now(int fd) {
  struct pollfd p {
    fd, POLLIN, 0
  };
  return fd >= 0 && ::poll(&p, 1, 0) > 0;
}

class fake_rank final : public child_handle {
 public:
  fake_rank(const rank_script& s, rank_seen& seen) : s_(s), seen_(seen) {}
  std::optional<child_end> wait_until(clock::time_point deadline) override {
    if (end_) return end_;
    child_end e;
    if (killed_) {
      e.signaled = true;
      e.term_signal = SIGKILL;
      e.killed = true;
    } else if (s_.how == ends::exit_now || (s_.how == ends::exit_after_release && readable_now(seen_.release_fd))) {
      e.exited = true;
      e.exit_code = s_.code;
    } else if (s_.how == ends::signal_now) {
      e.signaled = true;
      e.term_signal = s_.code;
    } else {
      // The pair only looks, or waits for a rank it killed: a wait for a running rank would hang it.
      if (deadline > clock::now()) ADD_FAILURE() << "the pair waits for a rank it did not kill";
      return std::nullopt;
    }
    end_ = e;
    return end_;
  }
  void kill_group() override {
    if (end_) {
      ++seen_.kills_after_end;
      return;
    }
    ++seen_.kills_before_end;
    killed_ = true;
  }
  bool read_bounded(child_pipe, std::string&, std::size_t, bool&) override { return false; }
  int pipe_fd(child_pipe) const override { return -1; }

 private:
  rank_script s_;
  rank_seen& seen_;
  bool killed_ = false;
  std::optional<child_end> end_;
};

int parent_fd_at(const child_spec& spec, int child_fd) {
  for (const auto& f : spec.extra_fds) {
    if (f.child_fd == child_fd) return f.parent_fd;
  }
  return -1;
}

class nccl_pair_fake : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.self_exe = "/nonexistent/mrcheck";  // never run: the spawner below stands in
    o_.env = {"PATH=/usr/bin:/bin"};
    o_.timeout = std::chrono::seconds(60);
    o_.peer_grace = std::chrono::milliseconds(0);
    o_.spawn = [this](const child_spec& spec) -> result<std::unique_ptr<child_handle>> {
      auto at = std::find(spec.argv.begin(), spec.argv.end(), "--rank");
      if (at == spec.argv.end() || at + 1 == spec.argv.end()) return status::error("no --rank");
      int r = std::stoi(*(at + 1));
      rank_seen& seen = seen_[static_cast<std::size_t>(r)];
      seen.env = spec.env;
      // The pair closes its copies of the rank's ends right after the spawn; ours stay for the test.
      if (int fd = parent_fd_at(spec, k_id_fd); fd >= 0) seen.id_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (int fd = parent_fd_at(spec, k_release_fd); fd >= 0) seen.release_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      std::string lines;
      for (const auto& l : script_[static_cast<std::size_t>(r)].ctl) lines += l + "\n";
      int ctl = parent_fd_at(spec, k_ctl_fd);
      if (ctl < 0 || ::write(ctl, lines.data(), lines.size()) != static_cast<ssize_t>(lines.size()))
        return status::error("control pipe");
      return std::unique_ptr<child_handle>(std::make_unique<fake_rank>(script_[static_cast<std::size_t>(r)], seen));
    };
  }
  nccl_pair_options o_;
  std::array<rank_script, 2> script_;
  std::array<rank_seen, 2> seen_;
};

const std::string k_id = "id " + std::string(256, 'a');

std::string result_line(int rank, bool ok) {
  return "result {\"rank\":" + std::to_string(rank) + ",\"ok\":" + (ok ? "true" : "false") + "}";
}

TEST_F(nccl_pair_fake, verified_ranks_get_the_id_and_their_release_and_pass) {
  script_[0] = {{"stage init", k_id, result_line(0, true)}, ends::exit_after_release, 0};
  script_[1] = {{"stage init", result_line(1, true)}, ends::exit_after_release, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.setup_error, "");
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_FALSE(out.timed_out);
  for (int r = 0; r < 2; ++r) {
    const auto& run = out.ranks[static_cast<std::size_t>(r)];
    EXPECT_TRUE(run.exited && run.exit_code == 0) << r << ": " << run.describe();
    EXPECT_FALSE(run.killed || run.signaled) << r;
    ASSERT_TRUE(run.report.has_value()) << r;
    EXPECT_TRUE(run.report->ok);
    EXPECT_EQ(run.last_stage, "init");
    auto& seen = seen_[static_cast<std::size_t>(r)];
    EXPECT_EQ(seen.kills_before_end, 0) << r;
    EXPECT_EQ(seen.kills_after_end, 1) << r << ": what the rank left in its group is killed after it ends";
    EXPECT_EQ(seen.read_all(seen.release_fd), "go\n") << r;
  }
  EXPECT_EQ(seen_[1].read_all(seen_[1].id_fd), k_id + "\n");
  // Where the time went, as the orchestrator saw it: in order, from the spawn to the reap.
  for (const auto& run : out.ranks) {
    std::vector<std::string> events;
    double last = 0;
    for (const auto& [event, ms] : run.timeline_ms) {
      events.push_back(event);
      EXPECT_GE(ms, last) << event;
      last = ms;
    }
    EXPECT_EQ(events, (std::vector<std::string>{"spawned", "init", "result", "released", "reaped"})) << run.rank;
  }
}

// One hardware work queue per CUDA context unless the job chose its own number (bench/nccl/README.md).
TEST_F(nccl_pair_fake, ranks_get_one_cuda_connection_unless_the_job_sets_its_own) {
  for (const char* job : {"", "CUDA_DEVICE_MAX_CONNECTIONS=8"}) {
    o_.env = {"PATH=/usr/bin:/bin"};
    if (*job) o_.env.push_back(job);
    script_[0] = {{k_id, result_line(0, true)}, ends::exit_after_release, 0};
    script_[1] = {{result_line(1, true)}, ends::exit_after_release, 0};
    auto out = run_nccl_pair(o_);
    std::string want = *job ? job : "CUDA_DEVICE_MAX_CONNECTIONS=1";
    for (auto& seen : seen_) {
      EXPECT_EQ(std::count_if(seen.env.begin(), seen.env.end(),
                              [](const std::string& e) { return e.starts_with("CUDA_DEVICE_MAX_CONNECTIONS="); }),
                1)
          << job;
      EXPECT_NE(std::find(seen.env.begin(), seen.env.end(), want), seen.env.end()) << job;
      seen.read_all(seen.release_fd);
      seen.read_all(seen.id_fd);
    }
    bool reported = std::find(out.env_set.begin(), out.env_set.end(), "CUDA_DEVICE_MAX_CONNECTIONS=1") !=
                    out.env_set.end();
    EXPECT_EQ(reported, *job == '\0') << job;
  }
}

// The rank's lines are the job's code (its LD_PRELOAD, its NCCL): a rank that writes stage lines on does not
// grow the orchestrator's memory or the JSON.
TEST_F(nccl_pair_fake, a_rank_that_writes_stage_lines_on_cannot_grow_its_timeline) {
  std::vector<std::string> lines(3000, "stage again");
  lines.insert(lines.begin(), k_id);
  lines.push_back(result_line(0, true));
  script_[0] = {lines, ends::exit_after_release, 0};
  script_[1] = {{"stage init", result_line(1, true)}, ends::exit_after_release, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_EQ(out.ranks[0].timeline_ms.size(), 32u);
  EXPECT_TRUE(out.ranks[0].report && out.ranks[0].report->ok);
}

TEST_F(nccl_pair_fake, a_crash_before_the_id_releases_the_peer_and_the_peer_is_killed_after_the_grace) {
  script_[0] = {{"stage cuda"}, ends::signal_now, SIGSEGV};
  script_[1] = {{}, ends::never, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_FALSE(out.timed_out);
  EXPECT_TRUE(out.ranks[0].signaled);
  EXPECT_EQ(out.ranks[0].term_signal, SIGSEGV);
  EXPECT_FALSE(out.ranks[0].killed);
  EXPECT_EQ(out.ranks[0].describe(), "killed by SIGSEGV");
  EXPECT_TRUE(out.ranks[1].killed);
  EXPECT_FALSE(out.ranks[1].signaled) << "our own SIGKILL is no crash of the rank";
  EXPECT_EQ(out.ranks[1].describe(), "killed by mrcheck");
  EXPECT_EQ(seen_[1].kills_before_end, 1);
  EXPECT_EQ(seen_[1].kills_after_end, 1);
  EXPECT_EQ(seen_[0].kills_after_end, 1);
  EXPECT_EQ(seen_[1].read_all(seen_[1].id_fd), "") << "rank 1 gets EOF instead of an id";
  EXPECT_EQ(seen_[1].read_all(seen_[1].release_fd), "") << "no go for a pair with a failed rank";
}

TEST_F(nccl_pair_fake, a_sigkill_we_did_not_send_is_the_ranks_own_end) {
  script_[0] = {{k_id}, ends::signal_now, SIGKILL};
  script_[1] = {{}, ends::never, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_TRUE(out.ranks[0].signaled);
  EXPECT_EQ(out.ranks[0].term_signal, SIGKILL);
  EXPECT_FALSE(out.ranks[0].killed);
  EXPECT_TRUE(out.ranks[1].killed);
  EXPECT_EQ(seen_[1].read_all(seen_[1].id_fd), k_id + "\n");
}

TEST_F(nccl_pair_fake, an_exit_without_a_result_is_a_failure_that_stops_the_peer) {
  script_[0] = {{k_id}, ends::exit_now, 0};
  script_[1] = {{}, ends::never, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_TRUE(out.ranks[0].exited);
  EXPECT_EQ(out.ranks[0].exit_code, 0);
  EXPECT_FALSE(out.ranks[0].report.has_value());
  EXPECT_TRUE(out.ranks[1].killed);
  EXPECT_FALSE(out.timed_out);
}

TEST_F(nccl_pair_fake, hanging_ranks_are_killed_at_the_deadline) {
  o_.timeout = std::chrono::milliseconds(0);
  script_[0] = {{"stage init", k_id}, ends::never, 0};
  script_[1] = {{"stage init"}, ends::never, 0};
  auto out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_TRUE(out.timed_out);
  for (int r = 0; r < 2; ++r) {
    const auto& run = out.ranks[static_cast<std::size_t>(r)];
    EXPECT_TRUE(run.killed) << r;
    EXPECT_FALSE(run.signaled || run.exited) << r;
    EXPECT_EQ(run.last_stage, "init") << r;
    EXPECT_EQ(seen_[static_cast<std::size_t>(r)].kills_before_end, 1) << r;
  }
}

TEST_F(nccl_pair_fake, a_failed_start_of_rank1_kills_rank0) {
  script_[0] = {{}, ends::never, 0};
  auto spawn = o_.spawn;
  o_.spawn = [&](const child_spec& spec) -> result<std::unique_ptr<child_handle>> {
    if (std::find(spec.argv.begin(), spec.argv.end(), "--id-fd") != spec.argv.end()) return status::error("no fork");
    return spawn(spec);
  };
  auto out = run_nccl_pair(o_);
  EXPECT_EQ(out.setup_error, "start rank 1: no fork");
  EXPECT_EQ(seen_[0].kills_before_end, 1);
  EXPECT_EQ(seen_[0].kills_after_end, 1);
}

}  // namespace
}  // namespace mrcheck
