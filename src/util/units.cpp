#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mrcheck {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

result<std::uint64_t> parse_bytes(std::string_view text) {
  std::string_view t = trim_space(text);
  std::string l = lower(t);
  if (l == "unlimited" || l == "infinity") return k_unlimited;
  if (t.empty()) return status::error("empty size");
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec == std::errc::result_out_of_range)
    return status::error(fmt::format("size '{}' is too large", escape_line(t, 64)));
  if (ec != std::errc() || ptr == t.data()) {
    return status::error(fmt::format("'{}' is not a size (bytes, with K/M/G/T, or unlimited)", escape_line(t, 64)));
  }
  std::string suffix = lower(trim_space(std::string_view(ptr, static_cast<size_t>(t.data() + t.size() - ptr))));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    return status::error(fmt::format("unknown size suffix in '{}' (use K, M, G or T)", escape_line(t, 64)));
  }
  if (shift > 0 && n > (k_unlimited >> shift)) {
    return status::error(fmt::format("size '{}' is too large", escape_line(t, 64)));
  }
  std::uint64_t v = n << shift;
  if (v == k_unlimited) return status::error(fmt::format("size '{}' is too large", escape_line(t, 64)));
  return v;
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes == k_unlimited) return "unlimited";
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  int u = -1;
  std::uint64_t whole = bytes;
  while (whole >= 1024 && u < 5) {
    whole /= 1024;
    ++u;
  }
  std::uint64_t unit = std::uint64_t{1} << (10 * (u + 1));
  if (bytes % unit == 0) return fmt::format("{} {}", bytes / unit, units[u]);
  return fmt::format("{:.1f} {}", static_cast<double>(bytes) / static_cast<double>(unit), units[u]);
}

result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::string_view t = trim_space(text);
  if (t.empty()) return status::error("empty duration");
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc() || ptr == t.data()) {
    return status::error(fmt::format("'{}' is not a duration (e.g. 30s, 500ms, 2m)", escape_line(t, 64)));
  }
  std::string suffix = lower(trim_space(std::string_view(ptr, static_cast<size_t>(t.data() + t.size() - ptr))));
  std::uint64_t ms = 0;
  constexpr std::uint64_t k_max_ms = 3600 * 1000;
  if (n > k_max_ms) return status::error(fmt::format("duration '{}' is longer than 1 hour", escape_line(t, 64)));
  if (suffix.empty() || suffix == "s") {
    ms = n * 1000;
  } else if (suffix == "ms") {
    ms = n;
  } else if (suffix == "m" || suffix == "min") {
    ms = n * 60 * 1000;
  } else {
    return status::error(fmt::format("unknown duration unit in '{}' (use ms, s or m)", escape_line(t, 64)));
  }
  if (ms > k_max_ms) return status::error(fmt::format("duration '{}' is longer than 1 hour", escape_line(t, 64)));
  if (ms == 0) return status::error("a duration of 0 is not allowed");
  return std::chrono::milliseconds(ms);
}

std::string escape_line(std::string_view text, std::size_t max, std::string_view also) {
  // Runs on every line of every log mrcheck reads (and on every field it prints): no string or format per byte.
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max) + 8);
  for (unsigned char c : text) {
    bool plain = c >= 0x20 && c < 0x7f && c != '\\' && also.find(static_cast<char>(c)) == std::string_view::npos;
    std::size_t width = plain ? 1 : 4;
    if (out.size() + width > max) {
      // Leave room for the marker so the bound holds.
      while (!out.empty() && out.size() + 3 > max) out.pop_back();
      if (max >= 3) out += "...";
      return out;
    }
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 0xf];
    }
  }
  return out;
}

std::array<int, 3> nccl_version_parts(int code) {
  if (code <= 0) return {0, 0, 0};
  if (code < 10000) return {code / 1000, code / 100 % 10, code % 100};
  return {code / 10000, code / 100 % 100, code % 100};
}

std::string nccl_version_text(int code) {
  if (code <= 0) return "";
  auto [x, y, z] = nccl_version_parts(code);
  return fmt::format("{}.{}.{}", x, y, z);
}

std::array<int, 2> cuda_version_parts(int code) {
  if (code <= 0) return {0, 0};
  return {code / 1000, code % 1000 / 10};
}

std::string cuda_version_text(int code) {
  if (code <= 0) return "";
  auto [x, y] = cuda_version_parts(code);
  return fmt::format("{}.{}", x, y);
}

}  // namespace mrcheck
