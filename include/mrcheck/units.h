// Byte sizes and durations as admins write them ("8M", "64K", "unlimited", "30s") and as reports print them.
#pragma once

#include <mrcheck/status.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace mrcheck {

// RLIM_INFINITY on the wire of our own types: an rlimit or a policy of "unlimited".
inline constexpr std::uint64_t k_unlimited = std::numeric_limits<std::uint64_t>::max();

// "8388608", "64K", "64KiB", "8M", "1G", "1T" (binary multiples, case-insensitive), "unlimited"/"infinity".
// Overflow, a negative number, junk or an empty string is an error naming the input.
result<std::uint64_t> parse_bytes(std::string_view text);
// "64 KiB", "8 MiB", "1.5 GiB", "unlimited"; exact bytes below 1 KiB.
std::string format_bytes(std::uint64_t bytes);
// "30s", "500ms", "2m", or a bare number of seconds. Bounded to 1 hour.
result<std::chrono::milliseconds> parse_duration(std::string_view text);

// `s` without leading and trailing whitespace (isspace: blanks, tabs, newlines, CR, VT, FF).
std::string_view trim_space(std::string_view s);

// Escapes text for one-line logs, drain reasons and AdminComment: printable ASCII kept, everything else
// (newlines, control bytes, non-ASCII, and the characters in `also`) as \xNN; cut to `max` bytes with "...".
std::string escape_line(std::string_view text, std::size_t max = 256, std::string_view also = "");

// NCCL's version code, as ncclGetVersion() and NCCL_VERSION_CODE give it: X*1000 + Y*100 + Z up to 2.8 (2804 is
// 2.8.4), X*10000 + Y*100 + Z from 2.9 on (22809 is 2.28.9; docs/facts/kernel-and-drivers.md, section 6).
// {0, 0, 0} and "" for a code <= 0 (unknown). The only place the code is decoded.
std::array<int, 3> nccl_version_parts(int code);
std::string nccl_version_text(int code);
// CUDA's version code, as cuDriverGetVersion() gives it: 1000*major + 10*minor (12040 is 12.4). "" for <= 0.
std::array<int, 2> cuda_version_parts(int code);
std::string cuda_version_text(int code);

}  // namespace mrcheck
