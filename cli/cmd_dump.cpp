// mrcheck dump --out DIR [--root DIR]: re-run the fact collectors with the sysroot's recorder on and copy
// exactly the files they read into DIR, at the same paths, so that `mrcheck report --root DIR` replays the
// node (the way `hwloc-gather-topology` and rdma-core's sysfs fixtures work). Symlinks are copied as symlinks
// with the same target text (sysfs class links, /proc/self -> PID), so a replay walks the same links.
// Library facts (dlopen results) go to DIR/.mrcheck/libraries.json; DIR/MRCHECK_DUMP says where and when.
//
// Of a directory whose names matter only in part (rdma-core's providers, a library directory's
// libibverbs.so.1.*), only those entries are recreated, empty (sysroot::list_matching).
// Nothing is copied that the collectors did not read: no /proc/PID/environ, no cmdline, no slurm.conf (read
// unrecorded, it may hold AccountingStoragePass). An existing non-empty DIR is refused, and so is a DIR that is
// not the caller's (or root's) or that group or others can write: root dumping into a user's directory would
// write wherever a link the user plants there points. Everything in DIR is created relative to DIR's descriptor
// (include/mrcheck/private_dir.h), never through a link.
#include "command_line.h"

#include <mrcheck/build_config.h>
#include <mrcheck/fabric.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/matrix.h>
#include <mrcheck/private_dir.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/sysroot.h>

#include <fmt/chrono.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

namespace mrcheck::cli {

namespace {

namespace fs = std::filesystem;

constexpr int k_max_link_depth = 40;  // the kernel's own limit on nested symlinks

// DIR's tree, every name made relative to DIR's descriptor and never through a link (a link in DIR is only ever
// one the dump made, as a copy of the node's).
class out_tree {
 public:
  explicit out_tree(dir_handle root) : root_(std::move(root)) {}

  // The directory `rel` (relative to DIR), made where missing.
  result<dir_handle> dirs(const fs::path& rel) const {
    dir_handle cur(::dup(root_.fd()));
    if (cur.fd() < 0) return status::from_errno("dump: dup", errno);
    for (const auto& comp : rel) {
      if (comp.empty() || comp == "." || comp == "/") continue;
      if (comp == "..") return status::error(fmt::format("dump: '..' in {}", rel.string()));
      auto next = make_dir_at(cur, comp.string(), 0755);
      if (!next) return next.error().with_context(fmt::format("dump: {}", rel.string()));
      cur = std::move(*next);
    }
    return cur;
  }

  status link(const fs::path& rel, const fs::path& target) const {
    auto d = dirs(rel.parent_path());
    if (!d) return d.error();
    struct stat st {};
    std::string name = rel.filename().string();
    if (::fstatat(d->fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) return status::ok();
    if (::symlinkat(target.c_str(), d->fd(), name.c_str()) != 0)
      return status::from_errno(fmt::format("dump: symlink {}", rel.string()), errno);
    return status::ok();
  }

  status file(const fs::path& rel, std::string_view text) const {
    auto d = dirs(rel.parent_path());
    if (!d) return d.error();
    if (auto s = write_file_at(*d, rel.filename().string(), text, 0644, false); !s)
      return s.with_context(fmt::format("dump: {}", rel.string()));
    return status::ok();
  }

 private:
  dir_handle root_;
};

// Copies node paths from `src` (host "/" or a tree) into `out`, recreating every symlink met on the way.
class tree_copier {
 public:
  tree_copier(const sysroot& src, const out_tree& out) : src_(src), out_(out) { src_.set_recorder(nullptr); }

  status copy(sysroot::access kind, const std::string& node_path) {
    fs::path p = fs::path(node_path).lexically_normal();
    if (!p.is_absolute()) return status::error(fmt::format("dump: not an absolute path: {}", node_path));
    switch (kind) {
      case sysroot::access::dir: {
        auto phys = ensure(p, 0);
        if (!phys) return phys.error();
        return skeleton(*phys);
      }
      case sysroot::access::link: {
        auto parent = ensure(p.parent_path(), 0);
        if (!parent) return parent.error();
        return make_link(fs::path(*parent) / p.filename());
      }
      case sysroot::access::file: return copy_file(p, 0);
      case sysroot::access::name: return copy_name(p);
    }
    return status::ok();
  }

  std::size_t files() const { return files_; }

 private:
  struct stat lstat_node(const fs::path& node, bool& ok) const {
    struct stat st {};
    ok = ::lstat(src_.host_path(node.string()).c_str(), &st) == 0;
    return st;
  }

  // Recreates the symlink at node path `link` in out (same target text); returns the physical node path it
  // points to.
  result<fs::path> follow(const fs::path& link, int depth) {
    if (depth > k_max_link_depth)
      return status::error(fmt::format("dump: too many levels of links at {}", link.string()));
    std::error_code ec;
    fs::path target = fs::read_symlink(src_.host_path(link.string()), ec);
    if (ec) return status::from_errno(fmt::format("dump: readlink {}", link.string()), ec.value());
    if (auto s = make_link(link); !s) return s;
    fs::path resolved = target.is_absolute() ? target : (link.parent_path() / target);
    return ensure(resolved.lexically_normal(), depth + 1);
  }

  status make_link(const fs::path& link) {
    std::error_code ec;
    fs::path target = fs::read_symlink(src_.host_path(link.string()), ec);
    if (ec) return status::from_errno(fmt::format("dump: readlink {}", link.string()), ec.value());
    return out_.link(link.relative_path(), target);
  }

  // Makes every component of directory `node` exist in out, following symlinks; returns its physical path.
  result<fs::path> ensure(const fs::path& node, int depth) {
    fs::path cur = "/";
    for (const auto& comp : node.relative_path()) {
      fs::path next = cur / comp;
      bool ok = false;
      struct stat st = lstat_node(next, ok);
      if (ok && S_ISLNK(st.st_mode)) {
        auto r = follow(next, depth);
        if (!r) return r;
        cur = *r;
        continue;
      }
      if (auto d = out_.dirs(next.relative_path()); !d) return d.error();
      cur = next;
    }
    return cur;
  }

  // A listed directory replays only if its entries do: recreate each child as a symlink (same target text)
  // or an empty directory. File contents are never copied here - only files that were read are.
  status skeleton(const fs::path& dir) {
    std::error_code ec;
    std::size_t n = 0;
    for (fs::directory_iterator it(src_.host_path(dir.string()), ec), end; !ec && it != end; it.increment(ec)) {
      if (++n > 4096) break;  // sysfs directories we list are small; never walk a huge one
      fs::path child = dir / it->path().filename();
      std::error_code ec2;
      auto st = it->symlink_status(ec2);
      if (ec2) continue;
      if (fs::is_symlink(st)) {
        if (auto s = make_link(child); !s) return s;
      } else if (fs::is_directory(st)) {
        if (auto d = out_.dirs(child.relative_path()); !d) return d.error();
      }
    }
    return status::ok();
  }

  // An entry whose name alone a collector used (sysroot::list_matching): the link it is, else an empty file.
  status copy_name(const fs::path& node) {
    auto parent = ensure(node.parent_path(), 0);
    if (!parent) return parent.error();
    fs::path phys = *parent / node.filename();
    bool ok = false;
    struct stat st = lstat_node(phys, ok);
    if (ok && S_ISLNK(st.st_mode)) return make_link(phys);
    if (auto s = out_.file(phys.relative_path(), ""); !s) return s;
    ++files_;
    return status::ok();
  }

  status copy_file(const fs::path& node, int depth) {
    auto parent = ensure(node.parent_path(), depth);
    if (!parent) return parent.error();
    fs::path phys = *parent / node.filename();
    bool ok = false;
    struct stat st = lstat_node(phys, ok);
    if (ok && S_ISLNK(st.st_mode)) {
      if (auto s = make_link(phys); !s) return s;
      if (depth > k_max_link_depth)
        return status::error(fmt::format("dump: too many levels of links at {}", phys.string()));
      std::error_code ec;
      fs::path target = fs::read_symlink(src_.host_path(phys.string()), ec);
      if (ec) return status::from_errno(fmt::format("dump: readlink {}", phys.string()), ec.value());
      return copy_file((target.is_absolute() ? target : phys.parent_path() / target).lexically_normal(), depth + 1);
    }
    if (!copied_.insert(phys.string()).second) return status::ok();
    // Read again through the sysroot (same size cap and same refusal of FIFOs/devices as the collectors).
    auto text = src_.read(phys.string());
    if (!text) return text.error().with_context("dump");
    if (auto s = out_.file(phys.relative_path(), *text); !s) return s;
    ++files_;
    return status::ok();
  }

  sysroot src_;
  const out_tree& out_;
  std::set<std::string> copied_;
  std::size_t files_ = 0;
};

// Git does not keep empty directories, and an empty /sys/class/infiniband or /sys/module/mlx5_core is a fact
// ("class present, no device"; "module loaded"). A ".keep" file keeps them; the collectors skip dot names.
void keep_empty_dirs(const fs::path& out, const out_tree& tree) {
  std::error_code ec;
  std::vector<fs::path> empty;
  for (fs::recursive_directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec) && fs::is_empty(it->path(), ec)) {
      empty.push_back(it->path().lexically_relative(out));
    }
  }
  for (const auto& d : empty) {
    if (auto s = tree.file(d / ".keep", ""); !s) fmt::print(stderr, "mrcheck: {}\n", s.message());
  }
}

struct dump_options {
  std::string out_dir;
  std::string root_dir;
};

// DIR made (or found empty) and opened as the caller's private directory; nullopt after printing why.
std::optional<out_tree> open_out_dir(const command_line& line, const std::string& out_dir, fs::path& out) {
  std::error_code ec;
  out = fs::absolute(out_dir, ec).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "DIR/"
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!fs::is_directory(fs::symlink_status(out, ec)) || !fs::is_empty(out, ec)) {
      line.usage_error(
          fmt::format("{} exists and is not an empty directory; refusing to write into it", escape_line(out_dir, 256)));
      return std::nullopt;
    }
  } else {
    fs::create_directories(out.parent_path(), ec);
    if (::mkdir(out.c_str(), 0755) != 0) {
      line.usage_error(fmt::format("mkdir {}: {}", escape_line(out_dir, 256), std::strerror(errno)));
      return std::nullopt;
    }
  }
  // Checked on the descriptor: the directory the dump writes into is the one it checked (a user cannot swap it).
  // (mkdir's 0755 can only lose bits to the umask, never become writable by others.)
  auto fd = open_private_dir(out.string(), ::geteuid(), "dump: --out");
  if (!fd) {
    fmt::print(stderr, "mrcheck: {}\n", fd.error().message());
    return std::nullopt;
  }
  return out_tree(std::move(*fd));
}

// What the collectors read, with the facts they made from it.
struct recorded {
  std::vector<std::pair<sysroot::access, std::string>> reads;
  node_facts facts;
  matrix_facts extra;
};

recorded record_reads(sysroot& root) {
  recorded r;
  root.set_recorder([&r](sysroot::access k, const std::string& p) { r.reads.emplace_back(k, p); });
  collect_options opts;
  opts.slurm_conf = slurm_conf_path(root);
  r.facts = collect_facts(root, opts);
  // What `mrcheck report` and the prolog read besides (src/matrix/facts.cpp): ofed_info's release and the
  // libibverbs.so.1.* names that carry rdma-core's version when the library itself does not load.
  // NVML's fabric answer too, where it was asked (the host's NVIDIA driver and IMEX: include/mrcheck/fabric.h).
  r.extra = collect_matrix_facts(root, opts.slurm_conf, true);
  // The boot id, so that the stack fingerprint of a replay names the boot it was taken on (include/mrcheck/
  // history.h); not /proc/uptime, which would date a replay's boot from the replay's clock.
  (void)root.read_value(k_boot_id_path);
  root.set_recorder(nullptr);
  return r;
}

// The files that are not copies: library facts (on the host what dlopen found; from a tree only what that tree
// had recorded), NVML's fabric answer, the .keep files and MRCHECK_DUMP.
status write_made_files(const sysroot& root, const recorded& rec, const out_tree& tree, const fs::path& out,
                        std::size_t files) {
  bool have_libs = root.is_host() || std::any_of(rec.reads.begin(), rec.reads.end(),
                                                 [](const auto& r) { return r.second == k_libraries_json; });
  if (have_libs) {
    std::string text = libraries_to_json(rec.facts).dump(2) + "\n";
    if (auto s = tree.file(fs::path(k_libraries_json).relative_path(), text); !s) return s;
  }
  if (root.is_host() && rec.extra.mnnvl && rec.extra.mnnvl->not_asked.empty()) {
    std::string text = fabric_to_json(rec.extra.mnnvl->fabric).dump(2) + "\n";
    if (auto s = tree.file(fs::path(k_fabric_json).relative_path(), text); !s) return s;
  }
  keep_empty_dirs(out, tree);
  std::string stamp = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  std::string info = fmt::format(
      "mrcheck dump of host {} at {} by mrcheck {}; source root {}; {} files; replay with: mrcheck report --root DIR\n",
      rec.facts.hostname_status ? rec.facts.hostname : "unknown", stamp, MRCHECK_VERSION, root.root().string(), files);
  return tree.file("MRCHECK_DUMP", info);
}

}  // namespace

void declare_dump(command_line& c) {
  auto& o = c.make_options<dump_options>();
  c.about(
      "Re-runs the fact collectors and copies exactly the files they read into DIR, at the same paths, so that\n"
      "`mrcheck report --root DIR` replays the node. Nothing is copied that the collectors did not read.\n");
  c.option("--out", o.out_dir, "DIR", "where to write: a new or empty directory of the caller's", shown::required);
  c.option("--root", o.root_dir, "DIR", "dump a tree (itself a dump) instead of this host");
  c.footer("exit: 0, or 2 on a usage or I/O error\n");
}

int cmd_dump(const args& a) {
  command_line line("dump");
  declare_dump(line);
  if (auto code = line.parse(a)) return *code;
  const auto& o = line.options<dump_options>();
  sysroot root;
  if (!o.root_dir.empty()) {
    auto r = sysroot::open(o.root_dir);
    if (!r) return line.usage_error(fmt::format("--root: {}", r.error().message()));
    root = *r;
  }
  fs::path out;
  std::optional<out_tree> tree = open_out_dir(line, o.out_dir, out);
  if (!tree) return k_exit_usage;
  recorded rec = record_reads(root);
  tree_copier copier(root, *tree);
  std::size_t failed = 0;
  for (const auto& [kind, path] : rec.reads) {
    if (path == k_libraries_json) continue;  // rewritten by write_made_files
    if (auto s = copier.copy(kind, path); !s) {
      // A process that exited between the read and the copy, for instance: keep going, say so.
      fmt::print(stderr, "mrcheck: dump: {}\n", s.message());
      ++failed;
    }
  }
  if (auto s = write_made_files(root, rec, *tree, out, copier.files()); !s) {
    fmt::print(stderr, "mrcheck: {}\n", s.message());
    return k_exit_usage;
  }
  fmt::print(stderr, "mrcheck: dump: {} files into {}{}\n", copier.files(), out.string(),
             failed ? fmt::format(" ({} could not be copied)", failed) : "");
  return k_exit_ok;
}

}  // namespace mrcheck::cli
