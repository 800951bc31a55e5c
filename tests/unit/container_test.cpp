// The container verdicts (src/container/judge.cpp) and runtime recognition (src/explain/causes/container_runtime.cpp) over
// helper outputs as src/container/ctprobe.c prints them.
#include <mrcheck/container.h>
#include <mrcheck/container_runner.h>
#include <mrcheck/launchers.h>

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace mrcheck {
namespace {

ctprobe_run ran(std::string out, std::string err = "") {
  ctprobe_run r;
  r.helper = "/usr/libexec/mrcheck/mrcheck-ctprobe";
  r.outcome.exited = true;
  r.outcome.exit_code = 0;
  r.outcome.out = std::move(out);
  r.outcome.err = std::move(err);
  return r;
}

// A bookworm image with the host's rdma-core and one HCA inside.
std::string good(std::string extra = "") {
  return "ctprobe=1\nids=1000 1000\nmemlock=unlimited unlimited\ndev_infiniband=present uverbs0,rdma_cm\n"
         "sys_infiniband=present mlx5_0\ndpkg_libibverbs1=44.0-2\nmarkers=\n"
         "verbs=loaded /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0\nverbs_iova2=1\nverbs_dmabuf=1\n"
         "providers=present libmlx5-rdmav34.so,libefa-rdmav34.so\ndevices=1 mlx5_0\nreg=ok 0 mlx5_0 67108864\n" +
         extra + "end=1\n";
}

host_rdma_view host_with_hca() {
  host_rdma_view h;
  h.devices = {"mlx5_0"};
  h.dev_infiniband = {"rdma_cm", "uverbs0"};
  h.rdma_core_version = "44.0";
  h.nvidia_driver = true;
  return h;
}

const check_result* find(const std::vector<check_result>& v, std::string_view id) {
  for (const auto& c : v) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

runtime_guess pyxis() { return {container_runtime::pyxis, "PYXIS_VERSION=0.24.0 in the task environment"}; }

TEST(container_judge, matching_image_passes) {
  auto v = judge_container(ran(good()), host_with_hca(), pyxis(), false);
  ASSERT_NE(find(v, "container"), nullptr);
  EXPECT_EQ(find(v, "container")->result, verdict::pass);
  EXPECT_EQ(find(v, "container")->summary, "pyxis/enroot: rdma-core 44.0 (host 44.0), 1 device(s) (mlx5_0)");
  ASSERT_NE(find(v, "container_mr"), nullptr);
  EXPECT_EQ(find(v, "container_mr")->result, verdict::pass);
}

TEST(container_judge, no_libibverbs_fails_where_the_host_has_rdma) {
  std::string out =
      "ctprobe=1\ndev_infiniband=present uverbs0\nsys_infiniband=present mlx5_0\n"
      "verbs=none libibverbs.so.1: cannot open shared object file: No such file or directory\nend=1\n";
  auto v = judge_container(ran(out), host_with_hca(), pyxis(), false);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].result, verdict::fail);
  EXPECT_NE(v[0].summary.find("NCCL then runs over TCP sockets without an error"), std::string::npos);
  EXPECT_NE(v[0].hint.find("enroot no longer injects"), std::string::npos);
  auto none = judge_container(ran(out), host_rdma_view{}, pyxis(), false);
  EXPECT_EQ(none[0].result, verdict::warn);
}

TEST(container_judge, kernel_abi_warning_is_a_failure_with_the_rdma_core_fix) {
  auto v = judge_container(
      ran(good(),
          "libibverbs: Warning: Driver mlx5 does not support the kernel ABI of 2 (supports 1 to 1) for device "
          "/sys/class/infiniband/mlx5_0\n"),
      host_with_hca(), pyxis(), false);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].result, verdict::fail);
  EXPECT_NE(v[0].summary.find("Driver mlx5 does not support the kernel ABI of 2 (supports 1 to 1)"), std::string::npos);
}

TEST(container_judge, devices_hidden_by_mellanox_visible_devices) {
  std::string out = good("mellanox_visible_devices=void\n");
  out.replace(out.find("devices=1 mlx5_0"), 16, "devices=0 ");
  auto v = judge_container(ran(out), host_with_hca(), pyxis(), false);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].result, verdict::fail);
  EXPECT_NE(v[0].summary.find("MELLANOX_VISIBLE_DEVICES=void hides every HCA"), std::string::npos);
  EXPECT_NE(v[0].hint.find("99-mellanox.sh"), std::string::npos);
}

TEST(container_judge, dev_infiniband_missing_gets_the_runtime_fix) {
  std::string out = good();
  out.replace(out.find("dev_infiniband=present uverbs0,rdma_cm"), 38,
              "dev_infiniband=missing No such file or directory");
  out.replace(out.find("devices=1 mlx5_0"), 16, "devices=0 ");
  auto v = judge_container(ran(out), host_with_hca(), {container_runtime::podman, "x"}, false);
  EXPECT_EQ(v[0].result, verdict::fail);
  EXPECT_NE(v[0].summary.find("/dev/infiniband is not in the container"), std::string::npos);
  EXPECT_NE(v[0].hint.find("podman run --device=/dev/infiniband"), std::string::npos);
}

TEST(container_judge, old_rdma_core_without_dmabuf_warns) {
  std::string out = good();
  out.replace(out.find("libibverbs.so.1.14.44.0"), 23, "libibverbs.so.1.11.33.2");
  out.replace(out.find("verbs_dmabuf=1"), 14, "verbs_dmabuf=0");
  out.replace(out.find("libmlx5-rdmav34.so,libefa-rdmav34.so"), 36, "libmlx5-rdmav25.so");
  auto v = judge_container(ran(out), host_with_hca(), pyxis(), false);
  EXPECT_EQ(find(v, "container")->result, verdict::warn);
  EXPECT_NE(find(v, "container")->summary.find("rdma-core 33.2 (host 44.0)"), std::string::npos);
  EXPECT_NE(find(v, "container")->summary.find("ibv_reg_dmabuf_mr"), std::string::npos);
}

TEST(container_judge, mixed_provider_releases_fail) {
  std::string out = good();
  out.replace(out.find("libefa-rdmav34.so"), 17, "libefa-rdmav25.so");
  auto v = judge_container(ran(out), host_with_hca(), pyxis(), false);
  EXPECT_EQ(v[0].result, verdict::fail);
  EXPECT_NE(v[0].summary.find("several rdma-core releases"), std::string::npos);
}

TEST(container_judge, registration_enomem_gets_the_runtime_memlock_fix) {
  std::string out = good();
  const std::string ok = "reg=ok 0 mlx5_0 67108864";
  out.replace(out.find(ok), ok.size(), "reg=reg 12 mlx5_0 Cannot allocate memory");
  auto v = judge_container(ran(out), host_with_hca(), pyxis(), false);
  ASSERT_NE(find(v, "container_mr"), nullptr);
  EXPECT_EQ(find(v, "container_mr")->result, verdict::fail);
  EXPECT_NE(find(v, "container_mr")->summary.find("ENOMEM"), std::string::npos);
  EXPECT_NE(find(v, "container_mr")->hint.find("fix the limit in Slurm"), std::string::npos);
  auto d = judge_container(ran(out), host_with_hca(), {container_runtime::docker, "/.dockerenv"}, false);
  EXPECT_NE(find(d, "container_mr")->hint.find("--ulimit memlock=-1:-1"), std::string::npos);
}

TEST(container_judge, nccl_against_the_driver) {
  auto judge = [](std::string nccl_lines) {
    return judge_container(ran(good(nccl_lines)), host_with_hca(), pyxis(), true);
  };
  auto too_new = judge("nccl=22105 /usr/lib/libnccl.so.2\nnccl_cuda=12.4\ncuda_driver=11080 /usr/lib/libcuda.so.1\n");
  EXPECT_EQ(find(too_new, "container_nccl")->result, verdict::fail);
  EXPECT_NE(find(too_new, "container_nccl")->summary.find("NCCL 2.21.5 built for CUDA 12.4"), std::string::npos);
  auto minor = judge("nccl=22105 /usr/lib/libnccl.so.2\nnccl_cuda=12.4\ncuda_driver=12020 /usr/lib/libcuda.so.1\n");
  EXPECT_EQ(find(minor, "container_nccl")->result, verdict::warn);
  auto ok = judge("nccl=22105 /usr/lib/libnccl.so.2\nnccl_cuda=12.4\ncuda_driver=12080 /usr/lib/libcuda.so.1\n");
  EXPECT_EQ(find(ok, "container_nccl")->result, verdict::pass);
  auto no_cuda = judge("nccl=22105 /usr/lib/libnccl.so.2\ncuda_driver=none libcuda.so.1: cannot open\n");
  EXPECT_EQ(find(no_cuda, "container_nccl")->result, verdict::fail);
  auto no_nccl = judge("nccl=none libnccl.so.2: cannot open\n");
  EXPECT_EQ(find(no_nccl, "container_nccl")->result, verdict::skip);
}

TEST(container_judge, helper_failures_are_verdicts) {
  ctprobe_run noloader;
  noloader.outcome.exited = true;
  noloader.outcome.exit_code = 127;
  noloader.outcome.err = "mrcheck: child: execveat /usr/libexec/mrcheck/mrcheck-ctprobe: No such file or directory\n";
  auto v = judge_container(noloader, host_with_hca(), pyxis(), false);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].result, verdict::error);
  EXPECT_NE(v[0].summary.find("no dynamic loader"), std::string::npos);

  ctprobe_run glibc = noloader;
  glibc.outcome.err = "/proc/self/fd/3: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.3.3' not found\n";
  EXPECT_NE(judge_container(glibc, host_with_hca(), pyxis(), false)[0].summary.find("dynamic loader could not start"),
            std::string::npos);

  ctprobe_run crash;
  crash.outcome.signaled = true;
  crash.outcome.term_signal = 11;
  EXPECT_EQ(judge_container(crash, host_with_hca(), pyxis(), false)[0].result, verdict::fail);

  ctprobe_run cut = ran("ctprobe=1\nverbs=loaded /x\n");  // no end line: it stopped half-way
  EXPECT_EQ(judge_container(cut, host_with_hca(), pyxis(), false)[0].result, verdict::error);

  ctprobe_run twice = ran("ctprobe=1\nverbs=a\nverbs=b\nend=1\n");
  EXPECT_NE(judge_container(twice, host_with_hca(), pyxis(), false)[0].summary.find("printed twice"),
            std::string::npos);
}

// The helper runs the image's libraries, which may print on its stdout: its report is taken only in the shape
// probe_protocol.h gives, or refused as a whole.
TEST(container_judge, the_helpers_report_is_taken_only_in_its_known_shape) {
  EXPECT_TRUE(parse_ctprobe_output(good()));
  auto refused = [](const std::string& out, std::string_view why) {
    auto r = parse_ctprobe_output(out);
    ASSERT_FALSE(r) << out;
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
  };
  refused(good("hello from a provider\n"), "malformed line");
  refused(good("verdict=pass\n"), "unknown key 'verdict'");
  refused(good("devices=2 mlx5_0,mlx5_1\n"), "printed twice");
  refused(good("nccl=2.18.3 /x\r\x1b[2Jgone\n"), "control bytes");
  refused(good("nccl=" + std::string(5000, 'x') + "\n"), "a line of");
  // A byte count that is not one is shown escaped, never parsed into an exception.
  auto odd = judge_container(ran(good("").replace(good("").find("reg=ok 0 mlx5_0 67108864"), 24,
                                                  "reg=ok 0 mlx5_0 lots")),
                             host_with_hca(), pyxis(), false);
  ASSERT_NE(find(odd, "container_mr"), nullptr);
  EXPECT_NE(find(odd, "container_mr")->summary.find("registered lots on mlx5_0"), std::string::npos);
  // A refused report is the helper's error, never a pass.
  auto v = judge_container(ran(good("hello from a provider\n")), host_with_hca(), pyxis(), false);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].result, verdict::error);
}

TEST(container_names, sonames_and_providers) {
  EXPECT_EQ(rdma_core_from_soname("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"), "44.0");
  EXPECT_EQ(rdma_core_from_soname("libibverbs.so.1.11.33.2"), "33.2");
  EXPECT_EQ(rdma_core_from_soname("libibverbs.so.1"), "");
  EXPECT_EQ(provider_pabi("libmlx5-rdmav34.so"), 34);
  EXPECT_EQ(provider_pabi("libmlx5.so"), std::nullopt);
  EXPECT_EQ(provider_pabi("libmlx5-rdmavX.so"), std::nullopt);
}

TEST(container_runtime, each_from_what_it_leaves) {
  auto g = [](std::vector<std::string> env, std::vector<std::string> markers, std::string ce = "") {
    runtime_signs s;
    s.env = std::move(env);
    s.marker_files = std::move(markers);
    s.containerenv = std::move(ce);
    return guess_runtime(s).runtime;
  };
  EXPECT_EQ(g({"PYXIS_VERSION=0.24.0"}, {}), container_runtime::pyxis);
  // slurmstepd removes the option variables before any task starts: not a sign (docs/facts/containers.md §2).
  EXPECT_EQ(g({"_SLURM_SPANK_OPTION_pyxis_container_image=nvcr.io#nvidia/pytorch:25.01-py3"}, {}),
            container_runtime::none);
  EXPECT_EQ(g({"ENROOT_ROOTFS=/x"}, {}), container_runtime::enroot);
  EXPECT_EQ(g({"APPTAINER_CONTAINER=/x.sif"}, {}), container_runtime::apptainer);
  EXPECT_EQ(g({}, {"/.singularity.d"}), container_runtime::apptainer);
  EXPECT_EQ(g({}, {"/run/.containerenv"}, "engine=\"podman-4.3.1\"\n"), container_runtime::podman);
  EXPECT_EQ(g({"container=podman"}, {}), container_runtime::podman);
  EXPECT_EQ(g({}, {"/.dockerenv"}), container_runtime::docker);
  EXPECT_EQ(g({"KUBERNETES_SERVICE_HOST=10.0.0.1"}, {}), container_runtime::kubernetes);
  EXPECT_EQ(g({}, {"/var/run/secrets/kubernetes.io/serviceaccount"}), container_runtime::kubernetes);
  EXPECT_EQ(g({"PATH=/bin"}, {}), container_runtime::none);
  // enroot strips /.dockerenv, but a pyxis task with one left would still be pyxis: env first.
  EXPECT_EQ(g({"PYXIS_VERSION=0.24.0"}, {"/.dockerenv"}), container_runtime::pyxis);
}

TEST(container_runtime, launcher_from_the_task_program) {
  const std::string sif = "#!/usr/bin/env run-singularity\n\0\0SIF_MAGIC";
  auto l = [&](std::vector<std::string> argv, std::string_view head = "") {
    return launcher_runtime(argv, head).runtime;
  };
  EXPECT_EQ(l({"/usr/bin/apptainer", "exec", "/images/x.sif", "nvidia-smi"}), container_runtime::apptainer);
  EXPECT_EQ(l({"apptainer", "run", "x.sif"}), container_runtime::apptainer);
  EXPECT_EQ(l({"/opt/singularity/bin/singularity", "exec", "x.sif", "true"}), container_runtime::apptainer);
  EXPECT_EQ(l({"run-singularity", "x.sif"}), container_runtime::apptainer);
  EXPECT_EQ(l({"./pytorch.sif", "train.py"}, sif), container_runtime::apptainer);
  // A .sif that is not a SIF image, a program that only contains the name, an empty command: not a launcher.
  EXPECT_EQ(l({"./pytorch.sif"}, "#!/bin/sh\n"), container_runtime::none);
  EXPECT_EQ(l({"./pytorch.img"}, sif), container_runtime::none);
  EXPECT_EQ(l({"/usr/bin/apptainer-wrapper", "exec"}), container_runtime::none);
  EXPECT_EQ(l({"/apptainer/bin/python3", "train.py"}), container_runtime::none);
  EXPECT_EQ(l({}), container_runtime::none);
  EXPECT_NE(launcher_runtime({"/usr/bin/apptainer", "exec"}, "").evidence.find("`apptainer exec`"), std::string::npos);
  // Containers the task starts with other programs (docs/containers.md, "Containers the task starts").
  EXPECT_EQ(l({"/usr/sbin/chroot", "/images/bullseye", "sh"}), container_runtime::unknown);
  EXPECT_EQ(l({"unshare", "-r", "--root=/images/old", "sh"}), container_runtime::unknown);
  EXPECT_EQ(l({"unshare", "--user", "--map-root-user", "-R", "/images/old"}), container_runtime::unknown);
  EXPECT_EQ(l({"unshare", "--mount", "sh"}), container_runtime::none);  // the host's root, the host's libraries
  EXPECT_EQ(l({"enroot", "start", "--rw", "pytorch"}), container_runtime::enroot);
  EXPECT_EQ(l({"enroot", "list"}), container_runtime::none);
  EXPECT_EQ(l({"/usr/bin/ch-run", "/var/tmp/img", "--", "python3"}), container_runtime::unknown);
  EXPECT_EQ(l({"shifter", "--image=docker:nvcr.io/nvidia/pytorch", "python3"}), container_runtime::unknown);
  EXPECT_EQ(l({"bwrap", "--bind", "/img", "/", "sh"}), container_runtime::unknown);
  EXPECT_EQ(l({"podman", "ps"}), container_runtime::none);
  EXPECT_EQ(l({"docker"}), container_runtime::none);
  auto podman = launcher_runtime({"/usr/bin/podman", "run", "--rm", "nvcr.io/nvidia/pytorch"}, "");
  EXPECT_EQ(podman.runtime, container_runtime::podman);
  EXPECT_TRUE(podman.outside_task);  // conmon, not the task, is the container's parent
  EXPECT_EQ(podman.launcher_prog, "podman");
  auto docker = launcher_runtime({"docker", "run", "img"}, "");
  EXPECT_EQ(docker.runtime, container_runtime::docker);
  EXPECT_TRUE(docker.outside_task);
  EXPECT_FALSE(launcher_runtime({"chroot", "/img", "sh"}, "").outside_task);
  EXPECT_EQ(launcher_runtime({"chroot", "/img", "sh"}, "").launcher_prog, "chroot");
  // The image's first bytes are read only for a .sif program.
  EXPECT_EQ(sif_head({"/nonexistent/x.sif"}), "");
  EXPECT_EQ(sif_head({"/bin/sh"}), "");
}

TEST(container_locate, launcher_program_is_maybe_later) {
  container_state st;  // slurmstepd's namespace unknown: only the program and the plugins decide
  auto loc = locate_task(st, "", {"/usr/bin/apptainer", "exec", "--userns", "/images/bookworm", "true"});
  EXPECT_EQ(loc.place, task_place::maybe_later);
  EXPECT_EQ(loc.launcher.runtime, container_runtime::apptainer);
  EXPECT_EQ(locate_task(st, "", {"/usr/bin/python3", "train.py"}).place, task_place::host);
  EXPECT_EQ(locate_task(st, "", {}).place, task_place::host);
}

// Real pyxis 0.24 leaves nothing of its own in the task's environment: a task it moved is recognised by the
// plugin mapped into the task child, in both plugstack orders.
TEST(container_locate, the_container_plugin_mapped_names_the_runtime_inside_too) {
  container_state st;
  st.host_mnt_ns = "mnt:[1]";  // not this process's: the task is "inside"
  // Every process here has libc mapped; a list naming it stands in for spank_pyxis.so in slurmstepd.
  auto loc = locate_task(st, "no-such-plugin.so,libc.so.6", {});
  EXPECT_EQ(loc.place, task_place::inside);
  EXPECT_EQ(loc.plugin, "libc.so.6");
  EXPECT_EQ(locate_task(st, "no-such-plugin.so", {}).plugin, "");
  container_state here;  // namespace unknown: the plugin makes the task maybe_later
  auto later = locate_task(here, "libc.so.6", {});
  EXPECT_EQ(later.place, task_place::maybe_later);
  EXPECT_EQ(later.plugin, "libc.so.6");

  EXPECT_EQ(plugin_runtime("spank_pyxis.so").runtime, container_runtime::pyxis);
  EXPECT_NE(plugin_runtime("spank_pyxis.so").evidence.find("spank_pyxis.so"), std::string::npos);
  EXPECT_EQ(plugin_runtime("spank_testct.so").runtime, container_runtime::none);
  EXPECT_EQ(plugin_runtime("").runtime, container_runtime::none);
  // What the helper saw inside cannot override the plugin that put the task there.
  ctprobe_run run;
  run.outcome.out = "ctprobe=1\nmarkers=/.dockerenv\nend=1\n";
  EXPECT_EQ(runtime_inside(run, {}, {}).runtime, container_runtime::docker);
  EXPECT_EQ(runtime_inside(run, {}, plugin_runtime("spank_pyxis.so")).runtime, container_runtime::pyxis);
}

// job_container/tmpfs gives the task a mount namespace of its own on slurmstepd's root: the task is on the host
// (src/container/enter.cpp). A namespace with another root is a container's.
TEST(container_locate, private_mount_namespace_on_the_same_root_is_the_host) {
  struct stat root {};
  ASSERT_EQ(::stat("/", &root), 0);
  container_state st;
  st.host_mnt_ns = "mnt:[1]";  // not this process's
  st.host_root_id = std::to_string(root.st_dev) + ":" + std::to_string(root.st_ino);
  EXPECT_EQ(locate_task(st, "", {}).place, task_place::host);
  EXPECT_EQ(locate_task(st, "", {"/usr/bin/python3", "train.py"}).place, task_place::host);
  st.host_root_id = "0:0";  // slurmstepd's root is another one: the task entered an image
  EXPECT_EQ(locate_task(st, "", {}).place, task_place::inside);
}

TEST(container_runtime, fixes_differ_by_runtime) {
  EXPECT_NE(container_memlock_fix(container_runtime::pyxis), container_memlock_fix(container_runtime::docker));
  EXPECT_EQ(container_memlock_fix(container_runtime::pyxis).find("--ulimit"), std::string::npos);
  EXPECT_NE(container_device_fix(container_runtime::apptainer).find("--bind /dev/infiniband"), std::string::npos);
}

TEST(container_log, kernel_abi_socket_fallback_and_runtime) {
  container_log_scan s;
  s.feed("pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.01-py3", 1);
  s.feed("libibverbs: Warning: Driver mlx5 does not support the kernel ABI of 2 (supports 1 to 1) for device", 2);
  s.feed("gpu01:123:123 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>", 3);
  s.finish();
  EXPECT_EQ(s.runtime, container_runtime::pyxis);
  ASSERT_EQ(s.notes.size(), 3u);
  EXPECT_EQ(s.notes[0].what, "runtime");
  EXPECT_EQ(s.notes[1].what, "kernel_abi");
  EXPECT_NE(s.notes[1].text.find("enroot no longer injects"), std::string::npos);
  EXPECT_EQ(s.notes[2].what, "socket_fallback");
  // A log of one node says NET/Socket too where its ranks met as different hosts (NCCL_HOSTID): the note names
  // both, not only traffic between nodes.
  EXPECT_NE(s.notes[2].text.find("between nodes, or between ranks it took for different hosts"), std::string::npos)
      << s.notes[2].text;
  container_log_scan ib;
  ib.feed("NCCL INFO NET/Socket : Using [0]eth0", 1);
  ib.feed("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB", 2);
  ib.finish();
  EXPECT_TRUE(ib.notes.empty());
}

// A host task's tree (container_watch::descendants): the process that entered a root of its own and exec'd its
// program there, never a launcher between entering and exec'ing, nor the task child before its exec.
TEST(container_descendants, a_launcher_is_skipped_until_it_execs) {
  const std::string stepd = "/usr/sbin/slurmstepd";
  std::vector<task_process> tree{{100, "/usr/bin/bash", false}, {101, "/usr/bin/unshare", false}};
  EXPECT_FALSE(pick_entered_process(tree, stepd));  // all on the host
  // `unshare -r chroot IMG sh`: unshare has exec'd chroot, which has chroot()ed and not yet exec'd.
  tree[1] = {101, "/usr/sbin/chroot", true};
  EXPECT_FALSE(pick_entered_process(tree, stepd));
  // `unshare --mount --root=IMG sh`: unshare itself between its chroot() and its exec; Apptainer's starter.
  tree.push_back({102, "/usr/bin/unshare", true});
  tree.push_back({103, "/usr/libexec/apptainer/bin/starter", true});
  EXPECT_FALSE(pick_entered_process(tree, stepd));
  // The image's shell, once chroot has exec'd it (its path as the host sees it).
  tree[1] = {101, "/images/old/usr/bin/dash", true};
  auto i = pick_entered_process(tree, stepd);
  ASSERT_TRUE(i);
  EXPECT_EQ(tree[*i].pid, 101);
  // Breadth first: the first one found wins; an unreadable program (gone, not dumpable) is not one.
  std::vector<task_process> two{{100, "", true}, {101, "/img/bin/python3", true}, {102, "/img/bin/sh", true}};
  EXPECT_EQ(pick_entered_process(two, stepd), std::optional<std::size_t>(1));
  // The task child before its exec still runs slurmstepd's binary (a chrooted slurmstepd is not a container).
  EXPECT_FALSE(pick_entered_process({{100, stepd, true}}, stepd));
  // A program replaced on disk since it started: the name without " (deleted)".
  EXPECT_FALSE(pick_entered_process({{100, "/usr/sbin/chroot (deleted)", true}}, stepd));
  EXPECT_TRUE(pick_entered_process({{100, "/img/bin/sh (deleted)", true}}, stepd));
  EXPECT_FALSE(pick_entered_process({}, stepd));
  // Launcher names come from launcher_runtime's table, whatever the arguments.
  EXPECT_TRUE(is_launcher_program("chroot"));
  EXPECT_TRUE(is_launcher_program("unshare"));
  EXPECT_TRUE(is_launcher_program("apptainer"));
  EXPECT_FALSE(is_launcher_program("bash"));
  EXPECT_FALSE(is_launcher_program(""));
}

// A host task: the host's probes, and the descendants watcher started once per task (here refused: no task pid,
// which a real task always has), whose failure is a WARN, not an error of the host's verdicts.
TEST(container_runner, a_host_task_gets_the_descendants_watcher) {
  config c;
  container_state st;
  task_location loc;  // host
  int host_calls = 0;
  probe_runner host = [&host_calls](const std::string&, const task_facts&, const memlock_limit&) {
    ++host_calls;
    check_result r;
    r.id = "mr_host";
    r.result = verdict::pass;
    return std::vector<check_result>{r};
  };
  probe_runner run = container_probe_runner(c, st, loc, host, std::chrono::seconds(10), false);
  task_facts t;
  memlock_limit lim;
  auto first = run("mr", t, lim);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].id, "mr_host");
  EXPECT_EQ(first[1].id, "container");
  EXPECT_EQ(first[1].result, verdict::warn);
  EXPECT_NE(first[1].summary.find("cannot watch for a container the task may start: no task to watch"),
            std::string::npos)
      << first[1].summary;
  EXPECT_EQ(run("nccl", t, lim).size(), 1u);  // started (or tried) once per task
  EXPECT_EQ(host_calls, 2);
}

// `podman run`: the host's probes, and one warning that the image was not checked; no watcher (nothing of the
// task ever enters a container podman's monitor starts).
TEST(container_runner, a_launcher_outside_the_task_is_named_not_watched) {
  config c;
  container_state st;
  task_location loc;
  loc.place = task_place::maybe_later;
  loc.launcher = launcher_runtime({"podman", "run", "img"}, "");
  int host_calls = 0;
  probe_runner host = [&host_calls](const std::string&, const task_facts&, const memlock_limit&) {
    ++host_calls;
    check_result r;
    r.id = "mr_host";
    r.result = verdict::pass;
    return std::vector<check_result>{r};
  };
  probe_runner run = container_probe_runner(c, st, loc, host, std::chrono::seconds(10), false);
  task_facts t;
  memlock_limit lim;
  auto first = run("mr", t, lim);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].id, "container");
  EXPECT_EQ(first[1].result, verdict::warn);
  EXPECT_NE(first[1].summary.find("`podman run`"), std::string::npos) << first[1].summary;
  EXPECT_NE(first[1].summary.find("the host's, not the image's"), std::string::npos) << first[1].summary;
  EXPECT_EQ(run("nccl", t, lim).size(), 1u);  // said once per task
  EXPECT_EQ(host_calls, 2);
}

}  // namespace
}  // namespace mrcheck
