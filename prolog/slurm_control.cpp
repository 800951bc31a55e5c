#include "slurm_control.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "slurm_api.h"

namespace mrcheck::prolog {

#ifdef MRCHECK_HAVE_SLURM

namespace {

constexpr std::size_t k_max_answer = 16 * 1024;

std::string error_line(int rc) {
  return fmt::format("err {} {} {}", rc, slurm_api::transient(rc) ? 1 : 0, escape_line(slurm_api::error_text(rc), 200));
}

// The child's whole job: talk to slurmctld once and print the answer. Returns the text for the pipe.
using child_fn = std::function<std::string()>;

// Forks, runs `fn` in the child (stdin/stdout/stderr on /dev/null, answer on a pipe), waits at most
// `timeout`. Transient failures (timeout, unreachable) are EAGAIN statuses.
result<std::string> in_child(const char* what, const child_fn& fn, std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return status::from_errno(fmt::format("{}: pipe", what), errno);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return status::from_errno(fmt::format("{}: fork", what), e);
  }
  if (pid == 0) {
    ::close(fds[0]);
    // libslurm logs its own errors to stderr; the parent reports the outcome in one mrcheck: line instead.
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    std::string answer;
    try {
      slurm_api::init();
      answer = fn();
    } catch (...) {
      answer = "err 0 0 internal error in the slurm child";
    }
    std::size_t off = 0;
    while (off < answer.size()) {
      ssize_t n = ::write(fds[1], answer.data() + off, answer.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p {fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      timed_out = true;
      break;
    }
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < k_max_answer) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return status::from_errno(fmt::format("{}: slurmctld did not answer within {} ms", what, timeout.count()), EAGAIN);
  }
  if (out.empty()) return status::error(fmt::format("{}: the slurm child died without an answer", what));
  return out;
}

// "ok\n..." -> the rest; "err RC TRANSIENT TEXT" -> status (EAGAIN when transient).
result<std::string> parse_answer(const char* what, const std::string& out) {
  if (out.starts_with("ok\n")) return out.substr(3);
  if (out == "ok") return std::string();
  int rc = 0;
  int tr = 0;
  int consumed = 0;
  if (std::sscanf(out.c_str(), "err %d %d %n", &rc, &tr, &consumed) >= 2) {
    std::string text = out.substr(static_cast<std::size_t>(consumed));
    if (tr) return status::from_errno(fmt::format("{}: {} (slurm error {})", what, text, rc), EAGAIN);
    return status::error(fmt::format("{}: {} (slurm error {})", what, text, rc));
  }
  return status::error(fmt::format("{}: malformed answer from the slurm child", what));
}

class slurm_control final : public node_control {
 public:
  result<node_status> query(const std::string& node, std::chrono::milliseconds timeout) override {
    auto out = in_child(
        "slurm_load_node_single",
        [&]() -> std::string {
          slurm_api::node_state n;
          if (int rc = slurm_api::load_node(node, n); rc != 0) {
            return rc == slurm_api::invalid_node_name() ? fmt::format("err {} 0 node not found", rc) : error_line(rc);
          }
          // One line: the reason is escaped on our side only for display; keep it raw but newline-free.
          for (char& c : n.reason) {
            if (c == '\n' || c == '\r') c = ' ';
          }
          return fmt::format("ok\n{} {}\n{}", n.drain ? 1 : 0, n.down ? 1 : 0, n.reason);
        },
        timeout);
    if (!out) return out.error();
    auto body = parse_answer("slurm_load_node_single", *out);
    if (!body) return body.error();
    node_status st;
    std::string& b = *body;
    auto nl = b.find('\n');
    std::string flags = b.substr(0, nl);
    st.drain = flags.size() >= 1 && flags[0] == '1';
    st.down = flags.size() >= 3 && flags[2] == '1';
    st.reason = nl == std::string::npos ? "" : b.substr(nl + 1);
    return st;
  }

  status drain(const std::string& node, const std::string& reason, std::chrono::milliseconds timeout) override {
    return update(node, slurm_api::node_change::drain, reason, timeout);
  }

  status resume(const std::string& node, std::chrono::milliseconds timeout) override {
    return update(node, slurm_api::node_change::resume, "", timeout);
  }

 private:
  static status update(const std::string& node, slurm_api::node_change change, const std::string& reason,
                       std::chrono::milliseconds timeout) {
    auto out = in_child(
        "slurm_update_node",
        [&]() -> std::string {
          int rc = slurm_api::update_node(node, change, reason);
          return rc == 0 ? "ok" : error_line(rc);
        },
        timeout);
    if (!out) return out.error();
    auto body = parse_answer("slurm_update_node", *out);
    return body.error();
  }
};

}  // namespace

std::unique_ptr<node_control> make_slurm_control() { return std::make_unique<slurm_control>(); }

#else

std::unique_ptr<node_control> make_slurm_control() { return nullptr; }

#endif

}  // namespace mrcheck::prolog
