// The NCCL log scanner. Plain string_view searches, no std::regex: a regex on a 64 KiB line of garbage can
// recurse deeply, and the scanner must stream a 1 GiB log at close to read speed.
#include <mrcheck/nccl_log.h>

#include "line_forms.h"
#include "text.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_examined = 64 * 1024;
constexpr std::size_t k_text_max = 300;

using forms::text::contains;  // src/explain/read/text.h: the readers' shared helpers
using forms::text::icontains;

// The text between the first pair of single quotes: NCCL's "Cuda failure 'out of memory'".
std::string quoted(std::string_view s) {
  std::size_t a = s.find('\'');
  if (a == std::string_view::npos) return {};
  std::size_t b = s.find('\'', a + 1);
  if (b == std::string_view::npos || b - a > 80) return {};
  return escape_line(s.substr(a + 1, b - a - 1), 64);
}

// A WARN that NCCL failed on: what it names, when it is one of the known ones.
failure classify_warning(std::string_view msg) {
  failure f;
  f.what = failure::kind::fatal_warning;
  if (icontains(msg, "cuda failure")) {
    f.call = "cuda";
    f.detail = quoted(msg);
    return f;
  }
  if (icontains(msg, "socket creation failed")) {
    f.call = "socket";
  } else if (icontains(msg, "connect") && icontains(msg, "socket")) {
    f.call = "connect";
  } else if (contains(msg, "real path")) {
    f.call = "realpath";
  } else if (contains(msg, "libibverbs")) {
    f.call = "dlopen";
  }
  f.err = forms::errno_in(msg);
  return f;
}

// NCCL's return trace: "NCCL INFO transport/net.cc:223 -> 2" (a non-zero ncclResult_t climbing the stack), with
// an optional " [Async thread]" / " [Proxy Thread]" after it.
bool is_return_trace(std::string_view msg) {
  std::size_t arrow = msg.find(" -> ");
  if (arrow == std::string_view::npos || arrow == 0 || arrow > 120) return false;
  std::string_view where = msg.substr(0, arrow);
  std::size_t colon = where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == where.size() || where.find(' ') != std::string_view::npos) {
    return false;
  }
  if (!std::all_of(where.begin() + static_cast<std::ptrdiff_t>(colon) + 1, where.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  std::string_view code = msg.substr(arrow + 4);
  if (code.size() < 1 || code[0] < '1' || code[0] > '7') return false;
  code.remove_prefix(1);
  return code.empty() || code.starts_with(" [");
}

// A library's return trace with an errno: "CtranIb.cc:796 -> 524 (Unknown error 524)"; 0 when the line is not one.
int errno_trace(std::string_view msg) {
  std::size_t arrow = msg.find(" -> ");
  if (arrow == std::string_view::npos || arrow > 200) return 0;
  std::string_view t = msg.substr(arrow + 4);
  if (t.starts_with("-")) t.remove_prefix(1);
  std::size_t paren = t.find(" (");
  if (paren == std::string_view::npos || paren > 5) return 0;
  return forms::errno_in(t.substr(paren));
}

// The first rank of "Duplicate GPU detected : rank A and rank B ...".
std::optional<int> duplicate_gpu_rank(std::string_view message) {
  std::size_t at = message.find("Duplicate GPU");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view t = message.substr(at);
  std::size_t r = t.find("rank ");
  if (r == std::string_view::npos) return std::nullopt;
  int v = -1;
  auto [ptr, ec] = std::from_chars(t.data() + r + 5, t.data() + std::min(t.size(), r + 12), v);
  if (ec != std::errc() || v < 0) return std::nullopt;
  return v;
}

nccl_event event_from(const forms::prefix& p, const forms::match& m) {
  nccl_event ev;
  ev.what = m.what;
  ev.rank = p.rank;
  ev.host = p.host;
  ev.pid = p.pid;
  ev.text = escape_line(p.message, k_text_max);
  return ev;
}

}  // namespace

int errno_in_text(std::string_view text) { return forms::errno_in(text); }

std::optional<nccl_event> parse_nccl_line(std::string_view line) {
  if (line.size() > k_max_examined) line = line.substr(0, k_max_examined);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if ((forms::classify(line) & forms::k_form) == 0) return std::nullopt;
  forms::prefix p = forms::read_prefix(line);
  std::optional<forms::match> m = forms::match_line(p);
  if (!m) return std::nullopt;
  nccl_event ev = event_from(p, *m);
  if (m->what.what == failure::kind::duplicate_gpu && !ev.rank) ev.rank = duplicate_gpu_rank(p.message);
  return ev;
}

nccl_group* nccl_log_scanner::group_for(const failure& f, std::uint64_t line) {
  for (nccl_group& g : groups_) {
    if (g.what.what == f.what && g.what.call == f.call && g.what.err == f.err && g.what.wc_status == f.wc_status &&
        g.what.transport == f.transport && g.what.detail == f.detail) {
      return &g;
    }
  }
  if (groups_.size() >= limits_.max_groups) return nullptr;
  nccl_group& g = groups_.emplace_back();
  g.what = f;
  g.first_line = line;
  return &g;
}

void nccl_log_scanner::add(nccl_group& g, const nccl_event& e, std::uint64_t line) {
  ++g.count;
  // A promoted WARN can be older than lines already in its group: keep the list sorted and first_line the least.
  if (line < g.first_line) g.first_line = line;
  auto at = std::upper_bound(g.lines.begin(), g.lines.end(), line);
  if (at != g.lines.end() || g.lines.size() < k_max_lines_kept) {
    g.lines.insert(at, line);
    if (g.lines.size() > k_max_lines_kept) g.lines.pop_back();
  }
  if (g.example.empty()) g.example = e.text;
  if (e.rank) {
    if (g.ranks.size() < limits_.max_ranks || g.ranks.count(*e.rank)) {
      g.ranks.insert(*e.rank);
    } else {
      g.ranks_capped = true;
    }
  }
  if (!e.host.empty()) {
    if (g.hosts.size() < limits_.max_hosts || g.hosts.count(e.host)) {
      g.hosts.insert(e.host);
    } else {
      g.hosts_capped = true;
    }
  }
  if (!e.host.empty() && e.pid && g.processes.size() < limits_.max_processes) {
    g.processes.insert(fmt::format("{}:{}", e.host, *e.pid));
  }
}

void nccl_log_scanner::fill_rank(nccl_event& e) const {
  if (!e.rank && e.pid && !e.host.empty()) {
    if (auto it = pid_rank_.find(fmt::format("{}:{}", e.host, *e.pid)); it != pid_rank_.end()) e.rank = it->second;
  }
}

const nccl_event* nccl_log_scanner::promote(std::size_t index) {
  pending_warn w = std::move(recent_warn_[index]);
  std::vector<std::string> before;
  for (std::size_t i = 0; i < index; ++i) before.push_back(recent_warn_[i].text);
  recent_warn_.erase(recent_warn_.begin(), recent_warn_.begin() + static_cast<std::ptrdiff_t>(index) + 1);
  // Further WARNs of the same thread are the same failure told again ("Failed to CUDA calloc N bytes").
  std::uint64_t echoes = 0;
  if (!w.thread.empty()) {
    echoes = static_cast<std::uint64_t>(
        std::erase_if(recent_warn_, [&](const pending_warn& p) { return p.thread == w.thread; }));
  }
  fill_rank(w.event);
  promoted_ = w.event;
  nccl_group* g = group_for(w.event.what, w.line);
  if (g == nullptr) {
    ++dropped_;
    return nullptr;
  }
  const bool fresh = g->count == 0;
  add(*g, w.event, w.line);
  g->consequences += echoes;
  if (fresh) g->context = std::move(before);
  last_failure_ = static_cast<std::size_t>(g - groups_.data());
  last_failure_line_ = lines_;
  return &promoted_;
}

bool nccl_log_scanner::note_warning(std::string_view line) {
  forms::prefix p = forms::read_prefix(line);
  if (p.warn) {
    // The same thread telling the failure just counted again ("Cuda failure 'out of memory'", then "Failed to CUDA
    // calloc 6291456 bytes"): a consequence, not a warning that waits.
    if (last_failure_ && !p.thread.empty() && p.thread == last_failure_thread_ &&
        lines_ - last_failure_line_ <= k_trace_window) {
      ++groups_[*last_failure_].consequences;
      return false;
    }
    if (limits_.recent_warnings == 0) return false;
    if (recent_warn_.size() >= limits_.recent_warnings) recent_warn_.pop_front();
    pending_warn& w = recent_warn_.emplace_back();
    w.text = escape_line(p.message, 200);
    w.thread = p.thread;
    w.line = lines_;
    w.event.what = classify_warning(p.message);
    w.event.host = p.host;
    w.event.pid = p.pid;
    w.event.rank = p.rank;
    w.event.text = escape_line(p.message, k_text_max);
    return false;
  }
  // The return trace right after a WARN of the same thread: NCCL is failing on what that WARN says.
  // A log without NCCL's host:pid:tid headers (a launcher's "[0] " only) ties a trace to the thread-less WARN.
  if (p.info && is_return_trace(p.message)) {
    for (std::size_t i = 0; i < recent_warn_.size(); ++i) {
      const pending_warn& w = recent_warn_[i];
      if (w.thread == p.thread && lines_ - w.line <= k_trace_window && w.line > last_failure_line_) {
        promote(i);
        return true;
      }
    }
  }
  return false;
}

// The line after a framework's "Last error:" is the text of NCCL's last WARN (torch's DistBackendError, ...): the
// failure itself when no form reads it.
std::optional<nccl_event> nccl_log_scanner::last_error_line(std::string_view line) {
  forms::prefix p = forms::read_prefix(line);
  std::string_view msg = p.message;
  while (!msg.empty() && msg.front() == ' ') msg.remove_prefix(1);
  if (msg.empty()) return std::nullopt;
  nccl_event ev;
  ev.what = classify_warning(msg);
  ev.rank = p.rank;
  ev.host = p.host;
  ev.pid = p.pid;
  ev.text = escape_line(msg, k_text_max);
  nccl_group* g = group_for(ev.what, lines_);
  if (g == nullptr) {
    ++dropped_;
    return ev;
  }
  add(*g, ev, lines_);
  last_failure_ = static_cast<std::size_t>(g - groups_.data());
  last_failure_line_ = lines_;
  return ev;
}

std::optional<nccl_event> nccl_log_scanner::feed_line(std::string_view line, bool truncated) {
  ++lines_;
  bytes_ += line.size() + 1;
  if (truncated) ++truncated_;
  if (line.size() > limits_.max_line) line = line.substr(0, limits_.max_line);
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  // One pass over the line says which of the work below can apply; the ordinary line stops here.
  const unsigned cls = forms::classify(line);
  last_class_ = cls;
  // Warnings too old to be tied to anything any more (attach_window) stop costing a search per line.
  while (!recent_warn_.empty() && lines_ - recent_warn_.front().line > limits_.attach_window) recent_warn_.pop_front();
  const bool after_last_error = last_error_at_ != 0 && last_error_at_ + 1 == lines_;
  if (cls == 0 && recent_warn_.empty() && !after_last_error) return std::nullopt;
  if ((cls & forms::k_rank) != 0) note_rank(line);
  if ((cls & forms::k_env) != 0) note_env(line);
  if ((cls & (forms::k_net_ib | forms::k_path)) != 0 && !log_gpu_) {
    log_gpu_ = contains(line, "/GDRDMA") || contains(line, "GPU Direct RDMA Enabled");
  }

  // A line without a form's anchor (a rank announcement, a NET/IB or path line) builds no prefix and no event.
  if ((cls & forms::k_form) == 0) return after_last_error ? last_error_line(line) : no_event(line, {}, {}, cls);
  return form_line(line, cls, after_last_error);
}

// A line the cheap rejection let through for the form table: the event of the form it matches, the line after a
// framework's "Last error:", or a WARN or return trace.
std::optional<nccl_event> nccl_log_scanner::form_line(std::string_view line, unsigned cls, bool after_last_error) {
  forms::prefix p = forms::read_prefix(line);
  if (std::optional<forms::match> m = forms::match_line(p)) return record(event_from(p, *m), p.thread, p.message);
  if (p.message.ends_with("Last error:")) {
    last_error_at_ = lines_;
    return std::nullopt;
  }
  if (after_last_error) return last_error_line(line);
  return no_event(line, p.thread, p.message, cls);
}

// A line no form read: a library's errno trace, or NCCL's return trace promoting a WARN that waits for it.
std::optional<nccl_event> nccl_log_scanner::no_event(std::string_view line, std::string_view thread,
                                                     std::string_view message, unsigned cls) {
  // A library's errno trace at error level ("CTRAN ERROR file.cc:796 -> 524 (Unknown error 524)"): the errno of
  // the failure the same thread reports next.
  if ((cls & forms::k_form) != 0 && !thread.empty()) {
    if (int e = errno_trace(message); e != 0) {
      if (errno_traces_.size() >= 16) errno_traces_.erase(errno_traces_.begin());
      errno_traces_[std::string(thread)] = {e, lines_};
      return std::nullopt;
    }
  }
  // NCCL's return trace ("file.cc:223 -> 2") matters only while a WARN waits for it.
  if (((cls & forms::k_warn) != 0 || (!recent_warn_.empty() && line.find(" -> ") != std::string_view::npos)) &&
      note_warning(line)) {
    return promoted_;
  }
  return std::nullopt;
}

// An event: an echo of the failure before it, the WARN a terminal line promotes, or a failure of its own group.
std::optional<nccl_event> nccl_log_scanner::record(nccl_event event, std::string_view thread,
                                                   std::string_view message) {
  std::optional<nccl_event> ev(std::move(event));
  if (ev->what.err == 0 && !thread.empty()) {
    if (auto it = errno_traces_.find(std::string(thread)); it != errno_traces_.end()) {
      if (lines_ - it->second.second <= k_trace_window) ev->what.err = it->second.first;
      errno_traces_.erase(it);
    }
  }
  if (ev->what.what == failure::kind::duplicate_gpu && !ev->rank) ev->rank = duplicate_gpu_rank(message);
  fill_rank(*ev);

  const failure& f = ev->what;
  const bool recent_failure = last_failure_ && lines_ - last_failure_line_ <= limits_.attach_window;
  // Echoes of a failure already counted: NCCL's "unhandled system error" that ends the chain, and a generic
  // "Failed to register memory" right after the "Call to ibv_reg_mr... failed with error ..." that caused it.
  bool is_echo = f.what == failure::kind::system_error ||
                 (f.what == failure::kind::call && f.call.empty() && f.err == 0);
  // libfabric and aws-ofi-nccl report one failed call at each layer, the errno rewritten on the way up
  // ("Unable to create extended CQ: Cannot allocate memory", then "... CQ: Invalid argument", then NET/OFI
  // "Couldn't open CQ. RC: -22"): the same call failing again right after is that failure, not a new one.
  // The same holds for another call creating the same object (fi_mr_reg then efa_mr_regattr's fi_mr_regattr,
  // rdma_create_qp then fi_enable).
  if (!is_echo && recent_failure && is_ofi_family(f) && !f.call.empty() &&
      lines_ - last_failure_line_ <= k_trace_window && is_ofi_family(groups_[*last_failure_].what)) {
    const failure& last = groups_[*last_failure_].what;
    if (last.call == f.call) {
      is_echo = last.err != f.err;
    } else {
      is_echo = !hca_object(f.call).empty() && hca_object(f.call) == hca_object(last.call);
    }
  }
  if (is_echo && recent_failure) {
    ++groups_[*last_failure_].consequences;
    return std::nullopt;
  }
  // A terminal "unhandled ... error" with a WARN shortly before it and no recognised failure: that WARN is what
  // NCCL failed on.
  if (f.what == failure::kind::system_error && !recent_warn_.empty() &&
      lines_ - recent_warn_.front().line <= limits_.attach_window) {
    const nccl_event* promoted = promote(0);
    if (promoted == nullptr) return ev;
    ++groups_[*last_failure_].consequences;
    return *promoted;
  }
  nccl_group* g = group_for(f, lines_);
  if (g == nullptr) {
    ++dropped_;
    return ev;
  }
  const bool fresh = g->count == 0;
  add(*g, *ev, lines_);
  if (f.what == failure::kind::system_error && fresh) {
    for (const pending_warn& w : recent_warn_) g->context.push_back(w.text);
  }
  if (f.what != failure::kind::system_error && f.what != failure::kind::no_device) {
    last_failure_ = static_cast<std::size_t>(g - groups_.data());
    last_failure_line_ = lines_;
    last_failure_thread_ = std::string(thread);
  }
  return ev;
}

std::vector<const nccl_group*> nccl_log_scanner::groups() const {
  std::vector<const nccl_group*> out;
  out.reserve(groups_.size());
  for (const nccl_group& g : groups_) out.push_back(&g);
  std::stable_sort(out.begin(), out.end(),
                   [](const nccl_group* a, const nccl_group* b) { return a->first_line < b->first_line; });
  return out;
}

}  // namespace mrcheck
