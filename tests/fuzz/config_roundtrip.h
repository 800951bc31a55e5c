// A config that parsed must be expressible again: written back as key=value items it re-parses to the same
// values. Used by the config targets; the serialiser lives here because mrcheck itself never writes configs.
#pragma once

#include "fuzz_common.h"

#include <mrcheck/config.h>
#include <mrcheck/units.h>

#include <string>
#include <vector>

namespace mrcheck::fuzz {

inline std::vector<std::string> config_items(const config& c) {
  auto policy = [](fail_policy p) { return p == fail_policy::fail ? "fail" : "warn"; };
  std::vector<std::string> items = {
      "default_checks=" + c.default_checks.to_string(),
      "memlock_min=" + (c.memlock_min == k_unlimited ? std::string("unlimited") : std::to_string(c.memlock_min)),
      std::string("enforce=") + (c.enforce ? "yes" : "no"),
      std::string("on_fail=") + policy(c.on_fail),
      std::string("on_error=") + policy(c.on_error),
      std::string("allow_user_off=") + (c.allow_user_off ? "yes" : "no"),
      "probe_timeout=" + std::to_string(c.probe_timeout.count()) + "ms",
      "nccl_timeout=" + std::to_string(c.nccl_timeout.count()) + "ms",
      "verbs_library=" + c.verbs_library,
      "report_dir=" + c.report_dir,
      "state_dir=" + c.state_dir,
      "rules=" + c.rules,
      "prometheus_textfile=" + c.prometheus_textfile,
  };
  if (!c.helper.empty()) items.push_back("helper=" + c.helper);
  return items;
}

inline bool same_policy(const config& a, const config& b) {
  return a.default_checks == b.default_checks && a.memlock_min == b.memlock_min && a.enforce == b.enforce &&
         a.on_fail == b.on_fail && a.on_error == b.on_error && a.allow_user_off == b.allow_user_off &&
         a.probe_timeout == b.probe_timeout && a.nccl_timeout == b.nccl_timeout && a.verbs_library == b.verbs_library &&
         a.helper == b.helper && a.report_dir == b.report_dir && a.state_dir == b.state_dir && a.rules == b.rules &&
         a.prometheus_textfile == b.prometheus_textfile;
}

// Invariants every accepted config must meet whatever the text was: bounded timeouts, absolute paths without
// control characters (they reach open(), execve() and logs), a default check list that is not "off".
inline void check_config_invariants(const config& c) {
  auto abs_clean = [](const std::string& p, bool may_be_empty) {
    if (p.empty()) return may_be_empty;
    if (p.front() != '/' || p.size() > 4096) return false;
    for (unsigned char ch : p) {
      if (ch < 0x20 || ch == 0x7f) return false;
    }
    return true;
  };
  MRCHECK_FUZZ_REQUIRE(c.probe_timeout.count() > 0 && c.probe_timeout.count() <= 3600 * 1000, "probe_timeout");
  MRCHECK_FUZZ_REQUIRE(c.nccl_timeout.count() > 0 && c.nccl_timeout.count() <= 3600 * 1000, "nccl_timeout");
  MRCHECK_FUZZ_REQUIRE(abs_clean(c.helper, true), c.helper);
  MRCHECK_FUZZ_REQUIRE(abs_clean(c.report_dir, true), c.report_dir);
  MRCHECK_FUZZ_REQUIRE(abs_clean(c.state_dir, false), c.state_dir);
  MRCHECK_FUZZ_REQUIRE(abs_clean(c.rules, true), c.rules);
  MRCHECK_FUZZ_REQUIRE(abs_clean(c.prometheus_textfile, true), c.prometheus_textfile);
  MRCHECK_FUZZ_REQUIRE(!c.verbs_library.empty(), "verbs_library empty");
  if (c.verbs_library.find('/') != std::string::npos)
    MRCHECK_FUZZ_REQUIRE(abs_clean(c.verbs_library, false), c.verbs_library);
  MRCHECK_FUZZ_REQUIRE(!c.default_checks.off, c.default_checks.to_string());
}

// Writes `c` back as items, applies them to a default config and demands the same policy.
inline void check_config_roundtrip(const config& c) {
  config again;
  for (const auto& item : config_items(c)) {
    auto s = apply_config_item(again, item, "roundtrip");
    MRCHECK_FUZZ_REQUIRE(s.is_ok(), item + " -> " + s.message());
  }
  MRCHECK_FUZZ_REQUIRE(same_policy(c, again), "config does not re-parse to itself");
}

}  // namespace mrcheck::fuzz
