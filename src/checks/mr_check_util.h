// Shared pieces of the mr_host, dmabuf and mr_gpu checks (src/checks/): from a failed attempt to a diagnosis
// and a check line. Internal to libmrcheck_core.
#pragma once

#include <mrcheck/diagnosis.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

namespace mrcheck::detail {

// "ENOMEM (Cannot allocate memory)"; "errno 4242" when the name is unknown.
inline std::string errno_words(int err) {
  std::string_view name = errno_name(err);
  std::string_view msg = errno_message(err);
  if (name.empty()) return fmt::format("errno {}", err);
  return msg.empty() ? std::string(name) : fmt::format("{} ({})", name, msg);
}

// Runs the shared diagnosis for `a` and fills `c` (verdict fail) with it: the summary leads with the device, the
// call and the numbers, then the diagnosis; the detail carries cause, evidence and fallback; the hint is the fix.
inline void fill_failure(probe_check& c, const mr_attempt& a, bool gpu_buffer, const node_evidence& e,
                         std::string_view what) {
  failure f;
  f.what = failure::kind::call;
  f.call = a.failed_step.empty() ? a.call : a.failed_step;
  f.err = a.err;
  f.size = a.failed_step == a.call ? std::optional<std::uint64_t>(a.bytes) : std::nullopt;
  f.gpu_buffer = gpu_buffer;
  diagnosis d = diagnose(f, e);
  std::string where;
  if (a.failed_step == a.call && a.buffers > 1) {
    where = fmt::format(" at buffer {} of {} ({} of {} already registered)", a.failed_buffer + 1, a.buffers,
                        format_bytes(a.registered), format_bytes(a.bytes));
  }
  c.result.result = verdict::fail;
  c.result.summary = fmt::format("{}: {} of {} {} failed with {}{}: {}", a.device, f.call, format_bytes(a.bytes), what,
                                 errno_words(a.err), where, d.summary);
  std::string detail = fmt::format("cause={}{}\n", to_string(d.what),
                                   d.confirmed ? "" : " (not confirmed by evidence)");
  for (const auto& ev : d.evidence) detail += fmt::format("evidence: {}\n", ev);
  if (!d.fallback.empty()) detail += fmt::format("fallback: {}\n", d.fallback);
  c.result.detail = detail + c.result.detail;
  c.result.hint = d.fix;
  c.result.device = a.device;
  c.what = f;
  c.diag = std::move(d);
}

// The common "is there anything to probe" answers shared by the three checks; false when `c` was filled.
inline bool probe_ran(probe_check& c, const mr_probe_outcome& o, const node_evidence& e) {
  if (!o.load_error.is_ok()) {
    c.result.result = o.explicit_library ? verdict::error : verdict::skip;
    c.result.summary = o.explicit_library
                           ? fmt::format("cannot load the verbs library: {}", o.load_error.message())
                           : fmt::format("no RDMA user-space library ({}): NCCL cannot use InfiniBand here either",
                                         o.load_error.message());
    if (!o.explicit_library) {
      failure f;
      f.what = failure::kind::no_device;
      c.what = f;
      c.diag = diagnose(f, e);
      c.result.detail = fmt::format("cause={}\n", to_string(c.diag->what));
    }
    return false;
  }
  if (!o.list_error.is_ok()) {
    c.result.result = verdict::error;
    c.result.summary = fmt::format("cannot list RDMA devices: {}", o.list_error.message());
    return false;
  }
  if (o.selection.chosen.empty() && !o.device_requested.empty()) {
    // The user named an HCA: its absence is a mistake to report, not "not applicable".
    c.result.result = verdict::error;
    c.result.summary = fmt::format("--device {}: no such RDMA device with a usable port (present: {})",
                                   o.device_requested,
                                   o.devices.empty() ? std::string("none")
                                                     : fmt::format("{}", fmt::join(o.devices, ", ")));
    for (const auto& s : o.selection.skipped) c.result.detail += fmt::format("skipped: {}\n", s);
    return false;
  }
  if (o.selection.chosen.empty()) {
    c.result.result = verdict::skip;
    c.result.summary = o.devices.empty()
                           ? std::string("no RDMA device")
                           : fmt::format("no RDMA device NCCL would use ({} present, none usable)", o.devices.size());
    failure f;
    f.what = failure::kind::no_device;
    c.what = f;
    c.diag = diagnose(f, e);
    c.result.detail = fmt::format("cause={}\n", to_string(c.diag->what));
    for (const auto& s : o.selection.skipped) c.result.detail += fmt::format("skipped: {}\n", s);
    return false;
  }
  return true;
}

}  // namespace mrcheck::detail
