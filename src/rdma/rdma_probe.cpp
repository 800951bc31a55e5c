// The data-plane probe's outer loop (include/mrcheck/rdma_probe.h): load the library, list the devices, pick the
// ports, run each ACTIVE one (data_plane.cpp).
#include <mrcheck/rdma_probe.h>

#include <mrcheck/mr_probe.h>
#include <mrcheck/verbs.h>

#include "rdma/dp_session.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;

#if MRCHECK_HAVE_DP_VERBS

// A device-level failure (open, query) as a tested port 0, so the verdict names it.
rdma_port_result device_failure(const std::string& dev, int port, const dp::failure& f) {
  rdma_port_result r;
  r.device = dev;
  r.port = port;
  r.tested = true;
  r.step = f.step;
  r.cause = f.cause;
  r.err = f.err;
  r.message = f.message;
  return r;
}

// The ports of one open device: the ACTIVE selected ones run; a selected port that is not ACTIVE fails when the
// device has no ACTIVE selected port (nothing of it would carry NCCL's traffic), else it is a note.
void run_device(const dp::verbs& v, ibv_context* ctx, const std::string& dev, const rdma_probe_request& req,
                const nccl_hca_filter& filter, log_sink& lg, rdma_probe_outcome& o) {
  ibv_device_attr da{};
  if (int rc = v.query_device(ctx, &da); rc != 0) {
    o.ports.push_back(device_failure(dev, 0, dp::call_failed("query_device", "ibv_query_device", rc > 0 ? rc : errno)));
    return;
  }
  struct port_info {
    int number;
    ibv_port_attr attr;
  };
  std::vector<port_info> selected;
  for (int p = 1; p <= da.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    log(lg, log_level::verbose, "probe rdma: calling ibv_query_port {} {}", dev, p);
    if (int rc = v.query_port(ctx, static_cast<std::uint8_t>(p), &pa); rc != 0) {
      o.ports.push_back(device_failure(dev, p, dp::call_failed("query_port", "ibv_query_port", rc > 0 ? rc : errno)));
      continue;
    }
    if (!filter.matches(dev, p)) {
      o.notes.push_back(fmt::format("{} port {}: not tested (NCCL_IB_HCA={})", dev, p, filter.raw));
      continue;
    }
    selected.push_back({p, pa});
  }
  bool any_active = false;
  for (const auto& s : selected) any_active = any_active || s.attr.state == IBV_PORT_ACTIVE;
  for (const auto& s : selected) {
    rdma_port_result r;
    r.device = dev;
    r.port = s.number;
    r.state = std::string(port_state_name(s.attr.state));
    r.link_layer = std::string(link_layer_name(s.attr.link_layer));
    if (s.attr.state != IBV_PORT_ACTIVE) {
      if (any_active) {
        o.notes.push_back(fmt::format("{} port {}: not tested ({})", dev, s.number, r.state));
        o.ports.push_back(std::move(r));
        continue;
      }
      r.tested = true;
      r.step = "port";
      r.cause = "port_down";
      r.message = fmt::format("{} port {} is {}, not ACTIVE: no link (cable, switch port, or the netdev is down)", dev,
                              s.number, r.state);
      o.ports.push_back(std::move(r));
      continue;
    }
    log(lg, log_level::verbose, "probe rdma: {} port {} ({}): loopback", dev, s.number, r.link_layer);
    dp::run_port(v, ctx, s.attr, req, lg, r);
    o.ports.push_back(std::move(r));
  }
}

void run_all(const dp::verbs& v, const rdma_probe_request& req, log_sink& lg, rdma_probe_outcome& o) {
  int n = 0;
  errno = 0;
  log(lg, log_level::verbose, "probe rdma: calling ibv_get_device_list");
  ibv_device** list = v.get_device_list(&n);
  if (list == nullptr) {
    int err = errno != 0 ? errno : ENODEV;
    // No uverbs in the kernel (ENOSYS) is no device, as in the registration probe.
    if (err != ENOSYS && err != ENODEV) o.list_error = fmt::format("ibv_get_device_list: {}", errno_name(err));
    if (req.peers) dp::run_peers(v, nullptr, 0, req, lg, o);  // the peers hear why, not silence
    return;
  }
  // --device wins over NCCL_IB_HCA, as in the registration probe.
  nccl_hca_filter filter = req.device.empty() ? parse_nccl_ib_hca(req.nccl_ib_hca) : nccl_hca_filter{};
  o.selection = !req.device.empty() ? fmt::format("--device {}", req.device)
                : filter.set        ? fmt::format("NCCL_IB_HCA={}", filter.raw)
                                    : "every device";
  for (int i = 0; i < n && list[i] != nullptr; ++i) {
    const char* name = v.get_device_name(list[i]);
    std::string dev = name != nullptr ? name : "";
    o.devices.push_back(dev);
    if (!req.device.empty() && dev != req.device) continue;
    if (req.device.empty() && filter.set && !filter.matches(dev, -1) && !filter.exclude) {
      o.notes.push_back(fmt::format("{}: not tested (NCCL_IB_HCA={})", dev, filter.raw));
      continue;
    }
    errno = 0;
    log(lg, log_level::verbose, "probe rdma: calling ibv_open_device {}", dev);
    ibv_context* ctx = v.open_device(list[i]);
    if (ctx == nullptr) {
      o.ports.push_back(device_failure(dev, 0, dp::call_failed("open_device", "ibv_open_device", errno ? errno : EIO)));
      continue;
    }
    run_device(v, ctx, dev, req, filter, lg, o);
    if (int rc = v.close_device(ctx); rc != 0) o.notes.push_back(fmt::format("{}: ibv_close_device failed", dev));
  }
  if (req.peers) dp::run_peers(v, list, n, req, lg, o);
  v.free_device_list(list);
}

#endif

}  // namespace

rdma_probe_outcome run_rdma_probe(const rdma_probe_request& req, const std::string& library, log_sink& log) {
  auto t0 = clock::now();
  rdma_probe_outcome o;
  o.explicit_library = library.find('/') != std::string::npos;
  o.device_requested = req.device;
#if MRCHECK_HAVE_DP_VERBS
  auto v = dp::load(library);
  if (!v) {
    o.load_error = v.error().message();
    if (req.peers) dp::run_peers(dp::verbs{}, nullptr, 0, req, log, o);  // the peers hear why, not silence
  } else {
    o.library = v->path;
    run_all(*v, req, log, o);
  }
#else
  (void)req;
  (void)log;
  o.load_error = fmt::format("load {}: mrcheck was built without <infiniband/verbs.h> (libibverbs-dev)", library);
#endif
  o.elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  return o;
}

}  // namespace mrcheck
