// The one errno reader (line_forms.h, errno_in): every notation libraries print an errno in.
#include "line_forms.h"
#include "text.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace mrcheck::forms {

using namespace text;

// ---- errno ----

namespace {

std::string_view trim_right_seps(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '=' || s.back() == ':' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ends_with_word(std::string_view s, std::string_view w) {
  if (!s.ends_with(w)) return false;
  return s.size() == w.size() || !is_ident(s[s.size() - w.size() - 1]);
}

// The first errno name ("ENOMEM") of t, as a whole word; 0 when none.
int errno_name_in(std::string_view t) {
  for (std::size_t e = t.find('E'); e != std::string_view::npos; e = t.find('E', e + 1)) {
    if (e > 0 && is_ident(t[e - 1])) continue;
    std::size_t n = 0;
    while (e + n < t.size() && n < 16 && is_ident(t[e + n])) ++n;
    if (n >= 4) {
      if (auto v = errno_from_name(t.substr(e, n))) return *v;
    }
  }
  return 0;
}

}  // namespace

int errno_in(std::string_view t) {
  int explicit_e = 0;
  int bracket_e = 0;
  int return_e = 0;
  int keyword_e = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!is_digit(t[i])) continue;
    if (i > 0 && (is_ident(t[i - 1]) || t[i - 1] == '.')) {
      while (i < t.size() && is_digit(t[i])) ++i;
      continue;
    }
    std::size_t j = i;
    while (j < t.size() && is_digit(t[j])) ++j;
    const bool word_after = j < t.size() && (is_ident(t[j]) || (t[j] == '.' && j + 1 < t.size() && is_digit(t[j + 1])));
    if (j - i > 4 || word_after) {
      i = j;
      continue;
    }
    int v = 0;
    std::from_chars(t.data() + i, t.data() + j, v);
    const bool neg = i > 0 && t[i - 1] == '-';
    std::size_t lead = neg ? i - 1 : i;
    if (v <= 0 || v >= 4096) {
      i = j;
      continue;
    }
    // "(12)", "[14]", "(-12)", "[-12]" right after a word: the errno a library appends to its strerror text.
    if (lead > 0 && (t[lead - 1] == '(' || t[lead - 1] == '[')) {
      const char close = t[lead - 1] == '(' ? ')' : ']';
      std::string_view before = t.substr(0, lead - 1);
      while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
      const bool closes = j < t.size() && t[j] == close &&
                          (j + 1 == t.size() || t[j + 1] == ' ' || t[j + 1] == ',' || t[j + 1] == '.' ||
                           t[j + 1] == ')' || t[j + 1] == ';' || t[j + 1] == '"' || t[j + 1] == '\'');
      std::string_view word = trim_right_seps(before);
      if (closes && ends_with_word(word, "errno")) {
        if (explicit_e == 0) explicit_e = v;
      } else if (closes && !before.empty() && is_alpha(before.back()) && bracket_e == 0) {
        bracket_e = v;
      }
      if (closes && word.ends_with("err") && neg && return_e == 0) return_e = v;  // "err(-12)"
      i = j;
      continue;
    }
    std::string_view left = trim_right_seps(t.substr(0, lead));
    if (ends_with_word(left, "errno") || left.ends_with("Unknown error") || ends_with_word(left, "code") ||
        left.ends_with("error code")) {
      if (explicit_e == 0) explicit_e = v;
    } else if (neg) {
      if (v != 1 && return_e == 0) {
        for (std::string_view w : {"failed", "fail", "return", "returned", "ret", "rc", "RC", "err", "error", "status",
                                   "is", "Error", "ERROR", "with"}) {
          if (ends_with_word(left, w)) {
            return_e = v;
            break;
          }
        }
      }
    } else if (keyword_e == 0) {
      for (std::string_view w : {"error", "err", "rc", "RC", "ret"}) {
        if (ends_with_word(left, w)) {
          keyword_e = v;
          break;
        }
      }
    }
    i = j;
  }
  if (explicit_e) return explicit_e;
  if (bracket_e) return bracket_e;
  if (int e = errno_message_in(t); e != 0) return e;
  if (return_e) return return_e;
  if (keyword_e) return keyword_e;
  return errno_name_in(t);
}
}  // namespace mrcheck::forms
