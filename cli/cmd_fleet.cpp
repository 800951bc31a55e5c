// mrcheck fleet [--json] [--rules FILE] PATH...: many nodes' stacks side by side (include/mrcheck/fleet.h).
//
// PATH is a report file (`mrcheck report --json`, `mrcheck-prolog --json`, a report_dir file), a directory of
// them, or a `mrcheck dump` tree (or a directory of trees). Files are opened without following symlinks, must be
// regular and at most 16 MiB; anything else is skipped with a line. Nothing in them is executed: a dump tree is
// read through a sysroot with no dlopen. The newest report of a node wins. Files are parsed on several threads.
//
// Exit: 0 the fleet agrees or its outliers pass, 1 an outlier fails a check its difference matters for, 2 usage
// error or no report with a stack.
#include "command_line.h"

#include <mrcheck/check_registry.h>
#include <mrcheck/fleet.h>
#include <mrcheck/judge_node.h>
#include <mrcheck/matrix.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

namespace mrcheck::cli {

namespace {

constexpr std::size_t k_max_report = 16 << 20;
constexpr std::size_t k_max_skip_lines = 20;

struct input {
  std::string path;
  bool tree = false;
};

struct parsed {
  std::optional<fleet_node> node;
  std::string skipped;  // why, when no node
};

bool is_dump_tree(const std::string& dir) {
  struct stat sb {};
  if (::lstat((dir + "/MRCHECK_DUMP").c_str(), &sb) == 0 && S_ISREG(sb.st_mode)) return true;
  struct stat p {
  }, s{};
  return ::lstat((dir + "/proc").c_str(), &p) == 0 && S_ISDIR(p.st_mode) && ::lstat((dir + "/sys").c_str(), &s) == 0 &&
         S_ISDIR(s.st_mode);
}

std::string stem(const std::string& path) {
  std::string b = path.substr(path.find_last_of('/') + 1);
  if (b.ends_with(".json")) b.resize(b.size() - 5);
  return b;
}

parsed read_report(const std::string& path) {
  parsed out;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    out.skipped = errno == ELOOP ? "a symlink" : status::from_errno("open", errno).message();
    return out;
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > static_cast<off_t>(k_max_report)) {
    ::close(fd);
    out.skipped = "not a regular file of at most 16 MiB";
    return out;
  }
  std::string text(static_cast<std::size_t>(sb.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  auto n = fleet_node_from_json(text, stem(path));
  if (!n) {
    out.skipped = n.error().message();
    return out;
  }
  n->mtime = sb.st_mtim.tv_sec;
  out.node = std::move(*n);
  return out;
}

parsed read_tree(const std::string& dir, const matrix_rules& rules) {
  parsed out;
  auto root = sysroot::open(dir);
  if (!root) {
    out.skipped = root.error().message();
    return out;
  }
  // What mrcheck-prolog would have judged on that node (prolog_selection(), no site config: the fleet compares
  // stacks and the checks their differences matter for). A tree brings no clock: its boot time is dropped.
  judge_options jo;
  jo.selection = prolog_selection();
  jo.load_libraries = false;  // a tree's libraries.json, never a dlopen
  node_judgement j = judge_node(*root, rules, jo);
  const node_facts& f = j.facts;
  const report& rep = j.rep;
  fleet_node n;
  n.fp = std::move(j.fp);
  n.fp.boot_time.reset();
  n.name = f.hostname_status ? f.hostname : escape_line(stem(dir), 64);
  for (const auto& c : rep.checks) {
    if (c.result == verdict::fail) n.failing[c.id] = escape_line(c.summary, 200);
  }
  out.node = std::move(n);
  return out;
}

// PATH -> the inputs it holds (one level of a directory).
void expand(const std::string& path, std::vector<input>& in,
            std::vector<std::pair<std::string, std::string>>& skipped) {
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) {
    skipped.emplace_back(path, status::from_errno("stat", errno).message());
    return;
  }
  if (S_ISREG(sb.st_mode)) {
    in.push_back({path, false});
    return;
  }
  if (!S_ISDIR(sb.st_mode)) {
    skipped.emplace_back(path, S_ISLNK(sb.st_mode) ? "a symlink" : "not a file or directory");
    return;
  }
  if (is_dump_tree(path)) {
    in.push_back({path, true});
    return;
  }
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    skipped.emplace_back(path, status::from_errno("opendir", errno).message());
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || n.starts_with(".")) continue;
    names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string p = path + (path.ends_with("/") ? "" : "/") + n;
    struct stat es {};
    if (::lstat(p.c_str(), &es) != 0) continue;
    if (S_ISDIR(es.st_mode)) {
      if (is_dump_tree(p)) in.push_back({p, true});
      continue;
    }
    if (S_ISREG(es.st_mode) && n.ends_with(".json")) {
      in.push_back({p, false});
    } else if (!S_ISREG(es.st_mode)) {
      skipped.emplace_back(p, S_ISLNK(es.st_mode) ? "a symlink" : "not a regular file");
    }
  }
}

struct fleet_options {
  bool json = false;
  std::string rules_file;
  std::vector<std::string> paths;
};

// Every input read or judged, on up to 8 threads (one per 64 inputs), in the inputs' order.
std::vector<parsed> read_all(const std::vector<input>& in, const matrix_rules& rules) {
  std::vector<parsed> out(in.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < in.size();) {
      out[i] = in[i].tree ? read_tree(in[i].path, rules) : read_report(in[i].path);
    }
  };
  std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  threads = std::min(threads, std::max<std::size_t>(in.size() / 64, 1));
  std::vector<std::thread> pool;
  try {
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // Fewer threads: this one does the rest.
  }
  work();
  for (auto& t : pool) t.join();
  return out;
}

// The newest report of each node; what was skipped is added to `skipped`, the reports read counted.
std::map<std::string, fleet_node> newest_by_node(const std::vector<input>& in, std::vector<parsed>& out,
                                                 std::vector<std::pair<std::string, std::string>>& skipped,
                                                 std::size_t& reports) {
  std::map<std::string, fleet_node> by_node;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!out[i].node) {
      skipped.emplace_back(in[i].path, out[i].skipped);
      continue;
    }
    ++reports;
    auto& n = *out[i].node;
    auto it = by_node.find(n.name);
    if (it == by_node.end() || it->second.mtime <= n.mtime) by_node[n.name] = std::move(n);
  }
  return by_node;
}

void print_skipped(const std::vector<std::pair<std::string, std::string>>& skipped) {
  for (std::size_t i = 0; i < skipped.size() && i < k_max_skip_lines; ++i) {
    fmt::print(stderr, "mrcheck: fleet: {}: skipped: {}\n", escape_line(skipped[i].first, 200),
               escape_line(skipped[i].second, 200));
  }
  if (skipped.size() > k_max_skip_lines) {
    fmt::print(stderr, "mrcheck: fleet: {} more skipped\n", skipped.size() - k_max_skip_lines);
  }
}

}  // namespace

void declare_fleet(command_line& c) {
  auto& o = c.make_options<fleet_options>();
  c.about(
      "PATH is a report file (`mrcheck report --json`, `mrcheck-prolog --json`, a report_dir file), a directory of\n"
      "them, or a `mrcheck dump` tree (or a directory of trees); the newest report of a node wins.\n");
  c.flag("--json", o.json, "the comparison as JSON on stdout");
  c.option("--rules", o.rules_file, "FILE",
           "rules the dump trees are judged by (default /etc/slurm/mrcheck-rules.conf when it exists, else the "
           "built-in ones)");
  c.positional("PATH", o.paths, "PATH", "a report, a dump tree or a directory of either", true, shown::required);
  c.footer(
      "exit: 0 the fleet agrees or its outliers pass, 1 an outlier fails a check its difference matters for,\n"
      "2 usage error or no report with a stack\n");
}

int cmd_fleet(const args& a) {
  command_line line("fleet");
  declare_fleet(line);
  if (auto code = line.parse(a)) return *code;
  const auto& o = line.options<fleet_options>();
  auto rules = load_matrix_rules_or_default(o.rules_file);
  if (!rules) {
    fmt::print(stderr, "mrcheck: fleet: rules: {}\n", rules.error().message());
    return k_exit_usage;
  }
  std::vector<input> in;
  std::vector<std::pair<std::string, std::string>> skipped;
  for (const auto& p : o.paths) expand(p, in, skipped);
  std::vector<parsed> out = read_all(in, *rules);
  std::size_t reports = 0;
  std::map<std::string, fleet_node> by_node = newest_by_node(in, out, skipped, reports);
  print_skipped(skipped);
  if (by_node.empty()) {
    fmt::print(stderr, "mrcheck: fleet: no report with a stack in {} input(s)\n", in.size());
    return k_exit_usage;
  }
  std::vector<fleet_node> nodes;
  nodes.reserve(by_node.size());
  for (auto& [_, n] : by_node) nodes.push_back(std::move(n));
  fleet_result r = compare_fleet(nodes);
  if (o.json) {
    nlohmann::json j = fleet_json(r);
    j["reports"] = reports;
    j["skipped"] = skipped.size();
    fmt::print("{}\n", j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", fleet_text(r));
  }
  return r.outlier_fails ? k_exit_fail : k_exit_ok;
}

}  // namespace mrcheck::cli
