// Which GPUs the task has, and which HCAs sit nearest to them in the PCI tree - NCCL's default is to use the NIC
// closest to each GPU, so that is the HCA whose registration matters.
#include <mrcheck/mr_probe.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <mutex>
#include <optional>
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

std::vector<std::string> visible_gpu_bdfs(const nccl_env& env, const sysroot& root) {
  constexpr std::string_view k_dir = "/proc/driver/nvidia/gpus/";
  auto names = root.list(k_dir);
  if (!names) return {};
  std::vector<std::pair<int, std::string>> gpus;  // minor, bdf
  for (const auto& name : *names) {
    int minor = -1;
    if (auto info = root.read(std::string(k_dir) + name + "/information", 64 * 1024)) {
      std::istringstream text(*info);
      std::string line;
      while (std::getline(text, line)) {
        if (line.rfind("Device Minor:", 0) == 0) {
          std::istringstream is(line.substr(13));
          is >> minor;
        }
      }
    }
    std::string bdf = name;
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

std::string_view to_string(pci_path p) {
  switch (p) {
    case pci_path::unknown: return "unknown";
    case pci_path::loc: return "LOC";
    case pci_path::pix: return "PIX";
    case pci_path::pxb: return "PXB";
    case pci_path::phb: return "PHB";
    case pci_path::sys: return "SYS";
  }
  return "unknown";
}

pci_path parse_gdr_level(std::string_view v) {
  // NCCL's ncclGetLevel (src/graph/paths.cc): the names, else the pre-2.7 integers {LOC, PIX, PXB, PHB, SYS},
  // larger integers meaning SYS.
  static constexpr std::pair<std::string_view, pci_path> k_names[] = {{"LOC", pci_path::loc},
                                                                      {"PIX", pci_path::pix},
                                                                      {"PXB", pci_path::pxb},
                                                                      {"PHB", pci_path::phb},
                                                                      {"SYS", pci_path::sys}};
  for (const auto& [name, p] : k_names) {
    if (v == name) return p;
  }
  int n = -1;
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n < 0) return pci_path::unknown;
  static constexpr pci_path k_old[] = {pci_path::loc, pci_path::pix, pci_path::pxb, pci_path::phb, pci_path::sys};
  return n < 5 ? k_old[n] : pci_path::sys;
}

namespace {

bool looks_like_bdf(std::string_view s) {
  // "0000:3b:00.0"
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; });
}

struct pci_place {
  std::string root;                // "pci0000:00", the host bridge
  std::vector<std::string> chain;  // PCI functions from the root port down to the device itself
  int numa = -1;
};

// /sys/bus/pci/devices/<bdf> is a link into /sys/devices whose path is the device's place in the PCI tree
// ("../../../devices/pci0000:00/0000:00:01.0/0000:3b:00.0"): the host bridge, then every function down to it.
std::optional<pci_place> place_of(const sysroot& root, const std::string& bdf) {
  if (!looks_like_bdf(bdf)) return std::nullopt;
  const std::string dev = "/sys/bus/pci/devices/" + bdf;
  auto target = root.read_link(dev);
  if (!target) return std::nullopt;
  pci_place p;
  std::string_view rest = *target;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    std::string s(rest.substr(0, slash));
    rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
    if (s.rfind("pci", 0) == 0 && s.size() > 3 && p.root.empty()) {
      p.root = s;
      p.chain.clear();
    } else if (!p.root.empty() && looks_like_bdf(s)) {
      p.chain.push_back(s);
    }
  }
  if (p.root.empty() || p.chain.empty() || p.chain.back() != bdf) return std::nullopt;
  if (auto numa = root.read_value(dev + "/numa_node")) {
    if (std::from_chars(numa->data(), numa->data() + numa->size(), p.numa).ec != std::errc()) p.numa = -1;
  }
  return p;
}

// NCCL's view of the PCI tree (src/graph/xml.cc, ncclTopoGetXmlFromSys): a device's parent is the function two
// levels up (a switch's downstream port is folded into its upstream port), and a device whose parent would be the
// host bridge hangs off the CPU. Returns the ancestors NCCL keeps, nearest first.
std::vector<std::string> nccl_ancestors(const std::vector<std::string>& chain) {
  std::vector<std::string> out;
  for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(chain.size()) - 3; i >= 0; i -= 2) out.push_back(chain[i]);
  return out;
}

}  // namespace

pci_path nccl_pci_path(const sysroot& root, const std::string& a_bdf, const std::string& b_bdf) {
  if (a_bdf.empty() || b_bdf.empty()) return pci_path::unknown;
  if (a_bdf == b_bdf) return pci_path::loc;
  auto a = place_of(root, a_bdf);
  auto b = place_of(root, b_bdf);
  if (!a || !b) return pci_path::unknown;
  if (a->root == b->root) {
    auto up_a = nccl_ancestors(a->chain);
    auto up_b = nccl_ancestors(b->chain);
    for (std::size_t i = 0; i < up_a.size(); ++i) {
      auto it = std::find(up_b.begin(), up_b.end(), up_a[i]);
      if (it == up_b.end()) continue;
      // One switch between them is PIX; a PCI-to-PCI link on the way (a switch below a switch) makes it PXB
      // (src/graph/paths.cc: a link between two PCI nodes is PATH_PXB).
      std::size_t j = static_cast<std::size_t>(it - up_b.begin());
      return i == 0 && j == 0 ? pci_path::pix : pci_path::pxb;
    }
    return pci_path::phb;
  }
  // Two host bridges: the same CPU (NUMA node) is PHB, two CPUs are SYS. An unknown node (-1) on both is taken
  // as one CPU, as NCCL does on single-node machines.
  return a->numa == b->numa ? pci_path::phb : pci_path::sys;
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
