#include <mrcheck/proc_tree.h>

#include <fmt/format.h>

#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <string_view>
#include <thread>

namespace mrcheck {

namespace {

// A number that is all of `s`, at least `least`.
std::optional<pid_t> whole_number(std::string_view s, pid_t least) {
  pid_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < least) return std::nullopt;
  return v;
}

// The pids of a /proc/PID/task/TID/children file: "123 456 " (space separated, a trailing space).
void add_listed(std::string_view list, std::vector<pid_t>& out) {
  while (!list.empty()) {
    std::size_t sp = list.find_first_of(" \n");
    if (auto p = whole_number(list.substr(0, sp), 1)) out.push_back(*p);
    list.remove_prefix(sp == std::string_view::npos ? list.size() : sp + 1);
  }
}

// The parent field of a /proc/PID/stat line, "pid (comm) state ppid ...": comm may hold spaces and parentheses,
// so the last ')' ends it.
std::optional<pid_t> parent_in_stat(std::string_view stat) {
  std::size_t rp = stat.rfind(')');
  if (rp == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(rp + 1);  // " S 123 ..."
  if (rest.size() < 4 || rest[0] != ' ' || rest[2] != ' ') return std::nullopt;
  rest.remove_prefix(3);
  return whole_number(rest.substr(0, rest.find(' ')), 0);
}

// Without /proc/PID/task/TID/children: every process whose stat names `pid` as its parent, in pid order.
std::vector<pid_t> children_by_stat(pid_t pid, const sysroot& root) {
  std::vector<pid_t> out;
  auto names = root.list("/proc");
  if (!names) return out;
  for (const auto& name : *names) {
    auto p = whole_number(name, 1);
    if (!p) continue;
    auto stat = root.read(fmt::format("/proc/{}/stat", name), 4096);
    if (stat && parent_in_stat(*stat) == pid) out.push_back(*p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<pid_t> children_of(pid_t pid, const sysroot& root) {
  std::vector<pid_t> out;
  if (pid <= 0) return out;
  const std::string task_dir = fmt::format("/proc/{}/task", pid);
  // No such process (or one hidden from us): it has no children we could see.
  auto tids = root.list(task_dir);
  if (!tids) return out;
  bool have_children_files = false;
  for (const auto& tid : *tids) {
    if (!whole_number(tid, 1)) continue;
    auto text = root.read(fmt::format("{}/{}/children", task_dir, tid));
    if (!text) continue;
    have_children_files = true;
    add_listed(*text, out);
  }
  return have_children_files ? out : children_by_stat(pid, root);
}

std::vector<pid_t> process_tree(pid_t pid, std::size_t max, const sysroot& root) {
  std::vector<pid_t> tree;
  if (max == 0) return tree;
  tree.push_back(pid);
  // One at a time, not a range insert: gcc 14 warns (-Wstringop-overflow, a false positive) on that here.
  for (std::size_t i = 0; i < tree.size() && tree.size() < max; ++i) {
    for (pid_t c : children_of(tree[i], root)) {
      if (tree.size() >= max) break;
      tree.push_back(c);
    }
  }
  return tree;
}

exit_watch::exit_watch(pid_t pid) {
  if (pid <= 0) {
    gone_ = true;  // no process to wait for (pidfd_open would say EINVAL)
    return;
  }
  long fd = ::syscall(SYS_pidfd_open, pid, 0);  // close-on-exec by itself
  if (fd >= 0) {
    pidfd_ = static_cast<int>(fd);
  } else if (errno == ESRCH) {
    gone_ = true;
  }
}

exit_watch::~exit_watch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

exit_watch::woken exit_watch::wait(std::chrono::microseconds d, int also) const {
  woken w;
  w.exited = gone_;
  if (gone_ || d.count() < 0) d = std::chrono::microseconds(0);   // gone: only look at `also`
  struct pollfd p[2] = {{pidfd_, POLLIN, 0}, {also, POLLIN, 0}};  // poll skips a negative descriptor
  if (pidfd_ < 0 && also < 0) {
    std::this_thread::sleep_for(d);
    return w;
  }
  auto us = d.count();
  struct timespec ts {
    static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)
  };
  if (::ppoll(p, 2, &ts, nullptr) <= 0) return w;  // the time is up, or a signal: the caller looks again
  if (pidfd_ >= 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) w.exited = true;
  if (also >= 0 && p[1].revents != 0) w.fd_ready = true;
  return w;
}

}  // namespace mrcheck
