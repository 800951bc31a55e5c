// mrcheck chain [--pid PID] [--json] [--root DIR]: RLIMIT_MEMLOCK of PID (default: mrcheck's parent, i.e. the
// shell that ran it) and of each ancestor up to pid 1, marking the process where the limit dropped; beside it
// the soft RLIMIT_STACK and RLIMIT_NOFILE of each (include/mrcheck/limit_chain.h), marking where each changed.
//
// JSON: {"chain": [{"pid","ppid","comm","uid","memlock_soft","memlock_hard","stack_soft","stack_hard",
// "nofile_soft","nofile_hard","lowered"}]}, first entry = PID,
// limits in bytes or "unlimited", an unreadable limit as {"unknown": "<reason>"}. Exit 0, or 2 when PID
// cannot be read or on a usage error.
#include "command_line.h"

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

struct chain_options {
  bool json = false;
  std::string root_dir;
  std::string pid;
};

// The process the chain starts from: --pid, else the default (default_pid). Nullopt after printing why.
std::optional<pid_t> start_pid(const command_line& line, const sysroot& root) {
  const std::string& v = line.options<chain_options>().pid;
  if (!line.given("--pid")) {
    auto d = default_pid(root);
    if (!d) {
      line.usage_error(d.error().message());
      return std::nullopt;
    }
    return *d;
  }
  pid_t p = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), p);
  if (ec != std::errc() || ptr != v.data() + v.size() || p <= 0) {
    line.usage_error(fmt::format("--pid '{}' is not a process id", escape_line(v, 32)));
    return std::nullopt;
  }
  return p;
}

void print_json(const std::vector<process_fact>& chain) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : chain) arr.push_back(process_to_json(p));
  nlohmann::json j = {{"schema_version", k_json_schema_version}, {"chain", std::move(arr)}};
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

void print_text(const std::vector<process_fact>& chain) {
  fmt::print("{:>8}  {:<16}  {:>6}  {:<12}  {:<12}  {:<10}  {:<8}\n", "PID", "COMM", "UID", "SOFT", "HARD", "STACK",
             "NOFILE");
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const auto& p = chain[i];
    const process_fact* parent = i + 1 < chain.size() ? &chain[i + 1] : nullptr;
    std::string mark;
    if (p.lowered && parent) {
      mark = fmt::format("  <- lowered here (parent {}: soft {} hard {})", parent->pid, show(parent->memlock, false),
                         show(parent->memlock, true));
    }
    fmt::print("{:>8}  {:<16}  {:>6}  {:<12}  {:<12}  {:<10}  {:<8}{}\n", p.pid, escape_line(p.comm, 16),
               p.uid ? std::to_string(*p.uid) : "?", show(p.memlock, false), show(p.memlock, true),
               other(p, parent, rlimit_kind::stack), other(p, parent, rlimit_kind::nofile), mark);
    if (!p.memlock) fmt::print("{:>8}  limits unreadable: {}\n", "", p.memlock.error().message());
  }
  if (chain.back().pid != 1 && chain.back().ppid > 0) {
    fmt::print("(chain ends at pid {}: its parent {} could not be read)\n", chain.back().pid, chain.back().ppid);
  }
}

}  // namespace

void declare_chain(command_line& c) {
  auto& o = c.make_options<chain_options>();
  c.about(
      "RLIMIT_MEMLOCK of PID and of each ancestor up to pid 1, marking the process where the limit dropped; beside\n"
      "it the soft RLIMIT_STACK and RLIMIT_NOFILE of each, marked (*) where they changed.\n");
  c.option("--pid", o.pid, "PID", "the process to start from (default: the shell that ran mrcheck)");
  c.flag("--json", o.json, "the chain as JSON on stdout, PID first");
  c.option("--root", o.root_dir, "DIR", "read the processes from a `mrcheck dump` tree instead of this host");
  c.footer("exit: 0, or 2 when PID cannot be read or on a usage error\n");
}

int cmd_chain(const args& a) {
  command_line line("chain");
  declare_chain(line);
  if (auto code = line.parse(a)) return *code;
  const auto& o = line.options<chain_options>();
  sysroot root;
  if (!o.root_dir.empty()) {
    auto r = sysroot::open(o.root_dir);
    if (!r) return line.usage_error(fmt::format("--root: {}", r.error().message()));
    root = *r;
  }
  auto pid = start_pid(line, root);
  if (!pid) return k_exit_usage;
  auto chain = read_chain(root, *pid);
  if (!chain) return line.usage_error(chain.error().message());
  if (o.json) {
    print_json(*chain);
  } else {
    print_text(*chain);
  }
  return k_exit_ok;
}

}  // namespace mrcheck::cli
