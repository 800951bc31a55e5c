// mrcheck probe mr: register memory the way NCCL does, as this user under this process's limits, and explain the
// errno. The SPANK plugin runs exactly this (`mrcheck probe mr --json`, the job's environment and limits) as a
// child and parses stdout as report JSON; exit 0 pass/warn, 1 fail, 2 error or usage.
//
// The probe always runs in a child of its own (this binary again, --isolated-child) so that a registration that
// hangs or a library that crashes becomes a verdict here too, as the plugin's child runner does from slurmstepd.
// --timeout bounds it; without it the config's probe_timeout (30 s by default) less a tenth does.
#include "command_line.h"
#include "isolated_child.h"

#include <mrcheck/probe_checks.h>
#include <mrcheck/probe_protocol.h>

#include <mrcheck/build_config.h>
#include <mrcheck/check.h>
#include <mrcheck/child.h>
#include <mrcheck/config.h>
#include <mrcheck/fabric.h>
#include <mrcheck/log.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <pwd.h>
#include <sys/prctl.h>

#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <string_view>

namespace mrcheck::cli {

namespace {

struct options {
  std::optional<std::uint64_t> size;
  std::string device;
  std::optional<std::string> verbs_library;
  bool gpu = false;
  bool json = false;
  bool verbose = false;
  std::optional<std::string> config_file;
  std::optional<std::chrono::milliseconds> timeout;
  bool child = false;  // internal: we are the isolated child of --timeout
};

// The command line as given, before its values are checked (options_from).
struct raw_options {
  std::string size, device, verbs_library, config_file, timeout;
  bool gpu = false, json = false, verbose = false, child = false;
};

int usage_error(const std::string& msg) {
  fmt::print(stderr, "mrcheck: probe mr: {}\n", msg);
  return k_exit_usage;
}

// Every check skipped (no device, no library): nothing was tested, which is no pass.
bool nothing_tested(const report& r) {
  return std::all_of(r.checks.begin(), r.checks.end(), [](const check_result& c) { return c.result == verdict::skip; });
}

// The exit codes the SPANK plugin reads (probe_protocol.h).
int exit_code_for(const report& r) {
  if (nothing_tested(r)) return k_probe_exit_skip;
  verdict v = r.overall();
  if (v == verdict::fail) return k_probe_exit_fail;
  if (v == verdict::error) return k_probe_exit_error;
  return k_probe_exit_pass;
}

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u;
}

void print_text(const report& r, bool verbose) {
  for (const auto& c : r.checks) {
    std::string line = fmt::format("mrcheck: {}: {}: {}", c.id, upper(to_string(c.result)),
                                   escape_line(c.summary, 2000));
    if (!c.hint.empty() && c.result != verdict::pass && c.result != verdict::skip) {
      line += fmt::format(" (fix: {})", escape_line(c.hint, 1000));
    }
    fmt::print("{}\n", line);
    if (verbose && !c.detail.empty()) {
      std::string_view d = c.detail;
      while (!d.empty()) {
        auto nl = d.find('\n');
        fmt::print(stderr, "mrcheck: {}:   {}\n", c.id, escape_line(d.substr(0, nl), 1000));
        if (nl == std::string_view::npos) break;
        d.remove_prefix(nl + 1);
      }
    }
  }
}

std::string home_dir() {
  if (const char* h = getenv("HOME"); h != nullptr && h[0] == '/') return h;
  if (passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) return pw->pw_dir;
  return "";
}

// Whether the verbs library loaded and lists at least one device; ENOSYS (no uverbs in the kernel) lists none.
bool has_rdma_device(const result<std::unique_ptr<verbs_api>>& verbs) {
  if (!verbs) return false;
  auto names = (*verbs)->device_names();
  return names && !names->empty();
}

// The GPU side of --gpu: CUDA for mr_gpu where there is an RDMA device to register with, and for mnnvl_handle where
// NVML reports a multi-node NVLink fabric (asked in a child of its own: an NVML that crashes is one line). NVML is
// asked where IMEX is installed or CUDA is set up anyway: its 22-29 ms (docs/facts/mnnvl.md §4) would otherwise be
// most of `probe mr --gpu` on a node without an HCA (bench/probe/README.md).
struct gpu_side {
  std::unique_ptr<gpu_memory> gpu;
  gpu_probe_result setup;  // mr_gpu's
  fabric_facts nvml;
  std::string cuda_problem;  // why CUDA could not be set up, in CUDA's words (mnnvl_handle's)
  bool cuda_skip = true;     // ... and whether that means not applicable
};

gpu_side open_gpu_side(bool rdma_device) {
  gpu_side s;
  if (rdma_device || imex_installed(sysroot{})) {
    s.nvml = read_gpu_fabric_isolated(std::string(k_nvml_library));
  } else {
    s.nvml.gpus = status::error("not asked: no IMEX on this node and no RDMA device");
  }
  const bool fabric = s.nvml.gpus && std::any_of(s.nvml.gpus->begin(), s.nvml.gpus->end(),
                                                 [](const gpu_fabric& g) { return g.in_fabric(); });
  if (!rdma_device && !fabric) {
    // Nothing to register GPU memory with and no fabric: CUDA's set-up (about 280 ms on an H100) would test nothing.
    s.setup.skip_reason = "no RDMA device: GPU memory was not set up (nothing to register it with)";
    return s;
  }
  bool skip = true;
  auto g = open_cuda_gpu(skip);
  if (g) {
    s.gpu = std::move(*g);
  } else {
    s.cuda_problem = g.error().message();
    s.cuda_skip = skip;
    (skip ? s.setup.skip_reason : s.setup.error) = s.cuda_problem;
  }
  if (!rdma_device) s.setup.skip_reason = "no RDMA device: GPU memory was not registered (nothing to register it with)";
  return s;
}

// The probe in this process.
int run_here(const options& opt, const std::string& library, bool explicit_library) {
  stderr_log sink(opt.verbose || opt.child ? log_level::verbose : log_level::info);
  mr_probe_request req;
  req.size = opt.size;
  req.device = opt.device;
  req.gpu = opt.gpu;
  req.env = current_environment();
  req.home = home_dir();

  auto verbs = load_verbs(library);
  status load_error = verbs ? status::ok() : verbs.error();

  gpu_side gs;
  if (opt.gpu) gs = open_gpu_side(has_rdma_device(verbs));
  // mr_gpu registers only with a GPU it may use: none when its set-up says why not.
  gpu_memory* for_mr = gs.setup.skip_reason.empty() && gs.setup.error.empty() ? gs.gpu.get() : nullptr;
  mr_probe_outcome o = run_mr_probe(req, verbs ? verbs->get() : nullptr, load_error, for_mr, gs.setup, sink);
  o.explicit_library = explicit_library;
  if (opt.gpu) o.fabric = probe_fabric_handle(gs.nvml, gs.gpu.get(), gs.cuda_problem, gs.cuda_skip, sink);
  gs.gpu.reset();

  // Evidence: cheap for a pass; the chain walk and the stack facts only when something failed.
  node_evidence ev = probe_evidence(sysroot{}, o, false);
  auto checks = mr_probe_checks(o, ev);
  bool failed = std::any_of(checks.begin(), checks.end(), [](const probe_check& c) {
    return c.result.result == verdict::fail || c.result.result == verdict::warn;
  });
  if (failed) {
    ev = probe_evidence(sysroot{}, o, true);
    checks = mr_probe_checks(o, ev);
  }
  report r = to_report(checks);
  if (opt.json) {
    nlohmann::json j = report_to_json(r);
    if (nothing_tested(r)) j["verdict"] = "skip";
    j["probe"] = probe_to_json(o, checks);
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    print_text(r, opt.verbose);
    if (nothing_tested(r)) fmt::print("mrcheck: probe mr: SKIP: nothing was tested (every check skipped)\n");
  }
  return exit_code_for(r);
}

// The probe in a child with a timeout: a hang or a crash inside libibverbs/libcuda is reported, not suffered.
int run_isolated(const options& opt, const args& original) {
  auto out = run_self_isolated("mr", original, *opt.timeout);
  if (!out) return usage_error(out.error().message());
  const child_outcome& c = *out;
  if (c.exited && c.exit_code != 127) {
    // The child printed its own report; pass it on unchanged, its stderr only when asked (or when it failed).
    fmt::print("{}", c.out);
    if (opt.verbose || c.exit_code != 0) {
      std::string_view err = c.err;
      // Its step log is verbose; keep only the non-"calling" lines unless --verbose.
      while (!err.empty()) {
        auto nl = err.find('\n');
        std::string_view line = err.substr(0, nl);
        if (opt.verbose || line.find(": calling ") == std::string_view::npos) fmt::print(stderr, "{}\n", line);
        if (nl == std::string_view::npos) break;
        err.remove_prefix(nl + 1);
      }
    }
    return c.exit_code;
  }
  // Hung or crashed: the last "calling" line says where.
  std::string where = last_call(c.err);
  check_result res;
  res.id = "mr_host";
  res.result = verdict::fail;
  if (c.timed_out) {
    res.summary = fmt::format("the registration probe {}{}: NCCL would hang at the same call", c.describe(),
                              where.empty() ? "" : fmt::format(" while calling {}", where));
    res.hint =
        "look at the RDMA stack (rdma_stack check, dmesg for mlx5/ib_core errors); NCCL_IB_DISABLE=1 avoids IB at a "
        "large bandwidth cost";
  } else {
    res.summary = fmt::format("the registration probe {}{}: the library NCCL loads crashes here",
                              c.exited ? fmt::format("could not run ({})", escape_line(c.err, 200)) : c.describe(),
                              where.empty() ? "" : fmt::format(" while calling {}", where));
    res.hint = "check that libibverbs and its provider match the kernel (rdma_stack check); see dmesg";
  }
  res.detail = fmt::format("child: {}\ncause=unknown\n", c.describe());
  report r;
  r.checks.push_back(res);
  if (opt.json) {
    nlohmann::json j = report_to_json(r);
    j["probe"] = {{"isolated", true}, {"outcome", c.describe()}, {"last_call", where}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    print_text(r, opt.verbose);
  }
  return k_exit_fail;
}

// The values checked; nullopt after printing why.
std::optional<options> options_from(const command_line& line) {
  const auto& r = line.options<raw_options>();
  auto fail = [&line](std::string_view why) {
    line.usage_error(why);
    return std::nullopt;
  };
  options opt;
  opt.gpu = r.gpu;
  opt.json = r.json;
  opt.verbose = r.verbose;
  opt.child = r.child;
  if (line.given("--size")) {
    auto b = parse_bytes(r.size);
    if (!b) return fail(b.error().message());
    if (*b == 0 || *b == k_unlimited || *b > (1ull << 44)) return fail("--size must be between 1 byte and 16 TiB");
    opt.size = *b;
  }
  if (line.given("--device") && (r.device.empty() || r.device.size() > 64))
    return fail("--device needs an HCA name (e.g. mlx5_0)");
  opt.device = r.device;
  if (line.given("--verbs-library")) {
    if (r.verbs_library.empty()) return fail("--verbs-library needs a path or library name");
    opt.verbs_library = r.verbs_library;
  }
  if (line.given("--config")) opt.config_file = r.config_file;
  if (line.given("--timeout")) {
    auto d = parse_duration(r.timeout);
    if (!d) return fail(d.error().message());
    opt.timeout = *d;
  }
  return opt;
}

}  // namespace

void declare_probe_mr(command_line& c) {
  auto& o = c.make_options<raw_options>();
  c.about(
      "Registers memory with each HCA NCCL would use, exactly as NCCL does (ibv_reg_mr_iova2 with\n"
      "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|RELAXED_ORDERING, page-aligned, iova = addr), as this\n"
      "user under this process's RLIMIT_MEMLOCK, probes DMA-BUF support like NCCL (fd -1), and with --gpu\n"
      "registers GPU memory (peer-memory path and a DMA-BUF fd) and, where the GPUs report a multi-node NVLink\n"
      "fabric, makes and exports a fabric-handle buffer as NCCL does. Checks: mr_host, dmabuf, mr_gpu, "
      "mnnvl_handle.\n");
  c.option("--size", o.size, "BYTES", "register this much (8M, 1G, ...) instead of the estimate of NCCL's buffers");
  c.option("--device", o.device, "NAME",
           "only this HCA (default: NCCL_IB_HCA, else the HCAs nearest the GPUs, else all)");
  c.option("--verbs-library", o.verbs_library, "PATH",
           "libibverbs to load (default: verbs_library= of the config, libibverbs.so.1)");
  c.flag("--gpu", o.gpu,
         "also register GPU memory (CUDA driver API, libcuda.so.1) and test a fabric handle where there is an NVLink "
         "fabric");
  c.flag("--json", o.json, "report JSON on stdout: {\"verdict\",\"checks\":[...],\"probe\":{...}}");
  c.option("--config", o.config_file, "FILE",
           "mrcheck.conf to read (default " MRCHECK_DEFAULT_CONFIG " when it exists)");
  c.option("--timeout", o.timeout, "DURATION",
           "kill the probe's child after DURATION (default: the config's probe_timeout less a tenth, 27s); a hang "
           "or a crash of the child is a verdict");
  c.flag("-v,--verbose", o.verbose, "the facts behind each verdict, and every call as it is made, on stderr");
  c.flag("--isolated-child", o.child, "internal: run the probe in this process", shown::hidden);
  c.footer(
      "A probe run as root proves nothing about memlock: the kernel skips the limit for CAP_IPC_LOCK.\n"
      "exit: 0 pass or warn, 1 fail, 2 error or usage, 3 skip (every check skipped: nothing was tested)\n");
}

int cmd_probe_mr(const args& a) {
  command_line line("probe mr");
  declare_probe_mr(line);
  if (auto code = line.parse(a)) return *code;
  std::optional<options> parsed = options_from(line);
  if (!parsed) return k_exit_usage;
  options& opt = *parsed;
  config cfg;
  if (opt.config_file) {
    status st = load_config_file(cfg, *opt.config_file);
    if (!st) return usage_error(st.message());
  } else if (std::error_code ec; std::filesystem::exists(MRCHECK_DEFAULT_CONFIG, ec)) {
    status st = load_config_file(cfg, MRCHECK_DEFAULT_CONFIG);
    if (!st) return usage_error(st.message());
  }
  std::string library = opt.verbs_library ? *opt.verbs_library : cfg.verbs_library;
  bool explicit_library = library.find('/') != std::string::npos;

  if (opt.child) {
    // The parent enforces the deadline; if it dies (the plugin killed it at its own timeout) this child must not
    // outlive it, hung in a registration, in its own process group.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) return k_exit_usage;
  }
  if (!opt.child) {
    if (!opt.timeout) {
      // The SPANK plugin kills this process at probe_timeout itself: the child's own deadline comes a little
      // earlier (a tenth, at least a second) so that the verdict naming the call still gets out.
      using std::chrono::milliseconds;
      const milliseconds t = cfg.probe_timeout;
      const milliseconds margin = std::max(t / 10, milliseconds(1000));
      opt.timeout = t > 2 * margin ? t - margin : std::max(t / 2, milliseconds(1));
    }
    return run_isolated(opt, a);
  }
  return run_here(opt, library, explicit_library);
}

}  // namespace mrcheck::cli
