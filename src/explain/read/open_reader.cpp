// The open-world reader (line_forms.h, open_world_event): a line that reports a failed RDMA, fabric or GPU-memory
// operation is an event even when no row of the form table names its library. It needs three things on one
// non-INFO line: what was done (a call of a known API family, or a library's wording for the resource), a failure
// word, and an errno in any notation (errno_in). Rows add precision (the transport, the provider, echoes), never
// admission. docs/transports.md, "The open-world reader".
#include "line_forms.h"
#include "text.h"

#include <mrcheck/units.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace mrcheck::forms {

using namespace text;

namespace {

// API families whose calls pin memory or create fabric objects: verbs, rdma-cm, libfabric, UCX, the CUDA driver's
// memory calls, gdrcopy, NVSHMEM, MPI's window and registration calls.
constexpr std::string_view k_families[] = {"ibv_",  "mlx5dv_", "rdma_", "fi_",     "ucp_",  "uct_", "cuMem",
                                           "cuIpc", "cudaIpc", "gdr_",  "nvshmem", "MPI_W", "PMPI_"};

// The identifier of a family the line says failed: the first one followed (past its argument list) by a failure
// word or a colon, else the first one at all; file names ("gdr_copy_md.c:113") are no calls. "" when none.
std::string family_call(std::string_view msg) {
  std::string first;
  for (std::size_t pos = 0; pos < msg.size(); ++pos) {
    if (pos > 0 && is_ident(msg[pos - 1])) continue;
    std::string_view at = msg.substr(pos);
    for (std::string_view f : k_families) {
      if (!at.starts_with(f)) continue;
      std::size_t n = f.size();
      while (n < at.size() && n < 64 && is_ident(at[n])) ++n;
      if (n <= f.size() + 1 || (n < at.size() && at[n] == '.')) break;
      std::string_view after = at.substr(n);
      if (!after.empty() && after.front() == '(') {
        std::size_t close = after.find(')');
        after = close == std::string_view::npos || close > 200 ? std::string_view{} : after.substr(close + 1);
      }
      after = skip_spaces(after);
      if (after.starts_with("failed") || after.starts_with("error") || after.starts_with("returned") ||
          after.starts_with(":")) {
        return std::string(at.substr(0, n));
      }
      if (first.empty()) first = std::string(at.substr(0, n));
      break;
    }
  }
  return first;
}

// A library's own words for the resource, and the call that stands for it (the diagnosis reads calls).
struct wording {
  std::string_view words;  // case-insensitive
  std::string_view call;
};
constexpr wording k_wordings[] = {
    {"register", ""},  // a registration whose call is not named: the diagnosis's generic registration
    {"registration", ""},
    {"memory region", ""},
    {"pinning", ""},
    {"pinned", ""},
    {"to pin", ""},
    {"queue pair", "ibv_create_qp"},
    {"create qp", "ibv_create_qp"},
    {"completion queue", "ibv_create_cq"},
    {"create cq", "ibv_create_cq"},
    {"protection domain", "ibv_alloc_pd"},
};

// The RDMA objects a statement without an errno names ("Couldn't allocate MR", "failed to modify QP state to RTR",
// perftest and verbs examples), case-sensitive, with the call standing for each.
constexpr wording k_objects[] = {
    {" MR", ""},
    {"memory region", ""},
    {" QP", "ibv_create_qp"},
    {"queue pair", "ibv_create_qp"},
    {" CQ", "ibv_create_cq"},
    {"completion queue", "ibv_create_cq"},
    {" PD", "ibv_alloc_pd"},
    {" ah.", "ibv_create_ah"},
    {" AH", "ibv_create_ah"},
    {"address handle", "ibv_create_ah"},
};

// "Failed to create MR", "Couldn't allocate MR", "Unable to create ah.": a statement that an RDMA object could not
// be made, which the verbs examples and perftest print instead of an errno. The call it stands for, or nullopt.
std::optional<std::string> failed_object(std::string_view msg) {
  while (!msg.empty() && msg.front() == ' ') msg.remove_prefix(1);
  bool stated = false;
  for (std::string_view w : {"failed to ", "Failed to ", "Couldn't ", "couldn't ", "Unable to ", "unable to ",
                             "Could not ", "could not ", "Cannot ", "cannot "}) {
    stated = stated || msg.starts_with(w);
  }
  if (!stated || msg.size() > 200) return std::nullopt;
  for (const wording& o : k_objects) {
    std::size_t at = msg.find(o.words);
    if (at == std::string_view::npos) continue;
    const std::size_t end = at + o.words.size();
    if (end < msg.size() && is_ident(msg[end]) && msg[end] != 's') continue;  // " MRs", not " MRT"
    if (o.call == "ibv_create_qp" && icontains(msg, "modify")) return std::string("ibv_modify_qp");
    return std::string(o.call);
  }
  return std::nullopt;
}

// "ret=-22": a negative return printed as such (libfabric's fabtests, FT_PRINTERR) says the call failed.
bool failure_word(std::string_view m) {
  return icontains(m, "fail") || icontains(m, "unable") || icontains(m, "couldn't") || icontains(m, "could not") ||
         icontains(m, "cannot") || icontains(m, "error") || contains(m, "ret=-");
}

}  // namespace

bool open_world_event(const prefix& p, match& out) {
  const std::string_view msg = p.message;
  if (p.info || contains(p.rest, " DEBUG ") || contains(p.rest, "<info>") || contains(p.rest, "<debug>")) return false;
  // A library's warning it recovers from (UCX "WARN", libibverbs "Warning:"), unless it is NCCL's WARN.
  if (!p.warn && (contains(p.rest, " WARN ") || contains(p.rest, "Warning:") || contains(p.rest, "warning:"))) {
    return false;
  }
  // Provider libraries a container cannot load are the container evidence's (container_runtime.cpp), not failures.
  if (contains(msg, "load driver") || contains(msg, "shared object") || contains(msg, "dlopen")) return false;
  if (!failure_word(msg)) return false;
  const int err = errno_in(msg);
  if (err == 0) {
    std::optional<std::string> object = failed_object(msg);
    if (!object) return false;
    out.what.what = failure::kind::call;
    out.what.call = *object;
    return true;
  }
  std::string call = family_call(msg);
  if (call.empty()) {
    bool named = false;
    for (const wording& w : k_wordings) {
      if (icontains(msg, w.words)) {
        call = std::string(w.call);
        named = true;
        break;
      }
    }
    if (!named) return false;
  }
  out.what.what = failure::kind::call;
  out.what.call = call;
  out.what.err = err;
  if (call.starts_with("fi_")) out.what.transport = "libfabric";
  if (contains(p.rest, "UCX ") || call.starts_with("ucp_") || call.starts_with("uct_")) out.what.transport = "ucx";
  return true;
}

}  // namespace mrcheck::forms
