#!/bin/bash
# The manual checklist an admin runs to see a node's driver/firmware matrix, as one script: what
# mrcheck-prolog replaces. Missing tools are skipped (as an admin would skip them), output discarded.
have() { command -v "$1" >/dev/null 2>&1; }
{
  have nvidia-smi && nvidia-smi -q
  have ibstat && ibstat
  have ibv_devinfo && ibv_devinfo -v
  have modinfo && modinfo mlx5_core
  have modinfo && modinfo nvidia
  have ofed_info && ofed_info -s
  have lsmod && lsmod
  ulimit -a
  cat /proc/sys/vm/max_map_count /proc/sys/vm/nr_hugepages /proc/meminfo
  cat /sys/class/infiniband/*/fw_ver /sys/module/mlx5_core/version /proc/driver/nvidia/version
  cat /sys/class/infiniband_verbs/abi_version
  grep -i propagate "${SLURM_CONF:-/etc/slurm/slurm.conf}"
} >/dev/null 2>&1
exit 0
