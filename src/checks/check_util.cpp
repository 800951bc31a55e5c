// Helpers shared by the rule-judged checks (src/checks/matrix_*.cpp, declared in matrix_checks.h).
#include "checks/matrix_checks.h"

#include <mrcheck/units.h>

#include <algorithm>

namespace mrcheck {

namespace matrix {

verdict verdict_for(rule_action a) { return a == rule_action::warn ? verdict::warn : verdict::fail; }

check_result on_device(check_result c, const std::vector<std::string>& devices) {
  if (!devices.empty() &&
      std::all_of(devices.begin(), devices.end(), [&](const std::string& d) { return d == devices.front(); })) {
    c.device = devices.front();
  }
  return c;
}

check_result make(std::string_view id, verdict v, std::string summary, std::string detail, std::string hint) {
  check_result c;
  c.id = std::string(id);
  c.result = v;
  c.summary = std::move(summary);
  c.detail = std::move(detail);
  if (v != verdict::pass && v != verdict::skip) c.hint = std::move(hint);
  return c;
}

check_result skipped(std::string_view id, std::string why) { return make(id, verdict::skip, std::move(why)); }

std::optional<dotted_version> leading_version(std::string_view text) {
  std::size_t end = 0;
  while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == '.')) ++end;
  std::string_view v = text.substr(0, end);
  while (!v.empty() && v.back() == '.') v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  auto parsed = parse_dotted_version(v);
  if (!parsed) return std::nullopt;
  return *parsed;
}

bool has_gpus(const node_facts& f) { return f.gpus.is_ok() && !f.gpus->empty(); }
bool has_rdma_devices(const node_facts& f) { return f.rdma_devices.is_ok() && !f.rdma_devices->empty(); }

const kmodule_fact* loaded_module(const node_facts& f, std::string_view name) {
  auto it = f.modules.find(std::string(name));
  if (it == f.modules.end() || !it->second.loaded) return nullptr;
  return &it->second;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string clean(std::string_view text, std::size_t max) { return escape_line(text, max); }

}  // namespace matrix

}  // namespace mrcheck
