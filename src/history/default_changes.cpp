// Releases whose registration defaults changed (default_changes.h). Every row is checked against the release's
// notes and the parameter's default in its source; docs/facts/nccl-defaults.md says how.
#include <mrcheck/default_changes.h>

#include <fmt/format.h>

#include <charconv>

namespace mrcheck {

namespace {

// clang-format off
constexpr default_change_row k_rows[] = {
    {"nccl", "NCCL", {2, 19, 1}, "NCCL_CUMEM_ENABLE now auto",
     "NCCL allocates its GPU buffers with cuMem where the driver can, and the NIC registers those",
     "NCCL_CUMEM_ENABLE 0", "NVIDIA/nccl src/misc/cudawrap.cc at v2.18.6-1 and v2.19.1-1"},
    {"nccl", "NCCL", {2, 24, 3}, "NCCL_CUMEM_HOST_ENABLE now auto",
     "host buffers come from cuMem with a CUDA driver of 12.6 or later",
     "NCCL_CUMEM_HOST_ENABLE 0", "NVIDIA/nccl v2.24.3-1 notes; src/misc/cudawrap.cc"},
    {"nccl", "NCCL", {2, 27, 3}, "NCCL_NET_GDR_C2C now 1",
     "GPU buffers on Grace are registered through the NIC",
     "NCCL_NET_GDR_C2C 0", "NVIDIA/nccl v2.27.3-1 notes; src/graph/paths.cc; docs/userguide env.rst"},
    {"nccl", "NCCL", {2, 27, 3}, "MNNVL failure now fatal",
     "a fabric handle IMEX cannot allocate or export fails the job (NCCL_MNNVL_ENABLE=0 to run without MNNVL)",
     "a failed MNNVL check falls back to the network", "NVIDIA/nccl v2.27.3-1 notes; src/mnnvl.cc"},
    {"nccl", "NCCL", {2, 28, 3}, "NCCL_PXN_C2C now 1",
     "on Grace a GPU's data may leave through a peer GPU's NIC, which registers its buffers",
     "NCCL_PXN_C2C 0", "NVIDIA/nccl v2.28.3-1 notes; src/graph/paths.cc"},
    {"nvidia_driver", "NVIDIA driver", {560, 0, 0}, "installers now default to the open kernel modules",
     "only they register GPU memory through DMA-BUF",
     "installers defaulting to the proprietary modules",
     "NVIDIA Technical Blog, NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules (2024-07)"},
};
// clang-format on

// A run of digits at the start of `s`, consumed; nullopt when none or too long.
std::optional<long> take_number(std::string_view& s) {
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() || v < 0) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return v;
}

}  // namespace

std::optional<release_version> parse_release_version(std::string_view text) {
  release_version v{0, 0, 0};
  std::string_view s = text;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) {
      if (s.empty() || s.front() != '.') return i >= 2 ? std::optional(v) : std::nullopt;
      s.remove_prefix(1);
    }
    auto n = take_number(s);
    if (!n) return std::nullopt;
    v[i] = *n;
  }
  return v;
}

std::string release_version_string(const release_version& v) { return fmt::format("{}.{}.{}", v[0], v[1], v[2]); }

std::span<const default_change_row> default_change_rows() { return k_rows; }

std::vector<crossed_default> defaults_crossed(std::string_view key, std::string_view before, std::string_view after) {
  std::vector<crossed_default> out;
  auto b = parse_release_version(before);
  auto a = parse_release_version(after);
  if (!b || !a || *a == *b) return out;
  const bool up = *b < *a;
  for (const auto& row : k_rows) {
    if (row.key != key) continue;
    if (up && *b < row.since && row.since <= *a) out.push_back({&row, false});
    if (!up && *a < row.since && row.since <= *b) out.push_back({&row, true});
  }
  return out;
}

std::string default_change_words(const crossed_default& d, std::string_view before, std::string_view after) {
  const auto& r = *d.row;
  if (d.reverted) {
    return fmt::format("{} {} -> {}: reverted, {} (before {})", r.product, before, after, r.before,
                       release_version_string(r.since));
  }
  return fmt::format("{} {} -> {}: {}: {}", r.product, before, after, r.setting, r.effect);
}

}  // namespace mrcheck
