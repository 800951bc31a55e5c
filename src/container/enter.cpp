// Getting the probe into the job's container (docs/containers.md, "How the probe gets in"):
//   slurmstepd (root, host view)   open the helper O_PATH|O_CLOEXEC, read the host's RDMA view
//   task_init (job user)           task inside (a container plugin before mrcheck joined it): run the helper
//                                  by descriptor where we are; a container plugin after mrcheck: watch the
//                                  task enter, join its user+mount namespaces, run the helper there
// The helper's PT_INTERP is resolved in the container, so the image's loader and glibc run it (docs/facts/containers.md
// §1 when pyxis moves the task, §6 setns and execveat).
#include <mrcheck/container.h>

#include <mrcheck/build_config.h>
#include <mrcheck/facts.h>
#include <mrcheck/launchers.h>
#include <mrcheck/probe_protocol.h>
#include <mrcheck/proc_tree.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace mrcheck {

namespace {

std::string link_text(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string root_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return fmt::format("{}:{}", st.st_dev, st.st_ino);
}

std::optional<int> read_int(const sysroot& root, const std::string& path) {
  auto v = root.read_value(path);
  if (!v) return std::nullopt;
  int out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc()) return std::nullopt;
  return out;
}

}  // namespace

host_rdma_view read_host_rdma_view(const sysroot& root) {
  host_rdma_view h;
  if (auto l = root.list("/sys/class/infiniband")) h.devices = std::move(*l);
  if (auto l = root.list("/dev/infiniband")) h.dev_infiniband = std::move(*l);
  h.uverbs_abi = read_int(root, "/sys/class/infiniband_verbs/abi_version");
  if (auto l = root.list("/sys/class/infiniband_verbs")) {
    for (const auto& u : *l) {
      if (u.rfind("uverbs", 0) != 0) continue;
      auto dev = root.read_value("/sys/class/infiniband_verbs/" + u + "/ibdev");
      auto abi = read_int(root, "/sys/class/infiniband_verbs/" + u + "/abi_version");
      if (dev && abi) h.device_abi[*dev] = *abi;
    }
  }
  for (const auto& d : h.devices) {
    if (auto t = root.read_link("/sys/class/infiniband/" + d + "/device/driver")) {
      auto slash = t->rfind('/');
      h.device_driver[d] = slash == std::string::npos ? *t : t->substr(slash + 1);
    }
  }
  // The host's libibverbs file name gives its rdma-core release (same rule as the image's).
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    auto l = root.list(dir);
    if (!l) continue;
    for (const auto& f : *l) {
      std::string v = rdma_core_from_soname(f);
      if (!v.empty()) {
        h.rdma_core_version = v;
        break;
      }
    }
    if (!h.rdma_core_version.empty()) break;
  }
  h.nvidia_driver = root.exists("/proc/driver/nvidia/version");
  return h;
}

std::string ctprobe_path(const std::string& mrcheck_helper) {
  auto slash = mrcheck_helper.rfind('/');
  if (slash != std::string::npos) {
    std::string next = mrcheck_helper.substr(0, slash + 1) + "mrcheck-ctprobe";
    if (::access(next.c_str(), X_OK) == 0) return next;
  }
  return std::string(MRCHECK_INSTALL_LIBEXECDIR) + "/mrcheck/mrcheck-ctprobe";
}

void prepare_container_state(container_state& st, const std::string& helper_path, const sysroot& host) {
  if (st.host_read) return;
  st.host_read = true;
  st.helper_path = ctprobe_path(helper_path);
  // O_PATH: enough for execveat, and no read access to keep open in the task. O_CLOEXEC: the task never sees it.
  st.helper_fd = ::open(st.helper_path.c_str(), O_PATH | O_CLOEXEC);
  if (st.helper_fd < 0) st.helper_error = fmt::format("{}: {}", st.helper_path, std::strerror(errno));
  st.host = read_host_rdma_view(host);
  st.host_mnt_ns = link_text("/proc/self/ns/mnt");
  st.host_root_id = root_id("/");
}

namespace {

// The first of `container_plugins` (comma-separated file names) mapped into this process: every plugstack plugin
// is mapped into slurmstepd and so into the task child. "" when none is.
std::string mapped_container_plugin(std::string_view container_plugins) {
  if (container_plugins.empty()) return {};
  auto maps = sysroot{}.read("/proc/self/maps", 16u << 20);
  if (!maps) return {};
  std::string_view names = container_plugins;
  while (!names.empty()) {
    auto c = names.find(',');
    std::string_view name = names.substr(0, c);
    names.remove_prefix(c == std::string_view::npos ? names.size() : c + 1);
    if (!name.empty() && maps->find("/" + std::string(name) + "\n") != std::string::npos) return std::string(name);
  }
  return {};
}

}  // namespace

task_location locate_task(const container_state& st, std::string_view container_plugins,
                          const std::vector<std::string>& argv) {
  task_location loc;
  // In both orders: the plugin that moved the task (or will) names the runtime, which the task's environment
  // does not (pyxis: docs/facts/containers.md §2).
  loc.plugin = mapped_container_plugin(container_plugins);
  std::string mnt = link_text("/proc/self/ns/mnt");
  std::string rid = root_id("/");
  // A mount namespace of its own on slurmstepd's root is not a container: job_container/tmpfs (25.11 and later:
  // namespace/tmpfs) gives the job one with only /tmp and /dev/shm replaced, the root left as it was (_create_ns
  // in Slurm's job_container_tmpfs.c, docs/slurm-releases.md). Every runtime mrcheck knows enters its image's
  // root (docs/facts/containers.md); the task is probed on the host, like any other.
  bool own_root = st.host_root_id.empty() || rid.empty() || rid != st.host_root_id;
  if (!st.host_mnt_ns.empty() && !mnt.empty() && mnt != st.host_mnt_ns && own_root) {
    loc.place = task_place::inside;
    loc.detail = fmt::format("mount namespace {} (slurmstepd: {})", mnt, st.host_mnt_ns);
    return loc;
  }
  if (!st.host_root_id.empty() && !rid.empty() && rid != st.host_root_id) {
    loc.place = task_place::inside;
    loc.detail = "its own root directory (chroot)";
    return loc;
  }
  // `srun apptainer exec IMAGE cmd`: the task itself is the launcher; a child of it enters the container.
  if (auto l = launcher_runtime(argv, sif_head(argv)); l.runtime != container_runtime::none) {
    loc.place = task_place::maybe_later;
    loc.detail = l.evidence;
    loc.launcher = std::move(l);
    return loc;
  }
  if (!loc.plugin.empty()) {
    loc.place = task_place::maybe_later;
    loc.detail = fmt::format("SPANK plugin {}", escape_line(loc.plugin, 64));
  }
  return loc;
}

runtime_guess runtime_inside(const ctprobe_run& run, const std::vector<std::string>& env, runtime_guess known) {
  if (known.runtime != container_runtime::none && known.runtime != container_runtime::unknown) return known;
  runtime_signs s;
  s.env = env;
  s.own_namespace = true;
  if (auto v = parse_ctprobe_output(run.outcome.out)) {
    std::string_view m = v->kv["markers"];
    while (!m.empty()) {
      auto c = m.find(',');
      if (!m.substr(0, c).empty()) s.marker_files.emplace_back(m.substr(0, c));
      m.remove_prefix(c == std::string_view::npos ? m.size() : c + 1);
    }
    if (auto e = v->kv.find("containerenv"); e != v->kv.end()) s.containerenv = e->second;
  }
  runtime_guess g = guess_runtime(s);
  // What the image shows names the runtime; the launcher that started it stays known.
  g.outside_task = known.outside_task;
  g.launcher_prog = std::move(known.launcher_prog);
  return g;
}

namespace {

// In the probe child, after fork: join the user namespace (when it is another one) and the mount namespace of
// `pid`, then its root. Async-signal-safe calls only. Returns 0 or an errno.
struct join_target {
  char user[64];
  char mnt[64];
  char root[64];
};

int join_namespaces(const void* arg) noexcept {
  const auto* t = static_cast<const join_target*>(arg);
  int rootfd = ::open(t->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return errno;
  int userfd = ::open(t->user, O_RDONLY | O_CLOEXEC);
  if (userfd < 0) return errno;
  int mntfd = ::open(t->mnt, O_RDONLY | O_CLOEXEC);
  if (mntfd < 0) return errno;
  auto same_ns = [](const char* self_path, int fd) {
    struct stat mine {
    }, theirs{};
    int self = ::open(self_path, O_RDONLY | O_CLOEXEC);
    bool same = self >= 0 && ::fstat(self, &mine) == 0 && ::fstat(fd, &theirs) == 0 && mine.st_ino == theirs.st_ino &&
                mine.st_dev == theirs.st_dev;
    if (self >= 0) ::close(self);
    return same;
  };
  bool same_user = same_ns("/proc/self/ns/user", userfd);
  bool same_mnt = same_ns("/proc/self/ns/mnt", mntfd);
  // Joining a user namespace we own gives CAP_SYS_ADMIN in it, which setns(CLONE_NEWNS) needs (enroot's case),
  // and CAP_SYS_CHROOT for the chroot below (`unshare -r --root`, whose task keeps the host's mount namespace).
  if (!same_user && ::setns(userfd, CLONE_NEWUSER) != 0) return errno;
  if (!same_mnt && ::setns(mntfd, CLONE_NEWNS) != 0) return errno;
  // setns put us at the namespace's root; a runtime that chroot()s (rather than pivot_root) has its own below it.
  struct stat r {
  }, ours{};
  if (::fstat(rootfd, &r) != 0) return errno;
  if (::stat("/", &ours) == 0 && (r.st_ino != ours.st_ino || r.st_dev != ours.st_dev)) {
    if (::fchdir(rootfd) != 0 || ::chroot(".") != 0) return errno;
  }
  if (::chdir("/") != 0) return errno;
  return 0;
}

// A launcher's container process: the task itself or its first descendant (breadth first, at most 64 looked at)
// that is in another mount namespace than slurmstepd's or has another root directory (`chroot`, `unshare
// --root`), and runs a program that is not the launcher (`launcher_prog`, its file name) nor, for a descendant,
// the task's own (Apptainer's starter, whose child stays the starter until the container is set up; a starter
// under a wrapper is skipped by name). 0: none yet.
pid_t launched_container_process(pid_t task, std::string_view launcher_prog, const std::string& host_ns,
                                 const std::string& host_root) {
  std::string task_exe = link_text(fmt::format("/proc/{}/exe", task));
  if (task_exe.empty()) return 0;
  for (pid_t p : process_tree(task, 64)) {
    std::string ns = link_text(fmt::format("/proc/{}/ns/mnt", p));
    std::string exe = p == task ? task_exe : link_text(fmt::format("/proc/{}/exe", p));
    // Apptainer's runtime parent (`starter`, `starter-suid`) has a mount namespace of its own, not the image's.
    std::string_view name = std::string_view(exe).substr(exe.rfind('/') + 1);
    bool starter = name.substr(0, 7) == "starter";
    bool moved = !ns.empty() && ns != host_ns;
    if (!moved && !host_root.empty()) {
      std::string rid = root_id(fmt::format("/proc/{}/root", p));
      moved = !rid.empty() && rid != host_root;
    }
    bool own_program = !exe.empty() && name != launcher_prog && (p == task || exe != task_exe) && !starter;
    if (moved && own_program) return p;
  }
  return 0;
}

// The task's tree, breadth first (at most 64 processes, as launched_container_process), for
// pick_entered_process: each one's program and whether its root is slurmstepd's (`host_root`, "dev:ino").
std::vector<task_process> task_tree(pid_t task, const std::string& host_root) {
  std::vector<task_process> seen;
  for (pid_t pid : process_tree(task, 64)) {
    task_process p;
    p.pid = pid;
    p.exe = link_text(fmt::format("/proc/{}/exe", p.pid));
    std::string rid = root_id(fmt::format("/proc/{}/root", p.pid));
    p.own_root = !rid.empty() && !host_root.empty() && rid != host_root;
    seen.push_back(std::move(p));
  }
  return seen;
}

// A process's environment (/proc/PID/environ, readable by its owner), for the runtime's signs inside: the
// variables a runtime sets for its container (APPTAINER_*, ENROOT_*) are in that process's, not the task's.
std::vector<std::string> environ_of(pid_t pid) {
  std::vector<std::string> env;
  auto text = sysroot{}.read(fmt::format("/proc/{}/environ", pid), 256 * 1024);
  if (!text) return env;
  std::string_view v = *text;
  while (!v.empty()) {
    auto z = v.find('\0');
    if (!v.substr(0, z).empty()) env.emplace_back(v.substr(0, z));
    v.remove_prefix(z == std::string_view::npos ? v.size() : z + 1);
  }
  return env;
}

}  // namespace

std::optional<std::size_t> pick_entered_process(const std::vector<task_process>& seen, std::string_view stepd_exe) {
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const auto& p = seen[i];
    if (!p.own_root || p.exe.empty()) continue;
    if (!stepd_exe.empty() && p.exe == stepd_exe) continue;  // the task child before its exec
    std::string_view name = std::string_view(p.exe).substr(p.exe.rfind('/') + 1);
    // A program replaced since (" (deleted)" after its name) is still the program it runs.
    if (name.ends_with(" (deleted)")) name.remove_suffix(10);
    if (is_launcher_program(name) || name.substr(0, 7) == "starter") continue;
    return i;
  }
  return std::nullopt;
}

ctprobe_run run_ctprobe(const container_state& st, const container_probe_request& req) {
  ctprobe_run run;
  run.helper = st.helper_path;
  if (st.helper_fd < 0) {
    run.started = false;
    run.error = st.helper_error.empty() ? "the helper was not opened" : "cannot open the helper " + st.helper_error;
    return run;
  }
  child_spec spec;
  spec.argv = {st.helper_path};
  if (req.reg_bytes > 0) {
    spec.argv.push_back("--reg-bytes");
    spec.argv.push_back(std::to_string(req.reg_bytes));
  }
  if (req.nccl) spec.argv.push_back("--nccl");
  spec.env = req.env;
  spec.timeout = req.timeout;
  spec.max_output = k_ctprobe_output_max;
  spec.exec_fd = st.helper_fd;
  spec.rlimits.push_back(child_rlimit{RLIMIT_MEMLOCK,
                                      req.memlock_soft == k_unlimited ? RLIM_INFINITY : req.memlock_soft,
                                      req.memlock_hard == k_unlimited ? RLIM_INFINITY : req.memlock_hard});
  join_target target{};
  if (req.join_pid > 0) {
    std::snprintf(target.user, sizeof target.user, "/proc/%d/ns/user", static_cast<int>(req.join_pid));
    std::snprintf(target.mnt, sizeof target.mnt, "/proc/%d/ns/mnt", static_cast<int>(req.join_pid));
    std::snprintf(target.root, sizeof target.root, "/proc/%d/root", static_cast<int>(req.join_pid));
    spec.before_exec = join_namespaces;
    spec.before_exec_arg = &target;
    spec.before_exec_what = "join the task's container";
  }
  auto o = run_child(spec);
  if (!o) {
    run.started = false;
    run.error = o.error().message();
    return run;
  }
  run.outcome = std::move(*o);
  return run;
}

namespace {

// Where the watcher found the task (or the launcher's container process).
enum class entry {
  entered,  // in another mount namespace (a launcher's or a host task's process: or root): probe there
  ended,    // the task ended first
  not_yet,  // in none when wait_for_entry ran out
};
struct entry_seen {
  entry what = entry::not_yet;
  pid_t target = 0;            // the process whose namespaces the helper joins
  std::string ns_path;         // its /proc/PID/ns/mnt
  std::string prog;            // container_watch::descendants: its program's file name
  bool followed_tree = false;  // watched as container_watch::descendants (from the start, or once on the host)
};

// Polls every 20 ms at first (a plugin that only enters namespaces takes milliseconds), then backs off to 250 ms
// (pyxis importing an image with enroot takes seconds to minutes); a host task's tree (`descendants`), which may
// start a container at any time or never, to 1 s. The task's exit ends the wait at once (its pidfd), so that the
// watcher does not hold the task's stderr, and with it srun's I/O, after the task.
entry_seen wait_for_container(pid_t task, const container_state& st, std::chrono::milliseconds wait_for_entry,
                              container_watch how, std::string_view launcher_prog) {
  const std::string& host_ns = st.host_mnt_ns;
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + wait_for_entry;
  const std::string task_ns = fmt::format("/proc/{}/ns/mnt", task);
  const std::string exe_path = fmt::format("/proc/{}/exe", task);
  const std::string stepd_exe = link_text("/proc/self/exe");  // forked from the task child: slurmstepd's binary
  auto longest = how == container_watch::descendants ? 1000ms : 250ms;
  const exit_watch task_exit(task);
  std::chrono::milliseconds pause = 20ms;
  auto tree_mode = [&how] { return how == container_watch::descendants; };
  for (;;) {
    std::string seen = link_text(task_ns);
    // EACCES while the task is not dumpable (between its setuid and its exec): keep waiting; gone: stop.
    if (seen.empty() && ::kill(task, 0) != 0 && errno == ESRCH) return {entry::ended, 0, {}, {}, tree_mode()};
    if (how == container_watch::descendants) {
      // A host task: whichever process of its tree enters a root of its own and execs its program there.
      auto tree = task_tree(task, st.host_root_id);
      if (auto i = pick_entered_process(tree, stepd_exe)) {
        pid_t p = tree[*i].pid;
        std::string ns = fmt::format("/proc/{}/ns/mnt", p);
        std::string_view name = std::string_view(tree[*i].exe).substr(tree[*i].exe.rfind('/') + 1);
        if (!link_text(ns).empty()) return {entry::entered, p, ns, std::string(name), true};
      }
    } else if (how == container_watch::launcher) {
      // The task is the launcher (`apptainer exec`, `chroot DIR cmd`): it execs on the host and moves itself
      // (chroot, unshare) or a child (Apptainer's "runtime parent" and its child) into the container.
      if (pid_t p = launched_container_process(task, launcher_prog, host_ns, st.host_root_id); p > 0) {
        std::string ns = fmt::format("/proc/{}/ns/mnt", p);
        if (!link_text(ns).empty()) return {entry::entered, p, ns, {}};
      }
    } else if (!seen.empty() && seen != host_ns) {
      return {entry::entered, task, task_ns, {}};
    } else if (std::string exe = link_text(exe_path);
               !exe.empty() && exe != stepd_exe && link_text(task_ns) == host_ns) {
      // The plugin is loaded but this step did not ask it for a container: a host task from here on, whose
      // processes may still start one of their own.
      how = container_watch::descendants;
      longest = 1000ms;
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return {entry::not_yet, 0, {}, {}, tree_mode()};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + 1ms;
    if (task_exit.wait(std::min(pause, left)).exited) return {entry::ended, 0, {}, {}, tree_mode()};
    pause = std::min<std::chrono::milliseconds>(pause * 2, longest);
  }
}

// The watcher's lines once the task is in its container: the helper's verdicts, after one line that says the
// check came late. PASS/SKIP lines only with req.verbose, as the host's probes print them.
std::vector<std::string> deferred_verdict_lines(const container_state& st, container_probe_request req,
                                                runtime_guess rt, const entry_seen& at) {
  std::vector<std::string> lines;
  // A process of a host task's tree: the container plugin (loaded, unused by this step) names nothing of it.
  if (at.followed_tree) rt = {};
  req.join_pid = at.target;
  ctprobe_run run = run_ctprobe(st, req);
  // A task that ended meanwhile (its namespaces gone) is named as such, not as a broken image.
  if (run.started && run.outcome.exited && run.outcome.exit_code == 127 && ::access(at.ns_path.c_str(), F_OK) != 0) {
    // A host task's short-lived descendant (`chroot IMG true` in a script) is no error of the task's.
    if (at.prog.empty()) {
      lines.push_back("mrcheck: container: ERROR: the task ended before its container could be probed");
    } else {
      if (!req.verbose) return lines;
      lines.push_back(
          fmt::format("mrcheck: container: not checked: {} (pid {}), started by the task, ended in its "
                      "own root before it could be probed",
                      escape_line(at.prog, 64), at.target));
      return lines;
    }
  } else {
    // The runtime's variables are in the environment of the process that entered, when it is not the task.
    std::vector<std::string> signs_env = at.prog.empty() ? req.env : environ_of(at.target);
    if (!at.prog.empty()) signs_env.insert(signs_env.end(), req.env.begin(), req.env.end());
    rt = runtime_inside(run, signs_env, rt);
    report rep;
    rep.checks = judge_container(run, st.host, rt, req.nccl);
    for (auto& ch : rep.checks) {
      if (ch.result == verdict::fail && req.fail_is_warn) ch.result = verdict::warn;
    }
    for (auto& ch : rep.checks) {
      if (req.verbose && (ch.result == verdict::pass || ch.result == verdict::skip)) {
        lines.push_back(fmt::format("mrcheck: {}: {}: {}", ch.id, to_string(ch.result), escape_line(ch.summary, 600)));
      }
    }
    for (auto& l : failure_lines(rep)) lines.push_back(escape_line(l, 1500));
    if (lines.empty()) return lines;  // all passed, not verbose: nothing to say, as on the host
  }
  if (!at.prog.empty()) {
    // A host task's descendant (container_watch::descendants): named, since the task's own program is not it.
    std::string who = fmt::format("{} (pid {}), started by the task,", escape_line(at.prog, 64), at.target);
    lines.insert(lines.begin(),
                 rt.runtime == container_runtime::unknown || rt.runtime == container_runtime::none
                     ? fmt::format("mrcheck: container: {} entered a root directory or mount namespace of its own "
                                   "after mrcheck's task_init: checked there now, with the libraries it sees; a "
                                   "failure here cannot stop the task",
                                   who)
                     : fmt::format("mrcheck: container: {} entered its container ({}) after mrcheck's task_init: "
                                   "checked now; a failure here cannot stop the task",
                                   who, to_string(rt.runtime)));
    return lines;
  }
  // A launcher starts the container itself, after every plugin's task_init: no plugstack order changes that.
  std::string why = rt.launcher_prog.empty()
                        ? std::string("list mrcheck after the container plugin in plugstack.conf")
                        : fmt::format("the task's own `{}` started it", escape_line(rt.launcher_prog, 32));
  lines.insert(lines.begin(), fmt::format("mrcheck: container: the task entered its container ({}) after mrcheck's "
                                          "task_init: checked now; a failure here cannot stop the task ({})",
                                          to_string(rt.runtime), why));
  return lines;
}

// What the watcher prints for what it saw (docs/containers.md).
std::vector<std::string> deferred_lines(const container_state& st, const container_probe_request& req,
                                        const runtime_guess& rt, const entry_seen& at,
                                        std::chrono::milliseconds wait_for_entry, container_watch how) {
  // A host task that started no container is the common case: nothing to say.
  if (at.followed_tree && at.what != entry::entered) return {};
  bool launcher = how == container_watch::launcher;
  switch (at.what) {
    case entry::entered: return deferred_verdict_lines(st, req, rt, at);
    case entry::ended:
      // A launcher that ends without a container failed to start one (its own error is above). With a container
      // plugin the step may have asked for no container and run a short program on the host: only when asked.
      if (!launcher && !req.verbose) return {};
      return {
          "mrcheck: container: not checked: the task ended before it entered a container (when the "
          "container runtime failed, its own error is above)"};
    case entry::not_yet: break;
  }
  return {
      fmt::format("mrcheck: container: not checked: the task was not in a container after {} s (importing a "
                  "large image takes longer: raise container_wait on mrcheck's plugstack line or in its config file)",
                  std::chrono::duration_cast<std::chrono::seconds>(wait_for_entry).count())};
}

}  // namespace

status spawn_deferred_container_probe(const container_state& st_in, pid_t task, container_probe_request req,
                                      runtime_guess rt, std::chrono::milliseconds wait_for_entry, container_watch how) {
  // kill(0, 0) and /proc/0 would make a watcher that never sees its task end, only container_wait.
  if (task <= 0) return status::error(fmt::format("no task to watch (pid {})", task));
  child_spec spec;
  // Detached (double fork, as the post-exec watcher of src/step/post_exec.cpp): the task child execs right
  // after us and never reaps it. It holds the task's stderr and the helper's descriptor (as fd 3), nothing else
  // of the task's: an inherited pipe end would keep srun's I/O open.
  spec.detach = true;
  spec.new_session = true;
  spec.contain = false;
  spec.reset_oom_score_adj = false;
  spec.out = child_stream::null;
  spec.err = child_stream::inherit;
  container_state st = st_in;
  if (st.helper_fd >= 0) {
    spec.extra_fds.push_back({3, st.helper_fd});
    st.helper_fd = 3;
  }
  spec.run_in_child = [st, task, req, rt, wait_for_entry, how]() -> int {
    // The host's /dev/null again, for the helper it starts inside a container that may have none (the task's
    // was closed with the rest of its descriptors when this watcher was set up, src/sys/child.cpp).
    child_keep_null_device();
    entry_seen at = wait_for_container(task, st, wait_for_entry, how, rt.launcher_prog);
    std::string text;
    for (auto& l : deferred_lines(st, req, rt, at, wait_for_entry, how)) text += l + "\n";
    if (!text.empty()) {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    }
    return 0;
  };
  // Detached: the handle has nothing to wait for, it only closes its descriptors.
  auto c = child_process::spawn(spec);
  if (!c) return c.error().with_context("container probe watcher");
  return status::ok();
}

}  // namespace mrcheck
