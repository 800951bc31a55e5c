// The slurm.conf keys that decide a task's RLIMIT_MEMLOCK. We parse the file rather than ask slurmctld:
// the compute node's own file is what its slurmstepd used, and an RPC per task would load the controller.
#include <mrcheck/memlock_chain.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

namespace mrcheck {

namespace {

constexpr int k_max_include_depth = 8;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Slurm's comment rule: '#' starts a comment unless escaped as "\#".
std::string strip_comment(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '#') {
      out.push_back('#');
      ++i;
    } else if (line[i] == '#') {
      break;
    } else {
      out.push_back(line[i]);
    }
  }
  return out;
}

std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

struct conf_state {
  slurm_conf_facts facts;
  std::optional<std::string> propagate;         // value, where
  std::string propagate_where;
  std::optional<std::string> propagate_except;
  std::string except_where;
  // Files already read: an include cycle (slurm.conf including itself) would otherwise be re-read to the depth
  // limit with a fan-out per level - 57 s for three such lines in the fuzzer (finding F5), in slurmstepd.
  std::set<std::string> visited;
};

void parse_file(const sysroot& root, const std::string& path, const std::filesystem::path& conf_dir, int depth,
                conf_state& st, std::vector<std::string>& problems);

void include_files(const sysroot& root, std::string_view pattern, const std::filesystem::path& conf_dir, int depth,
                   conf_state& st, std::vector<std::string>& problems) {
  std::filesystem::path p(pattern);
  if (p.is_relative()) p = conf_dir / p;
  std::string host_pattern = root.host_path(p.string()).string();
  glob_t g{};
  int rc = glob(host_pattern.c_str(), 0, nullptr, &g);
  if (rc == 0) {
    std::string prefix = root.is_host() ? std::string() : root.root().string();
    for (std::size_t i = 0; i < g.gl_pathc; ++i) {
      std::string hit = g.gl_pathv[i];
      if (!prefix.empty() && hit.rfind(prefix, 0) == 0) hit = hit.substr(prefix.size());
      parse_file(root, hit, conf_dir, depth + 1, st, problems);
    }
  }
  globfree(&g);
}

void parse_file(const sysroot& root, const std::string& path, const std::filesystem::path& conf_dir, int depth,
                conf_state& st, std::vector<std::string>& problems) {
  if (depth > k_max_include_depth) {
    problems.push_back(fmt::format("{}: includes nested deeper than {}", path, k_max_include_depth));
    return;
  }
  if (!st.visited.insert(path).second || st.visited.size() > 64) {
    problems.push_back(fmt::format("{}: included more than once or too many included files; skipped", path));
    return;
  }
  auto text = root.read(path);
  if (!text) {
    problems.push_back(text.error().message());
    return;
  }
  std::string_view rest = *text;
  int line_no = 0;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view raw = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    ++line_no;
    std::string line = strip_comment(raw);
    auto toks = tokens(line);
    if (toks.empty()) continue;
    if (lower(toks[0]) == "include") {
      if (toks.size() >= 2) include_files(root, trim_space(std::string_view(line).substr(line.find(toks[1]))), conf_dir,
                                          depth, st, problems);
      continue;
    }
    for (auto tok : toks) {
      auto eq = tok.find('=');
      if (eq == std::string_view::npos) continue;
      std::string key = lower(tok.substr(0, eq));
      std::string value(tok.substr(eq + 1));
      std::string where = fmt::format("{}:{}", path, line_no);
      if (key == "propagateresourcelimits") {
        st.propagate = value;
        st.propagate_where = where;
      } else if (key == "propagateresourcelimitsexcept") {
        st.propagate_except = value;
        st.except_where = where;
      } else if (key == "taskprolog") {
        st.facts.task_prolog = value;
      } else if (key == "slurmdpidfile") {
        st.facts.slurmd_pid_file = value;
      } else if (key == "usepam") {
        st.facts.use_pam = value == "1" || lower(value) == "yes";
      }
    }
  }
}

}  // namespace

result<bool> memlock_propagated_by(std::string_view list, bool except) {
  bool all = false, none = false, memlock = false;
  std::string_view l = list;
  while (true) {
    auto comma = l.find(',');
    std::string name = lower(trim_space(l.substr(0, comma)));
    if (name.rfind("rlimit_", 0) == 0) name = name.substr(7);
    if (name == "all") {
      all = true;
    } else if (name == "none") {
      none = true;
    } else if (name == "memlock") {
      memlock = true;
    } else if (name != "cpu" && name != "fsize" && name != "data" && name != "stack" && name != "core" &&
               name != "rss" && name != "nproc" && name != "nofile" && name != "as") {
      return status::error(fmt::format("'{}' is not a resource limit name", escape_line(name, 32)));
    }
    if (comma == std::string_view::npos) break;
    l = l.substr(comma + 1);
  }
  bool listed = all || memlock;
  if (none && !listed) return except;  // NONE: nothing listed
  return except ? !listed : listed;
}

result<slurm_conf_facts> read_slurm_conf(const sysroot& root, const std::string& path) {
  conf_state st;
  std::vector<std::string> problems;
  if (auto main = root.read(path); !main) return main.error().with_context("slurm.conf");
  parse_file(root, path, std::filesystem::path(path).parent_path(), 0, st, problems);
  if (st.propagate_except) {
    auto v = memlock_propagated_by(*st.propagate_except, true);
    if (!v) return v.error().with_context(st.except_where);
    st.facts.memlock_propagated = *v;
    st.facts.propagate_setting =
        fmt::format("PropagateResourceLimitsExcept={} ({})", escape_line(*st.propagate_except, 64), st.except_where);
  } else if (st.propagate) {
    auto v = memlock_propagated_by(*st.propagate, false);
    if (!v) return v.error().with_context(st.propagate_where);
    st.facts.memlock_propagated = *v;
    st.facts.propagate_setting =
        fmt::format("PropagateResourceLimits={} ({})", escape_line(*st.propagate, 64), st.propagate_where);
  }
  return st.facts;
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

}  // namespace mrcheck
