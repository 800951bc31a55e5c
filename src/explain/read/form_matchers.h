// The matchers of the form table (src/explain/read/form_table.cpp): one function per kind of line, each reading the line a
// row's anchor found and filling the event. Private to src/nccl.
#pragma once

#include "line_forms.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrcheck::forms {

// A row's matcher: true when the line is that form (out filled).
using matcher = bool (*)(const form_row& r, const prefix& p, match& out);

bool m_nccl_completion(const form_row& r, const prefix& p, match& out);
bool m_wc_status(const form_row& r, const prefix& p, match& out);
bool m_mlx5_completion(const form_row& r, const prefix& p, match& out);
bool m_duplicate_gpu(const form_row& r, const prefix& p, match& out);
bool m_no_device(const form_row& r, const prefix& p, match& out);
bool m_ofi_no_provider(const form_row& r, const prefix& p, match& out);
bool m_ofi_request(const form_row& r, const prefix& p, match& out);
bool m_ofi_step(const form_row& r, const prefix& p, match& out);
bool m_libfabric_warn(const form_row& r, const prefix& p, match& out);
bool m_libfabric_abort(const form_row& r, const prefix& p, match& out);
bool m_libfabric_rs(const form_row& r, const prefix& p, match& out);
bool m_kernel_dev(const form_row& r, const prefix& p, match& out);
bool m_mlx5_cmd(const form_row& r, const prefix& p, match& out);
bool m_nccl_call(const form_row& r, const prefix& p, match& out);
bool m_system_error(const form_row& r, const prefix& p, match& out);
// A library's error level or a tool's fatal statement: the failed call when the open-world reader reads one in the
// line (line_forms.h), else the program's word that it failed (m_system_error).
bool m_library_error(const form_row& r, const prefix& p, match& out);
bool m_registration(const form_row& r, const prefix& p, match& out);
bool m_verbs_call(const form_row& r, const prefix& p, match& out);
bool m_dmabuf(const form_row& r, const prefix& p, match& out);
bool m_fatal_warn(const form_row& r, const prefix& p, match& out);
bool m_framework_oom(const form_row& r, const prefix& p, match& out);
bool m_socket(const form_row& r, const prefix& p, match& out);
// mrcheck's own FAIL line: "mrcheck: <check>: FAIL: <summary>[ (fix: <hint>)]" (src/report/check.cpp failure_lines).
bool m_own_verdict(const form_row& r, const prefix& p, match& out);

// The call named at the start of s (lower-case identifier characters: "fi_enableCannot allocate memory" ends at the
// call); the first call of a known family in msg with a failure after it, with the text after it.
std::string call_at(std::string_view s);
std::optional<std::pair<std::string, std::string_view>> failed_call(std::string_view msg);

// The message says the buffer is GPU memory / host memory.
bool gpu_words(std::string_view msg);
bool host_words(std::string_view msg);

// The anchors of the rows that join the cheap rejection (src/explain/read/prefilter.cpp).
std::vector<std::string_view> row_anchors();

}  // namespace mrcheck::forms
