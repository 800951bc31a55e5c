// The matchers of the form table (form_matchers.h): what each kind of line says, read from the line a row's anchor
// found. Plain string_view work, no regex.
#include "form_matchers.h"

#include "text.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace mrcheck::forms {

using namespace text;

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

namespace {

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

bool failure_words(std::string_view m) {
  return icontains(m, "fail") || icontains(m, "unable") || icontains(m, "couldn't") || icontains(m, "cannot") ||
         contains(m, "error") || contains(m, "Error") || contains(m, "ERROR") || contains(m, "errno");
}

// The text between the first pair of single quotes: NCCL's "Cuda failure 711 'peer mapping resources exhausted'".
std::string quoted_text(std::string_view s) {
  std::size_t a = s.find('\'');
  if (a == std::string_view::npos) return {};
  std::size_t b = s.find('\'', a + 1);
  if (b == std::string_view::npos || b - a > 80) return {};
  return escape_line(s.substr(a + 1, b - a - 1), 64);
}

// A WARN NCCL (or a CUDA check) prints only on its way to an error return. `row_call` is the row's call.
bool fatal_warn(std::string_view row_call, const prefix& p, failure& f) {
  std::string_view msg = p.message;
  if (p.info || contains(p.rest, " DEBUG ")) return false;
  f.what = failure::kind::fatal_warning;
  f.call = std::string(row_call);
  if (row_call == "cuda") {
    f.detail = quoted_text(msg);
    return true;
  }
  if (std::size_t e = msg.find("expression "); e != std::string_view::npos) {  // "... in expression cuMemCreate(...)"
    std::string_view t = msg.substr(e + 11);
    std::size_t n = 0;
    while (n < t.size() && n < 64 && is_ident(t[n])) ++n;
    f.call = std::string(t.substr(0, n));
    std::size_t close = msg.find(']');
    f.detail = msg.starts_with("[") && close != std::string_view::npos ? escape_line(msg.substr(1, close - 1), 64)
                                                                       : std::string();
    return !f.call.empty();
  }
  f.err = errno_in(msg);
  return true;
}

// The row's rule applied to the line; true when it is that form.
}  // namespace

bool gpu_words(std::string_view msg) {
  return contains(msg, "GPU MR") || contains(msg, "(gpu)") || contains(msg, "(cuda)") || contains(msg, "VRAM") ||
         contains(msg, "GPU memory") || contains(msg, "gpu memory") || contains(msg, "GPU buffer") ||
         contains(msg, "mscclpp") || contains(msg, "cuMem") || icontains(msg, "nvshmem");
}

// A memory pool of host pages, or the words themselves.
bool host_words(std::string_view msg) {
  return contains(msg, "mpool") || contains(msg, "memory pool") || icontains(msg, "host memory") ||
         contains(msg, "(host)") || contains(msg, "hugepage");
}

bool m_nccl_completion(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
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

bool m_wc_status(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  std::optional<int> s = status_after(msg, "IBV_WC_SUCCESS.");
  if (!s) s = status_after(msg, "status");
  if (!s || contains(msg, "status -")) return false;
  f.what = failure::kind::completion_error;
  f.wc_status = *s;
  return true;
}

bool m_mlx5_completion(const form_row&, const prefix&, match& out) {
  failure& f = out.what;
  f.what = failure::kind::completion_error;
  return true;
}

bool m_duplicate_gpu(const form_row&, const prefix&, match& out) {
  failure& f = out.what;
  f.what = failure::kind::duplicate_gpu;
  return true;
}

bool m_no_device(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  if (!contains(msg, "NET/IB")) return false;
  f.what = failure::kind::no_device;
  return true;
}

bool m_nccl_call(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  // NCCL prints the calls it can do without at INFO ("Call to mlx5dv_get_data_direct_sysfs_path failed ...
  // errno 19" on NICs without Data Direct, NVIDIA/nccl #1866): notes, not failures. Real failures are WARNs.
  if (p.info) return false;
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

bool m_system_error(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  if (p.info) return false;  // NCCL says it failed at WARN level; an INFO line quoting these words is no failure
  if (contains(msg, "Assertion") && !icontains(msg, "fail")) return false;
  if (contains(msg, "Caught signal") && !contains(msg, "Segmentation fault") && !contains(msg, "Bus error") &&
      !contains(msg, "Aborted") && !contains(msg, "Illegal instruction")) {
    return false;
  }
  f.what = failure::kind::system_error;
  return true;
}

bool m_library_error(const form_row& r, const prefix& p, match& out) {
  if (p.info) return false;
  return open_world_event(p, out) || m_system_error(r, p, out);
}

bool m_registration(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  const bool ucx = contains(p.rest, "UCX ");
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

bool m_verbs_call(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  const bool ucx = contains(p.rest, "UCX ");
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

bool m_dmabuf(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  const bool ucx = contains(p.rest, "UCX ");
  if (!(p.warn || contains(msg, "ERROR") || contains(msg, "failed")) ||
      !(icontains(msg, "fail") || icontains(msg, "not supported") || icontains(msg, "error")) ||
      contains(msg, "Trying a different method") || p.info) {
    return false;
  }
  f.call = contains(msg, "ibv_reg_dmabuf_mr") ? "ibv_reg_dmabuf_mr" : "dmabuf";
  f.err = errno_in(msg);
  if (ucx) f.transport = "ucx";
  return true;
}

bool m_fatal_warn(const form_row& r, const prefix& p, match& out) {
  failure& f = out.what;
  return fatal_warn(r.call, p, f);
}

bool m_framework_oom(const form_row&, const prefix&, match& out) {
  failure& f = out.what;
  f.what = failure::kind::fatal_warning;
  f.call = "cuda";
  f.detail = "framework: out of memory";
  return true;
}

bool m_socket(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  f.call = "socket";
  f.what = failure::kind::fatal_warning;
  f.err = errno_in(msg);
  return true;
}

bool m_own_verdict(const form_row&, const prefix& p, match& out) {
  // The check id is what the registry names (lower case, digits, '_'); anything else after "mrcheck: " is another
  // of mrcheck's lines (a table row, a note, "mrcheck: WARN: ...") and no verdict.
  constexpr std::string_view k_head = "mrcheck: ", k_fail = ": FAIL: ", k_fix = " (fix: ";
  std::string_view s = p.message;
  if (!s.starts_with(k_head)) return false;
  s.remove_prefix(k_head.size());
  const std::size_t end = s.find(k_fail);
  if (end == 0 || end == std::string_view::npos || end > 32) return false;
  const std::string_view id = s.substr(0, end);
  if (id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string_view::npos) return false;
  std::string_view summary = s.substr(end + k_fail.size());
  failure& f = out.what;
  f.what = failure::kind::own_verdict;
  f.call = std::string(id);
  // The fix is the line's last " (fix: ...)": the summary may hold parentheses of its own.
  if (const std::size_t fx = summary.rfind(k_fix); fx != std::string_view::npos && summary.ends_with(')')) {
    f.fix_given = std::string(summary.substr(fx + k_fix.size(), summary.size() - fx - k_fix.size() - 1));
    summary = summary.substr(0, fx);
  }
  f.detail = std::string(summary);
  return true;
}

}  // namespace mrcheck::forms
