// The table of line forms and the readers they share (line_forms.h). Plain string_view searches, no std::regex:
// a regex on a 64 KiB line of garbage can recurse deeply, and the scanner must stream a log at close to grep's
// speed. Every row has a real sample line; tests/unit/explain_forms_test.cpp runs each sample through match_line().
#include "line_forms.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace mrcheck::forms {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ident(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }
bool contains(std::string_view h, std::string_view n) { return h.find(n) != std::string_view::npos; }

std::string_view skip_spaces(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

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
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != hay.end();
}

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

// ---- the table ----

namespace {

enum class rule {
  nccl_completion,  // NCCL (and vendor plugins') "Got completion from peer P with status=N / with error N"
  wc_status,        // a work completion status printed by a verbs user ("wc->status ... 12 vs 0", "status 12")
  mlx5_completion,  // libmlx5's own "got completion with error:" dump
  duplicate_gpu,    // "Duplicate GPU detected"
  no_device,        // "NET/IB : No device found"
  ofi_no_provider,  // aws-ofi-nccl found no provider
  ofi_step,         // "NET/OFI Couldn't <step>. RC: -N, ERROR: ..."
  ofi_request,      // "NET/OFI Request completed with error. RC: N" (a provider completion error)
  libfabric_warn,   // "libfabric:PID:TS::PROV:SUBSYS:FUNC():LINE<warn> ..."
  libfabric_abort,  // "Libfabric error: (-N) <strerror>" (the EFA provider's abort message)
  libfabric_rs,     // Rust bindings: "LibfabricError: code -N ("text"), context: fi_mr_regattr"
  kernel_dev,       // "infiniband <dev>: ..." (the RDMA drivers' dev_err/dev_warn)
  mlx5_cmd,         // "mlx5_core <pci>: mlx5_cmd_check:...: CMD(0x..) op_mod(0x..) failed, status <text>(0xN)"
  nccl_call,        // NCCL's "Call to <fn> failed[ with error <strerror>]"
  system_error,     // NCCL's fatal codes and crashes, tied to the failure before them
  registration,     // "Failed to register memory", "Couldn't register GPU MR", "buffer registration failed"
  verbs_call,       // "<ibv_|mlx5dv_|rdma_|fi_ call>(...) failed: <strerror>" / "returned" / "error" ...
  dmabuf,           // DMA-BUF registration failures without a named call
  socket,           // "Socket creation failed"
};

struct row {
  form_row doc;
  rule how;
  // Whether the anchor joins the cheap rejection. Rows whose lines always carry a failure word ("failed",
  // "error", "Unable", "Couldn't": anchors of their own, k_extra) leave theirs out, so that an ordinary line
  // naming the same thing ("NCCL INFO DMA-BUF is available", "NET/OFI Selected Provider") is rejected cheaply.
  bool filter = true;
};

constexpr row k_rows[] = {
    {{"Got completion", "NCCL NET/IB (and vendor net plugins)", "", "- (status is an ibv_wc_status)",
      "NCCL host:pid:tid",
      "ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 "
      "len=0 "
      "vendor err 129 (Recv)",
      "https://github.com/NVIDIA/nccl/issues/1405"},
     rule::nccl_completion},
    {{"wc->status", "Gloo ibverbs transport", "", "- (status after IBV_WC_SUCCESS.)", "-",
      "what():  [enforce fail at gloo/transport/ibverbs/pair.cc:466] wc->status == IBV_WC_SUCCESS. 12 vs 0.",
      "https://github.com/pytorch/gloo/issues/52"},
     rule::wc_status},
    {{"work item failed", "mscclpp", "", "- (status N is an ibv_wc_status, its strerror text is wrong)", "-",
      "what():  a work item failed: status 12 (Ib failure: Cannot allocate memory)",
      "https://github.com/microsoft/mscclpp/issues/323"},
     rule::wc_status},
    {{"] status ", "Charm++ verbs layer", "", "- (wc[i] status N)", "-", "[0] wc[0] status 9 wc[i].opcode 0",
      "https://github.com/charmplusplus/charm/issues/2532"},
     rule::wc_status},
    {{"got completion with error", "libmlx5 (rdma-core)", "", "-",
      "mlx5: <host>:", "mlx5: c101-011.frontera.tacc.utexas.edu: got completion with error:",
      "https://github.com/charmplusplus/charm/issues/2532"},
     rule::mlx5_completion},
    {{"Duplicate GPU detected", "NCCL", "", "-", "NCCL host:pid:tid",
      "init.cc:657 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
      "https://github.com/NVIDIA/nccl/issues/418"},
     rule::duplicate_gpu},
    {{"No device found", "NCCL NET/IB", "", "-", "NCCL host:pid:tid", "NCCL INFO NET/IB : No device found.",
      "https://github.com/NVIDIA/nccl/issues/941"},
     rule::no_device},
    {{"Could not find any optimal provider", "aws-ofi-nccl", "fi_getinfo", "-", "-",
      "get_ofi_provider:312 NCCL WARN NET/OFI Could not find any optimal provider",
      "https://github.com/NVIDIA/nccl/issues/229"},
     rule::ofi_no_provider},
    {{"Request completed with error", "aws-ofi-nccl", "", "- (RC is a provider error)", "NCCL host:pid:tid",
      "NCCL WARN NET/OFI Request completed with error. RC: 21. Error: unknown error",
      "https://github.com/aws/aws-ofi-nccl/issues/161"},
     rule::ofi_request},
    {{"NET/OFI", "aws-ofi-nccl", "by step", "RC: -N, then strerror", "NCCL host:pid:tid",
      "create_nccl_ofi_component:496 NCCL WARN NET/OFI Couldn't enable endpoint. RC: -12, ERROR: Cannot allocate "
      "memory",
      "https://github.com/aws/aws-ofi-nccl/issues/44"},
     rule::ofi_step,
     false},
    {{"<warn>", "libfabric providers (efa, verbs, ...)", "from the message", "strerror text, (N), (-N)", "-",
      "libfabric:22102:1638393161:verbs:ep_ctrl:vrb_ep_enable():884<warn> rdma_create_qp: Cannot allocate memory (12)",
      "https://github.com/ofiwg/libfabric/issues/7368"},
     rule::libfabric_warn},
    {{"Libfabric error: (", "libfabric EFA provider", "", "(-N) then strerror", "-",
      "Libfabric error: (-12) Cannot allocate memory", "https://github.com/awslabs/awsome-distributed-ai/issues/647"},
     rule::libfabric_abort},
    {{"LibfabricError: code", "libfabric Rust bindings", "after 'context: '", "code -N", "-",
      "LibfabricError: code -93 (\"Protocol not supported\"), context: fi_mr_regattr",
      "https://github.com/perplexityai/pplx-garden/issues/1"},
     rule::libfabric_rs},
    {{"infiniband ", "RDMA kernel drivers (efa, mlx5)", "by the driver's verb", "[-N], err -N, status -N",
      "dmesg (no host)", "infiniband efa_0: Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12",
      "https://github.com/aws/aws-ofi-nccl/issues/22"},
     rule::kernel_dev,
     false},
    {{"mlx5_cmd_", "mlx5_core firmware commands", "the command", "err(-N); status <text>(0xN) is firmware's",
      "dmesg (no host)",
      "mlx5_core 0000:61:00.0: mlx5_cmd_check:795:(pid 53945): ALLOC_UAR(0x802) op_mod(0x0) failed, status limits "
      "exceeded(0x8), syndrome (0x5a7939)",
      "https://github.com/openucx/ucx/issues/6049"},
     rule::mlx5_cmd,
     false},
    {{"Call to ", "NCCL (ibvwrap, NET/MLX5)", "named", "strerror text, -N, errno N", "NCCL host:pid:tid",
      "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
      "https://github.com/NVIDIA/nccl-tests/issues/206"},
     rule::nccl_call,
     false},
    {{"unhandled system error", "NCCL", "", "-", "NCCL host:pid:tid",
      "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:47, unhandled system error, NCCL version "
      "2.7.8",
      "https://github.com/horovod/horovod/issues/1651"},
     rule::system_error},
    {{"ncclSystemError", "NCCL", "", "-", "-",
      "ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
      "https://github.com/NVIDIA/nccl/issues/1191"},
     rule::system_error},
    {{"unhandled cuda error", "NCCL", "", "-", "-", "NCCL error: unhandled cuda error",
      "https://github.com/horovod/horovod/issues/893"},
     rule::system_error},
    {{"ncclUnhandledCudaError", "NCCL", "", "-", "-", "ncclUnhandledCudaError: Call to CUDA function failed.",
      "https://github.com/NVIDIA/nccl/issues/962"},
     rule::system_error},
    {{"internal error - please report", "NCCL", "", "-", "-", "NCCL error: internal error - please report this issue",
      "https://github.com/awslabs/awsome-distributed-ai/issues/647"},
     rule::system_error},
    {{"ncclInternalError", "NCCL", "", "-", "-", "ncclInternalError: Internal check failed.",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     rule::system_error},
    {{"ncclCommInitRank failed", "NCCL", "", "-", "-", "ncclCommInitRank failed: unhandled system error",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     rule::system_error},
    {{"Caught signal", "NCCL", "", "-", "-", "NCCL WARN Caught signal 11 (Segmentation fault)",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     rule::system_error},
    {{"egist", "NCCL, aws-ofi-nccl, transfer engines, CTRAN, MORI, other verbs users", "named or none",
      "strerror text, RC: -N, [N], errno:N", "-",
      "E0605 17:54:16.878770 178707 rdma_context.cpp:198] Failed to register memory 0x7f56e6600000: Numerical result "
      "out of range [34]",
      "https://github.com/kvcache-ai/Mooncake/issues/454"},
     rule::registration,
     false},
    {{"ailed", "verbs users (UCX, mscclpp, NVSHMEM, perftest-like tools)", "the ibv_/mlx5dv_/rdma_/fi_ identifier",
      "strerror text, -N, (errno N), errno=N", "UCX [host:pid:tid]",
      "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot "
      "allocate memory",
      "https://github.com/openucx/ucx/issues/8229"},
     rule::verbs_call},
    {{"eturn", "verbs users printing a return value", "the identifier", "return -N, returned -1 (errno=N)", "-",
      "ibv_reg_mr returned null, errno unrecognized", "https://github.com/jcarreira/cirrus-kv/issues/87"},
     rule::verbs_call},
    {{"rror", "verbs users printing an error", "the identifier", "error code: N, Os { code: N }", "-",
      "ibv_reg_mr failed [error code: 14]", "https://github.com/ut-osa/assise/issues/26"},
     rule::verbs_call,
     false},
    {{"DMA-BUF", "NCCL and others", "ibv_reg_dmabuf_mr or none", "strerror text", "NCCL host:pid:tid",
      "NCCL WARN NET/IB : DMA-BUF registration failed", "https://github.com/NVIDIA/nccl/issues/778"},
     rule::dmabuf,
     false},
    {{"dmabuf", "NCCL and others", "ibv_reg_dmabuf_mr or none", "strerror text", "-",
      "ibv_reg_dmabuf_mr(address=0xfcc99fa00000, length=16384, ...) failed: Unknown error 524",
      "https://github.com/ai-dynamo/nixl/pull/1605"},
     rule::dmabuf,
     false},
    {{"ocket creation failed", "NCCL bootstrap", "socket", "strerror text", "NCCL host:pid:tid",
      "misc/socket.cc:356 NCCL WARN Net : Socket creation failed : Address family not supported by protocol",
      "https://github.com/NVIDIA/nccl/issues/210"},
     rule::socket},
};

// The identifiers of the libraries that pin memory and create RDMA objects. Lower-case, so that
// "fi_enableCannot allocate memory" (libfabric glues them) ends at the call.
std::string call_at(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && n < 64 && ((s[n] >= 'a' && s[n] <= 'z') || is_digit(s[n]) || s[n] == '_')) ++n;
  return std::string(s.substr(0, n));
}

constexpr std::array<std::string_view, 5> k_call_families = {"ibv_", "mlx5dv_", "rdma_", "fi_", "mlx5_"};

// The first call of a known family in msg with a failure after it; its name and the text after it.
std::optional<std::pair<std::string, std::string_view>> failed_call(std::string_view msg) {
  std::optional<std::pair<std::string, std::string_view>> any;
  for (std::size_t pos = 0; pos < msg.size(); ++pos) {
    if ((pos > 0 && is_ident(msg[pos - 1])) || !is_alpha(msg[pos])) continue;
    std::string_view at = msg.substr(pos);
    bool family = false;
    for (std::string_view f : k_call_families) family = family || at.starts_with(f);
    if (!family) continue;
    std::string call = call_at(at);
    if (call.size() < 5 || call.ends_with("_")) continue;
    if (call.starts_with("mlx5_") && !call.starts_with("mlx5_cmd")) continue;  // device names (mlx5_0)
    if (call.starts_with("mlx5_cmd")) continue;
    std::string_view after = at.substr(call.size());
    if (!after.empty() && after.front() == '(') {
      std::size_t close = after.find(')');
      if (close == std::string_view::npos || close > 200) continue;
      after.remove_prefix(close + 1);
    }
    std::string_view a = skip_spaces(after);
    while (!a.empty() && (a.front() == ':' || a.front() == ',')) a = skip_spaces(a.substr(1));
    if (a.starts_with("failed") || a.starts_with("returned") || a.starts_with("return ") || a.starts_with("error") ||
        a.starts_with("err") || a.starts_with("(") || a.starts_with("[")) {
      return std::make_pair(call, after);
    }
    // "rdma_create_qp: Cannot allocate memory (12)", "fi_enableCannot allocate memory (-12)": a call, then an errno.
    if (!any && errno_in(after) != 0) any = std::make_pair(call, after);
  }
  return any;
}

// The number after the first "status" (or "status=") of s; nullopt when none or negative (an errno, not a status).
std::optional<int> status_after(std::string_view s, std::string_view key) {
  std::size_t at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view t = s.substr(at + key.size());
  while (!t.empty() && (t.front() == ' ' || t.front() == '=' || t.front() == ':')) t.remove_prefix(1);
  if (auto v = take_number(t, 4)) return static_cast<int>(*v);
  return std::nullopt;
}

std::string escape_q(std::string_view s, std::size_t max) { return escape_line(s, max); }

std::string libfabric_provider(std::string_view head) {
  for (std::string_view p : {"efa", "verbs", "tcp", "shm", "psm3", "cxi", "ucx", "sockets", "ofi_rxm"}) {
    if (contains(head, fmt::format(":{}:", p))) return std::string(p);
  }
  return {};
}

// The resource a kernel command or verb creates: what the HCA limits, and what a pinned registration is.
struct kernel_verb {
  std::string_view words;  // in the driver's message, case-insensitive
  std::string_view verb;
};
constexpr kernel_verb k_kernel_verbs[] = {
    {"register mr", "reg_mr"},  {"REG_MR", "reg_mr"},          {"reg mr", "reg_mr"},       {"allocate pd", "alloc_pd"},
    {"ALLOC_PD", "alloc_pd"},   {"create cq", "create_cq"},    {"CREATE_CQ", "create_cq"}, {"create qp", "create_qp"},
    {"CREATE_QP", "create_qp"}, {"allocate uar", "alloc_uar"}, {"ALLOC_UAR", "alloc_uar"}, {"mkey", "reg_mr"},
};

bool parse_kernel_dev(std::string_view msg, failure& f) {
  std::size_t at = msg.find("infiniband ");
  if (at == std::string_view::npos) return false;
  std::string_view t = msg.substr(at + 11);
  std::size_t n = 0;
  while (n < t.size() && n < 32 && is_ident(t[n])) ++n;
  std::string dev(t.substr(0, n));
  if (dev.empty() || !t.substr(n).starts_with(": ")) return false;
  std::string_view m = t.substr(n + 2);
  if (!icontains(m, "fail")) return false;
  for (const kernel_verb& k : k_kernel_verbs) {
    if (icontains(m, k.words)) {
      f.transport = "kernel";
      f.provider = dev;
      f.call = fmt::format("{}_{}", std::string_view(dev).substr(0, dev.find('_')), k.verb);
      f.err = errno_in(m);
      return true;
    }
  }
  return false;
}

// "CREATE_MKEY(0x200) op_mod(0x0) failed, status limits exceeded(0x8), syndrome (0x18af6), err(-12)"
bool parse_mlx5_cmd(std::string_view msg, failure& f) {
  std::size_t op = msg.find("(0x");
  std::size_t failed = msg.find(" failed, status ");
  if (op == std::string_view::npos || failed == std::string_view::npos || op > failed) return false;
  std::size_t start = op;
  while (start > 0 && (msg[start - 1] == '_' || (msg[start - 1] >= 'A' && msg[start - 1] <= 'Z'))) --start;
  if (start == op) return false;
  std::string cmd(msg.substr(start, op - start));
  std::transform(cmd.begin(), cmd.end(), cmd.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  f.transport = "kernel";
  f.provider = "mlx5_core";
  f.call = "mlx5_" + cmd;
  std::string_view status = msg.substr(failed + 16);
  f.detail = escape_q(status.substr(0, std::min(status.find('('), std::size_t{40})), 40);
  if (std::size_t e = msg.find("err("); e != std::string_view::npos) f.err = errno_in(msg.substr(e));
  return true;
}

bool gpu_words(std::string_view msg) {
  return contains(msg, "GPU MR") || contains(msg, "(gpu)") || contains(msg, "(cuda)") || contains(msg, "VRAM") ||
         contains(msg, "GPU memory") || contains(msg, "gpu memory");
}

bool failure_words(std::string_view m) {
  return icontains(m, "fail") || icontains(m, "unable") || icontains(m, "couldn't") || icontains(m, "cannot") ||
         contains(m, "error") || contains(m, "Error") || contains(m, "ERROR") || contains(m, "errno");
}

// The row's rule applied to the line; true when it is that form.
bool apply(rule how, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  const bool ucx = contains(p.rest, "UCX ");
  switch (how) {
    case rule::nccl_completion: {
      std::size_t at = msg.find("Got completion");
      if (!contains(msg, "NET/")) return false;
      std::string_view t = msg.substr(at);
      f.what = failure::kind::completion_error;
      if (std::size_t peer = t.find("from peer "); peer != std::string_view::npos) {
        std::string_view pr = t.substr(peer + 10);
        f.peer = escape_q(pr.substr(0, std::min(pr.find(" with"), std::size_t{80})), 80);
      }
      if (auto s = status_after(t, "status=")) {
        f.wc_status = *s;
      } else if (auto e = status_after(t, "with error ")) {
        f.wc_status = *e;
      }
      return true;
    }
    case rule::wc_status: {
      std::optional<int> s = status_after(msg, "IBV_WC_SUCCESS.");
      if (!s) s = status_after(msg, "status");
      if (!s || contains(msg, "status -")) return false;
      f.what = failure::kind::completion_error;
      f.wc_status = *s;
      return true;
    }
    case rule::mlx5_completion: f.what = failure::kind::completion_error; return true;
    case rule::duplicate_gpu: f.what = failure::kind::duplicate_gpu; return true;
    case rule::no_device:
      if (!contains(msg, "NET/IB")) return false;
      f.what = failure::kind::no_device;
      return true;
    case rule::ofi_no_provider:
      f.transport = "ofi";
      f.call = "fi_getinfo";
      return true;
    case rule::ofi_request:
      f.what = failure::kind::completion_error;
      f.transport = "ofi";
      return true;
    case rule::ofi_step: {
      if (p.info) return false;
      std::string_view t = msg.substr(msg.find("NET/OFI") + 7);
      if (!icontains(t, "couldn't") && !icontains(t, "unable to") && !icontains(t, "failed")) return false;
      f.transport = "ofi";
      if (icontains(t, "initialization failed")) {
        f.what = failure::kind::system_error;
        return true;
      }
      struct step {
        std::string_view words, call;
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
          f.err = errno_in(t);
          return true;
        }
      }
      return false;
    }
    case rule::libfabric_warn: {
      std::size_t lf = p.rest.find("libfabric:");
      std::size_t w = p.rest.find("<warn>");
      if (lf == std::string_view::npos || w == std::string_view::npos || w < lf || w - lf > 200) return false;
      std::string_view m = skip_spaces(p.rest.substr(w + 6));
      f.transport = "libfabric";
      f.provider = libfabric_provider(p.rest.substr(lf, w - lf));
      if (icontains(m, "register MR") || contains(m, "reg_mr")) {
        f.call = "fi_mr_regattr";
      } else if (icontains(m, " CQ") && (icontains(m, "create") || icontains(m, "open"))) {
        f.call = "fi_cq_open";
      } else if (auto c = failed_call(m)) {
        f.call = c->first;
      } else {
        return false;
      }
      f.err = errno_in(m);
      out.gpu_text = gpu_words(m);
      return true;
    }
    case rule::libfabric_abort:
      f.transport = "libfabric";
      f.err = errno_in(msg.substr(msg.find("Libfabric error: (") + 17));
      return true;
    case rule::libfabric_rs: {
      f.transport = "libfabric";
      f.err = errno_in(msg);
      std::size_t c = msg.find("context: ");
      f.call = c == std::string_view::npos ? std::string() : call_at(msg.substr(c + 9));
      return true;
    }
    case rule::kernel_dev: return parse_kernel_dev(msg, f);
    case rule::mlx5_cmd: return parse_mlx5_cmd(msg, f);
    case rule::nccl_call: {
      std::size_t at = msg.find("Call to ");
      std::string_view a = msg.substr(at + 8);
      std::size_t n = 0;
      while (n < a.size() && n < 64 && is_ident(a[n])) ++n;
      std::string_view after = skip_spaces(a.substr(n));
      if (n == 0 || !after.starts_with("failed")) return false;
      f.call = std::string(a.substr(0, n));
      f.err = errno_in(after.substr(6));
      return true;
    }
    case rule::system_error:
      if (contains(msg, "Caught signal") && !contains(msg, "Segmentation fault") && !contains(msg, "Bus error") &&
          !contains(msg, "Aborted") && !contains(msg, "Illegal instruction")) {
        return false;
      }
      f.what = failure::kind::system_error;
      return true;
    case rule::registration: {
      if (!failure_words(msg) || contains(msg, "Trying a different method")) return false;
      if (!icontains(msg, "register") && !icontains(msg, "registration")) return false;
      if (contains(msg, "DEBUG") || p.info) return false;
      if (auto c = failed_call(msg)) f.call = c->first;
      if (f.call.empty() && (icontains(msg, "dmabuf") || icontains(msg, "dma-buf"))) f.call = "dmabuf";  // CTRAN
      if (contains(msg, "NET/OFI")) {
        f.call = "fi_mr_regattr";
        f.transport = "ofi";
      }
      out.gpu_text = gpu_words(msg);
      // UCX's "failed to register address ...: <status>" prints a UCS status, not an errno: the failure below it
      // (an ibv_reg_* line) carries the errno.
      f.err = ucx && icontains(msg, "failed to register") ? 0 : errno_in(msg);
      if (ucx) f.transport = "ucx";
      return true;
    }
    case rule::verbs_call: {
      if (contains(p.rest, " DEBUG ") || contains(p.rest, "<info>") || p.info) return false;
      auto c = failed_call(msg);
      if (!c) return false;
      f.call = c->first;
      f.err = errno_in(c->second);
      out.gpu_text = gpu_words(msg);
      if (f.call.starts_with("fi_")) f.transport = "libfabric";
      if (ucx) {
        f.transport = "ucx";
        // UCX names the limit it ran under: "... (current: 64 kbytes)".
        if (std::size_t at = msg.find("(current: "); at != std::string_view::npos && contains(msg, "locked memory")) {
          std::string_view t = msg.substr(at + 10);
          if (t.starts_with("unlimited")) {
            f.log_memlock = k_unlimited;
          } else if (auto v = take_number(t, 12); v && t.starts_with(" kbytes")) {
            f.log_memlock = static_cast<std::uint64_t>(*v) * 1024;
          }
        }
      }
      return true;
    }
    case rule::dmabuf:
      if (!(p.warn || contains(msg, "ERROR") || contains(msg, "failed")) ||
          !(icontains(msg, "fail") || icontains(msg, "not supported") || icontains(msg, "error")) ||
          contains(msg, "Trying a different method") || p.info) {
        return false;
      }
      f.call = contains(msg, "ibv_reg_dmabuf_mr") ? "ibv_reg_dmabuf_mr" : "dmabuf";
      f.err = errno_in(msg);
      if (ucx) f.transport = "ucx";
      return true;
    case rule::socket:
      f.call = "socket";
      f.what = failure::kind::fatal_warning;
      f.err = errno_in(msg);
      return true;
  }
  return false;
}

// ---- cheap rejection: Wu-Manber over the anchors ----

struct anchor {
  std::string_view text;
  unsigned cls;
};

// Beyond the rows: the scanner's and the container evidence's own anchors (>= 5 bytes each).
constexpr anchor k_extra[] = {
    {" WARN", k_warn},
    {"WARN:", k_warn},
    {"nranks", k_rank},
    {"nRanks", k_rank},
    {"NET/IB", k_net_ib},
    {"RDMA ", k_path},
    {"DMA-BUF is", k_path},
    {"NET/Socket", k_container},
    {"pyxis", k_container},
    {"enroot", k_container},
    {"pptainer", k_container},
    {"ingularity", k_container},
    {"podman", k_container},
    {"conmon", k_container},
    {"kernel ABI", k_container},
    {"load driver", k_container},
    {"libibverbs", k_container | k_form},
    {"error", k_form},
    {"Error", k_form},
    {"ERROR", k_form},
    {"errno", k_form},
    {"ailure", k_form},
    {"FAILED", k_form},
    {"Unable", k_form},
    {"unable", k_form},
    {"Couldn't", k_form},
    {"annot ", k_form},
};

constexpr std::size_t k_min = 5;          // the shortest anchor of the cheap rejection
constexpr std::size_t k_hash = 1u << 16;  // every bigram its own entry: no false small shifts

// Wu-Manber (block of 2) over the anchors: a window of k_min bytes is checked only where its last bigram ends the
// k_min-prefix of some anchor; elsewhere it moves by up to k_min - 1 bytes.
struct wu_manber {
  std::vector<anchor> anchors;
  std::array<std::uint8_t, k_hash> shift{};
  std::array<std::vector<std::uint16_t>, k_hash> bucket;  // anchors whose k_min-prefix ends with this bigram

  static std::size_t h(unsigned char a, unsigned char b) { return (static_cast<std::size_t>(a) << 8) | b; }

  wu_manber() {
    for (const row& r : k_rows) {
      if (r.filter && r.doc.anchor.size() >= k_min) anchors.push_back({r.doc.anchor, k_form});
    }
    for (const anchor& a : k_extra) anchors.push_back(a);
    shift.fill(static_cast<std::uint8_t>(k_min - 1));
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      std::string_view a = anchors[i].text;
      for (std::size_t j = 1; j < k_min; ++j) {
        std::size_t x = h(static_cast<unsigned char>(a[j - 1]), static_cast<unsigned char>(a[j]));
        shift[x] = std::min<std::uint8_t>(shift[x], static_cast<std::uint8_t>(k_min - 1 - j));
      }
      bucket[h(static_cast<unsigned char>(a[k_min - 2]), static_cast<unsigned char>(a[k_min - 1]))].push_back(
          static_cast<std::uint16_t>(i));
    }
  }

  unsigned scan(std::string_view s) const {
    unsigned cls = 0;
    if (s.size() < k_min) return 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t pos = k_min - 1;
    const std::size_t n = s.size();
    while (pos < n) {
      std::size_t x = h(p[pos - 1], p[pos]);
      std::uint8_t sh = shift[x];
      if (sh != 0) {
        pos += sh;
        continue;
      }
      const std::size_t start = pos + 1 - k_min;
      for (std::uint16_t i : bucket[x]) {
        const anchor& a = anchors[i];
        if ((cls & a.cls) != a.cls && start + a.text.size() <= n &&
            std::memcmp(p + start, a.text.data(), a.text.size()) == 0) {
          cls |= a.cls;
        }
      }
      ++pos;
    }
    return cls;
  }
};

const wu_manber& prefilter() {
  static const wu_manber wm;
  return wm;
}

}  // namespace

unsigned classify(std::string_view line) { return prefilter().scan(line); }

std::optional<match> match_line(const prefix& p) {
  // A libfabric provider's own line is read by its row only: its function names (efa_mr_reg_impl()) and
  // <info>/<debug> levels are no failures of their own.
  std::size_t lf = p.rest.find("libfabric:");
  const bool libfabric_line = lf != std::string_view::npos && lf < 128 &&
                              p.rest.find("():", lf) != std::string_view::npos;
  for (const row& r : k_rows) {
    if (libfabric_line && r.how != rule::libfabric_warn) continue;
    std::string_view where = r.how == rule::libfabric_warn || r.how == rule::kernel_dev || r.how == rule::mlx5_cmd
                                 ? p.rest
                                 : p.message;
    if (where.find(r.doc.anchor) == std::string_view::npos) continue;
    match m;
    prefix q = p;
    if (r.how == rule::kernel_dev || r.how == rule::mlx5_cmd) q.message = p.rest;
    if (apply(r.how, q, m)) {
      if (m.gpu_text && !m.what.gpu_buffer) m.what.gpu_buffer = true;
      return m;
    }
  }
  return std::nullopt;
}

std::span<const form_row> rows() {
  static const std::vector<form_row> all = [] {
    std::vector<form_row> v;
    for (const row& r : k_rows) v.push_back(r.doc);
    return v;
  }();
  return all;
}

}  // namespace mrcheck::forms
