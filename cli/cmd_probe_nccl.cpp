// mrcheck probe nccl: a real 2-rank NCCL all-reduce through NCCL's network path. The same binary is
// re-executed as each rank (`--rank R`, hidden); only those children load CUDA and NCCL.
#include "cmd_probe_nccl.h"
#include "command_line.h"

#include "root_library.h"

#include <mrcheck/probe_checks.h>
#include <mrcheck/probe_protocol.h>

#include <mrcheck/check.h>
#include <mrcheck/child.h>
#include <mrcheck/job_nccl.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <optional>
#include <tuple>

namespace mrcheck::cli {

namespace {

std::optional<std::uint64_t> to_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<int> to_int(std::string_view s, int lo, int hi) {
  auto v = to_u64(s);
  if (!v || *v < static_cast<std::uint64_t>(lo) || *v > static_cast<std::uint64_t>(hi)) return std::nullopt;
  return static_cast<int>(*v);
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

int usage_error(std::string_view msg) {
  fmt::print(stderr, "mrcheck: probe nccl: {}\n", msg);
  return k_exit_usage;
}

int run_rank(const args& a) {
  auto r = parse_nccl_rank_args(a);
  if (!r.is_ok()) return usage_error(r.error().message());
  return nccl_rank_main(*r);
}

const char* env_or_null(const char* name) { return std::getenv(name); }

// What the command line (and the step's environment) asks for.
struct nccl_command {
  nccl_pair_options o;
  bool json = false;
  bool library_given = false;  // --nccl-library
  // As root, the ranks load the library through a checked descriptor (/proc/PID/fd/N): its path, for the report.
  std::string descriptor_of;
  std::optional<nccl_mode> mode;
  int node_id = 0;  // SLURM_NODEID
};

// The defaults a job step gives: job and step ids, this node's place, the peer (the first host of the step).
void defaults_from_slurm(nccl_command& cmd) {
  nccl_pair_options& o = cmd.o;
  if (const char* j = env_or_null("SLURM_JOB_ID")) o.job_id = to_u64(j).value_or(0);
  if (const char* s = env_or_null("SLURM_STEP_ID")) o.step_id = to_u64(s).value_or(0);
  if (const char* n = env_or_null("SLURM_NODEID")) cmd.node_id = to_int(n, 0, INT_MAX).value_or(0);
  o.pair_rank = std::min(cmd.node_id, 2);
  for (const char* list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
    if (const char* v = env_or_null(list); v && o.peer.empty()) o.peer = first_host_of_nodelist(v);
  }
}

// The command line as given, before its values are checked (apply_options).
struct raw_options {
  std::string mode, timeout, nccl_library, count, pair_rank, peer, job_id, step_id;
  bool json = false, verbose = false;
};

// The options, checked, over the defaults. Returns the exit code of a usage error, or nothing.
std::optional<int> apply_options(const command_line& line, nccl_command& cmd) {
  const auto& r = line.options<raw_options>();
  nccl_pair_options& o = cmd.o;
  cmd.json = r.json;
  o.verbose = r.verbose;
  if (line.given("--mode") && !(cmd.mode = parse_nccl_mode(r.mode)))
    return line.usage_error("--mode must be local-pair, gpu-pair or node-pair");
  if (line.given("--timeout")) {
    auto d = parse_duration(r.timeout);
    if (!d || d->count() <= 0)
      return line.usage_error(fmt::format("bad --timeout: {}", d ? "must be > 0" : d.error().message()));
    o.timeout = *d;
  }
  if (line.given("--nccl-library")) {
    o.nccl_library = r.nccl_library;
    cmd.library_given = true;
  }
  if (line.given("--count")) {
    auto c = to_u64(r.count);
    if (!c || *c == 0 || *c > (1ULL << 30)) return line.usage_error("--count must be 1 .. 2^30 floats");
    o.count = *c;
  }
  if (line.given("--pair-rank")) {
    auto n = to_int(r.pair_rank, 0, 1);
    if (!n) return line.usage_error("--pair-rank must be 0 or 1");
    o.pair_rank = *n;
  }
  if (line.given("--peer")) {
    if (r.peer.empty() || r.peer.size() > 255) return line.usage_error("--peer needs a host name or address");
    o.peer = r.peer;
  }
  for (const auto& [name, value, target] :
       {std::tuple{"--job-id", &r.job_id, &o.job_id}, std::tuple{"--step-id", &r.step_id, &o.step_id}}) {
    if (!line.given(name)) continue;
    auto n = to_u64(*value);
    if (!n) return line.usage_error(fmt::format("{} needs a number", name));
    *target = *n;
  }
  return std::nullopt;
}

// The report, as JSON or text (with the ranks' output and the detail when verbose or not a pass).
void print_result(const nccl_command& cmd, const report& rep, const std::optional<nccl_pair_outcome>& outcome,
                  const job_nccl& job) {
  if (cmd.json) {
    nlohmann::json j = report_to_json(rep);
    if (outcome) add_nccl_pair_json(j, *outcome, cmd.o.verbose);
    j["job_nccl"] = job_nccl_json(job);
    // A path of the job's (LD_LIBRARY_PATH, a venv) may hold bytes that are not UTF-8: replaced, never thrown.
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (cmd.o.verbose && outcome) {
    for (const auto& r : outcome->ranks) {
      fmt::print(stderr, "mrcheck: nccl_pair: rank {} output ({}):\n{}{}", r.rank, r.describe(), r.out, r.err);
    }
  }
  fmt::print("{}", to_text(rep));
  if (!rep.checks.empty() && !rep.checks.front().detail.empty() && (cmd.o.verbose || rep.overall() != verdict::pass)) {
    fmt::print("\n{}\n", rep.checks.front().detail);
  }
}

// Which libnccl the ranks load: --nccl-library, else the job's. A library that cannot be a working NCCL (missing,
// a symlink loop, 0 bytes, not ELF) is a verdict before anything is loaded; as root, a file that another user
// could have written is not loaded at all (run the probe as the job user: the plugin does).
std::optional<check_result> choose_library(nccl_command& cmd, const job_nccl& job) {
  std::string lib = cmd.o.nccl_library;
  std::string whose = "--nccl-library";
  if (!cmd.library_given) {
    const nccl_candidate* c = job.job();
    if (!c) return std::nullopt;  // nothing found: dlopen("libnccl.so.2") says what the loader says
    lib = c->path;
    whose = "the job's NCCL (" + c->origin + ")";
  }
  auto info = scan_nccl_library(lib);
  if (!info) {
    return check_result{"nccl_pair", verdict::fail,
                        fmt::format("{} cannot load: {}", escape_line(whose, 200),
                                    escape_line(info.error().message(), 300)),
                        "",
                        "the job would fail in dlopen or ncclGetVersion the same way: reinstall that NCCL or "
                        "remove it from the job's library path"};
  }
  if (!info->has_get_version) {
    return check_result{"nccl_pair", verdict::fail,
                        fmt::format("{} {} is not an NCCL library (no ncclGetVersion)", escape_line(whose, 200),
                                    escape_line(lib, 300)),
                        "", ""};
  }
  if (::geteuid() == 0) {
    // B4: checked once on an open descriptor, loaded by the ranks through it (cli/root_library.cpp); the
    // descriptor stays open for the life of this process, which the ranks do not outlive.
    auto fd = open_root_library(lib);
    if (!fd) {
      return check_result{"nccl_pair", verdict::error,
                          fmt::format("{} {} not loaded as root: {}", escape_line(whose, 200), escape_line(lib, 300),
                                      fd.error().message()),
                          "", "run `mrcheck probe nccl` as the job's user"};
    }
    cmd.descriptor_of = lib;
    lib = loadable_path(*fd);
  }
  cmd.o.nccl_library = lib;
  return std::nullopt;
}

void add_library_detail(check_result& ch, const job_nccl& job, bool library_given) {
  std::string d = library_given ? "NCCL given by --nccl-library; the job's would be:\n"
                                : fmt::format("the job's NCCL: {}{}\n", job_nccl_summary(job),
                                              job.why.empty() ? "" : " - " + job.why);
  for (const auto& l : job_nccl_lines(job)) d += l + "\n";
  ch.detail = ch.detail.empty() ? d : ch.detail + "\n" + d;
  if (const nccl_candidate* c = job.job(); c && !library_given && ch.result != verdict::skip) {
    ch.summary += fmt::format(" [the job's NCCL: {}]", escape_line(c->origin, 120));
  }
}

// The ranks name the library by the name they loaded it under (their dlopen errors, dladdr): as root that is the
// descriptor (/proc/PID/fd/N), which means nothing once this process is gone. The report names the file.
void name_the_file(nccl_pair_outcome& outcome, const std::string& loaded_as, const std::string& file) {
  for (auto& r : outcome.ranks) {
    if (!r.report) continue;
    if (r.report->nccl_library == loaded_as) r.report->nccl_library = file;
    std::string& e = r.report->error;
    for (std::size_t at = e.find(loaded_as); at != std::string::npos; at = e.find(loaded_as, at + file.size()))
      e.replace(at, loaded_as.size(), file);
  }
}

// The pair as the options and the allocation ask for it: a skip, the library's verdict, or the pair's own.
report run_pair(nccl_command& cmd, const job_nccl& job, std::optional<nccl_pair_outcome>& outcome) {
  report rep;
  nccl_pair_options& o = cmd.o;
  std::optional<check_result> library_problem = choose_library(cmd, job);
  std::optional<nccl_mode>& mode = cmd.mode;
  if (!mode) {
    nccl_mode_choice choice = choose_nccl_mode(count_visible_gpus(sysroot(), env_or_null("CUDA_VISIBLE_DEVICES")), 1);
    if (!choice.mode) {
      rep.checks.push_back({"nccl_pair", verdict::skip, choice.reason, "", ""});
    }
    mode = choice.mode;
  }
  if (library_problem) {
    rep.checks = {*library_problem};  // one nccl_pair verdict (the plugin refuses two)
    mode.reset();
  }
  if (mode == nccl_mode::node_pair && o.pair_rank > 1) {
    // Only the first task of the first two nodes pairs up; the others have nothing to do.
    rep.checks.push_back({"nccl_pair", verdict::skip,
                          fmt::format("node-pair runs on the step's first two nodes; this is node {}", cmd.node_id), "",
                          ""});
    mode.reset();
  }
  if (!mode) return rep;
  o.mode = *mode;
  o.self_exe = self_exe();
  if (o.mode == nccl_mode::node_pair) o.auth = munge_settings_from_slurm_conf();
  // B4: as root, no loader variable reaches the ranks (the job's library was judged above, through a checked
  // descriptor): LD_LIBRARY_PATH into a user's venv, conda tree or directory would make root's rank load the
  // user's libcuda or a preloaded library.
  if (::geteuid() == 0) std::erase_if(o.env, [](const std::string& e) { return e.starts_with("LD_"); });
  outcome = run_nccl_pair(o);
  if (!cmd.descriptor_of.empty()) name_the_file(*outcome, o.nccl_library, cmd.descriptor_of);
  // Each peer the rendezvous refused, one line (the plugin passes the probe's stderr on to slurmd's log).
  for (const auto& line : outcome->refused) fmt::print(stderr, "mrcheck: {}\n", line);
  outcome->parent = read_own_process(sysroot{});
  rep.checks.push_back(judge_nccl_pair(*outcome));
  return rep;
}

}  // namespace

void declare_probe_nccl(command_line& c) {
  auto& o = c.make_options<raw_options>();
  c.about(
      "Runs a 2-rank NCCL all-reduce through NCCL's network transport and checks the sum. Default mode: the best\n"
      "this allocation allows (2+ GPUs: gpu-pair, 1 GPU: local-pair). The job's NCCL_* settings apply.\n"
      "node-pair: run once on each of the step's first two nodes; --pair-rank defaults to SLURM_NODEID, --peer to\n"
      "the first host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), --job-id/--step-id to "
      "SLURM_JOB_ID/SLURM_STEP_ID;\n"
      "they meet on a TCP port in 20000-28999 derived from job and step.\n"
      "NCCL: without --nccl-library, the one the job's program would load (LD_LIBRARY_PATH, the Python interpreter's\n"
      "nvidia-nccl wheel, VIRTUAL_ENV, CONDA_PREFIX, the system's); every NCCL found is listed with its version.\n");
  c.option("--mode", o.mode, "local-pair|gpu-pair|node-pair",
           "the pair to run (default: the best the allocation allows)");
  c.flag("--json", o.json, "report JSON on stdout, with the pair's transport, timings and the job's NCCL");
  c.option("--timeout", o.timeout, "SECONDS", "the deadline of the whole pair (30s, 2m, ...)");
  c.flag("-v,--verbose", o.verbose, "the ranks' output and the verdict's detail, also on a pass");
  c.option("--nccl-library", o.nccl_library, "PATH", "the libnccl the ranks load instead of the job's");
  c.option("--count", o.count, "FLOATS", "floats per rank in the all-reduce (1 .. 2^30)");
  c.option("--pair-rank", o.pair_rank, "0|1", "node-pair: this node's rank in the pair");
  c.option("--peer", o.peer, "HOST", "node-pair: the host of rank 0");
  c.option("--job-id", o.job_id, "N", "node-pair: the job id both nodes derive the port from");
  c.option("--step-id", o.step_id, "N", "node-pair: the step id both nodes derive the port from");
  c.footer("exit: 0 pass, warn or skip; 1 fail; 2 usage or the probe itself broke\n");
}

int cmd_probe_nccl(const args& a) { return probe_nccl_with_spawner(a, {}); }

int probe_nccl_with_spawner(const args& a, const child_spawner& spawn) {
  // A rank of the pair (this binary again, started by run_nccl_pair): its own arguments (parse_nccl_rank_args).
  if (std::find(a.begin(), a.end(), "--rank") != a.end()) return run_rank(a);
  command_line line("probe nccl");
  declare_probe_nccl(line);
  if (auto code = line.parse(a)) return *code;
  nccl_command cmd;
  cmd.o.env = current_environment();
  defaults_from_slurm(cmd);
  if (auto rc = apply_options(line, cmd)) return *rc;
  cmd.o.spawn = spawn;
  // The NCCL the job would load (found, never loaded here), or the one asked for by hand.
  job_nccl job = find_job_nccl(job_nccl_inputs_from_env(cmd.o.env));
  std::optional<nccl_pair_outcome> outcome;
  report rep = run_pair(cmd, job, outcome);
  if (!rep.checks.empty()) add_library_detail(rep.checks.front(), job, cmd.library_given);
  print_result(cmd, rep, outcome, job);
  switch (rep.overall()) {
    case verdict::fail: return k_probe_exit_fail;
    case verdict::error: return k_probe_exit_error;
    default: return k_probe_exit_pass;
  }
}

}  // namespace mrcheck::cli
