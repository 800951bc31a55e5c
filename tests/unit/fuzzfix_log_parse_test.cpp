// Finding F7 of tests/fuzz/README.md: parse_nccl_log() kept the part names of an "Init timings" line raw, so
// bytes of a rank's output (NUL, ESC, newline-free control characters, invalid UTF-8 that makes the JSON report's
// dump() throw) reached the NCCL check's report. Every string it keeps must be escaped and bounded.
#include <mrcheck/nccl_probe.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <string>

namespace mrcheck {
namespace {

bool printable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

TEST(FuzzFixLogParse, InitTimingPartNamesAreEscaped) {
  std::string line = "h:1:1 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total 0.64 (ker";
  line += std::string("\0nels", 5);
  line += " 0.30, \x1b[31mred 0.01, \xff\xfe 0.02, alloc 0.01)\n";
  nccl_log_facts f = parse_nccl_log(line);
  ASSERT_EQ(f.init_timings.size(), 1u);
  const auto& parts = f.init_timings[0].parts;
  ASSERT_EQ(parts.size(), 4u);
  for (const auto& [name, secs] : parts) EXPECT_TRUE(printable(name)) << name;
  EXPECT_EQ(parts[3].first, "alloc");  // plain names stay as NCCL printed them
  EXPECT_DOUBLE_EQ(parts[0].second, 0.30);
  // What the report does with them (report_json.cpp): object keys, dumped as UTF-8.
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, secs] : parts) j[name] = secs;
  EXPECT_NO_THROW((void)j.dump());
}

TEST(FuzzFixLogParse, InitTimingPartsAreBounded) {
  std::string line = "NCCL INFO Init timings - x: rank 0 nranks 2 total 1 (" + std::string(3000, 'n') + " 0.1";
  for (int i = 0; i < 2000; ++i) line += ", p" + std::to_string(i) + " 0.1";
  line += ")";
  nccl_log_facts f = parse_nccl_log(line);
  ASSERT_EQ(f.init_timings.size(), 1u);
  const auto& parts = f.init_timings[0].parts;
  EXPECT_LE(parts.size(), 32u);
  ASSERT_FALSE(parts.empty());
  EXPECT_LE(parts[0].first.size(), 64u);
  EXPECT_EQ(parts[1].first, "p0");
}

TEST(FuzzFixLogParse, TransportNamesAreEscaped) {
  // Found by fuzz_nccl_probe_log once the part names were fixed: the transport of a Channel line was kept raw.
  std::string log = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/I";
  log += std::string("\0B\x1b/0/GDRDMA\n", 13);
  nccl_log_facts f = parse_nccl_log(log);
  ASSERT_EQ(f.transports.size(), 1u);
  EXPECT_TRUE(printable(f.transports[0])) << f.transports[0];
  EXPECT_TRUE(f.transports[0].starts_with("NET/")) << f.transports[0];
  ASSERT_EQ(f.channels.size(), 1u);
  EXPECT_TRUE(printable(f.channels[0])) << f.channels[0];
}

}  // namespace
}  // namespace mrcheck
