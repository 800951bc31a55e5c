// The real verbs: libibverbs loaded with dlopen and resolved with dlvsym at NCCL's symbol versions
// ([N] src/misc/ibvsymbols.cc: base symbols at IBVERBS_1.1, ibv_reg_mr_iova2 at IBVERBS_1.8, ibv_reg_dmabuf_mr
// at IBVERBS_1.12). We never link libibverbs: a node without rdma-core must still run every other check, and
// the probe must load whatever library NCCL would load (or the test fake) - not the one we were built with.
//
// <infiniband/verbs.h> is used for struct layouts only. ibv_reg_mr and ibv_query_port are macros/inlines
// there (docs/facts/verbs-and-nccl.md §1), so every call below goes through a dlvsym'd pointer, never through the
// header.
#include <mrcheck/facts.h>
#include <mrcheck/verbs.h>

#include <fmt/format.h>

#include <dlfcn.h>
#include <link.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define MRCHECK_HAVE_VERBS_H 1
#else
#define MRCHECK_HAVE_VERBS_H 0
#endif

namespace mrcheck {

std::string access_flags_string(unsigned access) {
  static constexpr struct {
    unsigned bit;
    const char* name;
  } k_names[] = {{k_ibv_access_local_write, "LOCAL_WRITE"},
                 {k_ibv_access_remote_write, "REMOTE_WRITE"},
                 {k_ibv_access_remote_read, "REMOTE_READ"},
                 {k_ibv_access_remote_atomic, "REMOTE_ATOMIC"},
                 {k_ibv_access_relaxed_ordering, "RELAXED_ORDERING"}};
  std::string out;
  unsigned rest = access;
  for (const auto& n : k_names) {
    if ((access & n.bit) == 0) continue;
    if (!out.empty()) out += '|';
    out += n.name;
    rest &= ~n.bit;
  }
  if (rest != 0) {
    if (!out.empty()) out += '|';
    out += fmt::format("{:#x}", rest);
  }
  return out.empty() ? "0" : out;
}

std::string_view port_state_name(int state) {
  switch (state) {
    case 0: return "NOP";
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
  }
  return "unknown";
}

std::string_view link_layer_name(int link_layer) {
  switch (link_layer) {
    case k_ibv_link_layer_infiniband: return "InfiniBand";
    case k_ibv_link_layer_ethernet: return "Ethernet";
  }
  return "unspecified";
}

#if MRCHECK_HAVE_VERBS_H

static_assert(k_ibv_access_local_write == IBV_ACCESS_LOCAL_WRITE);
static_assert(k_ibv_access_remote_write == IBV_ACCESS_REMOTE_WRITE);
static_assert(k_ibv_access_remote_read == IBV_ACCESS_REMOTE_READ);
static_assert(k_ibv_access_remote_atomic == IBV_ACCESS_REMOTE_ATOMIC);
static_assert(k_ibv_access_relaxed_ordering == IBV_ACCESS_RELAXED_ORDERING);
static_assert(k_ibv_port_active == IBV_PORT_ACTIVE);
static_assert(k_ibv_link_layer_infiniband == IBV_LINK_LAYER_INFINIBAND);
static_assert(k_ibv_link_layer_ethernet == IBV_LINK_LAYER_ETHERNET);

namespace {

// The exported prototypes (the header's names are macros/inlines for two of them).
using get_device_list_fn = ibv_device** (*)(int*);
using free_device_list_fn = void (*)(ibv_device**);
using get_device_name_fn = const char* (*)(ibv_device*);
using open_device_fn = ibv_context* (*)(ibv_device*);
using close_device_fn = int (*)(ibv_context*);
using query_device_fn = int (*)(ibv_context*, ibv_device_attr*);
// ibv_query_port@IBVERBS_1.1 takes the compat struct, a prefix of struct ibv_port_attr (verbs.h l.2360); NCCL
// calls it with the full struct, so do we.
using query_port_fn = int (*)(ibv_context*, uint8_t, ibv_port_attr*);
using alloc_pd_fn = ibv_pd* (*)(ibv_context*);
using dealloc_pd_fn = int (*)(ibv_pd*);
using reg_mr_fn = ibv_mr* (*)(ibv_pd*, void*, size_t, int);
using reg_mr_iova2_fn = ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned int);
using reg_dmabuf_mr_fn = ibv_mr* (*)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);
using dereg_mr_fn = int (*)(ibv_mr*);

constexpr const char* k_base_version = "IBVERBS_1.1";

// The errno of a failed pointer-returning call. rdma-core sets errno; a provider that forgets leaves 0, which
// we must not report as success.
int errno_or(int fallback) { return errno != 0 ? errno : fallback; }

class ibv_verbs final : public verbs_api {
 public:
  ~ibv_verbs() override = default;  // no dlclose: providers may leave threads and atexit handlers behind

  static result<std::unique_ptr<verbs_api>> load(const std::string& library) {
    dlerror();
    void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      return status::error(fmt::format("dlopen {}: {}", library, e != nullptr ? e : "unknown error"));
    }
    auto v = std::unique_ptr<ibv_verbs>(new ibv_verbs());
    v->handle_ = h;
    v->path_ = resolved_path(h, library);
    status st = status::ok();
    auto need = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlvsym(h, name, k_base_version));
      if (fn == nullptr && st.is_ok()) {
        st = status::error(fmt::format("{} has no {}@{} (not a libibverbs.so.1?)", v->path_, name, k_base_version));
      }
    };
    need(v->get_device_list_, "ibv_get_device_list");
    need(v->free_device_list_, "ibv_free_device_list");
    need(v->get_device_name_, "ibv_get_device_name");
    need(v->open_device_, "ibv_open_device");
    need(v->close_device_, "ibv_close_device");
    need(v->query_device_, "ibv_query_device");
    need(v->query_port_, "ibv_query_port");
    need(v->alloc_pd_, "ibv_alloc_pd");
    need(v->dealloc_pd_, "ibv_dealloc_pd");
    need(v->reg_mr_, "ibv_reg_mr");
    need(v->dereg_mr_, "ibv_dereg_mr");
    if (!st) return st;
    v->reg_mr_iova2_ = reinterpret_cast<reg_mr_iova2_fn>(dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8"));
    v->reg_dmabuf_mr_ = reinterpret_cast<reg_dmabuf_mr_fn>(dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"));
    return std::unique_ptr<verbs_api>(std::move(v));
  }

  std::string library_path() const override { return path_; }
  bool has_reg_mr_iova2() const override { return reg_mr_iova2_ != nullptr; }
  bool has_reg_dmabuf_mr() const override { return reg_dmabuf_mr_ != nullptr; }

  result<std::vector<std::string>> device_names() override {
    int n = 0;
    errno = 0;
    ibv_device** list = get_device_list_(&n);
    if (list == nullptr) {
      // rdma-core returns NULL with ENOSYS when the kernel has no uverbs (no ib_uverbs module): no devices.
      int err = errno_or(ENODEV);
      if (err == ENOSYS || err == ENODEV) return std::vector<std::string>{};
      return status::from_errno("ibv_get_device_list", err);
    }
    std::vector<std::string> names;
    for (int i = 0; i < n && list[i] != nullptr; ++i) {
      const char* name = get_device_name_(list[i]);
      names.emplace_back(name != nullptr ? name : "");
    }
    free_device_list_(list);
    return names;
  }

  result<verbs_context> open_device(const std::string& name) override {
    int n = 0;
    errno = 0;
    ibv_device** list = get_device_list_(&n);
    if (list == nullptr) return status::from_errno("ibv_get_device_list", errno_or(ENODEV));
    ibv_context* ctx = nullptr;
    bool found = false;
    int err = 0;
    for (int i = 0; i < n && list[i] != nullptr; ++i) {
      const char* dn = get_device_name_(list[i]);
      if (dn == nullptr || name != dn) continue;
      found = true;
      errno = 0;
      ctx = open_device_(list[i]);
      if (ctx == nullptr) err = errno_or(EIO);
      break;
    }
    free_device_list_(list);
    if (!found) return status::from_errno(fmt::format("ibv_open_device {}", name), ENODEV);
    if (ctx == nullptr) return status::from_errno(fmt::format("ibv_open_device {}", name), err);
    return verbs_context{ctx};
  }

  result<std::vector<verbs_port>> query_ports(verbs_context c) override {
    auto* ctx = static_cast<ibv_context*>(c.p);
    ibv_device_attr attr;
    std::memset(&attr, 0, sizeof attr);
    int rc = query_device_(ctx, &attr);
    if (rc != 0) return status::from_errno("ibv_query_device", rc > 0 ? rc : errno_or(EIO));
    std::vector<verbs_port> ports;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa;
      std::memset(&pa, 0, sizeof pa);
      rc = query_port_(ctx, static_cast<uint8_t>(p), &pa);
      if (rc != 0) return status::from_errno(fmt::format("ibv_query_port {}", p), rc > 0 ? rc : errno_or(EIO));
      ports.push_back(verbs_port{p, static_cast<int>(pa.state), static_cast<int>(pa.link_layer)});
    }
    return ports;
  }

  result<verbs_pd> alloc_pd(verbs_context c) override {
    errno = 0;
    ibv_pd* pd = alloc_pd_(static_cast<ibv_context*>(c.p));
    if (pd == nullptr) return status::from_errno("ibv_alloc_pd", errno_or(ENOMEM));
    return verbs_pd{pd};
  }

  result<verbs_mr> reg_mr(verbs_pd pd, void* addr, std::size_t length, unsigned access) override {
    errno = 0;
    ibv_mr* mr = reg_mr_(static_cast<ibv_pd*>(pd.p), addr, length, static_cast<int>(access));
    if (mr == nullptr) return status::from_errno("ibv_reg_mr", errno_or(EIO));
    return verbs_mr{mr};
  }

  result<verbs_mr> reg_mr_iova2(verbs_pd pd, void* addr, std::size_t length, std::uint64_t iova,
                                unsigned access) override {
    if (reg_mr_iova2_ == nullptr) return status::from_errno("ibv_reg_mr_iova2 (not exported)", ENOSYS);
    errno = 0;
    ibv_mr* mr = reg_mr_iova2_(static_cast<ibv_pd*>(pd.p), addr, length, iova, access);
    if (mr == nullptr) return status::from_errno("ibv_reg_mr_iova2", errno_or(EIO));
    return verbs_mr{mr};
  }

  result<verbs_mr> reg_dmabuf_mr(verbs_pd pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                                 unsigned access) override {
    if (reg_dmabuf_mr_ == nullptr) return status::from_errno("ibv_reg_dmabuf_mr (not exported)", EOPNOTSUPP);
    errno = 0;
    ibv_mr* mr = reg_dmabuf_mr_(static_cast<ibv_pd*>(pd.p), offset, length, iova, fd, static_cast<int>(access));
    if (mr == nullptr) return status::from_errno("ibv_reg_dmabuf_mr", errno_or(EIO));
    return verbs_mr{mr};
  }

  status dereg_mr(verbs_mr mr) override {
    int rc = dereg_mr_(static_cast<ibv_mr*>(mr.p));
    return rc == 0 ? status::ok() : status::from_errno("ibv_dereg_mr", rc > 0 ? rc : errno_or(EIO));
  }
  status dealloc_pd(verbs_pd pd) override {
    int rc = dealloc_pd_(static_cast<ibv_pd*>(pd.p));
    return rc == 0 ? status::ok() : status::from_errno("ibv_dealloc_pd", rc > 0 ? rc : errno_or(EIO));
  }
  status close_device(verbs_context c) override {
    int rc = close_device_(static_cast<ibv_context*>(c.p));
    return rc == 0 ? status::ok() : status::from_errno("ibv_close_device", rc > 0 ? rc : errno_or(EIO));
  }

 private:
  ibv_verbs() = default;

  // The file the loader really opened (a bare name is searched the way NCCL's dlopen searches it).
  static std::string resolved_path(void* h, const std::string& fallback) {
    std::string p = loaded_library_path(h);
    return p.empty() ? fallback : p;
  }

  void* handle_ = nullptr;
  std::string path_;
  get_device_list_fn get_device_list_ = nullptr;
  free_device_list_fn free_device_list_ = nullptr;
  get_device_name_fn get_device_name_ = nullptr;
  open_device_fn open_device_ = nullptr;
  close_device_fn close_device_ = nullptr;
  query_device_fn query_device_ = nullptr;
  query_port_fn query_port_ = nullptr;
  alloc_pd_fn alloc_pd_ = nullptr;
  dealloc_pd_fn dealloc_pd_ = nullptr;
  reg_mr_fn reg_mr_ = nullptr;
  reg_mr_iova2_fn reg_mr_iova2_ = nullptr;
  reg_dmabuf_mr_fn reg_dmabuf_mr_ = nullptr;
  dereg_mr_fn dereg_mr_ = nullptr;
};

}  // namespace

result<std::unique_ptr<verbs_api>> load_verbs(const std::string& library) { return ibv_verbs::load(library); }

#else  // !MRCHECK_HAVE_VERBS_H

result<std::unique_ptr<verbs_api>> load_verbs(const std::string& library) {
  return status::error(
      fmt::format("load {}: mrcheck was built without <infiniband/verbs.h> (libibverbs-dev)", library));
}

#endif

}  // namespace mrcheck
