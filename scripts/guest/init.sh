#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A guest node's init (scripts/guest.sh): PID 1 after the image's stub /sbin/mrcheck-guest-init mounts the
# share disk (/mnt/host, made by `guest.sh up`) and runs this from it. It names the node, puts the guest
# network's address on the virtio NIC, adds Soft-RoCE (rxe0) on it, installs the .deb from the share, starts
# munged and Slurm when the share has their files (slurmctld on node1, slurmd on each), and
# serves commands on the virtio-serial ports mrcheck.ctl0..3 (scripts/guest/client.py is the other end).
# Its console lines starting with MRCHECK-GUEST- are what guest.sh waits for: READY, or FAIL with one reason.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root
console() { echo "$*" >/dev/ttyS0; }
fail() {
  console "MRCHECK-GUEST-FAIL node=${node:-?} kernel=$(uname -r): $*"
  sleep 5
  echo o >/proc/sysrq-trigger
}

node=$(sed -n 's/.*mrcheck\.node=\([0-9]*\).*/\1/p' /proc/cmdline)
nodes=$(sed -n 's/.*mrcheck\.nodes=\([0-9]*\).*/\1/p' /proc/cmdline)
[[ -n $node && -n $nodes ]] || fail "no mrcheck.node= or mrcheck.nodes= on the kernel command line"
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm /run /tmp
mountpoint -q /dev/pts || mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mountpoint -q /run || mount -t tmpfs -o mode=755 tmpfs /run
mount -o remount,rw / 2>/dev/null
hostname "node$node"
echo "node$node" >/etc/hostname
{
  echo "127.0.0.1 localhost"
  for ((i = 1; i <= nodes; i++)); do echo "10.77.0.$i node$i"; done
} >/etc/hosts

# The guest network: the one virtio NIC (the initramfs's udev named it, ens3 on Debian 12's).
ip link set lo up
nic=
for d in /sys/class/net/*; do
  [[ $(basename "$d") == lo ]] && continue
  [[ -e $d/device ]] && { nic=$(basename "$d"); break; }
done
[[ -n $nic ]] || fail "no network interface (is the virtio NIC missing from the kernel?)"
if ! ip addr add "10.77.0.$node/24" dev "$nic" || ! ip link set "$nic" up; then fail "cannot put 10.77.0.$node on $nic"; fi
modprobe rdma_rxe 2>/tmp/modprobe.err || fail "no rdma_rxe: $(head -n1 /tmp/modprobe.err)"
rdma link add rxe0 type rxe netdev "$nic" 2>/tmp/rdma.err || fail "rdma link add rxe0 on $nic: $(head -n1 /tmp/rdma.err)"
[[ -e /sys/class/infiniband/rxe0 ]] || fail "rdma_rxe loaded but no rxe0 in /sys/class/infiniband"

# mrcheck, from the .deb guest.sh put on the share: a real package install (dpkg resolves against the
# image's packages: no network to a mirror from here).
if [[ -f /mnt/host/mrcheck.deb ]]; then
  dpkg -i /mnt/host/mrcheck.deb >/var/log/mrcheck-install.log 2>&1 ||
    fail "dpkg -i of the mrcheck .deb failed: $(grep -m1 -iE 'error|depends' /var/log/mrcheck-install.log)"
fi
[[ -x /mnt/host/node-setup.sh ]] && { /mnt/host/node-setup.sh "$node" "$nodes" || fail "node-setup.sh failed"; }

# daemon_error NAME: why NAME stopped at start, from its stderr or else the last error line of its log.
daemon_error() {
  local why
  why=$(head -n1 "/tmp/$1.err")
  [[ -n $why ]] || why=$(grep -E 'error|fatal' "/var/log/slurm/$1.log" 2>/dev/null | tail -n1)
  echo "$1: ${why:-exited at start, no error logged}"
}
# munge and Slurm, when guest.sh put the cluster's key and slurm.conf on the share: munged as munge with the key
# 0400 munge:munge (as Debian's unit), slurmctld on node1, slurmd everywhere with RLIMIT_MEMLOCK unlimited (Debian's
# slurmd.service: LimitMEMLOCK=infinity; this init's children have the kernel's 8 MiB). mrcheck's plugin is on
# through the drop-in directory and the examples of the .deb, as the README's "Turn it on" has it.
start_slurm() {
  install -o munge -g munge -m 0400 /mnt/host/slurm/munge.key /etc/munge/munge.key || return 1
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  setpriv --reuid=munge --regid=munge --init-groups munged </dev/null >/dev/null 2>/tmp/munged.err ||
    { echo "munged: $(head -n1 /tmp/munged.err)"; return 1; }
  mkdir -p /etc/slurm/plugstack.conf.d /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  install -m 0644 /mnt/host/slurm/slurm.conf /mnt/host/slurm/cgroup.conf /etc/slurm/
  # slurmd's cgroup plugin (cgroup.conf: v2, no systemd): the hierarchy, its controllers, the slice it expects.
  mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup || return 1
  echo '+cpuset +cpu +memory +pids' >/sys/fs/cgroup/cgroup.subtree_control
  mkdir -p /sys/fs/cgroup/system.slice
  echo 'include /etc/slurm/plugstack.conf.d/*.conf' >/etc/slurm/plugstack.conf
  if [[ -f /usr/share/mrcheck/plugstack.conf.d/mrcheck.conf ]]; then
    cp /usr/share/mrcheck/plugstack.conf.d/mrcheck.conf /etc/slurm/plugstack.conf.d/
    cp /usr/share/mrcheck/mrcheck.conf /etc/slurm/mrcheck.conf
  fi
  if ((node == 1)); then
    slurmctld </dev/null >/dev/null 2>/tmp/slurmctld.err || { daemon_error slurmctld; return 1; }
  fi
  prlimit --memlock=unlimited:unlimited slurmd </dev/null >/dev/null 2>/tmp/slurmd.err ||
    { daemon_error slurmd; return 1; }
}
if [[ -f /mnt/host/slurm/slurm.conf ]]; then
  why=$(start_slurm) || fail "munge/Slurm did not start: $why"
fi

# The command channel: each port serves one command at a time, answered with "RC B64(STDOUT) B64(STDERR)".
# The port stays open for good: a read without a host connected returns at once (EOF), and a request that arrives
# while the guest has the port closed is lost, so closing it between connections would drop commands. The idle
# loop forks nothing (bash's read, and a wait on a FIFO nobody writes as the pause): under TCG a `head` and a
# `sleep` ten times a second on four ports kept the guest's one vCPU busy and every command took seconds.
mkfifo /run/mrcheck-idle
exec 4<>/run/mrcheck-idle
serve() {
  local dev=$1 req out
  exec 3<>"$dev" || { console "MRCHECK-GUEST-FAIL node=$node: cannot open $dev"; return; }
  while true; do
    IFS= read -r -u 3 req || [[ -n $req ]] || { read -r -t 0.2 -u 4 _; continue; }
    [[ -n $req ]] || continue
    out=$(mktemp -d)
    (cd /root && setsid bash -c "$(base64 -d <<<"$req")" </dev/null >"$out/o" 2>"$out/e" 3<&- 4<&-)
    printf '%s %s %s\n' "$?" "$(base64 -w0 "$out/o")" "$(base64 -w0 "$out/e")" >&3
    rm -rf "$out"
  done
}
for p in /sys/class/virtio-ports/*; do
  [[ $(cat "$p/name" 2>/dev/null) == mrcheck.ctl* ]] && serve "/dev/$(basename "$p")" &
done
console "MRCHECK-GUEST-READY node=$node kernel=$(uname -r) nic=$nic rdma=rxe0"
while true; do wait; sleep 1; done
