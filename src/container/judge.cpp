// The verdicts on a job's container: what the helper saw inside (src/container/ctprobe.c) against the host's
// kernel, devices and driver (docs/facts/containers.md §4, §5). Pure functions of their inputs;
// tests/unit/container_test.cpp covers every branch.
#include <mrcheck/container.h>

#include <mrcheck/diagnosis.h>
#include <mrcheck/probe_protocol.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <regex>

namespace mrcheck {

result<ctprobe_view> parse_ctprobe_output(std::string_view out) {
  // The contract is in probe_protocol.h: known keys, each once, bounded, no control bytes.
  ctprobe_view v;
  std::size_t lines = 0;
  while (!out.empty()) {
    auto nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out.remove_prefix(nl == std::string_view::npos ? out.size() : nl + 1);
    if (line.empty()) continue;
    if (++lines > std::size(k_ctprobe_keys)) {
      return status::error(fmt::format("container probe: more than {} lines", std::size(k_ctprobe_keys)));
    }
    if (line.size() > k_ctprobe_line_max) {
      return status::error(
          fmt::format("container probe: a line of {} bytes (at most {})", line.size(), k_ctprobe_line_max));
    }
    if (std::any_of(line.begin(), line.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return status::error(fmt::format("container probe: control bytes in line '{}'", escape_line(line, 80)));
    }
    auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return status::error(fmt::format("container probe: malformed line '{}'", escape_line(line, 80)));
    }
    std::string_view key = line.substr(0, eq);
    if (std::find(std::begin(k_ctprobe_keys), std::end(k_ctprobe_keys), key) == std::end(k_ctprobe_keys)) {
      return status::error(fmt::format("container probe: unknown key '{}'", escape_line(key, 40)));
    }
    auto [it, fresh] = v.kv.emplace(std::string(key), std::string(line.substr(eq + 1)));
    if (!fresh) return status::error(fmt::format("container probe: '{}' printed twice", escape_line(it->first, 40)));
  }
  if (v.kv.find("ctprobe") == v.kv.end()) return status::error("container probe: no report (first line missing)");
  v.complete = v.kv.count("end") > 0;
  return v;
}

std::string rdma_core_from_soname(std::string_view name) {
  auto slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  constexpr std::string_view p = "libibverbs.so.1.";
  if (name.substr(0, p.size()) != p) return "";
  name.remove_prefix(p.size());
  // <abi minor>.<rdma-core major>.<rdma-core minor>
  auto dot = name.find('.');
  if (dot == std::string_view::npos) return "";
  std::string_view rest = name.substr(dot + 1);
  if (rest.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }))
    return "";
  return std::string(rest);
}

std::optional<int> provider_pabi(std::string_view name) {
  auto p = name.rfind("-rdmav");
  if (p == std::string_view::npos || name.size() < 3 || name.substr(name.size() - 3) != ".so") return std::nullopt;
  std::string_view num = name.substr(p + 6, name.size() - 3 - (p + 6));
  int v = 0;
  auto [e, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (ec != std::errc() || e != num.data() + num.size()) return std::nullopt;
  return v;
}

namespace {

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto c = s.find(',');
    std::string_view item = s.substr(0, c);
    if (!item.empty()) out.emplace_back(item);
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join_list(const std::vector<std::string>& v, std::size_t max = 6) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) out += (i ? "," : "") + escape_line(v[i], 32);
  if (v.size() > max) out += fmt::format(",... ({} in all)", v.size());
  return out.empty() ? "none" : out;
}

// "present a,b" -> {true, [a,b]}; "missing <why>" -> {false, []}.
std::pair<bool, std::vector<std::string>> dir_fact(const ctprobe_view& v, const std::string& key) {
  auto it = v.kv.find(key);
  if (it == v.kv.end() || it->second.substr(0, 7) != "present") return {false, {}};
  std::string_view rest = it->second;
  rest.remove_prefix(std::min<std::size_t>(8, rest.size()));
  return {true, split_list(rest)};
}

std::string get(const ctprobe_view& v, const std::string& key) {
  auto it = v.kv.find(key);
  return it == v.kv.end() ? std::string() : it->second;
}

// First word and the rest.
std::pair<std::string, std::string> head(std::string_view s) {
  auto sp = s.find(' ');
  if (sp == std::string_view::npos) return {std::string(s), ""};
  return {std::string(s.substr(0, sp)), std::string(s.substr(sp + 1))};
}

check_result make(std::string id, verdict r, std::string summary, std::string detail = {}, std::string hint = {}) {
  check_result c;
  c.id = std::move(id);
  c.result = r;
  c.summary = std::move(summary);
  c.detail = std::move(detail);
  c.hint = std::move(hint);
  return c;
}

// A byte count the helper printed ("8388608", "unlimited") as the reports show sizes; anything else escaped as is.
// The helper's text is the image's: never std::stoull (it throws).
std::string bytes_text(std::string_view s) {
  if (s == "unlimited") return "unlimited";
  std::uint64_t v = 0;
  auto [e, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || e != s.data() + s.size()) return escape_line(s, 24);
  return format_bytes(v);
}

int major_of(std::string_view version) {
  int v = 0;
  std::from_chars(version.data(), version.data() + version.size(), v);
  return v;
}

// The helper did not run to the end: say why, in words an admin can act on.
check_result helper_failure(const ctprobe_run& run, std::string_view where) {
  const child_outcome& o = run.outcome;
  std::string_view tail = o.err;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.remove_suffix(1);
  std::string err = escape_line(tail.substr(tail.size() > 400 ? tail.size() - 400 : 0), 400);
  if (!run.started) {
    return make("container", verdict::error,
                fmt::format("the container probe could not start: {}", escape_line(run.error, 300)));
  }
  if (o.timed_out || o.signaled) {
    // Loading the image's libibverbs/NCCL hung or crashed: NCCL's init would too.
    return make("container", verdict::fail,
                fmt::format("the container probe {} {}{}{}", where, o.describe(), err.empty() ? "" : ": ", err), {},
                "run the image's `ibv_devinfo` in the container to see which library hangs or crashes");
  }
  if (o.exited && o.exit_code == 127 && err.find("join the task's container") != std::string::npos) {
    return make("container", verdict::error,
                fmt::format("the container probe could not join the task's container: {}{}", err,
                            err.find("No such file") != std::string::npos ? " (the task and its container are gone)"
                                                                          : ""));
  }
  if (o.exited && o.exit_code == 127 && err.find("execveat") != std::string::npos) {
    // The kernel could not start the helper inside: its interpreter (the image's loader) is missing or broken.
    bool noent = err.find("No such file") != std::string::npos;
    return make("container", verdict::error,
                fmt::format("the container probe cannot start {}: {}{}", where, err,
                            noent ? " (the image has no dynamic loader /lib64/ld-linux-x86-64.so.2, or the task's root "
                                    "is gone)"
                                  : ""),
                {}, "a job linked against glibc cannot start in this image either: check the image");
  }
  if (o.exited && o.exit_code == 127) {
    // The image's loader started but could not link the helper (too old a glibc, missing libc.so.6/libdl.so.2).
    return make("container", verdict::error,
                fmt::format("the image's dynamic loader could not start the container probe {}: {}", where, err), {},
                "the image needs glibc 2.3.3 or newer with libdl.so.2");
  }
  if (o.exited && o.exit_code == 126) {
    return make("container", verdict::error,
                fmt::format("the container probe {}: {}", where, err.empty() ? "exit 126" : err));
  }
  return make("container", verdict::error,
              fmt::format("the container probe {} ({}) printed no complete report{}{}", where, o.describe(),
                          err.empty() ? "" : ": ", err));
}

// The image's rdma-core release: from the loaded libibverbs' file name, else from dpkg (for OFED builds whose
// names look alike), else "unknown".
std::string image_rdma_core(const ctprobe_view& v, const std::string& verbs_rest) {
  std::string image_rc = rdma_core_from_soname(verbs_rest);
  std::string dpkg = get(v, "dpkg_libibverbs1");
  // dpkg's "1:44.0-2" is upstream 44.0: no epoch, no Debian revision.
  std::string dpkg_upstream = dpkg.substr(dpkg.find(':') == std::string::npos ? 0 : dpkg.find(':') + 1);
  dpkg_upstream = dpkg_upstream.substr(0, dpkg_upstream.rfind('-'));
  return !image_rc.empty() ? image_rc : (!dpkg_upstream.empty() ? dpkg_upstream : std::string("unknown"));
}

std::string joined(const std::vector<std::string>& detail) { return fmt::format("{}", fmt::join(detail, "\n")); }

// Step 1: no libibverbs in the image at all.
check_result no_libibverbs(const std::string& verbs_rest, std::vector<std::string>& detail, bool host_has_devices,
                           const runtime_guess& rt) {
  std::string why =
      "no libibverbs.so.1 in the image: NCCL then runs over TCP sockets without an error (its log says "
      "only `NET/Socket`, and `Failed to open libibverbs.so` at NCCL_DEBUG=INFO)";
  detail.push_back("dlopen: " + escape_line(verbs_rest, 200));
  if (host_has_devices) {
    return make("container", verdict::fail, why, joined(detail),
                "install libibverbs1 and ibverbs-providers in the image (" + container_rdma_core_fix(rt.runtime) + ")");
  }
  return make("container", verdict::warn, why + "; this node has no RDMA device either", joined(detail),
              "install libibverbs1 and ibverbs-providers in the image");
}

// Steps 2 and 3: the providers (present, built for this libibverbs: lib<name>-rdmav<PABI>.so, one PABI per
// release) and libibverbs' own words on stderr. Adds the providers to the detail; a verdict ends the judging.
std::optional<check_result> judge_providers(const ctprobe_view& v, const std::string& err, const std::string& rc_text,
                                            std::vector<std::string>& detail, bool host_has_devices,
                                            const runtime_guess& rt) {
  auto [prov_present, providers] = dir_fact(v, "providers");
  std::vector<int> pabis;
  for (const auto& p : providers) {
    if (auto n = provider_pabi(p)) pabis.push_back(*n);
  }
  std::sort(pabis.begin(), pabis.end());
  pabis.erase(std::unique(pabis.begin(), pabis.end()), pabis.end());
  if (prov_present) detail.push_back(fmt::format("providers: {}", join_list(providers, 8)));

  // A provider that cannot drive the kernel's ABI, a provider it could not load.
  static const std::regex abi(R"(Driver (\S+) does not support the kernel ABI of (\d+) \(supports (\d+) to (\d+)\))");
  std::smatch m;
  if (std::regex_search(err, m, abi)) {
    return make("container", verdict::fail,
                fmt::format("the image's rdma-core {} cannot drive the host's kernel driver: libibverbs says `Driver "
                            "{} does not support the kernel ABI of {} (supports {} to {})` and skips the device",
                            escape_line(rc_text, 32), escape_line(m[1].str(), 32), m[2].str(), m[3].str(), m[4].str()),
                joined(detail), container_rdma_core_fix(rt.runtime));
  }
  if (!prov_present || providers.empty()) {
    verdict r = host_has_devices ? verdict::fail : verdict::warn;
    return make("container", r,
                fmt::format("the image has libibverbs (rdma-core {}) but no providers (ibverbs-providers): it finds "
                            "no device, and NCCL falls back to TCP sockets without an error",
                            escape_line(rc_text, 32)),
                joined(detail), "install ibverbs-providers of the same rdma-core release");
  }
  if (pabis.size() > 1) {
    return make("container", verdict::fail,
                fmt::format("the image mixes providers of several rdma-core releases ({}): libibverbs loads only "
                            "those of its own",
                            join_list(providers, 4)),
                joined(detail), container_rdma_core_fix(rt.runtime));
  }
  return std::nullopt;
}

// Step 4: devices inside against devices on the host. A verdict ends the judging.
std::optional<check_result> judge_devices_inside(const ctprobe_view& v, const host_rdma_view& host,
                                                 const runtime_guess& rt, const std::vector<std::string>& detail,
                                                 int dev_count, const std::string& dev_names_s) {
  if (!host.devices.empty() && dev_count == 0) {
    auto [dev_present, dev_entries] = dir_fact(v, "dev_infiniband");
    auto [sys_present, sys_entries] = dir_fact(v, "sys_infiniband");
    std::string mvd = get(v, "mellanox_visible_devices");
    std::string why;
    if (!dev_present) {
      why = "/dev/infiniband is not in the container";
    } else if (v.kv.count("mellanox_visible_devices") && (mvd.empty() || mvd == "void" || mvd == "none")) {
      why = fmt::format("MELLANOX_VISIBLE_DEVICES={} hides every HCA", escape_line(mvd, 32));
    } else if (!sys_present || sys_entries.empty()) {
      why = "/sys/class/infiniband is empty in the container";
    } else {
      why = fmt::format("libibverbs lists none of {}", join_list(sys_entries));
    }
    return make("container", verdict::fail,
                fmt::format("no RDMA device in the container ({}; the host has {}): NCCL falls back to TCP sockets",
                            why, join_list(host.devices)),
                joined(detail), container_device_fix(rt.runtime));
  }
  if (dev_count < 0) {
    return make("container", verdict::error,
                fmt::format("libibverbs in the container: {}", escape_line(dev_names_s, 200)), joined(detail));
  }
  return std::nullopt;
}

// Step 5: the rdma-core release against what NCCL needs and what the host runs.
check_result judge_rdma_core_release(const ctprobe_view& v, const host_rdma_view& host, const runtime_guess& rt,
                                     const std::vector<std::string>& detail, const std::string& rc_text, int dev_count,
                                     const std::string& dev_names_s) {
  bool dmabuf = get(v, "verbs_dmabuf") == "1";
  bool iova2 = get(v, "verbs_iova2") == "1";
  std::string devs = dev_count > 0 ? fmt::format("{} device(s) ({})", dev_count, escape_line(dev_names_s, 96))
                                   : "no device";
  std::string summary = fmt::format("{}: rdma-core {} (host {}), {}", to_string(rt.runtime), escape_line(rc_text, 32),
                                    host.rdma_core_version.empty() ? "unknown"
                                                                   : escape_line(host.rdma_core_version, 32),
                                    devs);
  if (!dmabuf || !iova2) {
    return make("container", verdict::warn,
                summary + fmt::format(": its libibverbs has no {} (rdma-core {}), so NCCL {}",
                                      !iova2 ? "ibv_reg_mr_iova2" : "ibv_reg_dmabuf_mr", !iova2 ? "22" : "34",
                                      !iova2 ? "registers without relaxed ordering"
                                             : "cannot use DMA-BUF: GPUDirect RDMA then needs nvidia_peermem on the "
                                               "host"),
                joined(detail), container_rdma_core_fix(rt.runtime));
  }
  return make("container", verdict::pass, summary, joined(detail));
}

// Step 6: the registration, inside, under the task's limits.
std::optional<check_result> judge_registration_inside(const ctprobe_view& v, const runtime_guess& rt, int dev_count) {
  auto reg = get(v, "reg");
  auto [memsoft, memhard] = head(get(v, "memlock"));
  if (reg.empty()) {
    if (dev_count != 0) return std::nullopt;
    return make("container_mr", verdict::skip, "no RDMA device in the container or on the host: nothing to register");
  }
  auto [how, rest] = head(reg);
  auto [errs, rest2] = head(rest);
  auto [dev, why] = head(rest2);
  int e = major_of(errs);
  if (how == "ok") {
    return make("container_mr", verdict::pass,
                fmt::format("registered {} on {} inside the container (memlock soft {})", bytes_text(why),
                            escape_line(dev, 32), bytes_text(memsoft)));
  }
  std::string call = how == "open"   ? "ibv_open_device"
                     : how == "pd"   ? "ibv_alloc_pd"
                     : how == "mmap" ? "mmap"
                                     : "ibv_reg_mr";
  std::string hint = e == ENOMEM || e == EPERM ? container_memlock_fix(rt.runtime)
                     : e == EACCES             ? container_device_fix(rt.runtime)
                                               : container_rdma_core_fix(rt.runtime);
  return make("container_mr", verdict::fail,
              fmt::format("{} on {} failed inside the container with {} ({}), memlock soft {} hard {}", call,
                          escape_line(dev, 32), errno_name(e).empty() ? std::to_string(e) : std::string(errno_name(e)),
                          escape_line(why, 80), bytes_text(memsoft), bytes_text(memhard)),
              {}, hint);
}

// "NCCL 2.21.5 built for CUDA 12.4" (the version code is decoded by nccl_version_text, include/mrcheck/units.h).
std::string nccl_build_text(int ver, const std::string& ncuda) {
  std::string nccl_text = ver > 0 ? "NCCL " + nccl_version_text(ver) : "NCCL (version unknown)";
  if (!ncuda.empty()) nccl_text += " built for CUDA " + escape_line(ncuda, 16);
  return nccl_text;
}

// The CUDA release NCCL was built for against the one the host's driver (version code major*1000+minor*10)
// supports.
check_result judge_nccl_cuda(const std::string& s, int drv, const std::string& ncuda) {
  int drv_major = drv / 1000, drv_minor = drv % 1000 / 10;
  int need_major = major_of(ncuda);
  int need_minor = 0;
  if (auto dot = ncuda.find('.'); dot != std::string::npos)
    need_minor = major_of(std::string_view(ncuda).substr(dot + 1));
  std::string text = fmt::format("{}; the host's driver supports CUDA {}.{}", s, drv_major, drv_minor);
  if (need_major > 0 && need_major > drv_major) {
    return make("container_nccl", verdict::fail,
                text +
                    ": NCCL's CUDA runtime needs a newer driver (`CUDA driver "
                    "version is insufficient for CUDA runtime version`)",
                {}, fmt::format("use an image built for CUDA {}.x or update the host's NVIDIA driver", drv_major));
  }
  if (need_major == drv_major && need_minor > drv_minor) {
    return make("container_nccl", verdict::warn,
                text + ": runs through CUDA minor version compatibility (no PTX JIT for newer code)");
  }
  return make("container_nccl", verdict::pass, text);
}

// Step 7: the image's NCCL against the host's CUDA driver.
check_result judge_image_nccl(const ctprobe_view& v, const host_rdma_view& host) {
  auto [nv, npath] = head(get(v, "nccl"));
  auto [cd, cpath] = head(get(v, "cuda_driver"));
  std::string ncuda = get(v, "nccl_cuda");
  auto [plug_state, plug] = head(get(v, "nccl_net_plugin"));
  std::string plugin_text = plug_state == "loaded" ? "net plugin " + escape_line(plug, 96)
                                                   : "no net plugin (NCCL's own IB transport)";
  if (nv == "none" || nv.empty()) {
    return make("container_nccl", verdict::skip,
                "no libnccl.so.2 on the image's library path (a Python wheel's NCCL is loaded by path and not seen)");
  }
  std::string nccl_text = nccl_build_text(major_of(nv), ncuda);
  if (cd == "none" || cd.empty()) {
    verdict r = host.nvidia_driver ? verdict::fail : verdict::skip;
    return make("container_nccl", r,
                fmt::format("{}, {}; no libcuda.so.1 in the container{}", nccl_text, plugin_text,
                            host.nvidia_driver ? ": the runtime did not pass the GPU driver in"
                                               : " (no NVIDIA driver on this node)"),
                {},
                host.nvidia_driver ? "pyxis/enroot: NVIDIA_VISIBLE_DEVICES (image) and the nvidia hook; Apptainer: "
                                     "--nv; podman/docker: --device nvidia.com/gpu=all or --gpus all"
                                   : "");
  }
  return judge_nccl_cuda(fmt::format("{}, {}", nccl_text, plugin_text), major_of(cd), ncuda);
}

}  // namespace

std::vector<check_result> judge_container(const ctprobe_run& run, const host_rdma_view& host, const runtime_guess& rt,
                                          bool nccl) {
  std::vector<check_result> out;
  std::string where = fmt::format("in {}", to_string(rt.runtime));
  result<ctprobe_view> parsed = status::error("not run");
  if (run.started && run.outcome.exited && run.outcome.exit_code == 0) parsed = parse_ctprobe_output(run.outcome.out);
  if (!parsed || !parsed->complete) {
    check_result c = helper_failure(run, where);
    if (run.started && run.outcome.exited && run.outcome.exit_code == 0 && !parsed)
      c.summary += ": " + parsed.error().message();
    out.push_back(std::move(c));
    return out;
  }
  const ctprobe_view& v = *parsed;
  std::vector<std::string> detail;
  if (!rt.evidence.empty()) detail.push_back(fmt::format("runtime: {} ({})", to_string(rt.runtime), rt.evidence));
  detail.push_back(fmt::format("host RDMA devices: {}; /dev/infiniband on the host: {}", join_list(host.devices),
                               join_list(host.dev_infiniband)));

  auto [dev_present, dev_entries] = dir_fact(v, "dev_infiniband");
  auto [sys_present, sys_entries] = dir_fact(v, "sys_infiniband");
  std::string mvd = get(v, "mellanox_visible_devices");
  detail.push_back(
      fmt::format("in the container: /dev/infiniband {}, /sys/class/infiniband {}{}",
                  dev_present ? join_list(dev_entries) : "missing", sys_present ? join_list(sys_entries) : "missing",
                  v.kv.count("mellanox_visible_devices") ? ", MELLANOX_VISIBLE_DEVICES=" + escape_line(mvd, 64) : ""));

  auto [verbs_state, verbs_rest] = head(get(v, "verbs"));
  auto [dev_count_s, dev_names_s] = head(get(v, "devices"));
  int dev_count = -1;
  if (!dev_count_s.empty() && dev_count_s != "error") dev_count = major_of(dev_count_s);
  const bool host_has_devices = !host.devices.empty();
  std::string rc_text = image_rdma_core(v, verbs_rest);

  // 1. libibverbs itself.
  if (verbs_state == "none") {
    out.push_back(no_libibverbs(verbs_rest, detail, host_has_devices, rt));
    return out;  // nothing to register with
  }
  std::string dpkg = get(v, "dpkg_libibverbs1");
  detail.push_back(fmt::format("libibverbs: {} (rdma-core {}{}); host rdma-core {}", escape_line(verbs_rest, 160),
                               escape_line(rc_text, 32), dpkg.empty() ? "" : ", dpkg " + escape_line(dpkg, 40),
                               host.rdma_core_version.empty() ? "unknown" : escape_line(host.rdma_core_version, 40)));

  // 2, 3. The providers; 4. devices inside against devices on the host.
  if (auto c = judge_providers(v, run.outcome.err, rc_text, detail, host_has_devices, rt)) {
    out.push_back(std::move(*c));
    return out;
  }
  if (auto c = judge_devices_inside(v, host, rt, detail, dev_count, dev_names_s)) {
    out.push_back(std::move(*c));
    return out;
  }
  // 5. The rdma-core release; 6. the registration inside; 7. the image's NCCL.
  out.push_back(judge_rdma_core_release(v, host, rt, detail, rc_text, dev_count, dev_names_s));
  if (auto c = judge_registration_inside(v, rt, dev_count)) out.push_back(std::move(*c));
  if (nccl) out.push_back(judge_image_nccl(v, host));
  return out;
}

}  // namespace mrcheck
