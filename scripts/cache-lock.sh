# cache_lock LOCKFILE WHO: an exclusive flock on LOCKFILE, beside a cache under /var/cache/mrcheck, held by this
# shell until it exits (the kernel drops it however the shell ends, so a killed run never leaves it taken).
# Whatever makes or changes a shared cache takes it first, so two runs (two test.sh, a test.sh and a
# slurm-release.sh, a failed run's orphan and the next run) wait for each other instead of running two
# apt-gets or two debootstraps in one directory: scripts/slurm-release.sh (RELEASE/root.lock),
# tests/container/make-images.sh (images/.lock), and the guest images under /var/cache/mrcheck/guest.
# Sets CACHE_LOCK_FD; a program started from this shell that outlives it (a daemon) must not inherit it
# (`cmd {CACHE_LOCK_FD}>&-`), or it keeps the cache locked. Waits MRCHECK_LOCK_WAIT seconds (default 3600),
# saying so, then fails.
# shellcheck shell=bash
cache_lock() {
  local lock=$1 who=$2 t0=$SECONDS wait=${MRCHECK_LOCK_WAIT:-3600}
  mkdir -p "$(dirname "$lock")"
  exec {CACHE_LOCK_FD}>>"$lock"
  flock -n "$CACHE_LOCK_FD" && return 0
  echo "$who: waiting for another run that holds $lock" >&2
  if ! flock -w "$wait" "$CACHE_LOCK_FD"; then
    echo "$who: $lock is still held after $wait s (fuser -v $lock shows by whom)" >&2
    return 1
  fi
  echo "$who: $lock is ours after $((SECONDS - t0)) s of waiting" >&2
}
