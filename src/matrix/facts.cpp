// Facts the matrix needs beyond node_facts: slurm.conf's limit propagation, the OFED release installed in
// user space, and the rdma-core library files on disk. All read through the sysroot, so a fixture tree
// replays them exactly.
#include <mrcheck/matrix.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace mrcheck {

namespace {

constexpr int k_max_include_depth = 4;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return upper(a) == upper(b); }

std::vector<std::string_view> split_any(std::string_view s, std::string_view seps) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && seps.find(s[i]) != std::string_view::npos) ++i;
    std::size_t start = i;
    while (i < s.size() && seps.find(s[i]) == std::string_view::npos) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool list_contains(std::string_view list, std::string_view word) {
  for (auto w : split_any(list, ", ")) {
    if (iequals(w, word)) return true;
  }
  return false;
}

void parse_slurm_conf_into(std::string_view text, slurm_conf_fact& out, std::vector<std::string>* includes) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto words = split_any(line, " \t\r");
    if (words.empty()) continue;
    if (iequals(words[0], "include")) {
      if (includes && words.size() >= 2) includes->emplace_back(words[1]);
      continue;
    }
    for (auto w : words) {
      auto eq = w.find('=');
      if (eq == std::string_view::npos) continue;
      auto key = w.substr(0, eq);
      auto value = w.substr(eq + 1);
      // The last setting wins, as in Slurm's own parser.
      if (iequals(key, "PropagateResourceLimits")) out.propagate = std::string(value);
      if (iequals(key, "PropagateResourceLimitsExcept")) out.propagate_except = std::string(value);
    }
  }
}

status read_slurm_conf_rec(const sysroot& root, const std::string& path, slurm_conf_fact& out, int depth) {
  auto text = root.read(path);
  if (!text) return text.error();
  std::vector<std::string> includes;
  parse_slurm_conf_into(*text, out, &includes);
  for (const auto& inc : includes) {
    if (depth >= k_max_include_depth) return status::error(fmt::format("{}: Include nested too deep", path));
    std::filesystem::path p(inc);
    if (p.is_relative()) p = std::filesystem::path(path).parent_path() / p;
    // A glob is not expanded; the include is reported rather than silently missed.
    if (inc.find_first_of("*?[") != std::string::npos) {
      return status::error(fmt::format("{}: Include with a glob ({}) is not supported", path, escape_line(inc, 64)));
    }
    if (auto s = read_slurm_conf_rec(root, p.string(), out, depth + 1); !s) return s;
  }
  return status::ok();
}

// "MLNX_OFED_LINUX-5.8-3.0.7.0" / "OFED-internal-24.10-1.1.4" / "DOCA-...": the first release string in the
// ofed_info script (it echoes it for `ofed_info -s`).
std::optional<std::string> find_ofed_release(std::string_view script) {
  for (std::string_view prefix : {"MLNX_OFED_LINUX-", "OFED-internal-", "DOCA-OFED-", "DOCA_OFED-"}) {
    std::size_t at = script.find(prefix);
    if (at == std::string_view::npos) continue;
    std::size_t end = at + prefix.size();
    while (end < script.size()) {
      char c = script[end];
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
                c == '_';
      if (!ok) break;
      ++end;
    }
    if (end > at + prefix.size()) return std::string(script.substr(at, end - at));
  }
  return std::nullopt;
}

}  // namespace

bool slurm_conf_fact::memlock_propagated() const {
  if (propagate_except) {
    return !(list_contains(*propagate_except, "MEMLOCK") || list_contains(*propagate_except, "ALL"));
  }
  if (propagate) {
    if (list_contains(*propagate, "NONE")) return false;
    return list_contains(*propagate, "ALL") || list_contains(*propagate, "MEMLOCK");
  }
  return true;  // slurm.conf.5: the default is ALL
}

slurm_conf_fact parse_slurm_conf(std::string_view text, std::string path) {
  slurm_conf_fact out;
  out.path = std::move(path);
  parse_slurm_conf_into(text, out, nullptr);
  return out;
}

result<slurm_conf_fact> read_slurm_conf(const sysroot& root, std::string path) {
  if (path.empty()) {
    const char* env = std::getenv("SLURM_CONF");
    path = env && *env ? env : "/etc/slurm/slurm.conf";
  }
  slurm_conf_fact out;
  out.path = path;
  if (auto s = read_slurm_conf_rec(root, path, out, 0); !s) return s;
  return out;
}

matrix_facts collect_matrix_facts(const sysroot& root, const std::string& slurm_conf_path, bool scan_library_dirs) {
  matrix_facts m;
  m.slurm_conf = read_slurm_conf(root, slurm_conf_path);
  if (auto script = root.read("/usr/bin/ofed_info", 256 * 1024)) m.ofed_user_release = find_ofed_release(*script);
  if (!scan_library_dirs) return m;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    auto names = root.list(dir);
    if (!names) continue;
    for (const auto& n : *names) {
      // libibverbs.so.1.<abi>.<package version> (rdma-core Documentation/versioning.md, facts.md §3.1).
      constexpr std::string_view prefix = "libibverbs.so.1.";
      if (!n.starts_with(prefix)) continue;
      std::string_view rest = std::string_view(n).substr(prefix.size());
      auto dot = rest.find('.');
      if (dot == std::string_view::npos || dot + 1 >= rest.size()) continue;
      m.rdma_core_files.emplace_back(rest.substr(dot + 1));
    }
  }
  return m;
}

}  // namespace mrcheck
