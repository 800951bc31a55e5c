// mrcheck probe rdma: the data-plane probe (include/mrcheck/rdma_probe.h), as this user. The SPANK plugin runs it
// (`mrcheck probe rdma --json --verbs-library LIB --timeout T`, the job's environment and limits) as a child and
// parses stdout as report JSON; exit 0 pass, 1 fail, 2 error or usage, 3 skip (probe_protocol.h).
//
// Like `probe mr` it runs the verbs in a child of its own (this binary again, --isolated-child), so a call that
// hangs in a driver or a library that crashes is a verdict too, naming the last call it made.
#include "command_line.h"
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

// The command line as given, before its values are checked (options_from).
struct raw_options {
  std::string sizes, iters, device, verbs_library, config_file, timeout, wait;
  bool json = false, verbose = false, child = false;
};

std::optional<std::string> parse_duration_option(const std::string& name, const std::string& v,
                                                 std::chrono::milliseconds& out) {
  auto d = parse_duration(v);
  if (!d) return d.error().message();
  if (d->count() <= 0) return name + " must be positive";
  out = *d;
  return std::nullopt;
}

// The values checked into `opt`; an error message, or nothing.
std::optional<std::string> options_from(const command_line& line, options& opt) {
  const auto& r = line.options<raw_options>();
  opt.json = r.json;
  opt.verbose = r.verbose;
  opt.child = r.child;
  if (line.given("--sizes")) {
    if (auto err = parse_sizes(r.sizes, opt.req.sizes)) return err;
  }
  if (line.given("--iters")) {
    char* end = nullptr;
    long n = std::strtol(r.iters.c_str(), &end, 10);
    if (end == r.iters.c_str() || *end != '\0' || n < 1 || n > 100000) return "--iters needs a number, 1 to 100000";
    opt.req.iters = static_cast<int>(n);
  }
  if (line.given("--device")) {
    if (r.device.empty() || r.device.size() > 64) return "--device needs a device name (e.g. mlx5_0)";
    opt.req.device = r.device;
  }
  if (line.given("--verbs-library")) {
    if (r.verbs_library.empty()) return "--verbs-library needs a path or library name";
    opt.verbs_library = r.verbs_library;
  }
  if (line.given("--config")) opt.config_file = r.config_file;
  if (line.given("--wait")) {
    if (auto err = parse_duration_option("--wait", r.wait, opt.req.wait)) return err;
  }
  if (line.given("--timeout")) {
    if (auto err = parse_duration_option("--timeout", r.timeout, opt.timeout.emplace())) return err;
  }
  return std::nullopt;
}

}  // namespace

void declare_probe_rdma(command_line& c) {
  auto& o = c.make_options<raw_options>();
  c.about(
      "What ibv_rc_pingpong and ib_write_bw tell, as this user: on each ACTIVE port of each RDMA device, two RC\n"
      "queue pairs of this process connected to each other (RoCE: the GID the table offers, RoCE v2 IPv4 first;\n"
      "InfiniBand: the LID) through INIT/RTR/RTS, then a send/recv ping-pong and RDMA writes of each size, every\n"
      "byte verified; latency and bandwidth reported. A failure names its step and cause: a port DOWN, an empty\n"
      "GID table, ibv_modify_qp's errno, a completion's IBV_WC_* status, a completion that never came. In a job\n"
      "step of two nodes or more (SLURM_STEP_NODELIST, SLURM_NODEID, SLURM_JOB_ID, SLURM_STEP_ID; task 0 of the\n"
      "node), also node k with node k+1 of the step, their addresses exchanged as MUNGE credentials of the job's\n"
      "user (munged of slurm.conf's AuthInfo). Check: data_plane.\n");
  c.option("--sizes", o.sizes, "LIST", "message sizes, comma separated (default 4K,1M; each 1 byte to 64M)");
  c.option("--iters", o.iters, "N", "messages per size and direction (default 1 MiB / size, within 4..1000)");
  c.option("--device", o.device, "NAME", "only this device (default: every device, or those NCCL_IB_HCA names)");
  c.option("--verbs-library", o.verbs_library, "PATH",
           "libibverbs to load (default: verbs_library= of the config, libibverbs.so.1)");
  c.flag("--json", o.json, "report JSON on stdout: {\"verdict\",\"checks\":[...],\"probe\":{...}}");
  c.option("--wait", o.wait, "DURATION",
           "the deadline of each completion (default 2s); a pair between nodes waits six times as long (3s to 12s) "
           "for its peer and each of its answers");
  c.option("--config", o.config_file, "FILE",
           "mrcheck.conf to read (default " MRCHECK_DEFAULT_CONFIG " when it exists)");
  c.option("--timeout", o.timeout, "DURATION",
           "kill the probe's child after DURATION (default: the config's probe_timeout less a tenth, 27s); a hang "
           "or a crash of the child is a verdict");
  c.flag("-v,--verbose", o.verbose, "each port's line, and every call as it is made, on stderr");
  c.flag("--isolated-child", o.child, "internal: run the probe in this process", shown::hidden);
  c.footer("exit: 0 pass, 1 fail, 2 error or usage, 3 skip (no RDMA device: nothing was tested)\n");
}

int cmd_probe_rdma(const args& a) {
  command_line line("probe rdma");
  declare_probe_rdma(line);
  if (auto code = line.parse(a)) return *code;
  options opt;
  if (auto err = options_from(line, opt)) return usage_error(*err);
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
