// Releases whose registration defaults changed: when the stack history sees NCCL or the NVIDIA driver move across
// one, the change line says which default and what it now does ("NCCL 2.26.5 -> 2.27.7: NCCL_NET_GDR_C2C now 1:
// GPU buffers on Grace are registered through the NIC"). The rows and their sources: docs/facts/nccl-defaults.md.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// A release's version as numbers: "2.27.7" -> {2, 27, 7}, "570.86.15 (open)" -> {570, 86, 15}. A missing patch
// is 0 ("2.27" -> {2, 27, 0}); nullopt unless the text starts with two dot-separated numbers.
using release_version = std::array<long, 3>;
std::optional<release_version> parse_release_version(std::string_view text);

struct default_change_row {
  std::string_view key;      // the fingerprint key whose value is the version: "nccl", "nvidia_driver"
  std::string_view product;  // how the line names it: "NCCL", "NVIDIA driver"
  release_version since;     // the first release with the new default
  std::string_view setting;  // "NCCL_NET_GDR_C2C now 1"
  std::string_view effect;   // "GPU buffers on Grace are registered through the NIC"
  std::string_view before;   // the default before `since`: "NCCL_NET_GDR_C2C 0"
  std::string_view source;   // "NVIDIA/nccl v2.27.3-1 notes; src/graph/paths.cc" (docs/facts/nccl-defaults.md)
};

// The table, in release order per key.
std::span<const default_change_row> default_change_rows();

struct crossed_default {
  const default_change_row* row = nullptr;
  bool reverted = false;  // a downgrade back below row->since
};

// The rows a move of `key` from `before` to `after` crosses: an upgrade crosses a row when before < since <= after,
// a downgrade when after < since <= before (reverted). Unknown or unparsable versions (either side): none.
std::vector<crossed_default> defaults_crossed(std::string_view key, std::string_view before, std::string_view after);

// "NCCL 2.26.5 -> 2.27.7: NCCL_NET_GDR_C2C now 1: GPU buffers on Grace are registered through the NIC"
// "NCCL 2.27.7 -> 2.26.5: reverted to NCCL_NET_GDR_C2C 0 (the default before 2.27.3)"
std::string default_change_words(const crossed_default& d, std::string_view before, std::string_view after);

std::string release_version_string(const release_version& v);

}  // namespace mrcheck
