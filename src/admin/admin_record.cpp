#include <mrcheck/admin_record.h>

#include <mrcheck/check_registry.h>
#include <mrcheck/step.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>

namespace mrcheck {

namespace {

constexpr std::string_view k_sep = " | ";
constexpr std::string_view k_prefix = "mrcheck: ";
constexpr std::size_t k_names_shown = 8;

std::string compact_bytes(std::uint64_t v) {
  std::string s = format_bytes(v);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 32) return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

std::string upper(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}

std::string node_list(const std::vector<std::string>& names) {
  std::string s;
  std::size_t shown = std::min(names.size(), k_names_shown);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) s += ',';
    s += names[i];
  }
  if (names.size() > shown) s += fmt::format(" +{} more", names.size() - shown);
  return s;
}

// Text that is already safe (printable ASCII, none of `also`) passes unchanged, so a token escaped once by
// the node is not escaped again by each later hop (which would turn "\x7c" into "\x5cx7c"); anything else
// is escaped.
std::string clean(std::string_view text, std::size_t max, std::string_view also) {
  bool safe = std::all_of(text.begin(), text.end(),
                          [&](char c) { return c >= 0x20 && c < 0x7f && also.find(c) == std::string_view::npos; });
  if (safe && text.size() <= max) return std::string(text);
  return escape_line(text, max, also);
}

// A node name is kept to 64 bytes, cut where a UTF-8 sequence starts: a name cut inside one decoded to a
// lone lead byte that the JSON encoder wrote back as U+FFFD, so every hop changed the name (fuzz F11).
std::string cut_name(std::string_view n) {
  constexpr std::size_t k_name_max = 64;
  if (n.size() <= k_name_max) return std::string(n);
  std::size_t end = k_name_max;
  while (end > 0 && (static_cast<unsigned char>(n[end]) & 0xc0) == 0x80) --end;
  return std::string(n.substr(0, end));
}

// Names in records are shown escaped; ',' separates them in a list.
std::string safe_name(std::string_view n) { return n.empty() ? std::string("?") : clean(n, 64, "|;, "); }

// ---- the summary of folded records ----

enum class fold_kind { fail, error, warn, pass, no_report, other };
constexpr std::array<std::string_view, 6> k_fold_words{"FAIL", "ERROR", "WARN", "pass", "no report", "other"};

struct fold_counts {
  std::size_t steps = 0;
  std::array<std::size_t, 6> n{};
};

bool is_summary(std::string_view seg) { return seg.starts_with("mrcheck: earlier steps "); }

// "mrcheck: step 3: FAIL ..." -> fail; nullopt when `seg` is not a step record of ours.
std::optional<fold_kind> step_kind(std::string_view seg) {
  if (!seg.starts_with(k_prefix) || is_summary(seg)) return std::nullopt;
  auto colon = seg.find(": ", k_prefix.size());
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view rest = seg.substr(colon + 2);
  if (rest.starts_with("FAIL")) return fold_kind::fail;
  if (rest.starts_with("ERROR")) return fold_kind::error;
  if (rest.starts_with("WARN")) return fold_kind::warn;
  if (rest.starts_with("pass")) return fold_kind::pass;
  if (rest.starts_with("no report")) return fold_kind::no_report;
  return fold_kind::other;
}

// "mrcheck: earlier steps (5): 1 FAIL, 4 pass"
std::string format_summary(const fold_counts& c) {
  std::string s = fmt::format("mrcheck: earlier steps ({}):", c.steps);
  bool first = true;
  for (std::size_t i = 0; i < c.n.size(); ++i) {
    if (!c.n[i]) continue;
    s += fmt::format("{} {} {}", first ? "" : ",", c.n[i], k_fold_words[i]);
    first = false;
  }
  return s;
}

fold_counts parse_summary(std::string_view seg) {
  fold_counts c;
  auto num = [](std::string_view t, std::size_t& out) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() ? static_cast<std::size_t>(p - t.data()) : 0;
  };
  std::string_view rest = seg.substr(std::string_view("mrcheck: earlier steps (").size());
  std::size_t used = num(rest, c.steps);
  rest = used ? rest.substr(used) : std::string_view{};
  if (rest.starts_with("):")) rest.remove_prefix(2);
  while (!rest.empty()) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == ',')) rest.remove_prefix(1);
    std::size_t v = 0;
    std::size_t k = num(rest, v);
    if (!k) break;
    rest.remove_prefix(k);
    if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    for (std::size_t i = 0; i < k_fold_words.size(); ++i) {
      if (rest.starts_with(k_fold_words[i])) {
        c.n[i] += v;
        rest.remove_prefix(k_fold_words[i].size());
        break;
      }
    }
  }
  return c;
}

// Splits at our separator without trimming and keeps empty segments, so that join_records(split_records(x)) == x:
// text that is not ours comes back byte for byte, whatever it holds (docs/jobstats.md).
std::vector<std::string> split_records(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    // Another tool's text that ends in '|' glues to our separator: in "note | | mrcheck: ..." the first " | "
    // is part of "note |", so a separator followed by another '|' is not one. Else the record would be read as
    // "| mrcheck: ...", not ours, never folded (fuzz F9), and a rewrite would change the other text.
    auto p = s.find(k_sep);
    while (p != std::string_view::npos && p + k_sep.size() < s.size() && s[p + k_sep.size()] == '|') {
      p = s.find(k_sep, p + 1);
    }
    out.emplace_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s = s.substr(p + k_sep.size());
    if (s.empty()) out.emplace_back();  // "text | ": the empty last segment keeps the separator
  }
  return out;
}

std::size_t joined_size(const std::vector<std::string>& segs) {
  std::size_t n = 0;
  for (const auto& s : segs) n += s.size();
  if (segs.size() > 1) n += (segs.size() - 1) * k_sep.size();
  return n;
}

std::string join_records(const std::vector<std::string>& segs) {
  std::string out;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (i) out += k_sep;  // by position: a segment of theirs may be empty
    out += segs[i];
  }
  return out;
}

}  // namespace

std::string admin_escape(std::string_view text, std::size_t max) { return escape_line(text, max, "|;"); }

node_record make_node_record(std::uint32_t node_id, std::string_view node, const node_state& st, const report& rep) {
  node_record r;
  r.node_id = node_id;
  r.node = cut_name(node);
  for (const auto& ch : rep.checks) {
    if (r.checks.size() >= k_node_checks_max) break;
    node_check c;
    c.id = valid_id(ch.id) ? ch.id : "unknown";
    c.result = ch.result;
    if (c.id == "memlock" && st.active) {
      std::uint64_t soft = st.enf && st.enf->attempted ? st.enf->start.soft : st.prediction.start.soft;
      c.token = fmt::format("memlock={}", compact_bytes(soft));
      std::string_view cause = hop_info(st.prediction.hop).token;
      if (ch.result != verdict::pass && ch.result != verdict::skip && !cause.empty()) {
        c.token += fmt::format(" ({})", cause);
      }
    } else if ((c.id == "stack" || c.id == "nofile") && st.active &&
               (ch.result == verdict::fail || ch.result == verdict::warn)) {
      // "stack=unlimited (srun's propagation, job)": the value, the hop that set it and who fixes it.
      const limit_prediction& p = c.id == "stack" ? st.stack : st.nofile;
      std::string v = format_limit(p.kind, p.start.soft);
      v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
      c.token = fmt::format("{}={}", c.id, v);
      if (p.hop) c.token += fmt::format(" ({}, {})", p.hop->hop, to_string(p.hop->owner));
    } else if (ch.result == verdict::pass || ch.result == verdict::skip) {
      c.token = c.id;
    } else {
      c.token = fmt::format("{} ({})", c.id, admin_escape(ch.summary, k_token_max - c.id.size() - 3));
    }
    c.token = clean(c.token, k_token_max, "|;");
    r.checks.push_back(std::move(c));
  }
  return r;
}

std::string encode_node_record(const node_record& r) {
  std::size_t cap = k_token_max;
  for (;;) {
    nlohmann::json j;
    j["v"] = 1;
    j["node_id"] = r.node_id;
    j["node"] = cut_name(r.node);
    nlohmann::json checks = nlohmann::json::array();
    for (std::size_t i = 0; i < r.checks.size() && i < k_node_checks_max; ++i) {
      const auto& c = r.checks[i];
      checks.push_back(
          {{"id", c.id.substr(0, 32)}, {"verdict", to_string(c.result)}, {"token", c.token.substr(0, cap)}});
    }
    j["checks"] = std::move(checks);
    // ensure_ascii: the line never holds a raw newline or a byte a reader could take for one.
    std::string s = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    if (s.size() <= k_node_record_max || cap <= 8) return s.substr(0, k_node_record_max);
    cap /= 2;
  }
}

result<node_record> decode_node_record(std::string_view line) {
  if (line.size() > k_node_record_max) return status::error("node record longer than its limit");
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return status::error("node record is not a JSON object");
  auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || v->get<int>() != 1)
    return status::error("node record: unknown version");
  node_record r;
  auto id = j.find("node_id");
  auto node = j.find("node");
  auto checks = j.find("checks");
  if (id == j.end() || !id->is_number_unsigned() || node == j.end() || !node->is_string() || checks == j.end() ||
      !checks->is_array()) {
    return status::error("node record: missing or mistyped field");
  }
  std::uint64_t nid = id->get<std::uint64_t>();
  if (nid > UINT32_MAX) return status::error("node record: node id out of range");
  r.node_id = static_cast<std::uint32_t>(nid);
  r.node = cut_name(node->get<std::string>());
  if (checks->size() > k_node_checks_max) return status::error("node record: too many checks");
  for (const auto& c : *checks) {
    if (!c.is_object()) return status::error("node record: check is not an object");
    auto cid = c.find("id");
    auto cv = c.find("verdict");
    auto ct = c.find("token");
    if (cid == c.end() || !cid->is_string() || cv == c.end() || !cv->is_string() || ct == c.end() || !ct->is_string()) {
      return status::error("node record: check with a missing or mistyped field");
    }
    node_check nc;
    nc.id = cid->get<std::string>();
    if (!valid_id(nc.id)) return status::error(fmt::format("node record: bad check id '{}'", escape_line(nc.id, 32)));
    auto verdict_v = parse_verdict(cv->get<std::string>());
    if (!verdict_v) return status::error("node record: unknown verdict");
    nc.result = *verdict_v;
    nc.token = clean(ct->get<std::string>(), k_token_max, "|;");
    r.checks.push_back(std::move(nc));
  }
  return r;
}

std::string step_label(std::uint32_t step_id) {
  if (step_id == 0xfffffffbU) return "batch";
  if (step_id == 0xfffffffaU) return "interactive";
  if (step_id == 0xfffffffcU) return "extern";
  return fmt::format("step {}", step_id);
}

namespace {

// Node i's name in the record: its own record's, else slurmctld's (names), else its index.
std::string record_node_name(const node_record* r, const std::vector<std::string>& names, std::uint32_t i) {
  if (r && !r->node.empty()) return safe_name(r->node);
  if (i < names.size() && !names[i].empty()) return safe_name(names[i]);
  return fmt::format("node index {}", i);
}

}  // namespace

std::string format_step_record(std::string_view step, std::uint32_t nnodes, const std::vector<node_record>& records,
                               const std::vector<std::string>& names, bool cancelled) {
  std::vector<const node_record*> by_id(nnodes, nullptr);
  for (const auto& r : records) {
    if (r.node_id < nnodes && !by_id[r.node_id]) by_id[r.node_id] = &r;
  }
  struct item {
    verdict v;
    std::string token;
    bool job_probe = false;
    std::vector<std::string> nodes;
  };
  std::vector<item> items;
  std::size_t passing = 0;
  std::vector<std::string> probe_passes;  // ids the job's probe reported as passing on a passing node
  std::vector<std::string> missing;
  for (std::uint32_t i = 0; i < nnodes; ++i) {
    const node_record* r = by_id[i];
    std::string name = record_node_name(r, names, i);
    if (!r) {
      missing.push_back(name);
      continue;
    }
    bool ok = true;
    std::vector<std::string> passed_by_probe;
    for (const auto& c : r->checks) {
      bool probe = from_job_probe(c.id);
      if (c.result == verdict::pass || c.result == verdict::skip) {
        if (probe && c.result == verdict::pass) passed_by_probe.push_back(c.id);
        continue;
      }
      ok = false;
      std::string tok = clean(c.token, k_token_max, "|;");
      auto it = std::find_if(items.begin(), items.end(),
                             [&](const item& x) { return x.v == c.result && x.token == tok && x.job_probe == probe; });
      if (it == items.end()) {
        items.push_back({c.result, tok, probe, {}});
        it = items.end() - 1;
      }
      if (it->nodes.empty() || it->nodes.back() != name) it->nodes.push_back(name);
    }
    if (ok) {
      ++passing;
      for (auto& id : passed_by_probe) {
        if (std::find(probe_passes.begin(), probe_passes.end(), id) == probe_passes.end()) probe_passes.push_back(id);
      }
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const item& a, const item& b) { return severity(a.v) > severity(b.v); });
  std::vector<std::string> parts;
  for (const auto& it : items) {
    parts.push_back(fmt::format("{} {} on {}{}", upper(to_string(it.v)), it.token, node_list(it.nodes),
                                it.job_probe ? " per the job's probe" : ""));
  }
  if (passing || parts.empty()) {
    std::string pass = fmt::format("pass on {} node{}", passing, passing == 1 ? "" : "s");
    if (!probe_passes.empty()) {
      std::string ids;
      for (const auto& id : probe_passes) ids += (ids.empty() ? "" : ",") + id;
      pass += fmt::format(" ({} per the job's probe)", ids);
    }
    parts.push_back(std::move(pass));
  }
  if (!missing.empty()) parts.push_back(fmt::format("no report from {}", node_list(missing)));
  // With no node passing and nothing found, the record starts with "no report".
  if (passing == 0 && items.empty() && !missing.empty()) parts.erase(parts.begin());
  if (cancelled) parts.insert(parts.begin(), "cancelled");
  std::string out = fmt::format("{}{}: ", k_prefix, clean(step, 32, "|;"));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += "; ";
    out += parts[i];
  }
  return out;
}

bool is_jobstats_summary(std::string_view admin_comment) { return admin_comment.starts_with("JS1:"); }

std::optional<std::string> append_admin_comment(std::string_view existing, std::string_view record, std::size_t max) {
  // jobstats' readers decode everything after "JS1:" as base64: one byte more and its summary is lost.
  if (is_jobstats_summary(existing)) return std::nullopt;
  max = std::min(max, k_admin_comment_slurm_max);
  std::vector<std::string> segs = split_records(existing);
  std::string rec(trim_space(record));
  segs.push_back(rec);
  while (joined_size(segs) > max) {
    // The oldest step record of ours, never the new one (the last).
    std::size_t oldest = segs.size();
    for (std::size_t i = 0; i + 1 < segs.size(); ++i) {
      if (step_kind(segs[i])) {
        oldest = i;
        break;
      }
    }
    if (oldest == segs.size()) break;
    fold_kind k = *step_kind(segs[oldest]);
    auto sum = std::find_if(segs.begin(), segs.end() - 1, [](const std::string& s) { return is_summary(s); });
    fold_counts c = sum != segs.end() - 1 ? parse_summary(*sum) : fold_counts{};
    c.steps += 1;
    c.n[static_cast<std::size_t>(k)] += 1;
    if (sum != segs.end() - 1) {
      *sum = format_summary(c);
      segs.erase(segs.begin() + static_cast<std::ptrdiff_t>(oldest));
    } else {
      segs[oldest] = format_summary(c);  // the summary takes the oldest record's place
    }
  }
  if (joined_size(segs) > max) {
    segs.pop_back();
    std::size_t used = joined_size(segs) + (segs.empty() ? 0 : k_sep.size());
    if (used + 24 > max) return std::nullopt;
    std::size_t room = max - used;
    rec = rec.substr(0, room - 3) + "...";
    segs.push_back(rec);
  }
  return join_records(segs);
}

}  // namespace mrcheck
