// In-memory verbs (memory_verbs.h): the unit tests' stand-in for an HCA, with errnos on demand.
#include "doubles/memory_verbs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

namespace mrcheck {

namespace {

memory_verbs::call record(std::string name, std::string device, int err) {
  memory_verbs::call c;
  c.name = std::move(name);
  c.device = std::move(device);
  c.err = err;
  return c;
}

}  // namespace

memory_verbs::memory_verbs(std::vector<device> devices, bool iova2, bool dmabuf)
    : devices_(std::move(devices)), iova2_(iova2), dmabuf_(dmabuf) {}

void memory_verbs::fail(const std::string& name, int err, int count, int after) {
  inject_[name] = injection{err, count, after};
}

std::vector<memory_verbs::call> memory_verbs::calls_named(std::string_view name) const {
  std::vector<call> out;
  std::copy_if(calls_.begin(), calls_.end(), std::back_inserter(out), [&](const call& c) { return c.name == name; });
  return out;
}

int memory_verbs::injected(const std::string& name) {
  auto it = inject_.find(name);
  if (it == inject_.end() || it->second.count == 0) return 0;
  if (it->second.after > 0) {
    --it->second.after;
    return 0;
  }
  if (it->second.count > 0) --it->second.count;
  return it->second.err;
}

result<std::vector<std::string>> memory_verbs::device_names() {
  int err = injected("ibv_get_device_list");
  calls_.push_back(record("ibv_get_device_list", "", err));
  if (err != 0) return status::from_errno("ibv_get_device_list", err);
  std::vector<std::string> names;
  for (const auto& d : devices_) names.push_back(d.name);
  return names;
}

result<verbs_context> memory_verbs::open_device(const std::string& name) {
  int err = injected("ibv_open_device");
  auto it = std::find_if(devices_.begin(), devices_.end(), [&](const device& d) { return d.name == name; });
  if (err == 0 && it == devices_.end()) err = ENODEV;
  calls_.push_back(record("ibv_open_device", name, err));
  if (err != 0) return status::from_errno(fmt::format("ibv_open_device {}", name), err);
  std::uintptr_t id = next_id_++;
  contexts_[id] = name;
  return verbs_context{reinterpret_cast<void*>(id)};
}

result<std::vector<verbs_port>> memory_verbs::query_ports(verbs_context ctx) {
  auto it = contexts_.find(reinterpret_cast<std::uintptr_t>(ctx.p));
  int err = it == contexts_.end() ? EINVAL : injected("ibv_query_port");
  std::string dev = it == contexts_.end() ? "" : it->second;
  calls_.push_back(record("ibv_query_port", dev, err));
  if (err != 0) return status::from_errno("ibv_query_port", err);
  for (const auto& d : devices_) {
    if (d.name == dev) return d.ports;
  }
  return status::from_errno("ibv_query_port", ENODEV);
}

result<verbs_pd> memory_verbs::alloc_pd(verbs_context ctx) {
  auto it = contexts_.find(reinterpret_cast<std::uintptr_t>(ctx.p));
  int err = it == contexts_.end() ? EINVAL : injected("ibv_alloc_pd");
  std::string dev = it == contexts_.end() ? "" : it->second;
  calls_.push_back(record("ibv_alloc_pd", dev, err));
  if (err != 0) return status::from_errno("ibv_alloc_pd", err);
  std::uintptr_t id = next_id_++;
  pds_[id] = dev;
  return verbs_pd{reinterpret_cast<void*>(id)};
}

result<verbs_mr> memory_verbs::reg_common(const char* name, verbs_pd pd, std::uint64_t addr, std::size_t length,
                                          std::uint64_t iova, unsigned access, int fd) {
  auto it = pds_.find(reinterpret_cast<std::uintptr_t>(pd.p));
  int err = it == pds_.end() ? EINVAL : injected(name);
  std::string dev = it == pds_.end() ? "" : it->second;
  bool host = std::string_view(name) != "ibv_reg_dmabuf_mr";
  // The kernel's order (docs/facts/verbs-and-nccl.md §2): access flags, then the fd (dmabuf) or the pinning budget
  // (host).
  if (err == 0 && (access & (k_ibv_access_remote_write | k_ibv_access_remote_atomic)) != 0 &&
      (access & k_ibv_access_local_write) == 0) {
    err = EINVAL;
  }
  if (err == 0 && !host && fd < 0) err = EBADF;
  if (err == 0 && host && pinned_ + length > pin_budget_) err = ENOMEM;
  call c = record(name, dev, err);
  c.length = length;
  c.iova = iova;
  c.addr = addr;
  c.access = access;
  c.fd = fd;
  calls_.push_back(std::move(c));
  if (err != 0) return status::from_errno(name, err);
  if (host) pinned_ += length;
  std::uintptr_t id = next_id_++;
  mrs_[id] = mr_rec{dev, length, host};
  return verbs_mr{reinterpret_cast<void*>(id)};
}

result<verbs_mr> memory_verbs::reg_mr(verbs_pd pd, void* addr, std::size_t length, unsigned access) {
  return reg_common("ibv_reg_mr", pd, reinterpret_cast<std::uintptr_t>(addr), length,
                    reinterpret_cast<std::uintptr_t>(addr), access, -1);
}

result<verbs_mr> memory_verbs::reg_mr_iova2(verbs_pd pd, void* addr, std::size_t length, std::uint64_t iova,
                                            unsigned access) {
  if (!iova2_) return status::from_errno("ibv_reg_mr_iova2 (not exported)", ENOSYS);
  return reg_common("ibv_reg_mr_iova2", pd, reinterpret_cast<std::uintptr_t>(addr), length, iova, access, -1);
}

result<verbs_mr> memory_verbs::reg_dmabuf_mr(verbs_pd pd, std::uint64_t offset, std::size_t length, std::uint64_t iova,
                                             int fd, unsigned access) {
  if (!dmabuf_) return status::from_errno("ibv_reg_dmabuf_mr (not exported)", EOPNOTSUPP);
  return reg_common("ibv_reg_dmabuf_mr", pd, offset, length, iova, access, fd);
}

status memory_verbs::dereg_mr(verbs_mr mr) {
  auto it = mrs_.find(reinterpret_cast<std::uintptr_t>(mr.p));
  int err = it == mrs_.end() ? EINVAL : injected("ibv_dereg_mr");
  calls_.push_back(record("ibv_dereg_mr", it == mrs_.end() ? "" : it->second.device, err));
  if (err != 0) return status::from_errno("ibv_dereg_mr", err);
  if (it->second.pinned) pinned_ -= it->second.length;
  mrs_.erase(it);
  return status::ok();
}

status memory_verbs::dealloc_pd(verbs_pd pd) {
  auto it = pds_.find(reinterpret_cast<std::uintptr_t>(pd.p));
  int err = it == pds_.end() ? EINVAL : injected("ibv_dealloc_pd");
  calls_.push_back(record("ibv_dealloc_pd", it == pds_.end() ? "" : it->second, err));
  if (err != 0) return status::from_errno("ibv_dealloc_pd", err);
  pds_.erase(it);
  return status::ok();
}

status memory_verbs::close_device(verbs_context ctx) {
  auto it = contexts_.find(reinterpret_cast<std::uintptr_t>(ctx.p));
  int err = it == contexts_.end() ? EINVAL : injected("ibv_close_device");
  calls_.push_back(record("ibv_close_device", it == contexts_.end() ? "" : it->second, err));
  if (err != 0) return status::from_errno("ibv_close_device", err);
  contexts_.erase(it);
  return status::ok();
}

}  // namespace mrcheck
