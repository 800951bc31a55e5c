// The orchestration of `mrcheck probe nccl` without a GPU: each rank is a scripted stand-in program
// (tests/unit/fake_nccl_rank.cpp, started in the rank's place through nccl_pair_options::spawn by
// tests/doubles/stand_in_ranks.h) that replays a captured NCCL log, hangs, crashes or fails. Pipes, the id relay, the timeout, the peer grace, crash reporting, bounded output, the
// rendezvous of node-pair and the verdicts are all the production code.
#include <mrcheck/child.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/probe_checks.h>

#include "doubles/stand_in_ranks.h"
#include "munge_fixture.h"
#include "nccl/rendezvous.h"
#include "sys/tcp_listen.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace mrcheck {
namespace {

const std::string k_mrcheck = std::string(MRCHECK_BINARY_DIR) + "/cli/mrcheck";
const std::string k_fake_rank = MRCHECK_FAKE_NCCL_RANK;
// `mrcheck probe nccl` with --stand-in/--spec0/--spec1 (tests/doubles/probe_nccl_stand_in.cpp).
const std::string k_stand_in_probe = MRCHECK_PROBE_NCCL_STAND_IN;
const std::string k_logs = std::string(MRCHECK_FIXTURES_DIR) + "/nccl_logs/";

std::string unique_tag() {
  static std::mt19937_64 rng(std::random_device{}());
  return "t" + std::to_string(::getpid()) + "x" + std::to_string(rng() % 1000000000);
}

// Processes whose command line contains `tag` (our stand-in ranks carry it in their --spec).
int processes_with(const std::string& tag) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    // A zombie has an empty cmdline; one that is still ours shows the tag.
    if (cmd.find(tag) != std::string::npos) ++n;
  }
  return n;
}

class nccl_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(k_mrcheck)) GTEST_SKIP() << "build the mrcheck target first: " << k_mrcheck;
    o_.self_exe = k_mrcheck;
    o_.env = {"PATH=/usr/bin:/bin", "NCCL_IB_HCA=mlx5_0", "NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE=/tmp/x.%h.%p"};
    o_.timeout = std::chrono::milliseconds(10000);
    o_.peer_grace = std::chrono::milliseconds(300);
    o_.count = 1024;
    tag_ = unique_tag();
  }
  void fake(int rank, const std::string& spec) {
    stand_in_.program = k_fake_rank;
    stand_in_.spec[static_cast<std::size_t>(rank)] = spec + ",tag=" + tag_;
    o_.spawn = stand_in_spawner(stand_in_);
  }
  void TearDown() override {
    if (!tag_.empty()) {
      EXPECT_EQ(processes_with(tag_), 0) << "a rank outlived run_nccl_pair";
    }
  }
  nccl_pair_options o_;
  stand_in_ranks stand_in_;
  std::string tag_;
};

TEST_F(nccl_pair, replays_a_real_pass_and_reports_transport_and_timings) {
  fake(0, "log=" + k_logs + "h200_local_pair_socket_rank0.log");
  fake(1, "log=" + k_logs + "h200_local_pair_socket_rank1.log");
  nccl_pair_outcome out = run_nccl_pair(o_);
  ASSERT_EQ(out.setup_error, "");
  ASSERT_EQ(out.ranks.size(), 2u);
  for (const auto& r : out.ranks) {
    EXPECT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exit_code, 0);
    ASSERT_TRUE(r.report.has_value());
    EXPECT_TRUE(r.report->ok);
    EXPECT_EQ(r.last_stage, "done");
  }
  EXPECT_FALSE(out.timed_out);
  EXPECT_EQ(out.log.transports, std::vector<std::string>{"NET/Socket"});
  EXPECT_EQ(out.log.init_timings.size(), 2u);
  // The job's NCCL settings are reported; the debug routing is ours.
  EXPECT_NE(std::find(out.user_nccl_env.begin(), out.user_nccl_env.end(), "NCCL_IB_HCA=mlx5_0"),
            out.user_nccl_env.end());
  EXPECT_NE(std::find(out.env_set.begin(), out.env_set.end(), "NCCL_DEBUG=INFO"), out.env_set.end());
  EXPECT_NE(std::find(out.env_set.begin(), out.env_set.end(), "CUDA_DEVICE_MAX_CONNECTIONS=1"), out.env_set.end());
  // The job asked for mlx5_0 (NCCL_IB_HCA) but NCCL found no device and silently took TCP: a warning, explained.
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.id, "nccl_pair");
  EXPECT_EQ(c.result, verdict::warn) << c.summary;
  EXPECT_NE(c.summary.find("via NET/Socket"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("2.28.3"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("No device found\" with NCCL_IB_HCA=mlx5_0"), std::string::npos) << c.summary;
  EXPECT_FALSE(c.hint.empty());

  // Without an IB request on a node without HCAs, NET/Socket is all there is: a pass.
  if (out.rdma_devices.value_or(0) == 0) {
    out.user_nccl_env.clear();
    c = judge_nccl_pair(out);
    EXPECT_EQ(c.result, verdict::pass) << c.summary;
    EXPECT_TRUE(c.hint.empty());
  }
}

TEST_F(nccl_pair, registration_failure_is_explained_by_the_diagnosis) {
  fake(0, "action=fail,log=" + k_logs + "h200_fake_ibverbs_enomem_rank0.log");
  fake(1, "action=fail,log=" + k_logs + "h200_fake_ibverbs_enomem_rank1.log");
  nccl_pair_outcome out = run_nccl_pair(o_);
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"), std::string::npos)
      << c.summary;
  EXPECT_FALSE(c.hint.empty());
  EXPECT_EQ(out.log.transports, std::vector<std::string>{"NET/IB"});
}

// Captured as uid nobody under `ulimit -l 64` with the fake HCA: the real kernel's ENOMEM, through NCCL.
TEST_F(nccl_pair, memlock_enomem_from_a_real_run_is_found_on_plain_ibv_reg_mr) {
  fake(0, "action=fail,log=" + k_logs + "h200_fake_ibverbs_memlock64k_rank0.log");
  fake(1, "action=fail,log=" + k_logs + "h200_fake_ibverbs_memlock64k_rank1.log");
  nccl_pair_outcome out = run_nccl_pair(o_);
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  // NCCL's first MR is the small fifo one, registered with plain ibv_reg_mr (docs/facts/verbs-and-nccl.md §3).
  EXPECT_NE(c.summary.find("Call to ibv_reg_mr failed with error Cannot allocate memory"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.summary.find("ENOMEM"), std::string::npos) << c.summary;
}

// NCCL on the fake HCA warns about ibv_post_recv and then hangs in ncclAllReduce: the timeout ends it and the
// verdict names the call NCCL complained about, with the hang in the detail.
TEST_F(nccl_pair, a_hang_after_a_warning_names_the_warning) {
  o_.timeout = std::chrono::milliseconds(500);
  fake(0, "action=hang,log=" + k_logs + "h200_fake_ibverbs_hang_rank0.log");
  fake(1, "action=hang,log=" + k_logs + "h200_fake_ibverbs_hang_rank1.log");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_TRUE(out.timed_out);
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("Call to ibv_post_recv failed with error Operation not supported"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.detail.find("timed out"), std::string::npos) << c.detail;
}

TEST_F(nccl_pair, a_crashed_rank_stops_its_waiting_peer) {
  fake(0, "action=crash");
  fake(1, "action=hang");
  nccl_pair_outcome out = run_nccl_pair(o_);
  ASSERT_EQ(out.ranks.size(), 2u);
  EXPECT_TRUE(out.ranks[0].signaled);
  EXPECT_EQ(out.ranks[0].term_signal, SIGSEGV);
  EXPECT_TRUE(out.ranks[1].killed);
  EXPECT_FALSE(out.timed_out);
  EXPECT_LT(out.elapsed.count(), 5000);  // the grace (300 ms), not the 10 s timeout
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("rank 0 killed by SIGSEGV in ncclCommInitRank"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("rank 1 stopped after its peer failed"), std::string::npos) << c.summary;
}

TEST_F(nccl_pair, a_hang_is_killed_at_the_timeout_with_the_stage_named) {
  o_.timeout = std::chrono::milliseconds(600);
  fake(0, "action=hang");
  fake(1, "action=hang");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_TRUE(out.timed_out);
  EXPECT_GE(out.elapsed.count(), 590);
  EXPECT_LT(out.elapsed.count(), 3000);
  for (const auto& r : out.ranks) {
    EXPECT_TRUE(r.killed);
    EXPECT_EQ(r.last_stage, "init");
  }
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("timed out after 0.6 s"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("in ncclCommInitRank"), std::string::npos) << c.summary;
}

TEST_F(nccl_pair, rank0_without_an_id_leaves_rank1_waiting_in_the_exchange) {
  o_.timeout = std::chrono::milliseconds(500);
  fake(0, "action=noid");
  fake(1, "action=pass");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_TRUE(out.timed_out);
  EXPECT_EQ(out.ranks[1].last_stage, "id");
}

TEST_F(nccl_pair, rank0_failing_before_the_id_releases_rank1_at_once) {
  fake(0, "action=early");
  fake(1, "action=pass");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_FALSE(out.timed_out);
  ASSERT_TRUE(out.ranks[1].report.has_value());
  EXPECT_FALSE(out.ranks[1].killed);  // it saw EOF on its id pipe and reported, no grace kill needed
  EXPECT_NE(out.ranks[1].report->error.find("no NCCL unique id"), std::string::npos);
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("rank 0 failed in loading CUDA/NCCL"), std::string::npos) << c.summary;
}

TEST_F(nccl_pair, wrong_sum_fails) {
  fake(0, "action=mismatch");
  fake(1, "action=mismatch");
  check_result c = judge_nccl_pair(run_nccl_pair(o_));
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("wrong results"), std::string::npos) << c.summary;
}

TEST_F(nccl_pair, output_is_bounded) {
  o_.max_output = 64 * 1024;
  fake(0, "action=flood");
  fake(1, "action=pass");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_TRUE(out.ranks[0].truncated);
  EXPECT_EQ(out.ranks[0].out.size(), 64u * 1024u);
  EXPECT_EQ(judge_nccl_pair(out).result, verdict::pass);
}

TEST_F(nccl_pair, exit_without_result_is_a_failure_not_a_pass) {
  fake(0, "action=exit");
  fake(1, "action=exit");
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_EQ(judge_nccl_pair(out).result, verdict::fail);
}

// The real rank code on a machine without CUDA (CI): libcuda.so.1 is missing -> skip, never a pass or a fail.
// Whether the loader finds libcuda.so.1 as a real rank's dlopen would (LD_LIBRARY_PATH, ld.so.cache, the
// default directories; Ubuntu, EL and the CUDA repositories each put it elsewhere). Asked in a child, so
// this test process never maps the driver.
bool loader_finds_libcuda() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr ? 0 : 1);
  int st = 0;
  while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

TEST_F(nccl_pair, real_rank_without_cuda_skips) {
  if (loader_finds_libcuda()) {
    tag_.clear();
    GTEST_SKIP() << "libcuda.so.1 is installed here: the GPU tests (tests/gpu/nccl_*) cover this machine";
  }
  tag_.clear();
  nccl_pair_outcome out = run_nccl_pair(o_);
  check_result c = judge_nccl_pair(out);
  EXPECT_EQ(c.result, verdict::skip) << c.summary;
  EXPECT_NE(c.summary.find("libcuda.so.1"), std::string::npos) << c.summary;
}

TEST_F(nccl_pair, relative_binary_is_refused) {
  o_.self_exe = "mrcheck";
  tag_.clear();
  nccl_pair_outcome out = run_nccl_pair(o_);
  EXPECT_FALSE(out.setup_error.empty());
  EXPECT_EQ(judge_nccl_pair(out).result, verdict::error);
}

TEST_F(nccl_pair, node_pair_meets_over_the_rendezvous_and_relays_the_id) {
  std::uint64_t job = 900000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  nccl_pair_options a = o_, b = o_;
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  a.auth = b.auth = test::shared_munged().settings();
  a.mode = b.mode = nccl_mode::node_pair;
  a.job_id = b.job_id = job;
  a.step_id = b.step_id = 3;
  a.pair_rank = 0;
  b.pair_rank = 1;
  b.peer = "127.0.0.1";
  a.spawn = stand_in_spawner({k_fake_rank, {"action=pass,tag=" + tag_, ""}});
  b.spawn = stand_in_spawner({k_fake_rank, {"", "action=pass,tag=" + tag_}});
  nccl_pair_outcome out_b;
  std::thread joiner([&] { out_b = run_nccl_pair(b); });
  nccl_pair_outcome out_a = run_nccl_pair(a);
  joiner.join();
  ASSERT_EQ(out_a.setup_error, "");
  ASSERT_EQ(out_b.setup_error, "");
  EXPECT_EQ(out_a.port, out_b.port);
  EXPECT_EQ(out_a.port, nccl_pair_port(job, 3, 0));
  ASSERT_EQ(out_a.ranks.size(), 1u);
  ASSERT_EQ(out_b.ranks.size(), 1u);
  EXPECT_EQ(out_a.ranks[0].rank, 0);
  EXPECT_EQ(out_b.ranks[0].rank, 1);
  EXPECT_EQ(judge_nccl_pair(out_a).result, verdict::pass);
  EXPECT_EQ(judge_nccl_pair(out_b).result, verdict::pass) << judge_nccl_pair(out_b).summary;
}

// The first node finishes and hangs up while the second is still in NCCL: that is success, not a peer failure.
TEST_F(nccl_pair, node_pair_slow_second_node_is_not_stopped) {
  std::uint64_t job = 500000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  nccl_pair_options a = o_, b = o_;
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  a.auth = b.auth = test::shared_munged().settings();
  a.mode = b.mode = nccl_mode::node_pair;
  a.job_id = b.job_id = job;
  b.pair_rank = 1;
  b.peer = "127.0.0.1";
  a.spawn = stand_in_spawner({k_fake_rank, {"action=pass,tag=" + tag_, ""}});
  b.spawn = stand_in_spawner({k_fake_rank, {"", "action=pass,delay=900,tag=" + tag_}});  // three times the peer grace
  nccl_pair_outcome out_b;
  std::thread joiner([&] { out_b = run_nccl_pair(b); });
  nccl_pair_outcome out_a = run_nccl_pair(a);
  joiner.join();
  EXPECT_EQ(judge_nccl_pair(out_a).result, verdict::pass);
  ASSERT_EQ(out_b.ranks.size(), 1u);
  EXPECT_FALSE(out_b.ranks[0].killed);
  EXPECT_EQ(judge_nccl_pair(out_b).result, verdict::pass) << judge_nccl_pair(out_b).summary;
}

TEST_F(nccl_pair, node_pair_peer_failure_stops_the_other_node) {
  std::uint64_t job = 800000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  nccl_pair_options a = o_, b = o_;
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  a.auth = b.auth = test::shared_munged().settings();
  a.mode = b.mode = nccl_mode::node_pair;
  a.job_id = b.job_id = job;
  b.pair_rank = 1;
  b.peer = "localhost";
  a.spawn = stand_in_spawner({k_fake_rank, {"action=crash,tag=" + tag_, ""}});
  b.spawn = stand_in_spawner({k_fake_rank, {"", "action=hang,tag=" + tag_}});
  nccl_pair_outcome out_b;
  std::thread joiner([&] { out_b = run_nccl_pair(b); });
  nccl_pair_outcome out_a = run_nccl_pair(a);
  joiner.join();
  EXPECT_EQ(judge_nccl_pair(out_a).result, verdict::fail);
  ASSERT_EQ(out_b.ranks.size(), 1u);
  EXPECT_TRUE(out_b.ranks[0].killed);
  EXPECT_FALSE(out_b.timed_out);  // told by the first node, not left to the timeout
}

// A foreign service on the first port of the sequence: the server moves on, the joiner walks past it.
TEST(nccl_probe_rendezvous, walks_past_a_foreign_listener) {
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::vector<std::string> refused_s, refused_c;
  std::uint64_t job = 700000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  std::uint16_t taken = nccl_pair_port(job, 0, 0);
  int err = 0;
  int foreign = tcp_listen_any(taken, 4, &err);  // the same listener the server opens
  ASSERT_GE(foreign, 0) << "port " << taken << " busy on this host (errno " << err << ")";
  std::thread answer([&] {
    int c = ::accept(foreign, nullptr, nullptr);
    if (c >= 0) {
      (void)!::write(c, "SSH-2.0-OpenSSH\n", 16);
      ::close(c);
    }
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  result<detail::rendezvous> server = status::error("not run");
  std::thread srv([&] { server = detail::rendezvous_serve(job, 0, deadline, ms, refused_s); });
  auto client = detail::rendezvous_join("127.0.0.1", job, 0, deadline, ms, refused_c);
  srv.join();
  answer.join();
  ::close(foreign);
  ASSERT_TRUE(server.is_ok()) << server.error().message();
  ASSERT_TRUE(client.is_ok()) << client.error().message();
  EXPECT_EQ(server->attempt, 1);
  EXPECT_EQ(client->attempt, 1);
  EXPECT_EQ(server->port, nccl_pair_port(job, 0, 1));
  EXPECT_TRUE(refused_s.empty());
  EXPECT_TRUE(refused_c.empty());  // a service that is not mrcheck is walked past, not "refused"
  ::close(server->fd);
  ::close(client->fd);
}

TEST(nccl_probe_rendezvous, another_job_is_told_busy_and_nobody_times_out_cleanly) {
  std::uint64_t job = 600000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  result<detail::rendezvous> server = status::error("not run");
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  std::vector<std::string> refused;
  const munge_settings ms = test::shared_munged().settings();
  std::thread srv([&] { server = detail::rendezvous_serve(job, 1, deadline, ms, refused); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Another step of the same job knocks on this step's port with its own hello.
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(nccl_pair_port(job, 1, 0));
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  std::string hello = detail::rendezvous_hello(job, 2) + " " + munge_nonce() + "\n";
  ASSERT_EQ(::write(c, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  char buf[16] = {};
  ssize_t n = ::read(c, buf, sizeof buf - 1);
  ::close(c);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), "busy\n");
  srv.join();
  ASSERT_FALSE(server.is_ok());
  EXPECT_NE(server.error().message().find("no peer"), std::string::npos) << server.error().message();
}

// The stand-in takes the place of a rank's own command line only: anything else is refused, not guessed at.
TEST(nccl_pair_stand_in, refuses_a_command_line_that_is_not_a_ranks) {
  auto spawn = stand_in_spawner({k_fake_rank, {"action=pass", "action=pass"}});
  child_spec s;
  s.argv = {"/bin/true"};
  EXPECT_FALSE(spawn(s).is_ok());
  s.argv = {k_mrcheck, "probe", "mr", "--rank", "0"};
  EXPECT_FALSE(spawn(s).is_ok());
  s.argv = {k_mrcheck, "probe", "nccl", "--rank", "2"};
  EXPECT_FALSE(spawn(s).is_ok());
  s.argv = {k_mrcheck, "probe", "nccl", "--rank"};
  EXPECT_FALSE(spawn(s).is_ok());
}

// The plugin kills `mrcheck probe nccl` (its own process group) at its timeout; the ranks sit in their own
// groups and must die with it (PR_SET_PDEATHSIG), not linger holding the GPU.
TEST(nccl_probe_cli, ranks_die_with_a_killed_orchestrator) {
  if (!std::filesystem::exists(k_stand_in_probe)) GTEST_SKIP() << "build mrcheck_probe_nccl_stand_in first";
  std::string tag = unique_tag();
  child_spec s;
  s.argv = {k_stand_in_probe,
            "--timeout",
            "60s",
            "--stand-in",
            k_fake_rank,
            "--spec0",
            "action=hang,tag=" + tag,
            "--spec1",
            "action=hang,tag=" + tag};
  s.env = {"PATH=/usr/bin:/bin"};
  s.timeout = std::chrono::milliseconds(700);
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->timed_out);
  int left = -1;
  for (int i = 0; i < 100 && left != 0; ++i) {
    left = processes_with(tag);
    if (left != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(left, 0);
}

// The contract with the SPANK plugin: `mrcheck probe nccl --json` as a child, exit code and keys.
TEST(nccl_probe_cli, json_report_and_exit_codes) {
  if (!std::filesystem::exists(k_mrcheck)) GTEST_SKIP() << "build the mrcheck target first";
  child_spec s;
  s.argv = {k_stand_in_probe, "--json",
            "--stand-in",     k_fake_rank,
            "--spec0",        "log=" + k_logs + "h200_local_pair_socket_rank0.log",
            "--spec1",        "log=" + k_logs + "h200_local_pair_socket_rank1.log"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.timeout = std::chrono::seconds(20);
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 0) << o->err;
  auto j = nlohmann::json::parse(o->out);
  EXPECT_EQ(j.at("verdict"), "pass");
  EXPECT_EQ(j.at("checks").at(0).at("id"), "nccl_pair");
  EXPECT_EQ(j.at("mode"), "local-pair");
  EXPECT_EQ(j.at("transport"), nlohmann::json::array({"NET/Socket"}));
  EXPECT_EQ(j.at("nccl_version"), "2.28.3+cuda13.0");
  EXPECT_EQ(j.at("timings").at("nccl_init").size(), 2u);
  EXPECT_FALSE(j.at("gdr").get<bool>());

  s.argv = {k_stand_in_probe, "--json",  "--timeout",   "300ms",   "--stand-in",
            k_fake_rank,      "--spec0", "action=hang", "--spec1", "action=hang"};
  o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 1);
  j = nlohmann::json::parse(o->out);
  EXPECT_EQ(j.at("verdict"), "fail");
  EXPECT_TRUE(j.at("timed_out").get<bool>());

  s.argv = {k_mrcheck, "probe", "nccl", "--mode", "bogus"};
  o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 2);

  // The shipped CLI runs no stand-in: the test-only options are unknown to it.
  for (const char* opt : {"--stand-in", "--spec0", "--spec1"}) {
    s.argv = {k_mrcheck, "probe", "nccl", "--json", opt, k_fake_rank};
    o = run_child(s);
    ASSERT_TRUE(o.is_ok());
    EXPECT_EQ(o->exit_code, 2) << opt;
    EXPECT_NE(o->err.find("unknown option"), std::string::npos) << opt << ": " << o->err;
  }
}

// A rank that reports an NCCL older than 2.9 and a log without its version line: the verdict names 2.8.4
// (the pair's own formatter printed "0.28.4").
TEST(nccl_pair_judge, names_an_nccl_older_than_2_9) {
  nccl_pair_outcome o;
  for (int i = 0; i < 2; ++i) {
    nccl_rank_run r;
    r.rank = i;
    r.exited = true;
    r.exit_code = 0;
    nccl_rank_report rep;
    rep.rank = i;
    rep.ok = true;
    rep.nccl_version = 2804;
    rep.count = 1024;
    r.report = rep;
    o.ranks.push_back(r);
  }
  o.log.transports = {"NET/IB"};
  check_result c = judge_nccl_pair(o);
  EXPECT_NE(c.summary.find("NCCL 2.8.4)"), std::string::npos) << c.summary;
}

}  // namespace
}  // namespace mrcheck
