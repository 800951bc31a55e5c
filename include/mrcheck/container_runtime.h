// The container runtime a task runs in, guessed from what each runtime leaves behind, and the one-line fixes
// for it (docs/containers.md). Below the container probe (container.h) because the diagnosis names the
// runtime's fix too (diagnosis.h); implemented in src/explain/causes/container_runtime.cpp.
#pragma once

#include <mrcheck/sysroot.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ---- the runtime --------------------------------------------------------------------------------------------

enum class container_runtime { none, pyxis, enroot, apptainer, podman, docker, kubernetes, unknown };
std::string_view to_string(container_runtime r);

// What a runtime leaves in a task's environment and root. `marker_files` are the absolute paths (as seen in the
// container) of the markers that exist: /.dockerenv, /run/.containerenv, /.singularity.d,
// /var/run/secrets/kubernetes.io/serviceaccount; `containerenv` the text of /run/.containerenv.
struct runtime_signs {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<std::string> marker_files;
  std::string containerenv;
  bool own_namespace = false;  // the task's mount namespace or root differs from slurmstepd's
};
struct runtime_guess {
  container_runtime runtime = container_runtime::none;
  std::string evidence;  // "spank_pyxis.so is loaded in this step", "/.dockerenv in the container"
  // A launcher whose container is started outside the task's own processes (podman's conmon, dockerd): nothing
  // in the task ever enters it, so no SPANK plugin can probe it (launcher_runtime).
  bool outside_task = false;
  std::string launcher_prog{};  // launcher_runtime: the launcher's file name ("apptainer", "chroot"), else ""
};
// Most specific first: pyxis (PYXIS_*), enroot (ENROOT_*), Apptainer/Singularity
// (APPTAINER_*/SINGULARITY_* or /.singularity.d), podman (/run/.containerenv with engine="podman..." or
// container=podman), docker (/.dockerenv), Kubernetes (KUBERNETES_SERVICE_HOST or the serviceaccount mount);
// a task in its own namespace with none of those is `unknown`.
runtime_guess guess_runtime(const runtime_signs& s);
// The same, read from a root (explain, `mrcheck report` in a container) and an environment.
runtime_signs signs_from_root(const sysroot& root, std::vector<std::string> env);

// The task's own program is a container launcher (docs/containers.md, "Containers the task starts"): argv[0]'s
// file name is one of the launchers' table in container_runtime.cpp (`apptainer`, `singularity`,
// `run-singularity`, `enroot start|exec`, `ch-run`, `shifter`, `bwrap`, `chroot`, `unshare --root`; `podman` and
// `docker` `run|exec|start`, which start the container outside the task), or argv[0] is a SIF image run
// directly (`image_head`, the first bytes of that file as the caller read them, starts with SIF's
// "#!/usr/bin/env run-singularity\n"). Then the task starts on the host and the launcher moves it, or a child
// of it, into the container. `none` otherwise.
runtime_guess launcher_runtime(const std::vector<std::string>& argv, std::string_view image_head);
// The first `max` bytes of the file argv[0] names, when it ends in ".sif" (what launcher_runtime looks at); ""
// when it does not or cannot be read.
std::string sif_head(const std::vector<std::string>& argv, std::size_t max = 64);

// One line each, for the runtime: how to raise the locked-memory limit, how to pass the RDMA devices in, how to
// get a matching rdma-core into the image.
std::string container_memlock_fix(container_runtime r);
std::string container_device_fix(container_runtime r);
std::string container_rdma_core_fix(container_runtime r);

// The runtime a container SPANK plugin stands for: pyxis for a file name with "pyxis" in it (then enroot runs
// the container), `none` otherwise (a site's own plugin: the signs inside tell). The task's environment does
// not name pyxis (docs/facts/containers.md §2), so this is how a task pyxis moved is recognised.
runtime_guess plugin_runtime(std::string_view plugin);

// ---- logs (mrcheck explain) ---------------------------------------------------------------------------------

// Container evidence in a job log: the runtime's own lines (pyxis:, enroot, Apptainer's INFO/FATAL lines),
// libibverbs' "Driver X does not support the kernel ABI" and "couldn't load driver" warnings, NCCL's
// "Failed to open libibverbs" and its silent NET/Socket fallback. One note per kind, in order of first sight.
struct container_log_note {
  std::string what;  // "runtime" | "kernel_abi" | "no_libibverbs" | "socket_fallback" | "provider_load"
  std::size_t line = 0;
  std::string text;  // the explanation, with the fix for the runtime
};
struct container_log_scan {
  container_runtime runtime = container_runtime::none;
  std::vector<container_log_note> notes;
  bool saw_net_ib = false;
  bool saw_net_socket = false;
  void feed(std::string_view line, std::size_t number);
  // Notes that need the whole log (the socket fallback: NET/Socket and never NET/IB).
  void finish();
};

}  // namespace mrcheck
