// hca_fw: firmware at least the minimum for its adapter family. The family comes from the firmware major
// (16 ConnectX-5, 20 ConnectX-6, 22 ConnectX-6 Dx, 26 ConnectX-6 Lx, 28 ConnectX-7, 24 BlueField;
// docs/facts/kernel-and-drivers.md §2); minimums are in the rules file, with their sources in etc/README.rules.md.
#include "checks/matrix_checks.h"

#include <mrcheck/nic_family.h>

#include <fmt/format.h>

namespace mrcheck::matrix {

namespace {
constexpr std::string_view k_id = "hca_fw";
}

check_result check_hca_fw(const node_facts& f, const matrix_rules& r) {
  if (r.hca_fw == rule_action::off) return skipped(k_id, "rule off");
  if (!f.rdma_devices)
    return skipped(k_id, fmt::format("RDMA devices not read: {}", clean(f.rdma_devices.error().message(), 128)));
  if (f.rdma_devices->empty()) return skipped(k_id, "no RDMA device");

  std::vector<std::string> detail, below, unknown, ok;
  std::vector<std::string> below_dev, unknown_dev;  // the device of each entry of below / unknown
  std::string first_min;
  for (const auto& d : *f.rdma_devices) {
    std::string name = clean(d.name, 32);
    std::string fw = clean(d.fw_ver, 32);
    auto v = leading_version(d.fw_ver);
    // Only a family whose firmware the rules' hca_families describe (include/mrcheck/nic_family.h) is judged.
    const nic_family* row = nic_family_of(d);
    const bool judged = row && row->ofed_stack;
    if (d.fw_ver.empty() || !v || v->parts.size() < 2) {
      detail.push_back(fmt::format("{}: fw_ver '{}' not a firmware version", name, fw));
      if (judged) {
        unknown.push_back(fmt::format("{} fw '{}' unreadable", name, fw));
        unknown_dev.push_back(name);
      }
      continue;
    }
    auto it = r.hca_families.find(v->parts.front());
    if (it == r.hca_families.end()) {
      detail.push_back(fmt::format("{}: fw {} (major {} has no family in the rules)", name, fw, v->parts.front()));
      if (judged) {
        unknown.push_back(fmt::format("{} fw {} of unknown family", name, fw));
        unknown_dev.push_back(name);
      }
      continue;
    }
    const auto& fam = it->second;
    if (fam.min && *v < *fam.min) {
      below.push_back(fmt::format("{} {} fw {} < {}", name, fam.name, fw, fam.min->to_string()));
      below_dev.push_back(name);
      if (first_min.empty()) first_min = fam.min->to_string();
      detail.push_back(below.back());
    } else {
      ok.push_back(fmt::format("{} {} fw {}", name, fam.name, fw));
      detail.push_back(fam.min ? fmt::format("{} >= {}", ok.back(), fam.min->to_string())
                               : fmt::format("{} (no minimum set)", ok.back()));
    }
  }
  if (!below.empty()) {
    return on_device(make(k_id, verdict_for(r.hca_fw), below.front(), join(detail, "\n"),
                          fmt::format("update the HCA firmware to at least {} (mlxfwmanager --online -u, or the OEM "
                                      "package)",
                                      first_min)),
                     below_dev);
  }
  if (!unknown.empty() && r.hca_fw_unknown != rule_action::off) {
    return on_device(make(k_id, verdict_for(r.hca_fw_unknown), unknown.front(), join(detail, "\n"),
                          "add `hca_family MAJOR NAME` and `hca_fw.min MAJOR VERSION` for this adapter to the rules "
                          "file"),
                     unknown_dev);
  }
  if (ok.empty()) return skipped(k_id, "no mlx5 device with a known firmware family");
  return make(k_id, verdict::pass, join(ok, ", "), join(detail, "\n"));
}

}  // namespace mrcheck::matrix
