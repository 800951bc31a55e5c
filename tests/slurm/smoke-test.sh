#!/bin/bash
# Proves the private test cluster does what mrcheck's end-to-end tests rely on: steps run as the test user,
# batch jobs reach accounting, an admin's AdminComment is in sacct after the job ends, several jobs share
# the node, memlock limits propagate as Slurm documents, and slurm-conf-set.sh / slurmd-restart.sh take
# effect. Starts the cluster if it is not up; leaves it up, with the configuration it found.
# usage: smoke-test.sh [DIR]      Prints 'N passed, N failed'; exits non-zero on any failure.
set -euo pipefail

prog=smoke-test
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "${here}/lib.sh"
resolve_dir "${1:-}"

"${here}/slurm-up.sh" "${dir}" >/dev/null
# shellcheck disable=SC1091
. "${dir}/env.sh"
cd "${MRCHECK_SLURM_WORK}"

passes=0
fails=0
pass() { say "ok: $*"; passes=$((passes + 1)); }
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
expect_eq() {
    if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$3], got [$2]"; fi
}
# shellcheck disable=SC2086
as_user() { ${MRCHECK_AS_USER} "$@"; }

node="${MRCHECK_SLURM_NODES%%,*}"

# wait_job_gone ID: until squeue no longer lists the job (bounded).
wait_job_gone() {
    local id="$1" deadline=$((SECONDS + 120))
    while [[ -n "$(squeue -h -j "${id}" -o %i 2>/dev/null)" ]]; do
        ((SECONDS < deadline)) || return 1
        sleep 0.3
    done
}
# sacct_field ID FIELDS: the job's (not its steps') accounting record, waiting for slurmdbd to have its end.
sacct_job() {
    local id="$1" fields="$2" deadline=$((SECONDS + 60)) line=""
    while ((SECONDS < deadline)); do
        line="$(sacct -n -P -X -j "${id}" -o "State,${fields}" 2>/dev/null | head -n1)"
        case "${line%%|*}" in
            COMPLETED | FAILED | CANCELLED* | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) break ;;
        esac
        sleep 0.5
    done
    printf '%s\n' "${line}"
}

# 1. An interactive step of two tasks as the unprivileged user.
out="$(as_user srun -N1 -n2 hostname 2>&1)" || true
expect_eq "srun -N1 -n2 hostname as ${MRCHECK_SLURM_USER}" "$(sort <<<"${out}" | paste -sd' ' -)" \
    "$(hostname) $(hostname)"
expect_eq "task runs as ${MRCHECK_SLURM_USER}" "$(as_user srun -n1 id -un 2>&1)" "${MRCHECK_SLURM_USER}"

# 2. A batch job is COMPLETED in accounting.
id="$(as_user sbatch --parsable -o "${MRCHECK_SLURM_WORK}/smoke-%j.out" --wrap 'echo batch-ran' 2>&1)" || true
if [[ "${id}" =~ ^[0-9]+$ ]]; then
    wait_job_gone "${id}" || fail "job ${id} still queued after 120s"
    rec="$(sacct_job "${id}" "JobID,AdminComment")"
    expect_eq "sacct -j ${id} state" "${rec}" "COMPLETED|${id}|"
    expect_eq "batch output" "$(cat "${MRCHECK_SLURM_WORK}/smoke-${id}.out" 2>&1)" "batch-ran"
    rm -f "${MRCHECK_SLURM_WORK}/smoke-${id}.out"
else
    fail "sbatch --wrap: ${id}"
fi

# 3. AdminComment: only root may set it; it reaches sacct when the job ends.
id="$(as_user sbatch --parsable -o /dev/null --wrap 'sleep 4' 2>&1)" || true
if [[ "${id}" =~ ^[0-9]+$ ]]; then
    if as_user scontrol update jobid="${id}" admincomment=forged >/dev/null 2>&1; then
        fail "the job user could set AdminComment"
    else
        pass "the job user cannot set AdminComment"
    fi
    if scontrol update jobid="${id}" admincomment="mrcheck: smoke ${id}" 2>&1; then
        pass "root sets AdminComment of job ${id}"
    else
        fail "root could not set AdminComment of job ${id}"
    fi
    wait_job_gone "${id}" || fail "job ${id} still queued after 120s"
    expect_eq "sacct shows AdminComment after the job ends" "$(sacct_job "${id}" AdminComment)" \
        "COMPLETED|mrcheck: smoke ${id}"
else
    fail "sbatch --wrap: ${id}"
fi

# 4. Several jobs run on the one node at the same time (OverSubscribe=FORCE), so tests do not queue.
ids=()
for _ in 1 2 3; do
    ids+=("$(as_user sbatch --parsable -n1 -o /dev/null --wrap 'sleep 6' 2>&1)")
done
deadline=$((SECONDS + 20))
running=0
while ((SECONDS < deadline)); do
    running="$(squeue -h -t R -j "$(
        IFS=,
        echo "${ids[*]}"
    )" -o %i 2>/dev/null | wc -l)"
    ((running < 3)) || break
    sleep 0.3
done
expect_eq "3 one-task jobs running at once on ${node}" "${running}" 3
scancel "${ids[@]}" 2>/dev/null || true

# 5. Memlock limits inside a task (Slurm's default PropagateResourceLimits=ALL).
slurmd_pid="$(pid_of "${dir}/run/slurmd-${node}.pid")"
read -r d_soft d_hard < <(awk '/^Max locked memory/ {print $4, $5}' "/proc/${slurmd_pid}/limits")
kib() { if [[ "$1" == unlimited ]]; then echo unlimited; else echo $(($1 / 1024)); fi; }
expect_eq "task memlock hard = slurmd's hard" "$(as_user srun -n1 bash -c 'ulimit -H -l')" "$(kib "${d_hard}")"
expect_eq "submit shell's ulimit -S -l 64 reaches the task" \
    "$(ulimit -S -l 64 && as_user srun -n1 bash -c 'ulimit -S -l')" 64

# 6. slurm-conf-set.sh: PropagateResourceLimitsExcept=MEMLOCK gives the task slurmd's soft limit instead.
if "${here}/slurm-conf-set.sh" --dir "${dir}" PropagateResourceLimitsExcept MEMLOCK >/dev/null; then
    expect_eq "PropagateResourceLimitsExcept=MEMLOCK: task soft = slurmd's soft" \
        "$(ulimit -S -l 64 && as_user srun -n1 bash -c 'ulimit -S -l')" "$(kib "${d_soft}")"
else
    fail "slurm-conf-set.sh PropagateResourceLimitsExcept MEMLOCK"
fi
"${here}/slurm-conf-set.sh" --dir "${dir}" PropagateResourceLimitsExcept '' >/dev/null ||
    fail "slurm-conf-set.sh PropagateResourceLimitsExcept ''"
expect_eq "PropagateResourceLimitsExcept removed again" \
    "$(grep -ci '^PropagateResourceLimitsExcept' "${SLURM_CONF}" || true)" 0

# 7. slurmd-restart.sh: slurmd under a 4 MiB hard limit caps every task, then slurmd's old limits come back.
if "${here}/slurmd-restart.sh" --memlock-soft 4M --memlock-hard 4M "${dir}" >/dev/null; then
    # shellcheck disable=SC2016 # expanded by the task's shell
    expect_eq "slurmd under a 4 MiB hard limit: task soft/hard" \
        "$(as_user srun -n1 bash -c 'echo $(ulimit -S -l)/$(ulimit -H -l)')" "4096/4096"
else
    fail "slurmd-restart.sh --memlock-hard 4M"
fi
"${here}/slurmd-restart.sh" --memlock-soft "${d_soft}" --memlock-hard "${d_hard}" "${dir}" >/dev/null ||
    fail "slurmd-restart.sh back to ${d_soft}/${d_hard}"
slurmd_pid="$(pid_of "${dir}/run/slurmd-${node}.pid")"
expect_eq "slurmd limits restored" "$(awk '/^Max locked memory/ {print $4"/"$5}' "/proc/${slurmd_pid}/limits")" \
    "${d_soft}/${d_hard}"

say "${passes} passed, ${fails} failed"
((fails == 0))
