// Loading the data-plane probe's verbs (dp_verbs.h).
#include "rdma/dp_verbs.h"

#include <mrcheck/facts.h>

#if MRCHECK_HAVE_DP_VERBS

#include <fmt/format.h>

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <type_traits>

namespace mrcheck::dp {

namespace {

std::string resolved_path(void* h, const std::string& fallback) {
  std::string p = loaded_library_path(h);
  return p.empty() ? fallback : p;
}

}  // namespace

result<verbs> load(const std::string& library) {
  dlerror();
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return status::error(fmt::format("dlopen {}: {}", library, e != nullptr ? e : "unknown error"));
  }
  verbs v;
  v.path = resolved_path(h, library);
  std::string missing;
  auto need = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlvsym(h, name, "IBVERBS_1.1"));
    if (fn == nullptr && missing.empty()) missing = name;
  };
  need(v.get_device_list, "ibv_get_device_list");
  need(v.free_device_list, "ibv_free_device_list");
  need(v.get_device_name, "ibv_get_device_name");
  need(v.open_device, "ibv_open_device");
  need(v.close_device, "ibv_close_device");
  need(v.query_device, "ibv_query_device");
  need(v.query_port, "ibv_query_port");
  need(v.query_gid, "ibv_query_gid");
  need(v.alloc_pd, "ibv_alloc_pd");
  need(v.dealloc_pd, "ibv_dealloc_pd");
  need(v.reg_mr, "ibv_reg_mr");
  need(v.dereg_mr, "ibv_dereg_mr");
  need(v.create_cq, "ibv_create_cq");
  need(v.destroy_cq, "ibv_destroy_cq");
  need(v.create_qp, "ibv_create_qp");
  need(v.modify_qp, "ibv_modify_qp");
  need(v.destroy_qp, "ibv_destroy_qp");
  need(v.wc_status_str, "ibv_wc_status_str");
  if (!missing.empty()) {
    return status::error(fmt::format("{} has no {}@IBVERBS_1.1 (not a libibverbs.so.1?)", v.path, missing));
  }
  v.query_gid_ex = reinterpret_cast<decltype(v.query_gid_ex)>(dlvsym(h, "_ibv_query_gid_ex", "IBVERBS_1.11"));
  return v;
}

}  // namespace mrcheck::dp

#endif
