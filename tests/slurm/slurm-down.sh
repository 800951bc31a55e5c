#!/bin/bash
# Stops everything tests/slurm/slurm-up.sh started in DIR, by pid file only (a system Slurm or MariaDB on the
# same machine is never touched: no pkill by name). Waits for each daemon to exit (bounded: SIGTERM, then
# SIGKILL after a timeout). Leaves configuration, logs, state and the database in DIR.
# usage: slurm-down.sh [--only DAEMON] [DIR]
#   --only slurmctld|slurmdbd|mariadb|munged|slurmd|slurmd:NODE  stops just that one and leaves jobs alone
#   (a test of "slurmctld unreachable"); `slurm-up.sh` starts it again with the configuration in force.
set -euo pipefail

prog=slurm-down
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "${here}/lib.sh"

usage() {
    echo "usage: slurm-down.sh [--only slurmctld|slurmdbd|mariadb|munged|slurmd|slurmd:NODE] [DIR]" >&2
    exit 2
}
arg_dir=""
only=""
while (($#)); do
    case "$1" in
        --only)
            only="${2:-}"
            case "${only}" in
                slurmctld | slurmdbd | mariadb | munged | slurmd | slurmd:?*) ;;
                *) usage ;;
            esac
            shift
            ;;
        -h | --help | -*) usage ;;
        *) [[ -z "${arg_dir}" ]] || usage; arg_dir="$1" ;;
    esac
    shift
done
resolve_dir "${arg_dir}"
[[ -d "${dir}" ]] || { say "nothing in ${dir}"; exit 0; }
take_lock

rc=0

# stop NAME PIDFILE [TIMEOUT]: SIGTERM the process named in PIDFILE if it really is NAME, wait for it to go.
stop() {
    local name="$1" pidfile="$2" timeout="${3:-30}" pid
    if ! pid_alive "${name}" "${pidfile}"; then
        [[ ! -e "${pidfile}" ]] || say "${name}: not running (stale ${pidfile})"
        rm -f "${pidfile}"
        return 0
    fi
    pid="$(pid_of "${pidfile}")"
    kill -TERM "${pid}" 2>/dev/null || true
    local deadline=$((SECONDS + timeout))
    while proc_alive "${pid}" "${name}"; do
        if ((SECONDS >= deadline)); then
            say "${name} pid ${pid} still alive ${timeout}s after SIGTERM: SIGKILL"
            kill -KILL "${pid}" 2>/dev/null || true
            sleep 0.5
            if proc_alive "${pid}" "${name}"; then
                say "error: ${name} pid ${pid} survived SIGKILL"
                rc=1
                return 0
            fi
            break
        fi
        sleep 0.1
    done
    # Some daemons remove their own pid file, some do not; a left-over one would only be stale.
    rm -f "${pidfile}"
    say "${name} (pid ${pid}) stopped"
}

# shellcheck disable=SC2317 # called through wait_until
no_jobs() { [[ -z "$(slurm_cmd squeue -h -o %i 2>/dev/null)" ]]; }

if [[ -n "${only}" ]]; then
    case "${only}" in
        slurmctld) stop slurmctld "${dir}/run/slurmctld.pid" ;;
        slurmdbd) stop slurmdbd "${dir}/run/slurmdbd.pid" ;;
        mariadb) stop mariadbd "${dir}/run/mariadb.pid" 60 ;;
        munged) stop munged "${dir}/run/munged.pid" ;;
        slurmd) for node in $(node_names); do stop slurmd "${dir}/run/slurmd-${node}.pid"; done ;;
        slurmd:*) stop slurmd "${dir}/run/slurmd-${only#slurmd:}.pid" ;;
    esac
    exit "${rc}"
fi

# Jobs first, while slurmctld still runs: a step left behind would keep its slurmstepd (and the job user's
# processes) alive after slurmd is gone.
if pid_alive slurmctld "${dir}/run/slurmctld.pid"; then
    jobs="$(slurm_cmd squeue -h -o '%i' 2>/dev/null | paste -sd' ' -)" || jobs=""
    if [[ -n "${jobs}" ]]; then
        say "cancelling jobs: ${jobs}"
        # shellcheck disable=SC2086
        slurm_cmd scancel ${jobs} 2>/dev/null || true
        wait_until 30 "jobs to end" no_jobs ||
            say "some jobs did not end in 30s; stopping anyway"
    fi
fi

for node in $(node_names); do
    stop slurmd "${dir}/run/slurmd-${node}.pid"
done
stop slurmctld "${dir}/run/slurmctld.pid"
stop slurmdbd "${dir}/run/slurmdbd.pid"
stop mariadbd "${dir}/run/mariadb.pid" 60
stop munged "${dir}/run/munged.pid"
# --netns: the namespaces, veths and bridge slurm-up.sh made (lib.sh netns_teardown). A slurmstepd still
# inside one keeps that namespace alive until it ends; its name, link and the bridge go now.
if netns_on; then
    netns_teardown
    say "network namespaces removed"
fi
rm -f "${dir}/env.sh"

if ((rc == 0)); then
    say "down (logs kept in ${dir}/log)"
fi
exit "${rc}"
