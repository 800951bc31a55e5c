// The registration probe: per HCA, what NCCL's net_ib transport does with its buffers - open the device,
// allocate a PD, register page-aligned memory with iova = addr and NCCL's access flags through the same entry
// point NCCL picks, probe DMA-BUF with fd -1 - then release everything, on every path.
#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace mrcheck {

std::string_view to_string(dmabuf_support s) {
  switch (s) {
    case dmabuf_support::supported: return "supported";
    case dmabuf_support::unsupported: return "unsupported";
    case dmabuf_support::unknown: return "unknown";
  }
  return "unknown";
}

namespace {

using clock = std::chrono::steady_clock;

std::uint64_t page_size() {
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? static_cast<std::uint64_t>(ps) : 4096;
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

// Anonymous private memory, like the pages behind cudaHostAlloc as far as ib_umem_get is concerned; unmapped
// on every path by the destructor.
class host_region {
 public:
  host_region() = default;
  host_region(const host_region&) = delete;
  host_region& operator=(const host_region&) = delete;
  ~host_region() { release(); }

  status map(std::uint64_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return status::from_errno(fmt::format("mmap {}", format_bytes(bytes)), errno);
    addr_ = static_cast<char*>(p);
    size_ = bytes;
    // Touch every page: NCCL's buffers are calloc'ed (written) before registration, and an untouched private
    // mapping would make the kernel pin the shared zero page instead of real memory.
    std::uint64_t ps = page_size();
    for (std::uint64_t off = 0; off < bytes; off += ps) addr_[off] = 1;
    return status::ok();
  }
  status release() {
    if (addr_ == nullptr) return status::ok();
    int rc = munmap(addr_, size_);
    addr_ = nullptr;
    return rc == 0 ? status::ok() : status::from_errno("munmap", errno);
  }
  char* addr() const { return addr_; }

 private:
  char* addr_ = nullptr;
  std::uint64_t size_ = 0;
};

// The entry point NCCL uses for a host or peermem buffer ([N] net_ib.cc l.1955-1968): ibv_reg_mr_iova2 with
// RELAXED_ORDERING when RO is enabled (NCCL_IB_PCI_RELAXED_ORDERING != 0 and the IBVERBS_1.8 symbol exists),
// else ibv_reg_mr without it.
struct reg_path {
  bool iova2;
  unsigned access;
  const char* call;
};
reg_path nccl_reg_path(const verbs_api& v, bool ro_requested) {
  if (ro_requested && v.has_reg_mr_iova2()) {
    return {true, k_nccl_mr_access | k_ibv_access_relaxed_ordering, "ibv_reg_mr_iova2"};
  }
  return {false, k_nccl_mr_access, "ibv_reg_mr"};
}

// Registers `buffers` back to back inside [base, ...) and keeps them all registered until every one is done,
// as NCCL keeps its buffers registered together; then deregisters them. Fills `a`.
void register_buffers(verbs_api& v, verbs_pd pd, char* base, const std::vector<std::uint64_t>& buffers,
                      const reg_path& path, const std::string& device, const char* check, log_sink& sink, mr_attempt& a,
                      status& release) {
  a.call = path.call;
  a.access = path.access;
  a.buffers = static_cast<int>(buffers.size());
  std::vector<verbs_mr> mrs;
  mrs.reserve(buffers.size());
  std::uint64_t off = 0;
  log(sink, log_level::verbose, "{}: calling {} on {} ({} in {} buffer{}, {})", check, path.call, device,
      format_bytes(a.bytes), buffers.size(), buffers.size() == 1 ? "" : "s", access_flags_string(path.access));
  auto t0 = clock::now();
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    char* p = base + off;
    auto mr = path.iova2 ? v.reg_mr_iova2(pd, p, buffers[i], reinterpret_cast<std::uintptr_t>(p), path.access)
                         : v.reg_mr(pd, p, buffers[i], path.access);
    if (!mr) {
      a.err = mr.error().err();
      a.failed_step = path.call;
      a.failed_buffer = static_cast<int>(i);
      a.failed_bytes = buffers[i];
      a.message = mr.error().message();
      break;
    }
    mrs.push_back(*mr);
    a.registered += buffers[i];
    off += buffers[i];
  }
  a.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t0);
  a.ok = a.err == 0;
  for (auto it = mrs.rbegin(); it != mrs.rend(); ++it) {
    status st = v.dereg_mr(*it);
    if (!st && release.is_ok()) release = st.with_context(device);
  }
}

// NCCL's DMA-BUF capability test ([N] net_ib.cc ibDmaBufSupportInitOnce l.884-905): ibv_reg_dmabuf_mr(pd, 0, 0,
// 0, -1, 0); EOPNOTSUPP/EPROTONOSUPPORT = no kernel/driver support, anything else (EBADF) = supported. A missing
// symbol reads as EOPNOTSUPP, as in NCCL's wrapper.
void probe_dmabuf(verbs_api& v, verbs_pd pd, const std::string& device, log_sink& sink, dmabuf_probe_result& d,
                  status& release) {
  d.attempted = true;
  d.symbol = v.has_reg_dmabuf_mr();
  log(sink, log_level::verbose, "dmabuf: calling ibv_reg_dmabuf_mr(fd -1) on {}", device);
  auto mr = v.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  if (mr) {
    // A library that accepts fd -1 is odd; NCCL would count it as supported. Release it.
    d.err = 0;
    status st = v.dereg_mr(*mr);
    if (!st && release.is_ok()) release = st.with_context(device);
    d.support = dmabuf_support::supported;
    return;
  }
  d.err = mr.error().err();
  d.support = (d.err == EOPNOTSUPP || d.err == EPROTONOSUPPORT) ? dmabuf_support::unsupported
                                                                : dmabuf_support::supported;
}

// One GPU buffer through both registration paths NCCL has: the device pointer itself (the peer-memory path, as
// NCCL registers GPU memory when DMA-BUF is off), then a DMA-BUF fd for the range registered with offset 0 and
// iova = the device address ([N] net.cc l.953-955 -> net_ib.cc ncclIbRegMrDmaBufInternal2).
struct gpu_buffer_attempts {
  mr_attempt& peermem;
  mr_attempt& dmabuf;
  std::string& handle_error;
};

void register_gpu_buffer(verbs_api& v, verbs_pd pd, gpu_memory& gpu, std::uint64_t ptr, std::uint64_t bytes,
                         const reg_path& path, const std::string& device, std::string_view what, log_sink& sink,
                         gpu_buffer_attempts out, status& release) {
  auto finish = [&](mr_attempt& a, result<verbs_mr> mr, std::string_view call) {
    if (mr) {
      a.ok = true;
      a.registered = bytes;
      status st = v.dereg_mr(*mr);
      if (!st && release.is_ok()) release = st.with_context(device);
      return;
    }
    a.err = mr.error().err();
    a.failed_step = std::string(call);
    a.failed_buffer = 0;
    a.failed_bytes = bytes;
    a.message = mr.error().message();
  };
  mr_attempt& pm = out.peermem;
  pm.attempted = true;
  pm.device = device;
  pm.bytes = bytes;
  pm.buffers = 1;
  pm.call = path.call;
  pm.access = path.access;
  log(sink, log_level::verbose, "mr_gpu: calling {} on {} with {} ({})", path.call, device, what, format_bytes(bytes));
  auto t0 = clock::now();
  auto* p = reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
  auto mr = path.iova2 ? v.reg_mr_iova2(pd, p, bytes, ptr, path.access) : v.reg_mr(pd, p, bytes, path.access);
  pm.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t0);
  finish(pm, std::move(mr), path.call);

  mr_attempt& db = out.dmabuf;
  db.device = device;
  db.bytes = bytes;
  db.buffers = 1;
  db.call = "ibv_reg_dmabuf_mr";
  db.access = path.access;
  log(sink, log_level::verbose, "mr_gpu: calling cuMemGetHandleForAddressRange(DMA_BUF_FD) for {}", what);
  auto fd = gpu.dmabuf_fd(ptr, bytes);
  if (!fd) {
    out.handle_error = fd.error().message();
    return;
  }
  db.attempted = true;
  log(sink, log_level::verbose, "mr_gpu: calling ibv_reg_dmabuf_mr on {} (fd {}, {} of {})", device, *fd,
      format_bytes(bytes), what);
  t0 = clock::now();
  auto dmr = v.reg_dmabuf_mr(pd, 0, bytes, ptr, *fd, path.access);
  db.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t0);
  finish(db, std::move(dmr), "ibv_reg_dmabuf_mr");
  ::close(*fd);
}

void probe_gpu(verbs_api& v, verbs_pd pd, gpu_memory& gpu, std::uint64_t bytes, const reg_path& path,
               const std::string& device, log_sink& sink, gpu_probe_result& g, status& release) {
  g.attempted = true;
  g.cuda_device = gpu.device();
  g.pci_bdf = gpu.pci_bdf();
  g.driver_version = gpu.driver_version();
  g.dmabuf_attr = gpu.dmabuf_supported();
  g.gdr_attr = gpu.gdr_supported();
  g.vmm_attr = gpu.vmm_supported();
  g.vmm_gdr_attr = gpu.vmm_gdr_supported();
  g.bytes = bytes;

  log(sink, log_level::verbose, "mr_gpu: calling cuMemAlloc ({})", format_bytes(bytes));
  auto ptr = gpu.alloc(bytes);
  if (!ptr) {
    g.error = ptr.error().message();
    return;
  }
  register_gpu_buffer(v, pd, gpu, *ptr, bytes, path, device, "cuMemAlloc memory", sink,
                      {g.peermem, g.dmabuf, g.dmabuf_handle_error}, release);
  gpu.free(*ptr);

  if (!g.vmm_attr) return;
  log(sink, log_level::verbose, "mr_gpu: calling cuMemCreate+cuMemMap ({}, gpuDirectRDMACapable {})",
      format_bytes(bytes), g.vmm_gdr_attr ? 1 : 0);
  auto vmm = gpu.alloc_vmm(bytes);
  if (!vmm) {
    g.vmm_error = vmm.error().message();
    return;
  }
  register_gpu_buffer(v, pd, gpu, *vmm, bytes, path, device, "cuMem (VMM) memory", sink,
                      {g.vmm_peermem, g.vmm_dmabuf, g.vmm_dmabuf_handle_error}, release);
  gpu.free_vmm(*vmm);
}

std::string hca_pci_bdf(const sysroot& root, const std::string& name) {
  auto target = root.read_link("/sys/class/infiniband/" + name + "/device");
  if (!target) return "";
  return std::filesystem::path(*target).filename().string();
}

// The devices and their ports, as NCCL would see them; a device that cannot be opened is listed in `skipped`.
std::vector<hca_candidate> list_hca_candidates(verbs_api& verbs, const sysroot& root, log_sink& sink,
                                               mr_probe_outcome& o) {
  auto names = verbs.device_names();
  std::vector<hca_candidate> candidates;
  if (!names) {
    o.list_error = names.error();
    return candidates;
  }
  o.devices = *names;
  for (const auto& n : *names) {
    hca_candidate c;
    c.name = n;
    c.pci_bdf = hca_pci_bdf(root, n);
    log(sink, log_level::verbose, "mr_host: calling ibv_open_device on {}", n);
    auto ctx = verbs.open_device(n);
    if (!ctx) {
      // NCCL warns "Unable to open device" and skips it; we record it as a device without ports.
      o.selection.skipped.push_back(fmt::format("{}: {}", n, ctx.error().message()));
      continue;
    }
    auto ports = verbs.query_ports(*ctx);
    if (ports)
      c.ports = *ports;
    else
      o.selection.skipped.push_back(fmt::format("{}: {}", n, ports.error().message()));
    status st = verbs.close_device(*ctx);
    (void)st;
    candidates.push_back(std::move(c));
  }
  return candidates;
}

// The host buffers to register: the user's size, else NCCL's estimate, each rounded up to pages.
void size_host_buffers(const mr_probe_request& req, std::uint64_t ps, mr_probe_outcome& o) {
  if (req.size) {
    o.size_from_user = true;
    o.buffers = {round_up(std::max<std::uint64_t>(*req.size, 1), ps)};
  } else {
    o.buffers.clear();
    for (auto b : o.estimate.buffers) o.buffers.push_back(round_up(b, ps));
  }
  o.size = 0;
  for (auto b : o.buffers) o.size += b;
}

// One failed step of the host registration: which call, and its error.
void host_step_failed(mr_attempt& a, const char* step, const status& st) {
  a.failed_step = step;
  a.call = step;
  a.err = st.err();
  a.message = st.message();
}

// One chosen HCA: open it, allocate a PD, register the host buffers, then DMA-BUF and (asked for) GPU memory.
hca_probe_result probe_hca(verbs_api& verbs, const hca_choice& choice, const mr_probe_outcome& o, const reg_path& path,
                           gpu_memory* gpu, std::uint64_t gpu_bytes, log_sink& sink) {
  hca_probe_result h;
  h.device = choice.name;
  h.ports = choice.ports;
  h.why = choice.why;
  h.host.device = choice.name;
  h.host.bytes = o.size;
  h.host.attempted = true;

  log(sink, log_level::verbose, "mr_host: calling ibv_open_device on {}", choice.name);
  auto ctx = verbs.open_device(choice.name);
  if (!ctx) {
    host_step_failed(h.host, "ibv_open_device", ctx.error());
    return h;
  }
  log(sink, log_level::verbose, "mr_host: calling ibv_alloc_pd on {}", choice.name);
  auto pd = verbs.alloc_pd(*ctx);
  if (!pd) {
    host_step_failed(h.host, "ibv_alloc_pd", pd.error());
  } else {
    {
      host_region mem;
      status st = mem.map(o.size);
      if (!st) {
        host_step_failed(h.host, "mmap", st);
      } else {
        register_buffers(verbs, *pd, mem.addr(), o.buffers, path, choice.name, "mr_host", sink, h.host, h.release);
        status un = mem.release();
        if (!un && h.release.is_ok()) h.release = un;
      }
    }
    probe_dmabuf(verbs, *pd, choice.name, sink, h.dmabuf, h.release);
    if (gpu != nullptr) probe_gpu(verbs, *pd, *gpu, gpu_bytes, path, choice.name, sink, h.gpu, h.release);
    status st = verbs.dealloc_pd(*pd);
    if (!st && h.release.is_ok()) h.release = st.with_context(choice.name);
  }
  status st = verbs.close_device(*ctx);
  if (!st && h.release.is_ok()) h.release = st.with_context(choice.name);
  return h;
}

}  // namespace

mr_probe_outcome run_mr_probe(const mr_probe_request& req, verbs_api* verbs, status load_error, gpu_memory* gpu,
                              const gpu_probe_result& gpu_setup, log_sink& sink) {
  mr_probe_outcome o;
  o.gpu_requested = req.gpu;
  o.device_requested = req.device;
  o.gpu_setup = gpu_setup;
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    o.memlock_soft = rl.rlim_cur == RLIM_INFINITY ? k_unlimited : rl.rlim_cur;
    o.memlock_hard = rl.rlim_max == RLIM_INFINITY ? k_unlimited : rl.rlim_max;
  }
  o.is_root = geteuid() == 0;

  nccl_env env = load_nccl_env(req.env, req.home, req.nccl_etc_file);
  o.slurm_rlimit_memlock = escape_line(env.get("SLURM_RLIMIT_MEMLOCK").value_or(""), 32);
  o.load_error = load_error;
  if (verbs == nullptr) {
    o.estimate = estimate_nccl_registration(env, 0);  // no library, no HCA seen
    return o;
  }
  o.library = verbs->library_path();
  o.iova2 = verbs->has_reg_mr_iova2();
  o.dmabuf_symbol = verbs->has_reg_dmabuf_mr();

  // Devices and their ports, then the ones NCCL would pick.
  std::vector<hca_candidate> candidates = list_hca_candidates(*verbs, req.root, sink, o);
  o.gpu_bdfs = gpu != nullptr && !gpu->pci_bdf().empty() ? std::vector<std::string>{gpu->pci_bdf()}
                                                         : visible_gpu_bdfs(env, req.root);
  nccl_hca_filter filter = parse_nccl_ib_hca(env.get("NCCL_IB_HCA"));
  auto pre_skipped = std::move(o.selection.skipped);
  o.selection = select_hcas(candidates, filter, req.device, o.gpu_bdfs, hwloc_locality());
  o.selection.skipped.insert(o.selection.skipped.begin(), pre_skipped.begin(), pre_skipped.end());

  o.estimate = estimate_nccl_registration(env, static_cast<int>(o.selection.chosen.size()));
  const std::uint64_t ps = page_size();
  size_host_buffers(req, ps, o);
  if (o.estimate.ib_disabled && !req.size) return o;  // NCCL registers nothing: mr_host says so

  reg_path path = nccl_reg_path(*verbs, o.estimate.relaxed_ordering);
  o.relaxed_ordering = path.iova2;
  // GPU buffer: what NCCL puts in GPU memory per connection with GDR, capped so the probe stays cheap; the
  // registration path, not the byte count, is what this check tests (DMA-BUF MRs are not charged to memlock).
  std::uint64_t gpu_bytes = round_up(std::min<std::uint64_t>(std::max<std::uint64_t>(o.estimate.buff_simple, ps),
                                                             64ull << 20),
                                     2ull << 20);
  for (const auto& choice : o.selection.chosen) {
    hca_probe_result h = probe_hca(*verbs, choice, o, path, req.gpu ? gpu : nullptr, gpu_bytes, sink);
    for (const auto& c : candidates) {
      if (c.name == h.device) h.pci_bdf = c.pci_bdf;
    }
    // Only mr_gpu reads the distance: the probe without --gpu (the plugin's mr check) walks no sysfs for it.
    if (h.gpu.attempted && !o.gpu_bdfs.empty()) {
      h.gpu_path = nccl_pci_path(req.root, o.gpu_bdfs.front(), h.pci_bdf);
    }
    o.hcas.push_back(std::move(h));
  }
  return o;
}

}  // namespace mrcheck
