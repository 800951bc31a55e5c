#!/bin/bash
# docs/containers.md: `srun --mr-check` checks the job where it runs, inside its container. The container is entered by
# tests/container/spank_testct.c the way pyxis enters enroot's (new user + mount namespace, pivot_root, at
# task_init), in debootstrapped images (make-images.sh, cached). Both plugstack orders: the container plugin
# before mrcheck (mrcheck probes inside, before the task runs) and after it (a watcher probes once the task is
# in). The fake libibverbs (tests/fakes) stands in for an HCA inside an image; /tmp and /var/tmp (the release
# legs' private Slurm, scripts/slurm-release.sh) are bound into the container, as Apptainer does by default, so
# the staged fake is visible there at the same path.
source "$(dirname "$0")/../e2e/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
[[ -f $MRCHECK_BUILD_DIR/tests/container/spank_testct.so ]] || e2e_skip "spank_testct.so not built"
# The test plugin enters the image as the job user, as enroot does: a new user namespace. A kernel, a sandbox
# (seccomp, AppArmor) or a chroot (the kernel refuses a user namespace to a chrooted process; the release legs of
# scripts/slurm-release.sh use pivot_root for that reason) that refuses it to unprivileged users leaves nothing
# to test here. Checked first, so that such a leg does not debootstrap images it cannot use.
if ! userns_err=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare --user --mount true 2>&1); then
  e2e_skip "an unprivileged user cannot create a user namespace here (unshare --user --mount: ${userns_err:-refused})"
fi
set +e
images=$(bash "$MRCHECK_SOURCE_DIR/tests/container/make-images.sh")
rc=$?
set -e
((rc == 77)) && e2e_skip "no container images (mirror unreachable, nothing cached)"
((rc == 0)) || { e2e_fail "make-images.sh failed ($rc)"; e2e_done; }
plugin_setup
d=$E2E_INSTALL
install -m 0755 "$MRCHECK_BUILD_DIR/src/mrcheck-ctprobe" "$d/bin/mrcheck-ctprobe"
install -m 0755 "$MRCHECK_BUILD_DIR/tests/container/spank_testct.so" "$d/lib/slurm/"
[[ -f $d/lib/fake/libibverbs.so.1 ]] || e2e_skip "the fake libibverbs was not built"
# The fake stands in for a device inside the image, so it must load under the image's glibc (bookworm's 2.36)
# wherever it was built: tests/fakes/fake_ibverbs.c keeps to symbols older glibcs have, also in the release legs'
# roots (glibc >= 2.38).
fake_err=$("$images/bookworm/lib64/ld-linux-x86-64.so.2" --library-path "$images/bookworm/lib/x86_64-linux-gnu" \
  --list "$d/lib/fake/libibverbs.so.1" 2>&1 >/dev/null || true)
if [[ $fake_err == *"not found"* ]]; then
  e2e_fail "the fake libibverbs does not load in the bookworm image (${fake_err##*: })"
  e2e_done
fi
# The host's rdma-core, as the verdicts name it (Debian 12: 44.0; the release legs' roots have newer ones).
host_rdma=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null | sed 's/^[0-9]*://; s/-.*//')
ct_dropin() { rm -f "$MRCHECK_SLURM_PLUGSTACK_D"/*testct.conf; echo "optional $d/lib/slurm/spank_testct.so $*" >"$MRCHECK_SLURM_PLUGSTACK_D/$CT_NAME"; }
trap 'rm -f "$MRCHECK_SLURM_PLUGSTACK_D"/*testct.conf; plugin_cleanup' EXIT
# The registration inside is NCCL's estimate for the job's NCCL_* settings; small buffers make it 1.5 MiB, which
# fits the 8 MiB a slurmd started without LimitMEMLOCK has (a sandbox without CAP_SYS_RESOURCE cannot raise it).
# enforce=yes holds for an `mr`-only step too, and the probes get the enforced limit.
plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so
# The fake stands in for libibverbs and its device; libibverbs' providers sit in libibverbs/ beside it.
mkdir -p "$d/lib/fake/libibverbs" && : >"$d/lib/fake/libibverbs/libfake-rdmav34.so" && chmod -R a+rX "$d/lib/fake"
# LD_LIBRARY_PATH reaches the container probe (the image's library path), never the host's.
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"
fake="LD_LIBRARY_PATH=$d/lib/fake,MRCHECK_FAKE_IBV_DEVICES=mlx5_0,$small"
inimg='test -e /.complete && echo in-image'

# --- the container plugin before mrcheck ("50-" sorts before "mrcheck"): mrcheck probes inside ---------------
CT_NAME=50-testct.conf ct_dropin
run_user srun --mr-check=mr,verbose --container-root="$images/bookworm" --export=ALL,$fake sh -c "$inimg"
show_run "matching image, a device"
expect_eq "matching: the task ran in the image" "$OUT" "in-image"
expect_contains "matching: rdma-core against the host" "$ERR" "mrcheck: container: pass: a container: rdma-core 44.0 (host $host_rdma), 1 device(s) (mlx5_0)"
expect_contains "matching: registered inside" "$ERR" "mrcheck: container_mr: pass: registered 1.5 MiB on mlx5_0 inside the container (memlock soft "

run_user srun --mr-check=mr,verbose --container-root="$images/old" sh -c "$inimg"
show_run "old image"
expect_contains "old: its rdma-core and what it lacks" "$ERR" "mrcheck: container: WARN: a container: rdma-core 33.2 (host $host_rdma), no device: its libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34)"

run_user srun --mr-check=mr --container-root="$images/none" sh -c "$inimg"
show_run "no libibverbs"
expect_eq "none: the task ran" "$OUT" "in-image"
expect_contains "none: says NCCL falls back to sockets" "$ERR" "mrcheck: container: WARN: no libibverbs.so.1 in the image: NCCL then runs over TCP sockets without an error"

run_user srun --mr-check=mr --container-root="$images/noloader" sh -c "$inimg"
show_run "no loader"
expect_contains "noloader: a verdict that says so" "$ERR" "mrcheck: container: ERROR: the container probe cannot start in a container: mrcheck: child: execveat $d/bin/mrcheck-ctprobe: No such file or directory (the image has no dynamic loader"

# A step cancelled while its probe hangs inside the container (the image's verbs library hangs in ibv_open_device):
# the admins' record says `cancelled` (docs/DESIGN.md §3), as for a host probe killed by the cancel
# (tests/e2e/admin_netns_test.sh), not nothing and not a FAIL of the node nobody judged.
plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so probe_timeout=60s \
  admin_comment=yes admin_helper="$d/sbin/mrcheck-prolog" report_timeout=2s
as_user srun -J ct-cancel-$$ --mr-check=mr --container-root="$images/bookworm" \
  --export=ALL,$fake,MRCHECK_FAKE_IBV_INJECT=open_device=hang true >/dev/null 2>&1 &
SRUN=$!
J=""
for _ in $(seq 1 300); do
  J=$(squeue -h -n ct-cancel-$$ -o %i 2>/dev/null | head -1)
  [[ -n $J ]] && pgrep -u "$E2E_USER" -f mrcheck-ctprobe >/dev/null && break
  sleep 0.1
done
sleep 1  # in ibv_open_device by now
N=$(squeue -h -j "$J" -o %N 2>/dev/null)
scancel "$J.0" 2>/dev/null || true
wait "$SRUN" 2>/dev/null || true
e2e_admin_comment ct-cancel-$$
e2e_log "cancelled in the container: AdminComment [$AC]"
# Fails on the code that took the probe killed by the cancel for the node's verdict: "WARN container (the
# container probe in a container killed by SIGKILL) on NODE per the job's probe".
expect_eq "cancel in the container: a record saying so" "$AC" "mrcheck: step 0: cancelled; no report from $N"
plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so

# Older pyxis joined the container as root at task_init_privileged (no user namespace): inside at task_init too.
CT_NAME=50-testct.conf ct_dropin hook=privileged
run_user srun --mr-check=mr,verbose --container-root="$images/bookworm" --export=ALL,$fake sh -c "$inimg"
show_run "entered at task_init_privileged"
expect_eq "privileged: the task ran in the image" "$OUT" "in-image"
expect_contains "privileged: probed inside" "$ERR" "mrcheck: container: pass: a container: rdma-core 44.0 (host $host_rdma), 1 device(s) (mlx5_0)"
CT_NAME=50-testct.conf ct_dropin

# The task's limit is the step's (srun propagates `ulimit -l 64`): the registration fails inside, and the fix
# is the runtime's (Apptainer: the limits of the process that starts it, i.e. Slurm's).
plugin_load optional memlock_min=64K on_fail=warn container_plugins=spank_testct.so
run_user bash -c "ulimit -S -l 64; srun --mr-check=mr --container-root=$images/bookworm --export=ALL,$fake,APPTAINER_CONTAINER=/x.sif true"
show_run "low memlock, Apptainer"
expect_contains "memlock: the registration fails inside" "$ERR" "mrcheck: container_mr: WARN: ibv_reg_mr on mlx5_0 failed inside the container with ENOMEM"
expect_contains "memlock: Apptainer's fix" "$ERR" "Apptainer inherits the limits of the process that starts it"

plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so
# --- the container plugin after mrcheck ("zz-"): the task is still on the host at mrcheck's task_init --------
CT_NAME=zz-testct.conf ct_dropin
run_user srun --mr-check=mr,verbose --container-root="$images/bookworm" --export=ALL,$fake sh -c "$inimg; sleep 1"
show_run "container plugin after mrcheck"
expect_eq "after: the task ran in the image" "$OUT" "in-image"
expect_contains "after: the host's probes ran first" "$ERR" "mrcheck: mr_host: "
expect_contains "after: says the order" "$ERR" "mrcheck: container: the task entered its container (a container) after mrcheck's task_init"
expect_contains "after: probed inside once the task is in" "$ERR" "mrcheck: container: pass: a container: rdma-core 44.0 (host $host_rdma), 1 device(s) (mlx5_0)"
expect_contains "after: says it cannot stop the task" "$ERR" "a failure here cannot stop the task"
# Without verbose the watcher says nothing when all passed, as the host's probes.
run_user srun --mr-check=mr --container-root="$images/bookworm" --export=ALL,$fake sh -c "$inimg; sleep 1"
show_run "after, not verbose"
expect_eq "after, quiet: the task ran in the image" "$OUT" "in-image"
expect_not_contains "after, quiet: no PASS line" "$ERR" "mrcheck: container: pass"
expect_not_contains "after, quiet: no late-check line" "$ERR" "after mrcheck's task_init"
# A container plugin that takes longer than container_wait (pyxis importing a large image): the watcher says it
# did not check, instead of leaving silently.
plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so container_wait=1s
CT_NAME=zz-testct.conf ct_dropin delay_ms=3000
run_user srun --mr-check=mr --container-root="$images/bookworm" --export=ALL,$fake sh -c "$inimg; sleep 1"
show_run "after, slow container plugin"
expect_eq "slow: the task ran in the image" "$OUT" "in-image"
expect_contains "slow: says it did not check" "$ERR" "mrcheck: container: not checked: the task was not in a container after 1 s"
CT_NAME=zz-testct.conf ct_dropin
plugin_load optional memlock_min=8M enforce=yes on_fail=warn container_plugins=spank_testct.so

# A container that is gone before the probe: no hang, a verdict, nothing left behind.
start=$SECONDS
run_user srun --mr-check=mr --container-root="$images/bookworm" true
show_run "task gone before the probe"
((SECONDS - start < 30)) && e2e_pass "gone: bounded" || e2e_fail "gone: took $((SECONDS - start)) s"
sleep 1
if pgrep -u "$E2E_USER" -f mrcheck-ctprobe >/dev/null; then e2e_fail "gone: a probe is still running"; else e2e_pass "gone: nothing left running"; fi
expect_not_contains "gone: slurmstepd untouched" "$ERR" "slurmstepd: error"

# A container the task starts itself, no Slurm plugin involved (docs/containers.md, "Containers the task
# starts"): `unshare -r --root` moves the task into the old image, keeping the host's mount namespace. The
# watcher finds it by its root and probes with the image's rdma-core, not the host's.
run_user srun --mr-check=mr,verbose unshare -r --root="$images/old" /bin/sh -c "$inimg; sleep 1"
show_run "task-started container (unshare --root)"
expect_contains "unshare: the task ran in the image" "$OUT" "in-image"
expect_contains "unshare: the host's probes ran first" "$ERR" "mrcheck: mr_host: "
expect_contains "unshare: checked inside, started by the task" "$ERR" \
  "after mrcheck's task_init: checked now; a failure here cannot stop the task (the task's own \`unshare\` started it)"
expect_contains "unshare: the image's rdma-core, not the host's" "$ERR" "rdma-core 33.2 (host $host_rdma), no device"

# The same, started further down by a wrapper the task runs (bash, sh: no launcher): the watcher follows the
# task's processes and probes in the one that entered a root of its own and exec'd there. `unshare -r` gives the
# job user CAP_SYS_CHROOT for `chroot`; "; true" keeps the shell from exec'ing it. First with the container plugin
# loaded but not asked for a container by this step (a site with pyxis), then with none loaded.
run_user srun --mr-check=mr,verbose bash -c "unshare -r chroot '$images/old' /bin/sh -c '$inimg; sleep 1'; true"
show_run "descendant container (bash, unshare -r chroot)"
expect_contains "chroot: the task ran in the image" "$OUT" "in-image"
expect_contains "chroot: the host's probes ran first" "$ERR" "mrcheck: mr_host: "
expect_contains "chroot: names the process (the image's /bin/sh)" "$ERR" "mrcheck: container: dash (pid "
expect_contains "chroot: checked there, after task_init" "$ERR" \
  "started by the task, entered a root directory or mount namespace of its own after mrcheck's task_init: checked there now"
expect_contains "chroot: the image's rdma-core, not the host's" "$ERR" "rdma-core 33.2 (host $host_rdma), no device"
expect_not_contains "chroot: not the launcher's line" "$ERR" "the task's own \`"
rm -f "$MRCHECK_SLURM_PLUGSTACK_D"/*testct.conf
run_user srun --mr-check=mr,verbose sh -c "unshare -r --mount --root='$images/old' /bin/sh -c '$inimg; sleep 1'; true"
show_run "descendant container (sh, unshare --mount --root)"
expect_contains "unshare --mount: the task ran in the image" "$OUT" "in-image"
expect_contains "unshare --mount: checked there, after task_init" "$ERR" \
  "started by the task, entered a root directory or mount namespace of its own after mrcheck's task_init: checked there now"
expect_contains "unshare --mount: the image's rdma-core, not the host's" "$ERR" "rdma-core 33.2 (host $host_rdma), no device"
# A host task that starts no container: not a word more, even verbose, and the step ends with the task (the
# watcher holds the task's stderr: it must not keep srun's I/O open until container_wait).
start=$SECONDS
run_user srun --mr-check=mr,verbose bash -c 'sleep 0.3; echo done'
show_run "host task, no container"
expect_eq "host: the task ran" "$OUT" "done"
expect_not_contains "host: no container line" "$ERR" "mrcheck: container"
((SECONDS - start < 15)) && e2e_pass "host: returns promptly" || e2e_fail "host: took $((SECONDS - start)) s"
# A mount namespace of its own whose root is still the host's (a private /tmp) shows the host's libraries: no
# container, no line.
run_user srun --mr-check=mr,verbose bash -c 'unshare -r -m sh -c "sleep 0.5; echo private"; true'
show_run "host task, a mount namespace with the host's root"
expect_eq "private mount namespace: the task ran" "$OUT" "private"
expect_not_contains "private mount namespace: no container line" "$ERR" "mrcheck: container"
e2e_done
