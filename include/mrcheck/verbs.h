// The verbs calls the registration probe makes, behind an interface: the real one loads libibverbs with
// dlopen and resolves each symbol with dlvsym at the version NCCL uses (docs/facts/verbs-and-nccl.md §3), so the probe
// runs exactly the code NCCL will run; the unit tests' in-memory one (tests/doubles/memory_verbs.h) returns chosen
// errnos so every error path of the probe can be tested without hardware.
//
// Every call returns the errno it failed with (status::err()), never throws, and never exits. Handles are
// opaque; the caller releases what it got (dereg_mr, dealloc_pd, close_device) in reverse order.
#pragma once

#include <mrcheck/status.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// enum ibv_access_flags of <infiniband/verbs.h> (rdma-core 44); checked against the header in verbs_ibv.cpp.
inline constexpr unsigned k_ibv_access_local_write = 1u;
inline constexpr unsigned k_ibv_access_remote_write = 1u << 1;
inline constexpr unsigned k_ibv_access_remote_read = 1u << 2;
inline constexpr unsigned k_ibv_access_remote_atomic = 1u << 3;
inline constexpr unsigned k_ibv_access_relaxed_ordering = 1u << 20;  // IBV_ACCESS_OPTIONAL_FIRST

// The flags NCCL registers its buffers with ([N] src/transport/net_ib.cc ncclIbRegMrDmaBufInternal2):
// LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC, plus RELAXED_ORDERING when NCCL enabled it.
inline constexpr unsigned k_nccl_mr_access = k_ibv_access_local_write | k_ibv_access_remote_write |
                                             k_ibv_access_remote_read | k_ibv_access_remote_atomic;

// "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|RELAXED_ORDERING"; unknown bits as 0x...
std::string access_flags_string(unsigned access);

// enum ibv_port_state / IBV_LINK_LAYER_* values.
inline constexpr int k_ibv_port_active = 4;
inline constexpr int k_ibv_link_layer_infiniband = 1;
inline constexpr int k_ibv_link_layer_ethernet = 2;

struct verbs_port {
  int number = 0;
  int state = 0;       // ibv_port_state: 4 = ACTIVE
  int link_layer = 0;  // 1 = InfiniBand, 2 = Ethernet (0 = unspecified: old kernels report IB this way)
  bool active() const { return state == k_ibv_port_active; }
  // NCCL's rule ([N] net_ib.cc ncclIbInitDevices): an ACTIVE port whose link layer is IB or Ethernet.
  bool usable_by_nccl() const {
    return active() && (link_layer == k_ibv_link_layer_infiniband || link_layer == k_ibv_link_layer_ethernet);
  }
};
std::string_view port_state_name(int state);       // "ACTIVE", "DOWN", ...
std::string_view link_layer_name(int link_layer);  // "InfiniBand", "Ethernet", "unspecified"

// Opaque handles (struct ibv_context*, ibv_pd*, ibv_mr* in the real implementation).
struct verbs_context {
  void* p = nullptr;
};
struct verbs_pd {
  void* p = nullptr;
};
struct verbs_mr {
  void* p = nullptr;
};

class verbs_api {
 public:
  virtual ~verbs_api() = default;

  // What was loaded: the path the dynamic loader resolved (for the report) and the optional symbols.
  virtual std::string library_path() const = 0;
  virtual bool has_reg_mr_iova2() const = 0;   // ibv_reg_mr_iova2@IBVERBS_1.8 (rdma-core >= 28)
  virtual bool has_reg_dmabuf_mr() const = 0;  // ibv_reg_dmabuf_mr@IBVERBS_1.12 (rdma-core >= 34)

  // ibv_get_device_list + ibv_get_device_name; an empty list is not an error.
  virtual result<std::vector<std::string>> device_names() = 0;
  virtual result<verbs_context> open_device(const std::string& name) = 0;
  // ibv_query_device (phys_port_cnt) then ibv_query_port for each port.
  virtual result<std::vector<verbs_port>> query_ports(verbs_context ctx) = 0;
  virtual result<verbs_pd> alloc_pd(verbs_context ctx) = 0;
  virtual result<verbs_mr> reg_mr(verbs_pd pd, void* addr, std::size_t length, unsigned access) = 0;
  // Precondition: has_reg_mr_iova2(); otherwise ENOSYS.
  virtual result<verbs_mr> reg_mr_iova2(verbs_pd pd, void* addr, std::size_t length, std::uint64_t iova,
                                        unsigned access) = 0;
  // Precondition: has_reg_dmabuf_mr(); otherwise EOPNOTSUPP, exactly what NCCL's wrapper reports when the
  // symbol is missing ([N] src/misc/ibvwrap.cc wrap_direct_ibv_reg_dmabuf_mr).
  virtual result<verbs_mr> reg_dmabuf_mr(verbs_pd pd, std::uint64_t offset, std::size_t length, std::uint64_t iova,
                                         int fd, unsigned access) = 0;
  virtual status dereg_mr(verbs_mr mr) = 0;
  virtual status dealloc_pd(verbs_pd pd) = 0;
  virtual status close_device(verbs_context ctx) = 0;
};

// dlopen(library, RTLD_NOW|RTLD_LOCAL) - a name ("libibverbs.so.1", searched like NCCL's dlopen) or a path -
// then dlvsym of the IBVERBS_1.1 base symbols (all required) and the two optional ones. Error when the library
// does not load or lacks a base symbol; the message names the library and the symbol.
// The library stays loaded for the life of the returned object (providers keep threads; unloading is unsafe).
result<std::unique_ptr<verbs_api>> load_verbs(const std::string& library);

}  // namespace mrcheck
