#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A cluster of Debian 12 guests with real kernels and Soft-RoCE (rdma_rxe), for the tests that need a real
# verbs stack (tests/guest/). Each guest boots Debian's kernel under QEMU (TCG; KVM only where a `-cpu host` vCPU starts),
# puts 10.77.0.N on its virtio NIC, adds rxe0 on it, and installs mrcheck from the project's .deb. The guests'
# network joins the guests only: one vde_switch in hub mode over a unix socket (no host interface, no multicast).
# The guests are one Slurm cluster (munge with one key, slurmctld on node1, slurmd on each, mrcheck's plugin in
# plugstack.conf): `guest.sh slurm 1 'srun -N2 --mr-check true'` runs a step across them as an unprivileged user.
#
# usage: scripts/guest.sh COMMAND [ARGS]
#   build            make (or reuse) the guest image in the cache
#   up N             build, then boot N guests (1-3) and wait until each is ready or says why not
#   run NODE CMD...  run CMD (a bash command line) as root on guest NODE (1-N); its stdout, stderr and status
#   reboot NODE [main|new]  boot NODE again on the main archive's kernel (6.1) or the newer one (backports)
#   kernels          the two kernel releases in the image
#   slurm NODE CMD...  run CMD (a bash command line) as the unprivileged user mrtest on NODE, memlock raised
#                    (unlimited, as a login node's limits.conf would): srun, sbatch, sinfo of the guests' Slurm
#   down             stop the guests and the switch
#   console NODE     print NODE's console log
# Environment:
#   MRCHECK_GUEST_DIR     the running cluster's files (default /tmp/mrcheck-guest)
#   MRCHECK_GUEST_CACHE   where the image is kept (default /var/cache/mrcheck/guest; its lock: guest.lock beside it)
#   MRCHECK_GUEST_DEB     the .deb to install (default: packaging/build-deb.sh into build-deb, as the package tests;
#                         none: no mrcheck in the guests)
#   MRCHECK_GUEST_FILES   a directory copied onto every guest's share (/mnt/host/files), e.g. another build's programs
#   MRCHECK_GUEST_MEM     MiB per guest (default 768)   MRCHECK_GUEST_CPUS  vCPUs per guest (default 1)
#   MRCHECK_GUEST_ACCEL   tcg or kvm (default: kvm where a `-cpu host` vCPU starts, else tcg)
#   MRCHECK_GUEST_APPEND  more kernel command line (e.g. module_blacklist=rdma_rxe: the leg's own failure test)
#   MRCHECK_GUEST_KERNEL  main (default: bookworm's main archive) or new (bookworm-backports) for `up`
#   MRCHECK_GUEST_SLURM   1 (default): munge and Slurm in the guests (one MUNGE key per `up`, slurmctld on node1,
#                         slurmd on every node; `up` waits until sinfo shows every node idle); 0: neither
#   MRCHECK_GUEST_TIMEOUT seconds `up` waits for a guest (default 180)  MRCHECK_DEBIAN_MIRROR (as scripts/slurm-release.sh)
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'mrcheck: guest: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() {
  sed -n '/^# usage:/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

work=${MRCHECK_GUEST_DIR:-/tmp/mrcheck-guest}
cache=${MRCHECK_GUEST_CACHE:-/var/cache/mrcheck/guest}
mirror=${MRCHECK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mem=${MRCHECK_GUEST_MEM:-768}
cpus=${MRCHECK_GUEST_CPUS:-1}
boot_timeout=${MRCHECK_GUEST_TIMEOUT:-180}

# What the image holds: the kernel and Soft-RoCE's user space, the libraries perftest and mrcheck's probes use,
# what mrcheck's .deb depends on (Slurm's plugins and libslurm, fmt, hwloc), munge and Slurm's daemons for a
# cluster, and the libraries whose real failure logs tests/fixtures/guest_logs/ keeps (UCX, Open MPI, libfabric).
packages=(
  linux-image-amd64 kmod iproute2 iputils-ping procps util-linux nftables
  rdma-core ibverbs-utils ibverbs-providers librdmacm1 rdmacm-utils perftest
  libfmt9 libhwloc15 libslurm38 slurm-wlm-basic-plugins slurmd slurmctld slurm-client munge
  ucx-utils openmpi-bin libfabric-bin
)
initramfs_modules=(virtio_pci virtio_blk virtio_net virtio_console ext4)
# The stub init baked into the image: everything else (tests/guest's init) comes from the share disk at boot, so
# changing it needs no new image.
stub_init='#!/bin/sh
mkdir -p /mnt/host
mount -o ro /dev/vdb /mnt/host || { echo "MRCHECK-GUEST-FAIL: no share disk /dev/vdb" >/dev/ttyS0; sleep 5; echo o >/proc/sysrq-trigger; }
exec /bin/bash /mnt/host/init.sh'
# The second kernel (the kernel-change tests): the newer one bookworm-backports ships, beside the main archive's
# 6.1 under the same user space. `up`/`reboot` boot the main one unless MRCHECK_GUEST_KERNEL=new.
new_kernel_suite=bookworm-backports
key=$(printf '%s\n' bookworm "${packages[@]}" "${initramfs_modules[@]}" "$stub_init" "$new_kernel_suite" |
  sha256sum | cut -c1-16)
image=$cache/$key

# --- the image -----------------------------------------------------------------------------------------------
# debootstrap --variant=minbase, then apt-get --no-install-recommends in a chroot (apt resolves what debootstrap's
# --include cannot: linux-image's initramfs-tools alternative). The root becomes an ext4 image with mkfs.ext4 -d,
# and the kernel and initramfs are copied beside it; the root is then removed (the .debs are kept for a rebuild).
build_image() {
  local root=$cache/build-$key t0=$SECONDS
  rm -rf --one-file-system "$root"
  mkdir -p "$cache/debs"
  say "debootstrap --variant=minbase bookworm ($mirror), then ${#packages[@]} packages (first time only)"
  debootstrap --variant=minbase --cache-dir="$cache/debs" bookworm "$root" "$mirror" >"$cache/build.log" 2>&1 ||
    { tail -n 15 "$cache/build.log" >&2; die "debootstrap failed ($cache/build.log): is $mirror reachable?"; }
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  # The initramfs needs only what mounts a virtio disk: with Debian's MODULES=most, mkinitramfs copied every
  # storage driver and took minutes on a loaded 2-core machine.
  mkdir -p "$root/etc/initramfs-tools/conf.d"
  echo MODULES=list >"$root/etc/initramfs-tools/conf.d/mrcheck-guest"
  printf '%s\n' "${initramfs_modules[@]}" >"$root/etc/initramfs-tools/modules"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  cp "$cache"/debs/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  local rc=0
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    bash -c 'apt-get -o Acquire::Retries=3 update -qq && apt-get -o Acquire::Retries=3 install -y -qq \
      --no-install-recommends "${@:3}" && useradd -m -u 1000 -s /bin/bash mrtest &&
      echo "deb $1 $2 main" >/etc/apt/sources.list.d/new-kernel.list && apt-get -o Acquire::Retries=3 update -qq &&
      apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends -t "$2" linux-image-amd64' \
    bash "$mirror" "$new_kernel_suite" "${packages[@]}" \
    >>"$cache/build.log" 2>&1 || rc=$?
  umount "$root/proc" 2>/dev/null || umount -l "$root/proc"
  ((rc == 0)) || { tail -n 15 "$cache/build.log" >&2; die "apt-get in the guest root failed ($cache/build.log)"; }
  cp -n "$root"/var/cache/apt/archives/*.deb "$cache/debs/" 2>/dev/null || true
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/{doc,man,locale}/*
  printf '%s\n' "$stub_init" >"$root/sbin/mrcheck-guest-init"
  chmod 755 "$root/sbin/mrcheck-guest-init"
  mkdir -p "$image.tmp"
  # Two kernels: the main archive's (the lowest version) boots by default, the newer one as "new".
  local main_v new_v
  main_v=$(cd "$root/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | head -n1)
  new_v=$(cd "$root/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -n1)
  [[ -n $main_v && $new_v != "$main_v" ]] || die "the guest root has no second kernel from $new_kernel_suite ($cache/build.log)"
  cp "$root/boot/vmlinuz-$main_v" "$image.tmp/vmlinuz"
  cp "$root/boot/initrd.img-$main_v" "$image.tmp/initrd.img"
  cp "$root/boot/vmlinuz-$new_v" "$image.tmp/vmlinuz.new"
  cp "$root/boot/initrd.img-$new_v" "$image.tmp/initrd.img.new"
  printf '%s\n' "$main_v" >"$image.tmp/kernel"
  printf '%s\n' "$new_v" >"$image.tmp/kernel.new"
  local mb
  mb=$(du -sm "$root" | cut -f1)
  mkfs.ext4 -q -F -L mrcheck-guest -d "$root" "$image.tmp/root.img" "$((mb * 13 / 10 + 256))M" >>"$cache/build.log" 2>&1 ||
    die "mkfs.ext4 -d of the guest root failed ($cache/build.log)"
  printf '%s\n' "${packages[@]}" >"$image.tmp/packages"
  rm -rf --one-file-system "$root"
  mv "$image.tmp" "$image"
  say "image ready: $image ($(du -sm "$image" | cut -f1) MiB, $((SECONDS - t0)) s)"
}

build() {
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
  [[ -f $image/root.img ]] && return 0
  ((EUID == 0)) || die "building the guest image needs root (debootstrap, chroot)"
  command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/install-deps.sh)"
  mkdir -p "$cache"
  # One builder per machine: a second caller waits, then finds the image made.
  exec 9>"$cache.lock"
  flock 9
  [[ -f $image/root.img ]] || build_image
  flock -u 9
  local old
  for old in "$cache"/*/; do
    old=${old%/}
    [[ $old == "$image" || $old == "$cache/debs" ]] || rm -rf --one-file-system "$old"
  done
}

# --- the cluster ---------------------------------------------------------------------------------------------
deb_path() {
  if [[ -n ${MRCHECK_GUEST_DEB:-} ]]; then
    [[ -f $MRCHECK_GUEST_DEB ]] || die "MRCHECK_GUEST_DEB=$MRCHECK_GUEST_DEB does not exist"
    echo "$MRCHECK_GUEST_DEB"
  else
    say "building the .deb (packaging/build-deb.sh $src/build-deb)"
    bash "$src/packaging/build-deb.sh" "$src/build-deb" 2>"$work/build-deb.log" | tail -n1
  fi
}

# The share disk every guest mounts read-only at /mnt/host: the init, the .deb, MRCHECK_GUEST_FILES.
make_share() {
  local share=$work/share deb
  rm -rf "$share"
  mkdir -p "$share"
  cp "$src/scripts/guest/init.sh" "$share/init.sh"
  if [[ ${MRCHECK_GUEST_DEB:-} != none ]]; then
    deb=$(deb_path)
    [[ -f $deb ]] || die "no .deb to install ($work/build-deb.log)"
    cp "$deb" "$share/mrcheck.deb"
  fi
  [[ -z ${MRCHECK_GUEST_FILES:-} ]] || cp -a "$MRCHECK_GUEST_FILES" "$share/files"
  [[ -z ${MRCHECK_GUEST_SETUP:-} ]] || install -m 755 "$MRCHECK_GUEST_SETUP" "$share/node-setup.sh"
  if slurm_on; then make_slurm_files "$share/slurm" "$(cat "$work/nodes")"; fi
  mkfs.ext4 -q -F -L mrcheck-share -d "$share" "$work/share.img" "$(($(du -sm "$share" | cut -f1) + 32))M" >/dev/null ||
    die "mkfs.ext4 -d of the share failed"
}

slurm_on() {
  case ${MRCHECK_GUEST_SLURM:-1} in
    1) return 0 ;;
    0) return 1 ;;
    *) die "MRCHECK_GUEST_SLURM is 1 or 0, not ${MRCHECK_GUEST_SLURM}" ;;
  esac
}

# The cluster's MUNGE key (new at every `up`: the guests trust each other and nothing else) and its slurm.conf,
# both on the share for scripts/guest/init.sh to install. RealMemory must not exceed what slurmd finds (MemTotal:
# the guest's RAM less what its kernel keeps), or slurmctld marks the node invalid: 80 % of -m leaves room for
# either kernel. No slurmdbd: the AdminComment record lives in slurmctld's job record (`scontrol show job`) for
# MinJobAge. PropagateResourceLimits stays Slurm's default (ALL), so a `ulimit -l` before srun reaches the task
# as the submit-host hop the plugin names (the README's sites set PropagateResourceLimitsExcept=MEMLOCK).
make_slurm_files() { # make_slurm_files DIR NODES
  local dir=$1 nodes=$2 n
  mkdir -p "$dir"
  (umask 077 && head -c 1024 /dev/urandom >"$dir/munge.key")
  {
    cat <<EOF
# The guests' Slurm, written by scripts/guest.sh up for $nodes guest(s).
ClusterName=mrguest
SlurmctldHost=node1(10.77.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
PlugStackConfig=/etc/slurm/plugstack.conf
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=600
SlurmdTimeout=120
SlurmctldTimeout=120
EOF
    for ((n = 1; n <= nodes; n++)); do
      echo "NodeName=node$n NodeAddr=10.77.0.$n CPUs=$cpus RealMemory=$((mem * 8 / 10)) State=UNKNOWN"
    done
    echo "PartitionName=guests Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  # Slurm 22.05's slurmd loads a cgroup plugin whatever ProctrackType says, and stops without one. No systemd in
  # the guests: cgroup v2 with IgnoreSystemd (init.sh mounts it and makes system.slice, where the plugin puts
  # slurmstepd's scope itself).
  printf '%s\n' '# The guests'"'"' cgroup.conf, written by scripts/guest.sh up.' CgroupPlugin=cgroup/v2 IgnoreSystemd=yes \
    >"$dir/cgroup.conf"
}

# KVM only where a vCPU of `-cpu host` really starts: on some hosts /dev/kvm opens and `-machine none` starts, but
# the first vCPU aborts QEMU ("failed to set MSR 0x10a"). A paused pc machine creates its vCPUs, then the monitor's
# quit ends it: exit 0 is a working KVM, an abort is not. MRCHECK_GUEST_ACCEL=tcg|kvm overrides.
accel() {
  local tcg="-accel tcg,thread=multi -cpu max" kvm="-accel kvm -cpu host"
  case ${MRCHECK_GUEST_ACCEL:-auto} in
    tcg) echo "$tcg" ;;
    kvm) echo "$kvm" ;;
    *)
      if [[ -w /dev/kvm ]] && echo quit | timeout 20 qemu-system-x86_64 -accel kvm -cpu host -machine pc -nodefaults \
        -no-user-config -display none -S -monitor stdio >/dev/null 2>&1; then
        echo "$kvm"
      else
        echo "$tcg"
      fi
      ;;
  esac
}

boot_node() { # boot_node N NODES ACCEL KERNEL (main or new)
  local n=$1 nodes=$2 dir=$work/node$1 p ports=() suffix=''
  [[ $4 == new ]] && suffix=.new
  mkdir -p "$dir"
  for p in 0 1 2 3; do
    ports+=(-chardev "socket,id=ctl$p,path=$dir/ctl$p.sock,server=on,wait=off"
      -device "virtserialport,chardev=ctl$p,name=mrcheck.ctl$p")
  done
  # shellcheck disable=SC2086 # ACCEL is several words on purpose
  qemu-system-x86_64 $3 -m "$mem" -smp "$cpus" -display none -monitor none -no-reboot \
    -kernel "$image/vmlinuz$suffix" -initrd "$image/initrd.img$suffix" \
    -append "root=/dev/vda rw console=ttyS0 quiet panic=5 init=/sbin/mrcheck-guest-init mrcheck.node=$n mrcheck.nodes=$nodes${MRCHECK_GUEST_APPEND:+ $MRCHECK_GUEST_APPEND}" \
    -drive "file=$image/root.img,format=raw,if=virtio,snapshot=on" \
    -drive "file=$work/share.img,format=raw,if=virtio,readonly=on" \
    -netdev "vde,id=net0,sock=$work/switch" -device "virtio-net-pci,netdev=net0,mac=52:54:00:77:00:0$n" \
    -device virtio-serial-pci "${ports[@]}" \
    -serial "file:$dir/console.log" -daemonize -pidfile "$dir/qemu.pid" ||
    die "node$n: qemu-system-x86_64 did not start"
}

# node_ready N T0: 0 once N's console says READY (said once), 1 while it boots; a guest that says FAIL or whose
# QEMU is gone ends the script, naming it.
node_ready() {
  local n=$1 log=$work/node$1/console.log line
  line=$(tr -d '\r' <"$log" 2>/dev/null | grep -m1 -E '^MRCHECK-GUEST-(READY|FAIL)' || true)
  if [[ $line == MRCHECK-GUEST-READY* ]]; then
    say "node$n ready after $((SECONDS - $2)) s: ${line#MRCHECK-GUEST-READY }"
    return 0
  fi
  [[ -z $line ]] || die "node$n: ${line#MRCHECK-GUEST-FAIL }"
  kill -0 "$(cat "$work/node$n/qemu.pid" 2>/dev/null)" 2>/dev/null ||
    die "node$n: QEMU exited before the guest was ready (console: $log)"
  return 1
}

# wait_ready T0 N...: until every guest N is ready, one line each; the first that fails, whichever it is, is named
# at once (not after the guests before it have booted), else the first still booting at the time limit.
wait_ready() {
  local t0=$1 n pending=("${@:2}") left
  while true; do
    left=()
    for n in "${pending[@]}"; do node_ready "$n" "$t0" || left+=("$n"); done
    ((${#left[@]} > 0)) || return 0
    pending=("${left[@]}")
    n=${pending[0]}
    ((SECONDS - t0 < boot_timeout)) ||
      die "node$n did not boot in ${boot_timeout} s (last console line: $(tr -d '\r' <"$work/node$n/console.log" | tail -n1))"
    sleep 1
  done
}

up() {
  local nodes=${1:-}
  [[ $nodes =~ ^[1-3]$ ]] || die "up takes the number of guests, 1 to 3"
  build
  down_quiet
  mkdir -p "$work"
  echo "$nodes" >"$work/nodes"
  make_share
  command -v vde_switch >/dev/null || die "vde_switch is not installed (scripts/install-deps.sh: vde2)"
  vde_switch --hub --sock "$work/switch" --daemon --pidfile "$work/switch.pid" ||
    die "vde_switch did not start"
  local a n t0=$SECONDS
  a=$(accel)
  # A guest that fails stops them all (its console log stays): TCG guests left running would eat the machine.
  trap 'down_quiet' EXIT
  for ((n = 1; n <= nodes; n++)); do boot_node "$n" "$nodes" "$a" "$(kernel_choice)"; done
  wait_ready "$t0" $(seq 1 "$nodes")
  if slurm_on; then wait_slurm "$nodes" "$t0"; fi
  trap - EXIT
  say "up: $nodes guest(s) ($a) in $((SECONDS - t0)) s; run commands with: $0 run NODE CMD"
}

# wait_slurm NODES T0: until sinfo on node1 shows every node idle (within the boot's time, and at least 30 s); else
# one line saying which node is in which state and why (sinfo's reason, the last line of its slurmd log), or that
# slurmctld does not answer.
wait_slurm() {
  local nodes=$1 t0=$2 t1=$SECONDS states='' idle
  while ((SECONDS - t0 < boot_timeout || SECONDS - t1 < 30)); do
    states=$(MRCHECK_GUEST_RUN_TIMEOUT=30 run_cmd_sub 1 "sinfo -h -N -o '%N %T %E'" 2>&1) || states="sinfo: $states"
    idle=$(grep -c '^node[0-9] idle ' <<<"$states" || true)
    if ((idle == nodes)); then
      say "slurm: node[1-$nodes] idle after $((SECONDS - t1)) s (slurmctld on node1)"
      return 0
    fi
    sleep 2
  done
  [[ $states != sinfo:* ]] || die "slurm: slurmctld on node1 does not answer ($(paste -sd ' ' <<<"$states"));" \
    "its log: $(run_cmd_sub 1 'tail -n 2 /var/log/slurm/slurmctld.log' 2>&1 | paste -sd ' ')"
  local n='' state='' reason=''
  read -r n state reason < <(grep -v '^node[0-9] idle ' <<<"$states" | head -n1) || true
  [[ -n $n ]] || die "slurm: sinfo on node1 shows $idle of $nodes nodes idle: $(paste -sd ' ' <<<"$states")"
  [[ $reason != none ]] || reason=''
  die "slurm: $n is $state${reason:+ ($reason)} after $((SECONDS - t1)) s, not idle; its slurmd log:" \
    "$(run_cmd_sub "${n#node}" 'tail -n 1 /var/log/slurm/slurmd.log' 2>&1 | paste -sd ' ')"
}

kernel_choice() {
  case ${MRCHECK_GUEST_KERNEL:-main} in
    main | new) echo "${MRCHECK_GUEST_KERNEL:-main}" ;;
    *) die "MRCHECK_GUEST_KERNEL is main or new, not ${MRCHECK_GUEST_KERNEL}" ;;
  esac
}

# reboot NODE [main|new]: power NODE off and boot it again, on the main archive's kernel or the newer one; its root
# starts from the image again (snapshot=on), so what must survive a reboot is carried by the caller.
reboot_node() {
  local n=${1:-} kernel=${2:-main} nodes a t0=$SECONDS
  [[ $n =~ ^[1-3]$ && ($kernel == main || $kernel == new) ]] || usage
  [[ -f $work/node$n/qemu.pid ]] || die "node$n is not up (scripts/guest.sh up N)"
  nodes=$(cat "$work/nodes")
  local pid _
  pid=$(cat "$work/node$n/qemu.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  rm -f "$work/node$n/qemu.pid" "$work/node$n"/ctl*.sock
  a=$(accel)
  boot_node "$n" "$nodes" "$a" "$kernel"
  wait_ready "$t0" "$n"
}

run_cmd() {
  local n=${1:-} p
  shift || true
  [[ $n =~ ^[1-3]$ && $# -gt 0 ]] || usage
  [[ -S $work/node$n/ctl0.sock ]] || die "node$n is not up (scripts/guest.sh up N)"
  # A free port: each serves one command at a time, so up to four commands run at once on one guest.
  for p in 0 1 2 3; do
    exec 8>"$work/node$n/ctl$p.lock"
    if flock -n 8; then
      exec python3 "$src/scripts/guest/client.py" "$work/node$n/ctl$p.sock" "${MRCHECK_GUEST_RUN_TIMEOUT:-600}" "$*"
    fi
  done
  die "node$n: four commands are already running there"
}
run_cmd_sub() { (run_cmd "$@"); }

# slurm NODE CMD: CMD as mrtest (uid 1000 in the image), in its home (srun runs the job there), with RLIMIT_MEMLOCK
# unlimited, soft and hard, as limits.conf gives users on a login node of an RDMA cluster; CMD may lower it.
slurm_cmd() {
  local n=${1:-} cmd
  shift || true
  [[ $n =~ ^[1-3]$ && $# -gt 0 ]] || usage
  printf -v cmd '%q' "$*"
  run_cmd "$n" "cd /home/mrtest && prlimit --memlock=unlimited:unlimited setpriv --reuid=mrtest --regid=mrtest" \
    "--init-groups env -i PATH=/usr/bin:/bin HOME=/home/mrtest USER=mrtest LOGNAME=mrtest bash -c $cmd"
}

down_quiet() {
  local f
  for f in "$work"/node*/qemu.pid "$work/switch.pid"; do
    [[ -f $f ]] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

case ${1:-} in
  build) build ;;
  up) up "${2:-}" ;;
  run) shift && run_cmd "$@" ;;
  slurm) shift && slurm_cmd "$@" ;;
  reboot) shift && reboot_node "$@" ;;
  kernels) build && printf 'main %s\nnew %s\n' "$(cat "$image/kernel")" "$(cat "$image/kernel.new")" ;;
  down) down_quiet && say "down" ;;
  console) tr -d '\r' <"$work/node${2:?}/console.log" ;;
  *) usage ;;
esac
