// The collector's input: the control socket slurmstepd starts it with, the record pipe local task 0 sends over
// it, and "tasks ended": the channel's two ends (admin_record.h).
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

}  // namespace
}  // namespace mrcheck
