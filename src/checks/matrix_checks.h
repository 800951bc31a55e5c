// The matrix checks, one per file in src/checks/matrix_<id>.cpp; the registry (registry.cpp) lists them.
// Private to the core; unit tests include it to test each rule's edges alone.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/facts.h>
#include <mrcheck/matrix.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck::matrix {

check_result check_rdma_stack(const node_facts& f, const matrix_rules& r, const matrix_facts* extra);
check_result check_hca_fw(const node_facts& f, const matrix_rules& r);
check_result check_gpu_driver(const node_facts& f, const matrix_rules& r);
check_result check_gpudirect(const node_facts& f, const matrix_rules& r);
check_result check_cuda_driver(const node_facts& f, const matrix_rules& r);
check_result check_nccl(const node_facts& f, const matrix_rules& r);
check_result check_bar1(const node_facts& f, const matrix_rules& r);
check_result check_slurmd_memlock(const node_facts& f, const matrix_rules& r);
check_result check_propagate_limits(const matrix_rules& r, const matrix_facts* extra);

// Helpers shared by the checks (src/checks/check_util.cpp).
// The verdict a violated rule gives: fail/warn; off never reaches here (the check skips first).
verdict verdict_for(rule_action a);
check_result make(std::string_view id, verdict v, std::string summary, std::string detail = "", std::string hint = "");
check_result skipped(std::string_view id, std::string why);
// `c` with its device set when the finding is about exactly one device (`devices` has one distinct entry).
check_result on_device(check_result c, const std::vector<std::string>& devices);
// "6.1.0-18-amd64" -> 6.1.0; "580.82.09" -> 580.82.9. nullopt when the text does not start with a digit.
std::optional<dotted_version> leading_version(std::string_view text);
bool has_gpus(const node_facts& f);
bool has_rdma_devices(const node_facts& f);
const kmodule_fact* loaded_module(const node_facts& f, std::string_view name);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// An untrusted string (a file's content) made safe for a one-line summary.
std::string clean(std::string_view text, std::size_t max = 64);

}  // namespace mrcheck::matrix
