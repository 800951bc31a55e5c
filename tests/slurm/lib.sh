# shellcheck shell=bash disable=SC2034,SC2154
# Shared helpers for tests/slurm/*.sh. Sourced, never run.
# Everything here works on one private directory ($dir); nothing touches /etc/slurm, /etc/munge or a system daemon.

# The daemons and useradd live in sbin, which a non-login root shell may lack in PATH.
export PATH="/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:${PATH}}"

say() { printf 'mrcheck: %s: %s\n' "${prog}" "$*"; }
die() { printf 'mrcheck: %s: error: %s\n' "${prog}" "$*" >&2; exit 1; }

# resolve_dir [DIR]: sets $dir (absolute) from the argument, $MRCHECK_SLURM_DIR or the default.
resolve_dir() {
    dir="${1:-${MRCHECK_SLURM_DIR:-/tmp/mrcheck-slurm}}"
    case "${dir}" in
        /*) ;;
        *) dir="$(pwd)/${dir}" ;;
    esac
    dir="${dir%/}"
    set_ports
}

# Ports: one base so a second private cluster (or a system Slurm on 6817-6819/3306) never collides:
# MariaDB base+6, slurmctld base+17, slurmd base+18 (one node) or base+20+i (node i), slurmdbd base+19.
# A configured DIR remembers its base, so later scripts on it need no environment.
set_ports() {
    if [[ -s "${dir}/run/port-base" ]]; then
        port_base="$(cat "${dir}/run/port-base")"
    else
        port_base="${MRCHECK_SLURM_PORT_BASE:-16800}"
    fi
    if ! [[ "${port_base}" =~ ^[0-9]+$ ]] || ((port_base < 1024 || port_base > 65000)); then
        die "bad port base '${port_base}' (MRCHECK_SLURM_PORT_BASE, 1024..65000)"
    fi
    ctld_port=$((port_base + 17))
    slurmd_port=$((port_base + 18))
    dbd_port=$((port_base + 19))
    mysql_port=$((port_base + 6))
}


test_user="${MRCHECK_SLURM_USER:-mrtest}"
cluster_name="mrcheck"


# The commands tests and these scripts run (sinfo, sacctmgr, scontrol) see only the private cluster.
slurm_cmd() {
    env -u SLURM_JOB_ID -u SLURM_JOBID SLURM_CONF="${dir}/slurm.conf" "$@"
}

# pid_alive NAME PIDFILE: true when PIDFILE names a live process whose comm is NAME. Checking comm guards
# against a stale pid file whose pid was reused by something else (we would otherwise signal a stranger).
pid_alive() {
    local name="$1" pidfile="$2" pid=""
    [[ -s "${pidfile}" ]] || return 1
    read -r pid <"${pidfile}" 2>/dev/null || [[ -n "${pid}" ]] || return 1
    [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
    proc_alive "${pid}" "${name}"
}

pid_of() {
    local pid=""
    read -r pid <"$1" 2>/dev/null || true
    printf '%s\n' "${pid//[!0-9]/}"
}

# proc_alive PID NAME: PID still runs as NAME and is not a zombie (this machine's pid 1 does not reap, so
# a stopped daemon can linger as one). Builtins only: these run in polling loops.
proc_alive() {
    local comm="" stat=""
    # 2>/dev/null first: redirections apply left to right, and a gone PID must not print an error.
    read -r comm 2>/dev/null <"/proc/$1/comm" || return 1
    # Debian 13 and later: the daemons are NAME-wlm behind /etc/alternatives, and one that re-executes itself
    # (slurmctld on `scontrol reconfigure`, 23.11 and later) runs under that name.
    [[ "${comm}" == "$2" || "${comm}" == "$2-wlm" ]] || return 1
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat="${stat##*) }"
    [[ "${stat:0:1}" != "Z" ]]
}

# take_lock: serialises slurm-up/-down/slurmd-restart/slurm-conf-set on one DIR (ctest -j runs several
# end-to-end tests at once, each calling slurm-up.sh). Re-entrant for the scripts these scripts call.
# spawn() closes fd 9 in daemons, so no daemon ever holds the lock.
take_lock() {
    [[ "${MRCHECK_SLURM_LOCK_HELD:-}" != "${dir}" ]] || return 0
    mkdir -p "${dir}"
    exec 9>>"${dir}/.lock"
    if ! flock -w 600 9; then
        die "another slurm script held ${dir}/.lock for 600s"
    fi
    export MRCHECK_SLURM_LOCK_HELD="${dir}"
}

# show_logs: the tail of every daemon log, for an error message a CI reader can act on.
show_logs() {
    local f
    for f in "${dir}"/log/*.log "${dir}"/log/*.stderr; do
        [[ -s "${f}" ]] || continue
        printf '==== %s (last 25 lines) ====\n' "${f}" >&2
        tail -n 25 "${f}" >&2
    done
}

fail_with_logs() {
    printf 'mrcheck: %s: error: %s\n' "${prog}" "$*" >&2
    show_logs
    exit 1
}

# wait_until SECONDS DESCRIPTION CMD...: polls CMD every 0.2 s; false on timeout.
wait_until() {
    local limit="$1" what="$2"
    shift 2
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2
    done
    "$@" >/dev/null 2>&1 && return 0
    printf 'mrcheck: %s: timed out after %ss waiting for %s\n' "${prog}" "${limit}" "${what}" >&2
    return 1
}

# spawn LOG CMD...: starts CMD detached (own session, stdin /dev/null, output to LOG) with every inherited
# descriptor above 2 closed, so a daemon never holds the caller's pipe open (a CI step would hang on it).
# The daemon gets a clean environment: a caller running inside a Slurm job (SLURM_* set) or with another
# SLURM_CONF must not leak into it.
spawn() {
    local log="$1"
    shift
    printf -- '---- %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"${log}"
    (
        for fd in "/proc/${BASHPID}/fd/"*; do
            fd="${fd##*/}"
            if ((fd > 2)); then
                eval "exec ${fd}>&-" 2>/dev/null || true
            fi
        done
        exec setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
            SLURM_CONF="${dir}/slurm.conf" "$@" </dev/null >>"${log}" 2>&1
    ) &
}

# node_state NODE: the node's state as sinfo prints it (idle, mixed, down*, drained, ...).
node_state() {
    slurm_cmd sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1
}

node_usable() {
    local s
    s="$(node_state "$1")"
    [[ "${s}" == "idle" || "${s}" == "mixed" || "${s}" == "allocated" ]]
}

# Node names this cluster runs (one per slurmd); written by slurm-up.sh.
node_names() {
    awk '{print $1}' "${dir}/run/nodes" 2>/dev/null
}

# --- network namespaces (slurm-up.sh --netns) ----------------------------------------------------------
# With --netns every slurmd runs in a network namespace of its own (a veth pair to a bridge on this host,
# its own address) and a mount namespace of its own whose /run is a private tmpfs, so per-host state
# (mrcheck's /run/mrcheck-admin.lock, listening ports) is really per node. slurmctld, slurmdbd, MariaDB and
# munged stay on the host: slurmctld is reached at the bridge's address, munged through its socket file
# (a path socket is not in a network namespace). DIR/run/netns holds "BRIDGE PREFIX" while it is set up;
# DIR/run/nodes then has a third column, the node's address.
# The names derive from the port base, so two clusters never share one: bridge mrbr<base>, namespaces
# mrns<base>-<node>, host ends of the veths mrv<base>n<i>. Subnet 10.231.<base/100 % 256>.0/24.
netns_names() {
    ns_bridge="mrbr${port_base}"
    ns_prefix="10.231.$(((port_base / 100) % 256))"
}
netns_on() { [[ -s "${dir}/run/netns" ]]; }
netns_of() { echo "mrns${port_base}-$1"; }

# netns_setup: creates (idempotently) the bridge and one namespace per line of DIR/run/nodes.
netns_setup() {
    netns_names
    if ! ip link show "${ns_bridge}" >/dev/null 2>&1; then
        ip link add "${ns_bridge}" type bridge || return 1
        ip addr add "${ns_prefix}.1/24" dev "${ns_bridge}" || return 1
    fi
    ip link set "${ns_bridge}" up || return 1
    local node port addr i=0 ns veth
    while read -r node port addr; do
        [[ -n "${node}" ]] || continue
        i=$((i + 1))
        ns="$(netns_of "${node}")"
        veth="mrv${port_base}n${i}"
        if ! ip netns list | grep -qw "${ns}"; then
            ip netns add "${ns}" || return 1
        fi
        if ! ip link show "${veth}" >/dev/null 2>&1; then
            ip -n "${ns}" link del eth0 2>/dev/null || true
            ip link add "${veth}" type veth peer name eth0 netns "${ns}" || return 1
            ip -n "${ns}" addr add "${addr}/24" dev eth0 || return 1
        fi
        ip link set "${veth}" master "${ns_bridge}" up || return 1
        ip -n "${ns}" link set lo up || return 1
        ip -n "${ns}" link set eth0 up || return 1
    done <"${dir}/run/nodes"
    echo "${ns_bridge} ${ns_prefix}" >"${dir}/run/netns"
}

# netns_teardown: removes the namespaces, veths and bridge netns_setup made (after the slurmd are stopped).
netns_teardown() {
    netns_names
    local node i=0
    while read -r node _; do
        [[ -n "${node}" ]] || continue
        i=$((i + 1))
        ip link del "mrv${port_base}n${i}" 2>/dev/null || true
        ip netns del "$(netns_of "${node}")" 2>/dev/null || true
    done <"${dir}/run/nodes"
    ip link del "${ns_bridge}" 2>/dev/null || true
    rm -f "${dir}/run/netns"
}

# netns_prefix_cmd NODE: the command prefix that starts a process in NODE's namespaces (network + a mount
# namespace with a private tmpfs on /run), as an array in netns_cmd; empty without --netns.
netns_prefix_cmd() {
    netns_cmd=()
    netns_on || return 0
    # nsenter, not `ip netns exec`: that remounts /sys, and slurmd needs the host's /sys/fs/cgroup.
    netns_cmd=(unshare --mount --propagation private nsenter "--net=/run/netns/$(netns_of "$1")"
        sh -c 'mount -t tmpfs -o mode=0755,size=16m mrcheck-run /run && exec "$@"' netns-run)
}
