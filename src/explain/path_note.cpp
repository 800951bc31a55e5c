// The path NCCL took, read from its INFO lines, against what the node could do: GPUDirect RDMA silently off, or
// sockets where the node has RDMA devices. Neither prints an error (docs/facts/verbs-and-nccl.md §4), so these are
// notes beside the findings, never findings.
#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <functional>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_lines = 4096;
constexpr std::size_t k_max_bytes = 1u << 20;
constexpr std::size_t k_max_hosts = 16;

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// NCCL's header "host:pid:tid [dev] NCCL INFO ...": the host of the token "host:pid:tid" before the marker.
std::string host_of(std::string_view head) {
  while (!head.empty()) {
    std::size_t sp = head.rfind(' ');
    std::string_view tok = sp == std::string_view::npos ? head : head.substr(sp + 1);
    head = sp == std::string_view::npos ? std::string_view{} : head.substr(0, sp);
    std::size_t c2 = tok.rfind(':');
    if (c2 == std::string_view::npos || c2 == 0) continue;
    std::size_t c1 = tok.rfind(':', c2 - 1);
    if (c1 == std::string_view::npos || c1 == 0) continue;
    if (all_digits(tok.substr(c1 + 1, c2 - c1 - 1)) && all_digits(tok.substr(c2 + 1))) {
      std::string_view host = tok.substr(0, c1);
      if (std::size_t c = host.rfind(':'); c != std::string_view::npos) host = host.substr(c + 1);  // "0: gpu01"
      return escape_line(host.substr(0, host.find('.')), 64);
    }
  }
  return "";
}

std::string short_name(std::string_view h) { return std::string(h.substr(0, h.find('.'))); }

// What the node facts say the node could do instead, "" when nothing better.
std::string gdr_possible(const node_evidence& e) {
  if (e.peer_memory_client.value_or(false)) return "nvidia_peermem is registered as a peer-memory client";
  if (e.driver_flavour == nvidia_flavour::open && e.has_dmabuf_mr.value_or(false)) {
    return "the open NVIDIA kernel modules and an rdma-core with ibv_reg_dmabuf_mr make DMA-BUF possible";
  }
  return "";
}

}  // namespace

void nccl_path_scan::feed(std::string_view line) {
  std::size_t info = line.find("NCCL INFO ");
  if (info == std::string_view::npos) return;
  std::string_view rest = line.substr(info + 10);
  bool wanted = rest.find("NET/") != std::string_view::npos || rest.find("RDMA ") != std::string_view::npos ||
                rest.starts_with("DMA-BUF is");
  if (!wanted) return;
  if (kept >= k_max_lines || bytes + line.size() + 1 > k_max_bytes) {
    ++skipped;
    return;
  }
  if (hosts.size() < k_max_hosts) {
    std::string h = host_of(line.substr(0, info));
    if (!h.empty()) hosts.insert(std::move(h));
  }
  // The marker is found: the reader of NCCL's facts gets the text after it (a line that also carries a WARN
  // marker is the reader's to sort out, as in a captured output).
  if (line.find("NCCL WARN ") != std::string_view::npos) {
    reader.feed(line);
  } else {
    if (rest.ends_with('\r')) rest.remove_suffix(1);
    reader.feed_info(rest);
  }
  bytes += line.size() + 1;
  ++kept;
}

std::optional<path_note> judge_path(const nccl_path_scan& scan, const std::function<const node_evidence&()>& evidence,
                                    const evidence_origin& origin) {
  if (scan.kept == 0) return std::nullopt;
  nccl_log_facts f = scan.reader.facts();
  bool ib = std::any_of(f.transports.begin(), f.transports.end(), [](const std::string& t) { return t == "NET/IB"; });
  bool socket = std::any_of(f.transports.begin(), f.transports.end(),
                            [](const std::string& t) { return t == "NET/Socket"; });
  if (!(ib && !f.gdr.value_or(true)) && !(socket && !ib)) return std::nullopt;
  const node_evidence& e = evidence();
  path_note n;
  n.evidence_applies = origin.from_root ||
                       (!scan.hosts.empty() && !origin.hostname.empty() &&
                        std::all_of(scan.hosts.begin(), scan.hosts.end(),
                                    [&](const std::string& h) { return h == short_name(origin.hostname); }));
  const std::string where = scan.hosts.empty()
                                ? std::string("the node that wrote the log")
                                : fmt::format("{}", fmt::join(scan.hosts.begin(), scan.hosts.end(), ","));
  if (ib && !f.gdr.value_or(true)) {
    // NCCL's own reason, when it printed one: a distance beyond NCCL_NET_GDR_LEVEL is the topology.
    if (f.gdr_note.find("distance") != std::string::npos) return std::nullopt;
    std::string better = gdr_possible(e);
    if (n.evidence_applies && better.empty()) return std::nullopt;
    n.what = "gdr_off";
    n.text = fmt::format(
        "NCCL used InfiniBand without GPUDirect RDMA: no channel via .../GDRDMA{}, so GPU data was staged through "
        "pinned host memory (slower, and charged to the memlock limit)",
        f.gdr_note.empty() ? std::string() : fmt::format(" ({})", f.gdr_note));
    if (n.evidence_applies) {
      n.text += fmt::format("; yet on this node {}", better);
      n.fix =
          "look for NCCL_NET_GDR_LEVEL=LOC or NCCL_DMABUF_ENABLE=0 in the job's environment and "
          "/etc/nccl.conf, and run `mrcheck probe mr --gpu` on the node to see which GPUDirect path registers";
    } else {
      n.fix = fmt::format(
          "run `mrcheck probe mr --gpu` on {} (or `mrcheck explain --root` with its `mrcheck dump`) "
          "to see whether a GPUDirect path would register there",
          where);
    }
    return n;
  }
  if (socket && !ib) {
    // The container notes already say "NET/Socket and never NET/IB"; this adds what the node has.
    if (!n.evidence_applies || e.rdma_devices.value_or(0) <= 0) return std::nullopt;
    n.what = "sockets";
    n.text = fmt::format("NCCL used sockets although this node has {} RDMA device{} ({})", *e.rdma_devices,
                         *e.rdma_devices == 1 ? "" : "s", e.rdma_device_list);
    n.fix =
        "look for NCCL_IB_DISABLE=1, NCCL_NET=Socket or an NCCL_IB_HCA that matches no device in the job, and "
        "run `mrcheck probe mr` as the job user (a libibverbs or provider the job cannot load)";
    return n;
  }
  return std::nullopt;
}

}  // namespace mrcheck
