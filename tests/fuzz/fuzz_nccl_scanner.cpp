// nccl_log_scanner and scan_fd(): a whole job log (stdout/stderr files users hand to `mrcheck explain`, or the
// output of NCCL ranks captured by the smoke test). Every table must stay bounded whatever the log holds.
// The log is scanned twice: with the default caps, and with tiny caps so the fuzzer reaches every cap quickly.
// Invariants: events returned = events counted in groups + dropped; tables within their caps; groups in order
// of first line and their line numbers rising; every kept string printable; scan_fd() over a memfd sees exactly
// what feeding the same lines by hand does (the 64 KiB read buffer and line cutting change nothing).
#include "fuzz_common.h"

#include <mrcheck/nccl_log.h>

#include <vector>

namespace {

using mrcheck::nccl_log_scanner;
using mrcheck::fuzz::printable_ascii;

// Feeds `text` line by line as scan_fd() documents it, and checks the per-event invariants.
void feed_by_hand(nccl_log_scanner& s, std::string_view text, std::uint64_t& events) {
  const std::size_t max_line = s.caps().max_line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    bool last = nl == std::string_view::npos;
    std::string_view line = text.substr(pos, last ? std::string_view::npos : nl - pos);
    pos = last ? text.size() : nl + 1;
    bool truncated = line.size() > max_line;
    if (truncated) line = line.substr(0, max_line);
    auto ev = s.feed_line(line, truncated);
    if (ev) {
      ++events;
      MRCHECK_FUZZ_REQUIRE(printable_ascii(ev->text) && printable_ascii(ev->host), ev->text);
    }
  }
}

void check_tables(const nccl_log_scanner& s, std::uint64_t events) {
  const auto& caps = s.caps();
  auto groups = s.groups();
  MRCHECK_FUZZ_REQUIRE(groups.size() <= caps.max_groups, "groups past the cap");
  std::uint64_t counted = 0;
  std::uint64_t prev_first = 0;
  for (const auto* g : groups) {
    counted += g->count;
    MRCHECK_FUZZ_REQUIRE(g->count > 0, "empty group");
    MRCHECK_FUZZ_REQUIRE(g->first_line >= prev_first && g->first_line >= 1 && g->first_line <= s.lines(), "order");
    prev_first = g->first_line;
    MRCHECK_FUZZ_REQUIRE(g->lines.size() <= nccl_log_scanner::k_max_lines_kept && !g->lines.empty(), "lines kept");
    MRCHECK_FUZZ_REQUIRE(g->lines.front() == g->first_line, "first line");
    for (std::size_t i = 1; i < g->lines.size(); ++i) MRCHECK_FUZZ_REQUIRE(g->lines[i] > g->lines[i - 1], "lines");
    MRCHECK_FUZZ_REQUIRE(g->ranks.size() <= caps.max_ranks, "ranks past the cap");
    MRCHECK_FUZZ_REQUIRE(g->hosts.size() <= caps.max_hosts, "hosts past the cap");
    MRCHECK_FUZZ_REQUIRE(g->processes.size() <= caps.max_processes, "processes past the cap");
    MRCHECK_FUZZ_REQUIRE(g->context.size() <= caps.recent_warnings, "context past the cap");
    MRCHECK_FUZZ_REQUIRE(printable_ascii(g->example) && g->example.size() <= 300, g->example);
    MRCHECK_FUZZ_REQUIRE(printable_ascii(g->what.call) && printable_ascii(g->what.peer), g->what.call);
    MRCHECK_FUZZ_REQUIRE(printable_ascii(g->what.provider) && printable_ascii(g->what.detail), g->what.provider);
    for (const auto& h : g->hosts) MRCHECK_FUZZ_REQUIRE(printable_ascii(h) && h.size() <= 64, h);
    for (const auto& p : g->processes) MRCHECK_FUZZ_REQUIRE(printable_ascii(p), p);
    for (const auto& c : g->context) MRCHECK_FUZZ_REQUIRE(printable_ascii(c) && c.size() <= 200, c);
    for (int r : g->ranks) MRCHECK_FUZZ_REQUIRE(r >= 0, "negative rank");
  }
  MRCHECK_FUZZ_REQUIRE(counted + s.dropped_events() == events, "events lost or counted twice");
}

bool same_groups(const nccl_log_scanner& a, const nccl_log_scanner& b) {
  auto ga = a.groups();
  auto gb = b.groups();
  if (ga.size() != gb.size() || a.lines() != b.lines() || a.truncated_lines() != b.truncated_lines() ||
      a.dropped_events() != b.dropped_events()) {
    return false;
  }
  for (std::size_t i = 0; i < ga.size(); ++i) {
    const auto& x = *ga[i];
    const auto& y = *gb[i];
    if (x.count != y.count || x.lines != y.lines || x.ranks != y.ranks || x.hosts != y.hosts ||
        x.example != y.example || x.context != y.context || x.consequences != y.consequences ||
        x.what.call != y.what.call || x.what.err != y.what.err) {
      return false;
    }
  }
  return true;
}

void run(std::string_view text, nccl_log_scanner::limits caps) {
  nccl_log_scanner by_hand(caps);
  std::uint64_t events = 0;
  feed_by_hand(by_hand, text, events);
  check_tables(by_hand, events);

  nccl_log_scanner from_fd(caps);
  mrcheck::fuzz::memfile f(text);
  auto s = mrcheck::scan_fd(f.fd(), from_fd);
  MRCHECK_FUZZ_REQUIRE(s.is_ok(), s.message());
  MRCHECK_FUZZ_REQUIRE(same_groups(by_hand, from_fd), "scan_fd and feed_line disagree");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text = mrcheck::fuzz::as_text(data, size);
  run(text, nccl_log_scanner::limits{});
  nccl_log_scanner::limits tiny;
  tiny.max_line = 96;
  tiny.max_groups = 2;
  tiny.max_ranks = 2;
  tiny.max_hosts = 2;
  tiny.max_processes = 2;
  tiny.max_pid_ranks = 2;
  tiny.recent_warnings = 1;
  tiny.attach_window = 3;
  run(text, tiny);
  return 0;
}
