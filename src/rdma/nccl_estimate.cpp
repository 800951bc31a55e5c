// What NCCL would register, and on which HCAs: NCCL's own parameter reading, buffer sizing and NCCL_IB_HCA
// matching, redone from its source (NVIDIA/nccl v2.28.9-1; file and line cited where each rule is used).
#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

namespace mrcheck {

namespace {

// NCCL's setEnvFile ([N] src/misc/param.cc): lines NAME=VALUE, '#' in column 0 is a comment, no trimming,
// setenv(name, value, 0) - an existing value wins.
void read_nccl_conf(const std::string& path, nccl_env& env) {
  std::ifstream in(path);
  if (!in) return;
  env.files_read.push_back(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = line.substr(0, std::min<std::size_t>(eq, 1023));
    std::string value = line.substr(eq + 1, 1023);
    env.vars.emplace(std::move(name), std::move(value));  // emplace keeps an existing value
  }
}

// DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD(8) * NCCL_LL_MAX_NTHREADS(512) * NCCL_STEPS(8) *
//   sizeof(union ncclLLFifoLine)(16); DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD(120) *
//   NCCL_LL128_MAX_NTHREADS(640) * NCCL_STEPS(8) * sizeof(uint64_t); DEFAULT_BUFFSIZE = 1 << 22
//   ([N] src/init.cc l.697-699, src/include/device.h l.24, l.92-110).
constexpr std::int64_t k_default_ll = 8 * 512 * 8 * 16;
constexpr std::int64_t k_default_ll128 = 120 * 640 * 8 * 8;
constexpr std::int64_t k_default_simple = 1 << 22;
constexpr int k_maxchannels = 64;                  // [N] src/include/device.h l.86
constexpr std::int64_t k_p2p_net_chunk = 1 << 17;  // [N] src/init.cc l.704
constexpr int k_shared_steps = 16;                 // [N] src/transport/net.cc NCCL_SHARED_STEPS

std::uint64_t round_pages(std::uint64_t n) {
  constexpr std::uint64_t page = 4096;
  return (n + page - 1) / page * page;
}

}  // namespace

std::optional<std::string> nccl_env::get(std::string_view name) const {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

nccl_env load_nccl_env(std::span<const std::string> environ, std::string_view home, const std::string& etc_file) {
  nccl_env env;
  for (const auto& kv : environ) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  auto conf = env.get("NCCL_CONF_FILE");
  if (conf && !conf->empty()) {
    read_nccl_conf(*conf, env);
  } else if (!home.empty()) {
    read_nccl_conf(std::string(home) + "/.nccl.conf", env);
  }
  read_nccl_conf(etc_file, env);
  return env;
}

std::int64_t nccl_param(const nccl_env& env, std::string_view name, std::int64_t def, std::vector<std::string>* notes) {
  auto v = env.get(name);
  if (!v || v->empty()) return def;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(v->c_str(), &end, 0);
  if (errno != 0) {
    if (notes)
      notes->push_back(
          fmt::format("{}={} is out of range; NCCL ignores it and uses {}", name, escape_line(*v, 64), def));
    return def;
  }
  if (notes && end != nullptr && *end != '\0') {
    notes->push_back(
        fmt::format("{}={} is read by NCCL as {} (strtoll stops at '{}'; NCCL takes plain numbers, "
                    "no K/M suffix)",
                    name, escape_line(*v, 64), value, escape_line(std::string_view(end, 1))));
  }
  return value;
}

namespace {

// One input of the estimate, as the report lists it.
void note_input(const nccl_env& env, nccl_estimate& e, std::string_view name, std::int64_t value) {
  bool set = env.get(name).has_value() && !env.get(name)->empty();
  e.inputs.push_back(fmt::format("{}={}{}", name, value, set ? "" : " (default)"));
}

// Buffer sizes: computeBuffSizes ([N] src/init.cc l.708-714): env value when set (NCCL uses -2 for unset).
// Returns the SIMPLE size as read, before the clamp at 0.
std::int64_t estimate_buffers(const nccl_env& env, nccl_estimate& e) {
  auto& notes = e.notes;
  std::int64_t ll = nccl_param(env, "NCCL_LL_BUFFSIZE", k_default_ll, &notes);
  std::int64_t ll128 = nccl_param(env, "NCCL_LL128_BUFFSIZE", k_default_ll128, &notes);
  std::int64_t simple = nccl_param(env, "NCCL_BUFFSIZE", k_default_simple, &notes);
  if (ll == -2) ll = k_default_ll;
  if (ll128 == -2) ll128 = k_default_ll128;
  if (simple == -2) simple = k_default_simple;
  // Sizes are the user's numbers: past 1 TiB a buffer can never be allocated (NCCL fails before registering),
  // and the sums of estimate_totals (x 2 x channels) would wrap 64 bits. Estimate with 1 TiB and say so.
  constexpr std::int64_t k_max_buffer = std::int64_t{1} << 40;
  for (auto [name, v] : {std::pair<const char*, std::int64_t*>{"NCCL_LL_BUFFSIZE", &ll},
                         {"NCCL_LL128_BUFFSIZE", &ll128},
                         {"NCCL_BUFFSIZE", &simple}}) {
    if (*v > k_max_buffer) {
      notes.push_back(fmt::format("{}={} is more than any buffer NCCL can allocate; estimated with 1 TiB", name, *v));
      *v = k_max_buffer;
    }
  }
  e.buff_ll = static_cast<std::uint64_t>(std::max<std::int64_t>(ll, 0));
  e.buff_ll128 = static_cast<std::uint64_t>(std::max<std::int64_t>(ll128, 0));
  e.buff_simple = static_cast<std::uint64_t>(std::max<std::int64_t>(simple, 0));
  note_input(env, e, "NCCL_BUFFSIZE", simple);
  note_input(env, e, "NCCL_LL_BUFFSIZE", ll);
  note_input(env, e, "NCCL_LL128_BUFFSIZE", ll128);
  return simple;
}

// Channels: ncclMinNchannels/ncclMaxNchannels ([N] src/graph/connect.cc l.328-350) with the legacy
// NCCL_MIN_NRINGS/NCCL_MAX_NRINGS names; the search's count is doubled (l.452) then clamped (l.487-491).
void estimate_channels(const nccl_env& env, nccl_estimate& e) {
  auto& notes = e.notes;
  std::int64_t min_ch = nccl_param(env, "NCCL_MIN_NRINGS", -2, &notes);
  if (auto v = nccl_param(env, "NCCL_MIN_NCHANNELS", -2, &notes); v != -2) min_ch = v;
  std::int64_t max_ch = nccl_param(env, "NCCL_MAX_NRINGS", -2, &notes);
  if (auto v = nccl_param(env, "NCCL_MAX_NCHANNELS", -2, &notes); v != -2) max_ch = v;
  int min_channels = min_ch == -2 ? 0 : static_cast<int>(std::clamp<std::int64_t>(min_ch, 0, k_maxchannels));
  int max_channels = max_ch == -2 ? k_maxchannels
                                  : static_cast<int>(std::clamp<std::int64_t>(max_ch, 1, k_maxchannels));
  // No HCA found (no device, no verbs library): sized as for one, and said so.
  const int nics = std::max(1, e.hcas);
  int search = std::min(k_maxchannels, 2 * nics * 2);
  int channels = std::min(search, max_channels);
  channels = std::max(channels, min_channels);
  e.channels = std::max(1, channels);
  e.channels_from =
      e.hcas == 0
          ? fmt::format("estimate: no HCA found, so as for 1: NCCL's search finds ~2 per NIC, doubled = {}", search)
          : fmt::format("estimate: NCCL's search finds ~2 per NIC x {} HCA{}, doubled = {}", e.hcas,
                        e.hcas == 1 ? "" : "s", search);
  if (min_ch != -2 || max_ch != -2) {
    e.channels_from += fmt::format("; clamped to NCCL_MIN_NCHANNELS={} .. NCCL_MAX_NCHANNELS={}", min_channels,
                                   max_channels);
  }
  e.inputs.push_back(fmt::format("channels={} ({})", e.channels, e.channels_from));
}

// Send/recv (p2p) shared buffers: p2pnChannels * NCCL_SHARED_STEPS * p2pChunkSize per direction
// ([N] src/transport/net.cc sharedNetBuffersInit, src/graph/paths.cc ncclTopoComputeP2pChannels).
void estimate_p2p(const nccl_env& env, nccl_estimate& e, std::int64_t simple) {
  auto& notes = e.notes;
  std::int64_t max_p2p = nccl_param(env, "NCCL_MAX_P2P_NCHANNELS", k_maxchannels, &notes);
  e.p2p_channels = static_cast<int>(
      std::clamp<std::int64_t>(std::min<std::int64_t>(e.channels, max_p2p), 1, k_maxchannels));
  e.p2p_chunk = nccl_param(env, "NCCL_P2P_NET_CHUNKSIZE", k_p2p_net_chunk, &notes);
  // init.cc l.721: chunk * NCCL_STEPS <= SIMPLE buffer. Compared by division: the chunk is the user's number and
  // chunk * 8 overflows for |chunk| > 2^60 (same result as NCCL's product wherever that does not overflow).
  if (e.p2p_chunk > simple / 8) e.p2p_chunk = simple / 8;
  std::int64_t per_peer = nccl_param(env, "NCCL_NCHANNELS_PER_NET_PEER", 0, &notes);
  e.nchannels_per_net_peer = per_peer > 0 ? static_cast<int>(std::min<std::int64_t>(per_peer, k_maxchannels)) : 0;
  e.p2p_bytes = 2ull * static_cast<std::uint64_t>(e.p2p_channels) * k_shared_steps *
                static_cast<std::uint64_t>(std::max<std::int64_t>(e.p2p_chunk, 0));
  if (e.nchannels_per_net_peer > 0) {
    e.inputs.push_back(
        fmt::format("NCCL_NCHANNELS_PER_NET_PEER={} (more connections per send/recv peer; they share "
                    "the same p2p buffers, so no more bytes)",
                    e.nchannels_per_net_peer));
  }
}

// Paths that change what is registered.
void read_paths(const nccl_env& env, nccl_estimate& e) {
  auto& notes = e.notes;
  auto gdr = env.get("NCCL_NET_GDR_LEVEL");
  if (!gdr) gdr = env.get("NCCL_IB_GDR_LEVEL");  // the pre-2.12 name
  if (gdr && (*gdr == "LOC" || *gdr == "0")) e.gdr_off = true;
  if (gdr) e.gdr_level = escape_line(*gdr, 16);
  if (nccl_param(env, "NCCL_IB_DISABLE", 0, &notes) == 1) {
    e.ib_disabled = true;
    e.ib_disabled_why = "NCCL_IB_DISABLE=1";
  } else if (auto net = env.get("NCCL_NET"); net && !net->empty() && *net != "IB") {
    e.ib_disabled = true;
    e.ib_disabled_why = fmt::format("NCCL_NET={}", escape_line(*net, 32));
  }
  e.dmabuf_enabled = nccl_param(env, "NCCL_DMABUF_ENABLE", 1, &notes) != 0;
  // [N] src/misc/cudawrap.cc: -2 = on when the driver is CUDA 12.0+ and the device has VMM (ncclCuMemEnable).
  e.cumem = static_cast<int>(nccl_param(env, "NCCL_CUMEM_ENABLE", -2, &notes));
  // [N] src/transport/net_ib.cc l.131, l.568-576: RO mode 1 or 2 (default 2) + the IBVERBS_1.8 symbol.
  e.relaxed_ordering = nccl_param(env, "NCCL_IB_PCI_RELAXED_ORDERING", 2, &notes) != 0;
}

// The total: every connection registers its LL, LL128 and SIMPLE buffers.
void estimate_totals(nccl_estimate& e) {
  e.net_peers = 1;
  e.connections = e.channels * e.net_peers * 2;
  e.per_connection = round_pages(e.buff_ll) + round_pages(e.buff_ll128) + round_pages(e.buff_simple);
  for (int c = 0; c < e.connections; ++c) {
    for (std::uint64_t b : {e.buff_ll, e.buff_ll128, e.buff_simple}) {
      if (b > 0) e.buffers.push_back(round_pages(b));
    }
  }
  e.host_bytes = static_cast<std::uint64_t>(e.connections) * e.per_connection;
  // With GDR the send side keeps LL in host memory, everything else is GPU memory (net.cc l.881, l.1048).
  e.dmabuf_host_bytes = static_cast<std::uint64_t>(e.channels * e.net_peers) * round_pages(e.buff_ll);
  e.gpu_bytes = e.host_bytes - e.dmabuf_host_bytes;
  e.formula = fmt::format("{} channel{} x {} peer x 2 (send+recv) x ({} LL + {} LL128 + {} SIMPLE) = {}", e.channels,
                          e.channels == 1 ? "" : "s", e.net_peers, format_bytes(e.buff_ll), format_bytes(e.buff_ll128),
                          format_bytes(e.buff_simple), format_bytes(e.host_bytes));
}

}  // namespace

nccl_estimate estimate_nccl_registration(const nccl_env& env, int hcas) {
  nccl_estimate e;
  e.hcas = std::max(0, hcas);
  // The SIMPLE size as NCCL reads it (it bounds the p2p chunk, below).
  std::int64_t simple = estimate_buffers(env, e);
  estimate_channels(env, e);
  estimate_p2p(env, e, simple);
  read_paths(env, e);
  estimate_totals(e);
  return e;
}

// ------------------------------------------------------------------------------------------------------------

nccl_hca_filter parse_nccl_ib_hca(std::optional<std::string_view> value) {
  nccl_hca_filter f;
  if (!value) return f;
  f.set = true;
  f.raw = std::string(value->substr(0, 256));
  std::string_view s = *value;
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s.remove_prefix(1);
  }
  if (!s.empty() && s[0] == '=') {
    f.exact = true;
    s.remove_prefix(1);
  }
  // parseStringList: characters up to ':' or ',' form the name; ":N" sets the port (atoi) and the rest of the
  // item up to ',' is skipped; empty names are dropped; at most MAX_IB_DEVS = 32 items.
  std::size_t i = 0;
  while (i <= s.size() && f.items.size() < 32) {
    std::size_t end = s.find(',', i);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(i, end - i);
    std::size_t colon = item.find(':');
    std::string_view name = item.substr(0, colon);
    if (!name.empty()) {
      nccl_hca_filter::item it;
      it.prefix = std::string(name.substr(0, 15));
      if (colon != std::string_view::npos) it.port = std::atoi(std::string(item.substr(colon + 1)).c_str());
      f.items.push_back(std::move(it));
    }
    i = end + 1;
  }
  return f;
}

bool nccl_hca_filter::matches(std::string_view device, int port) const {
  bool in_list = items.empty();
  for (const auto& it : items) {
    bool name_ok = exact ? device == it.prefix : device.substr(0, it.prefix.size()) == it.prefix;
    bool port_ok = it.port == -1 || port == -1 || it.port == port;
    if (name_ok && port_ok) {
      in_list = true;
      break;
    }
  }
  return in_list != exclude;
}

namespace {

// For each GPU, the HCAs (indexes into hcas) nearest to it in the PCI tree, ties all kept; keyed by HCA, with the
// GPUs it is nearest to. HCAs of unknown place are never nearest.
std::map<std::size_t, std::vector<std::string>> nearest_hcas(const std::vector<const hca_candidate*>& hcas,
                                                             const std::vector<std::string>& gpu_bdfs,
                                                             const locality_fn& locality) {
  std::map<std::size_t, std::vector<std::string>> for_gpu;
  for (const auto& g : gpu_bdfs) {
    int best = -1;
    std::vector<std::size_t> best_idx;
    for (std::size_t i = 0; i < hcas.size(); ++i) {
      if (hcas[i]->pci_bdf.empty()) continue;
      int d = locality(hcas[i]->pci_bdf, g);
      if (d < 0) continue;
      if (d > best) {
        best = d;
        best_idx = {i};
      } else if (d == best) {
        best_idx.push_back(i);
      }
    }
    for (auto i : best_idx) for_gpu[i].push_back(g);
  }
  return for_gpu;
}

}  // namespace

hca_selection select_hcas(const std::vector<hca_candidate>& hcas, const nccl_hca_filter& filter,
                          std::string_view device, const std::vector<std::string>& gpu_bdfs,
                          const locality_fn& locality) {
  hca_selection sel;
  // Usable ports per HCA, by NCCL's rules.
  std::vector<hca_choice> usable;
  std::vector<const hca_candidate*> usable_src;
  for (const auto& h : hcas) {
    if (!device.empty() && h.name != device) continue;
    hca_choice c;
    c.name = h.name;
    std::vector<std::string> why_not;
    for (const auto& p : h.ports) {
      if (!p.usable_by_nccl()) {
        why_not.push_back(
            fmt::format("port {} {}/{}", p.number, port_state_name(p.state), link_layer_name(p.link_layer)));
        continue;
      }
      if (device.empty() && !filter.matches(h.name, p.number)) {
        why_not.push_back(fmt::format("port {} excluded by NCCL_IB_HCA={}", p.number, escape_line(filter.raw, 64)));
        continue;
      }
      c.ports.push_back(p.number);
    }
    if (c.ports.empty()) {
      sel.skipped.push_back(
          fmt::format("{}: no port NCCL would use ({})", h.name,
                      why_not.empty() ? std::string("no ports") : fmt::format("{}", fmt::join(why_not, ", "))));
      continue;
    }
    usable.push_back(std::move(c));
    usable_src.push_back(&h);
  }

  if (!device.empty()) {
    sel.rule = fmt::format("--device {} (NCCL_IB_HCA and GPU locality not applied)", device);
    for (auto& c : usable) c.why = "--device";
    sel.chosen = std::move(usable);
    return sel;
  }
  if (filter.set) {
    sel.rule = fmt::format("NCCL_IB_HCA={}: every matching HCA with an ACTIVE port", escape_line(filter.raw, 64));
    for (auto& c : usable) c.why = fmt::format("NCCL_IB_HCA={}", escape_line(filter.raw, 64));
    sel.chosen = std::move(usable);
    return sel;
  }
  if (!gpu_bdfs.empty() && locality && usable.size() > 1) {
    auto for_gpu = nearest_hcas(usable_src, gpu_bdfs, locality);
    if (!for_gpu.empty()) {
      sel.rule = fmt::format("the HCAs nearest to the task's GPU{} ({}) in the PCI tree",
                             gpu_bdfs.size() == 1 ? "" : "s", fmt::join(gpu_bdfs, ", "));
      for (std::size_t i = 0; i < usable.size(); ++i) {
        if (for_gpu.count(i) == 0) {
          sel.skipped.push_back(fmt::format("{}: farther from the GPUs than the chosen HCAs", usable[i].name));
          continue;
        }
        usable[i].why = fmt::format("nearest to GPU {}", fmt::join(for_gpu[i], ", "));
        sel.chosen.push_back(std::move(usable[i]));
      }
      return sel;
    }
  }
  sel.rule = gpu_bdfs.empty() ? "no GPU visible: every HCA with an ACTIVE InfiniBand/Ethernet port"
                              : "GPU/HCA locality unknown: every HCA with an ACTIVE InfiniBand/Ethernet port";
  for (auto& c : usable) c.why = "active";
  sel.chosen = std::move(usable);
  return sel;
}

}  // namespace mrcheck
