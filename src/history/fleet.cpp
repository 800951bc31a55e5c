// The fleet comparison (include/mrcheck/fleet.h).
#include <mrcheck/fleet.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace mrcheck {

namespace {

std::string str_at(const nlohmann::json& j, const char* key, std::size_t max = 64) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? escape_line(it->get<std::string>(), max) : std::string();
}

std::string key_words(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '.', ' ');
  return s;
}

}  // namespace

namespace {

// The end (one past) of the object or array that starts at text[pos], strings and their escapes skipped; npos when
// it does not end.
std::size_t container_end(std::string_view text, std::size_t pos) {
  int depth = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// text.rfind(quoted, before) for a needle that starts with '"': memrchr to each quote, then a compare. libstdc++'s
// rfind compares at every byte (a memcmp call each), and a key that is not there ("node" and "slurm" in a `mrcheck
// report`) made it walk the whole report: half of fleet's CPU time on 10,000 reports (bench/fleet/README.md).
std::size_t rfind_quoted(std::string_view text, std::string_view quoted, std::size_t before) {
  if (quoted.empty() || quoted.size() > text.size()) return std::string_view::npos;
  std::size_t end = std::min(before, text.size() - quoted.size()) + 1;  // a match starts in [0, end)
  while (end > 0) {
    const void* p = ::memrchr(text.data(), quoted.front(), end);
    if (!p) return std::string_view::npos;
    std::size_t at = static_cast<std::size_t>(static_cast<const char*>(p) - text.data());
    // The next character first: a JSON report has a quote every few bytes, nearly none of them this key's.
    if ((quoted.size() < 2 || text[at + 1] == quoted[1]) && text.compare(at, quoted.size(), quoted) == 0) return at;
    end = at;
  }
  return std::string_view::npos;
}

// The fast path for reports mrcheck wrote (keys sorted: "checks" first, then "facts", most of the bytes, then
// "node", "slurm", "stack"): parse only the values of the keys the fleet needs. `"key":` inside a string value is
// escaped (\"key\"), so a match preceded by a backslash is skipped. A report this does not fit gets the full parse.
std::optional<nlohmann::json> fast_parse(std::string_view text) {
  nlohmann::json j = nlohmann::json::object();
  for (std::string_view key : {"checks", "stack", "slurm", "node"}) {
    std::string quoted = fmt::format("\"{}\"", key);
    bool first = key == "checks";
    std::size_t at = first ? text.find(quoted) : rfind_quoted(text, quoted, std::string_view::npos);
    while (at != std::string_view::npos && at > 0 && text[at - 1] == '\\') {
      at = first ? text.find(quoted, at + 1) : rfind_quoted(text, quoted, at - 1);
    }
    if (at == std::string_view::npos) continue;
    std::size_t v = at + quoted.size();
    while (v < text.size() && (text[v] == ' ' || text[v] == '\n' || text[v] == '\t' || text[v] == '\r')) ++v;
    if (v >= text.size() || text[v] != ':') return std::nullopt;
    ++v;
    while (v < text.size() && (text[v] == ' ' || text[v] == '\n' || text[v] == '\t' || text[v] == '\r')) ++v;
    if (v >= text.size()) return std::nullopt;
    std::size_t end;
    if (text[v] == '{' || text[v] == '[') {
      end = container_end(text, v);
    } else if (text[v] == '"') {
      end = v + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      end = end < text.size() ? end + 1 : std::string_view::npos;
    } else {
      return std::nullopt;
    }
    if (end == std::string_view::npos) return std::nullopt;
    nlohmann::json value = nlohmann::json::parse(text.substr(v, end - v), nullptr, false);
    if (value.is_discarded()) return std::nullopt;
    j[std::string(key)] = std::move(value);
  }
  if (!j.contains("stack")) return std::nullopt;
  return j;
}

}  // namespace

result<fleet_node> fleet_node_from_json(std::string_view text, const std::string& fallback_name) {
  nlohmann::json j;
  if (auto fast = fast_parse(text)) {
    j = std::move(*fast);
  } else {
    // Keep only what the fleet needs at the top level: a full report's facts are most of its bytes.
    auto keep = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
        const auto& k = parsed.get_ref<const std::string&>();
        return k == "stack" || k == "checks" || k == "node" || k == "slurm";
      }
      return true;
    };
    j = nlohmann::json::parse(text.begin(), text.end(), keep, false);
    if (j.is_discarded() || !j.is_object()) return status::error("not a JSON object");
  }
  auto st = j.find("stack");
  if (st == j.end() || !st->is_object()) return status::error("no \"stack\" (a report of an older mrcheck?)");
  fleet_node n;
  n.fp = fingerprint_from_json(*st);
  n.name = str_at(j, "node");
  if (n.name.empty()) {
    if (auto s = j.find("slurm"); s != j.end() && s->is_object()) n.name = str_at(*s, "node");
  }
  if (n.name.empty()) n.name = str_at(*st, "host");
  if (n.name.empty()) n.name = escape_line(fallback_name, 64);
  if (auto cs = j.find("checks"); cs != j.end() && cs->is_array()) {
    for (const auto& c : *cs) {
      if (!c.is_object() || str_at(c, "verdict") != "fail") continue;
      n.failing[str_at(c, "id")] = str_at(c, "summary", 200);
    }
  }
  return n;
}

fleet_result compare_fleet(const std::vector<fleet_node>& nodes) {
  fleet_result r;
  r.nodes = nodes.size();
  std::map<std::string, bool> keys;
  for (const auto& n : nodes) {
    for (const auto& [k, _] : n.fp.items) keys.emplace(k, true);
  }
  for (const auto& [key, _] : keys) {
    std::unordered_map<std::string, std::vector<const fleet_node*>> by_value;
    for (const auto& n : nodes) {
      auto it = n.fp.items.find(key);
      by_value[it == n.fp.items.end() ? std::string() : it->second].push_back(&n);
    }
    if (by_value.size() == 1) {
      ++r.same;
      continue;
    }
    std::vector<std::pair<std::string, std::vector<const fleet_node*>>> groups(by_value.begin(), by_value.end());
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second.size() != b.second.size() ? a.second.size() > b.second.size() : a.first < b.first;
    });
    fleet_fact f;
    f.key = key;
    f.majority = groups.front().first;
    f.majority_nodes = groups.front().second.size();
    auto checks = checks_for_key(key);
    for (std::size_t g = 1; g < groups.size(); ++g) {
      fleet_outlier o;
      o.value = groups[g].first;
      for (const fleet_node* n : groups[g].second) {
        o.nodes.push_back(n->name);
        for (auto c : checks) {
          auto it = n->failing.find(std::string(c));
          if (it != n->failing.end()) o.failing.emplace(it->first, it->second);
        }
      }
      if (!o.failing.empty()) r.outlier_fails = true;
      f.outliers.push_back(std::move(o));
    }
    r.differ.push_back(std::move(f));
  }
  return r;
}

std::string fleet_text(const fleet_result& r) {
  std::string out = fmt::format("mrcheck fleet: {} nodes; {} facts the same on every node, {} differ{}\n", r.nodes,
                                r.same, r.differ.size(), r.outlier_fails ? "; an outlier fails a check" : "");
  for (const auto& f : r.differ) {
    out += fmt::format("{}: {} nodes run {}\n", key_words(f.key), f.majority_nodes,
                       f.majority.empty() ? "(none)" : f.majority);
    for (const auto& o : f.outliers) {
      out += fmt::format("  {}: {} {} while {} nodes run {}", hostlist(o.nodes), key_words(f.key),
                         o.value.empty() ? "(none)" : o.value, f.majority_nodes,
                         f.majority.empty() ? "(none)" : f.majority);
      for (const auto& [c, summary] : o.failing) out += fmt::format(": {} fails: {}", c, summary);
      out += "\n";
    }
  }
  return out;
}

nlohmann::json fleet_json(const fleet_result& r) {
  nlohmann::json facts = nlohmann::json::array();
  for (const auto& f : r.differ) {
    nlohmann::json outliers = nlohmann::json::array();
    for (const auto& o : f.outliers) {
      nlohmann::json fails = nlohmann::json::array();
      for (const auto& [c, s] : o.failing) fails.push_back({{"check", c}, {"summary", s}});
      outliers.push_back(
          {{"value", o.value}, {"nodes", hostlist(o.nodes)}, {"count", o.nodes.size()}, {"fails", fails}});
    }
    facts.push_back(
        {{"key", f.key}, {"majority", f.majority}, {"majority_nodes", f.majority_nodes}, {"outliers", outliers}});
  }
  return {{"nodes", r.nodes}, {"same", r.same}, {"differ", facts}, {"verdict", r.outlier_fails ? "fail" : "pass"}};
}

}  // namespace mrcheck
