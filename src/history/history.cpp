// The stack history mrcheck-prolog keeps in state_dir (history.h): a JSON file per node, the last stack, its
// verdicts, whether re-validation ran for it, and the last k_history_max_changes changes.
#include <mrcheck/default_changes.h>
#include <mrcheck/history.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <map>

namespace mrcheck {

namespace {

// "mlx5_0.fw" -> "mlx5_0 fw", "mlx5_core.srcversion" -> "mlx5_core srcversion": how a key reads in a line.
std::string key_words(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '.', ' ');
  return s;
}

std::string value_words(const std::string& v) { return v.empty() ? "(none)" : v; }

nlohmann::json change_to_json(const stack_change& c) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& i : c.items) items.push_back({{"key", i.key}, {"before", i.before}, {"after", i.after}});
  nlohmann::json j = {{"time", c.time}, {"new_boot", c.new_boot}, {"items", items}};
  if (!c.boot_id.empty()) j["boot_id"] = c.boot_id;
  if (c.boot_time) j["boot_time"] = *c.boot_time;
  return j;
}

std::string str(const nlohmann::json& j, const char* key, std::size_t max = 160) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? escape_line(it->get<std::string>(), max) : std::string();
}
std::int64_t num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

}  // namespace

std::vector<stack_change_item> diff_fingerprints(const stack_fingerprint& before, const stack_fingerprint& after) {
  std::vector<stack_change_item> out;
  auto value = [](const stack_fingerprint& fp, const std::string& k) {
    auto it = fp.items.find(k);
    return it == fp.items.end() ? std::string() : it->second;
  };
  std::vector<std::string> keys;
  for (const auto& [k, _] : before.items) keys.push_back(k);
  for (const auto& [k, _] : after.items) {
    if (!before.items.contains(k)) keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& k : keys) {
    std::string b = value(before, k), a = value(after, k);
    if (a == b) continue;
    if (k.ends_with(".srcversion")) {
      std::string mod = k.substr(0, k.size() - std::string_view(".srcversion").size());
      if (value(before, mod) != value(after, mod)) continue;  // the module's own line says it
    }
    out.push_back({k, b, a});
  }
  return out;
}

std::string utc_minute(std::int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if (::gmtime_r(&tt, &tm) == nullptr) return "?";
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min);
}

namespace {
std::string when_words(const stack_change& c) {
  if (c.new_boot && c.boot_time) return "since boot at " + utc_minute(*c.boot_time);
  if (c.new_boot) return "after a reboot, first seen at " + utc_minute(c.time);
  return "first seen at " + utc_minute(c.time);
}
}  // namespace

std::string change_line(const stack_change& c, const stack_change_item& i) {
  return fmt::format("mrcheck: changed: {} {} -> {} {}", key_words(i.key), value_words(i.before), value_words(i.after),
                     when_words(c));
}

std::vector<std::string> change_lines(const stack_change& c, const stack_change_item& i) {
  std::vector<std::string> out{change_line(c, i)};
  for (const auto& d : defaults_crossed(i.key, i.before, i.after)) {
    out.push_back("mrcheck: changed: " + default_change_words(d, i.before, i.after));
  }
  return out;
}

nlohmann::json change_defaults_json(const stack_change_item& i) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : defaults_crossed(i.key, i.before, i.after)) {
    out.push_back({{"setting", d.row->setting},
                   {"since", release_version_string(d.row->since)},
                   {"reverted", d.reverted},
                   {"effect", d.reverted ? d.row->before : d.row->effect},
                   {"source", d.row->source},
                   {"line", default_change_words(d, i.before, i.after)}});
  }
  return out;
}

std::string change_words(const stack_change& c, const stack_change_item& i) {
  return fmt::format("{} {} -> {} {}", key_words(i.key), value_words(i.before), value_words(i.after),
                     c.new_boot && c.boot_time ? "since reboot " + utc_minute(*c.boot_time)
                     : c.new_boot              ? "since a reboot, seen " + utc_minute(c.time)
                                               : "since " + utc_minute(c.time));
}

std::string change_words_short(const stack_change& c, const stack_change_item& i, std::size_t max) {
  std::string full = change_words(c, i);
  if (full.size() <= max) return full;
  const std::size_t at = full.rfind(" since ");
  const std::string since = at == std::string::npos ? std::string() : full.substr(at);
  auto items = [](std::string_view v) {
    std::vector<std::string> out;
    while (!v.empty()) {
      auto comma = v.find(',');
      if (comma != 0) out.emplace_back(v.substr(0, comma));
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    }
    return out;
  };
  const auto before = items(i.before), after = items(i.after);
  std::string diff;
  for (const auto& b : before) {
    if (std::find(after.begin(), after.end(), b) == after.end()) diff += " -" + b;
  }
  for (const auto& a : after) {
    if (std::find(before.begin(), before.end(), a) == before.end()) diff += " +" + a;
  }
  if (diff.empty() || diff.size() > max / 2) diff = " changed";
  return key_words(i.key) + diff + since;
}

std::string history_to_text(const stack_history& h) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : h.changes) changes.push_back(change_to_json(c));
  nlohmann::json j = {{"format", k_history_format},
                      {"version", k_history_version},
                      {"node", h.node},
                      {"current", fingerprint_to_json(h.current)},
                      {"since", h.since},
                      {"last_run", h.last_run},
                      {"verdicts", h.verdicts},
                      {"changes", changes}};
  if (!h.revalidated.empty()) {
    j["revalidated"] = {{"verdict", h.revalidated}, {"reason", h.revalidate_reason}, {"time", h.revalidated_time}};
  }
  return j.dump(1, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

result<stack_history> parse_history(std::string_view text, std::string_view node) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return status::error("not valid JSON");
  if (str(j, "format") != k_history_format) return status::error("not a mrcheck stack history");
  auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer()) return status::error("no version");
  if (v->get<std::int64_t>() > k_history_version) {
    return status::error(
        fmt::format("version {} is newer than this mrcheck's {}", v->get<std::int64_t>(), k_history_version));
  }
  if (v->get<std::int64_t>() < 1) return status::error("bad version");
  stack_history h;
  h.node = str(j, "node", 64);
  if (h.node != node) {
    return status::error(fmt::format("it is node '{}'s, not '{}'s", h.node, escape_line(node, 64)));
  }
  auto cur = j.find("current");
  if (cur == j.end() || !cur->is_object()) return status::error("no current stack");
  h.current = fingerprint_from_json(*cur);
  h.has_current = true;
  h.since = num(j, "since");
  h.last_run = num(j, "last_run");
  if (auto vs = j.find("verdicts"); vs != j.end() && vs->is_object()) {
    for (const auto& [k, val] : vs->items()) {
      if (val.is_string()) h.verdicts[escape_line(k, 64)] = escape_line(val.get<std::string>(), 16);
    }
  }
  if (auto r = j.find("revalidated"); r != j.end() && r->is_object()) {
    h.revalidated = str(*r, "verdict", 16);
    h.revalidate_reason = str(*r, "reason", 200);
    h.revalidated_time = num(*r, "time");
  }
  if (auto cs = j.find("changes"); cs != j.end()) {
    if (!cs->is_array()) return status::error("changes is not a list");
    for (const auto& c : *cs) {
      if (!c.is_object()) return status::error("a change is not an object");
      stack_change sc;
      sc.time = num(c, "time");
      sc.boot_id = str(c, "boot_id", 64);
      if (auto bt = c.find("boot_time"); bt != c.end() && bt->is_number_integer())
        sc.boot_time = bt->get<std::int64_t>();
      if (auto nb = c.find("new_boot"); nb != c.end() && nb->is_boolean()) sc.new_boot = nb->get<bool>();
      if (auto is = c.find("items"); is != c.end() && is->is_array()) {
        for (const auto& i : *is) {
          if (!i.is_object()) continue;
          sc.items.push_back({str(i, "key", 64), str(i, "before"), str(i, "after")});
        }
      }
      h.changes.push_back(std::move(sc));
    }
  }
  if (h.changes.size() > k_history_max_changes) {
    h.changes.erase(h.changes.begin(), h.changes.end() - static_cast<std::ptrdiff_t>(k_history_max_changes));
  }
  return h;
}

std::optional<stack_change> record_run(stack_history& h, const stack_fingerprint& fp, const report& r,
                                       std::int64_t now) {
  std::optional<stack_change> out;
  if (!h.has_current) {
    h.has_current = true;
    h.since = now;
  } else {
    auto items = diff_fingerprints(h.current, fp);
    if (!items.empty()) {
      stack_change c;
      c.time = now;
      c.boot_id = fp.boot_id;
      c.boot_time = fp.boot_time;
      c.new_boot = !fp.boot_id.empty() && fp.boot_id != h.current.boot_id;
      c.items = std::move(items);
      h.changes.push_back(c);
      if (h.changes.size() > k_history_max_changes) h.changes.erase(h.changes.begin());
      h.since = now;
      h.revalidated.clear();  // a new stack has not been re-validated
      h.revalidate_reason.clear();
      h.revalidated_time = 0;
      out = std::move(c);
    }
  }
  h.current = fp;
  h.last_run = now;
  h.verdicts.clear();
  for (const auto& c : r.checks) h.verdicts[c.id] = std::string(to_string(c.result));
  return out;
}

namespace {
// Within one change, the item that says most about a check: the HCA driver before the library before the kernel.
int item_rank(std::string_view key) {
  constexpr std::string_view order[] = {"mlx5_core", "rdma-core", "nvidia_driver", "kernel", "ib_core", "mlx5_ib"};
  for (std::size_t i = 0; i < std::size(order); ++i) {
    if (key == order[i]) return static_cast<int>(i);
  }
  return key.ends_with(".srcversion") ? 200 : 100;
}
}  // namespace

const stack_change* change_for_check(const stack_history& h, std::string_view check_id,
                                     const stack_change_item** item) {
  for (auto c = h.changes.rbegin(); c != h.changes.rend(); ++c) {
    const stack_change_item* best = nullptr;
    for (const auto& i : c->items) {
      auto checks = checks_for_key(i.key);
      // Re-validation runs because of the change as a whole.
      if (check_id != "revalidate" && std::find(checks.begin(), checks.end(), check_id) == checks.end()) continue;
      if (!best || item_rank(i.key) < item_rank(best->key)) best = &i;
    }
    if (best) {
      if (item) *item = best;
      return &*c;
    }
  }
  return nullptr;
}

namespace {
std::string label(std::string_view v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}
// A Prometheus label name: [a-zA-Z_][a-zA-Z0-9_]*.
std::string label_name(std::string_view key) {
  std::string o;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
    o += ok ? c : '_';
  }
  if (o.empty() || (o[0] >= '0' && o[0] <= '9')) o.insert(0, "_");
  return o;
}
}  // namespace

std::string prometheus_stack_lines(const stack_fingerprint& fp, const stack_history* h) {
  std::string out =
      "# HELP mrcheck_stack_changed_timestamp_seconds When mrcheck-prolog last saw this node's stack change "
      "(kernel, modules, rdma-core, firmware, drivers, limits); 0 when no change is known.\n"
      "# TYPE mrcheck_stack_changed_timestamp_seconds gauge\n";
  std::int64_t t = h && !h->changes.empty() ? h->changes.back().time : 0;
  out += fmt::format("mrcheck_stack_changed_timestamp_seconds {}\n", t);
  out +=
      "# HELP mrcheck_stack_info The node's stack as labels (value always 1): compare nodes on a dashboard.\n"
      "# TYPE mrcheck_stack_info gauge\nmrcheck_stack_info{";
  bool first = true;
  for (const auto& [k, v] : fp.items) {
    if (k.ends_with(".srcversion") || k.ends_with(".psid")) continue;  // identities, not versions
    out += fmt::format("{}{}=\"{}\"", first ? "" : ",", label_name(k), label(v));
    first = false;
  }
  out += "} 1\n";
  return out;
}

std::string hostlist(std::vector<std::string> names) {
  struct parsed {
    std::string prefix;
    std::string digits;
    std::string name;
  };
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::map<std::pair<std::string, std::size_t>, std::vector<std::string>> groups;  // (prefix, width) -> digits
  std::vector<std::string> plain;
  std::vector<std::pair<std::string, std::size_t>> order;
  for (const auto& n : names) {
    std::size_t d = n.size();
    while (d > 0 && n[d - 1] >= '0' && n[d - 1] <= '9') --d;
    if (d == n.size() || n.size() - d > 18) {
      plain.push_back(n);
      continue;
    }
    auto key = std::make_pair(n.substr(0, d), n.size() - d);
    if (!groups.contains(key)) order.push_back(key);
    groups[key].push_back(n.substr(d));
  }
  std::vector<std::string> parts;
  for (const auto& key : order) {
    auto& ds = groups[key];
    std::sort(ds.begin(), ds.end(),
              [](const std::string& a, const std::string& b) { return std::stoull(a) < std::stoull(b); });
    if (ds.size() == 1) {
      parts.push_back(key.first + ds[0]);
      continue;
    }
    std::vector<std::string> ranges;
    for (std::size_t i = 0; i < ds.size();) {
      std::size_t j = i;
      while (j + 1 < ds.size() && std::stoull(ds[j + 1]) == std::stoull(ds[j]) + 1) ++j;
      ranges.push_back(j == i ? ds[i] : ds[i] + "-" + ds[j]);
      i = j + 1;
    }
    parts.push_back(fmt::format("{}[{}]", key.first, fmt::join(ranges, ",")));
  }
  for (const auto& p : plain) parts.push_back(p);
  std::sort(parts.begin(), parts.end());
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace mrcheck
