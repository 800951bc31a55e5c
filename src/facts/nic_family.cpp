// The NIC family table (include/mrcheck/nic_family.h). docs/transports.md, "NIC families", is the same table in
// prose, with where each entry comes from; tests/unit/nic_family_test.cpp keeps the two in step.
#include <mrcheck/nic_family.h>

#include <mrcheck/facts.h>

#include <algorithm>
#include <array>

namespace mrcheck {

namespace {

constexpr std::string_view k_rdma_core = "ibverbs-providers / rdma-core";

constexpr std::string_view k_mlx5_drivers[] = {"mlx5_core"};
constexpr std::string_view k_mlx5_modules[] = {"mlx5_core", "mlx5_ib"};
constexpr std::string_view k_efa_drivers[] = {"efa"};
constexpr std::string_view k_efa_modules[] = {"efa"};
// E810 (ice) and X722 (i40e) create the RDMA auxiliary device; a parent bound to "irdma" itself reads as irdma too.
constexpr std::string_view k_irdma_drivers[] = {"irdma", "ice", "i40e"};
constexpr std::string_view k_irdma_modules[] = {"irdma"};
constexpr std::string_view k_bnxt_drivers[] = {"bnxt_en"};
constexpr std::string_view k_bnxt_modules[] = {"bnxt_re", "bnxt_en"};
constexpr std::string_view k_ionic_drivers[] = {"ionic"};
constexpr std::string_view k_ionic_modules[] = {"ionic_rdma", "ionic"};
constexpr std::string_view k_rxe_modules[] = {"rdma_rxe"};
constexpr std::string_view k_siw_modules[] = {"siw"};

constexpr std::array k_families = {
    nic_family{"mlx5", k_mlx5_drivers, k_mlx5_modules, "mlx5_ib", "mlx5", "mlx5_", k_rdma_core, true},
    nic_family{"efa", k_efa_drivers, k_efa_modules, "efa", "efa", "efa_",
               "the EFA installer, or ibverbs-providers / rdma-core", false},
    nic_family{"irdma", k_irdma_drivers, k_irdma_modules, "irdma", "irdma", "irdma", k_rdma_core, false},
    nic_family{"bnxt_re", k_bnxt_drivers, k_bnxt_modules, "bnxt_re", "bnxt_re", "bnxt_re", k_rdma_core, false},
    nic_family{"ionic", k_ionic_drivers, k_ionic_modules, "ionic_rdma", "ionic", "ionic", k_rdma_core, false},
    nic_family{"rxe", {}, k_rxe_modules, "rdma_rxe", "rxe", "rxe", k_rdma_core, false},
    nic_family{"siw", {}, k_siw_modules, "siw", "siw", "siw", k_rdma_core, false},
};

}  // namespace

std::span<const nic_family> nic_families() { return k_families; }

const nic_family* find_nic_family(std::string_view name) {
  for (const nic_family& f : k_families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const nic_family* nic_family_of(const rdma_device_fact& d) {
  std::string_view drv = d.driver;
  for (const nic_family& f : k_families) {
    if (std::find(f.drivers.begin(), f.drivers.end(), drv) != f.drivers.end()) return &f;
    if ((drv.empty() || f.drivers.empty()) && std::string_view(d.name).starts_with(f.name_prefix)) return &f;
  }
  return nullptr;
}

}  // namespace mrcheck
