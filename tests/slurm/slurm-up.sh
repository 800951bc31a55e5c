#!/bin/bash
# Starts a private one-node Slurm (munged, MariaDB, slurmdbd, slurmctld, slurmd) in DIR for mrcheck's
# end-to-end tests. Usage: slurm-up.sh [--nodes N] [DIR]   (DIR: $MRCHECK_SLURM_DIR or /tmp/mrcheck-slurm;
# --nodes N: N slurmd named node1..nodeN on this host instead of one named after it; --netns: those slurmd
# each in a network and mount namespace of its own, 3 nodes unless --nodes says otherwise; see README.md)
# Never reads or writes /etc/slurm, /etc/munge or a system database; every port is off Slurm's defaults.
# Idempotent: when everything is already up it says so and exits 0; when only part is up it starts the rest.
set -euo pipefail

prog=slurm-up
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "${here}/lib.sh"

usage() {
    echo "usage: slurm-up.sh [--nodes N] [--netns] [DIR]" >&2
    exit 2
}
arg_dir=""
want_nodes=""
want_netns=0
while (($#)); do
    case "$1" in
        --nodes)
            want_nodes="${2:-}"
            [[ "${want_nodes}" =~ ^[1-9][0-9]?$ ]] || die "--nodes needs a count from 1 to 99"
            shift
            ;;
        --netns) want_netns=1 ;;
        -h | --help) usage ;;
        -*) usage ;;
        *)
            [[ -z "${arg_dir}" ]] || usage
            arg_dir="$1"
            ;;
    esac
    shift
done
resolve_dir "${arg_dir}"

# --netns needs iproute2 and CAP_NET_ADMIN (a throw-away namespace tells): without them, skip (77) rather
# than fail, so a test asking for it says why it did not run.
if ((want_netns)); then
    [[ -n "${want_nodes}" ]] || want_nodes=3
    command -v ip >/dev/null || { say "skip: --netns needs iproute2's ip"; exit 77; }
    command -v unshare >/dev/null || { say "skip: --netns needs unshare"; exit 77; }
    probe_ns="mrcheck-probe-$$"
    if ! ip netns add "${probe_ns}" 2>/dev/null; then
        say "skip: --netns needs CAP_NET_ADMIN (ip netns add failed)"
        exit 77
    fi
    # `ip -n` enters a namespace by remounting / as a slave first, which fails where / is not a mount point: in
    # a chroot such as the Slurm release legs' (scripts/slurm-release.sh), with "mount --make-rslave /" failed.
    if ! ip -n "${probe_ns}" link set lo up 2>/dev/null; then
        ip netns del "${probe_ns}" 2>/dev/null || true
        say "skip: --netns cannot enter a network namespace here (ip -n failed: / is not a mount point, e.g. in a chroot)"
        exit 77
    fi
    ip netns del "${probe_ns}" 2>/dev/null || true
fi

[[ "$(id -u)" == 0 ]] || die "must run as root (the daemons run as root, as SlurmUser=root)"
take_lock
for b in munged munge unmunge mariadbd mariadb-install-db mariadb mariadb-admin slurmdbd slurmctld slurmd \
    sinfo scontrol sacctmgr setpriv prlimit flock useradd timeout; do
    command -v "${b}" >/dev/null || die "${b} not found (run scripts/install-deps.sh)"
done

start_ns=$(date +%s%N)

all_up() {
    local n
    pid_alive munged "${dir}/run/munged.pid" || return 1
    pid_alive mariadbd "${dir}/run/mariadb.pid" || return 1
    pid_alive slurmdbd "${dir}/run/slurmdbd.pid" || return 1
    pid_alive slurmctld "${dir}/run/slurmctld.pid" || return 1
    for n in $(node_names); do
        pid_alive slurmd "${dir}/run/slurmd-${n}.pid" || return 1
        node_usable "${n}" || return 1
    done
    [[ -n "$(node_names)" ]]
}

any_up() {
    local f
    for f in "${dir}"/run/*.pid; do
        [[ -e "${f}" ]] || continue
        case "${f##*/}" in
            munged.pid) pid_alive munged "${f}" && return 0 ;;
            mariadb.pid) pid_alive mariadbd "${f}" && return 0 ;;
            slurmdbd.pid) pid_alive slurmdbd "${f}" && return 0 ;;
            slurmctld.pid) pid_alive slurmctld "${f}" && return 0 ;;
            slurmd-*.pid) pid_alive slurmd "${f}" && return 0 ;;
        esac
    done
    return 1
}

print_env() {
    say "env file ${dir}/env.sh:"
    cat "${dir}/env.sh"
}

# --nodes N against a cluster laid out for another count: say so rather than reshape a cluster other tests
# may be using (a second cluster in its own DIR and port base is the way, see README.md).
if [[ -n "${want_nodes}" && -s "${dir}/run/nodes" ]] && any_up; then
    have_nodes="$(node_names | wc -l)"
    have_netns=0
    [[ -s "${dir}/run/netns" ]] && have_netns=1
    ((have_netns == want_netns)) ||
        die "${dir} runs a cluster with netns=${have_netns}, not ${want_netns}: run slurm-down.sh ${dir} first"
    ((have_nodes == want_nodes)) ||
        die "${dir} runs ${have_nodes} node(s), not ${want_nodes}: run slurm-down.sh ${dir} first," \
            "or use another DIR with another MRCHECK_SLURM_PORT_BASE"
fi

if [[ -f "${dir}/env.sh" ]] && all_up; then
    say "already up in ${dir}"
    print_env
    exit 0
fi

mkdir -p "${dir}"
chmod 755 "${dir}"
mkdir -p "${dir}/run" "${dir}/log" "${dir}/state" "${dir}/spool" "${dir}/munge" "${dir}/mysql" \
    "${dir}/plugstack.conf.d"
chmod 755 "${dir}/run" "${dir}/log" "${dir}/plugstack.conf.d"
chmod 700 "${dir}/state" "${dir}/mysql"
chmod 755 "${dir}/spool"
# munged insists that its key directory is not writable by others; clients need to reach the socket.
chmod 755 "${dir}/munge"

host_short="$(hostname -s)"
[[ -n "${host_short}" ]] || die "hostname -s printed nothing"

# --- the test user -------------------------------------------------------------------------------
# Jobs run as an unprivileged user: the kernel skips RLIMIT_MEMLOCK for root (CAP_IPC_LOCK).
if ! id -u "${test_user}" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash --user-group "${test_user}" || die "useradd ${test_user} failed"
    say "created user ${test_user}"
fi
test_home="$(getent passwd "${test_user}" | cut -d: -f6)"
if [[ -n "${test_home}" && ! -d "${test_home}" ]]; then
    mkdir -p "${test_home}"
    chown "${test_user}:" "${test_home}"
fi
test_uid="$(id -u "${test_user}")"
# A scratch directory the test user can write, for sbatch output files and job working directories.
mkdir -p "${dir}/work"
chown "${test_user}:" "${dir}/work"
chmod 1777 "${dir}/work"

# --- configuration -------------------------------------------------------------------------------
# Written only when nothing is running, so a test's slurm-conf-set.sh edit survives a partial restart
# but slurm-down.sh + slurm-up.sh always gives the pristine configuration back.
write_configs() {
    local hw cpus boards sockets cores threads mem
    hw="$(slurmd -C 2>/dev/null | head -n1)" || true
    [[ "${hw}" == NodeName=* ]] || die "slurmd -C printed no node line: ${hw}"
    field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<"${hw}"; }
    cpus="$(field CPUs)"
    boards="$(field Boards)"
    sockets="$(field SocketsPerBoard)"
    cores="$(field CoresPerSocket)"
    threads="$(field ThreadsPerCore)"
    mem="$(field RealMemory)"
    [[ -n "${cpus}" && -n "${mem}" && -n "${sockets}" && -n "${cores}" && -n "${threads}" ]] ||
        die "cannot parse slurmd -C: ${hw}"

    # One node: named after this host, as on a real cluster. N nodes: node1..nodeN, N slurmd on this host
    # (Debian's Slurm is built with MULTIPLE_SLURMD: `scontrol show config`), each on its own port.
    local count="${want_nodes:-1}" i node_lines="" names
    # A fresh configuration takes the port base from the environment (or the default), not from an
    # earlier run's DIR/run/port-base.
    rm -f "${dir}/run/port-base"
    set_ports
    : >"${dir}/run/nodes"
    if ((count == 1)); then
        echo "${host_short} ${slurmd_port}" >>"${dir}/run/nodes"
    else
        netns_names
        for ((i = 1; i <= count; i++)); do
            # --netns: a third column, the node's own address on the bridge.
            if ((want_netns)); then
                echo "node${i} $((port_base + 20 + i)) ${ns_prefix}.$((10 + i))" >>"${dir}/run/nodes"
            else
                echo "node${i} $((port_base + 20 + i))" >>"${dir}/run/nodes"
            fi
        done
    fi
    echo "${port_base}" >"${dir}/run/port-base"
    local ctld_addr=127.0.0.1
    ((want_netns == 0)) || ctld_addr="${ns_prefix}.1"
    while read -r n p a; do
        node_lines+="NodeName=${n} NodeHostname=${host_short} NodeAddr=${a:-127.0.0.1} Port=${p} CPUs=${cpus} Boards=${boards:-1} SocketsPerBoard=${sockets} CoresPerSocket=${cores} ThreadsPerCore=${threads} RealMemory=${mem} State=UNKNOWN"$'\n'
    done <"${dir}/run/nodes"
    names="$(node_names | paste -sd, -)"

    local db_pass
    if [[ -s "${dir}/mysql/slurm.pass" ]]; then
        db_pass="$(cat "${dir}/mysql/slurm.pass")"
    else
        db_pass="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
        (umask 077 && echo "${db_pass}" >"${dir}/mysql/slurm.pass")
    fi

    cat >"${dir}/slurm.conf" <<EOF
# Private test cluster written by tests/slurm/slurm-up.sh; edit with tests/slurm/slurm-conf-set.sh.
ClusterName=${cluster_name}
SlurmctldHost=${host_short}(${ctld_addr})
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation=${dir}/state/slurmctld
SlurmdSpoolDir=${dir}/spool/slurmd-%n
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmdPidFile=${dir}/run/slurmd-%n.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=${dbd_port}
# Clients sign slurmdbd messages with the munge socket named here, not AuthInfo's (slurm_protocol_api.c,
# SLURM_GLOBAL_AUTH_KEY); without it sacctmgr/slurmctld look for /run/munge/munge.socket.2.
AccountingStoragePass=socket=${dir}/munge/munge.socket
JobCompType=jobcomp/none
PlugStackConfig=${dir}/plugstack.conf
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=600
SlurmdTimeout=60
SlurmctldTimeout=60
${node_lines}# OverSubscribe=FORCE lets several jobs run on a node at once (tests may run in parallel).
PartitionName=debug Nodes=${names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    chmod 644 "${dir}/slurm.conf"
    # slurm-conf-set.sh --reset puts this back.
    cp -p "${dir}/slurm.conf" "${dir}/slurm.conf.orig"

    cat >"${dir}/slurmdbd.conf" <<EOF
# Private slurmdbd written by tests/slurm/slurm-up.sh.
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=${dbd_port}
SlurmUser=root
LogFile=${dir}/log/slurmdbd.log
PidFile=${dir}/run/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${mysql_port}
StorageUser=slurm
StoragePass=${db_pass}
StorageLoc=slurm_acct_db
EOF
    # slurmdbd refuses a config readable by others (it holds the database password).
    chmod 600 "${dir}/slurmdbd.conf"

    # Read by slurmd/slurmstepd only if a cgroup plugin is loaded; present so a system cgroup.conf is never
    # consulted by accident.
    cat >"${dir}/cgroup.conf" <<EOF
CgroupPlugin=autodetect
EOF
    chmod 644 "${dir}/cgroup.conf"

    cat >"${dir}/plugstack.conf" <<EOF
# Tests drop SPANK plugin lines into ${dir}/plugstack.conf.d/*.conf
include ${dir}/plugstack.conf.d/*.conf
EOF
    chmod 644 "${dir}/plugstack.conf"
}

fresh=0
if any_up; then
    [[ -s "${dir}/slurm.conf" && -s "${dir}/slurmdbd.conf" && -s "${dir}/run/nodes" ]] ||
        die "some daemons run from ${dir} but its configuration is missing; run slurm-down.sh ${dir} first"
    say "${dir} is not fully up: keeping its configuration, starting or resuming what is not"
else
    write_configs
    fresh=1
fi

check_port_free() {
    local port="$1" what="$2"
    # A connect that succeeds means a listener (bash's /dev/tcp: no iproute2 needed on a bare CI image).
    if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/${port}" 2>/dev/null; then
        fail_with_logs "port ${port} for ${what} is already in use (set MRCHECK_SLURM_PORT_BASE to move all ports)"
    fi
}

# --netns: the bridge and the nodes' namespaces, before slurmctld (it listens on every address, the bridge's
# included) and the slurmd that run inside them.
if [[ "$(awk 'NF >= 3' "${dir}/run/nodes" | wc -l)" != 0 ]]; then
    netns_setup || fail_with_logs "cannot set up the nodes' network namespaces"
fi

# Nothing of ours runs yet: every port must be free before anything starts, so a clash fails fast and
# leaves no half-started cluster behind.
if [[ "${fresh}" == 1 ]]; then
    check_port_free "${mysql_port}" "MariaDB"
    check_port_free "${dbd_port}" "slurmdbd"
    check_port_free "${ctld_port}" "slurmctld"
    while read -r n p; do
        check_port_free "${p}" "slurmd ${n}"
    done <"${dir}/run/nodes"
fi

step() { say "$(printf '[%5.1fs] %s' "$(awk -v a="${start_ns}" -v b="$(date +%s%N)" 'BEGIN{print (b-a)/1e9}')" "$*")"; }

# --- munged --------------------------------------------------------------------------------------
munge_sock="${dir}/munge/munge.socket"
munge_ok() { munge -S "${munge_sock}" -n </dev/null | unmunge -S "${munge_sock}" >/dev/null; }
if ! pid_alive munged "${dir}/run/munged.pid"; then
    if [[ ! -s "${dir}/munge/munge.key" ]]; then
        (umask 077 && head -c 1024 /dev/urandom >"${dir}/munge/munge.key")
    fi
    chmod 400 "${dir}/munge/munge.key"
    rm -f "${dir}/run/munged.pid" "${munge_sock}" "${munge_sock}.lock"
    # --force: munged refuses to run as root without it; running it as root keeps the key root-owned.
    spawn "${dir}/log/munged.stderr" munged --force \
        --socket="${munge_sock}" --key-file="${dir}/munge/munge.key" \
        --pid-file="${dir}/run/munged.pid" --log-file="${dir}/log/munged.log" \
        --seed-file="${dir}/munge/munged.seed"
    wait_until 30 "munged" munge_ok || fail_with_logs "munged did not start"
    step "munged up (socket ${munge_sock})"
fi

# --- MariaDB -------------------------------------------------------------------------------------
mysql_sock="${dir}/mysql/mysqld.sock"
mysql_data="${dir}/mysql/data"
mysql_root() { mariadb --no-defaults --socket="${mysql_sock}" -uroot; }
if ! pid_alive mariadbd "${dir}/run/mariadb.pid"; then
    check_port_free "${mysql_port}" "MariaDB"
    if [[ ! -d "${mysql_data}/mysql" ]]; then
        rm -rf "${mysql_data}"
        mkdir -p "${mysql_data}"
        mariadb-install-db --no-defaults --datadir="${mysql_data}" --user=root \
            --auth-root-authentication-method=socket --skip-test-db \
            >"${dir}/log/mariadb-install-db.log" 2>&1 ||
            fail_with_logs "mariadb-install-db failed (see ${dir}/log/mariadb-install-db.log)"
        step "MariaDB datadir initialised"
    fi
    rm -f "${dir}/run/mariadb.pid"
    # --no-defaults: never read /etc/mysql; loopback TCP for slurmdbd, a private socket for setup.
    # The innodb sizes are slurmdbd's recommended minimums (it logs an error below them,
    # accounting_storage_mysql.c); buffer pool pages are only touched as they are used.
    spawn "${dir}/log/mariadb.stderr" mariadbd --no-defaults --user=root \
        --datadir="${mysql_data}" --socket="${mysql_sock}" --pid-file="${dir}/run/mariadb.pid" \
        --port="${mysql_port}" --bind-address=127.0.0.1 --log-error="${dir}/log/mariadb.log" \
        --innodb-buffer-pool-size=512M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
        --max-allowed-packet=16M --skip-name-resolve
    wait_until 60 "MariaDB" mariadb-admin --no-defaults --socket="${mysql_sock}" -uroot ping ||
        fail_with_logs "MariaDB did not start"
    wait_until 10 "MariaDB pid file" pid_alive mariadbd "${dir}/run/mariadb.pid" ||
        fail_with_logs "MariaDB wrote no pid file"
    step "MariaDB up (port ${mysql_port}, socket ${mysql_sock})"
fi
db_pass="$(sed -n 's/^StoragePass=//p' "${dir}/slurmdbd.conf")"
mysql_root <<EOF || fail_with_logs "cannot create the slurm database user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '${db_pass}';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${db_pass}';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '${db_pass}';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '${db_pass}';
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF

# --- slurmdbd ------------------------------------------------------------------------------------
sacctmgr_ok() { slurm_cmd sacctmgr -n -P list cluster format=cluster; }
if ! pid_alive slurmdbd "${dir}/run/slurmdbd.pid"; then
    check_port_free "${dbd_port}" "slurmdbd"
    rm -f "${dir}/run/slurmdbd.pid"
    spawn "${dir}/log/slurmdbd.stderr" slurmdbd
    wait_until 30 "slurmdbd pid file" pid_alive slurmdbd "${dir}/run/slurmdbd.pid" ||
        fail_with_logs "slurmdbd did not start"
    # The first start creates the schema; sacctmgr answers once that is done.
    wait_until 90 "slurmdbd to answer sacctmgr" sacctmgr_ok || fail_with_logs "slurmdbd does not answer"
    step "slurmdbd up (port ${dbd_port})"
fi

# --- accounting: cluster, account, users (before slurmctld, so it registers with a known cluster) ------
# Decided from one query (every sacctmgr call costs a slurmdbd connection, ~1 s on a loaded machine).
# `add cluster` also gives root an association of its own (account root).
assocs="$(slurm_cmd sacctmgr -n -P list associations format=cluster,account,user 2>/dev/null)" || assocs=""
if ! grep -q "^${cluster_name}|" <<<"${assocs}"; then
    slurm_cmd sacctmgr -i add cluster "${cluster_name}" >/dev/null || fail_with_logs "sacctmgr add cluster failed"
fi
if ! grep -q "^${cluster_name}|mrcheck|" <<<"${assocs}"; then
    slurm_cmd sacctmgr -i add account mrcheck cluster="${cluster_name}" description=mrcheck-tests \
        organization=mrcheck >/dev/null || fail_with_logs "sacctmgr add account failed"
fi
if ! grep -qx "${cluster_name}|mrcheck|${test_user}" <<<"${assocs}"; then
    slurm_cmd sacctmgr -i add user "${test_user}" account=mrcheck defaultaccount=mrcheck cluster="${cluster_name}" \
        >/dev/null || fail_with_logs "sacctmgr add user ${test_user} failed"
fi
if ! slurm_cmd sacctmgr -n -P list associations format=cluster,account,user 2>/dev/null |
    grep -qx "${cluster_name}|mrcheck|${test_user}"; then
    fail_with_logs "accounting has no association ${cluster_name}/mrcheck/${test_user} after adding it"
fi

# --- slurmctld -----------------------------------------------------------------------------------
ctld_ok() { slurm_cmd scontrol ping | grep -q 'is UP'; }
if ! pid_alive slurmctld "${dir}/run/slurmctld.pid"; then
    check_port_free "${ctld_port}" "slurmctld"
    mkdir -p "${dir}/state/slurmctld"
    rm -f "${dir}/run/slurmctld.pid"
    spawn "${dir}/log/slurmctld.stderr" slurmctld
    wait_until 30 "slurmctld pid file" pid_alive slurmctld "${dir}/run/slurmctld.pid" ||
        fail_with_logs "slurmctld did not start"
    wait_until 60 "slurmctld to answer" ctld_ok || fail_with_logs "slurmctld does not answer scontrol ping"
    step "slurmctld up (port ${ctld_port})"
fi

# --- slurmd (one per node line) ------------------------------------------------------------------
while read -r node port; do
    [[ -n "${node}" ]] || continue
    if ! pid_alive slurmd "${dir}/run/slurmd-${node}.pid"; then
        # slurmd-restart.sh waits until this slurmd registered, not just until a saved state says idle.
        "${here}/slurmd-restart.sh" --node "${node}" "${dir}" </dev/null || fail_with_logs "slurmd ${node} did not start"
    fi
done <"${dir}/run/nodes"
for node in $(node_names); do
    # A node a previous test drained (a failing Prolog does that) or that went down while its slurmd was
    # stopped would stay unusable: slurm-up.sh is the "make it usable" entry point, so it resumes it.
    state="$(node_state "${node}")"
    if [[ "${state}" == drain* || "${state}" == down* || "${state}" == fail* ]] &&
        pid_alive slurmd "${dir}/run/slurmd-${node}.pid"; then
        say "node ${node} is ${state} ($(slurm_cmd sinfo -h -N -n "${node}" -o '%E' 2>/dev/null)): resuming it"
        slurm_cmd scontrol update nodename="${node}" state=resume || true
    fi
    wait_until 60 "node ${node} to be idle" node_usable "${node}" ||
        fail_with_logs "node ${node} is not idle: state '$(node_state "${node}")'" \
            "reason '$(slurm_cmd sinfo -h -N -n "${node}" -o '%E' 2>/dev/null)'"
done
step "slurmd up, node(s) $(node_names | tr '\n' ' ')idle"

cat >"${dir}/env.sh" <<EOF
# Source this to use the private test cluster started by tests/slurm/slurm-up.sh.
export SLURM_CONF=${dir}/slurm.conf
export MRCHECK_SLURM_DIR=${dir}
export MRCHECK_SLURM_USER=${test_user}
export MRCHECK_SLURM_UID=${test_uid}
export MRCHECK_SLURM_NODES="$(node_names | awk '{print $1}' | paste -sd, -)"
export MRCHECK_SLURM_PARTITION=debug
export MRCHECK_SLURM_PLUGSTACK_D=${dir}/plugstack.conf.d
export MRCHECK_SLURM_WORK=${dir}/work
export MRCHECK_SLURM_MUNGE_SOCKET=${munge_sock}
# 1 when each slurmd runs in its own network and mount namespace (slurm-up.sh --netns; lib.sh netns_*).
export MRCHECK_SLURM_NETNS=$(netns_on && echo 1 || echo 0)
# Run a command as the unprivileged test user, keeping this shell's environment and limits (no PAM):
#   \$MRCHECK_AS_USER srun -n1 true
export MRCHECK_AS_USER="setpriv --reuid=${test_uid} --regid=$(id -g "${test_user}") --init-groups -- env HOME=${test_home} USER=${test_user} LOGNAME=${test_user}"
EOF
chmod 644 "${dir}/env.sh"

elapsed=$(awk -v a="${start_ns}" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b-a)/1e9}')
say "up in ${dir} after ${elapsed}s"
print_env
