#include <mrcheck/build_config.h>
#include <mrcheck/config.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>

#define MRCHECK_HELPER_DEFAULT MRCHECK_INSTALL_BINDIR "/mrcheck"
#define MRCHECK_ADMIN_HELPER_DEFAULT MRCHECK_INSTALL_SBINDIR "/mrcheck-prolog"

namespace mrcheck {

namespace {

constexpr std::size_t k_max_list = 128;

result<bool> parse_bool(std::string_view v) {
  if (v == "yes" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "false" || v == "0" || v == "off") return false;
  return status::error(fmt::format("'{}' is not yes or no", escape_line(v, 64)));
}

result<fail_policy> parse_policy(std::string_view v) {
  if (v == "fail") return fail_policy::fail;
  if (v == "warn") return fail_policy::warn;
  return status::error(fmt::format("'{}' is not fail or warn", escape_line(v, 64)));
}

result<std::string> parse_abs_path(std::string_view v) {
  if (v.empty() || v.front() != '/')
    return status::error(fmt::format("'{}' is not an absolute path", escape_line(v, 128)));
  if (v.size() > 4096) return status::error("path longer than 4096 bytes");
  for (unsigned char c : v) {
    if (c < 0x20 || c == 0x7f) return status::error("path contains a control character");
  }
  return std::string(v);
}

// Each key's parser: sets its field from the value, or says why not (apply_config_item names key and origin).
template <bool config::*M>
status set_bool(config& c, std::string_view v) {
  auto b = parse_bool(v);
  if (!b) return b.error();
  c.*M = *b;
  return status::ok();
}

template <fail_policy config::*M>
status set_policy(config& c, std::string_view v) {
  auto p = parse_policy(v);
  if (!p) return p.error();
  c.*M = *p;
  return status::ok();
}

template <std::chrono::milliseconds config::*M>
status set_duration(config& c, std::string_view v) {
  auto d = parse_duration(v);
  if (!d) return d.error();
  c.*M = *d;
  return status::ok();
}

// An absolute path; empty allowed (off, or the built-in) unless Required.
template <std::string config::*M, bool Required>
status set_path(config& c, std::string_view v) {
  if (v.empty() && !Required) {
    c.*M = {};
    return status::ok();
  }
  auto p = parse_abs_path(v);
  if (!p) return p.error();
  c.*M = std::move(*p);
  return status::ok();
}

status set_default_checks(config& c, std::string_view v) {
  if (v.empty()) {
    c.default_checks = {};
    return status::ok();
  }
  auto g = parse_check_groups(v);
  if (!g) return g.error();
  c.default_checks = g->off ? check_groups{} : *g;
  return status::ok();
}

status set_memlock_min(config& c, std::string_view v) {
  auto b = parse_bytes(v);
  if (!b) return b.error();
  c.memlock_min = *b;
  return status::ok();
}

// A finite ceiling: `unlimited` is the one value known to break NCCL (include/mrcheck/limit_chain.h).
status set_stack_max(config& c, std::string_view v) {
  auto b = parse_bytes(v);
  if (!b) return b.error();
  if (*b == k_unlimited) return status::error("must be finite: an unlimited stack is what this check refuses");
  if (*b < 65536) return status::error("below 64K: no program starts");
  c.stack_max = *b;
  return status::ok();
}

status set_nofile_min(config& c, std::string_view v) {
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n == 0 || n > (1u << 30)) {
    return status::error(fmt::format("'{}' is not a number of files from 1 to 1073741824", escape_line(v, 32)));
  }
  c.nofile_min = n;
  return status::ok();
}

status set_verbs_library(config& c, std::string_view v) {
  if (v.empty() || v.size() > 4096) return status::error("empty or too long");
  if (v.find('/') != std::string_view::npos) {
    auto p = parse_abs_path(v);
    if (!p) return p.error();
  }
  c.verbs_library = std::string(v);
  return status::ok();
}

status set_container_plugins(config& c, std::string_view v) {
  if (v.size() > 1024 || v.find('/') != std::string_view::npos)
    return status::error("file names only, at most 1024 bytes");
  c.container_plugins = std::string(v);
  return status::ok();
}

status set_admin_comment_max(config& c, std::string_view v) {
  auto b = parse_bytes(v);
  if (!b) return b.error();
  // Slurm keeps AdminComment in a TEXT column (65535 bytes); below 256 not even one step record fits.
  if (*b < 256 || *b > 65535) return status::error("must be between 256 and 65535 bytes");
  c.admin_comment_max = *b;
  return status::ok();
}

status set_revalidate(config& c, std::string_view v) {
  if (v != "on_change" && v != "always" && v != "never")
    return status::error(fmt::format("'{}' is not on_change, always or never", escape_line(v, 32)));
  c.revalidate = std::string(v);
  return status::ok();
}

// The one table of keys: the parser (apply_config_item), the docs (--help, the man pages through man/mangen.cpp;
// README.md's table and etc/mrcheck.conf are checked against it by config_keys_docs_test), and the defaults:
// config's member initializers equal each default applied through its parser (config_test).
constexpr std::array<config_key_doc, 24> k_keys{{
    {"default_checks", "", "checks run on every step even without --mr-check (memlock, mr, nccl, rdma, all)",
     set_default_checks},
    {"memlock_min", "unlimited", "smallest RLIMIT_MEMLOCK a task may start with (bytes, K/M/G/T, or unlimited)",
     set_memlock_min},
    {"enforce", "no",
     "raise the task's memlock limit (hard and soft) to memlock_min as root before it starts; bring its soft "
     "stack and open-files limits within stack_max and nofile_min",
     set_bool<&config::enforce>},
    {"stack_max", "1G",
     "largest soft RLIMIT_STACK a task may start with (bytes, K/M/G/T; finite: unlimited crashes NCCL 2.27)",
     set_stack_max},
    {"nofile_min", "1024", "smallest soft RLIMIT_NOFILE (open files) a task may start with", set_nofile_min},
    {"on_fail", "fail", "fail: a failed check ends the task with one line on stderr; warn: print it and go on",
     set_policy<&config::on_fail>},
    {"on_error", "warn", "what to do when the checker itself breaks (probe crash, unreadable facts): fail or warn",
     set_policy<&config::on_error>},
    {"drain_site", "no",
     "mrcheck-prolog also drains for a fail the site fixes (slurm.conf); node fails always drain, job fails never",
     set_bool<&config::drain_site>},
    {"allow_user_off", "yes", "whether users may turn the site's default_checks off with --mr-check=off",
     set_bool<&config::allow_user_off>},
    {"probe_timeout", "30s", "hard timeout of the registration probe child, and of the data-plane probe's",
     set_duration<&config::probe_timeout>},
    {"nccl_timeout", "60s", "hard timeout of the 2-rank NCCL test", set_duration<&config::nccl_timeout>},
    {"verbs_library", "libibverbs.so.1", "libibverbs to dlopen in probes (name or absolute path)", set_verbs_library},
    {"helper", MRCHECK_HELPER_DEFAULT, "absolute path of the mrcheck binary the plugin runs as probe child",
     set_path<&config::helper, true>},
    {"container_plugins", "spank_pyxis.so",
     "SPANK plugins (file names, comma-separated) that move tasks into containers", set_container_plugins},
    {"container_wait", "10m",
     "how long a task listed before its container plugin is watched for entering its container",
     set_duration<&config::container_wait>},
    {"report_dir", "", "directory for per-node JSON reports (empty: none)", set_path<&config::report_dir, false>},
    {"state_dir", "/var/lib/mrcheck", "where mrcheck-prolog keeps drains/resumes slurmctld has not acknowledged",
     set_path<&config::state_dir, true>},
    {"rules", "", "driver/firmware matrix rules for mrcheck-prolog (empty: the built-in defaults)",
     set_path<&config::rules, false>},
    {"prometheus_textfile", "", "node_exporter textfile mrcheck-prolog writes (empty: none)",
     set_path<&config::prometheus_textfile, false>},
    {"revalidate", "on_change",
     "when mrcheck-prolog runs the registration probe and the NCCL pair: on_change (once per new stack), always, "
     "never",
     set_revalidate},
    {"admin_comment", "no", "write each checked step's verdict for all its nodes into the job's AdminComment (sacct)",
     set_bool<&config::admin_comment>},
    {"admin_helper", MRCHECK_ADMIN_HELPER_DEFAULT,
     "absolute path of mrcheck-prolog, run as root to collect and write the step's record",
     set_path<&config::admin_helper, true>},
    {"admin_comment_max", "4096",
     "bytes of AdminComment mrcheck may fill; older steps are summarised first (at most 65535)", set_admin_comment_max},
    {"report_timeout", "10s", "how long node 0 waits for the other nodes' verdicts before it reports them as no report",
     set_duration<&config::report_timeout>},
}};

}  // namespace

std::string check_groups::to_string() const {
  if (off) return "off";
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ',';
    s += name;
  };
  add(memlock, "memlock");
  add(mr, "mr");
  add(nccl, "nccl");
  add(rdma, "rdma");
  add(verbose, "verbose");
  return s;
}

result<check_groups> parse_check_groups(std::optional<std::string_view> list) {
  check_groups g;
  if (!list) {
    g.memlock = g.mr = true;
    return g;
  }
  std::string_view l = *list;
  if (l.size() > k_max_list) return status::error(fmt::format("check list is longer than {} bytes", k_max_list));
  for (unsigned char c : l) {
    if (!(std::islower(c) || c == ',' || c == '_')) {
      return status::error(
          fmt::format("check list '{}' has a character other than a-z, ',' and '_'", escape_line(l, 64)));
    }
  }
  bool any_word = false;
  while (!l.empty()) {
    auto comma = l.find(',');
    std::string_view w = l.substr(0, comma);
    l = comma == std::string_view::npos ? std::string_view{} : l.substr(comma + 1);
    if (w.empty()) continue;
    any_word = true;
    if (w == "memlock") {
      g.memlock = true;
    } else if (w == "mr") {
      g.mr = true;
    } else if (w == "nccl") {
      g.nccl = true;
    } else if (w == "rdma") {
      g.rdma = true;
    } else if (w == "all") {
      g.memlock = g.mr = g.nccl = g.rdma = true;
    } else if (w == "off" || w == "none") {
      g.off = true;
    } else if (w == "verbose") {
      g.verbose = true;
    } else {
      return status::error(
          fmt::format("unknown check '{}' (known: memlock, mr, nccl, rdma, all, off, verbose)", escape_line(w, 32)));
    }
  }
  if (g.off && g.any()) return status::error("'off' cannot be combined with a check");
  if (!any_word) {
    // "--mr-check=" with an empty value, or only commas: the bare option's meaning.
    bool verbose = g.verbose;
    g = check_groups{};
    g.memlock = g.mr = true;
    g.verbose = verbose;
  } else if (!g.any() && !g.off) {
    // "verbose" alone: the default checks, verbosely.
    g.memlock = g.mr = true;
  }
  return g;
}

status apply_config_item(config& c, std::string_view item, std::string_view where) {
  auto eq = item.find('=');
  auto fail = [&](std::string_view what) { return status::error(fmt::format("{}: {}", where, what)); };
  if (eq == std::string_view::npos) {
    return fail(fmt::format("'{}' is not key=value", escape_line(item, 64)));
  }
  std::string_view key = trim_space(item.substr(0, eq));
  std::string_view value = trim_space(item.substr(eq + 1));
  if (key == "config") return fail("config= is only valid as a plugstack.conf argument");
  auto row = std::find_if(k_keys.begin(), k_keys.end(), [&](const config_key_doc& k) { return k.key == key; });
  if (row == k_keys.end()) return fail(fmt::format("unknown key '{}'", escape_line(key, 64)));
  if (auto s = row->apply(c, value); !s) return fail(fmt::format("{}: {}", key, s.message()));
  return status::ok();
}

status load_config_file(config& c, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return status::from_errno(fmt::format("open config {}", path), errno ? errno : ENOENT);
  // The cap bounds the read itself: a one-line multi-GiB file or config=/dev/zero is refused after 1 MiB + 1
  // bytes, not held in memory first (tests/fuzz/README.md, finding F6).
  constexpr std::size_t k_max_config = 1 << 20;
  std::string text;
  // A regular file's size is known (file_size() fails for anything else): refuse one past the cap unread, and
  // read the rest into one allocation. The loop below still bounds a file that grows meanwhile, a pipe or a device.
  std::error_code ec;
  if (auto size = std::filesystem::file_size(path, ec); !ec) {
    if (size > k_max_config) return status::error(fmt::format("{}: larger than 1 MiB", path));
    text.reserve(static_cast<std::size_t>(size));
  }
  char chunk[16384];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > k_max_config) return status::error(fmt::format("{}: larger than 1 MiB", path));
  }
  if (in.bad()) return status::from_errno(fmt::format("read config {}", path), errno ? errno : EIO);
  int lineno = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view l = std::string_view(text).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    ++lineno;
    auto hash = l.find('#');
    if (hash != std::string_view::npos) l = l.substr(0, hash);
    l = trim_space(l);
    if (l.empty()) continue;
    auto s = apply_config_item(c, l, fmt::format("{}:{}", path, lineno));
    if (!s) return s;
  }
  c.config_file = path;
  return status::ok();
}

result<config> parse_config_args(std::span<const std::string_view> args, std::string_view origin) {
  config c;
  int config_index = -1;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = trim_space(args[i]);
    if (a.rfind("config=", 0) == 0) {
      if (config_index >= 0) {
        return status::error(fmt::format("{} argument {}: config= given twice", origin, i + 1));
      }
      config_index = static_cast<int>(i);
      auto p = parse_abs_path(trim_space(a.substr(7)));
      if (!p) return status::error(fmt::format("{} argument {}: config: {}", origin, i + 1, p.error().message()));
      auto s = load_config_file(c, *p);
      if (!s) return s;
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == config_index) continue;
    std::string_view a = trim_space(args[i]);
    if (a.empty()) continue;
    auto s = apply_config_item(c, a, fmt::format("{} argument {}", origin, i + 1));
    if (!s) return s;
  }
  return c;
}

std::span<const config_key_doc> config_keys() { return k_keys; }

std::string config::helper_path() const { return helper.empty() ? std::string(MRCHECK_HELPER_DEFAULT) : helper; }

std::string config::admin_helper_path() const {
  return admin_helper.empty() ? std::string(MRCHECK_ADMIN_HELPER_DEFAULT) : admin_helper;
}

}  // namespace mrcheck
