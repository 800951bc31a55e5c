// Site policy. One parser serves plugstack.conf arguments, /etc/slurm/mrcheck.conf and command-line flags:
// defaults first, every value validated, an unknown key is an error naming file:line (so a typo in a
// `required` plugstack line fails at slurmd start, where an admin sees it, not at job time).
#pragma once

#include <mrcheck/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// What `--mr-check=LIST` and `default_checks=` select. Groups: memlock, mr, nccl, rdma, all, off; flag: verbose.
struct check_groups {
  bool memlock = false;
  bool mr = false;
  bool nccl = false;
  bool rdma = false;  // the data-plane probe (`mrcheck probe rdma`)
  bool verbose = false;
  bool off = false;  // the user asked for no checks (refused when allow_user_off=no and the site has defaults)

  bool any() const { return memlock || mr || nccl || rdma; }
  std::string to_string() const;  // canonical "memlock,mr" form; "off"; "" when nothing
  bool operator==(const check_groups&) const = default;
};

// Parses LIST. `std::nullopt` is the bare option (`--mr-check` without "="), which means memlock,mr.
// Untrusted input: bounded to 128 bytes, only [a-z,_] accepted, each word must be known, `off` cannot be
// combined with a group. Errors quote the offending word escaped.
result<check_groups> parse_check_groups(std::optional<std::string_view> list);

enum class fail_policy { fail, warn };

struct config {
  check_groups default_checks;                       // default_checks=
  std::uint64_t memlock_min = UINT64_MAX;            // memlock_min= bytes or unlimited (default: unlimited)
  bool enforce = false;                              // enforce=yes|no
  std::uint64_t stack_max = 1ull << 30;              // stack_max= bytes, finite (limit_chain.h); default 1G
  std::uint64_t nofile_min = 1024;                   // nofile_min= open files a task may start with
  fail_policy on_fail = fail_policy::fail;           // on_fail=fail|warn
  fail_policy on_error = fail_policy::warn;          // on_error=fail|warn: when the checker itself breaks
  bool drain_site = false;                           // drain_site=yes|no: mrcheck-prolog drains for `site` fails too
  bool allow_user_off = true;                        // allow_user_off=yes|no
  std::chrono::milliseconds probe_timeout{30000};    // probe_timeout=30s
  std::chrono::milliseconds nccl_timeout{60000};     // nccl_timeout=60s
  std::chrono::milliseconds container_wait{600000};  // container_wait=10m: how long the watcher waits for a task
                                                     //   to enter its container (docs/containers.md)
  std::string container_plugins = "spank_pyxis.so";  // container_plugins= SPANK plugins that move tasks into
                                                     //   containers (docs/containers.md)
  std::string verbs_library = "libibverbs.so.1";     // verbs_library= name or absolute path for dlopen
  std::string helper;                                // helper= absolute path of the mrcheck binary the plugin execs
                                                     //   ("" = <bindir>/mrcheck of this build; see helper_path())
  std::string report_dir;                            // report_dir= spool dir for per-node JSON reports ("" = off)
  std::string state_dir = "/var/lib/mrcheck";        // state_dir= prolog's pending drain/resume state
  std::string revalidate = "on_change";              // revalidate=on_change|always|never (prolog/revalidate.h)
  std::string rules;                                 // rules= matrix rules file for mrcheck-prolog
  std::string prometheus_textfile;                   // prometheus_textfile= node_exporter textfile ("" = off)
  bool admin_comment = false;                        // admin_comment=yes|no: the step's record in AdminComment
  std::string admin_helper;                          // admin_helper= absolute path of mrcheck-prolog, run as root
                                                     //   to write it ("" = <sbindir>/mrcheck-prolog of this build)
  std::uint64_t admin_comment_max = 4096;            // admin_comment_max= bytes of AdminComment mrcheck may fill
  std::chrono::milliseconds report_timeout{10000};   // report_timeout= how long node 0 waits for other nodes
  std::string config_file;                           // the file this config was read from, if any

  std::string helper_path() const;
  std::string admin_helper_path() const;
  bool operator==(const config&) const = default;
};

// Applies one "key=value" item. `where` names its origin for errors ("/etc/slurm/mrcheck.conf:12",
// "plugstack.conf argument 3"). Unknown key, missing '=', or a bad value is an error.
status apply_config_item(config& c, std::string_view item, std::string_view where);

// Reads a config file: one key=value per line, '#' starts a comment, blank lines ignored, whitespace around
// key and value trimmed. The first bad line is the error, named path:line. A missing file is an error.
status load_config_file(config& c, const std::string& path);

// For plugstack.conf arguments and similar lists: if an item is config=PATH that file is loaded first, then
// the other items are applied in order (they override the file). `origin` prefixes error locations.
result<config> parse_config_args(std::span<const std::string_view> args, std::string_view origin);

// Every key (src/config/config.cpp, k_keys): its default as text, its meaning (for --help, the man pages, the
// README table and etc/mrcheck.conf) and its parser, which apply_config_item() calls with the trimmed value.
struct config_key_doc {
  std::string_view key;
  std::string_view default_value;
  std::string_view meaning;
  status (*apply)(config& c, std::string_view value) = nullptr;  // sets the field, or says why the value is bad
};
std::span<const config_key_doc> config_keys();

}  // namespace mrcheck
