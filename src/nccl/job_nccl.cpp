// Which NCCL the job's program will load, from its command and environment alone (docs/job-nccl.md). Runs in
// the task child as the job user, or in `mrcheck probe nccl` / `mrcheck report`; it reads directories and ELF
// headers, never executes or loads anything of the job's.
#include <mrcheck/job_nccl.h>

#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace mrcheck {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_soname = "libnccl.so.2";
constexpr std::size_t k_max_dirs = 64;  // path list entries looked at, per variable

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=')
      return e.substr(key.size() + 1);
  }
  return {};
}

std::vector<std::string> split_path_list(std::string_view v) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= v.size() && out.size() < k_max_dirs) {
    std::size_t c = v.find(':', pos);
    std::string_view item = v.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos);
    // An empty entry is the current directory to the loader; a relative one too: the task's cwd, unknown here.
    if (!item.empty() && item.front() == '/') out.emplace_back(item);
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  return out;
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;  // present as a name, whatever it is: a broken one is reported too
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return {};
  return buf;
}

// argv[0] as execvp finds it in the job's PATH.
std::string resolve_program(const std::string& arg0, const std::string& path) {
  if (arg0.empty()) return {};
  if (arg0.find('/') != std::string::npos) return arg0.front() == '/' ? arg0 : std::string();
  for (const auto& d : split_path_list(path)) {
    std::string p = d + "/" + arg0;
    if (::access(p.c_str(), X_OK) == 0 && !is_dir(p)) return p;
  }
  return {};
}

bool looks_like_python(std::string_view file) {
  auto slash = file.rfind('/');
  std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  return base.starts_with("python");
}

// The interpreter a script names in its "#!" line ("#!/usr/bin/env python3" is looked up in PATH).
std::string shebang_interpreter(const std::string& file, const std::string& path) {
  int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  char buf[256] = {};
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  if (n < 3 || buf[0] != '#' || buf[1] != '!') return {};
  std::string_view line(buf + 2, static_cast<std::size_t>(n - 2));
  line = line.substr(0, line.find('\n'));
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  std::string_view interp = line.substr(0, line.find(' '));
  std::string_view rest = interp.size() < line.size() ? line.substr(interp.size() + 1) : std::string_view();
  if (interp.ends_with("/env")) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.starts_with("-S ")) rest.remove_prefix(3);
    return resolve_program(std::string(rest.substr(0, rest.find(' '))), path);
  }
  return std::string(interp);
}

// site-packages directories of a Python interpreter, in sys.path order (PYTHONPATH, the user site, then the
// installation's), found from the file system: a venv's pyvenv.cfg beside its bin/, or the prefix of the real
// interpreter, with Debian's dist-packages.
std::vector<std::pair<std::string, std::string>> site_dirs(const std::string& python,
                                                           const std::vector<std::string>& env) {
  std::vector<std::pair<std::string, std::string>> out;  // (dir, how)
  for (const auto& d : split_path_list(env_value(env, "PYTHONPATH"))) out.emplace_back(d, "PYTHONPATH");
  auto lib_pythons = [](const std::string& prefix) {
    std::vector<std::string> v;
    std::error_code ec;
    for (fs::directory_iterator it(prefix + "/lib", ec), end; !ec && it != end; it.increment(ec)) {
      std::string n = it->path().filename().string();
      if (n.starts_with("python3") && it->is_directory(ec)) v.push_back(prefix + "/lib/" + n);
      if (v.size() > 8) break;
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  std::string bin = python.substr(0, python.rfind('/'));
  std::string prefix = bin.substr(0, bin.rfind('/'));
  bool venv = !prefix.empty() && is_file(prefix + "/pyvenv.cfg");
  std::string how = venv ? fmt::format("venv {}", prefix) : fmt::format("Python {}", prefix.empty() ? "/" : prefix);
  if (!venv) {
    // The user site comes before the installation's (site.py), not in a venv.
    std::string home = env_value(env, "HOME");
    if (!home.empty() && home.front() == '/' && env_value(env, "PYTHONNOUSERSITE").empty()) {
      for (const auto& d : lib_pythons(home + "/.local")) out.emplace_back(d + "/site-packages", "user site");
    }
    std::string rp = real_path(python);
    if (!rp.empty()) {
      std::string rbin = rp.substr(0, rp.rfind('/'));
      prefix = rbin.substr(0, rbin.rfind('/'));
      how = fmt::format("Python {}", prefix.empty() ? "/" : prefix);
    }
  }
  for (const auto& d : lib_pythons(prefix)) out.emplace_back(d + "/site-packages", how);
  if (!venv) {
    // Debian and Ubuntu: pip installs as root go to /usr/local/lib/python3.X/dist-packages, apt's to
    // /usr/lib/python3/dist-packages.
    for (const auto& d : lib_pythons(prefix + "/local")) out.emplace_back(d + "/dist-packages", how);
    for (const auto& d : lib_pythons(prefix)) out.emplace_back(d + "/dist-packages", how);
    out.emplace_back(prefix + "/lib/python3/dist-packages", how);
  }
  std::erase_if(out, [](const auto& d) { return !is_dir(d.first); });
  return out;
}

class finder {
 public:
  explicit finder(const job_nccl_inputs& in) : in_(in) {}

  job_nccl run() {
    std::string path = env_value(in_.env, "PATH");
    if (!in_.argv.empty()) j_.program = resolve_program(in_.argv[0], path);
    if (!j_.program.empty()) {
      if (looks_like_python(j_.program)) {
        j_.python = j_.program;
      } else {
        std::string interp = shebang_interpreter(j_.program, path);
        if (looks_like_python(interp)) j_.python = interp;
      }
    }
    // A job in an activated venv or conda environment that runs a shell script still runs that environment's
    // Python in the end: its python3 is the one PATH finds.
    std::string venv = env_value(in_.env, "VIRTUAL_ENV");
    std::string conda = env_value(in_.env, "CONDA_PREFIX");
    if (j_.python.empty() && (!venv.empty() || !conda.empty() || in_.argv.empty())) {
      j_.python = resolve_program("python3", path);
      if (j_.python.empty() && !venv.empty()) j_.python = venv + "/bin/python3";
    }

    // 1. A Python job's torch: the nvidia-nccl wheel in torch's own site directory, even over LD_LIBRARY_PATH
    //    (measured on the GPU machine with torch 2.11: a system libnccl.so.2 first in LD_LIBRARY_PATH, and torch
    //    still maps its wheel's 2.28.9; docs/job-nccl.md).
    std::vector<std::pair<std::string, std::string>> sites;
    int torch_site = -1;
    if (!j_.python.empty()) {
      sites = site_dirs(j_.python, in_.env);
      for (std::size_t i = 0; i < sites.size() && torch_site < 0; ++i) {
        if (is_dir(sites[i].first + "/torch")) torch_site = static_cast<int>(i);
      }
      if (torch_site >= 0) python_wheels(sites[static_cast<std::size_t>(torch_site)], true);
    }
    // 2. LD_LIBRARY_PATH: before the RUNPATH of any other library that needs NCCL (ld.so(8)).
    for (const auto& d : split_path_list(env_value(in_.env, "LD_LIBRARY_PATH"))) {
      add(d + "/" + std::string(k_soname), "LD_LIBRARY_PATH", true, "the first libnccl.so.2 in LD_LIBRARY_PATH");
    }
    // The other wheels on the interpreter's sys.path, in its order (torch/__init__.py's preload walks sys.path
    // when the RUNPATH did not resolve; another framework loads the first).
    for (std::size_t i = 0; i < sites.size(); ++i) {
      if (static_cast<int>(i) != torch_site) python_wheels(sites[i], false);
    }
    // 3. A conda environment's own NCCL (conda-forge's nccl package), through its libraries' RUNPATH.
    if (!conda.empty() && conda.front() == '/') {
      add(conda + "/lib/" + std::string(k_soname), fmt::format("conda (CONDA_PREFIX {})", conda), true,
          "the conda environment's NCCL");
    }
    // 4. The loader's cache: the system NCCL (libnccl2, the CUDA repository's package).
    if (auto cache = in_.root.read("/etc/ld.so.cache", 64 << 20); cache.is_ok()) {
      std::string sys = ld_cache_lookup(*cache, k_soname);
      if (!sys.empty()) add(sys, "system (ld.so.cache)", true, "the system's NCCL (ld.so.cache)");
    }
    for (const char* d : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
      add(std::string(d) + "/" + std::string(k_soname), "system (default directory)", true,
          "the system's NCCL (the loader's default directories)");
    }
    // Present but not on the job's load path: the CUDA toolkit's copy (in lib64 only when NCCL was installed
    // there; a program finds it only through LD_LIBRARY_PATH or its own RUNPATH).
    for (const std::string& var : {std::string("CUDA_HOME"), std::string("CUDA_PATH")}) {
      std::string v = env_value(in_.env, var);
      if (!v.empty() && v.front() == '/')
        add(v + "/lib64/" + std::string(k_soname), "CUDA toolkit (" + var + ")", false, "");
    }
    add("/usr/local/cuda/lib64/" + std::string(k_soname), "CUDA toolkit (/usr/local/cuda)", false, "");
    plugins();
    return std::move(j_);
  }

 private:
  void python_wheels(const std::pair<std::string, std::string>& site, bool torch_here) {
    std::vector<std::string> files = {site.first + "/nvidia/nccl/lib/" + std::string(k_soname)};
    // CUDA 13 wheels of NVIDIA's libraries may share one tree (nvidia/cu13/lib); torch < 1.13 bundled NCCL.
    std::error_code ec;
    for (fs::directory_iterator it(site.first + "/nvidia", ec), end; !ec && it != end; it.increment(ec)) {
      std::string n = it->path().filename().string();
      if (n.starts_with("cu") && n.size() <= 5)
        files.push_back(site.first + "/nvidia/" + n + "/lib/" + std::string(k_soname));
    }
    files.push_back(site.first + "/torch/lib/" + std::string(k_soname));
    for (const auto& f : files) {
      add(f,
          fmt::format("{} wheel ({}{})", f.find("/torch/lib/") != std::string::npos ? "torch" : "nvidia-nccl",
                      site.second, torch_here ? ", beside torch" : ""),
          true,
          torch_here ? fmt::format("torch's NCCL: the wheel beside {}/torch", site.first)
                     : "the first nvidia-nccl wheel on the interpreter's sys.path");
    }
  }

  void add(const std::string& file, std::string origin, bool loadable, std::string why) {
    if (!is_file(file)) return;
    std::string rp = real_path(file);
    for (auto& c : j_.found) {
      if (c.path == file || (!rp.empty() && c.real_path == rp)) return;  // the same file by another name
    }
    if (j_.found.size() >= 16) return;
    nccl_candidate c;
    c.path = file;
    c.real_path = rp;
    c.origin = std::move(origin);
    c.loadable = loadable;
    c.info = scan_nccl_library(file);
    j_.found.push_back(std::move(c));
    if (loadable && j_.chosen < 0) {
      j_.chosen = static_cast<int>(j_.found.size() - 1);
      j_.why = std::move(why);
    }
  }

  // NCCL's net and tuner plugins: NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN name "libnccl-net-NAME.so" (or a file
  // name / path as given), else the default libnccl-net.so / libnccl-tuner.so; dlopen() finds them through the
  // same LD_LIBRARY_PATH and loader cache (NCCL's src/plugin/plugin_open.cc).
  void plugins() {
    std::vector<std::string> dirs = split_path_list(env_value(in_.env, "LD_LIBRARY_PATH"));
    if (const nccl_candidate* c = j_.job()) dirs.push_back(c->path.substr(0, c->path.rfind('/')));
    for (const char* d :
         {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"})
      dirs.emplace_back(d);
    auto cache = in_.root.read("/etc/ld.so.cache", 64 << 20);
    for (const auto& [kind, var] : {std::pair<std::string, std::string>{"net", "NCCL_NET_PLUGIN"},
                                    std::pair<std::string, std::string>{"tuner", "NCCL_TUNER_PLUGIN"}}) {
      std::string v = env_value(in_.env, var);
      if (v == "none") continue;
      std::vector<std::string> names;
      if (v.empty()) {
        names.push_back(fmt::format("libnccl-{}.so", kind));
      } else if (v.find('/') != std::string::npos || v.ends_with(".so")) {
        names.push_back(v);
      } else {
        names.push_back(fmt::format("libnccl-{}-{}.so", kind, v));
        names.push_back(v);
      }
      nccl_plugin p;
      p.kind = kind;
      p.requested = v.empty() ? names.front() : v;
      for (const auto& n : names) {
        if (!p.path.empty()) break;
        if (n.front() == '/') {
          if (is_file(n)) p.path = n, p.origin = var;
          continue;
        }
        for (const auto& d : dirs) {
          if (is_file(d + "/" + n)) {
            p.path = d + "/" + n;
            p.origin = "library path";
            break;
          }
        }
        if (p.path.empty() && cache.is_ok()) {
          if (std::string c = ld_cache_lookup(*cache, n); !c.empty()) p.path = c, p.origin = "ld.so.cache";
        }
      }
      if (!p.path.empty()) p.info = scan_nccl_library(p.path);
      // The default name absent is the common case (no plugin): not worth a line.
      if (p.path.empty() && v.empty()) continue;
      j_.plugins.push_back(std::move(p));
    }
  }

  const job_nccl_inputs& in_;
  job_nccl j_;
};

std::string info_text(const result<elf_library_info>& i) {
  if (!i) return "unreadable: " + escape_line(i.error().message(), 200);
  if (!i->version.empty()) return escape_line(i->version, 48);
  return i->has_get_version ? "version string not found (has ncclGetVersion)" : "no NCCL version string";
}

}  // namespace

job_nccl find_job_nccl(const job_nccl_inputs& in) { return finder(in).run(); }

std::vector<std::string> job_nccl_lines(const job_nccl& j) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < j.found.size(); ++i) {
    const auto& c = j.found[i];
    bool job = static_cast<int>(i) == j.chosen;
    out.push_back(fmt::format("{} {}  {}  {}{}", job ? "*" : " ", escape_line(c.path, 300), info_text(c.info),
                              escape_line(c.origin, 200),
                              job ? "  <- the job's" : (c.loadable ? "" : "  (not on the job's load path)")));
  }
  for (const auto& p : j.plugins) {
    std::string abi;
    if (p.info) {
      for (const auto& a : p.info->abi) abi += (abi.empty() ? "" : ",") + a;
    }
    out.push_back(
        fmt::format("  {} plugin {}: {}", p.kind, escape_line(p.requested, 100),
                    p.path.empty() ? std::string("not found")
                    : !p.info ? escape_line(p.path, 300) + " unreadable: " + escape_line(p.info.error().message(), 200)
                              : fmt::format("{} exports {}", escape_line(p.path, 300),
                                            abi.empty() ? std::string("no NCCL plugin symbol") : abi)));
  }
  return out;
}

std::string job_nccl_summary(const job_nccl& j) {
  const nccl_candidate* c = j.job();
  if (!c) return j.found.empty() ? "no libnccl.so.2 on the job's load path" : "no libnccl.so.2 the job can load";
  return fmt::format("NCCL {} ({}, {})", c->info && !c->info->version.empty() ? escape_line(c->info->version, 48) : "?",
                     escape_line(c->path, 300), escape_line(c->origin, 200));
}

nlohmann::json job_nccl_json(const job_nccl& j) {
  auto info = [](const result<elf_library_info>& i) -> nlohmann::json {
    if (!i) return {{"error", i.error().message()}};
    return {{"version", i->version},
            {"version_code", i->version_code},
            {"ncclGetVersion", i->has_get_version},
            {"abi", i->abi},
            {"bytes", i->size}};
  };
  nlohmann::json found = nlohmann::json::array();
  for (std::size_t i = 0; i < j.found.size(); ++i) {
    const auto& c = j.found[i];
    nlohmann::json e = {{"path", c.path},
                        {"real_path", c.real_path},
                        {"origin", c.origin},
                        {"loadable", c.loadable},
                        {"job", static_cast<int>(i) == j.chosen}};
    e.update(info(c.info));
    found.push_back(std::move(e));
  }
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& p : j.plugins) {
    nlohmann::json e = {{"kind", p.kind}, {"requested", p.requested}, {"path", p.path}, {"origin", p.origin}};
    if (!p.path.empty()) e.update(info(p.info));
    plugins.push_back(std::move(e));
  }
  return {{"found", found},     {"job_library", j.job() ? j.job()->path : ""},
          {"why", j.why},       {"program", j.program},
          {"python", j.python}, {"plugins", plugins}};
}

}  // namespace mrcheck
