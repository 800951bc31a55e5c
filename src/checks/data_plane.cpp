// Check data_plane: the data-plane probe's outcome (include/mrcheck/rdma_probe.h) as a verdict, and its JSON
// (docs/schema/probe-rdma.schema.json). A pass means every tested port moved every size both ways with every
// byte intact; the first failed port decides a fail, its step and cause in the summary, the fix in the hint.
#include <mrcheck/probe_checks.h>
#include <mrcheck/rdma_probe.h>

#include <mrcheck/diagnosis.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>

namespace mrcheck {

namespace {

std::string hint_for(const rdma_port_result& p) {
  if (p.cause == "port_down") {
    return "bring the link up: the network device under a RoCE port (`ip link set DEV up`), the cable or switch "
           "port of an InfiniBand one; `ibv_devinfo` shows the port's state";
  }
  if (p.cause == "no_gid") {
    return "give the port's network device an IP address (RoCE GIDs are made from its addresses); "
           "`ibv_devinfo -v` lists the GID table";
  }
  if (p.cause == "no_lid") return "start a subnet manager (opensm) on the fabric";
  if (p.cause == "timeout") return "the device or its driver stopped completing work: see dmesg";
  if (p.cause == "mismatch") return "bytes changed in flight: an HCA, driver or firmware fault; see dmesg";
  if (p.cause == "completion") {
    if (p.wc_status == "IBV_WC_RETRY_EXC_ERR") {
      return "nothing acknowledged the packets: the path drops them (link, MTU mismatch, a firewall dropping "
             "UDP port 4791 for RoCE v2); try `ibv_rc_pingpong -d DEV -g GID_INDEX`";
    }
    return "see dmesg; `ibv_rc_pingpong -d DEV -g GID_INDEX` repeats the test by hand";
  }
  if (p.step == "reg_mr" && (p.err == ENOMEM || p.err == EPERM)) {
    return "RLIMIT_MEMLOCK is too low to register the probe's buffers: `mrcheck probe mr` names the hop";
  }
  if (p.step == "modify_qp RTR" &&
      (p.err == ETIMEDOUT || p.err == ENETUNREACH || p.err == EHOSTUNREACH || p.err == ENODATA)) {
    // Soft-RoCE with its netdev's addresses removed keeps only the MAC-derived fe80:: GID, and RTR then fails
    // with ENETUNREACH (seen on Debian 12's 6.1 kernel, README "The data-plane probe").
    return "the route to the GID could not be resolved: the port's network device has no usable IP address or "
           "route (`ip addr show DEV`; RoCE GIDs come from its addresses, `ibv_devinfo -v` lists them)";
  }
  if (p.step.rfind("modify_qp", 0) == 0) {
    return "the device refused the queue pair's attributes (GID index, path MTU, LID): `ibv_devinfo -v` shows "
           "the port's GID table and active MTU";
  }
  return "see dmesg; `ibv_devinfo` and `ibv_rc_pingpong` repeat the calls by hand";
}

std::string path_text(const rdma_port_result& p) {
  if (p.gid_index >= 0) {
    return fmt::format("GID {} {}{} MTU {}", p.gid_index, p.gid, p.gid_type.empty() ? "" : " (" + p.gid_type + ")",
                       p.mtu);
  }
  return fmt::format("LID {} MTU {}", p.lid, p.mtu);
}

std::string size_text(const rdma_size_result& s) {
  // Below 10 MB/s (Soft-RoCE between emulated guests) one decimal, so a slow pass never reads "0 MB/s".
  return fmt::format("{} send/recv {:.1f} us, write {:.{}f} MB/s", format_bytes(s.size), s.send_latency_us,
                     s.write_mbps, s.write_mbps < 10 ? 1 : 0);
}

std::string port_line(const rdma_port_result& p) {
  std::string line = fmt::format("{} port {} ({}, {}): ", p.device, p.port, p.link_layer.empty() ? "?" : p.link_layer,
                                 p.state.empty() ? "?" : p.state);
  if (!p.tested) return line + "not tested";
  if (!p.ok) return line + fmt::format("FAILED at {}: {}", p.step, p.message);
  std::vector<std::string> sizes;
  for (const auto& s : p.sizes) sizes.push_back(size_text(s) + (s.verified ? "" : " (not verified)"));
  return line + fmt::format("{}; {}; {:.0f} ms", path_text(p), fmt::join(sizes, "; "), p.elapsed_ms);
}

std::string pair_hint(const rdma_pair_result& r) {
  if (r.cause == "no_route") {
    return fmt::format(
        "the nodes cannot reach each other: check the network between this node and {} (`ping`, "
        "routes, a firewall on TCP ports 20000-28999)",
        r.peer);
  }
  if (r.cause == "no_peer") return fmt::format("{}'s probe did not come: see its own data_plane line", r.peer);
  if (r.cause == "auth") {
    return "the pair authenticates through munged (Slurm's auth/munge): both nodes need munged running with the "
           "same key";
  }
  if (r.cause == "peer") return fmt::format("see {}'s own data_plane line for its side", r.peer);
  if (r.cause == "protocol") return fmt::format("{} runs another mrcheck version, or not mrcheck", r.peer);
  // Between nodes a completion that never comes is the path far more often than the device: the same as
  // RETRY_EXC_ERR (a firewall or a switch dropping the packets before the HCA's retries end).
  if (r.cause == "timeout" || r.wc_status == "IBV_WC_RETRY_EXC_ERR") {
    return fmt::format(
        "nothing between this node and {} acknowledged the packets: the path drops them (link, MTU, a "
        "firewall dropping UDP port 4791 for RoCE v2); try `ibv_rc_pingpong -d DEV -g GID_INDEX` "
        "between the two nodes",
        r.peer);
  }
  rdma_port_result as_port;
  as_port.step = r.step;
  as_port.cause = r.cause;
  as_port.err = r.err;
  as_port.wc_status = r.wc_status;
  return hint_for(as_port);
}

std::string pair_text(const rdma_pair_result& r) {
  std::string who = fmt::format("pair {} with {} ({})", r.pair, r.peer, r.role == "serve" ? "sending" : "echoing");
  if (!r.ok) return fmt::format("{}: FAILED at {}: {}", who, r.step, r.message);
  std::vector<std::string> sizes;
  for (const auto& s : r.sizes) sizes.push_back(size_text(s));
  return fmt::format("{}: {}:{} {} -> {} MTU {}: {}", who, r.device, r.port, r.gid.empty() ? "LID" : r.gid,
                     r.peer_gid.empty() ? "LID" : r.peer_gid, r.mtu, fmt::join(sizes, ", "));
}

// The pairs between nodes after a loopback that passed: the first failed pair fails, an MTU that differs from
// the peer's warns (the pair, like NCCL, runs at the smaller one).
void judge_pairs(const rdma_probe_outcome& o, check_result& c) {
  if (o.pairs.empty()) return;  // out of a step of two nodes or more: the loopback alone
  for (const auto& r : o.pairs) c.detail += pair_text(r) + "\n";
  std::vector<std::string> refused;
  for (const auto& r : o.pairs) refused.insert(refused.end(), r.refused.begin(), r.refused.end());
  for (const auto& r : refused) c.detail += "refused: " + r + "\n";
  auto failed = std::find_if(o.pairs.begin(), o.pairs.end(), [](const rdma_pair_result& r) { return !r.ok; });
  if (failed != o.pairs.end()) {
    c.result = verdict::fail;
    c.summary = fmt::format("RDMA between nodes: pair {} with {}{}: {}: {}", failed->pair, failed->peer,
                            failed->device.empty() ? "" : fmt::format(" on {}:{}", failed->device, failed->port),
                            failed->step, failed->message);
    c.hint = pair_hint(*failed);
    c.detail += fmt::format("cause={}\n", failed->cause);
    return;
  }
  std::vector<std::string> parts;
  for (const auto& r : o.pairs) parts.push_back(pair_text(r));
  c.summary += fmt::format("; between nodes, every byte verified: {}", fmt::join(parts, "; "));
  // A stranger the meeting refused on the way (the pair then met its real peer): named, not trusted.
  if (!refused.empty()) c.summary += fmt::format("; {} refused on the way: {}", refused.size(), refused.front());
  for (const auto& r : o.pairs) {
    if (r.peer_mtu != 0 && r.peer_mtu != r.local_mtu) {
      c.result = verdict::warn;
      c.summary += fmt::format(
          "; MTU mismatch: this node's {}:{} has active MTU {}, {}'s {}: the pair (and NCCL) "
          "runs at {}",
          r.device, r.port, r.local_mtu, r.peer, r.peer_mtu, r.mtu);
      c.hint = "give the network devices under the RoCE ports of every node the same MTU (`ip link set DEV mtu N`)";
    }
  }
}

}  // namespace

check_result data_plane_check(const rdma_probe_outcome& o) {
  check_result c;
  c.id = "data_plane";
  if (!o.load_error.empty()) {
    c.result = o.explicit_library ? verdict::error : verdict::skip;
    c.summary = o.explicit_library
                    ? fmt::format("cannot load the verbs library: {}", o.load_error)
                    : fmt::format("no RDMA device: nothing was tested (no RDMA user-space library: {})", o.load_error);
    return c;
  }
  if (!o.list_error.empty()) {
    c.result = verdict::error;
    c.summary = fmt::format("cannot list RDMA devices: {}", o.list_error);
    return c;
  }
  c.detail = fmt::format("library: {}\nselection: {}\n", o.library, o.selection);
  for (const auto& p : o.ports) c.detail += port_line(p) + "\n";
  for (const auto& n : o.notes) c.detail += "note: " + n + "\n";
  if (!o.device_requested.empty() &&
      std::find(o.devices.begin(), o.devices.end(), o.device_requested) == o.devices.end()) {
    c.result = verdict::error;
    c.summary = fmt::format("--device {}: no such RDMA device (present: {})", o.device_requested,
                            o.devices.empty() ? std::string("none") : fmt::format("{}", fmt::join(o.devices, ", ")));
    return c;
  }
  std::vector<const rdma_port_result*> tested;
  for (const auto& p : o.ports) {
    if (p.tested) tested.push_back(&p);
  }
  if (tested.empty()) {
    c.result = verdict::skip;
    c.summary = o.devices.empty() ? std::string("no RDMA device: nothing was tested")
                                  : fmt::format("no port of {} was selected ({}): nothing was tested",
                                                fmt::join(o.devices, ", "), o.selection);
    return c;
  }
  auto failed = std::find_if(tested.begin(), tested.end(), [](const rdma_port_result* p) { return !p->ok; });
  if (failed != tested.end()) {
    const rdma_port_result& p = **failed;
    c.result = verdict::fail;
    c.summary = fmt::format("{} port {}: {}: {}", p.device, p.port, p.step, p.message);
    c.hint = hint_for(p);
    c.detail += fmt::format("cause={}\n", p.cause);
    for (const auto& r : o.pairs) c.detail += pair_text(r) + "\n";
    return c;
  }
  c.result = verdict::pass;
  std::vector<std::string> parts;
  for (const auto* p : tested) {
    std::vector<std::string> sizes;
    for (const auto& s : p->sizes) sizes.push_back(size_text(s));
    parts.push_back(fmt::format("{}:{} {}: {}", p->device, p->port, path_text(*p), fmt::join(sizes, ", ")));
  }
  c.summary = fmt::format("RC loopback on {} port(s), every byte verified: {}", tested.size(), fmt::join(parts, "; "));
  judge_pairs(o, c);
  if (!o.peers_note.empty()) c.detail += "note: " + o.peers_note + "\n";
  return c;
}

nlohmann::json rdma_probe_to_json(const rdma_probe_outcome& o) {
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& p : o.ports) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& s : p.sizes) {
      sizes.push_back({{"size", s.size},
                       {"iters", s.iters},
                       {"send_latency_us", s.send_latency_us},
                       {"write_mbps", s.write_mbps},
                       {"verified", s.verified}});
    }
    ports.push_back({{"device", p.device},
                     {"port", p.port},
                     {"state", p.state},
                     {"link_layer", p.link_layer},
                     {"tested", p.tested},
                     {"ok", p.ok},
                     {"step", p.step},
                     {"cause", p.cause},
                     {"errno", p.err},
                     {"errno_name", std::string(errno_name(p.err))},
                     {"wc_status", p.wc_status},
                     {"message", p.message},
                     {"gid_index", p.gid_index},
                     {"gid", p.gid},
                     {"gid_type", p.gid_type},
                     {"lid", p.lid},
                     {"mtu", p.mtu},
                     {"elapsed_ms", p.elapsed_ms},
                     {"sizes", sizes}});
  }
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& r : o.pairs) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& s : r.sizes) {
      sizes.push_back({{"size", s.size},
                       {"iters", s.iters},
                       {"send_latency_us", s.send_latency_us},
                       {"write_mbps", s.write_mbps},
                       {"verified", s.verified}});
    }
    pairs.push_back({{"pair", r.pair},
                     {"role", r.role},
                     {"peer", r.peer},
                     {"device", r.device},
                     {"port", r.port},
                     {"ok", r.ok},
                     {"step", r.step},
                     {"cause", r.cause},
                     {"errno", r.err},
                     {"errno_name", std::string(errno_name(r.err))},
                     {"wc_status", r.wc_status},
                     {"message", r.message},
                     {"gid", r.gid},
                     {"peer_gid", r.peer_gid},
                     {"mtu", r.mtu},
                     {"local_mtu", r.local_mtu},
                     {"peer_mtu", r.peer_mtu},
                     {"tcp_port", r.tcp_port},
                     {"refused", r.refused},
                     {"elapsed_ms", r.elapsed_ms},
                     {"sizes", sizes}});
  }
  return {{"library", o.library},
          {"load_error", o.load_error},
          {"selection", o.selection},
          {"devices", o.devices},
          {"ports", ports},
          {"notes", o.notes},
          {"elapsed_ms", o.elapsed_ms},
          {"scope", o.pairs.empty() ? "loopback" : "loopback+nodes"},
          {"pairs", pairs},
          {"peers_note", o.peers_note}};
}

}  // namespace mrcheck
