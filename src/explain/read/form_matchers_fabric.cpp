// The matchers of the form table for the EFA family and the kernel (form_matchers.h): aws-ofi-nccl's NET/OFI lines,
// libfabric providers' own lines, the RDMA drivers' dmesg lines and mlx5 firmware commands.
#include "form_matchers.h"

#include "text.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace mrcheck::forms {

using namespace text;

namespace {

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

}  // namespace

bool m_ofi_no_provider(const form_row&, const prefix&, match& out) {
  failure& f = out.what;
  f.transport = "ofi";
  f.call = "fi_getinfo";
  return true;
}

bool m_ofi_request(const form_row&, const prefix&, match& out) {
  failure& f = out.what;
  f.what = failure::kind::completion_error;
  f.transport = "ofi";
  return true;
}

bool m_ofi_step(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
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

bool m_libfabric_warn(const form_row&, const prefix& p, match& out) {
  failure& f = out.what;
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

bool m_libfabric_abort(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  f.transport = "libfabric";
  f.err = errno_in(msg.substr(msg.find("Libfabric error: (") + 17));
  return true;
}

bool m_libfabric_rs(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  f.transport = "libfabric";
  f.err = errno_in(msg);
  std::size_t c = msg.find("context: ");
  f.call = c == std::string_view::npos ? std::string() : call_at(msg.substr(c + 9));
  return true;
}

bool m_kernel_dev(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  return parse_kernel_dev(msg, f);
}

bool m_mlx5_cmd(const form_row&, const prefix& p, match& out) {
  std::string_view msg = p.message;
  failure& f = out.what;
  return parse_mlx5_cmd(msg, f);
}

}  // namespace mrcheck::forms
