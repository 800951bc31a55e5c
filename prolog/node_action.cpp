#include "prolog/node_action.h"

#include <mrcheck/owner.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace mrcheck {

namespace {

constexpr std::chrono::milliseconds k_first_backoff{250};
constexpr std::chrono::milliseconds k_max_backoff{2000};
constexpr std::chrono::milliseconds k_max_try{4000};
constexpr std::size_t k_max_state_file = 4096;

bool transient(const status& s) { return s.err() == EAGAIN; }

// Runs `call(timeout)` until it succeeds, fails for good, or the budget is spent.
template <class F>
auto with_retries(F&& call, std::chrono::steady_clock::time_point deadline, const retry_clock& clock, int& tries)
    -> decltype(call(std::chrono::milliseconds{})) {
  auto backoff = k_first_backoff;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.now());
    if (left <= std::chrono::milliseconds{0})
      return status::from_errno("slurmctld: no time left in the budget", EAGAIN);
    ++tries;
    auto r = call(std::min(left, k_max_try));
    if (r.is_ok() || !transient(r.error())) return r;
    left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.now());
    if (left <= backoff) return r;
    if (clock.sleep) {
      clock.sleep(backoff);
    } else {
      std::this_thread::sleep_for(backoff);
    }
    backoff = std::min(backoff * 2, k_max_backoff);
  }
}

// status has no value; wrap it so with_retries handles both alike.
struct done {};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

// A device name the grammar's <device> part can carry: [^ :]+(:[^ :]+)* of printable ASCII, at most 64 bytes
// (docs/drain-reasons.md). Anything else stays out of the reason's device part; the summary still names it.
namespace {

bool device_part_ok(std::string_view d) {
  // A leading '(' would read as the owner part.
  if (d.empty() || d.size() > 64 || d.front() == ':' || d.front() == '(' || d.back() == ':' ||
      d.find("::") != std::string_view::npos)
    return false;
  return std::all_of(d.begin(), d.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
}

}  // namespace

std::string drain_reason(const check_result& c) {
  // Escape each part, then bound the whole: the check id and summary come from our own code, but the
  // summary quotes sysfs/procfs contents.
  std::string_view text = c.summary;
  std::string device;
  if (device_part_ok(c.device)) {
    device = " " + c.device;
    // A summary that starts with the device ("mlx5_0 ConnectX-7 fw ...", "mlx5_0: ibv_reg_mr ...") names it once.
    for (std::string_view sep : {": ", " "}) {
      if (text.size() > c.device.size() + sep.size() && text.starts_with(c.device) &&
          text.substr(c.device.size()).starts_with(sep)) {
        text.remove_prefix(c.device.size() + sep.size());
        break;
      }
    }
  }
  fix_owner o = owner_of(c);
  std::string owner = o == fix_owner::none ? std::string() : fmt::format(" ({})", to_string(o));
  return escape_line(fmt::format("{} {}{}{}: {}", k_reason_prefix, c.id, device, owner, text), k_max_reason);
}

bool is_mrcheck_reason(std::string_view reason) { return reason.starts_with(k_reason_prefix); }

std::string_view to_string(desired_action::kind k) {
  switch (k) {
    case desired_action::kind::none: return "none";
    case desired_action::kind::drain: return "drain";
    case desired_action::kind::resume: return "resume";
  }
  return "none";
}

std::string_view to_string(apply_outcome::kind k) {
  switch (k) {
    case apply_outcome::kind::nothing: return "nothing";
    case apply_outcome::kind::drained: return "drained";
    case apply_outcome::kind::already: return "already";
    case apply_outcome::kind::resumed: return "resumed";
    case apply_outcome::kind::left_alone: return "left_alone";
    case apply_outcome::kind::unreachable: return "unreachable";
    case apply_outcome::kind::failed: return "failed";
  }
  return "failed";
}

bool drains_for(const check_result& c, bool drain_site) {
  if (c.result != verdict::fail) return false;
  switch (owner_of(c)) {
    case fix_owner::job: return false;
    case fix_owner::site: return drain_site;
    case fix_owner::node:
    case fix_owner::none: return true;  // an id without an owner: as before owners, it drains
  }
  return true;
}

desired_action plan_action(const report& r, fail_policy on_error, bool drain_site) {
  for (const auto& c : r.checks) {
    if (drains_for(c, drain_site)) return {desired_action::kind::drain, drain_reason(c)};
  }
  for (const auto& c : r.checks) {
    if (c.result != verdict::error) continue;
    if (on_error == fail_policy::fail) {
      check_result e = c;
      e.summary = "checker error: " + c.summary;
      return {desired_action::kind::drain, drain_reason(e)};
    }
    return {};
  }
  return {desired_action::kind::resume, ""};
}

apply_outcome apply_action(node_control& ctl, const std::string& node, const desired_action& want, bool pending_drain,
                           std::chrono::milliseconds budget, const retry_clock& clock) {
  using k = apply_outcome::kind;
  if (want.what == desired_action::kind::none) return {k::nothing, "nothing to do"};
  auto deadline = clock.now() + budget;
  int tries = 0;
  auto st = with_retries([&](std::chrono::milliseconds t) { return ctl.query(node, t); }, deadline, clock, tries);
  if (!st) {
    if (transient(st.error())) {
      return {k::unreachable, fmt::format("slurmctld unreachable after {} tries in {} ms: {}", tries, budget.count(),
                                          st.error().message())};
    }
    return {k::failed, fmt::format("cannot read node {}: {}", node, st.error().message())};
  }
  const node_status& ns = *st;
  bool ours = is_mrcheck_reason(ns.reason);
  std::string shown_reason = escape_line(ns.reason, 120);

  auto finish = [&](status s, k success, std::string what) -> apply_outcome {
    if (s) return {success, std::move(what)};
    if (transient(s)) {
      return {k::unreachable, fmt::format("slurmctld unreachable after {} tries: {}", tries, s.message())};
    }
    return {k::failed, fmt::format("slurmctld refused: {}", s.message())};
  };
  auto run = [&](auto&& call) {
    auto r = with_retries(
        [&](std::chrono::milliseconds t) -> result<done> {
          status s = call(t);
          if (s) return done{};
          return s;
        },
        deadline, clock, tries);
    return r.error();
  };

  if (want.what == desired_action::kind::drain) {
    if (!ns.reason.empty() && !ours) {
      // Our own earlier non-zero Prolog exit, whose drain could not be sent, shows up as Slurm's reason.
      bool our_prolog_error = pending_drain && ns.reason == k_prolog_error_reason;
      if (!our_prolog_error) {
        return {k::left_alone,
                fmt::format("node {} already has reason '{}' set by someone else: not changed", node, shown_reason)};
      }
    }
    if (ns.drain && ns.reason == want.reason)
      return {k::already, fmt::format("node {} already drained: {}", node, want.reason)};
    status s = run([&](std::chrono::milliseconds t) { return ctl.drain(node, want.reason, t); });
    return finish(s, k::drained, fmt::format("drained node {}: {}", node, want.reason));
  }
  // resume
  if (!ours) {
    if (ns.drain || ns.down) {
      return {k::left_alone, fmt::format("node {} is drained/down with reason '{}' not set by mrcheck: not resumed",
                                         node, shown_reason)};
    }
    return {k::nothing, fmt::format("node {} is not drained by mrcheck", node)};
  }
  status s = run([&](std::chrono::milliseconds t) { return ctl.resume(node, t); });
  return finish(s, k::resumed, fmt::format("resumed node {} (was: {})", node, shown_reason));
}

bool valid_node_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

namespace {

bool trusted_owner(uid_t uid, uid_t owner) { return uid == owner || uid == 0; }

// Every directory above state_dir must be one only root (or `owner`) can change: a user who can rename or
// replace a parent (their own directory in /tmp, a symlink they own) moves root's later writes into a
// directory of theirs, between two runs. Group/other-writable parents are fine only with the sticky bit
// (/tmp): there nobody else may rename root's entry.
status check_state_dir_parents(const std::string& dir, uid_t owner) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t last = path.rfind('/');
  const std::string parent = last == 0 ? std::string("/") : path.substr(0, last);
  // The path as written: a symlink on the way must be root's, or its owner can re-point it at any time.
  for (std::size_t at = path.find('/', 1); at != std::string::npos && at <= last; at = path.find('/', at + 1)) {
    const std::string prefix = path.substr(0, at);
    struct stat sb {};
    if (::lstat(prefix.c_str(), &sb) != 0)
      return status::from_errno(fmt::format("state_dir {}: {}", dir, prefix), errno);
    if (S_ISLNK(sb.st_mode) && !trusted_owner(sb.st_uid, owner)) {
      return status::error(
          fmt::format("state_dir {}: {} is a symlink owned by uid {}: refused", dir, prefix, sb.st_uid));
    }
  }
  // Where it really is: every directory from / down to the parent.
  char* real = ::realpath(parent.c_str(), nullptr);
  if (real == nullptr) return status::from_errno(fmt::format("state_dir {}: resolve {}", dir, parent), errno);
  const std::string resolved(real);
  std::free(real);
  std::vector<std::string> dirs{"/"};
  for (std::size_t at = resolved.find('/', 1);; at = resolved.find('/', at + 1)) {
    if (at == std::string::npos) {
      if (resolved.size() > 1) dirs.push_back(resolved);
      break;
    }
    dirs.push_back(resolved.substr(0, at));
  }
  for (const auto& d : dirs) {
    struct stat sb {};
    if (::stat(d.c_str(), &sb) != 0) return status::from_errno(fmt::format("state_dir {}: {}", dir, d), errno);
    if (!trusted_owner(sb.st_uid, owner)) {
      return status::error(fmt::format("state_dir {}: its parent {} is owned by uid {}: refused", dir, d, sb.st_uid));
    }
    if ((sb.st_mode & (S_IWGRP | S_IWOTH)) && !(sb.st_mode & S_ISVTX)) {
      return status::error(
          fmt::format("state_dir {}: its parent {} is writable by group or others (mode {:o}): refused", dir, d,
                      sb.st_mode & 07777));
    }
  }
  return status::ok();
}

}  // namespace

result<state_store> state_store::open(const std::string& dir, uid_t owner) {
  if (dir.empty() || dir.front() != '/')
    return status::error(fmt::format("state_dir '{}' is not an absolute path", escape_line(dir, 128)));
  if (auto p = check_state_dir_parents(dir, owner); !p) return p;
  struct stat sb {};
  if (::lstat(dir.c_str(), &sb) != 0) {
    if (errno != ENOENT) return status::from_errno(fmt::format("state_dir {}", dir), errno);
    // umask could widen nothing here (0700 has no bits to mask); mkdir does not follow a final symlink.
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return status::from_errno(fmt::format("create state_dir {}", dir), errno);
    if (::lstat(dir.c_str(), &sb) != 0) return status::from_errno(fmt::format("state_dir {}", dir), errno);
  }
  if (S_ISLNK(sb.st_mode)) return status::error(fmt::format("state_dir {} is a symlink: refused", dir));
  if (!S_ISDIR(sb.st_mode)) return status::error(fmt::format("state_dir {} is not a directory: refused", dir));
  if (sb.st_uid != owner) {
    return status::error(fmt::format("state_dir {} is owned by uid {}, not {}: refused", dir, sb.st_uid, owner));
  }
  if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
    return status::error(
        fmt::format("state_dir {} is writable by group or others (mode {:o}): refused", dir, sb.st_mode & 07777));
  }
  return state_store(dir, owner);
}

result<std::optional<desired_action>> state_store::load(const std::string& node) const {
  if (!valid_node_name(node))
    return status::error(fmt::format("node name '{}' is not usable as a file name", escape_line(node, 64)));
  std::string path = dir_ + "/pending-" + node;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<desired_action>{};
    return status::from_errno(fmt::format("open {}", path), errno);
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != owner_ || (sb.st_mode & (S_IWGRP | S_IWOTH)) ||
      sb.st_size > static_cast<off_t>(k_max_state_file)) {
    ::close(fd);
    return status::error(fmt::format("{} is not a regular file owned by uid {} and private: ignored", path, owner_));
  }
  std::string text(static_cast<std::size_t>(sb.st_size), '\0');
  ssize_t n = ::read(fd, text.data(), text.size());
  int read_errno = errno;
  ::close(fd);
  if (n < 0) return status::from_errno(fmt::format("read {}", path), read_errno);
  text.resize(static_cast<std::size_t>(n));
  desired_action a;
  bool have_action = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    auto sp = line.find(' ');
    std::string_view key = trim(line.substr(0, sp));
    std::string_view value = sp == std::string_view::npos ? std::string_view{} : trim(line.substr(sp + 1));
    if (key == "action") {
      if (value == "drain") {
        a.what = desired_action::kind::drain;
      } else if (value == "resume") {
        a.what = desired_action::kind::resume;
      } else {
        return status::error(fmt::format("{}: unknown action '{}'", path, escape_line(value, 32)));
      }
      have_action = true;
    } else if (key == "reason") {
      a.reason = escape_line(value, k_max_reason);
    }
  }
  if (!have_action) return status::error(fmt::format("{}: no action line", path));
  if (a.what == desired_action::kind::drain && !is_mrcheck_reason(a.reason)) {
    return status::error(fmt::format("{}: drain reason does not start with '{}'", path, k_reason_prefix));
  }
  return std::optional<desired_action>{a};
}

status state_store::save(const std::string& node, const desired_action& a) const {
  if (!valid_node_name(node))
    return status::error(fmt::format("node name '{}' is not usable as a file name", escape_line(node, 64)));
  if (a.what == desired_action::kind::none) return clear(node);
  std::string path = dir_ + "/pending-" + node;
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::string text = fmt::format("action {}\nreason {}\ntime {}\n", to_string(a.what),
                                 escape_line(a.reason, k_max_reason), static_cast<long long>(::time(nullptr)));
  ::unlink(tmp.c_str());  // a leftover of a killed run with our pid; O_EXCL below refuses anything else
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return status::from_errno(fmt::format("create {}", tmp), errno);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return status::from_errno(fmt::format("write {}", tmp), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return status::from_errno(fmt::format("rename {}", path), err);
  }
  return status::ok();
}

status state_store::clear(const std::string& node) const {
  if (!valid_node_name(node))
    return status::error(fmt::format("node name '{}' is not usable as a file name", escape_line(node, 64)));
  std::string path = dir_ + "/pending-" + node;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return status::from_errno(fmt::format("remove {}", path), errno);
  return status::ok();
}

}  // namespace mrcheck
