// apply_config_item(): one key=value of mrcheck.conf, a plugstack.conf argument or a CLI flag. Each input line
// is applied in turn to one config, as a file or an argument list would be.
// Invariants: accepted values meet the config's bounds (timeouts, absolute clean paths, no "off" default), a
// config that parsed writes back to items that re-parse to the same policy, errors are one printable line
// starting with the origin, and a refused item leaves the config as it was.
#include "config_roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);
  config c;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view item = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    config before = c;
    auto s = apply_config_item(c, item, "fuzz:1");
    if (!s) {
      MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(s.message()), s.message());
      MRCHECK_FUZZ_REQUIRE(s.message().rfind("fuzz:1: ", 0) == 0, s.message());
      MRCHECK_FUZZ_REQUIRE(fuzz::same_policy(before, c), "a refused item changed the config");
      continue;
    }
    fuzz::check_config_invariants(c);
  }
  fuzz::check_config_roundtrip(c);
  return 0;
}
