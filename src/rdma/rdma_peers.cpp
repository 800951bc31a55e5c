// The data-plane probe between the step's nodes (include/mrcheck/rdma_probe.h): which pairs a node takes part
// in, the meeting on the authenticated channel of the NCCL pair (src/nccl/rendezvous.h), the exchange of the
// QPs' addresses, and the traffic of one pair, node k (A) sending and writing, node k+1 (B) echoing and checking.
//
// Every line between the two nodes is a MUNGE credential of the pair's session: "qp ..." (or "fail TEXT"), then
// one exchange per size ("wrote SIZE LAT MBPS" from A against "echoed SIZE" from B; "next" against
// "verified SIZE") and each side may answer "fail TEXT" instead. Both sides send before they read, so no
// exchange waits on the other's order, and every read has the pair's deadline.
#include <mrcheck/rdma_probe.h>

#include <mrcheck/units.h>

#include "nccl/rendezvous.h"
#include "rdma/dp_session.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <thread>

namespace mrcheck {

std::vector<rdma_pair_role> rdma_pair_roles(int nodes, int index) {
  std::vector<rdma_pair_role> out;
  if (nodes < 2 || index < 0 || index >= nodes) return out;
  const int pairs = nodes == 2 ? 1 : nodes;
  if (index < pairs) out.push_back({index, true, (index + 1) % nodes});
  const int prev = (index + nodes - 1) % nodes;
  if (prev < pairs && prev != index) out.push_back({prev, false, prev});
  return out;
}

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// One entry "prefix[ranges]suffix" (or a plain name) appended to `out`; false when malformed or too long.
bool expand_entry(std::string_view e, std::vector<std::string>& out, std::size_t max) {
  std::size_t open = e.find('[');
  if (open == std::string_view::npos) {
    if (e.empty() || e.find(']') != std::string_view::npos) return false;
    out.emplace_back(e);
    return out.size() <= max;
  }
  std::size_t close = e.find(']', open);
  if (close == std::string_view::npos || open == 0 || e.find('[', open + 1) != std::string_view::npos) return false;
  std::string_view prefix = e.substr(0, open), suffix = e.substr(close + 1),
                   ranges = e.substr(open + 1, close - open - 1);
  if (suffix.find_first_of("[]") != std::string_view::npos) return false;
  while (true) {
    std::size_t comma = ranges.find(',');
    std::string_view item = ranges.substr(0, comma);
    std::size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash), hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) return false;
    unsigned a = 0, b = 0;
    std::from_chars(lo.data(), lo.data() + lo.size(), a);
    std::from_chars(hi.data(), hi.data() + hi.size(), b);
    if (b < a || b - a >= max) return false;
    for (unsigned v = a; v <= b; ++v) {
      out.push_back(fmt::format("{}{:0{}}{}", prefix, v, lo.size(), suffix));  // Slurm keeps the width written
      if (out.size() > max) return false;
    }
    if (comma == std::string_view::npos) break;
    ranges.remove_prefix(comma + 1);
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::string>> expand_nodelist(std::string_view list, std::size_t max) {
  std::vector<std::string> out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0 || depth > 1) return std::nullopt;
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (!expand_entry(list.substr(start, i - start), out, max)) return std::nullopt;
      start = i + 1;
    }
  }
  if (depth != 0 || out.empty()) return std::nullopt;
  return out;
}

#if MRCHECK_HAVE_DP_VERBS

namespace dp {
namespace {

using clock = std::chrono::steady_clock;

// Apart from the admin handoff's (0x41444d...) and the NCCL pair's (0): "rdma" and the pair's number.
constexpr std::uint64_t k_rdma_port_salt = 0x72646d6100000000ull;

std::string gid_hex(const ibv_gid& g) {
  std::string s;
  for (unsigned char c : g.raw) s += fmt::format("{:02x}", c);
  return s;
}

std::string qp_line(const qp_info& q) {
  return fmt::format("qp {} {} {} {} {} {}", q.qpn, q.lid, q.has_gid ? gid_hex(q.gid) : "-", q.mtu, q.addr, q.rkey);
}

template <typename T>
bool number(std::string_view w, T& out) {
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), out);
  return ec == std::errc() && p == w.data() + w.size() && !w.empty();
}

// "qp QPN LID GID|- MTU ADDR RKEY", strictly; nullopt for anything else.
std::optional<qp_info> parse_qp_line(std::string_view line) {
  std::vector<std::string_view> w;
  while (!line.empty() && w.size() < 8) {
    std::size_t sp = line.find(' ');
    w.push_back(line.substr(0, sp));
    line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
  }
  qp_info q;
  if (w.size() != 7 || w[0] != "qp" || !number(w[1], q.qpn) || !number(w[2], q.lid) || !number(w[4], q.mtu) ||
      !number(w[5], q.addr) || !number(w[6], q.rkey) || q.mtu < IBV_MTU_256 || q.mtu > IBV_MTU_4096 || q.qpn == 0) {
    return std::nullopt;
  }
  if (w[3] != "-") {
    if (w[3].size() != 32) return std::nullopt;
    for (int i = 0; i < 16; ++i) {
      auto [p, ec] = std::from_chars(w[3].data() + 2 * i, w[3].data() + 2 * i + 2, q.gid.raw[i], 16);
      if (ec != std::errc() || p != w[3].data() + 2 * i + 2) return std::nullopt;
    }
    q.has_gid = true;
  }
  return q;
}

// One pair after the meeting: the channel and what this side ran into so far.
struct pair_run {
  detail::rendezvous& rv;
  std::chrono::milliseconds meet;  // each answer's deadline
  rdma_pair_result& r;
  std::optional<failure> local;  // this side's own first failure
  std::string peer_failed;       // what the peer said when it failed

  // Sends `mine` (or "fail ..." once this side failed), then reads the peer's line. The peer's words, or
  // nullopt when the pair ends here (r's failure set: transport, credential, or the peer's failure).
  std::optional<std::string> exchange(const std::string& mine) {
    std::string line = local ? "fail " + local->step + ": " + local->message : mine;
    if (auto st = send_sealed_line(rv, line); !st) return end("send", "no_route", st.message());
    auto got = read_sealed_line(rv, clock::now() + meet);
    if (!got) {
      const std::string why = got.error().message();
      return end("exchange",
                 why.find("credential") != std::string::npos || why.find("authenticate") != std::string::npos
                     ? "auth"
                     : "no_peer",
                 why);
    }
    if (got->starts_with("fail ")) {
      peer_failed = escape_line(std::string_view(*got).substr(5), 300);
      return std::nullopt;
    }
    if (local) return std::nullopt;
    return *got;
  }
  std::nullopt_t end(const char* step, const char* cause, const std::string& why) {
    if (!local) local = failure{step, cause, 0, "", fmt::format("the pair's channel to {}: {}", r.peer, why)};
    return std::nullopt;
  }
  std::nullopt_t protocol(const std::string& got) {
    if (!local) {
      local = failure{"exchange", "protocol", 0, "",
                      fmt::format("{} answered '{}', which the pair does not take", r.peer, escape_line(got, 64))};
    }
    return std::nullopt;
  }
};

// Messages per size between nodes: --iters when given, else the loopback's rule but at most 16. The pair proves
// the path between two kernels at NCCL's sizes; a round trip there is a real network's (44 ms for 4 KiB between
// two TCG guests), and 256 of them would take the probe's whole time.
constexpr int k_pair_max_iters = 16;
int pair_iterations(const rdma_probe_request& req, std::uint64_t size) {
  return req.iters > 0 ? req.iters : std::min(rdma_iterations(req, size), k_pair_max_iters);
}

// A's sizes: its traffic, then "wrote" against B's "echoed", then "next" against B's "verified".
void serve_sizes(session& s, pair_run& p, const rdma_probe_request& req) {
  for (std::uint64_t size : req.sizes) {
    rdma_size_result sr;
    if (!p.local) p.local = pair_send(s, size, pair_iterations(req, size), sr);
    auto echoed = p.exchange(fmt::format("wrote {} {:.3f} {:.3f}", size, sr.send_latency_us, sr.write_mbps));
    if (!echoed) return;
    if (*echoed != fmt::format("echoed {}", size)) return (void)p.protocol(*echoed);
    auto verified = p.exchange("next");
    if (!verified) return;
    if (*verified != fmt::format("verified {}", size)) return (void)p.protocol(*verified);
    p.r.sizes.push_back(sr);
  }
}

// B's sizes: the echoes, then "echoed" against A's "wrote" (A's figures), the check of the writes, the next
// size's first receive, then "verified" against "next".
void join_sizes(session& s, pair_run& p, const rdma_probe_request& req) {
  for (std::size_t k = 0; k < req.sizes.size(); ++k) {
    const std::uint64_t size = req.sizes[k];
    if (!p.local) p.local = pair_echo(s, size, pair_iterations(req, size));
    auto wrote = p.exchange(fmt::format("echoed {}", size));
    if (!wrote) return;
    rdma_size_result sr;
    sr.size = size;
    sr.iters = pair_iterations(req, size);
    std::uint64_t said = 0;
    if (std::sscanf(wrote->c_str(), "wrote %lu %lf %lf", &said, &sr.send_latency_us, &sr.write_mbps) != 3 ||
        said != size) {
      return (void)p.protocol(*wrote);
    }
    if (!p.local) p.local = pair_verify_written(s, size);
    if (!p.local && k + 1 < req.sizes.size()) p.local = pair_post_first_recv(s, req.sizes[k + 1]);
    auto next = p.exchange(fmt::format("verified {}", size));
    if (!next) return;
    if (*next != "next") return (void)p.protocol(*next);
    sr.verified = true;
    p.r.sizes.push_back(sr);
  }
}

std::string gid_of(const qp_info& q, const rdma_port_result& r) { return q.has_gid ? r.gid : ""; }

// The pair on an open device context, once met: the QPs' addresses, RTR/RTS, the traffic.
void run_met_pair(const verbs& v, ibv_context* ctx, const ibv_port_attr& pa, const rdma_probe_request& req,
                  log_sink& lg, pair_run& p, bool serve) {
  const int side = serve ? 0 : 1;
  session s;
  s.v = &v;
  s.ctx = ctx;
  s.port = static_cast<std::uint8_t>(p.r.port);
  s.log = &lg;
  s.wait = 2 * req.wait;  // a completion crosses the network and comes back: twice the loopback's wait
  rdma_port_result path;
  path.device = p.r.device;
  path.port = p.r.port;
  qp_info mine;
  p.local = pair_prepare(s, pa, path, *std::max_element(req.sizes.begin(), req.sizes.end()), side, mine);
  p.r.gid = gid_of(mine, path);
  p.r.local_mtu = 128 << pa.active_mtu;
  auto theirs = p.exchange(qp_line(mine));
  std::optional<qp_info> peer = theirs ? parse_qp_line(*theirs) : std::nullopt;
  if (theirs && !peer) p.protocol(*theirs);
  if (peer) {
    char text[64] = "";
    if (peer->has_gid && inet_ntop(AF_INET6, peer->gid.raw, text, sizeof text) != nullptr) p.r.peer_gid = text;
    p.r.peer_mtu = 128 << peer->mtu;
    const int mtu = std::min<int>(peer->mtu, pa.active_mtu);  // what NCCL uses: the smaller of both ports
    p.r.mtu = 128 << mtu;
    p.local = pair_connect(s, side, path, *peer, mtu);
    if (!serve && !p.local) p.local = pair_post_first_recv(s, req.sizes.front());
    auto ready = p.exchange("rts");
    if (ready && *ready != "rts") p.protocol(*ready);
    if (ready && *ready == "rts") serve ? serve_sizes(s, p, req) : join_sizes(s, p, req);
  }
  s.release();
}

// How the meeting failed, from the rendezvous' error and its refusals.
void meeting_failed(rdma_pair_result& r, bool serve, const std::string& why) {
  r.step = "connect";
  r.err = 0;
  if (why.find("could not authenticate") != std::string::npos || !r.refused.empty()) {
    r.cause = "auth";
    r.message = fmt::format("the MUNGE-authenticated meeting with {} failed: {}{}", r.peer, why,
                            r.refused.empty() ? "" : " (" + r.refused.back() + ")");
  } else if (serve) {
    r.cause = "no_peer";
    r.message = fmt::format("{}'s probe never came to this node's port: {}", r.peer, why);
  } else {
    r.cause = "no_route";
    r.message = fmt::format("no route between the nodes: {}'s probe could not be reached over TCP: {}", r.peer, why);
  }
}

// One pair role of this node: the meeting (serve or join), the device, the pair; always a result.
rdma_pair_result run_role(const verbs& v, ibv_device* dev, const rdma_port_result* port, const std::string& no_port,
                          const rdma_pair_role& role, const rdma_probe_request& req, log_sink& lg) {
  auto t0 = clock::now();
  const rdma_peer_request& pr = *req.peers;
  rdma_pair_result r;
  r.pair = role.pair;
  r.role = role.serve ? "serve" : "join";
  r.peer = escape_line(pr.nodes[static_cast<std::size_t>(role.peer)], 64);
  if (port != nullptr) {
    r.device = port->device;
    r.port = port->port;
  }
  const detail::pair_channel ch = rdma_pair_channel(pr.job_id, pr.step_id, role.pair, pr.port_attempts);
  log(lg, log_level::verbose, "probe rdma: pair {} with {}: meeting ({})", role.pair, r.peer, r.role);
  auto met = role.serve ? detail::rendezvous_serve(ch, t0 + pr.meet, pr.auth, r.refused)
                        : detail::rendezvous_join(ch, pr.nodes[static_cast<std::size_t>(role.peer)], t0 + pr.meet,
                                                  pr.auth, r.refused);
  for (auto& line : r.refused) line = escape_line(line, 300);
  if (!met) {
    meeting_failed(r, role.serve, escape_line(met.error().message(), 300));
  } else {
    r.tcp_port = met->port;
    pair_run p{*met, pr.meet, r, std::nullopt, ""};
    ibv_context* ctx = dev != nullptr ? v.open_device(dev) : nullptr;
    ibv_port_attr pa{};
    if (port == nullptr) {
      p.local = failure{"port", "port_down", 0, "", no_port};
    } else if (ctx == nullptr || v.query_port(ctx, static_cast<std::uint8_t>(port->port), &pa) != 0) {
      p.local = call_failed("open_device", "ibv_open_device/ibv_query_port", errno ? errno : EIO);
    }
    if (!p.local) {
      run_met_pair(v, ctx, pa, req, lg, p, role.serve);
    } else {
      p.exchange("fail");  // tells the peer why (the local failure), and hears its side
    }
    if (ctx != nullptr) v.close_device(ctx);
    ::close(met->fd);
    if (p.local) {
      set_failure(r, *p.local);
      if (!p.peer_failed.empty()) r.message += fmt::format(" ({} said: {})", r.peer, p.peer_failed);
    } else if (!p.peer_failed.empty()) {
      set_failure(r, failure{"peer", "peer", 0, "", fmt::format("{} failed: {}", r.peer, p.peer_failed)});
    } else {
      r.ok = true;
    }
  }
  r.elapsed_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  return r;
}

}  // namespace

detail::pair_channel rdma_pair_channel(std::uint64_t job, std::uint64_t step, int pair, int port_attempts) {
  return detail::pair_channel{fmt::format("rdma pair {}", pair),
                              fmt::format("mrcheck-rdma 1 {}.{} {}", job, step, pair),
                              fmt::format("rdma-pair {}", pair),
                              job,
                              step,
                              k_rdma_port_salt + static_cast<std::uint64_t>(pair),
                              port_attempts};
}

void run_peers(const verbs& v, ibv_device** list, int n, const rdma_probe_request& req, log_sink& lg,
               rdma_probe_outcome& o) {
  const rdma_peer_request& pr = *req.peers;
  auto roles = rdma_pair_roles(static_cast<int>(pr.nodes.size()), pr.node_index);
  if (roles.empty()) {
    o.peers_note = fmt::format("a step of {} node(s): no pair between nodes", pr.nodes.size());
    return;
  }
  // The port that passed its loopback, else the first ACTIVE one (its pair then fails as the loopback did).
  const rdma_port_result* port = nullptr;
  for (const auto& p : o.ports) {
    if (p.tested && p.ok && port == nullptr) port = &p;
  }
  for (const auto& p : o.ports) {
    if (p.tested && p.state == "ACTIVE" && port == nullptr) port = &p;
  }
  ibv_device* dev = nullptr;
  for (int i = 0; port != nullptr && i < n && list[i] != nullptr; ++i) {
    const char* name = v.get_device_name(list[i]);
    if (name != nullptr && port->device == name) dev = list[i];
  }
  std::string no_port = "no ACTIVE port on this node for the pair";
  if (!o.load_error.empty()) {
    no_port += " (" + o.load_error + ")";
  } else if (!o.list_error.empty()) {
    no_port += " (" + o.list_error + ")";
  } else if (!o.ports.empty()) {
    const auto& f = o.ports.front();
    no_port += fmt::format(" ({} port {}: {})", f.device, f.port, f.message.empty() ? f.state : f.message);
  } else {
    no_port += " (no RDMA device)";
  }
  std::vector<rdma_pair_result> results(roles.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < roles.size(); ++k) {
    threads.emplace_back([&, k] { results[k] = run_role(v, dev, port, no_port, roles[k], req, lg); });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) o.pairs.push_back(std::move(r));
}

}  // namespace dp

#endif

}  // namespace mrcheck
