// escape_line(): the last defence before untrusted text (job names, --mr-check values, NCCL log lines, file
// contents) reaches a log line, a drain reason or an AdminComment. A property, not just "no crash":
//  - the output is printable ASCII, never longer than `max`, and has none of the `also` characters unescaped;
//  - when nothing was cut, decoding the \xNN escapes gives back the input exactly (nothing lost or confused);
//  - when something was cut, the output ends with "..." (max >= 3) and is a prefix of the full escape.
// Input layout: byte 0 = max (0-255), byte 1 = how many of the next bytes are `also`, then the text.
#include "fuzz_common.h"

#include <mrcheck/units.h>

#include <algorithm>
#include <optional>
#include <string>

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
int hex_value(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

// Inverse of escape_line for uncut output; nullopt on a malformed escape.
std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 3 >= s.size()) return std::nullopt;
    if (s[i + 1] != 'x' || !is_hex(s[i + 2]) || !is_hex(s[i + 3])) return std::nullopt;
    out += static_cast<char>(hex_value(s[i + 2]) * 16 + hex_value(s[i + 3]));
    i += 3;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  if (size < 2) return 0;
  std::size_t max = data[0];
  std::size_t also_len = std::min<std::size_t>(data[1] % 8, size - 2);
  // `also` characters that the escape itself uses ('\\', 'x', hex digits) or the cut marker uses ('.') would
  // make the property ambiguous; callers pass things like ":" and ",".
  std::string also;
  for (std::size_t i = 0; i < also_len; ++i) {
    char c = static_cast<char>(data[2 + i]);
    if (c != '\\' && c != 'x' && c != '.' && !is_hex(c)) also += c;
  }
  std::string_view text = fuzz::as_text(data + 2 + also_len, size - 2 - also_len);

  std::string out = escape_line(text, max, also);
  MRCHECK_FUZZ_REQUIRE(out.size() <= max, out);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(out), out);

  std::string full = escape_line(text, SIZE_MAX, also);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(full), full);
  for (char c : also) MRCHECK_FUZZ_REQUIRE(full.find(c) == std::string::npos, full);
  auto decoded = unescape(full);
  MRCHECK_FUZZ_REQUIRE(decoded && *decoded == text, full);

  if (full.size() <= max) {
    MRCHECK_FUZZ_REQUIRE(out == full, out);
  } else {
    if (max >= 3) {
      MRCHECK_FUZZ_REQUIRE(out.size() >= 3 && out.compare(out.size() - 3, 3, "...") == 0, out);
      MRCHECK_FUZZ_REQUIRE(full.compare(0, out.size() - 3, out, 0, out.size() - 3) == 0, out);
    } else {
      MRCHECK_FUZZ_REQUIRE(out.empty(), out);
    }
  }
  return 0;
}
