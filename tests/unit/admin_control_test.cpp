// The collector's input: the control socket slurmstepd starts it with (admin_protocol.h, fd 3), the record pipe
// local task 0 sends over it, and "tasks ended". First the channel's two ends (admin_record.h), then
// `mrcheck-prolog admin-collect` itself, run as slurmstepd runs it (fds 3 and 4), when the build has it.
#include <mrcheck/admin_protocol.h>
#include <mrcheck/admin_record.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

using kind = admin_control_message::kind;

struct channel {
  int stepd = -1;      // slurmstepd's end
  int collector = -1;  // the collector's (fd 3)
  channel() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    stepd = sv[0];
    collector = sv[1];
  }
  ~channel() {
    if (stepd >= 0) ::close(stepd);
    if (collector >= 0) ::close(collector);
  }
};

struct fd_pair {
  int r = -1, w = -1;
  fd_pair() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    r = p[0];
    w = p[1];
  }
  ~fd_pair() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
};

// True when every copy of the pipe's write end is closed: a read on `r` sees EOF at once.
bool reads_eof(int r) {
  struct pollfd p {
    r, POLLIN, 0
  };
  if (::poll(&p, 1, 1000) != 1) return false;
  char c;
  return ::read(r, &c, 1) == 0;
}

status send_raw(int fd, std::string_view word, const std::vector<int>& fds) {
  struct iovec iov {
    const_cast<char*>(word.data()), word.size()
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (!fds.empty()) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr) return status::error("no room for the descriptors");
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) >= 0 ? status::ok() : status::error("sendmsg");
}

TEST(admin_control, the_record_pipe_arrives_as_a_close_on_exec_read_end) {
  channel ch;
  fd_pair p;
  ASSERT_TRUE(admin_send_record_pipe(ch.stepd, p.r));
  ::close(p.r);  // the task keeps only the write end
  p.r = -1;
  auto m = admin_read_control(ch.collector);
  ASSERT_EQ(m.what, kind::record_pipe) << m.problem;
  ASSERT_GE(m.fd, 0);
  EXPECT_NE(::fcntl(m.fd, F_GETFD) & FD_CLOEXEC, 0);
  ASSERT_EQ(::write(p.w, "begin\n", 6), 6);
  char buf[16] = {};
  EXPECT_EQ(::read(m.fd, buf, sizeof buf), 6);
  EXPECT_STREQ(buf, "begin\n");
  ::close(m.fd);
}

TEST(admin_control, nothing_sent_is_none_then_tasks_ended_then_closed) {
  channel ch;
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::none);
  ASSERT_TRUE(admin_send_tasks_ended(ch.stepd));
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::tasks_ended);
  ::close(ch.stepd);
  ch.stepd = -1;
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::closed);
}

// Local task 0 sends before it exits, slurmstepd's task_exit after: the collector reads them in that order.
TEST(admin_control, the_pipe_sent_before_tasks_ended_is_read_first) {
  channel ch;
  fd_pair p;
  ASSERT_TRUE(admin_send_record_pipe(ch.stepd, p.r));
  ASSERT_TRUE(admin_send_tasks_ended(ch.stepd));
  auto m = admin_read_control(ch.collector);
  ASSERT_EQ(m.what, kind::record_pipe);
  ::close(m.fd);
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::tasks_ended);
}

// Anything but one pipe read end under "pipe" is refused, and every descriptor that came with it is closed.
TEST(admin_control, a_write_end_is_refused_and_closed) {
  channel ch;
  fd_pair p;
  ASSERT_TRUE(send_raw(ch.stepd, "pipe", {p.w}));
  ::close(p.w);
  p.w = -1;
  auto m = admin_read_control(ch.collector);
  EXPECT_EQ(m.what, kind::invalid);
  EXPECT_EQ(m.fd, -1);
  EXPECT_NE(m.problem.find("not a pipe's read end"), std::string::npos) << m.problem;
  EXPECT_TRUE(reads_eof(p.r)) << "the refused write end is still open in the collector";
}

TEST(admin_control, two_descriptors_are_refused_and_both_closed) {
  channel ch;
  fd_pair a, b;
  ASSERT_TRUE(send_raw(ch.stepd, "pipe", {a.r, b.w}));
  ::close(b.w);
  b.w = -1;
  auto m = admin_read_control(ch.collector);
  EXPECT_EQ(m.what, kind::invalid);
  EXPECT_TRUE(reads_eof(b.r));
}

TEST(admin_control, a_file_a_stray_descriptor_or_another_word_is_refused) {
  channel ch;
  int f = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(f, 0);
  ASSERT_TRUE(send_raw(ch.stepd, "pipe", {f}));
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::invalid);
  fd_pair p;
  ASSERT_TRUE(send_raw(ch.stepd, "ended", {p.w}));  // "ended" carries no descriptor
  ::close(p.w);
  p.w = -1;
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::invalid);
  EXPECT_TRUE(reads_eof(p.r));
  ASSERT_TRUE(send_raw(ch.stepd, "pipe", {}));
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::invalid);
  ASSERT_TRUE(send_raw(ch.stepd, std::string(64, 'x'), {}));
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::invalid);
  ASSERT_TRUE(send_raw(ch.stepd, "endedx", {}));
  EXPECT_EQ(admin_read_control(ch.collector).what, kind::invalid);
  ::close(f);
}

TEST(admin_control, sending_to_a_gone_collector_is_an_error_not_a_signal) {
  channel ch;
  ::close(ch.collector);
  ch.collector = -1;
  EXPECT_FALSE(admin_send_tasks_ended(ch.stepd));
  fd_pair p;
  EXPECT_FALSE(admin_send_record_pipe(ch.stepd, p.r));
  EXPECT_FALSE(admin_send_tasks_ended(-1));
}

// ---- mrcheck-prolog admin-collect, as slurmstepd starts it -----------------------------------------------

std::string record_lines() {
  node_record r{0, "forged-name", {{"memlock", verdict::pass, "memlock=8MiB"}}};
  return std::string(k_admin_begin_marker) + "\n" + encode_node_record(r) + "\n" + R"({"verdict":"pass","checks":[]})" +
         "\n" + std::string(k_admin_end_marker) + "\n";
}

class collector_program : public ::testing::Test {
 protected:
  void SetUp() override {
    prolog_ = std::string(MRCHECK_BINARY_DIR) + "/prolog/mrcheck-prolog";
    if (::access(prolog_.c_str(), X_OK) != 0) GTEST_SKIP() << prolog_ << " not built";
    char tmpl[] = "/tmp/mrcheck_collect_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (ctl_ >= 0) ::close(ctl_);
    if (log_ >= 0) ::close(log_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Starts the collector for job 77 step 0, node 0 of 1, report_dir only (no AdminComment: no slurmctld here).
  void start(int own_ms) {
    int sv[2], lp[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_EQ(::pipe2(lp, O_CLOEXEC), 0);
    std::vector<std::string> args = {prolog_,           "admin-collect",
                                     "--job",           "77",
                                     "--step",          "0",
                                     "--node-id",       "0",
                                     "--nnodes",        "1",
                                     "--node",          "nodeA",
                                     "--admin-comment", "0",
                                     "--report-dir",    dir_,
                                     "--state-dir",     "",
                                     "--max",           "4096",
                                     "--timeout-ms",    "1000",
                                     "--own-ms",        std::to_string(own_ms)};
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::dup2(sv[1], k_admin_control_fd);
      ::dup2(lp[1], k_admin_log_fd);
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      std::vector<char*> av;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      ::execv(av[0], av.data());
      ::_exit(127);
    }
    ::close(sv[1]);
    ::close(lp[1]);
    ctl_ = sv[0];
    log_ = lp[0];
  }
  // The collector's log until its EOF (it has ended) or `bound`; `ended` says which.
  // Local task 0's part: sends a record pipe over the control socket, writes the node record into it and closes
  // it; then waits for the collector as wait_log does.
  void hand_in_record(std::string& log, bool& ended) {
    fd_pair p;
    ASSERT_TRUE(admin_send_record_pipe(ctl_, p.r));
    std::string msg = record_lines();
    ASSERT_EQ(::write(p.w, msg.data(), msg.size()), static_cast<ssize_t>(msg.size()));
    log = wait_log(std::chrono::seconds(10), ended);
  }
  std::string wait_log(std::chrono::milliseconds bound, bool& ended) {
    std::string out;
    auto until = std::chrono::steady_clock::now() + bound;
    ended = false;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      struct pollfd p {
        log_, POLLIN, 0
      };
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      char buf[1024];
      ssize_t r = ::read(log_, buf, sizeof buf);
      if (r <= 0) {
        ended = true;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(r));
    }
  }
  std::string report_file() const { return dir_ + "/job77.step_0.nodeA.json"; }
  std::string prolog_, dir_;
  int ctl_ = -1, log_ = -1;
  pid_t pid_ = -1;
};

TEST_F(collector_program, takes_the_record_from_the_pipe_sent_over_the_socket) {
  if (::geteuid() != 0) GTEST_SKIP() << "report_dir must be root's: run as root";
  start(60000);
  bool ended = false;
  std::string log;
  ASSERT_NO_FATAL_FAILURE(hand_in_record(log, ended));
  EXPECT_TRUE(ended) << log;
  EXPECT_TRUE(std::filesystem::exists(report_file())) << log;
}

// Tasks ended and no pipe came: local task 0 never reached its record. The collector ends at once (not after
// its own-ms), with nothing to write.
TEST_F(collector_program, tasks_ended_without_a_pipe_ends_it_at_once) {
  start(60000);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(admin_send_tasks_ended(ctl_));
  bool ended = false;
  std::string log = wait_log(std::chrono::seconds(10), ended);
  EXPECT_TRUE(ended) << log;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(std::filesystem::exists(report_file()));
}

// slurmstepd gone (every copy of its end closed) is read as "tasks ended".
TEST_F(collector_program, the_socket_closed_without_a_pipe_ends_it_at_once) {
  start(60000);
  ::close(ctl_);
  ctl_ = -1;
  bool ended = false;
  std::string log = wait_log(std::chrono::seconds(10), ended);
  EXPECT_TRUE(ended) << log;
}

// A message that is not the protocol's is logged once and ignored; the pipe after it is still taken.
TEST_F(collector_program, a_bad_message_is_ignored_and_the_pipe_after_it_taken) {
  if (::geteuid() != 0) GTEST_SKIP() << "report_dir must be root's: run as root";
  start(60000);
  fd_pair bad;
  ASSERT_TRUE(send_raw(ctl_, "pipe", {bad.w}));
  ASSERT_TRUE(send_raw(ctl_, "pipe", {bad.w}));
  bool ended = false;
  std::string log;
  ASSERT_NO_FATAL_FAILURE(hand_in_record(log, ended));
  EXPECT_TRUE(ended) << log;
  EXPECT_NE(log.find("control socket: the record descriptor is not a pipe's read end: ignored"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("ignored"), log.rfind("ignored")) << "logged more than once: " << log;
  EXPECT_TRUE(std::filesystem::exists(report_file())) << log;
}

// The pipe came and closed before the end marker (the task was killed): done, no report, no wait for "ended".
TEST_F(collector_program, the_pipe_closed_early_ends_it_without_a_report) {
  start(60000);
  fd_pair p;
  ASSERT_TRUE(admin_send_record_pipe(ctl_, p.r));
  ASSERT_EQ(::write(p.w, "begin\n", 6), 6);
  ::close(p.w);
  p.w = -1;
  ::close(p.r);
  p.r = -1;
  bool ended = false;
  std::string log = wait_log(std::chrono::seconds(10), ended);
  EXPECT_TRUE(ended) << log;
  EXPECT_FALSE(std::filesystem::exists(report_file()));
}

}  // namespace
}  // namespace mrcheck
