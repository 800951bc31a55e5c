// Mode selection, the node-pair port sequence and the unique-id encoding: small pure pieces of the NCCL pair
// probe, kept apart so the unit tests reach them without any process or library.
#include <mrcheck/nccl_probe.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mrcheck {

std::string_view to_string(nccl_mode m) {
  switch (m) {
    case nccl_mode::local_pair: return "local-pair";
    case nccl_mode::gpu_pair: return "gpu-pair";
    case nccl_mode::node_pair: return "node-pair";
  }
  return "local-pair";
}

std::optional<nccl_mode> parse_nccl_mode(std::string_view s) {
  for (nccl_mode m : {nccl_mode::local_pair, nccl_mode::gpu_pair, nccl_mode::node_pair}) {
    if (s == to_string(m)) return m;
  }
  return std::nullopt;
}

nccl_mode_choice choose_nccl_mode(int visible_gpus, int step_nodes) {
  if (visible_gpus <= 0) {
    return {std::nullopt, "no GPU visible to this task (CUDA_VISIBLE_DEVICES, /proc/driver/nvidia/gpus)"};
  }
  if (step_nodes >= 2) {
    return {nccl_mode::node_pair,
            "the step spans " + std::to_string(step_nodes) + " nodes: one rank on each of the first two"};
  }
  if (visible_gpus >= 2) {
    return {nccl_mode::gpu_pair,
            std::to_string(visible_gpus) + " GPUs visible: ranks on GPUs 0 and 1 with P2P and SHM disabled"};
  }
  return {nccl_mode::local_pair, "1 GPU visible: both ranks on it, each with its own NCCL_HOSTID"};
}

namespace {

// CUDA parses CUDA_VISIBLE_DEVICES left to right and stops at the first entry it cannot use; an entry is an
// ordinal, a "GPU-<uuid>" or a "MIG-<uuid>". We cannot tell valid UUIDs apart without CUDA, so any such
// entry counts; a negative or malformed ordinal ends the list.
int count_cuda_visible(std::string_view v) {
  int n = 0;
  std::size_t pos = 0;
  while (pos <= v.size()) {
    std::size_t comma = v.find(',', pos);
    std::string_view item = v.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (item.empty()) break;
    if (item.starts_with("GPU-") || item.starts_with("MIG-")) {
      ++n;
    } else {
      int ordinal = -1;
      auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), ordinal);
      if (ec != std::errc() || p != item.data() + item.size() || ordinal < 0) break;
      ++n;
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return n;
}

}  // namespace

int count_visible_gpus(const sysroot& root, const char* cuda_visible_devices) {
  int present = -1;
  if (auto gpus = root.list("/proc/driver/nvidia/gpus"); gpus.is_ok()) {
    present = static_cast<int>(gpus->size());
  } else if (auto dev = root.list("/dev"); dev.is_ok()) {
    present = 0;
    for (const auto& name : *dev) {
      if (name.size() > 6 && name.starts_with("nvidia") &&
          std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
        ++present;
      }
    }
  }
  if (cuda_visible_devices != nullptr) {
    int listed = count_cuda_visible(cuda_visible_devices);
    // A list longer than the GPUs present is cut by CUDA; when we could not count them, trust the list.
    return present >= 0 ? std::min(listed, present) : listed;
  }
  return std::max(present, 0);
}

std::uint16_t nccl_pair_port(std::uint64_t job_id, std::uint64_t step_id, int attempt) {
  // FNV-1a over both ids: stable across nodes, builds and endianness (bytes taken explicitly).
  std::uint64_t h = 1469598103934665603ULL;
  for (std::uint64_t v : {job_id, step_id}) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  }
  // A stride coprime with the span walks distinct ports for every attempt below the span.
  constexpr std::uint64_t k_stride = 7919;  // prime, does not divide 9000
  std::uint64_t slot = (h + static_cast<std::uint64_t>(attempt < 0 ? 0 : attempt) * k_stride) % k_nccl_port_span;
  return static_cast<std::uint16_t>(k_nccl_port_base + slot);
}

std::string first_host_of_nodelist(std::string_view list) {
  // Slurm's hostlist syntax: prefix[ranges]suffix, entries separated by commas outside brackets.
  std::size_t end = 0;
  int depth = 0;
  for (; end < list.size(); ++end) {
    if (list[end] == '[') ++depth;
    if (list[end] == ']') --depth;
    if (list[end] == ',' && depth == 0) break;
  }
  std::string_view first = list.substr(0, end);
  std::size_t open = first.find('[');
  if (open == std::string_view::npos) {
    if (first.find(']') != std::string_view::npos) return {};
    return std::string(first);
  }
  std::size_t close = first.find(']', open);
  if (close == std::string_view::npos || open == 0) return {};
  std::string_view ranges = first.substr(open + 1, close - open - 1);
  std::string_view lo = ranges.substr(0, ranges.find_first_of(",-"));
  if (lo.empty() || !std::all_of(lo.begin(), lo.end(), [](unsigned char c) { return std::isdigit(c); })) return {};
  // The number keeps its zero padding ("003"): Slurm pads every number of a range to the width written.
  return std::string(first.substr(0, open)) + std::string(lo) + std::string(first.substr(close + 1));
}

std::string hex_encode(const unsigned char* data, std::size_t n) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    s.push_back(k_digits[data[i] >> 4]);
    s.push_back(k_digits[data[i] & 0xf]);
  }
  return s;
}

bool hex_decode(std::string_view hex, unsigned char* out, std::size_t n) {
  if (hex.size() != n * 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < n; ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>((hi << 4) | lo);
  }
  return true;
}

}  // namespace mrcheck
