#include "slurm_control.h"

#include <mrcheck/child.h>
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
  std::fflush(nullptr);
  child_spec spec;
  spec.run_in_child = [&fn]() -> int {
    // The answer goes to the captured stdout; libslurm's own output (stdout or stderr) to /dev/null: the parent
    // reports the outcome in one mrcheck: line instead.
    int answer_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (answer_fd < 0 || devnull < 0) return 127;
    ::dup2(devnull, STDOUT_FILENO);
    std::string answer;
    try {
      slurm_api::init();
      answer = fn();
    } catch (...) {
      answer = "err 0 0 internal error in the slurm child";
    }
    std::size_t off = 0;
    while (off < answer.size()) {
      ssize_t n = ::write(answer_fd, answer.data() + off, answer.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    return 0;
  };
  spec.timeout = timeout;
  spec.max_output = k_max_answer;
  spec.err = child_stream::null;
  spec.own_group = false;
  spec.contain = false;
  spec.reset_oom_score_adj = false;
  auto out = run_child(spec);
  if (!out) return out.error().with_context(what);
  if (out->timed_out) {
    return status::from_errno(fmt::format("{}: slurmctld did not answer within {} ms", what, timeout.count()), EAGAIN);
  }
  if (out->out.empty()) return status::error(fmt::format("{}: the slurm child died without an answer", what));
  return out->out;
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
