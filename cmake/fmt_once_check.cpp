// cmake/FmtOnce.cmake links this against src/util/fmt_once.cpp: every kind of use the tree makes of fmt.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  std::vector<int> v{1, 2};
  std::string s = fmt::format("{} {:.2f} {:>8} {:#x} {} {}", 1, 2.5, "x", 255U, 1.5F, fmt::join(v, ","));
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b), "{}{}", s, std::chrono::seconds(3));
  std::string t = fmt::to_string(b) + fmt::format(fmt::runtime("{}"), 7);
  try {
    (void)fmt::format(fmt::runtime("{:d}"), "not a number");
  } catch (const fmt::format_error&) {
  }
  fmt::print(stderr, "{}", t.empty() ? "" : "");
  return 0;
}
