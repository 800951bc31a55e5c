#!/bin/bash
# Sets (or removes) slurm.conf options of the private test cluster and makes every daemon use them.
#
# usage: slurm-conf-set.sh [--dir DIR] [--restart-ctld] KEY VALUE [KEY VALUE ...]
#        slurm-conf-set.sh [--dir DIR] --reset
#   KEY VALUE     replace every KEY= line (keys are case-insensitive, like Slurm's) by KEY=VALUE;
#                 an empty VALUE removes KEY, so Slurm's default applies again.
#   --reset       put back the configuration slurm-up.sh wrote.
#   --restart-ctld restart slurmctld instead of `scontrol reconfigure` (for keys reconfigure cannot change,
#                 e.g. SelectType, ports, auth).
# DIR defaults to $MRCHECK_SLURM_DIR or /tmp/mrcheck-slurm. After `scontrol reconfigure` slurmd is restarted
# with the memlock limits it had, so when this script returns slurmd, every new slurmstepd and every new
# srun/sbatch (which read slurm.conf themselves) agree on the new values. Client-side keys such as
# PropagateResourceLimits need no daemon at all, but the restart keeps both sides the same.
set -euo pipefail

prog=slurm-conf-set
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "${here}/lib.sh"

usage() {
    sed -n '4,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

arg_dir=""
restart_ctld=0
reset=0
declare -a keys=() values=()
while (($#)); do
    case "$1" in
        --dir) arg_dir="${2:?--dir needs a directory}"; shift ;;
        --restart-ctld) restart_ctld=1 ;;
        --reset) reset=1 ;;
        -h | --help) usage ;;
        -*) usage ;;
        *)
            (($# >= 2)) || usage
            keys+=("$1")
            values+=("$2")
            shift
            ;;
    esac
    shift
done
((reset == 1 || ${#keys[@]} > 0)) || usage
((reset == 0 || ${#keys[@]} == 0)) || die "--reset takes no KEY VALUE"
resolve_dir "${arg_dir}"
[[ "$(id -u)" == 0 ]] || die "must run as root"
conf="${dir}/slurm.conf"
[[ -s "${conf}" ]] || die "no ${conf} (run slurm-up.sh)"
take_lock

for i in "${!keys[@]}"; do
    k="${keys[$i]}"
    v="${values[$i]}"
    [[ "${k}" =~ ^[A-Za-z][A-Za-z0-9]*$ ]] || die "bad key '${k}'"
    case "${k,,}" in
        nodename | partitionname | nodeset | frontendname | downnodes)
            die "${k} lines hold several records; edit ${conf} by hand" ;;
    esac
    [[ "${v}" != *$'\n'* ]] || die "value of ${k} has a newline"
done

cp -p "${conf}" "${conf}.prev"
tmp="${conf}.tmp.$$"
if ((reset)); then
    [[ -s "${conf}.orig" ]] || die "no ${conf}.orig to reset to"
    cp "${conf}.orig" "${tmp}"
else
    cp "${conf}" "${tmp}"
    for i in "${!keys[@]}"; do
        k="${keys[$i]}"
        v="${values[$i]}"
        # Drop every KEY=... line (any case, leading blanks), then put the new one before the node lines.
        awk -v key="${k,,}" -v line="${k}=${v}" -v set="${v:+1}" '
            { l = tolower($0); sub(/^[ \t]+/, "", l) }
            index(l, key "=") == 1 || index(l, key " =") == 1 { next }
            set && !done && tolower($0) ~ /^nodename[ \t]*=/ { print line; done = 1 }
            { print }
            END { if (set && !done) print line }
        ' "${tmp}" >"${tmp}.2"
        mv "${tmp}.2" "${tmp}"
    done
fi
chmod 644 "${tmp}"
mv "${tmp}" "${conf}"

apply() {
    if ((restart_ctld)); then
        local pid
        if pid_alive slurmctld "${dir}/run/slurmctld.pid"; then
            pid="$(pid_of "${dir}/run/slurmctld.pid")"
            kill -TERM "${pid}"
            wait_until 30 "slurmctld to exit" bash -c "! [[ -d /proc/${pid} ]] || [[ \$(awk '{print \$3}' /proc/${pid}/stat) == Z ]]" ||
                return 1
            rm -f "${dir}/run/slurmctld.pid"
        fi
        spawn "${dir}/log/slurmctld.stderr" slurmctld
        wait_until 20 "slurmctld pid file" pid_alive slurmctld "${dir}/run/slurmctld.pid" || return 1
        wait_until 30 "slurmctld to answer" bash -c "SLURM_CONF='${conf}' scontrol ping | grep -q 'is UP'" || return 1
    else
        slurm_cmd scontrol reconfigure || return 1
    fi
    "${here}/slurmd-restart.sh" --keep-limits "${dir}" </dev/null >/dev/null
}

if ! out="$(apply 2>&1)"; then
    printf '%s\n' "${out}" >&2
    say "applying the new configuration failed; putting the previous one back"
    diff -u "${conf}.prev" "${conf}" >&2 || true
    cp -p "${conf}.prev" "${conf}"
    if pid_alive slurmctld "${dir}/run/slurmctld.pid"; then
        slurm_cmd scontrol reconfigure >/dev/null 2>&1 || true
    fi
    # Starts whatever the bad configuration took down (slurm-up.sh keeps the restored slurm.conf).
    "${here}/slurm-up.sh" "${dir}" </dev/null >/dev/null 2>&1 || true
    fail_with_logs "slurm.conf change rejected (see the diff and logs above)"
fi
if ((reset)); then
    say "slurm.conf reset to what slurm-up.sh wrote"
else
    for i in "${!keys[@]}"; do
        if [[ -n "${values[$i]}" ]]; then say "${keys[$i]}=${values[$i]}"; else say "${keys[$i]} removed"; fi
    done
fi
