// mrcheck-prolog's Prometheus textfile (prolog/textfile.h): prometheus_label_value() escapes a label value
// for the text exposition format 0.0.4, prometheus_textfile() writes one gauge per check.
// Input: label text; also split at NUL into check ids with verdicts picked by the first byte.
// Invariants: the escaped value has no raw line feed, every '"' in it is escaped, and unescaping it (the
// format's rules: \\ \" \n) gives the input back; the textfile has exactly one sample line per check plus two,
// each sample line is `name{check="<escaped>"} <int>` or `name <int>`, every other line a # HELP / # TYPE.
// fuzz-requires: prolog/textfile.h
#include "fuzz_common.h"

#include "prolog/textfile.h"

#include <optional>

namespace {

// The exposition format's reader for a quoted label value's inside; nullopt on a bad escape.
std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\n') return std::nullopt;
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    if (s[i] == '\\')
      out += '\\';
    else if (s[i] == '"')
      out += '"';
    else if (s[i] == 'n')
      out += '\n';
    else
      return std::nullopt;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  std::string escaped = prometheus_label_value(text);
  auto back = unescape(escaped);
  MRCHECK_FUZZ_REQUIRE(back && *back == text, escaped);

  report r;
  std::size_t pos = 0;
  std::uint8_t pick = size ? data[0] : 0;
  while (pos <= text.size() && r.checks.size() < 64) {
    std::size_t nul = text.find('\0', pos);
    check_result c;
    c.id = std::string(text.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
    constexpr verdict k_verdicts[] = {verdict::pass, verdict::warn, verdict::fail, verdict::skip, verdict::error};
    c.result = k_verdicts[(pick + r.checks.size()) % 5];
    r.checks.push_back(std::move(c));
    if (nul == std::string_view::npos) break;
    pos = nul + 1;
  }
  std::string file = prometheus_textfile(r, 1700000000);
  std::size_t samples = 0;
  std::size_t at = 0;
  while (at < file.size()) {
    std::size_t nl = file.find('\n', at);
    MRCHECK_FUZZ_REQUIRE(nl != std::string::npos, "last line without a line feed");
    std::string_view line = std::string_view(file).substr(at, nl - at);
    at = nl + 1;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
    ++samples;
    std::size_t sp = line.rfind(' ');
    MRCHECK_FUZZ_REQUIRE(sp != std::string_view::npos, line);
    std::string_view value = line.substr(sp + 1);
    MRCHECK_FUZZ_REQUIRE(!value.empty() && value.find_first_not_of("-0123456789") == std::string_view::npos, line);
    std::string_view name = line.substr(0, sp);
    if (auto brace = name.find('{'); brace != std::string_view::npos) {
      constexpr std::string_view k_open = "{check=\"";
      MRCHECK_FUZZ_REQUIRE(name.substr(brace, k_open.size()) == k_open && name.ends_with("\"}"), line);
      auto id = unescape(name.substr(brace + k_open.size(), name.size() - brace - k_open.size() - 2));
      MRCHECK_FUZZ_REQUIRE(id.has_value(), line);
    }
  }
  MRCHECK_FUZZ_REQUIRE(samples == r.checks.size() + 2, std::to_string(samples));
  return 0;
}
