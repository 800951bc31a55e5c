// effective_checks(): the user's --mr-check value (or MRCHECK_CHECKS inherited from sbatch, which the user can
// also set by hand) on top of the site's default_checks. Untrusted.
// Input: byte 0 picks the site policy (default checks, allow_user_off) and how the request arrives (option seen,
// bare option, MRCHECK_CHECKS set); the rest is "<option value>\0<MRCHECK_CHECKS value>".
// Invariants (DESIGN.md: the user cannot switch off what the site requires):
//  - with allow_user_off=no, an accepted request keeps every group of the site's default_checks;
//  - whatever the request, an accepted result never has `off` set and never drops a site group unless it is
//    empty (the user's allowed "off");
//  - an accepted result is what parse_check_groups() of the same text says, merged with the site's groups;
//  - errors are one printable line naming where the value came from.
// fuzz-requires: memlock_chain.h
#include "fuzz_common.h"

#include <mrcheck/step.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  if (size < 1) return 0;
  const std::uint8_t shape = data[0];
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  std::size_t nul = rest.find('\0');
  std::string option(rest.substr(0, nul));
  std::string env = nul == std::string_view::npos ? std::string() : std::string(rest.substr(nul + 1));

  config c;
  c.default_checks.memlock = (shape & 1) != 0;
  c.default_checks.mr = (shape & 2) != 0;
  c.default_checks.nccl = (shape & 4) != 0;
  c.allow_user_off = (shape & 8) != 0;
  check_request req;
  req.option_seen = (shape & 16) != 0;
  // A bare --mr-check reaches the plugin as NULL, "" or "(null)" depending on the Slurm version.
  if (req.option_seen && (shape & 32) == 0) req.option = normalize_optarg(option.c_str());
  if ((shape & 64) != 0) req.env_checks = env;

  auto r = effective_checks(c, req);
  if (!r) {
    const std::string m = r.error().message();  // a copy: error() returns by value
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(m), m);
    MRCHECK_FUZZ_REQUIRE(m.rfind("--mr-check", 0) == 0 || m.rfind("MRCHECK_CHECKS", 0) == 0, m);
    return 0;
  }
  const check_groups& g = *r;
  const check_groups& site = c.default_checks;
  MRCHECK_FUZZ_REQUIRE(!g.off, g.to_string());
  bool keeps_site = (!site.memlock || g.memlock) && (!site.mr || g.mr) && (!site.nccl || g.nccl);
  if (!c.allow_user_off) MRCHECK_FUZZ_REQUIRE(keeps_site, g.to_string());
  MRCHECK_FUZZ_REQUIRE(keeps_site || !g.any(), g.to_string());
  if (!req.option_seen && !req.env_checks) MRCHECK_FUZZ_REQUIRE(g == site, g.to_string());
  return 0;
}
