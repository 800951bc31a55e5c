#!/bin/bash
# Containers with a real runtime: `srun --mr-check=mr apptainer exec --userns IMAGE cmd`, the commonest
# way to run Apptainer under Slurm. The task's program is the launcher, so at mrcheck's task_init the task is on
# the host and no container plugin is loaded: mrcheck recognises the launcher (launcher_runtime,
# src/explain/causes/container_runtime.cpp) and its watcher probes inside once a child of the task runs the job's program in the
# image (docs/containers.md). The image is tests/container/make-images.sh's bookworm root, run as a sandbox
# directory; the fake libibverbs (tests/fakes) stands in for an HCA, and Apptainer binds /tmp, where the staged
# fake is, into the container by default.
#
# Skips (77) where Apptainer cannot run: not installed (Debian 12 has no package; the 26.05 leg of
# scripts/slurm-release.sh installs sid's), or the job user cannot start a container here (no user namespace:
# a chrooted leg, a sandbox that refuses them).
source "$(dirname "$0")/../e2e/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
apptainer=$(command -v apptainer || true)
[[ -n $apptainer ]] || e2e_skip "apptainer is not installed (Debian 12 has no package; scripts/slurm-release.sh 26.05 installs sid's)"
set +e
images=$(bash "$MRCHECK_SOURCE_DIR/tests/container/make-images.sh")
rc=$?
set -e
((rc == 77)) && e2e_skip "no container images (mirror unreachable, nothing cached)"
((rc == 0)) || { e2e_fail "make-images.sh failed ($rc)"; e2e_done; }
e2e_log "$("$apptainer" --version)"
if ! try=$(as_user "$apptainer" exec --userns "$images/bookworm" sh -c 'test -e /.complete && echo in-image' 2>&1) ||
  [[ $try != *in-image* ]]; then
  e2e_skip "the job user cannot run Apptainer here (apptainer exec --userns: $(printf '%s' "$try" | tail -n 2 | tr '\n' ' '))"
fi
plugin_setup
d=$E2E_INSTALL
install -m 0755 "$MRCHECK_BUILD_DIR/src/mrcheck-ctprobe" "$d/bin/mrcheck-ctprobe"
[[ -f $d/lib/fake/libibverbs.so.1 ]] || e2e_skip "the fake libibverbs was not built"
trap plugin_cleanup EXIT
# As container_test.sh: small NCCL buffers keep the registration inside (1.5 MiB) below a sandbox's 8 MiB.
plugin_load optional memlock_min=8M enforce=yes on_fail=warn
mkdir -p "$d/lib/fake/libibverbs" && : >"$d/lib/fake/libibverbs/libfake-rdmav34.so" && chmod -R a+rX "$d/lib/fake"
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"
fake="LD_LIBRARY_PATH=$d/lib/fake,MRCHECK_FAKE_IBV_DEVICES=mlx5_0,$small"
inimg='test -e /.complete && echo in-image'

# The fake stands in for a device only if it loads under the image's glibc (bookworm's 2.36);
# tests/fakes/fake_ibverbs.c keeps to symbols older glibcs have so that it does, also built in a newer root.
fake_err=$("$images/bookworm/lib64/ld-linux-x86-64.so.2" --library-path "$images/bookworm/lib/x86_64-linux-gnu" \
  --list "$d/lib/fake/libibverbs.so.1" 2>&1 >/dev/null || true)
device=1
if [[ $fake_err == *"not found"* ]]; then
  device=0
  e2e_fail "the fake libibverbs does not load in the bookworm image (${fake_err##*: }): no device inside"
  fake=$small
fi
run_user srun --mr-check=mr,verbose --export=ALL,$fake "$apptainer" exec --userns "$images/bookworm" sh -c "$inimg; sleep 2"
show_run "apptainer exec, matching image"
expect_eq "apptainer: the task ran in the image" "$OUT" "in-image"
expect_contains "apptainer: the host's probes ran first" "$ERR" "mrcheck: mr_host: "
expect_contains "apptainer: entered after task_init, named" "$ERR" "mrcheck: container: the task entered its container (Apptainer/Singularity) after mrcheck's task_init"
expect_contains "apptainer: the image's rdma-core against the host's" "$ERR" "Apptainer/Singularity: rdma-core 44.0 (host "
if ((device)); then
  expect_contains "apptainer: one device inside" "$ERR" "1 device(s) (mlx5_0)"
  expect_contains "apptainer: registered inside" "$ERR" "mrcheck: container_mr: pass: registered 1.5 MiB on mlx5_0 inside the container"
else
  expect_contains "apptainer: no device inside" "$ERR" "no device"
fi
expect_not_contains "apptainer: no error" "$ERR" "ERROR"

run_user srun --mr-check=mr "$apptainer" exec --userns "$images/old" sh -c "$inimg; sleep 2"
show_run "apptainer exec, old image"
expect_eq "old: the task ran in the image" "$OUT" "in-image"
expect_contains "old: its rdma-core and what it lacks" "$ERR" "rdma-core 33.2 (host "
expect_contains "old: no ibv_reg_dmabuf_mr" "$ERR" "its libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34)"

run_user srun --mr-check=mr "$apptainer" exec --userns "$images/none" sh -c "$inimg; sleep 2"
show_run "apptainer exec, no libibverbs"
expect_contains "none: NCCL falls back to sockets" "$ERR" "no libibverbs.so.1 in the image: NCCL then runs over TCP sockets without an error"

# The same image without a launcher: a host task, no container verdict, no watcher.
run_user srun --mr-check=mr sh -c 'sleep 1; echo host'
show_run "no launcher"
expect_not_contains "host: no container verdict" "$ERR" "mrcheck: container"
e2e_done
