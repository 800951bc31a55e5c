// The control channel between slurmstepd and the root collector (admin_record.h, admin_protocol.h).
#include <mrcheck/admin_record.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

namespace mrcheck {

namespace {

constexpr std::string_view k_pipe_word = "pipe";
constexpr std::string_view k_ended_word = "ended";

status send_word(int control_fd, std::string_view word, int fd) {
  if (control_fd < 0) return status::error("admin control channel: not open");
  struct iovec iov {
    const_cast<char*>(word.data()), word.size()
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr) return status::error("admin control channel: no room for the descriptor");
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = ::sendmsg(control_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return status::error(fmt::format("admin control channel: send: {}", std::strerror(errno)));
    return status::ok();
  }
}

}  // namespace

status admin_send_record_pipe(int control_fd, int pipe_read_fd) {
  if (pipe_read_fd < 0) return status::error("admin control channel: no pipe to send");
  return send_word(control_fd, k_pipe_word, pipe_read_fd);
}

status admin_send_tasks_ended(int control_fd) { return send_word(control_fd, k_ended_word, -1); }

admin_control_message admin_read_control(int control_fd) {
  using kind = admin_control_message::kind;
  admin_control_message m;
  char word[16];
  struct iovec iov {
    word, sizeof word
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for several descriptors, so a message that carries more than one is seen whole and all of them closed.
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 8)];
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(control_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return m;
  if (n < 0) {
    m.what = kind::closed;
    m.problem = fmt::format("recvmsg: {}", std::strerror(errno));
    return m;
  }
  std::vector<int> fds;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
    fds.clear();
  };
  // SOCK_SEQPACKET: a zero-length read with no descriptor is the peer's close (every sender's end gone).
  if (n == 0 && fds.empty()) {
    m.what = kind::closed;
    return m;
  }
  std::string_view got(word, static_cast<std::size_t>(n));
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    close_all();
    m.what = kind::invalid;
    m.problem = "a message longer than the protocol's";
    return m;
  }
  if (got == k_ended_word && fds.empty()) {
    m.what = kind::tasks_ended;
    return m;
  }
  if (got != k_pipe_word || fds.size() != 1) {
    m.what = kind::invalid;
    m.problem = fmt::format("a message of {} bytes with {} descriptor(s) that is not the protocol's", n, fds.size());
    close_all();
    return m;
  }
  struct stat st {};
  int fl = ::fcntl(fds[0], F_GETFL);
  if (::fstat(fds[0], &st) != 0 || !S_ISFIFO(st.st_mode) || fl < 0 || (fl & O_ACCMODE) != O_RDONLY) {
    m.what = kind::invalid;
    m.problem = "the record descriptor is not a pipe's read end";
    close_all();
    return m;
  }
  m.what = kind::record_pipe;
  m.fd = fds[0];
  return m;
}

}  // namespace mrcheck
