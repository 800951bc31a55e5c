// The NIC families mrcheck tells apart, one row each (docs/transports.md, "NIC families"): what recognises a family
// (the parent's driver, the device-name prefix), what carries its verbs (the kernel modules, the rdma-core
// provider) and what the checks print about it. A new family is a new row in src/facts/nic_family.cpp (and a
// fixture); no other file names families.
#pragma once

#include <span>
#include <string_view>

namespace mrcheck {

struct rdma_device_fact;

struct nic_family {
  std::string_view name;  // "mlx5", "efa", "bnxt_re": what reports and the rdma_stack rule print
  // The drivers bound to the parent (`/sys/class/infiniband/<dev>/device`): the PCI function's driver, or the
  // driver that named the auxiliary device ("ice.roce.0" -> "ice"). Empty for software devices, which have no
  // parent and are told by their name alone.
  std::span<const std::string_view> drivers;
  // The kernel modules read for the family (`/sys/module/<name>`) and listed by rdma_stack, in that order: the
  // verbs module and, where its version matters too, the Ethernet driver under it.
  std::span<const std::string_view> modules;
  // The verbs module as docs/transports.md's table names it (one of `modules`).
  std::string_view verbs_module;
  std::string_view provider;  // rdma-core's providers/<name>, libibverbs/lib<name>-rdmav*.so
  // Device names of the family ("mlx5_0", "rxe0"): recognise a device with no known driver, and a software device
  // always.
  std::string_view name_prefix;
  // What installs the provider, for the fix when it is missing ("ibverbs-providers / rdma-core").
  std::string_view provider_source;
  // MLNX/DOCA-OFED against inbox applies (docs/transports.md): rdma_stack judges the modules itself, so they are
  // not listed once more per family; the firmware rules of matrix.rules (hca_families) judge its fw_ver.
  bool ofed_stack = false;
};

// Every family, in the order a device is matched against them.
std::span<const nic_family> nic_families();
// The row named `name`, or nullptr.
const nic_family* find_nic_family(std::string_view name);
// The family of a device: the first row whose driver is the device's, or, when the device has no driver (or
// the row is a software family, with no drivers), whose name prefix starts the device's name. nullptr: none.
const nic_family* nic_family_of(const rdma_device_fact& d);

}  // namespace mrcheck
