// The verbs the data-plane probe calls (include/mrcheck/rdma_probe.h), loaded at run time like the registration
// probe's (verbs_ibv.cpp): dlopen of the library NCCL loads, dlvsym of each symbol at IBVERBS_1.1, never a link
// against libibverbs. Only for builds with <infiniband/verbs.h> (its structures are the ABI); the posting and
// polling calls are verbs.h's inline functions, which go through the context's ops table the provider filled.
#pragma once

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define MRCHECK_HAVE_DP_VERBS 1

#include <mrcheck/status.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mrcheck::dp {

struct verbs {
  std::string path;  // the file the loader opened
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  // ibv_query_port@IBVERBS_1.1 fills the compat prefix of ibv_port_attr: every field read here is in it.
  int (*query_port)(ibv_context*, std::uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, std::uint8_t, int, ibv_gid*) = nullptr;
  // _ibv_query_gid_ex@IBVERBS_1.11 (rdma-core >= 32), optional: the GID's type (RoCE v1/v2).
  int (*query_gid_ex)(ibv_context*, std::uint32_t, std::uint32_t, ibv_gid_entry*, std::uint32_t, std::size_t) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, std::size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;
};

// The library stays loaded for the life of the process (providers keep threads; see verbs_ibv.cpp).
result<verbs> load(const std::string& library);

}  // namespace mrcheck::dp

#else
#define MRCHECK_HAVE_DP_VERBS 0
#endif
