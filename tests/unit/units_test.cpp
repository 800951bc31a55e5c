#include <mrcheck/units.h>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

TEST(parse_bytes, plain_and_suffixes) {
  EXPECT_EQ(*parse_bytes("8388608"), 8388608u);
  EXPECT_EQ(*parse_bytes("64K"), 65536u);
  EXPECT_EQ(*parse_bytes("64KiB"), 65536u);
  EXPECT_EQ(*parse_bytes("8m"), 8u << 20);
  EXPECT_EQ(*parse_bytes(" 1G "), 1u << 30);
  EXPECT_EQ(*parse_bytes("2T"), std::uint64_t{2} << 40);
  EXPECT_EQ(*parse_bytes("unlimited"), k_unlimited);
  EXPECT_EQ(*parse_bytes("Infinity"), k_unlimited);
}

TEST(parse_bytes, rejects_junk_and_overflow) {
  for (const char* bad : {"", "-1", "abc", "12Q", "1.5G", "99999999999999999999", "17179869184T", "8 M x"}) {
    auto r = parse_bytes(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
  }
}

TEST(format_bytes, readable) {
  EXPECT_EQ(format_bytes(65536), "64 KiB");
  EXPECT_EQ(format_bytes(8u << 20), "8 MiB");
  EXPECT_EQ(format_bytes(1536u << 20), "1.5 GiB");
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(k_unlimited), "unlimited");
}

TEST(parse_duration, units_and_bounds) {
  EXPECT_EQ(parse_duration("30s")->count(), 30000);
  EXPECT_EQ(parse_duration("30")->count(), 30000);
  EXPECT_EQ(parse_duration("500ms")->count(), 500);
  EXPECT_EQ(parse_duration("2m")->count(), 120000);
  EXPECT_FALSE(parse_duration("0").is_ok());
  EXPECT_FALSE(parse_duration("2h").is_ok());
  EXPECT_FALSE(parse_duration("61m").is_ok());
  EXPECT_FALSE(parse_duration("-5s").is_ok());
}

TEST(escape_line, controls_and_bound) {
  EXPECT_EQ(escape_line("a\nb"), "a\\x0ab");
  EXPECT_EQ(escape_line("x|y", 256, "|"), "x\\x7cy");
  EXPECT_EQ(escape_line("back\\slash"), "back\\x5cslash");
  std::string long_text(1000, 'z');
  auto e = escape_line(long_text, 20);
  EXPECT_EQ(e.size(), 20u);
  EXPECT_EQ(e.substr(17), "...");
  // Both hex digits, lower case, for every byte that is not plain; an escape never split by the bound.
  EXPECT_EQ(escape_line(std::string_view("\x00\x7f\xff\xa0", 4)), "\\x00\\x7f\\xff\\xa0");
  EXPECT_EQ(escape_line("ab\x01", 5), "ab...");
  EXPECT_EQ(escape_line("ab\x01", 6), "ab\\x01");
}

// NCCL changed its version code at 2.9 (X*1000+Y*100+Z before, X*10000+Y*100+Z after); every report, rule
// and verdict decodes it here.
TEST(nccl_version_text, both_code_forms) {
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");
  EXPECT_EQ(nccl_version_text(20900), "2.9.0");
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(0), "");
  EXPECT_EQ(nccl_version_text(-1), "");
  EXPECT_EQ(nccl_version_parts(2708), (std::array<int, 3>{2, 7, 8}));
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(0), "");
}

}  // namespace
}  // namespace mrcheck
