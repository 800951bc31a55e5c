// Which GPUs the task has, and which HCAs sit nearest to them in the PCI tree - NCCL's default is to use the NIC
// closest to each GPU, so that is the HCA whose registration matters.
#include <mrcheck/mr_probe.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#ifdef MRCHECK_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace mrcheck {

namespace {

std::set<int> int_list(std::string_view s, bool& all_ints) {
  std::set<int> out;
  all_ints = !s.empty();
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t end = s.find(',', i);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(i, end - i);
    // Slurm writes ranges in SLURM_*_GPUS? It writes plain lists ("0,1,3"); accept "a-b" too.
    int a = 0;
    int b = 0;
    auto dash = item.find('-');
    auto r1 = std::from_chars(item.data(), item.data() + (dash == std::string_view::npos ? item.size() : dash), a);
    if (r1.ec != std::errc() || item.empty()) {
      all_ints = false;
    } else if (dash != std::string_view::npos) {
      auto r2 = std::from_chars(item.data() + dash + 1, item.data() + item.size(), b);
      if (r2.ec != std::errc() || b < a || b - a > 1024) {
        all_ints = false;
      } else {
        for (int k = a; k <= b; ++k) out.insert(k);
      }
    } else if (r1.ptr != item.data() + item.size()) {
      all_ints = false;
    } else {
      out.insert(a);
    }
    i = end + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> visible_gpu_bdfs(const nccl_env& env, const std::string& proc_root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(proc_root) / "driver/nvidia/gpus";
  if (!fs::is_directory(dir, ec)) return {};
  std::vector<std::pair<int, std::string>> gpus;  // minor, bdf
  for (const auto& ent : fs::directory_iterator(dir, ec)) {
    std::ifstream in(ent.path() / "information");
    std::string line;
    int minor = -1;
    while (std::getline(in, line)) {
      if (line.rfind("Device Minor:", 0) == 0) {
        std::istringstream is(line.substr(13));
        is >> minor;
      }
    }
    std::string bdf = ent.path().filename().string();
    std::transform(bdf.begin(), bdf.end(), bdf.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    gpus.emplace_back(minor, bdf);
  }
  std::sort(gpus.begin(), gpus.end());
  // Slurm's GRES indices are the device minors for nvidia GPUs (File=/dev/nvidia[N]); CUDA_VISIBLE_DEVICES inside a
  // cgroup-constrained step is renumbered from 0, so it is used only when Slurm's variables are absent.
  std::optional<std::string> sel;
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"}) {
    if (auto v = env.get(name); v && !v->empty()) {
      sel = v;
      break;
    }
  }
  std::vector<std::string> out;
  bool all_ints = false;
  std::set<int> want = sel ? int_list(*sel, all_ints) : std::set<int>{};
  for (const auto& [minor, bdf] : gpus) {
    if (sel && all_ints && want.count(minor) == 0) continue;
    out.push_back(bdf);
  }
  return out;
}

#ifdef MRCHECK_HAVE_HWLOC

namespace {

struct topo_holder {
  hwloc_topology_t topo = nullptr;
  bool ok = false;
  ~topo_holder() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }
};

// Levels from the root to `o`, counting I/O bridges (which hwloc keeps outside the normal depth numbering).
int chain_length(hwloc_obj_t o) {
  int n = 0;
  for (; o != nullptr; o = o->parent) ++n;
  return n;
}

}  // namespace

locality_fn hwloc_locality() {
  auto holder = std::make_shared<topo_holder>();
  auto once = std::make_shared<std::once_flag>();
  return [holder, once](const std::string& hca_bdf, const std::string& gpu_bdf) -> int {
    std::call_once(*once, [&] {
      if (hwloc_topology_init(&holder->topo) != 0) return;
      hwloc_topology_set_io_types_filter(holder->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
      holder->ok = hwloc_topology_load(holder->topo) == 0;
    });
    if (!holder->ok) return -1;
    hwloc_obj_t a = hwloc_get_pcidev_by_busidstring(holder->topo, hca_bdf.c_str());
    hwloc_obj_t b = hwloc_get_pcidev_by_busidstring(holder->topo, gpu_bdf.c_str());
    if (a == nullptr || b == nullptr) return -1;
    std::set<hwloc_obj_t> up;
    for (hwloc_obj_t o = a; o != nullptr; o = o->parent) up.insert(o);
    for (hwloc_obj_t o = b; o != nullptr; o = o->parent) {
      if (up.count(o) != 0) return chain_length(o);
    }
    return -1;
  };
}

#else

locality_fn hwloc_locality() {
  return [](const std::string&, const std::string&) { return -1; };
}

#endif

}  // namespace mrcheck
