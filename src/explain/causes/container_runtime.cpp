// Which container runtime a task runs in, from what each really leaves behind, and each one's own fix text.
// The sources of every sign and fix: docs/facts/containers.md §2 (the signs), §3 (limits).
#include <mrcheck/container_runtime.h>

#include <mrcheck/launchers.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <regex>

namespace mrcheck {

std::string_view to_string(container_runtime r) {
  switch (r) {
    case container_runtime::none: return "none";
    case container_runtime::pyxis: return "pyxis/enroot";
    case container_runtime::enroot: return "enroot";
    case container_runtime::apptainer: return "Apptainer/Singularity";
    case container_runtime::podman: return "podman";
    case container_runtime::docker: return "docker";
    case container_runtime::kubernetes: return "Kubernetes";
    case container_runtime::unknown: return "a container";
  }
  return "a container";
}

namespace {

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The first variable whose name starts with one of `prefixes`, as "NAME=VALUE" (escaped, bounded).
std::optional<std::string> env_with_prefix(const std::vector<std::string>& env,
                                           std::initializer_list<std::string_view> prefixes) {
  for (const auto& e : env) {
    for (auto p : prefixes) {
      if (has_prefix(e, p)) return escape_line(e, 96);
    }
  }
  return std::nullopt;
}

bool has_marker(const runtime_signs& s, std::string_view path) {
  return std::find(s.marker_files.begin(), s.marker_files.end(), path) != s.marker_files.end();
}

}  // namespace

namespace {

// The programs a task runs to start its own container (docs/containers.md, "Containers the task starts").
// `subcommands`: argv[1] must be one of them ("" takes any); `option`: one of these words must follow
// (`unshare` only makes a container with a root of its own). `outside`: the container's processes are not the
// task's descendants (podman hands the container to conmon, docker to dockerd), so it cannot be probed.
struct launcher_row {
  std::string_view prog;
  std::initializer_list<std::string_view> subcommands;
  std::initializer_list<std::string_view> option;
  container_runtime runtime;
  bool outside;
};
// The launchers Apptainer installs (`singularity` is its compatibility link) and SingularityCE's; the SIF
// launch line runs `run-singularity`, which execs `apptainer run` (docs/facts/containers.md §2).
const launcher_row k_launchers[] = {
    {"apptainer", {}, {}, container_runtime::apptainer, false},
    {"singularity", {}, {}, container_runtime::apptainer, false},
    {"run-singularity", {}, {}, container_runtime::apptainer, false},
    {"enroot", {"start", "exec"}, {}, container_runtime::enroot, false},
    {"ch-run", {}, {}, container_runtime::unknown, false},
    {"shifter", {}, {}, container_runtime::unknown, false},
    {"bwrap", {}, {}, container_runtime::unknown, false},
    {"chroot", {}, {}, container_runtime::unknown, false},
    {"unshare", {}, {"--root", "-R"}, container_runtime::unknown, false},
    {"podman", {"run", "exec", "start"}, {}, container_runtime::podman, true},
    {"docker", {"run", "exec", "start"}, {}, container_runtime::docker, true},
};

bool word_in(std::string_view w, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), w) != list.end();
}

}  // namespace

runtime_guess launcher_runtime(const std::vector<std::string>& argv, std::string_view image_head) {
  if (argv.empty()) return {};
  std::string_view prog = argv[0];
  if (auto slash = prog.rfind('/'); slash != std::string_view::npos) prog.remove_prefix(slash + 1);
  for (const auto& row : k_launchers) {
    if (prog != row.prog) continue;
    if (row.subcommands.size() > 0 && (argv.size() < 2 || !word_in(argv[1], row.subcommands))) return {};
    if (row.option.size() > 0 && std::none_of(argv.begin() + 1, argv.end(), [&row](const std::string& a) {
          std::string_view w = a;
          return word_in(w.substr(0, w.find('=')), row.option);
        })) {
      return {};
    }
    std::string what = escape_line(prog, 32);
    if (argv.size() > 1) what += " " + escape_line(argv[1], 32);
    return {row.runtime, fmt::format("the task's program is `{}`", what), row.outside, std::string(prog)};
  }
  constexpr std::string_view sif_launch = "#!/usr/bin/env run-singularity\n";
  if (prog.size() > 4 && prog.ends_with(".sif") && has_prefix(image_head, sif_launch))
    return {container_runtime::apptainer, fmt::format("the task's program is the SIF image {}", escape_line(prog, 64)),
            false, std::string(prog)};
  return {};
}

bool is_launcher_program(std::string_view file_name) {
  return std::any_of(std::begin(k_launchers), std::end(k_launchers),
                     [file_name](const launcher_row& row) { return row.prog == file_name; });
}

std::string sif_head(const std::vector<std::string>& argv, std::size_t max) {
  if (argv.empty() || argv[0].size() <= 4 || !argv[0].ends_with(".sif")) return {};
  // A plain open of what the task will exec (relative to its working directory, as execve resolves it); an
  // image is large, so no sysroot read (which refuses a file above its maximum rather than cutting it).
  int fd = ::open(argv[0].c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return {};
  std::string head(max, '\0');
  ssize_t n = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return head;
}

runtime_guess guess_runtime(const runtime_signs& s) {
  runtime_guess g;
  // pyxis exports PYXIS_* only to the enroot it runs, and slurmstepd removes the _SLURM_SPANK_OPTION_* variables
  // before any task starts: a task pyxis moved shows neither (docs/facts/containers.md §2), and is recognised by
  // the plugin mapped into it (plugin_runtime). PYXIS_* stays a sign for an environment that does carry it.
  if (auto e = env_with_prefix(s.env, {"PYXIS_"})) {
    g = {container_runtime::pyxis, *e + " in the task environment"};
  } else if (auto e2 = env_with_prefix(s.env, {"ENROOT_"})) {
    g = {container_runtime::enroot, *e2 + " in the task environment"};
  } else if (auto e3 = env_with_prefix(s.env, {"APPTAINER_CONTAINER=", "APPTAINER_NAME=", "SINGULARITY_CONTAINER=",
                                               "SINGULARITY_NAME=", "APPTAINER_", "SINGULARITY_"})) {
    g = {container_runtime::apptainer, *e3 + " in the task environment"};
  } else if (has_marker(s, "/.singularity.d")) {
    g = {container_runtime::apptainer, "/.singularity.d in the container"};
  } else if (has_marker(s, "/run/.containerenv") ||
             std::find(s.env.begin(), s.env.end(), "container=podman") != s.env.end()) {
    // podman writes /run/.containerenv (engine="podman-4.3.1"); other engines may write it too.
    bool podman = s.containerenv.find("engine=\"podman") != std::string::npos ||
                  std::find(s.env.begin(), s.env.end(), "container=podman") != s.env.end();
    g = {podman ? container_runtime::podman : container_runtime::unknown,
         has_marker(s, "/run/.containerenv") ? "/run/.containerenv in the container"
                                             : "container=podman in the task environment"};
  } else if (has_marker(s, "/.dockerenv")) {
    g = {container_runtime::docker, "/.dockerenv in the container"};
  } else if (auto e4 = env_with_prefix(s.env, {"KUBERNETES_SERVICE_HOST="})) {
    g = {container_runtime::kubernetes, *e4 + " in the task environment"};
  } else if (has_marker(s, "/var/run/secrets/kubernetes.io/serviceaccount")) {
    g = {container_runtime::kubernetes, "a Kubernetes service account mount in the container"};
  } else if (s.own_namespace) {
    g = {container_runtime::unknown, "the task runs in its own mount namespace"};
  }
  return g;
}

runtime_guess plugin_runtime(std::string_view plugin) {
  if (plugin.find("pyxis") == std::string_view::npos) return {};
  return {container_runtime::pyxis, fmt::format("{} is loaded in this step", plugin)};
}

runtime_signs signs_from_root(const sysroot& root, std::vector<std::string> env) {
  runtime_signs s;
  s.env = std::move(env);
  for (const char* m :
       {"/.dockerenv", "/run/.containerenv", "/.singularity.d", "/var/run/secrets/kubernetes.io/serviceaccount"}) {
    if (root.exists(m)) s.marker_files.emplace_back(m);
  }
  if (auto c = root.read("/run/.containerenv", 64 * 1024)) s.containerenv = std::move(*c);
  return s;
}

std::string container_memlock_fix(container_runtime r) {
  constexpr std::string_view slurm =
      "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and LimitMEMLOCK=infinity for slurmd";
  switch (r) {
    case container_runtime::pyxis:
    case container_runtime::enroot:
      return fmt::format(
          "a pyxis/enroot task has the step's own limits (enroot inherits them): fix the limit in Slurm, "
          "{}; no container option changes it",
          slurm);
    case container_runtime::apptainer:
      return fmt::format("Apptainer inherits the limits of the process that starts it: fix the limit in Slurm, {}",
                         slurm);
    case container_runtime::podman:
      return "podman run --ulimit memlock=-1:-1 (rootless podman cannot go above the user's hard limit: raise it "
             "for the user first), and LimitMEMLOCK=infinity for slurmd on the host";
    case container_runtime::docker:
      return "docker run --ulimit memlock=-1:-1 (or --cap-add=IPC_LOCK), and LimitMEMLOCK=infinity for slurmd on the "
             "host";
    case container_runtime::kubernetes:
      return "the pod's runtime sets the limit: give the container an unlimited memlock limit (LimitMEMLOCK=infinity "
             "for containerd/CRI-O) or CAP_IPC_LOCK in its securityContext";
    case container_runtime::none:
    case container_runtime::unknown: break;
  }
  // Unknown runtime: the generic container advice, as before runtimes were told apart (mscclpp #335 is the
  // public report of this failure in a container).
  return fmt::format(
      "raise the container's locked-memory limit where the runtime starts it (docker/podman: "
      "--ulimit memlock=-1:-1, or --cap-add=IPC_LOCK), and {} on the host (mscclpp #335)",
      slurm);
}

std::string container_device_fix(container_runtime r) {
  switch (r) {
    case container_runtime::pyxis:
    case container_runtime::enroot:
      return "enroot's 99-mellanox.sh hook mounts only the HCAs named in MELLANOX_VISIBLE_DEVICES (read from the "
             "image's environment): keep the hook enabled in /etc/enroot/hooks.d and unset MELLANOX_VISIBLE_DEVICES or "
             "set it to `all` (docker: ENV MELLANOX_VISIBLE_DEVICES=all)";
    case container_runtime::apptainer:
      return "Apptainer shares the host's /dev unless --contain/--containall: drop them or add "
             "--bind /dev/infiniband,/sys/class/infiniband";
    case container_runtime::podman:
      return "podman run --device=/dev/infiniband (each uverbsN and rdma_cm) and, rootless, --group-add keep-groups";
    case container_runtime::docker: return "docker run --device=/dev/infiniband --cap-add=IPC_LOCK (or --privileged)";
    case container_runtime::kubernetes:
      return "request the RDMA devices through an RDMA device plugin (k8s-rdma-shared-dev-plugin, the NVIDIA network "
             "operator) in the pod spec";
    case container_runtime::none:
    case container_runtime::unknown: break;
  }
  return "pass /dev/infiniband (every uverbsN and rdma_cm) into the container and keep /sys/class/infiniband visible";
}

std::string container_rdma_core_fix(container_runtime r) {
  std::string_view what =
      "use an image whose rdma-core (libibverbs1 and ibverbs-providers, or MLNX/DOCA-OFED's) matches the host's "
      "kernel driver";
  switch (r) {
    case container_runtime::pyxis:
    case container_runtime::enroot:
      return fmt::format("{}: enroot no longer injects the host's MOFED user space, the image's libraries always run",
                         what);
    case container_runtime::apptainer:
      return fmt::format(
          "{}, or bind the host's: --bind /usr/lib/x86_64-linux-gnu/libibverbs,"
          "/usr/lib/x86_64-linux-gnu/libibverbs.so.1 (same distribution only)",
          what);
    default: break;
  }
  return std::string(what);
}

// ---- logs -------------------------------------------------------------------------------------------------

void container_log_scan::feed(std::string_view line, std::size_t number) {
  auto note = [&](std::string_view what, std::string text) {
    for (const auto& n : notes) {
      if (n.what == what) return;
    }
    notes.push_back({std::string(what), number, std::move(text)});
  };
  if (runtime == container_runtime::none) {
    container_runtime seen = container_runtime::none;
    if (line.find("pyxis: ") != std::string_view::npos)
      seen = container_runtime::pyxis;
    else if (line.find("[ERROR] enroot") != std::string_view::npos || line.find("enroot-") != std::string_view::npos)
      seen = container_runtime::enroot;
    else if (line.find("apptainer") != std::string_view::npos || line.find("singularity") != std::string_view::npos ||
             line.find("Apptainer") != std::string_view::npos || line.find("Singularity") != std::string_view::npos)
      seen = container_runtime::apptainer;
    else if (line.find("podman") != std::string_view::npos || line.find("conmon") != std::string_view::npos)
      seen = container_runtime::podman;
    if (seen != container_runtime::none) {
      runtime = seen;
      note("runtime", fmt::format("the job ran in {} (line {}): the libraries that failed are the image's, the kernel "
                                  "driver the host's",
                                  to_string(seen), number));
    }
  }
  // libibverbs (rdma-core libibverbs/init.c) when a provider's ABI range does not include the kernel driver's.
  static const std::regex abi(R"(Driver (\S+) does not support the kernel ABI of (\d+) \(supports (\d+) to (\d+)\))");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(line.begin(), line.end(), m, abi)) {
    note("kernel_abi",
         fmt::format("libibverbs' {} provider supports kernel ABI {} to {}, the host's driver has {}: the "
                     "image's rdma-core does not fit the host kernel, libibverbs skips the device and NCCL "
                     "finds no InfiniBand device; fix: {}",
                     escape_line(m[1].str(), 32), m[3].str(), m[4].str(), m[2].str(),
                     container_rdma_core_fix(runtime)));
  }
  if (line.find("couldn't load driver") != std::string_view::npos) {
    note("provider_load",
         fmt::format("libibverbs could not load a provider (line {}): the image's ibverbs-providers are "
                     "missing or of another rdma-core release than its libibverbs; fix: {}",
                     number, container_rdma_core_fix(runtime)));
  }
  if (line.find("Failed to open libibverbs.so") != std::string_view::npos) {
    note("no_libibverbs", fmt::format("NCCL found no libibverbs (line {}): it then runs over TCP sockets without an "
                                      "error; fix: install libibverbs1 and ibverbs-providers in the image ({})",
                                      number, container_rdma_core_fix(runtime)));
  }
  if (line.find("NET/IB") != std::string_view::npos) saw_net_ib = true;
  if (line.find("NET/Socket") != std::string_view::npos) saw_net_socket = true;
}

void container_log_scan::finish() {
  if (saw_net_socket && !saw_net_ib) {
    notes.push_back({"socket_fallback", 0,
                     "NCCL used NET/Socket and never NET/IB: what it sent over the network (between nodes, or between "
                     "ranks it took for different hosts) went over TCP, without an error (no libibverbs, no provider "
                     "for the device, or no RDMA device in the container)"});
  }
}

}  // namespace mrcheck
