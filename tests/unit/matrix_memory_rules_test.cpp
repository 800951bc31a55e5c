// The max_map_count and hugepages rules: their keys in the rules file (values, errors, contradictions) and
// every edge of both checks - each threshold at, just below and just above, off, warn-instead-of-fail, an
// unreadable fact - plus the fixture trees that fail each one.
#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace mrcheck {
namespace {

constexpr std::uint64_t k_kib = 1024;
constexpr std::uint64_t k_mib = 1024 * k_kib;
constexpr std::uint64_t k_gib = 1024 * k_mib;

std::string error_of(std::string_view text) {
  auto r = parse_matrix_rules(text, "rules.conf");
  return r ? std::string("(parsed)") : r.error().message();
}

matrix_rules rules_from(std::string_view text) {
  auto r = parse_matrix_rules(text, "site.conf");
  EXPECT_TRUE(r) << r.error().message();
  return r ? *r : default_matrix_rules();
}

node_facts with_map_count(std::uint64_t v) {
  node_facts f;
  f.max_map_count = v;
  return f;
}

// A node with `mem` bytes of MemTotal and `total` 2 MiB hugepages of which `free` are free.
node_facts with_hugepages(std::uint64_t mem, std::uint64_t total, std::uint64_t free) {
  node_facts f;
  hugepages_fact h;
  h.mem_total = mem;
  h.mem_available = mem / 2;
  h.page_size = 2 * k_mib;
  h.total = total;
  h.free = free;
  f.hugepages = h;
  return f;
}

TEST(MatrixMemoryRules, DefaultsAndOverrides) {
  auto d = default_matrix_rules();
  EXPECT_EQ(d.max_map_count, rule_action::fail);
  EXPECT_EQ(d.max_map_count_min, std::uint64_t{65530});
  EXPECT_EQ(d.max_map_count_recommended, std::uint64_t{262144});
  EXPECT_EQ(d.hugepages, rule_action::fail);
  EXPECT_EQ(d.hugepages_reserved_max_pct, std::uint64_t{90});
  EXPECT_EQ(d.hugepages_reserved_warn_pct, std::uint64_t{50});
  EXPECT_EQ(d.hugepages_free_min, 1u);

  auto r = rules_from(
      "max_map_count warn\nmax_map_count.min 1000\nmax_map_count.recommended none\n"
      "hugepages off\nhugepages.reserved_max 100%\nhugepages.reserved_warn 0%\nhugepages.free_min 0\n");
  EXPECT_EQ(r.max_map_count, rule_action::warn);
  EXPECT_EQ(r.max_map_count_min, std::uint64_t{1000});
  EXPECT_FALSE(r.max_map_count_recommended.has_value());
  EXPECT_EQ(r.hugepages, rule_action::off);
  EXPECT_EQ(r.hugepages_reserved_max_pct, std::uint64_t{100});
  EXPECT_EQ(r.hugepages_reserved_warn_pct, std::uint64_t{0});
  EXPECT_EQ(r.hugepages_free_min, 0u);
  auto none = rules_from("max_map_count.min none\nhugepages.reserved_max none\nhugepages.reserved_warn none\n");
  EXPECT_FALSE(none.max_map_count_min.has_value());
  EXPECT_FALSE(none.hugepages_reserved_max_pct.has_value());
  EXPECT_FALSE(none.hugepages_reserved_warn_pct.has_value());
}

TEST(MatrixMemoryRules, BadValuesAreErrorsWithFileAndLine) {
  EXPECT_EQ(error_of("max_map_count.min lots\n"),
            "rules.conf:1: 'max_map_count.min': 'lots' is not a map count (0 to 2147483647)");
  EXPECT_EQ(error_of("max_map_count.min 2147483648\n"),
            "rules.conf:1: 'max_map_count.min': '2147483648' is not a map count (0 to 2147483647)");
  EXPECT_EQ(error_of("max_map_count.recommended -1\n"),
            "rules.conf:1: 'max_map_count.recommended': '-1' is not a map count (0 to 2147483647)");
  EXPECT_EQ(error_of("max_map_count.min\n"), "rules.conf:1: 'max_map_count.min' takes COUNT|none (got 0 values)");
  EXPECT_EQ(error_of("\nhugepages.reserved_max 90\n"),
            "rules.conf:2: 'hugepages.reserved_max': '90' is not a percentage of MemTotal (0% to 100%)");
  EXPECT_EQ(error_of("hugepages.reserved_warn 101%\n"),
            "rules.conf:1: 'hugepages.reserved_warn': '101%' is not a percentage of MemTotal (0% to 100%)");
  EXPECT_EQ(error_of("hugepages.reserved_warn %\n"),
            "rules.conf:1: 'hugepages.reserved_warn': '%' is not a percentage of MemTotal (0% to 100%)");
  EXPECT_EQ(error_of("hugepages.free_min 1G\n"), "rules.conf:1: 'hugepages.free_min': '1G' is not a page count");
  EXPECT_EQ(error_of("hugepages maybe\n"), "rules.conf:1: 'hugepages': 'maybe' is not fail, warn or off");
  EXPECT_EQ(error_of("max_map_count.min 1\nmax_map_count.min 2\n"), "rules.conf:2: 'max_map_count.min' is set twice");
}

TEST(MatrixMemoryRules, ContradictoryThresholdsAreErrors) {
  // Against the default of the other threshold, and against a line of the same file, in either order.
  EXPECT_EQ(error_of("max_map_count.min 300000\n"),
            "rules.conf: max_map_count.min 300000 is above max_map_count.recommended 262144");
  EXPECT_EQ(error_of("max_map_count.recommended 1000\nmax_map_count.min 1001\n"),
            "rules.conf: max_map_count.min 1001 is above max_map_count.recommended 1000");
  EXPECT_EQ(error_of("hugepages.reserved_warn 95%\n"),
            "rules.conf: hugepages.reserved_warn 95% is above hugepages.reserved_max 90%");
  EXPECT_EQ(error_of("hugepages.reserved_max 40%\n"),
            "rules.conf: hugepages.reserved_warn 50% is above hugepages.reserved_max 40%");
  // Equal thresholds, or one removed, are fine.
  EXPECT_EQ(error_of("max_map_count.min 262144\n"), "(parsed)");
  EXPECT_EQ(error_of("max_map_count.recommended none\nmax_map_count.min 300000\n"), "(parsed)");
  EXPECT_EQ(error_of("hugepages.reserved_max 40%\nhugepages.reserved_warn none\n"), "(parsed)");
}

TEST(MatrixMemoryChecks, MaxMapCountEdges) {
  auto d = default_matrix_rules();
  auto at = [&](std::uint64_t v) { return check_max_map_count(with_map_count(v), d); };
  EXPECT_EQ(at(0).result, verdict::fail);
  auto low = at(65529);
  EXPECT_EQ(low.id, "max_map_count");
  EXPECT_EQ(low.result, verdict::fail);
  EXPECT_EQ(low.summary, "vm.max_map_count 65529 < 65530");
  EXPECT_NE(low.hint.find("sysctl -w vm.max_map_count=1048576"), std::string::npos) << low.hint;
  auto def = at(65530);
  EXPECT_EQ(def.result, verdict::warn);
  EXPECT_EQ(def.summary, "vm.max_map_count 65530 < 262144 (kernel default)");
  EXPECT_FALSE(def.hint.empty());
  EXPECT_EQ(at(262143).result, verdict::warn);
  auto ok = at(262144);
  EXPECT_EQ(ok.result, verdict::pass);
  EXPECT_EQ(ok.summary, "vm.max_map_count 262144 >= 262144");
  EXPECT_TRUE(ok.hint.empty());
  EXPECT_EQ(at(8250344).result, verdict::pass);  // the H200 node (docs/facts/nccl-test-harness.md §4)

  // warn instead of fail; no recommendation; no floor; off.
  auto warn = rules_from("max_map_count warn\n");
  EXPECT_EQ(check_max_map_count(with_map_count(100), warn).result, verdict::warn);
  auto no_rec = rules_from("max_map_count.recommended none\n");
  EXPECT_EQ(check_max_map_count(with_map_count(65530), no_rec).result, verdict::pass);
  EXPECT_EQ(check_max_map_count(with_map_count(65530), no_rec).summary, "vm.max_map_count 65530");
  EXPECT_EQ(check_max_map_count(with_map_count(65529), no_rec).result, verdict::fail);
  auto no_min = rules_from("max_map_count.min none\n");
  EXPECT_EQ(check_max_map_count(with_map_count(1), no_min).result, verdict::warn);
  auto off = rules_from("max_map_count off\n");
  EXPECT_EQ(check_max_map_count(with_map_count(1), off).result, verdict::skip);
  // A recommendation above 1 Mi is what the fix then names.
  auto big = rules_from("max_map_count.recommended 4194304\n");
  EXPECT_NE(check_max_map_count(with_map_count(70000), big).hint.find("=4194304"), std::string::npos);

  node_facts unreadable;
  unreadable.max_map_count = status::error("read /proc/sys/vm/max_map_count: No such file or directory");
  auto e = check_max_map_count(unreadable, d);
  EXPECT_EQ(e.result, verdict::error);
  EXPECT_NE(e.summary.find("No such file"), std::string::npos);
  EXPECT_EQ(check_max_map_count(unreadable, off).result, verdict::skip);  // off wins: nothing is read
}

TEST(MatrixMemoryChecks, HugepagesReservedShareEdges) {
  auto d = default_matrix_rules();
  // 100 GiB of memory = 51200 pages of 2 MiB; 90% = 46080 pages, 50% = 25600 pages.
  const std::uint64_t mem = 100 * k_gib;
  auto at = [&](std::uint64_t pages, std::uint64_t free) {
    return check_hugepages(with_hugepages(mem, pages, free), d);
  };
  auto none = at(0, 0);
  EXPECT_EQ(none.id, "hugepages");
  EXPECT_EQ(none.result, verdict::pass);
  EXPECT_EQ(at(25600, 10).result, verdict::pass);  // exactly 50%: not above
  auto warn = at(25601, 10);                       // just above 50%
  EXPECT_EQ(warn.result, verdict::warn);
  EXPECT_EQ(warn.summary, "25601 hugepages (50.0 GiB) reserved = 50% of memory > 50%") << warn.summary;
  EXPECT_FALSE(warn.hint.empty());
  EXPECT_EQ(at(46080, 10).result, verdict::warn);  // exactly 90%
  auto fail = at(46081, 10);                       // just above 90%
  EXPECT_EQ(fail.result, verdict::fail);
  EXPECT_NE(fail.summary.find("reserved = 90% of memory > 90%"), std::string::npos) << fail.summary;
  EXPECT_NE(fail.hint.find("vm.nr_hugepages"), std::string::npos);
  EXPECT_EQ(at(51200, 51200).result, verdict::fail);  // all of memory
  EXPECT_EQ(at(60000, 1).result, verdict::fail);      // more than MemTotal (pool counted outside it)
  auto ok = at(1024, 512);
  EXPECT_EQ(ok.result, verdict::pass);
  EXPECT_EQ(ok.summary, "512 of 1024 hugepages of 2 MiB free (2 GiB reserved, 2% of memory)") << ok.summary;

  auto warn_only = rules_from("hugepages warn\n");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 46081, 1), warn_only).result, verdict::warn);
  auto no_max = rules_from("hugepages.reserved_max none\n");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 51200, 1), no_max).result, verdict::warn);  // warn share still
  auto no_share = rules_from("hugepages.reserved_max none\nhugepages.reserved_warn none\n");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 51200, 1), no_share).result, verdict::pass);
  auto off = rules_from("hugepages off\n");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 51200, 0), off).result, verdict::skip);
  // Zero MemTotal (a broken meminfo that still parsed): no share judged, no division by zero.
  EXPECT_EQ(check_hugepages(with_hugepages(0, 10, 5), d).result, verdict::pass);
  // Absurd counts do not wrap around into a pass.
  EXPECT_EQ(check_hugepages(with_hugepages(mem, UINT64_MAX / 2, 1), d).result, verdict::fail);
}

TEST(MatrixMemoryChecks, HugepagesFreePagesEdges) {
  auto d = default_matrix_rules();
  const std::uint64_t mem = 100 * k_gib;
  auto used = check_hugepages(with_hugepages(mem, 1024, 0), d);
  EXPECT_EQ(used.result, verdict::warn);
  EXPECT_EQ(used.summary, "all 1024 hugepages (2 GiB) are in use");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 1024, 1), d).result, verdict::pass);
  auto need = rules_from("hugepages.free_min 100\n");
  auto few = check_hugepages(with_hugepages(mem, 1024, 99), need);
  EXPECT_EQ(few.result, verdict::warn);
  EXPECT_EQ(few.summary, "99 of 1024 hugepages free, fewer than 100");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 1024, 100), need).result, verdict::pass);
  auto never = rules_from("hugepages.free_min 0\n");
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 1024, 0), never).result, verdict::pass);
  // The share rule comes first: a full pool above 90% fails, it does not merely warn.
  EXPECT_EQ(check_hugepages(with_hugepages(mem, 50000, 0), d).result, verdict::fail);

  node_facts unreadable;
  unreadable.hugepages = status::error("read /proc/meminfo: Permission denied");
  EXPECT_EQ(check_hugepages(unreadable, d).result, verdict::error);
}

}  // namespace
}  // namespace mrcheck
