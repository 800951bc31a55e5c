// mrcheck probe rdma: the data-plane probe (include/mrcheck/rdma_probe.h), as this user. The SPANK plugin runs it
// (`mrcheck probe rdma --json --verbs-library LIB --timeout T`, the job's environment and limits) as a child and
// parses stdout as report JSON; exit 0 pass, 1 fail, 2 error or usage, 3 skip (probe_protocol.h).
//
// Like `probe mr` it runs the verbs in a child of its own (this binary again, --isolated-child), so a call that
// hangs in a driver or a library that crashes is a verdict too, naming the last call it made.
#include "commands.h"
#include "isolated_child.h"

#include <mrcheck/build_config.h>
#include <mrcheck/check.h>
#include <mrcheck/child.h>
#include <mrcheck/config.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/probe_protocol.h>
#include <mrcheck/rdma_probe.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace mrcheck::cli {

namespace {

constexpr std::string_view k_help =
    "usage: mrcheck probe rdma [--sizes LIST] [--iters N] [--device NAME] [--verbs-library PATH] [--json]\n"
    "                          [--wait DURATION] [--config FILE] [--timeout DURATION] [--verbose]\n"
    "\n"
    "What ibv_rc_pingpong and ib_write_bw tell, as this user: on each ACTIVE port of each RDMA device, two RC\n"
    "queue pairs of this process connected to each other (RoCE: the GID the table offers, RoCE v2 IPv4 first;\n"
    "InfiniBand: the LID) through INIT/RTR/RTS, then a send/recv ping-pong and RDMA writes of each size, every\n"
    "byte verified; latency and bandwidth reported. A failure names its step and cause: a port DOWN, an empty\n"
    "GID table, ibv_modify_qp's errno, a completion's IBV_WC_* status, a completion that never came. In a job\n"
    "step of two nodes or more (SLURM_STEP_NODELIST, SLURM_NODEID, SLURM_JOB_ID, SLURM_STEP_ID; task 0 of the\n"
    "node), also node k with node k+1 of the step, their addresses exchanged as MUNGE credentials of the job's\n"
    "user (munged of slurm.conf's AuthInfo). Check: data_plane.\n"
    "\n"
    "  --sizes LIST          message sizes, comma separated (default 4K,1M; each 1 byte to 64M)\n"
    "  --iters N             messages per size and direction (default 1 MiB / size, within 4..1000)\n"
    "  --device NAME         only this device (default: every device, or those NCCL_IB_HCA names)\n"
    "  --verbs-library PATH  libibverbs to load (default: verbs_library= of the config, libibverbs.so.1)\n"
    "  --wait DURATION       the deadline of each completion (default 2s); a pair between nodes waits six\n"
    "                        times as long (3s to 12s) for its peer and each of its answers\n"
    "  --json                report JSON on stdout: {\"verdict\",\"checks\":[...],\"probe\":{...}}\n"
    "  --config FILE         mrcheck.conf to read (default " MRCHECK_DEFAULT_CONFIG
    " when it exists)\n"
    "  --timeout DURATION    kill the probe's child after DURATION (default: the config's probe_timeout less a\n"
    "                        tenth, 27s); a hang or a crash of the child is a verdict\n"
    "  --verbose             each port's line, and every call as it is made, on stderr\n"
    "\n"
    "exit: 0 pass, 1 fail, 2 error or usage, 3 skip (no RDMA device: nothing was tested)\n";

struct options {
  rdma_probe_request req;
  std::optional<std::string> verbs_library;
  bool json = false;
  bool verbose = false;
  std::optional<std::string> config_file;
  std::optional<std::chrono::milliseconds> timeout;
  bool child = false;
};

int usage_error(const std::string& msg) {
  fmt::print(stderr, "mrcheck: probe rdma: {}\n", msg);
  return k_exit_usage;
}

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u;
}

void print(const check_result& c, bool json, const nlohmann::json& probe, bool verbose) {
  report r;
  r.checks.push_back(c);
  if (json) {
    nlohmann::json j = report_to_json(r);
    if (c.result == verdict::skip) j["verdict"] = "skip";
    j["probe"] = probe;
    fmt::print("{}\n", j.dump());
    return;
  }
  std::string line = fmt::format("mrcheck: {}: {}: {}", c.id, upper(to_string(c.result)), escape_line(c.summary, 2000));
  if (!c.hint.empty() && c.result != verdict::pass && c.result != verdict::skip) {
    line += fmt::format(" (fix: {})", escape_line(c.hint, 1000));
  }
  fmt::print("{}\n", line);
  if (!verbose) return;
  std::string_view d = c.detail;
  while (!d.empty()) {
    auto nl = d.find('\n');
    fmt::print(stderr, "mrcheck: {}:   {}\n", c.id, escape_line(d.substr(0, nl), 1000));
    if (nl == std::string_view::npos) break;
    d.remove_prefix(nl + 1);
  }
}

int exit_code(verdict v) {
  switch (v) {
    case verdict::skip: return k_probe_exit_skip;
    case verdict::fail: return k_probe_exit_fail;
    case verdict::error: return k_probe_exit_error;
    default: return k_probe_exit_pass;
  }
}

// The step's nodes from Slurm's variables of the task, when it is task 0 of its node in a step of two nodes or
// more (a malformed value: no pairs, said in the probe's notes by the caller).
std::optional<rdma_peer_request> peers_from_env(std::chrono::milliseconds wait) {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  const char* node = std::getenv("SLURM_NODEID");
  const char* list = std::getenv("SLURM_STEP_NODELIST");
  const char* local = std::getenv("SLURM_LOCALID");
  if (!job || !step || !node || !list || (local && std::string_view(local) != "0")) return std::nullopt;
  rdma_peer_request p;
  char* end = nullptr;
  p.job_id = std::strtoull(job, &end, 10);
  if (*end != '\0' || end == job) return std::nullopt;
  p.step_id = std::strtoull(step, &end, 10);
  if (*end != '\0' || end == step) return std::nullopt;
  long n = std::strtol(node, &end, 10);
  auto nodes = expand_nodelist(list);
  if (*end != '\0' || end == node || !nodes || n < 0 || n >= static_cast<long>(nodes->size())) return std::nullopt;
  if (nodes->size() < 2) return std::nullopt;
  p.node_index = static_cast<int>(n);
  p.nodes = std::move(*nodes);
  p.auth = munge_settings_from_slurm_conf();
  // How long a pair waits for its peer node and each of its answers: six completion waits, 3 to 12 s.
  p.meet = std::clamp<std::chrono::milliseconds>(6 * wait, std::chrono::seconds(3), std::chrono::seconds(12));
  return p;
}

int run_here(const options& opt, const std::string& library) {
  stderr_log sink(opt.verbose || opt.child ? log_level::verbose : log_level::info);
  rdma_probe_request req = opt.req;
  if (const char* h = std::getenv("NCCL_IB_HCA"); h != nullptr) req.nccl_ib_hca = std::string(h);
  req.peers = peers_from_env(req.wait);
  rdma_probe_outcome o = run_rdma_probe(req, library, sink);
  check_result c = data_plane_check(o);
  print(c, opt.json, rdma_probe_to_json(o), opt.verbose);
  return exit_code(c.result);
}

int run_isolated(const options& opt, const args& original) {
  auto out = run_self_isolated("rdma", original, *opt.timeout);
  if (!out) return usage_error(out.error().message());
  if (out->exited && out->exit_code != 127) {
    fmt::print("{}", out->out);
    std::string_view err = out->err;
    while (!err.empty()) {
      auto nl = err.find('\n');
      std::string_view line = err.substr(0, nl);
      // The child logs every step at verbose level (for last_call); without --verbose only an error's lines.
      if (opt.verbose || out->exit_code == k_probe_exit_error) {
        fmt::print(stderr, "{}\n", line);
      }
      if (nl == std::string_view::npos) break;
      err.remove_prefix(nl + 1);
    }
    return out->exit_code;
  }
  std::string where = last_call(out->err);
  check_result c;
  c.id = "data_plane";
  c.result = verdict::fail;
  c.summary = fmt::format("the data-plane probe {}{}", out->describe(),
                          where.empty() ? "" : fmt::format(" while calling {}", where));
  c.hint = out->timed_out ? "a verbs call did not return: look at the RDMA stack (dmesg, the rdma_stack check)"
                          : "the verbs library crashed: check that libibverbs and its provider match the kernel";
  c.detail = fmt::format("child: {}\ncause=unknown\n", out->describe());
  print(c, opt.json, {{"isolated", true}, {"outcome", out->describe()}, {"last_call", where}}, opt.verbose);
  return k_exit_fail;
}

std::optional<std::string> parse_sizes(std::string_view list, std::vector<std::uint64_t>& out) {
  out.clear();
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view w = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    auto b = parse_bytes(w);
    if (!b) return b.error().message();
    if (*b == 0 || *b > k_rdma_max_size) return "each size must be between 1 byte and 64M";
    out.push_back(*b);
  }
  if (out.empty() || out.size() > 16) return "--sizes needs 1 to 16 sizes (e.g. 4K,1M)";
  return std::nullopt;
}

// One option at a[i] (and its value); an error message, or nothing.
std::optional<std::string> parse_option(const args& a, std::size_t& i, options& opt) {
  const std::string& arg = a[i];
  auto value = [&]() -> std::optional<std::string> { return i + 1 < a.size() ? std::optional(a[++i]) : std::nullopt; };
  if (arg == "--json") {
    opt.json = true;
  } else if (arg == "--verbose" || arg == "-v") {
    opt.verbose = true;
  } else if (arg == "--isolated-child") {
    opt.child = true;
  } else if (arg == "--sizes") {
    auto v = value();
    if (!v) return "--sizes needs a list (e.g. 4K,1M)";
    return parse_sizes(*v, opt.req.sizes);
  } else if (arg == "--iters") {
    auto v = value();
    char* end = nullptr;
    long n = v ? std::strtol(v->c_str(), &end, 10) : 0;
    if (!v || end == v->c_str() || *end != '\0' || n < 1 || n > 100000) return "--iters needs a number, 1 to 100000";
    opt.req.iters = static_cast<int>(n);
  } else if (arg == "--device") {
    auto v = value();
    if (!v || v->empty() || v->size() > 64) return "--device needs a device name (e.g. mlx5_0)";
    opt.req.device = *v;
  } else if (arg == "--verbs-library") {
    auto v = value();
    if (!v || v->empty()) return "--verbs-library needs a path or library name";
    opt.verbs_library = *v;
  } else if (arg == "--config") {
    auto v = value();
    if (!v) return "--config needs a file";
    opt.config_file = *v;
  } else if (arg == "--timeout" || arg == "--wait") {
    auto v = value();
    if (!v) return arg + " needs a duration (e.g. 2s)";
    auto d = parse_duration(*v);
    if (!d) return d.error().message();
    if (d->count() <= 0) return arg + " must be positive";
    (arg == "--wait" ? opt.req.wait : opt.timeout.emplace()) = *d;
  } else {
    return fmt::format("unknown option '{}' (see mrcheck probe rdma --help)", escape_line(arg, 64));
  }
  return std::nullopt;
}

}  // namespace

int cmd_probe_rdma(const args& a) {
  options opt;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--help" || a[i] == "-h") {
      fmt::print("{}", k_help);
      return k_exit_ok;
    }
    if (auto err = parse_option(a, i, opt)) return usage_error(*err);
  }
  config cfg;
  if (opt.config_file) {
    status st = load_config_file(cfg, *opt.config_file);
    if (!st) return usage_error(st.message());
  } else if (std::error_code ec; std::filesystem::exists(MRCHECK_DEFAULT_CONFIG, ec)) {
    status st = load_config_file(cfg, MRCHECK_DEFAULT_CONFIG);
    if (!st) return usage_error(st.message());
  }
  std::string library = opt.verbs_library ? *opt.verbs_library : cfg.verbs_library;
  if (opt.child) {
    // The parent enforces the deadline; this child must not outlive it (cli/cmd_probe_mr.cpp).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) return k_exit_usage;
    return run_here(opt, library);
  }
  if (!opt.timeout) {
    using std::chrono::milliseconds;
    const milliseconds t = cfg.probe_timeout;
    const milliseconds margin = std::max(t / 10, milliseconds(1000));
    opt.timeout = t > 2 * margin ? t - margin : std::max(t / 2, milliseconds(1));
  }
  return run_isolated(opt, a);
}

}  // namespace mrcheck::cli
