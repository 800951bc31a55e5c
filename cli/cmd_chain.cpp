// mrcheck chain [--pid PID] [--json] [--root DIR]: RLIMIT_MEMLOCK of PID (default: mrcheck's parent, i.e. the
// shell that ran it) and of each ancestor up to pid 1, marking the process where the limit dropped; beside it
// the soft RLIMIT_STACK and RLIMIT_NOFILE of each (include/mrcheck/limit_chain.h), marking where each changed.
//
// JSON: {"chain": [{"pid","ppid","comm","uid","memlock_soft","memlock_hard","stack_soft","stack_hard",
// "nofile_soft","nofile_hard","lowered"}]}, first entry = PID,
// limits in bytes or "unlimited", an unreadable limit as {"unknown": "<reason>"}. Exit 0, or 2 when PID
// cannot be read or on a usage error.
#include "commands.h"

#include <mrcheck/facts.h>
#include <mrcheck/limit_chain.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/verdict_schema.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <charconv>

namespace mrcheck::cli {

namespace {

constexpr const char* k_chain_usage = "usage: mrcheck chain [--pid PID] [--json] [--root DIR]\n";

std::string show(const result<memlock_limit>& m, bool hard) {
  if (!m) return "unknown";
  return format_bytes(hard ? m->hard : m->soft);
}

// The soft stack or nofile limit, with `*` where it differs from the parent's (the process that set it).
std::string other(const process_fact& p, const process_fact* parent, rlimit_kind k) {
  const auto& v = limit_of(p, k);
  if (!v) return "?";
  std::string s = format_limit(k, v->soft);
  if (parent && limit_of(*parent, k) && limit_of(*parent, k)->soft != v->soft) s += "*";
  return s;
}

// Under --root there is no "parent of this mrcheck": the tree's /proc/self is the mrcheck that made the dump,
// and its parent is the shell it ran in - the same process the default means on a live node.
result<pid_t> default_pid(const sysroot& root) {
  if (root.is_host()) return ::getppid();
  auto self = root.read_link("/proc/self");
  if (!self) return self.error().with_context("no --pid given and the tree has no /proc/self");
  auto pid = parse_pid_file(*self);
  if (!pid) return pid.error().with_context("/proc/self");
  auto p = read_process(root, *pid);
  if (!p) return p.error();
  return p->ppid > 0 ? p->ppid : *pid;
}

}  // namespace

int cmd_chain(const args& a) {
  bool json = false;
  std::string root_dir;
  std::optional<pid_t> pid;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--json") {
      json = true;
    } else if (o == "--root" && i + 1 < a.size()) {
      root_dir = a[++i];
    } else if (o.starts_with("--root=")) {
      root_dir = o.substr(7);
    } else if ((o == "--pid" && i + 1 < a.size()) || o.starts_with("--pid=")) {
      std::string v = o == "--pid" ? a[++i] : o.substr(6);
      pid_t p = 0;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), p);
      if (ec != std::errc() || ptr != v.data() + v.size() || p <= 0) {
        fmt::print(stderr, "mrcheck: chain: --pid '{}' is not a process id\n", escape_line(v, 32));
        return k_exit_usage;
      }
      pid = p;
    } else if (o == "--help" || o == "-h") {
      fmt::print("{}", k_chain_usage);
      return k_exit_ok;
    } else {
      fmt::print(stderr, "mrcheck: chain: unknown or incomplete option '{}'\n{}", escape_line(o, 64), k_chain_usage);
      return k_exit_usage;
    }
  }
  sysroot root;
  if (!root_dir.empty()) {
    auto r = sysroot::open(root_dir);
    if (!r) {
      fmt::print(stderr, "mrcheck: chain: --root: {}\n", r.error().message());
      return k_exit_usage;
    }
    root = *r;
  }
  if (!pid) {
    auto d = default_pid(root);
    if (!d) {
      fmt::print(stderr, "mrcheck: chain: {}\n", d.error().message());
      return k_exit_usage;
    }
    pid = *d;
  }
  auto chain = read_chain(root, *pid);
  if (!chain) {
    fmt::print(stderr, "mrcheck: chain: {}\n", chain.error().message());
    return k_exit_usage;
  }
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : *chain) arr.push_back(process_to_json(p));
    nlohmann::json j = {{"schema_version", k_json_schema_version}, {"chain", std::move(arr)}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return k_exit_ok;
  }
  fmt::print("{:>8}  {:<16}  {:>6}  {:<12}  {:<12}  {:<10}  {:<8}\n", "PID", "COMM", "UID", "SOFT", "HARD", "STACK",
             "NOFILE");
  for (std::size_t i = 0; i < chain->size(); ++i) {
    const auto& p = (*chain)[i];
    std::string mark;
    if (p.lowered && i + 1 < chain->size()) {
      const auto& parent = (*chain)[i + 1];
      mark = fmt::format("  <- lowered here (parent {}: soft {} hard {})", parent.pid, show(parent.memlock, false),
                         show(parent.memlock, true));
    }
    const process_fact* parent = i + 1 < chain->size() ? &(*chain)[i + 1] : nullptr;
    fmt::print("{:>8}  {:<16}  {:>6}  {:<12}  {:<12}  {:<10}  {:<8}{}\n", p.pid, escape_line(p.comm, 16),
               p.uid ? std::to_string(*p.uid) : "?", show(p.memlock, false), show(p.memlock, true),
               other(p, parent, rlimit_kind::stack), other(p, parent, rlimit_kind::nofile), mark);
    if (!p.memlock) fmt::print("{:>8}  limits unreadable: {}\n", "", p.memlock.error().message());
  }
  if (chain->back().pid != 1 && chain->back().ppid > 0) {
    fmt::print("(chain ends at pid {}: its parent {} could not be read)\n", chain->back().pid, chain->back().ppid);
  }
  return k_exit_ok;
}

}  // namespace mrcheck::cli
