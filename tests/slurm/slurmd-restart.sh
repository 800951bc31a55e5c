#!/bin/bash
# Restarts only slurmd of the private test cluster, optionally under a given RLIMIT_MEMLOCK, and waits until
# the new slurmd has registered and the node is usable again.
#
# usage: slurmd-restart.sh [--node NAME] [--memlock-soft N] [--memlock-hard N] [--keep-limits] [--no-wait] [DIR]
#   N: bytes, with an optional K/M/G suffix (KiB/MiB/GiB), or "unlimited".
#   Without --memlock-* slurmd inherits this script's limits (what `slurmd` started from a root shell gets).
#   --keep-limits: start the new slurmd with the memlock limits the running one has.
#   --node: only that node (default: every node of the cluster).
# Raising a hard limit needs CAP_SYS_RESOURCE; without it a request above this shell's hard limit fails
# with a clear error rather than silently starting slurmd with another limit.
set -euo pipefail

prog=slurmd-restart
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "${here}/lib.sh"

usage() {
    sed -n '5,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# to_bytes VALUE: prints VALUE in bytes or "unlimited"; fails on anything else.
to_bytes() {
    local v="${1}"
    case "${v}" in
        unlimited | infinity | -1) echo unlimited ;;
        *[0-9][kK]) echo $((${v%?} * 1024)) ;;
        *[0-9][mM]) echo $((${v%?} * 1024 * 1024)) ;;
        *[0-9][gG]) echo $((${v%?} * 1024 * 1024 * 1024)) ;;
        *[!0-9]* | "") return 1 ;;
        *) echo "${v}" ;;
    esac
}

only_node=""
soft=""
hard=""
keep=0
do_wait=1
arg_dir=""
while (($#)); do
    case "$1" in
        --node) only_node="${2:?--node needs a name}"; shift ;;
        --memlock-soft) soft="$(to_bytes "${2:-}")" || die "bad --memlock-soft '${2:-}'"; shift ;;
        --memlock-hard) hard="$(to_bytes "${2:-}")" || die "bad --memlock-hard '${2:-}'"; shift ;;
        --keep-limits) keep=1 ;;
        --no-wait) do_wait=0 ;;
        -h | --help) usage ;;
        -*) usage ;;
        *) [[ -z "${arg_dir}" ]] || usage; arg_dir="$1" ;;
    esac
    shift
done
resolve_dir "${arg_dir}"
take_lock
[[ -s "${dir}/slurm.conf" && -s "${dir}/run/nodes" ]] || die "no cluster configured in ${dir} (run slurm-up.sh)"
((keep == 0)) || [[ -z "${soft}${hard}" ]] || die "--keep-limits and --memlock-* exclude each other"

# memlock_of PID: "SOFT HARD" in bytes or "unlimited", from /proc/PID/limits.
memlock_of() {
    awk '/^Max locked memory/ {print $4, $5}' "/proc/$1/limits"
}

port_listening() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# Stops the slurmd the pid file names, and the one it may hand over to: from Slurm 23.11 `scontrol reconfigure`
# makes slurmd start a new slurmd and exit, and the new one rewrites the pid file and takes the port a moment
# later. So: until the pid file names no live slurmd and the node's port is free (30 s at most).
stop_slurmd() {
    local node="$1" pidfile="${dir}/run/slurmd-$1.pid" pid port
    port="$(awk -v n="${node}" '$1 == n {print $2}' "${dir}/run/nodes")"
    local deadline=$((SECONDS + 30))
    while true; do
        if pid_alive slurmd "${pidfile}"; then
            pid="$(pid_of "${pidfile}")"
            kill -TERM "${pid}" 2>/dev/null || true
            while proc_alive "${pid}" slurmd; do
                ((SECONDS < deadline)) || fail_with_logs "slurmd ${node} (pid ${pid}) did not exit within 30s of SIGTERM"
                sleep 0.1
            done
        elif [[ -z "${port}" ]] || ! port_listening "${port}"; then
            break
        fi
        ((SECONDS < deadline)) || fail_with_logs "slurmd ${node}: port ${port} still in use 30s after stopping it"
        sleep 0.2
    done
    rm -f "${pidfile}"
}

slurmd_start_epoch() {
    local t
    t="$(slurm_cmd scontrol -o show node "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^SlurmdStartTime=//p')"
    [[ -n "${t}" && "${t}" != None && "${t}" != Unknown ]] || { echo 0; return; }
    date -d "${t}" +%s 2>/dev/null || echo 0
}

registered_since() {
    local node="$1" since="$2"
    pid_alive slurmd "${dir}/run/slurmd-${node}.pid" || return 1
    (($(slurmd_start_epoch "${node}") >= since)) || return 1
    node_usable "${node}"
}

restart_one() {
    local node="$1" s="${soft}" h="${hard}"
    if ((keep)) && pid_alive slurmd "${dir}/run/slurmd-${node}.pid"; then
        read -r s h < <(memlock_of "$(pid_of "${dir}/run/slurmd-${node}.pid")")
    fi
    # Only a hard limit asked for: lower the soft one with it when needed (as `ulimit -l N` does), since a
    # soft limit above the hard one is invalid.
    if [[ -z "${s}" && -n "${h}" && "${h}" != unlimited ]]; then
        local cur
        cur="$(ulimit -S -l)"
        if [[ "${cur}" == unlimited ]] || ((cur * 1024 > h)); then s="${h}"; fi
    fi
    local -a limit=()
    if [[ -n "${s}" || -n "${h}" ]]; then
        # Checked before the running slurmd is stopped, so a refused limit leaves the node as it was.
        if ! prlimit --memlock="${s}:${h}" true 2>/dev/null; then
            die "cannot start slurmd ${node} with memlock soft=${s:-unchanged} hard=${h:-unchanged}:" \
                "this shell's is $(ulimit -S -l)/$(ulimit -H -l) KiB; soft must not exceed hard, and raising" \
                "a hard limit needs CAP_SYS_RESOURCE"
        fi
        limit=(prlimit --memlock="${s}:${h}" --)
    fi
    stop_slurmd "${node}"
    mkdir -p "${dir}/spool/slurmd-${node}"
    local since
    since="$(date +%s)"
    spawn "${dir}/log/slurmd-${node}.stderr" "${limit[@]}" slurmd -N "${node}"
    wait_until 30 "slurmd ${node} pid file" pid_alive slurmd "${dir}/run/slurmd-${node}.pid" ||
        fail_with_logs "slurmd ${node} did not start"
    local pid
    pid="$(pid_of "${dir}/run/slurmd-${node}.pid")"
    say "slurmd ${node} pid ${pid} memlock soft/hard: $(memlock_of "${pid}" | sed 's/ /\//')"
    echo "${since}" >"${dir}/run/slurmd-${node}.started"
}

found=0
while read -r node _; do
    [[ -n "${node}" ]] || continue
    [[ -z "${only_node}" || "${only_node}" == "${node}" ]] || continue
    found=1
    restart_one "${node}"
done <"${dir}/run/nodes"
((found)) || die "no node '${only_node}' in ${dir}/run/nodes"

if ((do_wait)); then
    while read -r node _; do
        [[ -n "${node}" ]] || continue
        [[ -z "${only_node}" || "${only_node}" == "${node}" ]] || continue
        since="$(cat "${dir}/run/slurmd-${node}.started")"
        wait_until 60 "slurmd ${node} to register and the node to be usable" registered_since "${node}" "${since}" ||
            fail_with_logs "node ${node} not usable after restart: state '$(node_state "${node}")'"
    done <"${dir}/run/nodes"
    say "node(s) ready"
fi
