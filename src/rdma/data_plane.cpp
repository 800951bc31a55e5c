// The data-plane probe (include/mrcheck/rdma_probe.h): which ports, and for each the connected pair through
// INIT/RTR/RTS. The traffic is dp_traffic.cpp, the verbs' loading dp_verbs.cpp.
#include <mrcheck/rdma_probe.h>

#include <mrcheck/diagnosis.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include "rdma/dp_session.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mrcheck {

int rdma_iterations(const rdma_probe_request& req, std::uint64_t size) {
  if (req.iters > 0) return req.iters;
  std::uint64_t n = size == 0 ? 1000 : k_rdma_default_bytes / size;
  return static_cast<int>(std::clamp<std::uint64_t>(n, 4, 1000));
}

#if MRCHECK_HAVE_DP_VERBS

namespace dp {
namespace {

using clock = std::chrono::steady_clock;

std::string gid_text(const ibv_gid& g) {
  static constexpr unsigned char k_v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.raw, k_v4_prefix, 12) == 0) {
    return fmt::format("::ffff:{}.{}.{}.{}", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  }
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, g.raw, buf, sizeof buf) == nullptr) return "?";
  return buf;
}

bool gid_empty(const ibv_gid& g) {
  return std::all_of(std::begin(g.raw), std::end(g.raw), [](unsigned char c) { return c == 0; });
}

bool gid_link_local(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

// A port whose GIDs are all link-local (fe80::/10): the netdev has no address of its own, only the MAC-derived
// default GID the kernel keeps. Soft-RoCE on Debian 12's 6.1 passes a loopback over it while the netdev's
// IPv6 link-local address stays, and fails ibv_modify_qp to RTR with ENETUNREACH once that is gone too; the
// other nodes' GIDs are their IP addresses either way, so the port fails here, naming the netdev (the GID's,
// through ibv_query_gid_ex) rather than a pair that cannot meet (tests/guest/data_plane_break_test.sh).
failure link_local_only(const rdma_port_result& r, int index, int ifindex) {
  char name[IF_NAMESIZE] = "";
  const std::string netdev = ifindex > 0 && if_indextoname(static_cast<unsigned>(ifindex), name) != nullptr
                                 ? fmt::format("its network device {}", name)
                                 : std::string("its network device");
  return failure{
      "gid", "no_gid", 0, "",
      fmt::format("{} port {} has no RoCE GID with an IP address: {} has no IPv4 (nor global IPv6) "
                  "address, only the link-local GID {} {}{}: RoCE between nodes needs the netdev's IP address",
                  r.device, r.port, netdev, index, r.gid, r.gid_type.empty() ? "" : " (" + r.gid_type + ")")};
}

// The GID the pair uses on a RoCE port: RoCE v2 before v1, an IPv4-mapped address before any other (NCCL's
// default: NCCL_IB_ROCE_VERSION_NUM 2, NCCL_IB_ADDR_FAMILY AF_INET), a link-local one last; empty slots skipped.
std::optional<failure> choose_gid(session& s, const ibv_port_attr& pa, rdma_port_result& r, ibv_gid& out) {
  int best = -1;
  int best_score = -1;
  int best_ifindex = 0;
  const int n = std::min(pa.gid_tbl_len, 256);
  for (int i = 0; i < n; ++i) {
    ibv_gid g{};
    std::string type;
    int ifindex = 0;
    if (s.v->query_gid_ex != nullptr) {
      ibv_gid_entry e{};
      int rc = s.v->query_gid_ex(s.ctx, s.port, static_cast<std::uint32_t>(i), &e, 0, sizeof e);
      if (rc != 0) continue;  // ENODATA: an empty slot
      g = e.gid;
      type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
      ifindex = static_cast<int>(e.ndev_ifindex);
    } else if (s.v->query_gid(s.ctx, s.port, i, &g) != 0) {
      continue;
    }
    if (gid_empty(g)) continue;
    const std::string text = gid_text(g);
    const int score = (gid_link_local(g) ? 0 : 8) + (type == "RoCE v2" ? 4 : 0) +
                      (text.rfind("::ffff:", 0) == 0 ? 2 : 0) + (type.empty() ? 0 : 1);
    if (score > best_score) {
      best = i;
      best_score = score;
      best_ifindex = ifindex;
      out = g;
      r.gid = text;
      r.gid_type = type;
    }
  }
  if (best < 0) {
    return failure{"gid", "no_gid", 0, "",
                   fmt::format("the RoCE GID table of {} port {} is empty ({} slots): the port's network device has "
                               "no IP address",
                               r.device, r.port, pa.gid_tbl_len)};
  }
  r.gid_index = best;
  if (gid_link_local(out)) return link_local_only(r, best, best_ifindex);
  return std::nullopt;
}

// The PD, the memory, and the CQ and QP of sides [first, last] (both for the loopback, one for a node pair).
std::optional<failure> setup(session& s, std::uint64_t max_size, int first = 0, int last = 1) {
  log(*s.log, log_level::verbose, "probe rdma: calling ibv_alloc_pd");
  if ((s.pd = s.v->alloc_pd(s.ctx)) == nullptr) return call_failed("alloc_pd", "ibv_alloc_pd", errno);
  s.region = (max_size + 4095) / 4096 * 4096;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, 3 * s.region) != 0) return failure{"alloc", "errno", ENOMEM, "", "out of memory"};
  s.buf = static_cast<unsigned char*>(p);
  std::memset(s.buf, 0, 3 * s.region);
  log(*s.log, log_level::verbose, "probe rdma: calling ibv_reg_mr {} bytes", 3 * s.region);
  s.mr = s.v->reg_mr(s.pd, s.buf, 3 * s.region, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s.mr == nullptr) return call_failed("reg_mr", fmt::format("ibv_reg_mr of {}", format_bytes(3 * s.region)), errno);
  for (int side = first; side <= last; ++side) {
    log(*s.log, log_level::verbose, "probe rdma: calling ibv_create_cq");
    s.cq[side] = s.v->create_cq(s.ctx, 2 * k_queue_depth + 2, nullptr, nullptr, 0);
    if (s.cq[side] == nullptr) return call_failed("create_cq", "ibv_create_cq", errno);
  }
  for (int side = first; side <= last; ++side) {
    ibv_qp_init_attr init{};
    init.send_cq = s.cq[side];
    init.recv_cq = s.cq[side];
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = k_queue_depth;
    init.cap.max_recv_wr = k_queue_depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    log(*s.log, log_level::verbose, "probe rdma: calling ibv_create_qp RC");
    s.qp[side] = s.v->create_qp(s.pd, &init);
    if (s.qp[side] == nullptr) return call_failed("create_qp", "ibv_create_qp (RC)", errno);
  }
  return std::nullopt;
}

// Where one QP sends: the other QP's number, its LID or GID, and the path MTU both ends can carry.
struct destination {
  std::uint32_t qpn = 0;
  std::uint16_t lid = 0;
  const ibv_gid* gid = nullptr;  // RoCE (or a global route): the GID, sent from sgid_index
  int sgid_index = -1;
  ibv_mtu mtu = IBV_MTU_1024;
  bool peer = false;  // the other node's QP (the text says "to" its GID)
};

ibv_qp_attr transition(const session& s, int state, const destination& d, int& mask) {
  ibv_qp_attr a{};
  mask = IBV_QP_STATE;
  if (state == 0) {
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = s.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (state == 1) {
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = d.mtu;
    a.dest_qp_num = d.qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = d.lid;
    a.ah_attr.port_num = s.port;
    if (d.sgid_index >= 0 && d.gid != nullptr) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = *d.gid;
      a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(d.sgid_index);
      a.ah_attr.grh.hop_limit = 1;
    }
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
            IBV_QP_MIN_RNR_TIMER;
  } else {
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try: a lost packet ends as RETRY_EXC_ERR within 0.5 s
    // 6, not 7: Soft-RoCE (rxe_comp.c) takes a retry count of 7 as "retry forever", as the spec does for the RNR
    // count only, so a path that drops everything (a firewall between the guests) never completed there.
    a.retry_cnt = 6;
    a.rnr_retry = 3;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return a;
}

// One QP (`side`) from RESET to `to` (0 INIT, 1 RTR, 2 RTS) and from `from`; the failure names the transition.
std::optional<failure> move_qp(session& s, int side, int from, int to, const destination& d) {
  const char* names[] = {"INIT", "RTR", "RTS"};
  for (int state = from; state <= to; ++state) {
    int mask = 0;
    ibv_qp_attr a = transition(s, state, d, mask);
    log(*s.log, log_level::verbose, "probe rdma: calling ibv_modify_qp {}", names[state]);
    if (int rc = s.v->modify_qp(s.qp[side], &a, mask); rc != 0) {
      failure f = call_failed(fmt::format("modify_qp {}", names[state]),
                              fmt::format("ibv_modify_qp to {}", names[state]), rc > 0 ? rc : errno);
      if (state == 1) {
        f.message += fmt::format(" (path MTU {}, {})", 128 << d.mtu,
                                 d.sgid_index >= 0 && d.gid != nullptr
                                     ? fmt::format("GID index {} {}{}", d.sgid_index, d.peer ? "to " : "",
                                                   gid_text(*d.gid))
                                     : fmt::format("LID {}", d.lid));
      }
      return f;
    }
  }
  return std::nullopt;
}

// RESET -> INIT -> RTR -> RTS for both QPs, each the other's destination; what ibv_rc_pingpong sets.
std::optional<failure> connect(session& s, const ibv_port_attr& pa, const rdma_port_result& r, const ibv_gid& gid) {
  for (int state = 0; state < 3; ++state) {
    for (int side = 0; side < 2; ++side) {
      destination d{s.qp[1 - side]->qp_num, pa.lid, &gid, r.gid_index, pa.active_mtu};
      if (auto f = move_qp(s, side, state, state, d)) return f;
    }
  }
  return std::nullopt;
}

// The port's address and what the result shows of it: its MTU and LID, and on RoCE the GID choose_gid takes; an
// InfiniBand port without a LID has no address at all.
std::optional<failure> port_address(session& s, const ibv_port_attr& pa, rdma_port_result& r, ibv_gid& gid) {
  r.mtu = 128 << pa.active_mtu;
  r.lid = pa.lid;
  if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) return choose_gid(s, pa, r, gid);
  if (pa.lid == 0) {
    return failure{"port", "no_lid", 0, "",
                   fmt::format("{} port {} is ACTIVE without a LID: no subnet manager has configured it", r.device,
                               r.port)};
  }
  return std::nullopt;
}

}  // namespace

void session::release() {
  auto note = [&](int rc, const char* what) {
    if (rc != 0 && cleanup_error.empty()) cleanup_error = fmt::format("{}: {}", what, errno_name(rc > 0 ? rc : errno));
  };
  for (auto* q : qp) {
    if (q != nullptr) note(v->destroy_qp(q), "ibv_destroy_qp");
  }
  for (auto* c : cq) {
    if (c != nullptr) note(v->destroy_cq(c), "ibv_destroy_cq");
  }
  if (mr != nullptr) note(v->dereg_mr(mr), "ibv_dereg_mr");
  if (pd != nullptr) note(v->dealloc_pd(pd), "ibv_dealloc_pd");
  std::free(buf);
  qp[0] = qp[1] = nullptr;
  cq[0] = cq[1] = nullptr;
  mr = nullptr;
  pd = nullptr;
  buf = nullptr;
}

std::optional<failure> pair_prepare(session& s, const ibv_port_attr& pa, rdma_port_result& r, std::uint64_t max_size,
                                    int side, qp_info& mine) {
  ibv_gid gid{};
  std::optional<failure> f = port_address(s, pa, r, gid);
  if (!f) f = setup(s, max_size, side, side);
  if (!f) f = move_qp(s, side, 0, 0, destination{});
  if (f) return f;
  mine.qpn = s.qp[side]->qp_num;
  mine.lid = pa.lid;
  mine.has_gid = r.gid_index >= 0;
  mine.gid = gid;
  mine.mtu = pa.active_mtu;
  // A's writes land in B's region: B announces it (A's address is unused by B).
  mine.addr = reinterpret_cast<std::uintptr_t>(s.b_rx());
  mine.rkey = s.mr->rkey;
  return std::nullopt;
}

std::optional<failure> pair_connect(session& s, int side, const rdma_port_result& r, const qp_info& peer, int mtu) {
  destination d{peer.qpn,
                peer.lid,
                peer.has_gid ? &peer.gid : nullptr,
                peer.has_gid ? r.gid_index : -1,
                static_cast<ibv_mtu>(mtu),
                true};
  s.remote = true;
  s.remote_addr = peer.addr;
  s.remote_rkey = peer.rkey;
  return move_qp(s, side, 1, 2, d);
}

// One ACTIVE port: the pair, then every size.
void run_port(const verbs& v, ibv_context* ctx, const ibv_port_attr& pa, const rdma_probe_request& req, log_sink& lg,
              rdma_port_result& r) {
  auto t0 = clock::now();
  r.tested = true;
  session s;
  s.v = &v;
  s.ctx = ctx;
  s.port = static_cast<std::uint8_t>(r.port);
  s.log = &lg;
  s.wait = req.wait;
  ibv_gid gid{};
  std::optional<failure> f = port_address(s, pa, r, gid);
  std::uint64_t max_size = *std::max_element(req.sizes.begin(), req.sizes.end());
  if (!f) f = setup(s, max_size);
  if (!f) f = connect(s, pa, r, gid);
  for (std::uint64_t size : req.sizes) {
    if (f) break;
    rdma_size_result sr;
    f = run_size(s, size, rdma_iterations(req, size), sr);
    r.sizes.push_back(sr);
  }
  s.release();
  if (f) {
    set_failure(r, *f);
  } else if (!s.cleanup_error.empty()) {
    set_failure(r, failure{"cleanup", "errno", 0, "", s.cleanup_error});
  } else {
    r.ok = true;
  }
  r.elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
}

}  // namespace dp
#endif

}  // namespace mrcheck
