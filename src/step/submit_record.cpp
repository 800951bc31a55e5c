// MRCHECK_SUBMIT: what srun/sbatch saw on the submit host, carried to the node in the job environment.
// The node treats it as untrusted text: strict grammar, bounded sizes, and it only ever feeds the report.
//
// Grammar: "1|t=<tool>|h=<host>|s=<sent or '-'>|j=<job id or '-'>|c=<hop>;<hop>..."
//          hop = <pid>:<comm>:<soft>:<hard>, soft/hard = decimal | "u" (unlimited) | "?" (unreadable)
//          text fields are %XX-escaped outside [A-Za-z0-9._+-].
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include <charconv>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_field = 64;

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '+' || c == '-';
}

std::string esc(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, k_max_field)) {
    if (plain(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

result<std::string> unesc(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '%') {
      if (i + 2 >= s.size()) return status::error("truncated %-escape");
      unsigned v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec != std::errc() || p != s.data() + i + 3) return status::error("bad %-escape");
      out.push_back(static_cast<char>(v));
      i += 2;
    } else if (plain(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      return status::error("unescaped character");
    }
    if (out.size() > k_max_field) return status::error("field too long");
  }
  return out;
}

std::string limit_text(std::uint64_t v) { return v == k_unlimited ? "u" : std::to_string(v); }

result<std::uint64_t> parse_u64(std::string_view s) {
  if (s == "u") return k_unlimited;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return status::error("bad number");
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s = s.substr(p + 1);
  }
  return out;
}

std::string hop_text(const submit_hop& h) {
  std::string mem = h.memlock ? limit_text(h.memlock->soft) + ":" + limit_text(h.memlock->hard) : "?:?";
  return fmt::format("{}:{}:{}", h.pid, esc(h.comm), mem);
}

}  // namespace

submit_record make_submit_record(std::string tool, std::string host, std::optional<std::string> sent,
                                 std::string job_id, const std::vector<process_fact>& chain) {
  submit_record r;
  r.tool = std::move(tool);
  r.host = std::move(host);
  r.sent = std::move(sent);
  r.job_id = std::move(job_id);
  for (const auto& p : chain) {
    if (r.chain.size() >= k_submit_max_hops) break;
    submit_hop h;
    h.pid = p.pid;
    h.comm = p.comm.substr(0, k_max_field);
    if (p.memlock) h.memlock = *p.memlock;
    r.chain.push_back(std::move(h));
  }
  return r;
}

std::string encode_submit_record(const submit_record& r) {
  std::string head = fmt::format("1|t={}|h={}|s={}|j={}|c=", esc(r.tool), esc(r.host),
                                 r.sent ? esc(*r.sent) : std::string("-"), r.job_id.empty() ? "-" : esc(r.job_id));
  if (head.size() > k_submit_record_max) head.resize(k_submit_record_max);
  std::string out = head;
  bool first = true;
  for (std::size_t i = 0; i < r.chain.size() && i < k_submit_max_hops; ++i) {
    std::string h = hop_text(r.chain[i]);
    if (out.size() + h.size() + 1 > k_submit_record_max) break;  // drop the oldest ancestors
    if (!first) out.push_back(';');
    out += h;
    first = false;
  }
  return out;
}

result<submit_record> decode_submit_record(std::string_view text) {
  if (text.size() > k_submit_record_max) return status::error("MRCHECK_SUBMIT is longer than 1024 bytes");
  auto fields = split(text, '|');
  if (fields.size() != 6 || fields[0] != "1") return status::error("MRCHECK_SUBMIT has an unknown format");
  submit_record r;
  auto get = [&](std::size_t i, std::string_view key) -> result<std::string_view> {
    if (!fields[i].starts_with(key)) return status::error(fmt::format("MRCHECK_SUBMIT: expected '{}'", key));
    return fields[i].substr(key.size());
  };
  auto t = get(1, "t=");
  auto h = get(2, "h=");
  auto s = get(3, "s=");
  auto j = get(4, "j=");
  auto c = get(5, "c=");
  for (const auto* f : {&t, &h, &s, &j, &c}) {
    if (!*f) return f->error();
  }
  auto tool = unesc(*t);
  if (!tool || (*tool != "srun" && *tool != "sbatch" && *tool != "salloc")) {
    return status::error("MRCHECK_SUBMIT: bad tool");
  }
  r.tool = *tool;
  auto host = unesc(*h);
  if (!host) return status::error("MRCHECK_SUBMIT: bad host: " + host.error().message());
  // The record is user-controlled and the host is printed on the user's terminal and in admin logs: accept
  // only what a hostname can be (fuzz finding F1: a forged "%0A..." host reached stderr unescaped).
  if (host->empty() || host->size() > 255 || !std::all_of(host->begin(), host->end(), [](unsigned char ch) {
        return std::isalnum(ch) || ch == '.' || ch == '-' || ch == '_';
      })) {
    return status::error("MRCHECK_SUBMIT: bad host");
  }
  r.host = *host;
  if (*s != "-") {
    auto sent = unesc(*s);
    if (!sent || !parse_propagated_limit(*sent)) return status::error("MRCHECK_SUBMIT: bad sent value");
    r.sent = *sent;
  }
  if (*j != "-") {
    auto job = unesc(*j);
    if (!job || !parse_u64(*job) || *job == "u") return status::error("MRCHECK_SUBMIT: bad job id");
    r.job_id = *job;
  }
  if (!c->empty()) {
    auto hops = split(*c, ';');
    if (hops.size() > k_submit_max_hops) return status::error("MRCHECK_SUBMIT: too many hops");
    for (auto hop : hops) {
      auto parts = split(hop, ':');
      if (parts.size() != 4) return status::error("MRCHECK_SUBMIT: bad hop");
      submit_hop sh;
      auto pid = parse_u64(parts[0]);
      if (!pid || *pid == k_unlimited || *pid == 0 || *pid > 0x3fffffff)
        return status::error("MRCHECK_SUBMIT: bad pid");
      sh.pid = static_cast<pid_t>(*pid);
      auto comm = unesc(parts[1]);
      if (!comm) return status::error("MRCHECK_SUBMIT: bad comm");
      sh.comm = *comm;
      if (parts[2] != "?" || parts[3] != "?") {
        auto soft = parse_u64(parts[2]);
        auto hard = parse_u64(parts[3]);
        if (!soft || !hard) return status::error("MRCHECK_SUBMIT: bad limit");
        sh.memlock = memlock_limit{*soft, *hard};
      }
      r.chain.push_back(std::move(sh));
    }
  }
  return r;
}

std::uint64_t slurmstepd_soft(const propagated_limit& v, const memlock_limit& cur) {
  if (v.value == cur.soft) return cur.soft;
  std::uint64_t soft = v.value;
  if (!v.user_requested && soft > cur.hard) soft = cur.hard;
  if (soft > cur.hard) return cur.soft;  // setrlimit(): EINVAL, the limit stays
  return soft;
}

}  // namespace mrcheck
