// The NCCL log scanner. Plain string_view searches, no std::regex: a regex on a 64 KiB line of garbage can
// recurse deeply, and the scanner must stream a 1 GiB log at close to read speed.
#include <mrcheck/nccl_log.h>

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

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view skip_spaces(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// Parses a non-negative int at the start of s; advances s past it.
std::optional<long> take_number(std::string_view& s, std::size_t max_digits = 9) {
  std::size_t n = 0;
  while (n < s.size() && n < max_digits + 1 && is_digit(s[n])) ++n;
  if (n == 0 || n > max_digits) return std::nullopt;
  long v = 0;
  std::from_chars(s.data(), s.data() + n, v);
  s.remove_prefix(n);
  return v;
}

bool icontains(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// pdsh/clush "host: " prefixes: lower-case host names or addresses with a digit, so "RuntimeError: " and
// "torch.distributed.DistBackendError: " are not taken for hosts.
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

struct prefix_info {
  std::optional<int> rank;
  std::string host;  // pdsh prefix
  std::string_view rest;
};

// Skips "2024-01-02T03:04:05.123Z", "2024-01-02 03:04:05,123" and the like at the start of s.
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

prefix_info strip_prefixes(std::string_view s) {
  prefix_info p;
  for (int round = 0; round < 8; ++round) {
    s = skip_spaces(s);
    if (s.empty()) break;
    if (s.starts_with("[rank")) {  // torch: "[rank3]:"
      std::string_view t = s.substr(5);
      if (auto r = take_number(t); r && t.starts_with("]:")) {
        p.rank = static_cast<int>(*r);
        s = t.substr(2);
        continue;
      }
    }
    if (s.front() == '[') {
      std::size_t close = s.find(']');
      if (close != std::string_view::npos && close < 64) {
        std::string_view inside = s.substr(1, close - 1);
        std::string_view after = s.substr(close + 1);
        // OpenMPI --tag-output: "[1,3]<stdout>:"
        if (std::size_t comma = inside.find(',');
            comma != std::string_view::npos && (after.starts_with("<stdout>:") || after.starts_with("<stderr>:"))) {
          std::string_view r = inside.substr(comma + 1);
          if (auto v = take_number(r); v && r.empty()) p.rank = static_cast<int>(*v);
          s = after.substr(9);
          continue;
        }
        // torchrun "[default0]:" (a local rank: not kept) and timestamps "[2024-01-02 03:04:05]", "[1681107537.41]"
        if (inside.starts_with("default") && after.starts_with(":")) {
          s = after.substr(1);
          continue;
        }
        bool stamp = !inside.empty() && is_digit(inside.front()) &&
                     std::all_of(inside.begin(), inside.end(),
                                 [](char c) {
                                   return is_digit(c) || c == '-' || c == ':' || c == '.' || c == ' ' || c == 'T' ||
                                          c == ',' || c == '+' || c == 'Z' || c == '/';
                                 }) &&
                     inside.find_first_of(":.-") != std::string_view::npos;
        if (stamp) {
          s = after;
          continue;
        }
      }
      break;
    }
    if (skip_iso_timestamp(s)) continue;
    if (is_digit(s.front())) {  // srun -l: "3: "
      std::string_view t = s;
      if (auto r = take_number(t, 7); r && (t.starts_with(": ") || t == ":")) {
        p.rank = static_cast<int>(*r);
        s = t.substr(std::min<std::size_t>(2, t.size()));
        continue;
      }
    }
    // pdsh: "node17: " / "10.0.87.143: "
    std::size_t colon = s.find(": ");
    if (colon != std::string_view::npos && colon > 0 && colon <= 64 && looks_like_host(s.substr(0, colon)) &&
        s.substr(0, colon).find(' ') == std::string_view::npos) {
      if (p.host.empty()) p.host = std::string(s.substr(0, colon));
      s = s.substr(colon + 2);
      continue;
    }
    break;
  }
  p.rest = s;
  return p;
}

struct nccl_header {
  std::string host;
  std::string thread;  // "host:pid:tid", escaped; "" when the line has no NCCL header
  std::optional<long> pid;
  std::string_view message;  // after "NCCL WARN " / "NCCL INFO " when present, else the whole rest
  bool warn = false;
  bool info = false;
};

// NCCL's own prefix: "host:pid:tid [dev] [file.cc:line] NCCL WARN msg" (older: "... [dev] file.cu:line WARN msg").
nccl_header parse_header(std::string_view rest) {
  nccl_header h;
  h.message = rest;
  std::size_t marker = rest.find("NCCL WARN ");
  std::size_t skip = 10;
  if (marker != std::string_view::npos) {
    h.warn = true;
  } else if ((marker = rest.find("NCCL INFO ")) != std::string_view::npos) {
    h.info = true;
  } else if ((marker = rest.find("] ")) != std::string_view::npos) {
    // NCCL <= 2.3 printed "host:pid:tid [dev] file:line WARN msg" without "NCCL".
    std::size_t w = rest.find(" WARN ", marker);
    if (w == std::string_view::npos || w > marker + 80) return h;
    marker = w + 1;
    skip = 5;
    h.warn = true;
  } else {
    return h;
  }
  std::string_view head = rest.substr(0, marker);
  h.message = rest.substr(marker + skip);
  // The last "X:digits:digits" token in the header is host:pid:tid.
  std::size_t pos = 0;
  while (pos < head.size()) {
    std::size_t end = head.find(' ', pos);
    if (end == std::string_view::npos) end = head.size();
    std::string_view tok = head.substr(pos, end - pos);
    std::size_t c2 = tok.rfind(':');
    if (c2 != std::string_view::npos && c2 > 0) {
      std::size_t c1 = tok.rfind(':', c2 - 1);
      if (c1 != std::string_view::npos && c1 > 0) {
        std::string_view pid_s = tok.substr(c1 + 1, c2 - c1 - 1);
        std::string_view tid_s = tok.substr(c2 + 1);
        if (!pid_s.empty() && !tid_s.empty() && std::all_of(pid_s.begin(), pid_s.end(), is_digit) &&
            std::all_of(tid_s.begin(), tid_s.end(), is_digit) && pid_s.size() <= 10) {
          h.host = escape_line(tok.substr(0, c1), 64);
          h.thread = escape_line(tok, 100);
          long v = 0;
          std::from_chars(pid_s.data(), pid_s.data() + pid_s.size(), v);
          h.pid = v;
        }
      }
    }
    pos = end + 1;
  }
  return h;
}

std::string ident_at(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && n < 64 && is_ident(s[n])) ++n;
  return std::string(s.substr(0, n));
}

// "ibv_create_cq(cqe=4096) failed: ..." / "ibv_reg_mr failed (errno 14)" -> (call, tail after "failed").
std::optional<std::pair<std::string, std::string_view>> verbs_failure(std::string_view msg) {
  for (std::string_view family : {std::string_view("ibv_"), std::string_view("mlx5dv_")}) {
    std::size_t pos = 0;
    while ((pos = msg.find(family, pos)) != std::string_view::npos) {
      if (pos > 0 && is_ident(msg[pos - 1])) {
        pos += family.size();
        continue;
      }
      std::string call = ident_at(msg.substr(pos));
      std::string_view after = msg.substr(pos + call.size());
      if (!after.empty() && after.front() == '(') {
        std::size_t close = after.find(')');
        if (close == std::string_view::npos || close > 200) {
          pos += call.size();
          continue;
        }
        after.remove_prefix(close + 1);
      }
      after = skip_spaces(after);
      if (after.starts_with("failed") || after.starts_with("returned NULL") || after.starts_with("error")) {
        return std::make_pair(call, after);
      }
      pos += call.size();
    }
  }
  return std::nullopt;
}

// The kernel prints "[-12]" after some messages: "Failed to register mr [-12]", "Failed to allocate pd[-12]".
int bracket_errno(std::string_view s) {
  std::size_t at = s.rfind("[-");
  if (at == std::string_view::npos) return 0;
  std::string_view t = s.substr(at + 2);
  auto v = take_number(t, 4);
  if (v && t.starts_with("]") && *v > 0 && *v < 4096) return static_cast<int>(*v);
  return 0;
}

// The text between the first pair of single quotes: NCCL's "Cuda failure 'out of memory'".
std::string quoted(std::string_view s) {
  std::size_t a = s.find('\'');
  if (a == std::string_view::npos) return {};
  std::size_t b = s.find('\'', a + 1);
  if (b == std::string_view::npos || b - a > 80) return {};
  return escape_line(s.substr(a + 1, b - a - 1), 64);
}

// libfabric's log prefix "libfabric:PID:TS:DOMAIN:PROV:SUBSYS:FUNC():LINE<warn> " (1.9 printed no TS/DOMAIN).
std::string libfabric_provider(std::string_view head) {
  for (std::string_view p :
       {std::string_view("efa"), std::string_view("verbs"), std::string_view("tcp"), std::string_view("shm"),
        std::string_view("psm3"), std::string_view("cxi"), std::string_view("ucx"), std::string_view("sockets")}) {
    std::string key = fmt::format(":{}:", p);
    if (contains(head, key)) return std::string(p);
  }
  return {};
}

// A provider's own warning for the calls NCCL's plugins depend on; other libfabric warnings are not failures.
bool parse_libfabric(std::string_view rest, failure& f) {
  std::size_t w = rest.find("<warn>");
  if (w == std::string_view::npos || w > 200) return false;
  std::string_view msg = skip_spaces(rest.substr(w + 6));
  std::string_view call;
  if (icontains(msg, "register MR") || contains(msg, "reg_mr")) {
    call = "fi_mr_regattr";
  } else if (icontains(msg, " CQ") && (icontains(msg, "create") || icontains(msg, "open"))) {
    call = "fi_cq_open";
  } else {
    return false;
  }
  f.transport = "libfabric";
  f.provider = libfabric_provider(rest.substr(0, w));
  f.call = std::string(call);
  f.err = errno_in_text(msg);
  return true;
}

// aws-ofi-nccl's "NET/OFI Couldn't <step>. RC: -N, ERROR: <strerror>" and similar: the libfabric call behind each step.
bool parse_net_ofi(std::string_view msg, failure& f) {
  std::size_t at = msg.find("NET/OFI");
  if (at == std::string_view::npos) return false;
  std::string_view t = msg.substr(at + 7);
  if (!icontains(t, "couldn't") && !icontains(t, "unable to") && !icontains(t, "failed")) return false;
  f.transport = "ofi";
  if (icontains(t, "initialization failed")) {  // the plugin's summary after the step that failed
    f.what = failure::kind::system_error;
    return true;
  }
  struct step {
    std::string_view words;
    std::string_view call;
  };
  constexpr step k_steps[] = {
      {"register memory", "fi_mr_regattr"},
      {"enable endpoint", "fi_enable"},
      {"open AV", "fi_av_open"},
      {"open CQ", "fi_cq_open"},
      {"allocate endpoint", "fi_endpoint"},
      {"new endpoint", "fi_endpoint"},
      {"open domain", "fi_domain"},
      {"open fabric", "fi_fabric"},
      {"fi_getinfo", "fi_getinfo"},
      {"optimal provider", "fi_getinfo"},
  };
  for (const step& s : k_steps) {
    if (icontains(t, s.words)) {
      f.call = std::string(s.call);
      f.err = errno_in_text(t);
      return true;
    }
  }
  f.transport.clear();
  return false;
}

// dmesg: "infiniband efa_0: Failed to register mr [-12]", "... Failed to process command REG_MR (opcode 7) ...
// err -12", "... Failed to allocate pd[-12]". The call is named after the driver's verb (efa_reg_mr).
bool parse_kernel_rdma(std::string_view msg, failure& f) {
  std::size_t at = msg.find("infiniband ");
  if (at == std::string_view::npos) return false;
  std::string_view t = msg.substr(at + 11);
  std::string dev = ident_at(t);
  if (dev.empty() || !t.substr(dev.size()).starts_with(": ")) return false;
  std::string_view m = t.substr(dev.size() + 2);
  if (!icontains(m, "fail")) return false;
  std::string_view verb;
  if (icontains(m, "register mr") || contains(m, "REG_MR")) {
    verb = "reg_mr";
  } else if (icontains(m, "allocate pd") || contains(m, "ALLOC_PD")) {
    verb = "alloc_pd";
  } else if (icontains(m, "create cq") || contains(m, "CREATE_CQ")) {
    verb = "create_cq";
  } else if (icontains(m, "create qp") || contains(m, "CREATE_QP")) {
    verb = "create_qp";
  } else {
    return false;
  }
  f.transport = "kernel";
  f.provider = dev;
  f.call = fmt::format("{}_{}", std::string_view(dev).substr(0, dev.find('_')), verb);
  f.err = bracket_errno(m);
  if (f.err == 0) f.err = errno_in_text(m);
  return true;
}

// UCX names the limit it ran under: "Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)".
std::optional<std::uint64_t> ucx_memlock(std::string_view msg) {
  std::size_t at = msg.find("(current: ");
  if (at == std::string_view::npos || !contains(msg, "locked memory")) return std::nullopt;
  std::string_view t = msg.substr(at + 10);
  if (t.starts_with("unlimited")) return k_unlimited;
  auto v = take_number(t, 12);
  if (!v || !t.starts_with(" kbytes")) return std::nullopt;
  return static_cast<std::uint64_t>(*v) * 1024;
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
  f.err = errno_in_text(msg);
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
  if (!std::all_of(where.begin() + static_cast<std::ptrdiff_t>(colon) + 1, where.end(), is_digit)) return false;
  std::string_view code = msg.substr(arrow + 4);
  auto v = take_number(code, 2);
  if (!v || *v < 1 || *v > 7) return false;
  return code.empty() || code.starts_with(" [");
}

}  // namespace

int errno_in_text(std::string_view text) {
  // The glibc message NCCL prints; the longest match wins ("No such device or address" over "No such device").
  if (int e = errno_message_in(text); e != 0) return e;
  // Numbers: "errno 12", "errno=12", "(errno: -12)", "error -12", "error 12", "RC: -12", "err -12", "ENOMEM".
  for (std::string_view key : {std::string_view("errno"), std::string_view("error"), std::string_view("RC:"),
                               std::string_view("rc="), std::string_view("err ")}) {
    std::size_t pos = 0;
    while ((pos = text.find(key, pos)) != std::string_view::npos) {
      std::string_view t = text.substr(pos + key.size());
      while (!t.empty() && (t.front() == ' ' || t.front() == '=' || t.front() == ':' || t.front() == '(')) {
        t.remove_prefix(1);
      }
      if (!t.empty() && t.front() == '-') t.remove_prefix(1);
      if (auto v = take_number(t, 4); v && *v > 0 && *v < 4096 && (t.empty() || !is_ident(t.front()))) {
        return static_cast<int>(*v);
      }
      pos += key.size();
    }
  }
  std::size_t e = text.find('E');
  while (e != std::string_view::npos) {
    if (e == 0 || !is_ident(text[e - 1])) {
      std::string name = ident_at(text.substr(e));
      if (name.size() >= 4) {
        if (auto v = errno_from_name(name)) return *v;
      }
    }
    e = text.find('E', e + 1);
  }
  return 0;
}

namespace {

// Cheap rejection first: every pattern parse_nccl_line looks for contains one of these.
bool mentions_failure(std::string_view line) {
  return contains(line, "fail") || contains(line, "Fail") || contains(line, "completion") ||
         contains(line, "Duplicate GPU") || contains(line, "No device found") || contains(line, "system error") ||
         contains(line, "SystemError") || contains(line, "register memory") || contains(line, "ibv_") ||
         contains(line, "mlx5dv_") || contains(line, "DMA-BUF") || contains(line, "dmabuf") ||
         contains(line, "DMABUF") || contains(line, "dma-buf") || contains(line, "DmaBuf") ||
         contains(line, "Couldn't") || contains(line, "Unable to") || contains(line, "Libfabric error") ||
         contains(line, "unhandled cuda error") || contains(line, "ncclUnhandledCudaError") ||
         contains(line, "internal error") || contains(line, "ncclInternalError") || contains(line, "Caught signal");
}

// "Got completion from peer <peer> with error <N>" (or "with status=<N>"): the peer and the status.
void parse_completion(std::string_view t, failure& f) {
  if (std::size_t peer = t.find("from peer "); peer != std::string_view::npos) {
    std::string_view p = t.substr(peer + 10);
    std::size_t end = p.find(" with");
    f.peer = escape_line(p.substr(0, std::min(end, std::size_t{80})), 80);
  }
  for (std::string_view key : {std::string_view("with error "), std::string_view("status=")}) {
    if (std::size_t k = t.find(key); k != std::string_view::npos) {
      std::string_view n = t.substr(k + key.size());
      if (auto v = take_number(n, 4)) f.wc_status = static_cast<int>(*v);
      break;
    }
  }
}

// The generic failures, after the transport-specific ones: "Call to X failed", NCCL's error codes and crashes,
// "failed to register memory", a verbs call, a DMA-BUF error. Returns true when `msg` is one of them.
bool classify_generic(std::string_view msg, const nccl_header& h, failure& f) {
  if (std::size_t at = msg.find("Call to "); at != std::string_view::npos) {
    std::string call = ident_at(msg.substr(at + 8));
    std::string_view after = msg.substr(at + 8 + call.size());
    after = skip_spaces(after);
    if (!call.empty() && after.starts_with("failed")) {
      f.call = call;
      f.err = errno_in_text(after.substr(6));
      return true;
    }
  }
  if (contains(msg, "unhandled system error") || contains(msg, "ncclSystemError") ||
      contains(msg, "unhandled cuda error") || contains(msg, "ncclUnhandledCudaError") ||
      contains(msg, "internal error - please report") || contains(msg, "ncclInternalError") ||
      contains(msg, "ncclCommInitRank failed") ||
      (contains(msg, "Caught signal ") && (contains(msg, "Segmentation fault") || contains(msg, "Bus error") ||
                                           contains(msg, "Aborted") || contains(msg, "Illegal instruction")))) {
    f.what = failure::kind::system_error;
    return true;
  }
  if (icontains(msg, "failed to register memory") || icontains(msg, "unable to register memory") ||
      icontains(msg, "couldn't register memory")) {
    if (contains(msg, "NET/OFI")) f.call = "fi_mr_regattr";
    f.err = errno_in_text(msg);
    return true;
  }
  if (auto vf = verbs_failure(msg)) {
    f.call = vf->first;
    f.err = errno_in_text(vf->second);
    if (contains(msg, "UCX")) {
      f.transport = "ucx";
      f.log_memlock = ucx_memlock(msg);
    }
    return true;
  }
  if ((h.warn || contains(msg, "ERROR")) && (icontains(msg, "dma-buf") || icontains(msg, "dmabuf")) &&
      (icontains(msg, "fail") || icontains(msg, "not supported") || icontains(msg, "error"))) {
    f.call = contains(msg, "ibv_reg_dmabuf_mr") ? "ibv_reg_dmabuf_mr" : "dmabuf";
    f.err = errno_in_text(msg);
    return true;
  }
  return false;
}

}  // namespace

std::optional<nccl_event> parse_nccl_line(std::string_view line) {
  if (line.size() > k_max_examined) line = line.substr(0, k_max_examined);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (!mentions_failure(line)) return std::nullopt;
  prefix_info pre = strip_prefixes(line);
  nccl_header h = parse_header(pre.rest);
  std::string_view msg = h.message;

  nccl_event ev;
  ev.rank = pre.rank;
  ev.host = !h.host.empty() ? h.host : escape_line(pre.host, 64);
  ev.pid = h.pid;
  ev.text = escape_line(msg, k_text_max);
  failure& f = ev.what;

  if (std::size_t at = msg.find("Got completion"); at != std::string_view::npos && contains(msg, "NET/")) {
    f.what = failure::kind::completion_error;
    parse_completion(msg.substr(at), f);
    return ev;
  }
  if (std::size_t at = msg.find("Duplicate GPU detected"); at != std::string_view::npos) {
    f.what = failure::kind::duplicate_gpu;
    std::string_view t = msg.substr(at);
    if (std::size_t r = t.find("rank "); r != std::string_view::npos && !ev.rank) {
      std::string_view n = t.substr(r + 5);
      if (auto v = take_number(n, 7)) ev.rank = static_cast<int>(*v);
    }
    return ev;
  }
  if (contains(msg, "No device found") && contains(msg, "NET/IB")) {
    f.what = failure::kind::no_device;
    return ev;
  }
  // libfabric's own lines, possibly behind a collector's prefix ("  | 2024-11-28T07:42:11.527Z | libfabric:...").
  if (std::size_t lf = pre.rest.find("libfabric:");
      lf != std::string_view::npos && lf < 128 && (lf == 0 || pre.rest[lf - 1] == ' ' || pre.rest[lf - 1] == '|')) {
    if (parse_libfabric(pre.rest.substr(lf), f)) return ev;
    return std::nullopt;
  }
  if (std::size_t at = msg.find("Libfabric error: ("); at != std::string_view::npos) {
    f.transport = "libfabric";
    f.err = errno_in_text(msg.substr(at + 17));
    return ev;
  }
  if (!h.info && parse_net_ofi(msg, f)) return ev;
  if (parse_kernel_rdma(msg, f)) return ev;
  if (icontains(msg, "socket creation failed")) {
    f = classify_warning(msg);
    return ev;
  }
  if (classify_generic(msg, h, f)) return ev;
  return std::nullopt;
}

void nccl_log_scanner::note_rank(std::string_view line) {
  // "ncclCommInitRank comm 0x.. rank 6 nranks 8 cudaDev 6 ..." (2.x), "comm 0x.. rank 0 nRanks 2 ...",
  // "rank 1 nranks 2" (older): remember host:pid -> rank for events of that process that carry no prefix rank.
  std::size_t r = line.find(" rank ");
  if (r == std::string_view::npos) return;
  std::string_view t = line.substr(r + 6);
  auto v = take_number(t, 7);
  if (!v || !(t.starts_with(" nranks ") || t.starts_with(" nRanks "))) return;
  prefix_info pre = strip_prefixes(line);
  nccl_header h = parse_header(pre.rest);
  if (h.host.empty() || !h.pid) return;
  if (pid_rank_.size() >= limits_.max_pid_ranks) return;
  pid_rank_.try_emplace(fmt::format("{}:{}", h.host, *h.pid), static_cast<int>(*v));
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
  prefix_info pre = strip_prefixes(line);
  nccl_header h = parse_header(pre.rest);
  if (h.warn) {
    if (limits_.recent_warnings == 0) return false;
    if (recent_warn_.size() >= limits_.recent_warnings) recent_warn_.pop_front();
    pending_warn& w = recent_warn_.emplace_back();
    w.text = escape_line(h.message, 200);
    w.thread = h.thread;
    w.line = lines_;
    w.event.what = classify_warning(h.message);
    w.event.host = !h.host.empty() ? h.host : escape_line(pre.host, 64);
    w.event.pid = h.pid;
    w.event.rank = pre.rank;
    w.event.text = escape_line(h.message, k_text_max);
    return false;
  }
  // The return trace right after a WARN of the same thread: NCCL is failing on what that WARN says.
  if (h.info && !h.thread.empty() && is_return_trace(h.message)) {
    for (std::size_t i = 0; i < recent_warn_.size(); ++i) {
      const pending_warn& w = recent_warn_[i];
      if (w.thread == h.thread && lines_ - w.line <= k_trace_window && w.line > last_failure_line_) {
        promote(i);
        return true;
      }
    }
  }
  return false;
}

std::optional<nccl_event> nccl_log_scanner::feed_line(std::string_view line, bool truncated) {
  ++lines_;
  bytes_ += line.size() + 1;
  if (truncated) ++truncated_;
  if (line.size() > limits_.max_line) line = line.substr(0, limits_.max_line);
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  const bool has_nccl = contains(line, "NCCL");
  if (has_nccl && contains(line, " rank ")) note_rank(line);

  std::optional<nccl_event> ev = parse_nccl_line(line);
  if (!ev) {
    if (has_nccl && (contains(line, "WARN") || contains(line, " -> ")) && note_warning(line)) return promoted_;
    return std::nullopt;
  }
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
  if (!is_echo && recent_failure && is_ofi_family(f) && !f.call.empty() &&
      lines_ - last_failure_line_ <= k_trace_window && groups_[*last_failure_].what.call == f.call &&
      is_ofi_family(groups_[*last_failure_].what)) {
    is_echo = groups_[*last_failure_].what.err != f.err;
  }
  if (is_echo && recent_failure) {
    ++groups_[*last_failure_].consequences;
    return std::nullopt;
  }
  // A terminal "unhandled ... error" with a WARN shortly before it and no recognised failure: that WARN is what
  // NCCL failed on.
  if (f.what == failure::kind::system_error && !recent_warn_.empty() &&
      lines_ - recent_warn_.front().line <= limits_.attach_window) {
    const nccl_event* p = promote(0);
    if (p == nullptr) return ev;
    ++groups_[*last_failure_].consequences;
    return *p;
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

status scan_fd(int fd, nccl_log_scanner& scanner, const line_observer& also) {
  std::size_t number = 0;
  const std::size_t max_line = scanner.caps().max_line;
  std::vector<char> buf(64 * 1024);
  std::string line;
  line.reserve(std::min<std::size_t>(max_line, 4096));
  bool truncated = false;
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
      std::size_t len = static_cast<std::size_t>(stop - p);
      std::size_t room = max_line > line.size() ? max_line - line.size() : 0;
      if (len > room) truncated = true;
      line.append(p, std::min(len, room));
      if (nl == nullptr) break;
      scanner.feed_line(line, truncated);
      if (also) also(line, ++number);
      line.clear();
      truncated = false;
      p = nl + 1;
    }
  }
  if (!line.empty() || truncated) {
    scanner.feed_line(line, truncated);
    if (also) also(line, ++number);
  }
  return status::ok();
}

}  // namespace mrcheck
