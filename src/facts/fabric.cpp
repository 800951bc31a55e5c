// What the GPUs' NVML says about their NVLink fabric and what the node's IMEX service looks like (fabric.h).
// NVML's types and entry points are declared here from NVIDIA's public nvml.h (docs/facts/mnnvl.md §2); no NVML
// header is needed to build.
#include <mrcheck/fabric.h>

#include <mrcheck/child.h>
#include <mrcheck/facts.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace mrcheck {

namespace {

// nvml.h: nvmlGpuFabricInfo_v2_t, version NVML_STRUCT_VERSION(GpuFabricInfo, 2) = sizeof | 2 << 24.
struct nvml_fabric_info_v2 {
  unsigned int version;
  unsigned char cluster_uuid[16];
  int status;  // nvmlReturn_t
  unsigned int clique_id;
  unsigned char state;  // nvmlGpuFabricState_t
  unsigned int health_mask;
};
constexpr unsigned k_fabric_info_v2 = static_cast<unsigned>(sizeof(nvml_fabric_info_v2)) | (2u << 24);
constexpr unsigned k_max_gpus = 64;

using nvml_init_fn = int (*)();
using nvml_count_fn = int (*)(unsigned*);
using nvml_handle_fn = int (*)(unsigned, void**);
using nvml_fabric_fn = int (*)(void*, nvml_fabric_info_v2*);
using nvml_error_fn = const char* (*)(int);

template <class F>
F symbol(void* h, const char* name) {
  void* s = ::dlsym(h, name);
  F f = nullptr;
  static_assert(sizeof f == sizeof s);
  if (s) std::memcpy(&f, &s, sizeof f);
  return f;
}

std::string nvml_error(nvml_error_fn err, int rc) {
  const char* s = err ? err(rc) : nullptr;
  return s ? fmt::format("{} ({})", escape_line(s, 80), rc) : fmt::format("error {}", rc);
}

}  // namespace

std::string_view to_string(fabric_state s) {
  switch (s) {
    case fabric_state::not_supported: return "not supported";
    case fabric_state::not_started: return "not started";
    case fabric_state::in_progress: return "in progress";
    case fabric_state::completed: return "completed";
  }
  return "unknown";
}

bool gpu_fabric::uuid_zero() const {
  return std::all_of(cluster_uuid.begin(), cluster_uuid.end(), [](std::uint8_t b) { return b == 0; });
}

std::string gpu_fabric::uuid_string() const {
  std::string s;
  for (std::size_t i = 0; i < cluster_uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", cluster_uuid[i]);
  }
  return s;
}

fabric_facts query_gpu_fabric(const std::string& library) {
  fabric_facts f;
  ::dlerror();
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    f.gpus = status::error(fmt::format("dlopen {}: {}", escape_line(library, 128), e ? escape_line(e, 200) : "?"));
    return f;
  }
  f.library = loaded_library_path(h);
  auto init = symbol<nvml_init_fn>(h, "nvmlInit_v2");
  auto count = symbol<nvml_count_fn>(h, "nvmlDeviceGetCount_v2");
  auto handle = symbol<nvml_handle_fn>(h, "nvmlDeviceGetHandleByIndex_v2");
  auto fabric = symbol<nvml_fabric_fn>(h, "nvmlDeviceGetGpuFabricInfoV");
  auto shutdown = symbol<nvml_init_fn>(h, "nvmlShutdown");
  auto err = symbol<nvml_error_fn>(h, "nvmlErrorString");
  if (!init || !count || !handle) {
    f.gpus = status::error(fmt::format("{} lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or its handles", f.library));
    return f;  // left loaded: an NVML is never unloaded (its threads)
  }
  if (!fabric) {
    f.gpus = std::vector<gpu_fabric>{};  // an NVML older than the fabric API: no GPU reports a fabric
    return f;
  }
  if (int rc = init(); rc != 0) {
    f.gpus = status::error(fmt::format("nvmlInit_v2: {}", nvml_error(err, rc)));
    return f;
  }
  unsigned n = 0;
  std::vector<gpu_fabric> gpus;
  if (int rc_count = count(&n); rc_count != 0) {
    f.gpus = status::error(fmt::format("nvmlDeviceGetCount_v2: {}", nvml_error(err, rc_count)));
  } else {
    for (unsigned i = 0; i < std::min(n, k_max_gpus); ++i) {
      gpu_fabric g;
      g.index = i;
      void* dev = nullptr;
      nvml_fabric_info_v2 info{};
      info.version = k_fabric_info_v2;
      if (int rc = handle(i, &dev); rc != 0) {
        g.query_error = rc;
      } else if (int rc2 = fabric(dev, &info); rc2 != 0) {
        g.query_error = rc2;
      } else {
        g.state = info.state <= 3 ? static_cast<fabric_state>(info.state) : fabric_state::not_supported;
        g.status = info.status;
        g.clique_id = info.clique_id;
        std::memcpy(g.cluster_uuid.data(), info.cluster_uuid, g.cluster_uuid.size());
        g.health_mask = info.health_mask;
      }
      gpus.push_back(g);
    }
    f.gpus = std::move(gpus);
  }
  if (shutdown) shutdown();
  return f;
}

nlohmann::json fabric_to_json(const fabric_facts& f) {
  nlohmann::json j = {{"library", f.library}};
  if (!f.gpus) {
    j["unknown"] = f.gpus.error().message();
    return j;
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : *f.gpus) {
    gpus.push_back({{"index", g.index},
                    {"state", static_cast<int>(g.state)},
                    {"status", g.status},
                    {"clique_id", g.clique_id},
                    {"cluster_uuid", g.uuid_string()},
                    {"health_mask", g.health_mask},
                    {"query_error", g.query_error}});
  }
  j["gpus"] = gpus;
  return j;
}

namespace {

template <class T>
T number(const nlohmann::json& j, const char* key, T fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return fallback;
  auto v = it->get<std::int64_t>();
  return v < 0 && std::is_unsigned_v<T> ? fallback : static_cast<T>(v);
}

bool parse_uuid(std::string_view s, std::array<std::uint8_t, 16>& out) {
  std::string hex;
  for (char c : s) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    hex += c;
  }
  if (hex.size() != 32) return false;
  for (std::size_t i = 0; i < 16; ++i)
    out[i] = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

}  // namespace

fabric_facts fabric_from_json(const nlohmann::json& j) {
  fabric_facts f;
  if (!j.is_object()) {
    f.gpus = status::error("not a JSON object");
    return f;
  }
  if (auto l = j.find("library"); l != j.end() && l->is_string()) f.library = escape_line(l->get<std::string>(), 200);
  if (auto u = j.find("unknown"); u != j.end() && u->is_string()) {
    f.gpus = status::error(escape_line(u->get<std::string>(), 300));
    return f;
  }
  auto gs = j.find("gpus");
  if (gs == j.end() || !gs->is_array()) {
    f.gpus = status::error("no gpus list");
    return f;
  }
  std::vector<gpu_fabric> gpus;
  for (const auto& g : *gs) {
    if (!g.is_object() || gpus.size() >= k_max_gpus) continue;
    gpu_fabric x;
    x.index = number<unsigned>(g, "index");
    auto st = number<unsigned>(g, "state");
    x.state = st <= 3 ? static_cast<fabric_state>(st) : fabric_state::not_supported;
    x.status = number<int>(g, "status");
    x.clique_id = number<unsigned>(g, "clique_id");
    x.health_mask = number<unsigned>(g, "health_mask");
    x.query_error = number<int>(g, "query_error");
    if (auto u = g.find("cluster_uuid"); u != g.end() && u->is_string())
      (void)parse_uuid(u->get<std::string>(), x.cluster_uuid);
    gpus.push_back(x);
  }
  f.gpus = std::move(gpus);
  return f;
}

fabric_facts read_gpu_fabric_isolated(const std::string& library, std::chrono::milliseconds timeout) {
  child_spec spec;
  spec.run_in_child = [library]() {
    std::string out = fabric_to_json(query_gpu_fabric(library)).dump() + "\n";
    std::size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::write(1, out.data() + off, out.size() - off);
      if (n <= 0) return 1;
      off += static_cast<std::size_t>(n);
    }
    return 0;
  };
  spec.timeout = timeout;
  spec.max_output = 64 * 1024;
  spec.err = child_stream::null;
  fabric_facts f;
  const std::string name = fmt::format("NVML ({})", escape_line(library, 128));
  auto o = run_child(spec);
  if (!o) {
    f.gpus = status::error(fmt::format("{} not asked: {}", name, o.error().message()));
    return f;
  }
  if (o->timed_out) {
    f.gpus = status::error(fmt::format("{} did not answer within {} ms", name, timeout.count()));
    return f;
  }
  if (!o->exited || o->exit_code != 0) {
    f.gpus = status::error(fmt::format("{} crashed ({})", name, o->describe()));
    return f;
  }
  nlohmann::json j = nlohmann::json::parse(o->out, nullptr, false);
  if (j.is_discarded()) {
    f.gpus = status::error(fmt::format("{}: its child printed no valid answer", name));
    return f;
  }
  return fabric_from_json(j);
}

imex_facts read_imex_facts(const sysroot& root, bool scan_processes) {
  imex_facts m;
  if (auto procs = scan_processes ? root.list("/proc") : result<std::vector<std::string>>(status::error("-"))) {
    for (const auto& p : *procs) {
      if (p.empty() || !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
      auto comm = root.read_value(fmt::format("/proc/{}/comm", p));
      if (comm && *comm == "nvidia-imex") {
        m.daemon_pid = std::atoi(p.c_str());
        break;
      }
    }
  }
  m.nodes_config = root.exists(k_imex_nodes_config);
  if (auto chans = root.list(k_imex_channels_dir)) {
    m.channels_dir = true;
    for (const auto& c : *chans) {
      if (!c.starts_with("channel") || c.size() == 7 || c.size() > 12) continue;
      std::string_view digits(c.data() + 7, c.size() - 7);
      if (!std::all_of(digits.begin(), digits.end(), [](char d) { return d >= '0' && d <= '9'; })) continue;
      m.channels.push_back(static_cast<unsigned>(std::stoul(std::string(digits))));
    }
    std::sort(m.channels.begin(), m.channels.end());
  }
  return m;
}

namespace {
fabric_facts fabric_of_dump(const sysroot& root) {
  fabric_facts f;
  auto text = root.read(k_fabric_json, 256 * 1024);
  if (!text) {
    f.gpus = status::error("not read under --root (the tree has no .mrcheck/fabric.json)");
    return f;
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    f.gpus = status::error("the dump's .mrcheck/fabric.json is not JSON");
    return f;
  }
  return fabric_from_json(j);
}
}  // namespace

bool imex_installed(const sysroot& root) {
  return root.exists("/etc/nvidia-imex") || root.exists("/usr/bin/nvidia-imex") || root.exists(k_imex_channels_dir);
}

bool node_serves_imex(const imex_facts& node) { return node.nodes_config || !node.channels.empty(); }

task_imex_view read_task_imex(int pid) {
  task_imex_view v;
  auto root = sysroot::open_process_root(pid);
  if (!root) return v;
  v.read = true;
  v.seen = read_imex_facts(*root, false);
  for (unsigned c : v.seen.channels) {
    auto path = root->host_path(fmt::format("{}/channel{}", k_imex_channels_dir, c));
    if (::access(path.c_str(), R_OK | W_OK) == 0) v.usable.push_back(c);
  }
  return v;
}

mnnvl_facts collect_mnnvl_facts(const sysroot& root, bool nvidia_loaded) {
  mnnvl_facts m;
  m.nvidia_loaded = nvidia_loaded;
  if (!root.is_host() && !root.exists(k_fabric_json)) {
    m.fabric.gpus = status::error("not read");
    m.not_asked = "this tree has no .mrcheck/fabric.json (NVML's answer)";
  } else if (!root.is_host()) {
    m.fabric = fabric_of_dump(root);
  } else if (!nvidia_loaded) {
    m.fabric.gpus = std::vector<gpu_fabric>{};
    m.not_asked = "no NVIDIA driver loaded: no NVLink fabric to check";
  } else if (!imex_installed(root)) {
    m.fabric.gpus = status::error("not read");
    m.not_asked =
        "no IMEX on this node (/etc/nvidia-imex, /usr/bin/nvidia-imex, /dev/nvidia-caps-imex-channels): "
        "no multi-node NVLink here, NVML not asked";
  } else {
    m.fabric = read_gpu_fabric_isolated(std::string(k_nvml_library));
  }
  bool any = m.fabric.gpus && std::any_of(m.fabric.gpus->begin(), m.fabric.gpus->end(), [](const gpu_fabric& g) {
               return g.query_error == 0 && g.state != fabric_state::not_supported;
             });
  m.imex = read_imex_facts(root, any);
  return m;
}

}  // namespace mrcheck
