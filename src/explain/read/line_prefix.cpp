// The one prefix reader (line_forms.h, read_prefix): launchers, collectors and timestamps in any order, then the
// libraries' own headers (NCCL's host:pid:tid, UCX's and Open MPI's brackets, glog's). Plain string_view work, no
// regex: the scanner must stream a log at close to grep's speed.
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

namespace {

// ---- prefixes ----

// pdsh/clush "host: " prefixes: lower-case host names or addresses with a digit, so "RuntimeError: " is no host.
bool looks_like_host(std::string_view t) {
  if (t.empty() || t.size() > 64) return false;
  bool digit = false;
  for (char c : t) {
    if (is_digit(c)) {
      digit = true;
    } else if (!((c >= 'a' && c <= 'z') || c == '-' || c == '.' || c == '_')) {
      return false;
    }
  }
  return digit;
}

// "2024-01-02T03:04:05.123Z", "2024-01-02 03:04:05,123", and a collector's "2025-05-16T16:39:51.208-07:00".
bool skip_iso_timestamp(std::string_view& s) {
  if (s.size() < 10 || !is_digit(s[0]) || !is_digit(s[3]) || s[4] != '-' || s[7] != '-') return false;
  std::size_t i = 10;
  if (i + 1 < s.size() && (s[i] == 'T' || s[i] == ' ') && is_digit(s[i + 1])) {
    ++i;
    while (i < s.size() &&
           (is_digit(s[i]) || s[i] == ':' || s[i] == '.' || s[i] == ',' || s[i] == 'Z' || s[i] == '+' || s[i] == '-')) {
      ++i;
    }
  }
  s.remove_prefix(i);
  return true;
}

// syslog's "Aug 13 17:14:20.751285 " (and without fractions).
bool skip_syslog_stamp(std::string_view& s) {
  if (s.size() < 16 || !is_alpha(s[0]) || !is_alpha(s[1]) || !is_alpha(s[2]) || s[3] != ' ') return false;
  std::size_t i = 4;
  if (s[i] == ' ') ++i;
  if (!is_digit(s[i])) return false;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i + 9 > s.size() || s[i] != ' ' || !is_digit(s[i + 1]) || s[i + 3] != ':' || s[i + 6] != ':') return false;
  i += 1;
  while (i < s.size() && (is_digit(s[i]) || s[i] == ':' || s[i] == '.')) ++i;
  s.remove_prefix(i);
  return true;
}

// glog's "E0605 17:54:16.878770 178707 rdma_context.cpp:198] ": the thread id is kept as the line's thread.
bool skip_glog(std::string_view& s, std::string& thread) {
  if (s.size() < 24 || (s[0] != 'I' && s[0] != 'W' && s[0] != 'E' && s[0] != 'F') || !is_digit(s[1]) ||
      !is_digit(s[4]) || s[5] != ' ' || s[8] != ':') {
    return false;
  }
  std::size_t sp = s.find(' ', 6);
  if (sp == std::string_view::npos) return false;
  std::string_view t = skip_spaces(s.substr(sp));
  std::string_view tid = t;
  auto v = take_number(t, 10);
  if (!v || t.empty() || t.front() != ' ') return false;
  std::size_t close = t.find("] ");
  if (close == std::string_view::npos || close > 80) return false;
  thread = fmt::format("tid {}", std::string_view(tid.data(), static_cast<std::size_t>(t.data() - tid.data())));
  s = t.substr(close + 2);
  return true;
}

// "host:pid:tid" -> host, pid, thread; false when tok is not of that shape.
bool host_pid_tid(std::string_view tok, prefix& p) {
  std::size_t c2 = tok.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return false;
  std::size_t c1 = tok.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos || c1 == 0) return false;
  std::string_view pid_s = tok.substr(c1 + 1, c2 - c1 - 1);
  std::string_view tid_s = tok.substr(c2 + 1);
  if (pid_s.empty() || tid_s.empty() || pid_s.size() > 10 || !std::all_of(pid_s.begin(), pid_s.end(), is_digit) ||
      !std::all_of(tid_s.begin(), tid_s.end(), is_digit)) {
    return false;
  }
  p.host = escape_line(tok.substr(0, c1), 64);
  p.thread = escape_line(tok, 100);
  long v = 0;
  std::from_chars(pid_s.data(), pid_s.data() + pid_s.size(), v);
  p.pid = v;
  return true;
}

bool is_stamp(std::string_view inside) {
  return !inside.empty() && is_digit(inside.front()) && std::all_of(inside.begin(), inside.end(), [](char c) {
    return is_digit(c) || c == '-' || c == ':' || c == '.' || c == ' ' || c == 'T' || c == ',' || c == '+' ||
           c == 'Z' || c == '/';
  }) && inside.find_first_of(":.-") != std::string_view::npos;
}

// Launchers, collectors and timestamps, in any order, at most 10 of them.
void strip_launchers(std::string_view s, prefix& p) {
  for (int round = 0; round < 10; ++round) {
    s = skip_spaces(s);
    if (s.empty()) break;
    if (s.front() == '|') {  // a log collector's column separator ("  | 2025-05-16T16:39:51.208-07:00 | ...")
      s.remove_prefix(1);
      continue;
    }
    if (s.starts_with("[rank") || s.starts_with("rank ")) {  // torch "[rank3]:", a script's "rank 3: "
      std::string_view t = s.substr(5);
      if (auto r = take_number(t); r && (t.starts_with("]:") || t.starts_with(": "))) {
        p.rank = static_cast<int>(*r);
        s = t.substr(2);
        continue;
      }
    }
    if (s.front() == '[') {
      std::size_t close = s.find(']');
      if (close != std::string_view::npos && close < 100) {
        std::string_view inside = s.substr(1, close - 1);
        std::string_view after = s.substr(close + 1);
        if (std::size_t comma = inside.find(',');  // OpenMPI --tag-output: "[1,3]<stdout>:"
            comma != std::string_view::npos && (after.starts_with("<stdout>:") || after.starts_with("<stderr>:"))) {
          std::string_view r = inside.substr(comma + 1);
          if (auto v = take_number(r); v && r.empty()) p.rank = static_cast<int>(*v);
          s = after.substr(9);
          continue;
        }
        if (inside.starts_with("default") && after.starts_with(":")) {  // torchrun "[default0]:"
          s = after.substr(1);
          continue;
        }
        if (is_stamp(inside)) {  // "[2024-01-02 03:04:05]", "[1681107537.41]", dmesg "[ 1632.420956]"
          s = after;
          continue;
        }
        if (!inside.empty() && inside.front() == ' ' && is_stamp(skip_spaces(inside))) {
          s = after;
          continue;
        }
        // UCX's "[host:pid:tid]" (tid may be a thread index) and Open MPI's "[host:pid]".
        if (inside.find(' ') == std::string_view::npos && inside.find(':') != std::string_view::npos &&
            host_pid_tid(inside, p)) {
          s = after;
          continue;
        }
      }
      break;
    }
    if (skip_iso_timestamp(s) || skip_syslog_stamp(s)) continue;
    if (is_digit(s.front())) {  // srun -l: "3: "
      std::string_view t = s;
      if (auto r = take_number(t, 7); r && (t.starts_with(": ") || t == ":")) {
        p.rank = static_cast<int>(*r);
        s = t.substr(std::min<std::size_t>(2, t.size()));
        continue;
      }
    }
    std::size_t colon = s.find(": ");  // pdsh: "node17: " / "10.0.87.143: "
    if (colon != std::string_view::npos && colon > 0 && colon <= 64 && looks_like_host(s.substr(0, colon))) {
      if (p.host.empty()) p.host = std::string(s.substr(0, colon));
      s = s.substr(colon + 2);
      continue;
    }
    break;
  }
  p.rest = s;
}

// NCCL's own header: "host:pid:tid [dev] [file.cc:line] NCCL WARN msg" (NCCL <= 2.3: "... [dev] file.cu:line WARN msg").
void read_nccl_header(prefix& p) {
  std::string_view rest = p.rest;
  p.message = rest;
  std::size_t marker = rest.find("NCCL WARN ");
  std::size_t skip = 10;
  if (marker != std::string_view::npos) {
    p.warn = true;
  } else if ((marker = rest.find("NCCL INFO ")) != std::string_view::npos) {
    p.info = true;
  } else if ((marker = rest.find("] ")) != std::string_view::npos && marker < 120) {
    std::size_t w = rest.find(" WARN ", marker);
    if (w == std::string_view::npos || w > marker + 80) return;
    marker = w + 1;
    skip = 5;
    p.warn = true;
  } else {
    return;
  }
  std::string_view head = rest.substr(0, marker);
  p.message = rest.substr(marker + skip);
  if (!p.thread.empty() && !p.thread.starts_with("tid ")) return;  // a UCX/Open MPI header named it already
  std::size_t pos = 0;
  while (pos < head.size()) {  // the last "X:digits:digits" token of the header
    std::size_t end = head.find(' ', pos);
    if (end == std::string_view::npos) end = head.size();
    prefix q;
    if (host_pid_tid(head.substr(pos, end - pos), q)) {
      p.host = q.host;
      p.thread = q.thread;
      p.pid = q.pid;
    }
    pos = end + 1;
  }
}

}  // namespace

prefix read_prefix(std::string_view line) {
  prefix p;
  strip_launchers(line, p);
  std::string glog_thread;
  if (skip_glog(p.rest, glog_thread)) {
    if (p.thread.empty()) p.thread = glog_thread;
  }
  read_nccl_header(p);
  return p;
}
}  // namespace mrcheck::forms
