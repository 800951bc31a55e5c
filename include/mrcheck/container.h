// The job's container (docs/containers.md). A checked task that runs in a container gets its facts and its registration
// probe from inside that container: the image's libibverbs and providers, its NCCL, its /dev/infiniband and
// /sys/class/infiniband, under the task's limits, judged against the host's kernel, devices and driver.
// How the probe gets into the container, and what each runtime leaves behind: docs/containers.md.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/child.h>
#include <mrcheck/container_runtime.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ---- what the probe helper saw inside -----------------------------------------------------------------------

// The helper's "key=value" lines (src/container/ctprobe.c), taken only in the shape probe_protocol.h gives: an
// unknown or repeated key, a line without '=', a control byte or an overlong line makes the report invalid (the
// helper never prints any of those; a library of the image that writes on its stdout might).
struct ctprobe_view {
  std::map<std::string, std::string> kv;
  bool complete = false;  // the helper printed its last line ("end=1")
};
result<ctprobe_view> parse_ctprobe_output(std::string_view out);

// The host's side, read before the task enters its container.
struct host_rdma_view {
  std::vector<std::string> devices;                  // /sys/class/infiniband entries
  std::vector<std::string> dev_infiniband;           // /dev/infiniband entries ("uverbs0", "rdma_cm", ...)
  std::optional<int> uverbs_abi;                     // /sys/class/infiniband_verbs/abi_version
  std::map<std::string, int> device_abi;             // device -> /sys/class/infiniband_verbs/uverbsN/abi_version
  std::map<std::string, std::string> device_driver;  // device -> kernel driver (mlx5_core, ...)
  std::string rdma_core_version;                     // the host's libibverbs1 (dpkg), "" unknown
  bool nvidia_driver = false;                        // /proc/driver/nvidia/version exists
};
host_rdma_view read_host_rdma_view(const sysroot& root);

// How the helper ran, for the verdicts about the helper itself (no loader, crashed, timed out).
struct ctprobe_run {
  child_outcome outcome;
  std::string helper;   // host path of the helper, for messages
  bool started = true;  // false: it could not even be forked (message in `error`)
  std::string error;
};

// The verdicts: `container` (runtime, devices, rdma-core against the host), `container_mr` (the registration
// inside), `container_nccl` (the image's NCCL against the host's CUDA driver, when `nccl`). Pure: unit tested.
std::vector<check_result> judge_container(const ctprobe_run& run, const host_rdma_view& host, const runtime_guess& rt,
                                          bool nccl);

// rdma-core release of a libibverbs file name: "libibverbs.so.1.14.44.0" -> "44.0"; "" when not of that form.
std::string rdma_core_from_soname(std::string_view file_name);
// Provider ABI suffix: "libmlx5-rdmav34.so" -> 34; nullopt otherwise.
std::optional<int> provider_pabi(std::string_view file_name);

// ---- getting in -----------------------------------------------------------------------------------------------

// Per task child, carried from slurmstepd (root, host view) to task_init (job user, maybe in the container).
struct container_state {
  int helper_fd = -1;  // the helper, opened O_PATH on the host (inherited, close-on-exec)
  std::string helper_path;
  std::string helper_error;  // why helper_fd is -1
  bool host_read = false;
  host_rdma_view host;
  std::string host_mnt_ns;   // readlink of slurmstepd's /proc/self/ns/mnt ("mnt:[4026531841]")
  std::string host_root_id;  // "dev:ino" of slurmstepd's "/"
};
// slurmstepd, before the tasks fork (or task_init_privileged): open the helper, read the host's RDMA view through
// `host` (the caller's sysroot: slurmstepd's is the live host). The mount namespace and root's identity are this
// process's own, read live.
void prepare_container_state(container_state& st, const std::string& helper_path, const sysroot& host);
// The helper's path: next to `mrcheck_helper` (the plugin's helper=) when it is there, else this build's
// <libexecdir>/mrcheck/mrcheck-ctprobe.
std::string ctprobe_path(const std::string& mrcheck_helper);

// Where the task is at task_init.
enum class task_place {
  host,         // in slurmstepd's mount namespace and root, no container plugin loaded
  inside,       // already in its container (a container plugin listed before mrcheck joined it)
  maybe_later,  // on the host, and a container plugin (`container_plugins`) is loaded in this slurmstepd: it may
                // move the task into a container after mrcheck's task_init (SPANK plugins see no other
                // plugin's options, so whether this step uses it is known only once the task is in or has exec'd)
};
struct task_location {
  task_place place = task_place::host;
  std::string detail;      // "mount namespace mnt:[...] (slurmstepd: mnt:[...])", the plugin seen
  runtime_guess launcher;  // maybe_later because the task's program is a container launcher (`apptainer exec`)
  std::string plugin;      // the `container_plugins` plugin mapped in this process ("spank_pyxis.so"), or ""
};
// `container_plugins`: comma-separated file names (config key container_plugins=), matched against the
// libraries mapped into this process (/proc/self/maps). `argv`: the task's command (S_JOB_ARGV); a container
// launcher (launcher_runtime) makes the task maybe_later too.
task_location locate_task(const container_state& st, std::string_view container_plugins,
                          const std::vector<std::string>& argv = {});

struct container_probe_request {
  std::vector<std::string> env;                      // the task's environment
  std::uint64_t memlock_soft = 0, memlock_hard = 0;  // the task's final limits (k_unlimited = unlimited)
  std::uint64_t reg_bytes = 0;                       // bytes to register (0: no registration)
  bool nccl = false;
  std::chrono::milliseconds timeout{30000};
  pid_t join_pid = 0;         // 0: run where we are; else join this process's user+mount namespaces
  bool fail_is_warn = false;  // on_fail=warn: the deferred watcher reports a FAIL as WARN
  bool verbose = false;       // --mr-check=...,verbose: the deferred watcher prints its PASS lines too
};
// Runs the helper by descriptor, inside (join_pid's namespaces, or the current ones). Never throws.
ctprobe_run run_ctprobe(const container_state& st, const container_probe_request& req);
// The runtime of a task the helper ran in: `known` when it names one (the container plugin, the launcher),
// else guessed from the task's environment and what the helper saw inside (marker files, /run/.containerenv).
runtime_guess runtime_inside(const ctprobe_run& run, const std::vector<std::string>& env, runtime_guess known);

// What the deferred watcher waits for.
enum class container_watch {
  plugin,       // a container plugin after mrcheck moves the task itself into another mount namespace
  launcher,     // the task's program is a container launcher (task_location::launcher): the task or a descendant
  descendants,  // a host task (no launcher, no container plugin): any process of its tree that enters a root of
                // its own and execs there (docs/containers.md, "Containers the task starts"); silent otherwise
};

// One process of the task's tree as the descendants watcher saw it, breadth first from the task.
struct task_process {
  pid_t pid = 0;
  std::string exe;        // readlink of /proc/PID/exe, "" when unreadable (gone, not dumpable)
  bool own_root = false;  // its root directory is not slurmstepd's (chroot, pivot_root in its mount namespace)
};
// The first process of `seen` that has a root of its own and runs a program there that is not a launcher still on
// its way in: its exe's file name is neither one of launcher_runtime's table (`chroot` between its chroot() and
// its exec, `unshare --root`) nor Apptainer's `starter`, and it is not the task child before its exec
// (`stepd_exe`, slurmstepd's binary). Pure: unit tested. nullopt: none yet.
std::optional<std::size_t> pick_entered_process(const std::vector<task_process>& seen, std::string_view stepd_exe);

// task_init with the task still on the host: forks a watcher (job user, holding the task's stderr).
// `plugin` (a container plugin after mrcheck may move the task into its container): it waits until task `task`
// is in another mount namespace (then runs the helper there and writes the verdict lines to stderr, the PASS
// lines only with `req.verbose`; it cannot stop the task) or has exec'd on the host (then it watches on as for
// `descendants`: this step asked the plugin for no container, its processes may still start one), at
// most `wait_for_entry` (config container_wait: a container plugin may import an image first). A task that ends
// without entering a container, or is not in one by then, gets one line that says so. `launcher` (the task's
// program is a container launcher, task_location::launcher): the task itself stays outside; the watcher waits for
// a descendant of it that has exec'd its own program in another mount namespace and probes there.
// `descendants` (a host task): the watcher follows the task's tree (pick_entered_process) until the task ends or
// `wait_for_entry` runs out, and says nothing unless a process of it entered a root of its own.
status spawn_deferred_container_probe(const container_state& st, pid_t task, container_probe_request req,
                                      runtime_guess rt, std::chrono::milliseconds wait_for_entry,
                                      container_watch how = container_watch::plugin);

}  // namespace mrcheck
