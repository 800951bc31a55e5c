// load_config_file(): /etc/slurm/mrcheck.conf (and config= of plugstack.conf). The file is a memfd, so the real
// reader (ifstream, line splitting, the 1 MiB cap) runs without touching the disk.
// Differential: the result equals applying each line by hand (text before '#', trimmed, blank lines skipped),
// and the first bad line is the error, named path:line; a file over 1 MiB is refused. Accepted configs meet the config invariants and
// re-parse from their items to the same policy.
#include "config_roundtrip.h"

#include <fmt/format.h>
#include <cctype>

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  // The 1 MiB cap (finding F6: it must bound the read itself, newlines counted): an input that starts with
  // "#pad" is padded with one comment line to 1 MiB - 1, 1 MiB or 1 MiB + 1 bytes (its fifth byte picks).
  constexpr std::size_t k_cap = 1 << 20;
  // The buffer is kept between inputs: a fresh 1 MiB string per padded input was an mmap, 256 page faults and
  // an munmap under ASan, several times the cost of the parse.
  static std::string padded;
  if (text.starts_with("#pad") && text.size() >= 5) {
    std::size_t want = k_cap - 1 + static_cast<unsigned char>(text[4]) % 3;
    if (text.size() + 2 <= want) {
      padded.assign(text);
      padded += "\n#";
      padded.append(want - text.size() - 2, 'x');
      text = padded;
    }
  }
  fuzz::memfile file(text);

  config loaded;
  status s = load_config_file(loaded, file.path());

  // The same file, line by line.
  config expected;
  status expected_status;
  std::size_t pos = 0;
  int lineno = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lineno;
    auto hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    expected_status = apply_config_item(expected, line, fmt::format("{}:{}", file.path(), lineno));
    if (!expected_status) break;
  }

  if (text.size() > k_cap) {
    MRCHECK_FUZZ_REQUIRE(!s && s.message() == file.path() + ": larger than 1 MiB", s.message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(s.is_ok() == expected_status.is_ok(), s.message() + " | " + expected_status.message());
  if (!s) {
    MRCHECK_FUZZ_REQUIRE(s.message() == expected_status.message(), s.message());
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(s.message()), s.message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(loaded.config_file == file.path(), loaded.config_file);
  MRCHECK_FUZZ_REQUIRE(fuzz::same_policy(loaded, expected), "file and line-by-line disagree");
  fuzz::check_config_invariants(loaded);
  fuzz::check_config_roundtrip(loaded);
  return 0;
}
