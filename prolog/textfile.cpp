#include "prolog/textfile.h"

#include <mrcheck/build_config.h>
#include <mrcheck/facts.h>
#include <mrcheck/sysroot.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace mrcheck {

int prometheus_status_value(verdict v) {
  switch (v) {
    case verdict::skip: return -1;
    case verdict::pass: return 0;
    case verdict::warn: return 1;
    case verdict::fail: return 2;
    case verdict::error: return 3;
  }
  return 3;
}

std::string prometheus_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void exposition::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void exposition::sample(std::string_view name, const labels& l, std::string_view value) {
  out_ += name;
  if (!l.empty()) {
    out_ += '{';
    for (std::size_t i = 0; i < l.size(); ++i) {
      out_ += fmt::format("{}{}=\"{}\"", i ? "," : "", l[i].first, prometheus_label_value(l[i].second));
    }
    out_ += '}';
  }
  out_ += fmt::format(" {}\n", value);
}

std::string prometheus_textfile(const report& r, std::int64_t now_unix) {
  exposition e;
  e.family("mrcheck_check_status", "gauge",
           "Verdict of each mrcheck-prolog check in its last run: -1 skip (not applicable), 0 pass, 1 warn, 2 fail, "
           "3 error (the checker itself broke).");
  for (const auto& c : r.checks)
    e.sample("mrcheck_check_status", {{"check", c.id}}, fmt::format("{}", prometheus_status_value(c.result)));
  e.family("mrcheck_status", "gauge",
           "Worst verdict of mrcheck-prolog's last run (skips ignored): 0 pass, 1 warn, 2 fail, 3 error.");
  e.sample("mrcheck_status", {}, fmt::format("{}", prometheus_status_value(r.overall())));
  e.family("mrcheck_last_run_timestamp_seconds", "gauge", "Unix time of mrcheck-prolog's last run.");
  e.sample("mrcheck_last_run_timestamp_seconds", {}, fmt::format("{}", now_unix));
  return e.text();
}

namespace {

// "4: ACTIVE" -> "ACTIVE", as sysfs writes port states.
std::string after_colon(std::string_view s) {
  auto p = s.find(": ");
  return std::string(p == std::string_view::npos ? s : s.substr(p + 2));
}

// DCGM-exporter's pci_bus_id form: "00000000:3B:00.0" for sysfs' "0000:3b:00.0".
std::string dcgm_bus_id(std::string_view bdf) {
  std::string out = bdf.size() == 12 ? "0000" : "";
  for (char c : bdf) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void device_series(exposition& e, const node_facts& f, const std::vector<std::string>& uuids) {
  if (f.rdma_devices && !f.rdma_devices->empty()) {
    e.family("mrcheck_rdma_device_info", "gauge",
             "RDMA device as mrcheck-prolog read it, always 1; `device` as node_exporter's node_infiniband_info.");
    for (const auto& d : *f.rdma_devices) {
      e.sample("mrcheck_rdma_device_info",
               {{"device", d.name},
                {"firmware_version", d.fw_ver},
                {"board_id", d.board_id},
                {"hca_type", d.hca_type},
                {"driver", d.driver},
                {"family", rdma_family(d)}},
               "1");
    }
    e.family("mrcheck_rdma_port_info", "gauge",
             "Port of an RDMA device (state, physical state, link layer, rate as sysfs gives them), always 1.");
    for (const auto& d : *f.rdma_devices) {
      for (const auto& p : d.ports) {
        e.sample("mrcheck_rdma_port_info",
                 {{"device", d.name},
                  {"port", std::to_string(p.number)},
                  {"state", after_colon(p.state)},
                  {"phys_state", after_colon(p.phys_state)},
                  {"link_layer", p.link_layer},
                  {"rate", p.rate}},
                 "1");
      }
    }
  }
  if (f.gpus && !f.gpus->empty()) {
    e.family("mrcheck_gpu_info", "gauge",
             "NVIDIA GPU as mrcheck-prolog read it, always 1; `gpu` (index in PCI bus order, NVML's usual order), "
             "`UUID` and `pci_bus_id` as DCGM-exporter's labels.");
    for (std::size_t i = 0; i < f.gpus->size(); ++i) {
      const auto& g = (*f.gpus)[i];
      e.sample("mrcheck_gpu_info",
               {{"gpu", std::to_string(i)},
                {"UUID", i < uuids.size() ? uuids[i] : ""},
                {"pci_bus_id", dcgm_bus_id(g.pci_bdf)}},
               "1");
    }
  }
}

}  // namespace

std::vector<std::string> read_gpu_uuids(const sysroot& root, const node_facts& f) {
  std::vector<std::string> out;
  if (!f.gpus) return out;
  for (const auto& g : *f.gpus) {
    std::string uuid;
    if (auto text = root.read(fmt::format("/proc/driver/nvidia/gpus/{}/information", g.pci_bdf))) {
      for (auto p = text->find("GPU UUID:"); p != std::string::npos;) {
        auto end = text->find('\n', p);
        std::string_view v(text->data() + p + 9, (end == std::string::npos ? text->size() : end) - p - 9);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
        uuid = v;
        break;
      }
    }
    out.push_back(std::move(uuid));
  }
  return out;
}

std::string prometheus_textfile(const report& r, const textfile_input& in) {
  exposition e;
  e.family("mrcheck_check_state", "gauge",
           "Verdict of each mrcheck-prolog check in its last run, one series per state (pass, warn, fail, skip, "
           "error): 1 for the check's verdict, 0 for the others.");
  for (const auto& c : r.checks) {
    for (verdict v : {verdict::pass, verdict::warn, verdict::fail, verdict::skip, verdict::error}) {
      e.sample("mrcheck_check_state", {{"check", c.id}, {"state", std::string(to_string(v))}},
               c.result == v ? "1" : "0");
    }
  }
  e.family("mrcheck_build_info", "gauge", "mrcheck's version and the Slurm release it was built against, always 1.");
  e.sample("mrcheck_build_info", {{"version", MRCHECK_VERSION}, {"slurm_version", MRCHECK_SLURM_VERSION}}, "1");
  e.family("mrcheck_run_info", "gauge",
           "mrcheck-prolog's last run, always 1: mode (prolog, healthcheck), Slurm node name, and hpc_job, the job "
           "of a prolog run (as DCGM-exporter's label).");
  exposition::labels run{{"mode", in.mode}, {"node", in.node}};
  if (!in.hpc_job.empty()) run.emplace_back("hpc_job", in.hpc_job);
  e.sample("mrcheck_run_info", run, "1");
  if (in.facts) device_series(e, *in.facts, in.gpu_uuids);
  return prometheus_textfile(r, in.now_unix) + e.text();
}

status write_textfile(const std::string& path, std::string_view content, uid_t euid) {
  auto what = [&](std::string_view why) { return fmt::format("textfile {}: {}", path, why); };
  if (path.empty() || path.front() != '/') return status::error(what("not an absolute path"));
  if (path.back() == '/') return status::error(what("names a directory, not a file"));
  // Built in one step: GCC 12 at -O2 reports a false -Wrestrict for `dir = "/"` after a substr() (CI is -Werror).
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);

  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) return status::from_errno(what("directory"), errno);
  if (!S_ISDIR(ds.st_mode)) return status::error(what("its directory is not a directory"));
  // Root writes here, so only root may create names in the directory: where anyone else can (group or world
  // write, sticky or not, or a directory of another owner), a user can plant the name first (a symlink, a
  // directory, the temporary name) and the metrics are never written again (tests/e2e/hostile_textfile_test.sh).
  if (euid == 0 && (ds.st_mode & (S_IWGRP | S_IWOTH))) {
    return status::error(
        what(fmt::format("its directory is writable by group or others (mode {:o}), so a user could "
                         "create the file's name first: refused; use a directory only root can write "
                         "(node_exporter's textfile directory)",
                         ds.st_mode & 07777)));
  }
  if (euid == 0 && ds.st_uid != 0) {
    return status::error(what(fmt::format("its directory belongs to uid {}, not root: refused", ds.st_uid)));
  }
  struct stat ps {};
  if (::lstat(path.c_str(), &ps) == 0) {
    if (S_ISLNK(ps.st_mode)) return status::error(what("is a symlink: refused"));
    if (!S_ISREG(ps.st_mode)) return status::error(what("exists and is not a regular file: refused"));
  } else if (errno != ENOENT) {
    return status::from_errno(what("lstat"), errno);
  }

  std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  // O_EXCL|O_NOFOLLOW: a name planted in the directory (a symlink to /etc/shadow) is never followed.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return status::from_errno(what(fmt::format("create {}", tmp)), errno);
  std::size_t off = 0;
  int err = 0;
  // The umask must not make the file unreadable for node_exporter, which usually runs as its own user.
  if (::fchmod(fd, 0644) != 0) err = errno;
  while (err == 0 && off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  // No fsync: the file is rewritten at every run (ext4's auto_da_alloc also flushes a file renamed over
  // another); a crash costs one run's metrics, an fsync at every job start costs the prolog's time.
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return status::from_errno(what(fmt::format("write {}", tmp)), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return status::from_errno(what(fmt::format("rename {}", tmp)), e);
  }
  // node_exporter runs as its own user (Debian: prometheus): a directory others cannot list and enter hides the
  // file from it, and the collector only says so in its own log. One line here says it where the admin looks.
  if ((ds.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH)) {
    return status::error(
        what(fmt::format("written, but its directory (mode {:o}) is not readable by others: "
                         "node_exporter, which runs as its own user, cannot read it",
                         ds.st_mode & 07777)));
  }
  return status::ok();
}

}  // namespace mrcheck
