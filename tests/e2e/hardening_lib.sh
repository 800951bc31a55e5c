# shellcheck shell=bash
# Helpers for the hardening tests (tests/e2e/hostile_*, fault_*, load_*; listed in SECURITY.md), sourced after
# lib.sh and tests/spank/e2e_helpers.sh. What every such test asserts after each case: the node is not drained or down,
# slurmd is the same process, the controller answers, and no file appeared where a user pointed.

# The node the tests run on, and what "healthy" means for it: not drained, not down. Other tests' jobs may
# make it mixed or allocated.
hard_node() { echo "${MRCHECK_SLURM_NODES%%,*}"; }
hard_node_state() { sinfo -h -N -n "$(hard_node)" -o '%T' 2>/dev/null | head -n1; }
hard_node_reason() { sinfo -h -N -n "$(hard_node)" -o '%E' 2>/dev/null | head -n1; }
hard_slurmd_pid() { cat "$MRCHECK_SLURM_DIR/run/slurmd-$(hard_node).pid" 2>/dev/null || true; }

# hard_snapshot: remember slurmd's pid (compared by hard_invariants).
hard_snapshot() {
  HARD_SLURMD_PID=$(hard_slurmd_pid)
  [[ -n $HARD_SLURMD_PID ]] || e2e_fail "no slurmd pid file for $(hard_node)"
}

# hard_invariants "what": the node is usable, its reason is empty (nothing drained it), slurmd still runs as
# the same pid, and slurmctld answers.
hard_invariants() {
  local what=$1 st reason pid
  st=$(hard_node_state)
  case "$st" in
    idle | mixed | allocated | completing) e2e_pass "$what: node $st" ;;
    *) e2e_fail "$what: node state '$st' (reason: $(hard_node_reason))" ;;
  esac
  reason=$(hard_node_reason)
  if [[ -z $reason || $reason == none ]]; then e2e_pass "$what: no drain reason"; else e2e_fail "$what: node reason '$reason'"; fi
  pid=$(hard_slurmd_pid)
  if [[ -n $pid && $pid == "${HARD_SLURMD_PID:-}" ]] && kill -0 "$pid" 2>/dev/null; then
    e2e_pass "$what: slurmd pid $pid still runs"
  else
    e2e_fail "$what: slurmd was pid ${HARD_SLURMD_PID:-?}, now '${pid}'"
  fi
  if scontrol ping 2>/dev/null | grep -q 'is UP'; then e2e_pass "$what: slurmctld answers"; else e2e_fail "$what: scontrol ping: $(scontrol ping 2>&1)"; fi
}

# hard_absent "what" PATH...: nothing exists at any PATH (a file a hostile value tried to create).
hard_absent() {
  local what=$1 p
  shift
  for p in "$@"; do
    if [[ -e $p || -L $p ]]; then e2e_fail "$what: $p exists"; else e2e_pass "$what: no $p"; fi
  done
}

# hard_clean_stderr "what" TEXT: every line of ours is bounded and printable (escape_line did its work): no
# control byte, at most 2000 bytes. Slurm's own lines (e.g. "Invalid --mr-check argument: <raw value>") are
# Slurm's to print and are not judged here.
hard_clean_stderr() {
  local what=$1 text=$2 line longest=0 bad=""
  while IFS= read -r line; do
    [[ $line == *"mrcheck: "* && $line != *"Invalid --mr-check argument"* ]] || continue
    ((${#line} > longest)) && longest=${#line}
    if LC_ALL=C grep -q '[[:cntrl:]]' <<<"$line"; then bad=$line; fi
  done <<<"$text"
  if [[ -z $bad ]]; then e2e_pass "$what: no control bytes in our lines"; else e2e_fail "$what: control byte in: $(cat -A <<<"$bad" | head -c 300)"; fi
  if ((longest <= 2000)); then e2e_pass "$what: longest line of ours $longest bytes"; else e2e_fail "$what: a line of ours of $longest bytes"; fi
}

# Processes and descriptors, for the leak checks. Several engineers' clusters share this machine (and the
# user mrtest), so a process counts as ours when its environment names this cluster's slurm.conf: the daemons
# run with it, slurmstepd inherits slurmd's, and tasks and srun get it from the job.
# (No `tr | grep -q` pipe: with pipefail, grep -q leaving early makes tr's SIGPIPE the pipe's status.)
hard_ours() {
  local env
  env=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/environ") || return 1
  [[ $'\n'$env$'\n' == *$'\n'"SLURM_CONF=$MRCHECK_SLURM_DIR/slurm.conf"$'\n'* ]]
}
hard_stepd_pids() {
  local pid
  for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do hard_ours "$pid" && echo "$pid"; done
  return 0
}
# hard_user_procs USER: this cluster's processes of USER.
hard_user_procs() {
  local pid n=0
  for pid in $(pgrep -u "$1" 2>/dev/null || true); do hard_ours "$pid" && n=$((n + 1)); done
  echo "$n"
}
# hard_settled_procs USER WANT: USER's processes of this cluster once they settle (at most 15 s): the plugin's
# post-exec watcher may outlive its task by a few seconds by design.
hard_settled_procs() {
  local n _
  for _ in $(seq 1 75); do
    n=$(hard_user_procs "$1")
    ((n <= $2)) && break
    sleep 0.2
  done
  echo "$n"
}
# hard_settled_stepds WANT: this cluster's slurmstepds once they settle (at most 15 s after the last step).
hard_settled_stepds() {
  local n _
  for _ in $(seq 1 75); do
    n=$(hard_stepd_pids | wc -l)
    ((n <= $1)) && break
    sleep 0.2
  done
  echo "$n"
}
# hard_daemon_fds: open descriptors of this cluster's slurmd and slurmstepds together.
hard_daemon_fds() {
  local pid n=0
  for pid in $(hard_slurmd_pid) $(hard_stepd_pids); do
    n=$((n + $(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)))
  done
  echo "$n"
}

# hard_admin_comment NAME: the AdminComment of the job named NAME once slurmdbd has it (sent at job end), in AC.
hard_admin_comment() {
  local name=$1 out="" _i
  for _i in $(seq 1 50); do
    out=$(sacct -X -n -P --name="$name" -S now-1hour -o JobID,State,AdminComment%4000 2>/dev/null | tail -1)
    [[ -n $out && $out != *RUNNING* && $out != *PENDING* && $out != *"|" ]] && break
    sleep 0.2
  done
  AC=${out#*|}  # JobID|State|AdminComment: the record itself holds " | "
  AC=${AC#*|}
}

# hard_hostile_setup: $hostile (tests/fakes/hostile_probe.c, the LD_PRELOAD a hostile user or a broken site
# library would be) and $fake (the fake libibverbs) staged by e2e_stage; skips when they were not built.
hard_hostile_setup() {
  hostile=$E2E_INSTALL/lib/fake/hostile_probe.so
  fake=$E2E_INSTALL/lib/fake/libibverbs.so.1
  [[ -f $hostile && -f $fake ]] || e2e_skip "no hostile_probe.so or fake libibverbs.so.1 (build targets hostile_probe, fake_ibverbs)"
}
