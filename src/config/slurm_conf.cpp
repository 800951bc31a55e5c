// slurm.conf, read the way Slurm 22.05 reads it (src/common/parse_config.c: _get_next_line, _strip_comments,
// _strip_escapes, keyvalue_pattern, _parse_include_directive; slurm_rlimits_info.c: parse_rlimits). One
// reader for the plugin and the prolog: two readers had disagreed on `\#`, NONE,MEMLOCK and RLIMIT_MEMLOCK
// (fuzz finding F4). We parse the file rather than ask slurmctld: the compute node's own file is what its
// slurmstepd used, and an RPC per task would load the controller.
#include <mrcheck/slurm_conf.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace mrcheck {

namespace {

constexpr int k_max_include_depth = 8;
constexpr std::size_t k_max_files = 64;
constexpr std::size_t k_max_file_size = 16u << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// _strip_comments: '#' after an even number of backslashes ends the line.
std::string_view strip_comment(std::string_view line) {
  int backslashes = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && backslashes % 2 == 0) return line.substr(0, i);
    backslashes = line[i] == '\\' ? backslashes + 1 : 0;
  }
  return line;
}

// _strip_continuation: an odd number of backslashes at the end (trailing blanks allowed) joins the next
// line; returns the length to keep, or npos for no continuation.
std::size_t continuation(std::string_view line) {
  std::size_t end = line.size();
  while (end > 0 && is_space(line[end - 1])) --end;
  std::size_t bs = 0;
  while (bs < end && line[end - 1 - bs] == '\\') ++bs;
  if (bs % 2 == 1) return end - 1;
  return std::string_view::npos;
}

// _strip_escapes: "\x" -> "x".
std::string strip_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      if (++i == s.size()) break;
    }
    out.push_back(s[i]);
  }
  return out;
}

bool is_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

struct key_value {
  std::string key;
  std::string value;
};

// keyvalue_pattern: ^\s*([[:alnum:]_.]+)\s*([-*+/]?)=\s*("([^"]*)"|\S+)(\s|$). Advances `rest` past the pair.
std::optional<key_value> next_key_value(std::string_view& rest) {
  std::size_t i = 0;
  while (i < rest.size() && is_space(rest[i])) ++i;
  std::size_t k = i;
  while (i < rest.size() && is_key_char(rest[i])) ++i;
  if (i == k) return std::nullopt;
  key_value kv{std::string(rest.substr(k, i - k)), {}};
  while (i < rest.size() && is_space(rest[i])) ++i;
  if (i < rest.size() && std::string_view("-*+/").find(rest[i]) != std::string_view::npos) ++i;
  if (i >= rest.size() || rest[i] != '=') return std::nullopt;
  ++i;
  while (i < rest.size() && is_space(rest[i])) ++i;
  if (i < rest.size() && rest[i] == '"') {
    auto close = rest.find('"', i + 1);
    if (close == std::string_view::npos) return std::nullopt;
    kv.value = std::string(rest.substr(i + 1, close - i - 1));
    i = close + 1;
  } else {
    std::size_t v = i;
    while (i < rest.size() && !is_space(rest[i])) ++i;
    if (i == v) return std::nullopt;
    kv.value = std::string(rest.substr(v, i - v));
  }
  if (i < rest.size() && !is_space(rest[i])) return std::nullopt;
  rest.remove_prefix(i);
  return kv;
}

// Lines that describe one object each (S_P_EXPLINE/S_P_LINE in read_config.c): the rest of the line is theirs.
bool object_line_key(std::string_view key_lower) {
  return key_lower == "nodename" || key_lower == "partitionname" || key_lower == "downnodes" ||
         key_lower == "frontendname" || key_lower == "nodeset";
}

struct parser {
  const sysroot* root = nullptr;  // nullptr: text only, includes are not followed
  slurm_conf_settings& out;
  std::set<std::string> visited;

  void parse(std::string_view text, const std::string& file, int depth);
  void include(std::string_view name, const std::string& file, const std::string& where, int depth);
};

void parser::include(std::string_view name, const std::string& file, const std::string& where, int depth) {
  // _parse_for_format: %c is ClusterName, lower-cased, as set before this line.
  std::string path;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 1 < name.size() && name[i + 1] == 'c') {
      const auto* cluster = out.find("ClusterName");
      if (!cluster) {
        out.problems.push_back(
            fmt::format("{}: include {}: %c without a ClusterName before it", where, escape_line(name, 128)));
        return;
      }
      path += lower(cluster->value);
      ++i;
    } else {
      path.push_back(name[i]);
    }
  }
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(file).parent_path() / p;
  path = p.lexically_normal().string();
  if (!root) {
    out.problems.push_back(fmt::format("{}: include {} not followed", where, escape_line(path, 128)));
    return;
  }
  if (depth >= k_max_include_depth) {
    out.problems.push_back(
        fmt::format("{}: include {}: nested deeper than {}", where, escape_line(path, 128), k_max_include_depth));
    return;
  }
  // A file already read (slurm.conf including itself) is a cycle: Slurm would recurse without end, and
  // re-reading would cost k^depth parses (fuzz finding F5), in slurmstepd.
  if (visited.count(path) || out.files.size() >= k_max_files) {
    out.problems.push_back(
        fmt::format("{}: include {}: already read or too many files; skipped", where, escape_line(path, 128)));
    return;
  }
  auto text = root->read(path, k_max_file_size);
  if (!text) {
    // Slurm 22.05 has no glob here: "include conf.d/*.conf" names a file called "*.conf".
    bool glob = path.find_first_of("*?[") != std::string::npos;
    out.problems.push_back(fmt::format("{}: include: {}{}", where, escape_line(text.error().message(), 200),
                                       glob ? " (Slurm 22.05 does not expand globs in slurm.conf)" : ""));
    return;
  }
  visited.insert(path);
  out.files.push_back(path);
  parse(*text, path, depth + 1);
}

void parser::parse(std::string_view text, const std::string& file, int depth) {
  int line_no = 0;
  while (!text.empty()) {
    // _get_next_line: comments go first, then continuations join lines, then escapes go.
    std::string joined;
    int first_line = line_no + 1;
    while (!text.empty()) {
      auto nl = text.find('\n');
      std::string_view raw = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      ++line_no;
      // Slurm reads lines as C strings: a NUL ends the line there (fuzz F10: else it stayed in an include name).
      raw = raw.substr(0, raw.find('\0'));
      std::string_view line = strip_comment(raw);
      if (auto keep = continuation(line); keep != std::string_view::npos && !text.empty()) {
        joined += line.substr(0, keep);
        continue;
      }
      joined += line;
      break;
    }
    std::string line = strip_escapes(joined);
    std::string where = fmt::format("{}:{}", file, first_line);
    std::string_view rest = line;
    if (rest.size() > 7 && lower(rest.substr(0, 7)) == "include" && is_space(rest[7])) {
      rest.remove_prefix(7);
      while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
      std::size_t end = 0;
      while (end < rest.size() && !is_space(rest[end])) ++end;
      std::string_view name = rest.substr(0, end);
      if (name.empty()) {
        out.problems.push_back(fmt::format("{}: include without a file name", where));
      } else {
        include(name, file, where, depth);
      }
      continue;
    }
    while (auto kv = next_key_value(rest)) {
      std::string key = lower(kv->key);
      if (object_line_key(key)) {
        rest = {};
        break;
      }
      out.settings[key] = slurm_conf_setting{std::move(kv->value), where};
    }
    if (trim_space(rest).size() > 0) {
      out.problems.push_back(fmt::format("{}: not Key=Value: {}", where, escape_line(trim_space(rest), 64)));
    }
  }
}

const char* const k_rlimit_names[] = {"CPU", "FSIZE", "DATA",   "STACK",   "CORE",
                                      "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS"};

}  // namespace

std::string slurm_conf_path(const sysroot& root) {
  if (root.is_host()) {
    if (const char* env = std::getenv("SLURM_CONF"); env && *env == '/') return env;
  }
  return std::string(k_default_slurm_conf);
}

const slurm_conf_setting* slurm_conf_settings::find(std::string_view key) const {
  auto it = settings.find(lower(key));
  return it == settings.end() ? nullptr : &it->second;
}

void parse_slurm_conf_text(std::string_view text, const std::string& file, slurm_conf_settings& out) {
  if (out.path.empty()) out.path = file;
  parser p{nullptr, out, {}};
  p.parse(text, file, 0);
}

result<slurm_conf_settings> read_slurm_conf_settings(const sysroot& root, const std::string& path) {
  auto text = root.read(path, k_max_file_size);
  if (!text) return text.error().with_context("slurm.conf");
  slurm_conf_settings out;
  out.path = path;
  out.files.push_back(path);
  parser p{&root, out, {path}};
  p.parse(*text, path, 0);
  return out;
}

result<bool> memlock_propagated_by(std::string_view list, bool except) {
  return limit_propagated_by(list, except, "MEMLOCK");
}

result<bool> limit_propagated_by(std::string_view list, bool except, std::string_view wanted) {
  // parse_rlimits(): NONE and ALL are whole values; a list names limits, the rest get the opposite flag.
  std::string whole = lower(trim_space(list));
  if (whole == "all") return !except;
  if (whole == "none") return except;
  bool memlock = false;
  std::size_t i = 0;
  bool any = false;
  while (i < list.size()) {
    while (i < list.size() && (list[i] == ',' || is_space(list[i]))) ++i;
    std::size_t start = i;
    while (i < list.size() && list[i] != ',' && !is_space(list[i])) ++i;
    if (i == start) break;
    std::string name = lower(list.substr(start, i - start));
    while (name.rfind("rlimit_", 0) == 0) name.erase(0, 7);
    auto known = std::find_if(std::begin(k_rlimit_names), std::end(k_rlimit_names),
                              [&](const char* n) { return lower(n) == name; });
    if (known == std::end(k_rlimit_names)) {
      return status::error(
          fmt::format("'{}' is not a resource limit name{}", escape_line(list.substr(start, i - start), 32),
                      name == "all" || name == "none" ? " inside a list (ALL and NONE stand alone)" : ""));
    }
    any = true;
    memlock = memlock || name == lower(wanted);
  }
  if (!any) return status::error("empty list of resource limits");
  return except ? !memlock : memlock;
}

result<memlock_propagation> memlock_propagation_of(const slurm_conf_settings& conf) {
  memlock_propagation m;
  // read_config.c: PropagateResourceLimitsExcept, when set, is the only one parsed.
  if (const auto* ex = conf.find("PropagateResourceLimitsExcept")) {
    auto v = memlock_propagated_by(ex->value, true);
    if (!v) return v.error().with_context(fmt::format("PropagateResourceLimitsExcept ({})", ex->where));
    m.propagated = *v;
    m.setting = fmt::format("PropagateResourceLimitsExcept={} ({})", escape_line(ex->value, 64), ex->where);
  } else if (const auto* p = conf.find("PropagateResourceLimits")) {
    auto v = memlock_propagated_by(p->value, false);
    if (!v) return v.error().with_context(fmt::format("PropagateResourceLimits ({})", p->where));
    m.propagated = *v;
    m.setting = fmt::format("PropagateResourceLimits={} ({})", escape_line(p->value, 64), p->where);
  }
  return m;
}

result<slurm_conf_facts> read_slurm_conf_facts(const sysroot& root, const std::string& path) {
  auto conf = read_slurm_conf_settings(root, path);
  if (!conf) return conf.error();
  return slurm_conf_facts_of(std::move(*conf));
}

result<slurm_conf_facts> slurm_conf_facts_of(slurm_conf_settings settings) {
  auto prop = memlock_propagation_of(settings);
  if (!prop) return prop.error();
  slurm_conf_facts f;
  f.path = settings.path;
  if (const auto* s = settings.find("PropagateResourceLimits")) f.propagate = s->value;
  if (const auto* s = settings.find("PropagateResourceLimitsExcept")) f.propagate_except = s->value;
  // The reader's problems first: an UnkillableStepTimeout below is added to them (it used to replace them).
  f.problems = std::move(settings.problems);
  f.memlock_propagated = prop->propagated;
  f.propagate_setting = std::move(prop->setting);
  // The list was checked above (memlock_propagation_of): the same setting answers for STACK and NOFILE.
  auto covers = [&](std::string_view name) {
    if (const auto* ex = settings.find("PropagateResourceLimitsExcept")) {
      auto v = limit_propagated_by(ex->value, true, name);
      return !v || *v;
    }
    if (const auto* pr = settings.find("PropagateResourceLimits")) {
      auto v = limit_propagated_by(pr->value, false, name);
      return !v || *v;
    }
    return true;
  };
  f.stack_propagated = covers("STACK");
  f.nofile_propagated = covers("NOFILE");
  if (const auto* s = settings.find("TaskProlog")) f.task_prolog = s->value;
  if (const auto* s = settings.find("SlurmdPidFile")) f.slurmd_pid_file = s->value;
  if (const auto* s = settings.find("UsePAM")) f.use_pam = s->value == "1" || lower(s->value) == "yes";
  // slurm.conf(5): UnkillableStepTimeout in seconds (read_config.c takes it as an integer, default 60).
  if (const auto* s = settings.find("UnkillableStepTimeout")) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s->value.data(), s->value.data() + s->value.size(), v);
    if (ec == std::errc() && p == s->value.data() + s->value.size() && v > 0 && v <= 65535) {
      f.unkillable_step_timeout = std::chrono::seconds(v);
    } else {
      f.problems.push_back(fmt::format("UnkillableStepTimeout={} ({}) is not a number of seconds; assuming 60",
                                       escape_line(s->value, 32), s->where));
    }
  }
  return f;
}

std::string expand_slurmd_pid_file(std::string_view pattern, std::string_view node, std::string_view host) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'n') {
        out += node;
        ++i;
        continue;
      }
      if (c == 'h') {
        out += host;
        ++i;
        continue;
      }
    }
    out.push_back(pattern[i]);
  }
  return out;
}

result<propagated_limit> parse_propagated_limit(std::string_view text, std::string_view name) {
  // slurmstepd's _get_env_val() (src/slurmd/slurmstepd/ulimits.c, the same in 22.05, 24.11 and 26.05):
  // `U` prefix, then strtoul(val, &p, 10) and the value refused only when *p != '\0'.
  propagated_limit p;
  std::string_view all = text;
  if (!text.empty() && text.front() == 'U') {
    p.user_requested = true;
    text.remove_prefix(1);
  }
  auto refuse = [&] { return status::error(fmt::format("{} '{}' is not a number", name, escape_line(all, 32))); };
  std::size_t i = 0;
  // strtoul in the C locale: isspace() blanks, then one optional sign.
  while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  std::size_t digits_from = i;
  std::uint64_t v = 0;
  bool overflow = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    unsigned d = static_cast<unsigned>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) overflow = true;
    v = overflow ? UINT64_MAX : v * 10 + d;
    ++i;
  }
  if (i == digits_from) {
    // No number: strtoul leaves its end pointer at the start, so only an empty string passes (as 0).
    if (!text.empty()) return refuse();
    p.value = 0;
    return p;
  }
  if (i != text.size()) return refuse();
  // glibc: an overflow is ULONG_MAX whatever the sign; otherwise a minus negates in unsigned arithmetic.
  p.value = overflow ? UINT64_MAX : (negative ? (~v + 1) : v);  // RLIM_INFINITY is UINT64_MAX = k_unlimited
  p.canonical = digits_from == 0 && !overflow && format_propagated_limit(p.value) == text;
  return p;
}

std::string format_propagated_limit(std::uint64_t value) { return std::to_string(value); }

}  // namespace mrcheck
