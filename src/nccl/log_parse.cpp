// Transport and timing extraction from NCCL's own log, one line at a time (nccl_log_reader: a listener of the line
// reader, src/explain/read/nccl_log_read.cpp, through explain's path note; parse_nccl_log feeds it a whole
// captured output). Failure lines (Call to ibv_... failed) are the shared diagnosis' business; here we only collect
// the WARN texts and what NCCL says about the path it chose.
// Line formats: NCCL 2.28 src/transport.cc ("Channel %02d/%d : %d[%d] -> %d[%d] [%s] via %s"),
// src/init.cc ("Init timings - ..."), src/transport/net_ib.cc ("NET/IB : Using ..."), graph/topo.cc.
#include <mrcheck/nccl_probe.h>
#include <mrcheck/units.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace mrcheck {

namespace {

void add_distinct(std::vector<std::string>& v, std::string s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(std::move(s));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '.')) s.remove_suffix(1);
  return s;
}

std::optional<double> to_double(std::string_view s) {
  // std::from_chars for double is in libstdc++ 11+; strtod needs a terminated copy.
  std::string copy(s);
  char* end = nullptr;
  double v = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str()) return std::nullopt;
  return v;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

// "NET/IB/0/GDRDMA" -> "NET/IB"; "P2P/CUMEM/read" -> "P2P"; "SHM/direct/direct" -> "SHM".
std::string transport_of(std::string_view via) {
  std::size_t slash = via.find('/');
  if (via.starts_with("NET/") || via.starts_with("COLLNET/")) {
    std::size_t second = via.find('/', slash + 1);
    return std::string(via.substr(0, second));
  }
  return std::string(via.substr(0, slash));
}

constexpr std::size_t k_max_timing_parts = 32;

// "Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total 0.64 (kernels 0.30, alloc 0.01, ...)"
std::optional<nccl_init_timing> parse_timings(std::string_view rest) {
  nccl_init_timing t;
  t.line = escape_line(rest, 400);
  auto word_after = [&](std::string_view key) -> std::string_view {
    std::size_t p = rest.find(key);
    if (p == std::string_view::npos) return {};
    std::string_view tail = rest.substr(p + key.size());
    std::size_t end = tail.find_first_of(" (,)");
    return tail.substr(0, end);
  };
  auto total = to_double(word_after(" total "));
  if (!total) return std::nullopt;
  t.total_s = *total;
  t.rank = to_int(word_after(" rank ")).value_or(-1);
  t.nranks = to_int(word_after(" nranks ")).value_or(0);
  std::size_t open = rest.find('(', rest.find(" total "));
  std::size_t close = rest.find(')', open == std::string_view::npos ? 0 : open);
  if (open != std::string_view::npos && close != std::string_view::npos) {
    std::string_view inside = rest.substr(open + 1, close - open - 1);
    // The names come from a rank's output like everything else here: escaped and bounded (NCCL 2.28 prints
    // about ten parts with names of one word; a line of thousands of "x 1," must not become thousands of parts).
    while (!inside.empty() && t.parts.size() < k_max_timing_parts) {
      std::size_t comma = inside.find(',');
      std::string_view item = trim(inside.substr(0, comma));
      std::size_t sp = item.rfind(' ');
      if (sp != std::string_view::npos) {
        if (auto v = to_double(item.substr(sp + 1)))
          t.parts.emplace_back(escape_line(trim(item.substr(0, sp)), 64), *v);
      }
      if (comma == std::string_view::npos) break;
      inside.remove_prefix(comma + 1);
    }
  }
  return t;
}

// "NET/IB : Using [0]mlx5_0:1/IB [RO] [1]mlx5_1:1/IB [RO]; OOB ...": one entry per "[n]" device into `out`.
void add_ib_devices(std::string_view devs, std::vector<std::string>& out) {
  devs = devs.substr(0, devs.find("; OOB"));
  while (!devs.empty()) {
    std::size_t start = devs.find('[');
    if (start == std::string_view::npos) break;
    std::size_t close = devs.find(']', start);
    if (close == std::string_view::npos) break;
    // A "[RO]" tag belongs to the previous device; device entries start with a digit.
    if (close > start + 1 && std::isdigit(static_cast<unsigned char>(devs[start + 1]))) {
      std::size_t next = devs.find('[', close);
      while (next != std::string_view::npos && next + 1 < devs.size() &&
             !std::isdigit(static_cast<unsigned char>(devs[next + 1]))) {
        next = devs.find('[', next + 1);
      }
      std::string_view entry = trim(
          devs.substr(close + 1, next == std::string_view::npos ? std::string_view::npos : next - close - 1));
      add_distinct(out, escape_line(entry, 128));
      devs = next == std::string_view::npos ? std::string_view{} : devs.substr(next);
    } else {
      devs = devs.substr(close + 1);
    }
  }
}

}  // namespace

void nccl_log_reader::feed(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (std::size_t w = line.find("NCCL WARN "); w != std::string_view::npos) {
    feed_warn(line.substr(w + 10));
  } else if (std::size_t i = line.find("NCCL INFO "); i != std::string_view::npos) {
    feed_info(line.substr(i + 10));
  }
}

void nccl_log_reader::feed_warn(std::string_view message) { f_.warnings.push_back(escape_line(trim(message), 400)); }

void nccl_log_reader::feed_info(std::string_view rest) {
  if (rest.starts_with("NCCL version ")) {
    std::string_view v = rest.substr(13);
    f_.version = escape_line(v.substr(0, v.find(' ')), 64);
  } else if (rest.starts_with("Using network ")) {
    f_.network = escape_line(trim(rest.substr(14)), 64);
  } else if (rest.starts_with("Init timings")) {
    if (auto t = parse_timings(rest)) f_.init_timings.push_back(std::move(*t));
  } else if (rest.starts_with("NET/IB : No device found")) {
    f_.ib_no_device = true;
  } else if (rest.starts_with("NET/IB : Using ")) {
    add_ib_devices(rest.substr(15), f_.ib_devices);
  } else if (rest.starts_with("NET/Socket : Using ")) {
    f_.socket_devices = escape_line(trim(rest.substr(19)), 200);
  } else if (rest.find("GPU Direct RDMA Enabled") != std::string_view::npos) {
    hca_gdr_ = true;
  } else if (std::size_t d = rest.find("GPU Direct RDMA Disabled"); d != std::string_view::npos) {
    if (!hca_gdr_) hca_gdr_ = false;
    // "GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 8 > 5)" says why a NET channel goes through host
    // memory; the per-HCA "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'" says less.
    if (f_.gdr_note.empty() || rest.starts_with("GPU Direct")) f_.gdr_note = escape_line(trim(rest.substr(d)), 200);
  } else if (rest.starts_with("DMA-BUF is available")) {
    f_.dmabuf = true;
  } else if (std::size_t v = rest.find("] via "); v != std::string_view::npos && rest.starts_with("Channel ")) {
    std::string_view via = rest.substr(v + 6);
    via = via.substr(0, via.find(' '));
    if (!via.empty()) {
      add_distinct(f_.channels, escape_line(via, 64));
      add_distinct(f_.transports, escape_line(transport_of(via), 64));
      if (via.find("/GDRDMA") != std::string_view::npos) channel_gdr_ = true;
    }
  } else if (std::size_t n = rest.find(" nNodes "); n != std::string_view::npos) {
    if (auto nn = to_int(rest.substr(n + 8))) f_.nnodes = *nn;
  }
}

nccl_log_facts nccl_log_reader::facts() const {
  nccl_log_facts f = f_;
  // "Enabled for HCA" only says the HCA could; the channels say whether NCCL used it. NET channels without
  // "/GDRDMA" move through host bounce buffers (the memlock-charged path).
  if (std::any_of(f.transports.begin(), f.transports.end(),
                  [](const std::string& t) { return t.starts_with("NET/"); })) {
    f.gdr = channel_gdr_;
  } else {
    f.gdr = hca_gdr_;
  }
  if (f.gdr.value_or(false)) f.gdr_note.clear();
  return f;
}

nccl_log_facts parse_nccl_log(std::string_view text) {
  nccl_log_reader r;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    r.feed(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return r.facts();
}

void merge_nccl_log_facts(nccl_log_facts& into, const nccl_log_facts& more) {
  if (into.version.empty()) into.version = more.version;
  if (into.network.empty()) into.network = more.network;
  if (into.socket_devices.empty()) into.socket_devices = more.socket_devices;
  if (into.gdr_note.empty()) into.gdr_note = more.gdr_note;
  for (const auto& t : more.transports) add_distinct(into.transports, t);
  for (const auto& c : more.channels) add_distinct(into.channels, c);
  for (const auto& d : more.ib_devices) add_distinct(into.ib_devices, d);
  into.ib_no_device = into.ib_no_device || more.ib_no_device;
  if (more.gdr) into.gdr = into.gdr.value_or(false) || *more.gdr;
  if (more.dmabuf) into.dmabuf = into.dmabuf.value_or(false) || *more.dmabuf;
  if (more.nnodes && !into.nnodes) into.nnodes = more.nnodes;
  into.init_timings.insert(into.init_timings.end(), more.init_timings.begin(), more.init_timings.end());
  into.warnings.insert(into.warnings.end(), more.warnings.begin(), more.warnings.end());
}

}  // namespace mrcheck
