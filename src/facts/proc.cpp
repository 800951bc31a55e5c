// /proc parsers: RLIMIT_MEMLOCK from /proc/PID/limits, pid/comm/ppid from /proc/PID/stat, the uid from
// /proc/PID/status, and the chain of a process and its ancestors. Everything goes through the sysroot so a
// dumped tree replays exactly.
#include <mrcheck/facts.h>

#include <fmt/format.h>

#include <charconv>
#include <set>
#include <string>
#include <string_view>

namespace mrcheck {

namespace {

// The kernel never nests deeper than this in practice (pid_max is 4M, but a chain of login shells is a few
// dozen). A longer walk means a loop or a tree that lies; stop rather than spin.
constexpr std::size_t k_max_chain = 4096;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Splits one line on runs of blanks (the kernel pads columns with spaces; a copied file may have tabs).
std::vector<std::string_view> split_blanks(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// One limit column: a decimal number or "unlimited". The kernel prints RLIM_INFINITY as "unlimited", so
// a number equal to it cannot appear and is refused like any overflow.
result<std::uint64_t> parse_limit_value(std::string_view v) {
  if (v == "unlimited") return k_unlimited;
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || ptr != v.data() + v.size() || n == k_unlimited) {
    return status::error(fmt::format("'{}' is not a limit value", escape_line(v, 32)));
  }
  return n;
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

result<memlock_limit> parse_memlock_from_limits(std::string_view limits_file) {
  return parse_rlimit_from_limits(limits_file, "Max locked memory", "bytes");
}

result<memlock_limit> parse_rlimit_from_limits(std::string_view limits_file, std::string_view k_name,
                                               std::string_view units) {
  std::size_t pos = 0;
  while (pos <= limits_file.size()) {
    std::size_t nl = limits_file.find('\n', pos);
    bool last = nl == std::string_view::npos;
    std::string_view line = limits_file.substr(pos, last ? std::string_view::npos : nl - pos);
    pos = last ? limits_file.size() + 1 : nl + 1;
    std::size_t lead = 0;
    while (lead < line.size() && is_space(line[lead])) ++lead;
    line.remove_prefix(lead);
    if (!line.starts_with(k_name)) continue;
    // "Max locked memory         8388608              8388608              bytes"
    auto cols = split_blanks(line.substr(k_name.size()));
    // The units column is how we know the line is whole: a file cut in the middle of the hard limit would
    // otherwise parse as a smaller, wrong value.
    if (cols.size() < 3) {
      return status::error(fmt::format("limits: '{}' line is truncated: '{}'", k_name, escape_line(line, 128)));
    }
    if (cols[2] != units) {
      return status::error(
          fmt::format("limits: '{}' units are '{}', expected '{}'", k_name, escape_line(cols[2], 32), units));
    }
    auto soft = parse_limit_value(cols[0]);
    if (!soft) return soft.error().with_context(fmt::format("limits: soft '{}'", k_name));
    auto hard = parse_limit_value(cols[1]);
    if (!hard) return hard.error().with_context(fmt::format("limits: hard '{}'", k_name));
    return memlock_limit{*soft, *hard};
  }
  return status::error(fmt::format("limits: no '{}' line (file truncated or not a /proc/PID/limits)", k_name));
}

result<stat_fields> parse_proc_stat(std::string_view stat_line) {
  // "1234 (comm) S 1 ...": comm is at most 16 bytes but may hold spaces, '(' and ')' ("(sd-pam)", "a) S 1 (");
  // the kernel does not escape it, so the only safe end is the last ')'.
  std::size_t open = stat_line.find('(');
  std::size_t close = stat_line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return status::error(fmt::format("stat: no '(comm)' in '{}'", escape_line(stat_line, 64)));
  }
  stat_fields f;
  std::string_view pid_text = stat_line.substr(0, open);
  while (!pid_text.empty() && is_space(pid_text.back())) pid_text.remove_suffix(1);
  if (!parse_int(pid_text, f.pid) || f.pid <= 0) {
    return status::error(fmt::format("stat: bad pid '{}'", escape_line(pid_text, 32)));
  }
  f.comm = std::string(stat_line.substr(open + 1, close - open - 1));
  auto rest = split_blanks(stat_line.substr(close + 1));
  if (rest.size() < 2) return status::error(fmt::format("stat of pid {}: truncated after comm", f.pid));
  if (rest[0].size() != 1) {
    return status::error(fmt::format("stat of pid {}: bad state '{}'", f.pid, escape_line(rest[0], 16)));
  }
  f.state = rest[0][0];
  std::string_view ppid_text = rest[1];
  if (!ppid_text.empty() && ppid_text.back() == '\n') ppid_text.remove_suffix(1);
  if (!parse_int(ppid_text, f.ppid) || f.ppid < 0) {
    return status::error(fmt::format("stat of pid {}: bad ppid '{}'", f.pid, escape_line(ppid_text, 32)));
  }
  return f;
}

namespace {

// One column of the "Uid:" line: "Uid:\t1000\t1000\t1000\t1000" = real, effective, saved, filesystem.
result<uid_t> status_uid_column(std::string_view status_file, std::size_t column) {
  std::size_t pos = 0;
  while (pos < status_file.size()) {
    std::size_t nl = status_file.find('\n', pos);
    std::string_view line = status_file.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? status_file.size() : nl + 1;
    if (!line.starts_with("Uid:")) continue;
    auto cols = split_blanks(line.substr(4));
    std::uint32_t uid = 0;
    if (cols.size() <= column || !parse_int(cols[column], uid)) {
      return status::error(fmt::format("status: bad Uid line '{}'", escape_line(line, 64)));
    }
    return static_cast<uid_t>(uid);
  }
  return status::error("status: no Uid line");
}

}  // namespace

result<uid_t> parse_status_uid(std::string_view status_file) { return status_uid_column(status_file, 0); }

own_process_facts read_own_process(const sysroot& root) {
  own_process_facts o;
  if (auto stat = root.read("/proc/self/stat", 64 * 1024)) {
    if (auto st = parse_proc_stat(*stat)) o.pid = st->pid;
  }
  if (auto limits = root.read("/proc/self/limits", 64 * 1024)) {
    if (auto m = parse_memlock_from_limits(*limits)) o.memlock = *m;
  }
  if (auto st = root.read("/proc/self/status", 64 * 1024)) {
    if (auto euid = status_uid_column(*st, 1)) o.euid = *euid;
    o.cap_ipc_lock = cap_ipc_lock_from_status(*st);
  }
  return o;
}

result<process_fact> read_process(const sysroot& root, pid_t pid) {
  if (pid <= 0) return status::error(fmt::format("pid {}: not a process id", pid));
  auto stat_text = root.read(fmt::format("/proc/{}/stat", pid), 64 * 1024);
  if (!stat_text) return stat_text.error();
  auto st = parse_proc_stat(*stat_text);
  if (!st) return st.error().with_context(fmt::format("/proc/{}/stat", pid));
  if (st->pid != pid) {
    return status::error(fmt::format("/proc/{}/stat names pid {}", pid, st->pid));
  }
  process_fact p;
  p.pid = pid;
  p.ppid = st->ppid;
  p.comm = st->comm;
  auto limits = root.read(fmt::format("/proc/{}/limits", pid), 64 * 1024);
  if (limits) {
    auto one = [&](std::string_view name, std::string_view units) {
      auto m = parse_rlimit_from_limits(*limits, name, units);
      return m ? result<memlock_limit>(*m)
               : result<memlock_limit>(m.error().with_context(fmt::format("/proc/{}", pid)));
    };
    p.memlock = one("Max locked memory", "bytes");
    p.stack = one("Max stack size", "bytes");
    p.nofile = one("Max open files", "files");
  } else {
    p.memlock = limits.error();
    p.stack = limits.error();
    p.nofile = limits.error();
  }
  auto status_text = root.read(fmt::format("/proc/{}/status", pid), 64 * 1024);
  if (status_text) {
    auto uid = parse_status_uid(*status_text);
    if (uid) p.uid = *uid;
  }
  return p;
}

void mark_lowered(std::vector<process_fact>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    chain[i].lowered = false;
    if (i + 1 >= chain.size()) continue;  // the oldest ancestor read has no parent to compare with
    const auto& me = chain[i].memlock;
    const auto& parent = chain[i + 1].memlock;
    if (!me || !parent) continue;  // unknown is never reported as a drop
    chain[i].lowered = me->soft < parent->soft || me->hard < parent->hard;
  }
}

result<std::vector<process_fact>> read_chain(const sysroot& root, pid_t pid) {
  if (pid <= 0) return status::error(fmt::format("pid {}: not a process id", pid));
  std::vector<process_fact> chain;
  std::set<pid_t> seen;
  pid_t next = pid;
  while (next > 0) {
    if (!seen.insert(next).second) break;  // a loop (only a crafted tree can do this)
    if (chain.size() >= k_max_chain) break;
    auto p = read_process(root, next);
    if (!p) {
      // The start process must exist; an ancestor may exit while we walk (reparenting races), and then the
      // chain ends with what was read.
      if (chain.empty()) return p.error();
      break;
    }
    chain.push_back(std::move(*p));
    if (next == 1) break;
    next = chain.back().ppid;
  }
  mark_lowered(chain);
  return chain;
}

}  // namespace mrcheck
