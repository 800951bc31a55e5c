// The unit tests' in-memory verbs (tests/doubles/memory_verbs.cpp): a test double of include/mrcheck/verbs.h's
// verbs_api, built into the test library mrcheck_test_doubles only, never into a shipped program.
#pragma once

#include <mrcheck/verbs.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// In-memory verbs: devices and ports as configured, errnos on demand, every call recorded,
// every handle tracked so a test can assert that the probe released everything.
class memory_verbs final : public verbs_api {
 public:
  struct device {
    std::string name;
    std::vector<verbs_port> ports;
  };
  struct call {
    std::string name;    // "ibv_reg_mr_iova2"
    std::string device;  // the device the handle belongs to, "" for device_names
    std::size_t length = 0;
    std::uint64_t iova = 0;
    std::uint64_t addr = 0;
    unsigned access = 0;
    int fd = -1;
    int err = 0;  // what it returned (0 = success)
  };

  explicit memory_verbs(std::vector<device> devices, bool iova2 = true, bool dmabuf = true);

  // The next calls of `name` ("ibv_reg_mr_iova2", "ibv_open_device", ...) fail with `err`; `count` < 0 means
  // every call. `after` successful calls are let through first.
  void fail(const std::string& name, int err, int count = -1, int after = 0);
  // ibv_reg_dmabuf_mr with fd -1 answers EBADF (kernel support present) unless told otherwise with fail().
  // Registrations fail with ENOMEM once the sum of registered bytes would exceed `bytes` (a memlock model).
  void set_pin_budget(std::uint64_t bytes) { pin_budget_ = bytes; }

  const std::vector<call>& calls() const { return calls_; }
  std::vector<call> calls_named(std::string_view name) const;
  // Handles still open: contexts + pds + mrs. Zero after a well-behaved probe.
  int open_handles() const { return static_cast<int>(contexts_.size() + pds_.size() + mrs_.size()); }
  std::uint64_t pinned_bytes() const { return pinned_; }

  std::string library_path() const override { return "memory_verbs"; }
  bool has_reg_mr_iova2() const override { return iova2_; }
  bool has_reg_dmabuf_mr() const override { return dmabuf_; }
  result<std::vector<std::string>> device_names() override;
  result<verbs_context> open_device(const std::string& name) override;
  result<std::vector<verbs_port>> query_ports(verbs_context ctx) override;
  result<verbs_pd> alloc_pd(verbs_context ctx) override;
  result<verbs_mr> reg_mr(verbs_pd pd, void* addr, std::size_t length, unsigned access) override;
  result<verbs_mr> reg_mr_iova2(verbs_pd pd, void* addr, std::size_t length, std::uint64_t iova,
                                unsigned access) override;
  result<verbs_mr> reg_dmabuf_mr(verbs_pd pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                                 unsigned access) override;
  status dereg_mr(verbs_mr mr) override;
  status dealloc_pd(verbs_pd pd) override;
  status close_device(verbs_context ctx) override;

 private:
  struct injection {
    int err = 0;
    int count = -1;
    int after = 0;
  };
  int injected(const std::string& name);  // 0 = let it through
  result<verbs_mr> reg_common(const char* name, verbs_pd pd, std::uint64_t addr, std::size_t length, std::uint64_t iova,
                              unsigned access, int fd);

  std::vector<device> devices_;
  bool iova2_;
  bool dmabuf_;
  std::uint64_t pin_budget_ = UINT64_MAX;
  std::uint64_t pinned_ = 0;
  std::map<std::string, injection> inject_;
  std::vector<call> calls_;
  std::uintptr_t next_id_ = 0x1000;
  std::map<std::uintptr_t, std::string> contexts_;  // id -> device
  std::map<std::uintptr_t, std::string> pds_;       // id -> device
  struct mr_rec {
    std::string device;
    std::size_t length;
    bool pinned;
  };
  std::map<std::uintptr_t, mr_rec> mrs_;
};

}  // namespace mrcheck
