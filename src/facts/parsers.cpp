// Pure parsers for the small files behind the node facts (docs/facts/kernel-and-drivers.md). No I/O here: collect.cpp
// reads the files through the sysroot and hands the text over, so every branch is testable from a string or a fixture.
#include <mrcheck/facts.h>
#include <mrcheck/nic_family.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mrcheck {

namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (blank(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (blank(s.back()) || s.back() == '\n' || s.back() == '\0')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> tokens(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    std::size_t b = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > b) out.push_back(line.substr(b, i - b));
  }
  return out;
}

// Calls f(line) for each line, without the '\n'.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!f(line)) return;
  }
}

bool parse_hex(std::string_view s, std::uint64_t& out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_dec(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "1.2", "580.82.09": digits separated by single dots, at least one dot.
bool looks_like_version(std::string_view t) {
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t.front())) ||
      !std::isdigit(static_cast<unsigned char>(t.back()))) {
    return false;
  }
  bool dot = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      if (t[i - 1] == '.') return false;
      dot = true;
    } else if (!std::isdigit(static_cast<unsigned char>(t[i]))) {
      return false;
    }
  }
  return dot;
}

}  // namespace

std::string_view to_string(nvidia_flavour f) {
  switch (f) {
    case nvidia_flavour::open: return "open";
    case nvidia_flavour::proprietary: return "proprietary";
    case nvidia_flavour::unknown: break;
  }
  return "unknown";
}

result<std::vector<pci_resource>> parse_pci_resources(std::string_view resource_file) {
  std::vector<pci_resource> out;
  status err;
  int n = 0;
  for_each_line(resource_file, [&](std::string_view line) {
    ++n;
    if (trim(line).empty()) return true;
    auto t = tokens(line);
    pci_resource r;
    if (t.size() != 3 || !parse_hex(t[0], r.start) || !parse_hex(t[1], r.end) || !parse_hex(t[2], r.flags)) {
      err = status::error(
          fmt::format("resource line {}: expected 'start end flags' in hex, got '{}'", n - 1, escape_line(line, 80)));
      return false;
    }
    out.push_back(r);
    return out.size() < 64;  // PCI_NUM_RESOURCES is about 17; more is not a resource file
  });
  if (!err) return err;
  if (out.empty()) return status::error("resource: empty");
  return out;
}

int find_bar1(const std::vector<pci_resource>& resources) {
  constexpr std::uint64_t pref_mem = k_ioresource_mem | k_ioresource_prefetch;
  int best64 = -1;
  int best = -1;
  std::size_t n = std::min<std::size_t>(resources.size(), 6);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = resources[i];
    if (r.size() == 0 || (r.flags & pref_mem) != pref_mem) continue;
    int idx = static_cast<int>(i);
    if ((r.flags & k_ioresource_mem_64) && (best64 < 0 || r.size() > resources[best64].size())) best64 = idx;
    if (best < 0 || r.size() > resources[best].size()) best = idx;
  }
  return best64 >= 0 ? best64 : best;
}

result<hugepages_fact> parse_meminfo(std::string_view meminfo) {
  hugepages_fact h;
  bool have_total = false;
  status err;
  for_each_line(meminfo, [&](std::string_view line) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return true;
    std::string_view key = line.substr(0, colon);
    auto t = tokens(line.substr(colon + 1));
    std::uint64_t* dst = nullptr;
    bool kib = false;
    if (key == "MemTotal") {
      dst = &h.mem_total, kib = true;
    } else if (key == "MemAvailable") {
      dst = &h.mem_available, kib = true;
    } else if (key == "HugePages_Total") {
      dst = &h.total;
    } else if (key == "HugePages_Free") {
      dst = &h.free;
    } else if (key == "Hugepagesize") {
      dst = &h.page_size, kib = true;
    } else if (key == "CmaTotal" || key == "CmaFree") {
      (key == "CmaTotal" ? h.cma_total : h.cma_free) = 0;
      dst = key == "CmaTotal" ? &*h.cma_total : &*h.cma_free;
      kib = true;
    } else {
      return true;
    }
    std::uint64_t v = 0;
    if (t.empty() || !parse_dec(t[0], v) || (kib && (t.size() < 2 || t[1] != "kB")) ||
        (kib && v > (UINT64_MAX >> 10))) {
      err = status::error(fmt::format("meminfo: bad line '{}'", escape_line(line, 80)));
      return false;
    }
    *dst = kib ? v << 10 : v;
    if (key == "MemTotal") have_total = true;
    return true;
  });
  if (!err) return err;
  if (!have_total) return status::error("meminfo: no MemTotal line (truncated?)");
  return h;
}

result<nvidia_driver_fact> parse_nvidia_version(std::string_view version_file) {
  std::string_view first = version_file.substr(0, version_file.find('\n'));
  first = trim(first);
  if (!first.starts_with("NVRM version:")) {
    return status::error(
        fmt::format("nvidia version: first line is not 'NVRM version: ...': '{}'", escape_line(first, 80)));
  }
  nvidia_driver_fact f;
  f.raw = escape_line(first, 200);
  // Open: "NVIDIA UNIX Open Kernel Module for x86_64  580.82.09  Release Build ..." (kernel-open/nvidia/nv-procfs.c);
  // proprietary: "NVIDIA UNIX x86_64 Kernel Module  550.54.15  <date>".
  if (first.find("Open Kernel Module") != std::string_view::npos) {
    f.flavour = nvidia_flavour::open;
  } else if (first.find("Kernel Module") != std::string_view::npos) {
    f.flavour = nvidia_flavour::proprietary;
  }
  for (auto t : tokens(first.substr(13))) {
    if (looks_like_version(t)) {
      f.version = std::string(t);
      break;
    }
  }
  if (f.version.empty()) {
    return status::error(fmt::format("nvidia version: no version number in '{}'", escape_line(first, 80)));
  }
  return f;
}

result<pid_t> parse_pid_file(std::string_view text) {
  auto t = trim(text);
  std::uint64_t v = 0;
  if (!parse_dec(t, v) || v == 0 || v > 0x3fffffff) {  // PID_MAX_LIMIT is 4M; anything else is junk
    return status::error(fmt::format("pid file: '{}' is not a pid", escape_line(t, 32)));
  }
  return static_cast<pid_t>(v);
}

std::string library_version_from_path(std::string_view path) {
  auto slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto so = base.find(".so.");
  if (so == std::string_view::npos) return "";
  std::string_view v = base.substr(so + 4);
  if (v.empty() || !std::all_of(v.begin(), v.end(),
                                [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); })) {
    return "";
  }
  return std::string(v);
}

}  // namespace mrcheck

namespace mrcheck {

// docs/transports.md, "NIC families": one row each in src/facts/nic_family.cpp.
std::string rdma_family(const rdma_device_fact& d) {
  const nic_family* f = nic_family_of(d);
  return f ? std::string(f->name) : std::string();
}

result<rdma_packages_fact> parse_dpkg_rdma(std::string_view text, std::string source) {
  // Stanzas separated by blank lines; "Package:", "Status:", "Version:" lines. Only installed packages count
  // ("Status: install ok installed"); a removed package keeps its stanza with "deinstall ok config-files". A
  // stanza without a Status line (not written by dpkg, but by hand) counts as installed.
  rdma_packages_fact f;
  f.source = std::move(source);
  std::string_view package, version;
  bool installed = true;
  auto flush = [&]() {
    if (!package.empty() && installed && !version.empty()) {
      std::string v = escape_line(version, 64);
      if (package == "libibverbs1" || (package == "rdma-core" && f.libibverbs_package != "libibverbs1")) {
        f.libibverbs_package = std::string(package);
        f.libibverbs_version = v;
        f.ofed = v.find("mlnx") != std::string::npos;
      } else if (package == "libfabric1-aws" || (package == "libfabric1" && f.libfabric_version.empty())) {
        f.libfabric_version = v;
      } else if (package.find("ofi-nccl") != std::string_view::npos ||
                 package.find("nccl-ofi") != std::string_view::npos) {
        f.ofi_nccl_version = v;
      }
    }
    package = {};
    version = {};
    installed = true;
  };
  for_each_line(text, [&](std::string_view line) {
    if (trim(line).empty()) {
      flush();
    } else if (line.starts_with("Package:")) {
      package = trim(line.substr(8));
    } else if (line.starts_with("Version:")) {
      version = trim(line.substr(8));
    } else if (line.starts_with("Status:")) {
      installed = line.find(" installed") != std::string_view::npos &&
                  line.find("not-installed") == std::string_view::npos;
    }
    return true;
  });
  flush();
  if (f.libibverbs_package.empty() && f.libfabric_version.empty()) {
    return status::error(fmt::format("{}: no libibverbs1, rdma-core or libfabric package installed", f.source));
  }
  return f;
}

namespace {

// "libfabric1-aws_1.9.0amzn1.1_amd64" (deb: name_version_arch) or "libfabric-aws-1.19.0amzn4.0-1.amzn2.x86_64"
// (rpm: name-version-release.arch): the version after `name`.
std::string package_version(std::string_view token, std::string_view name) {
  if (!token.starts_with(name) || token.size() <= name.size()) return {};
  std::string_view rest = token.substr(name.size());
  if (rest.front() == '_') {
    rest.remove_prefix(1);
    return escape_line(rest.substr(0, rest.find('_')), 64);
  }
  if (rest.front() == '-' && rest.size() > 1 && std::isdigit(static_cast<unsigned char>(rest[1]))) {
    rest.remove_prefix(1);
    std::size_t dash = rest.find('-');
    return escape_line(rest.substr(0, dash), 64);
  }
  return {};
}

}  // namespace

result<efa_installer_fact> parse_efa_installer(std::string_view text) {
  efa_installer_fact f;
  bool found = false;
  for_each_line(text, [&](std::string_view line) {
    constexpr std::string_view k = "# EFA installer version:";
    if (line.starts_with(k)) {
      f.installer_version = escape_line(trim(line.substr(k.size())), 32);
      found = true;
      return true;
    }
    if (line.starts_with("#")) return true;
    for (std::string_view t : tokens(line)) {
      for (std::string_view name : {std::string_view("libfabric1-aws"), std::string_view("libfabric-aws")}) {
        if (std::string v = package_version(t, name); !v.empty() && f.libfabric_version.empty())
          f.libfabric_version = v;
      }
      for (std::string_view name : {std::string_view("aws-ofi-nccl"), std::string_view("libnccl-ofi")}) {
        if (std::string v = package_version(t, name); !v.empty() && f.ofi_nccl_version.empty()) f.ofi_nccl_version = v;
      }
    }
    return true;
  });
  if (!found) return status::error("efa_installed_packages: no '# EFA installer version:' line");
  return f;
}

std::optional<bool> cap_ipc_lock_from_status(std::string_view text) {
  std::size_t at = text.find("\nCapEff:");
  if (at == std::string_view::npos) {
    if (!text.starts_with("CapEff:")) return std::nullopt;
    at = 0;
  } else {
    at += 1;
  }
  std::string_view v = text.substr(at + 7);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  std::size_t end = 0;
  while (end < v.size() && std::isxdigit(static_cast<unsigned char>(v[end]))) ++end;
  if (end == 0 || end > 16) return std::nullopt;
  std::uint64_t caps = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + end, caps, 16);
  if (ec != std::errc()) return std::nullopt;
  constexpr int k_cap_ipc_lock = 14;  // linux/capability.h
  return ((caps >> k_cap_ipc_lock) & 1U) != 0;
}

}  // namespace mrcheck
