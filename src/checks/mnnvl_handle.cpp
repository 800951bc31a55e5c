// Check mnnvl_handle: on a node whose GPUs report a multi-node NVLink fabric (GB200/GB300 NVL72), a fabric-handle
// buffer can be made, exported and imported the way NCCL's MNNVL set-up does it before every communicator; since
// NCCL 2.27.3 a failure there fails the job (docs/facts/mnnvl.md §1, §5). The facts are the probe's
// (probe_fabric_handle, src/rdma/fabric_probe.cpp).
//
// Owners. CUDA_ERROR_NOT_PERMITTED means no IMEX channel the process may open (cuMemCreate's documentation in
// cuda.h). Where the probe sees none, or none it may open, in its own mount namespace, the fix is what puts a
// channel there: switch/nvidia_imex or the container runtime's device list, the site's (as for imex_channel). The
// probe cannot tell a channel the node has but the job's namespace lacks from a node with none: /proc/1/root is
// not the job user's to read; `mnnvl` and `imex_channel` report the node's side. Where the probe does see a usable
// channel and the driver still refuses, the channel is not the driver's (a stale device number) or the driver's
// IMEX support is off: the node's.
#include <mrcheck/checks.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mrcheck {

namespace {

std::string names(const std::vector<unsigned>& cs) {
  std::vector<std::string> out;
  for (unsigned c : cs) out.push_back(fmt::format("channel{}", c));
  return fmt::format("{}", fmt::join(out, ", "));
}

std::string gpu_words(const fabric_probe_result& f) {
  return fmt::format("GPU {}{}", f.cuda_device, f.pci_bdf.empty() ? "" : fmt::format(" ({})", f.pci_bdf));
}

// What the probe saw of the IMEX channels, for the summary.
std::string channel_words(const fabric_probe_result& f) {
  if (!f.channels_dir) return "no /dev/nvidia-caps-imex-channels in this process's mount namespace";
  if (f.channels.empty()) return "/dev/nvidia-caps-imex-channels is empty in this process's mount namespace";
  if (f.usable.empty()) return fmt::format("{} present but not read-write for this user", names(f.channels));
  return fmt::format("{} present and read-write for this user", names(f.usable));
}

void not_permitted(check_result& r, const fabric_probe_result& f) {
  const fabric_handle_attempt& a = f.attempt;
  r.result = verdict::fail;
  r.summary = fmt::format(
      "{} {} with a fabric handle on {}: {} ({}): no IMEX channel this process may use; NCCL 2.27.3+ fails every "
      "multi-node NVLink communicator (\"MNNVL ... is available but not working\")",
      a.call, format_bytes(a.bytes), gpu_words(f), a.error_name, channel_words(f));
  if (!f.usable.empty()) {
    r.owner = fix_owner::node;
    r.hint =
        "the driver refuses the channel the job sees: compare its major with `nvidia-caps-imex-channels` in "
        "/proc/devices, check the IMEX service (systemctl status nvidia-imex, nvidia-imex-ctl -N)";
    return;
  }
  r.owner = fix_owner::site;
  r.hint =
      "give the job an IMEX channel it may open read-write: SwitchType=switch/nvidia_imex in slurm.conf, or the "
      "container runtime's device list (/dev/nvidia-caps-imex-channels/channel0); NCCL_MNNVL_ENABLE=0 runs the job "
      "without multi-node NVLink";
}

}  // namespace

probe_check mnnvl_handle_check(const mr_probe_outcome& o) {
  probe_check c;
  check_result& r = c.result;
  r.id = "mnnvl_handle";
  const fabric_probe_result& f = o.fabric;
  if (!f.node_fabric) {
    r.result = verdict::skip;
    r.summary = fmt::format("no NVLink fabric on this node: fabric handles not tested ({})",
                            f.no_fabric.empty() ? std::string("not asked") : f.no_fabric);
    return c;
  }
  r.detail = fmt::format("{}\nIMEX channels: {}\n", f.fabric_line, channel_words(f));
  if (!f.cuda_problem.empty()) {
    r.result = f.cuda_problem_skip ? verdict::skip : verdict::error;
    r.summary = fmt::format("the GPUs report an NVLink fabric ({}) but CUDA could not be set up: {}", f.fabric_line,
                            f.cuda_problem);
    return c;
  }
  if (!f.handle_attr) {
    r.result = verdict::warn;
    r.owner = fix_owner::node;
    r.summary = fmt::format(
        "{} reports an NVLink fabric but no fabric-handle support (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED "
        "0): "
        "NCCL runs without multi-node NVLink, over the network",
        gpu_words(f));
    r.hint = "update the NVIDIA driver (fabric handles need CUDA 12.3 or later)";
    return c;
  }
  const fabric_handle_attempt& a = f.attempt;
  if (a.ok) {
    r.result = verdict::pass;
    r.summary = fmt::format(
        "a {} fabric-handle buffer on {} made, exported and imported (cuMemCreate CU_MEM_HANDLE_TYPE_FABRIC); IMEX {}",
        format_bytes(a.bytes), gpu_words(f), f.usable.empty() ? channel_words(f) : names(f.usable));
    return c;
  }
  if (a.cu_error == k_cuda_error_not_supported) {
    r.result = verdict::skip;
    r.summary = fmt::format("{} with a fabric handle on {}: {}: fabric handles not supported here, not tested", a.call,
                            gpu_words(f), a.error_name);
    return c;
  }
  if (a.cu_error == k_cuda_error_not_permitted) {
    not_permitted(r, f);
    return c;
  }
  r.result = verdict::fail;
  r.owner = fix_owner::node;
  r.summary =
      fmt::format("{} {} with a fabric handle on {}: {}: NCCL 2.27.3+ fails every multi-node NVLink communicator",
                  a.call, format_bytes(a.bytes), gpu_words(f), a.error_name);
  r.hint = "check the IMEX service and the domain (systemctl status nvidia-imex, nvidia-imex-ctl -N)";
  return c;
}

}  // namespace mrcheck
