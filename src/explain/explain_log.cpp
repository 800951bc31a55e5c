// The one front door of explain (include/mrcheck/explain.h): read the log once, judge, render.
#include <mrcheck/explain.h>
#include <mrcheck/units.h>
#include <mrcheck/verdict_schema.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mrcheck {

namespace {

// The container evidence of the log (src/explain/causes/container_runtime.cpp): which runtime, and what its libraries said.
std::string container_notes_text(const container_log_scan& c) {
  std::string out;
  for (const auto& n : c.notes) {
    out += n.line > 0 ? fmt::format("container (line {}): {}\n", n.line, n.text)
                      : fmt::format("container: {}\n", n.text);
  }
  return out;
}

nlohmann::json container_notes_json(const container_log_scan& c) {
  nlohmann::json notes = nlohmann::json::array();
  for (const auto& n : c.notes) {
    notes.push_back(
        {{"what", n.what}, {"line", n.line == 0 ? nlohmann::json(nullptr) : nlohmann::json(n.line)}, {"text", n.text}});
  }
  return {{"runtime", c.runtime == container_runtime::none ? nlohmann::json(nullptr)
                                                           : nlohmann::json(std::string(to_string(c.runtime)))},
          {"notes", notes}};
}

}  // namespace

status explain_log(int fd, const sysroot& root, const explain_options& opts, explain_report& out) {
  out.source = escape_line(opts.source, 200);
  nccl_path_scan path;
  // The container evidence needs one "NET/IB" line; after it only lines with its own anchors.
  auto observe = [&](std::string_view l, std::size_t n) {
    if (out.scanner.last_line_container() || !out.containers.saw_net_ib) out.containers.feed(l, n);
    path.feed(l);
  };
  if (status s = scan_fd(fd, out.scanner, observe); !s) return s;

  // Node facts are read only when there is something to explain: a clean log costs no dlopen of libcuda.
  node_evidence evidence;
  bool have_evidence = false;
  auto node = [&]() -> const node_evidence& {
    if (!have_evidence) evidence = explain_evidence(root, out.origin);
    have_evidence = true;
    return evidence;
  };
  if (!out.scanner.groups().empty()) node();
  out.containers.finish();
  out.origin.log_runtime = out.containers.runtime;
  apply_container_log(out.containers, evidence);
  out.findings = explain_groups(out.scanner, evidence, out.origin);
  // The path NCCL took, only now: the findings above were made with the evidence as it was.
  out.path = judge_path(path, node, out.origin);
  if (!out.path) out.path = no_device_note(out.scanner, out.findings);
  return status::ok();
}

std::string explain_text(const explain_report& r) {
  std::string out = findings_to_text(r.findings, r.source, r.scanner);
  out += container_notes_text(r.containers);
  if (r.path) out += fmt::format("path: {} (fix: {})\n", r.path->text, r.path->fix);
  return out;
}

nlohmann::json explain_json(const explain_report& r) {
  nlohmann::json j = findings_to_json(r.findings, r.source, r.scanner, r.origin);
  j["container"] = container_notes_json(r.containers);
  j["path"] = r.path ? nlohmann::json{{"what", r.path->what},
                                      {"text", r.path->text},
                                      {"fix", r.path->fix},
                                      {"evidence_applies", r.path->evidence_applies}}
                     : nlohmann::json(nullptr);
  j["schema_version"] = k_json_schema_version;
  return j;
}

}  // namespace mrcheck
