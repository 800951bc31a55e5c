// Character and substring helpers the line readers of src/nccl share (prefixes, errnos, forms, the open reader).
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>

namespace mrcheck::forms::text {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_ident(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
inline bool is_space(char c) { return c == ' ' || c == '\t'; }
inline bool contains(std::string_view h, std::string_view n) { return h.find(n) != std::string_view::npos; }

inline std::string_view skip_spaces(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// The decimal number at the start of s (at most max_digits), consumed; nullopt when none or too long.
inline std::optional<long> take_number(std::string_view& s, std::size_t max_digits = 9) {
  std::size_t n = 0;
  while (n < s.size() && n < max_digits + 1 && is_digit(s[n])) ++n;
  if (n == 0 || n > max_digits) return std::nullopt;
  long v = 0;
  std::from_chars(s.data(), s.data() + n, v);
  s.remove_prefix(n);
  return v;
}

inline bool icontains(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

}  // namespace mrcheck::forms::text
