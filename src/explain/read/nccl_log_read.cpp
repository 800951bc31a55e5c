// The scanner's reading side (include/mrcheck/nccl_log.h): scan_fd's streaming of a log in bounded memory, and the
// listeners that only note what a line says about the job (the rank a process announced, what the job asked for).
#include <mrcheck/nccl_log.h>

#include "line_forms.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace mrcheck {

namespace {

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

}  // namespace

void nccl_log_scanner::note_rank(std::string_view line) {
  // "ncclCommInitRank comm 0x.. rank 6 nranks 8 cudaDev 6 ..." (2.x), "comm 0x.. rank 0 nRanks 2 ...",
  // "rank 1 nranks 2" (older): remember host:pid -> rank for events of that process that carry no prefix rank.
  std::size_t r = line.find(" rank ");
  if (r == std::string_view::npos) return;
  std::string_view t = line.substr(r + 6);
  int v = -1;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + std::min<std::size_t>(t.size(), 8), v);
  if (ec != std::errc() || v < 0) return;
  t.remove_prefix(static_cast<std::size_t>(ptr - t.data()));
  if (!(t.starts_with(" nranks ") || t.starts_with(" nRanks "))) return;
  // A process announces its rank on many lines; the NCCL header's "host:pid" is read in full only once.
  std::size_t info = line.find(" NCCL INFO ");
  if (info != std::string_view::npos) {
    std::string_view head = line.substr(0, info);
    std::size_t dev = head.rfind(" [");
    std::string_view tok = head.substr(0, dev == std::string_view::npos ? 0 : dev);
    tok = tok.substr(tok.rfind(' ') == std::string_view::npos ? 0 : tok.rfind(' ') + 1);
    tok = tok.substr(0, tok.rfind(':'));
    if (!tok.empty() && !seen_processes_.insert(std::hash<std::string_view>{}(tok)).second) return;
    if (seen_processes_.size() > limits_.max_pid_ranks) seen_processes_.clear();
  }
  forms::prefix p = forms::read_prefix(line);
  if (p.host.empty() || !p.pid) return;
  if (pid_rank_.size() >= limits_.max_pid_ranks) return;
  pid_rank_.try_emplace(fmt::format("{}:{}", p.host, *p.pid), v);
}

void nccl_log_scanner::note_env(std::string_view line) {
  if (std::size_t at = line.find("NCCL_IB_HCA"); at != std::string_view::npos) {
    std::string_view t = line.substr(at + 11);
    if (t.starts_with(" set") || (t.starts_with("=") && t.size() > 1)) asked_ib_ = true;
  }
  for (std::size_t at = line.find("NCCL_NET"); at != std::string_view::npos; at = line.find("NCCL_NET", at + 8)) {
    std::string_view t = line.substr(at + 8);
    if (t.starts_with(" set by environment to "))
      t.remove_prefix(23);
    else if (t.starts_with("="))
      t.remove_prefix(1);
    else
      continue;
    if (t.starts_with("\"") || t.starts_with("'")) t.remove_prefix(1);
    if (t.starts_with("IB") && (t.size() == 2 || !std::isalnum(static_cast<unsigned char>(t[2])))) asked_ib_ = true;
  }
  if (stack_unsafe_line_ == 0 && contains(line, "Stack size limit") && contains(line, "is unsafe")) {
    stack_unsafe_line_ = lines_;
  }
}

status scan_fd(int fd, nccl_log_scanner& scanner, const line_observer& also) {
  std::size_t number = 0;
  const std::size_t max_line = scanner.caps().max_line;
  std::vector<char> buf(256 * 1024);
  std::string line;  // only a line that spans two reads is copied
  bool truncated = false;
  auto feed = [&](std::string_view l, bool cut) {
    scanner.feed_line(l, cut);
    ++number;
    if (also && (scanner.last_line_container() || scanner.last_line_net_ib() || scanner.last_line_path())) {
      also(l, number);
    }
  };
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return status::from_errno("read log", errno);
    }
    if (n == 0) break;
    const char* p = buf.data();
    const char* end = p + n;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = nl ? nl : end;
      const std::size_t len = static_cast<std::size_t>(stop - p);
      if (nl != nullptr && line.empty() && !truncated) {  // the whole line is in the buffer
        if (len > max_line) {
          feed(std::string_view(p, max_line), true);
        } else {
          feed(std::string_view(p, len), false);
        }
        p = nl + 1;
        continue;
      }
      std::size_t room = max_line > line.size() ? max_line - line.size() : 0;
      if (len > room) truncated = true;
      line.append(p, std::min(len, room));
      if (nl == nullptr) break;
      feed(line, truncated);
      line.clear();
      truncated = false;
      p = nl + 1;
    }
  }
  if (!line.empty() || truncated) feed(line, truncated);
  return status::ok();
}

}  // namespace mrcheck
