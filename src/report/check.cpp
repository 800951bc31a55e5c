#include <mrcheck/check.h>
#include <mrcheck/owner.h>
#include <mrcheck/verdict_schema.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace mrcheck {

std::string_view to_string(verdict v) {
  switch (v) {
    case verdict::pass: return "pass";
    case verdict::warn: return "warn";
    case verdict::fail: return "fail";
    case verdict::skip: return "skip";
    case verdict::error: return "error";
  }
  return "error";
}

std::optional<verdict> parse_verdict(std::string_view s) {
  for (verdict v : {verdict::pass, verdict::warn, verdict::fail, verdict::skip, verdict::error}) {
    if (s == to_string(v)) return v;
  }
  return std::nullopt;
}

std::string_view to_string(fix_owner o) {
  switch (o) {
    case fix_owner::none: return "";
    case fix_owner::job: return "job";
    case fix_owner::node: return "node";
    case fix_owner::site: return "site";
  }
  return "";
}

std::optional<fix_owner> parse_fix_owner(std::string_view s) {
  for (fix_owner o : {fix_owner::job, fix_owner::node, fix_owner::site}) {
    if (s == to_string(o)) return o;
  }
  return std::nullopt;
}

int severity(verdict v) {
  switch (v) {
    case verdict::pass: return 0;
    case verdict::skip: return 1;
    case verdict::warn: return 2;
    case verdict::error: return 3;
    case verdict::fail: return 4;
  }
  return 3;
}

verdict worst(verdict a, verdict b) { return severity(a) >= severity(b) ? a : b; }

verdict report::overall() const {
  verdict v = verdict::pass;
  for (const auto& c : checks) {
    if (c.result == verdict::skip) continue;
    v = worst(v, c.result);
  }
  return v;
}

const check_result* report::find(std::string_view id) const {
  auto it = std::find_if(checks.begin(), checks.end(), [&](const check_result& c) { return c.id == id; });
  return it == checks.end() ? nullptr : &*it;
}

std::vector<std::string> failure_lines(const report& r) {
  std::vector<std::string> lines;
  for (const auto& c : r.checks) {
    if (c.result == verdict::pass || c.result == verdict::skip) continue;
    std::string upper(to_string(c.result));
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char ch) { return static_cast<char>(ch - 32); });
    std::string line = fmt::format("mrcheck: {}: {}: {}", c.id, upper, c.summary);
    if (!c.hint.empty()) line += fmt::format(" (fix: {})", c.hint);
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string to_text(const report& r) {
  std::size_t w = 5;
  for (const auto& c : r.checks) w = std::max(w, c.id.size());
  std::string out;
  for (const auto& c : r.checks) {
    out += fmt::format("{:<{}}  {:<5}  {}\n", c.id, w, to_string(c.result), c.summary);
    if (!c.hint.empty() && c.result != verdict::pass && c.result != verdict::skip) {
      out += fmt::format("{:<{}}  {:<5}  fix: {}\n", "", w, "", c.hint);
    }
  }
  out += fmt::format("{:<{}}  {}\n", "overall", w, to_string(r.overall()));
  return out;
}

std::string_view severity_name(verdict v) {
  switch (v) {
    case verdict::pass: return "ok";
    case verdict::skip: return "info";
    case verdict::warn: return "warning";
    case verdict::fail: return "critical";
    case verdict::error: return "unknown";
  }
  return "unknown";
}

std::string_view recommended_action(std::string_view check_id, verdict v) {
  if (v != verdict::warn && v != verdict::fail) return "none";
  // What fixes each check's finding (README "Checks"; docs/schema/README.md). Checks not listed (the job's own
  // probes, container checks, memlock of the calling shell) are fixed in the configuration the job or site uses.
  struct entry {
    std::string_view id, action;
  };
  static constexpr entry k_actions[] = {
      {"slurmd_memlock", "restart_slurmd"},  // slurmd's own limit: its unit, then a restart
      {"hca_fw", "update_firmware"},
      {"rdma_stack", "reboot"},  // matching kernel and rdma-core: a reboot
      {"gpu_driver", "reboot"},
      {"cuda_driver", "reboot"},
      {"gpudirect", "fix_config"},
      {"bar1", "contact_vendor"},  // the BAR1 aperture is the firmware's
      {"propagate_limits", "fix_config"},
      {"max_map_count", "fix_config"},
      {"hugepages", "fix_config"},
      {"nccl", "fix_config"},
  };
  for (const auto& e : k_actions) {
    if (e.id == check_id) return e.action;
  }
  return "fix_config";
}

void to_json(nlohmann::json& j, const check_result& c) {
  j = nlohmann::json{{"id", c.id},
                     {"verdict", std::string(to_string(c.result))},
                     {"severity", std::string(severity_name(c.result))},
                     {"recommended_action", std::string(recommended_action(c.id, c.result))},
                     {"summary", c.summary},
                     {"detail", c.detail},
                     {"hint", c.hint}};
  if (!c.device.empty()) j["device"] = c.device;
  if (fix_owner o = owner_of(c); o != fix_owner::none) j["owner"] = std::string(to_string(o));
}

void from_json(const nlohmann::json& j, check_result& c) {
  c.id = j.at("id").get<std::string>();
  auto v = parse_verdict(j.at("verdict").get<std::string>());
  if (!v) throw nlohmann::json::other_error::create(501, "unknown verdict", &j);
  c.result = *v;
  c.summary = j.value("summary", "");
  c.detail = j.value("detail", "");
  c.hint = j.value("hint", "");
  c.device = j.value("device", "");
  c.owner = fix_owner::none;
  if (j.contains("owner")) {
    auto o = parse_fix_owner(j.at("owner").get<std::string>());
    if (!o) throw nlohmann::json::other_error::create(501, "unknown owner", &j);
    c.owner = *o;
  }
}

nlohmann::json report_to_json(const report& r) {
  nlohmann::json j;
  j["schema_version"] = k_json_schema_version;
  j["verdict"] = std::string(to_string(r.overall()));
  j["checks"] = r.checks;
  return j;
}

bool report_from_json(const nlohmann::json& j, report& out, std::string& error) {
  try {
    out.checks = j.at("checks").get<std::vector<check_result>>();
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

}  // namespace mrcheck
