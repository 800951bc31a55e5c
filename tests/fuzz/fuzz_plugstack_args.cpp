// parse_config_args(): the arguments after the plugin's path in plugstack.conf (and the CLI's policy flags).
// Input: one argument per line; after the first NUL byte comes the text of a config file. Any config=... argument
// is pointed at that file (a memfd), so the fuzzer can never make the harness open a real path.
// Invariants: the result equals "load the file, then apply the other arguments in order" (arguments override
// the file), a second config= is refused, errors are one printable line, accepted configs meet the config
// invariants and re-parse to the same policy.
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
  std::string_view all = fuzz::as_text(data, size);
  std::size_t nul = all.find('\0');
  std::string_view arg_text = all.substr(0, nul);
  std::string_view file_text = nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);
  fuzz::memfile file(file_text);

  std::vector<std::string> args;
  std::size_t pos = 0;
  while (pos <= arg_text.size() && args.size() < 64) {
    std::size_t nl = arg_text.find('\n', pos);
    std::string_view a = arg_text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? arg_text.size() + 1 : nl + 1;
    if (trim(a).rfind("config=", 0) == 0) {
      args.push_back("config=" + file.path());
    } else {
      args.emplace_back(a);
    }
  }
  std::vector<std::string_view> views(args.begin(), args.end());
  auto r = parse_config_args(views, "plugstack.conf");

  // The expected result, built the documented way.
  config expected;
  status expected_status;
  int configs = 0;
  for (const auto& a : args) configs += trim(a).rfind("config=", 0) == 0 ? 1 : 0;
  if (configs > 1) {
    // The first config= is loaded when it is met, so a bad file is reported before the second config=.
    config scratch;
    status first = load_config_file(scratch, file.path());
    MRCHECK_FUZZ_REQUIRE(!r, "config= given twice was accepted");
    if (first) {
      MRCHECK_FUZZ_REQUIRE(r.error().message().find("config= given twice") != std::string::npos, r.error().message());
    } else {
      MRCHECK_FUZZ_REQUIRE(r.error().message() == first.message(), r.error().message());
    }
    return 0;
  }
  if (configs == 1) expected_status = load_config_file(expected, file.path());
  for (std::size_t i = 0; expected_status && i < args.size(); ++i) {
    std::string_view a = trim(args[i]);
    if (a.empty() || a.rfind("config=", 0) == 0) continue;
    expected_status = apply_config_item(expected, a, fmt::format("plugstack.conf argument {}", i + 1));
  }

  MRCHECK_FUZZ_REQUIRE(r.is_ok() == expected_status.is_ok(), r.error().message() + " | " + expected_status.message());
  if (!r) {
    MRCHECK_FUZZ_REQUIRE(r.error().message() == expected_status.message(), r.error().message());
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    return 0;
  }
  MRCHECK_FUZZ_REQUIRE(fuzz::same_policy(*r, expected), "arguments do not override the file in order");
  fuzz::check_config_invariants(*r);
  fuzz::check_config_roundtrip(*r);
  return 0;
}
