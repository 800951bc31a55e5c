// The probes' verdicts: what the checks layer judges from each probe's outcome (src/checks/mr_host.cpp, dmabuf.cpp,
// mr_gpu.cpp, mr_report.cpp, data_plane.cpp, nccl_pair.cpp). The probes themselves, and what they measure, are in
// mr_probe.h, rdma_probe.h and nccl_probe.h (the probes layer); the functions that judge them live with the
// checks that give the verdicts, and so are declared here.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/diagnosis.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/rdma_probe.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <vector>

namespace mrcheck {

// ---- the registration probe (mrcheck probe mr) ----

// The checks. `evidence` is what the diagnosis may use (limits, root, CAP_IPC_LOCK, max_map_count, stack).
// Each returns the verdict and, when a call failed, the shared diagnosis it was built from.
struct probe_check {
  check_result result;
  std::optional<diagnosis> diag;
  failure what;  // the failed call (meaningful only with diag)
};
probe_check mr_host_check(const mr_probe_outcome& o, const node_evidence& evidence);
probe_check dmabuf_check(const mr_probe_outcome& o, const node_evidence& evidence);
probe_check mr_gpu_check(const mr_probe_outcome& o, const node_evidence& evidence);
// mnnvl_handle (src/checks/mnnvl_handle.cpp): the fabric-handle buffer of o.fabric. pass; fail on
// CUDA_ERROR_NOT_PERMITTED (owner site, or node when the probe sees a usable IMEX channel) or another error (node);
// skip without a fabric or on CUDA_ERROR_NOT_SUPPORTED; warn when the GPU reports no fabric-handle support.
probe_check mnnvl_handle_check(const mr_probe_outcome& o);

// Evidence about this process and node for the diagnosis, read through `root` (the host's for the probe, a
// fixture tree in tests): its RLIMIT_MEMLOCK, euid and CapEff (read_own_process, facts.h), max_map_count,
// meminfo, container signs, and - only when `deep` (a failure needs explaining) - the memlock hop of the
// ancestor chain and the RDMA stack.
node_evidence probe_evidence(const sysroot& root, const mr_probe_outcome& o, bool deep);

// The checks (mr_gpu and mnnvl_handle only when the GPU side was requested), in order mr_host, dmabuf, mr_gpu,
// mnnvl_handle.
std::vector<probe_check> mr_probe_checks(const mr_probe_outcome& o, const node_evidence& evidence);
report to_report(const std::vector<probe_check>& checks);

// The probe's own data for JSON consumers: sizes and their inputs, library, devices, each attempt, and the
// diagnosis of each failed check ({"cause": ..., "evidence": [...], ...}).
nlohmann::json probe_to_json(const mr_probe_outcome& o, const std::vector<probe_check>& checks);

// ---- the data-plane probe (mrcheck probe rdma) ----

// The check data_plane (src/checks/data_plane.cpp): pass when every tested port moved and verified every size;
// fail naming the first failed port's step and cause; skip when there is no device or no port was selected
// ("nothing was tested"); error when the library did not load or the device list could not be read.
check_result data_plane_check(const rdma_probe_outcome& o);
// The `probe` member of `mrcheck probe rdma --json` (docs/schema/probe-rdma.schema.json).
nlohmann::json rdma_probe_to_json(const rdma_probe_outcome& o);

// ---- the NCCL pair (mrcheck probe nccl) ----

// The verdict for check id "nccl_pair" (src/checks/nccl_pair.cpp): pass with the transport and timings; fail
// with NCCL's warning explained through diagnose() (memlock evidence of this process) for a failed init, a
// wrong sum, a crash or a timeout; skip when there is no GPU or no NCCL/CUDA library.
check_result judge_nccl_pair(const nccl_pair_outcome& o);

}  // namespace mrcheck
