// The stack history (include/mrcheck/history.h): fingerprints of fixture trees before and after the changes
// that have broken nodes (the OFED modules replaced by inbox ones after a kernel upgrade under an OFED user space,
// a host moved to the distro stack under a container image's old libibverbs, a firmware update, a driver
// reinstall), the change lines and drain reasons they give, the bounded history, and the file's bad inputs.
// The "after" trees are copies of tests/fixtures/matrix_aligned with the few files such a change rewrites.
#include <mrcheck/check_registry.h>
#include <mrcheck/fleet.h>
#include <mrcheck/history.h>
#include <mrcheck/history_store.h>
#include <mrcheck/matrix.h>

#include "prolog/node_action.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include "judge.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

class tree {
 public:
  explicit tree(const std::string& fixture) {
    char tmpl[] = "/tmp/mrcheck-history-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::copy(fs::path(MRCHECK_FIXTURES_DIR) / fixture, dir_,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  ~tree() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  tree& write(const std::string& path, const std::string& text) {
    fs::path p = fs::path(dir_) / path.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
    return *this;
  }
  tree& remove(const std::string& path) {
    fs::remove_all(fs::path(dir_) / path.substr(1));
    return *this;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

struct judged {
  stack_fingerprint fp;
  report rep;
};

judged judge(const tree& t, std::int64_t now = 1764400000) {
  auto root = sysroot::open(t.dir());
  EXPECT_TRUE(root.is_ok());
  collect_options o;
  o.load_libraries = false;
  node_facts f = collect_facts(*root, o);
  matrix_facts extra = collect_matrix_facts(*root, "/etc/slurm/slurm.conf", !f.libibverbs.is_ok());
  matrix_rules rules = default_matrix_rules();
  report rep = judge_matrix(f, rules, extra);
  return {make_fingerprint(f, extra, rules, read_boot_info(*root, now), read_dkms_modules(*root, f)), rep};
}

std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

constexpr const char* k_boot_a = "/proc/sys/kernel/random/boot_id";

// The write-up's case: a kernel upgrade and reboot; the OFED modules were not rebuilt, so the kernel loads its
// inbox mlx5_core/ib_core, while the user space is still DOCA-OFED's.
void ofed_replaced_by_inbox(tree& t) {
  t.write("/proc/sys/kernel/osrelease", "6.1.0-28-amd64")
      .write(k_boot_a, "b2b2b2b2-0000-4000-8000-000000000002")
      .write("/proc/uptime", "600.00 1200.00")
      .write("/sys/module/mlx5_core/taint", "")
      .write("/sys/module/ib_core/taint", "")
      .write("/sys/module/mlx5_ib/taint", "")
      .write("/sys/module/mlx5_core/srcversion", "1111111111111111111111A")
      .remove("/sys/module/mlx5_core/version")
      .remove("/sys/kernel/mm/memory_peers");
}

TEST(History, KernelUpgradeReplacesOfedModulesWithInbox) {
  tree before("matrix_aligned");
  before.write(k_boot_a, "a1a1a1a1-0000-4000-8000-000000000001").write("/proc/uptime", "86400.00 1.00");
  tree after("matrix_aligned");
  ofed_replaced_by_inbox(after);
  auto b = judge(before, 1764400000);
  auto a = judge(after, 1764500000);
  EXPECT_EQ(b.fp.items.at("mlx5_core"), "24.10-1.1.4 (OFED)");
  EXPECT_EQ(a.fp.items.at("mlx5_core"), "6.1.0-28-amd64 (inbox)");
  EXPECT_EQ(a.fp.items.at("rdma-core"), "2410mlnx54 (OFED)");
  EXPECT_EQ(a.fp.boot_id, "b2b2b2b2-0000-4000-8000-000000000002");
  ASSERT_TRUE(a.fp.boot_time.has_value());
  EXPECT_EQ(*a.fp.boot_time, 1764500000 - 600);

  stack_history h;
  h.node = "node017";
  EXPECT_FALSE(record_run(h, b.fp, b.rep, 1764400000).has_value()) << "a first run has nothing to compare";
  auto c = record_run(h, a.fp, a.rep, 1764500000);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->new_boot);
  std::vector<std::string> lines;
  for (const auto& i : c->items) lines.push_back(change_line(*c, i));
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "mrcheck: changed: mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since boot at "
                      "2025-11-30T10:43Z"),
            lines.end())
      << testing::PrintToString(lines);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "mrcheck: changed: kernel 6.1.0-18-amd64 -> 6.1.0-28-amd64 since boot at 2025-11-30T10:43Z"),
            lines.end());
  // One line per module: its srcversion changed too but is not a line of its own.
  for (const auto& l : lines) EXPECT_EQ(l.find("mlx5_core srcversion"), std::string::npos) << l;

  // rdma_stack fails now; its drain reason names the change.
  const check_result* rs = a.rep.find("rdma_stack");
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->result, verdict::fail);
  desired_action want = plan_action(a.rep, fail_policy::warn);
  const stack_change_item* item = nullptr;
  const stack_change* named = change_for_check(h, "rdma_stack", &item);
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(item->key, "mlx5_core");
  check_result r = *rs;
  r.summary = change_words(*named, *item) + ": " + r.summary;
  std::string reason = drain_reason(r);
  EXPECT_TRUE(
      reason.starts_with("mrcheck: rdma_stack (node): mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since "
                         "reboot 2025-11-30T10:43Z: inbox mlx5_core"))
      << reason;
  EXPECT_LE(reason.size(), k_max_reason);
  EXPECT_EQ(want.what, desired_action::kind::drain);
  // No change touched hca_fw.
  EXPECT_EQ(change_for_check(h, "hca_fw"), nullptr);
}

// A host moved to the distro stack (inbox modules, rdma-core 44.0, no ofed_info): the host passes rdma_stack, and
// the change lines say what a container image with its own old libibverbs now runs on (the plugin's container check
// judges the image itself, docs/containers.md).
TEST(History, HostUpgradedUnderAContainerImage) {
  tree before("matrix_aligned");
  tree after("matrix_aligned");
  ofed_replaced_by_inbox(after);
  after.remove("/usr/bin/ofed_info")
      .remove("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.2410mlnx54")
      .write("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", "");
  auto lib = nlohmann::json::parse(slurp(after.dir() + "/.mrcheck/libraries.json"));
  lib["libibverbs"]["path"] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";
  lib["libibverbs"]["version"] = "1.14.44.0";
  after.write("/.mrcheck/libraries.json", lib.dump());
  auto b = judge(before);
  auto a = judge(after);
  EXPECT_EQ(a.fp.items.at("rdma-core"), "44.0 (distro)");
  EXPECT_EQ(a.rep.find("rdma_stack")->result, verdict::pass) << a.rep.find("rdma_stack")->summary;
  auto items = diff_fingerprints(b.fp, a.fp);
  std::set<std::string> keys;
  for (const auto& i : items) keys.insert(i.key);
  EXPECT_TRUE(keys.contains("rdma-core"));
  EXPECT_TRUE(keys.contains("ofed_info"));
  EXPECT_TRUE(keys.contains("mlx5_core"));
  EXPECT_TRUE(keys.contains("kernel"));
}

TEST(History, FirmwareUpdate) {
  tree before("matrix_aligned");
  tree after("matrix_aligned");
  after.write("/sys/class/infiniband/mlx5_0/fw_ver", "28.33.0800");
  auto b = judge(before);
  auto a = judge(after);
  auto items = diff_fingerprints(b.fp, a.fp);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].key, "mlx5_0.fw");
  stack_history h;
  h.node = "n";
  record_run(h, b.fp, b.rep, 1764400000);
  auto c = record_run(h, a.fp, a.rep, 1764400060);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->new_boot);
  EXPECT_EQ(change_line(*c, c->items[0]),
            "mrcheck: changed: mlx5_0 fw 28.39.1002 -> 28.33.0800 first seen at 2025-11-29T07:07Z");
  const stack_change_item* item = nullptr;
  ASSERT_NE(change_for_check(h, "hca_fw", &item), nullptr);
  EXPECT_EQ(item->key, "mlx5_0.fw");
  EXPECT_EQ(change_for_check(h, "rdma_stack"), nullptr);
}

// A driver reinstall of the same version (a DKMS rebuild): only its srcversion moves, and that is a line.
TEST(History, DriverReinstall) {
  tree before("matrix_aligned");
  before.write("/sys/module/nvidia/srcversion", "AAAAAAAAAAAAAAAAAAAAAAA");
  tree after("matrix_aligned");
  after.write("/sys/module/nvidia/srcversion", "BBBBBBBBBBBBBBBBBBBBBBB");
  auto items = diff_fingerprints(judge(before).fp, judge(after).fp);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].key, "nvidia.srcversion");
  EXPECT_EQ(items[0].before, "AAAAAAAAAAAAAAAAAAAAAAA");
  auto checks = checks_for_key(items[0].key);
  EXPECT_NE(std::find(checks.begin(), checks.end(), "gpu_driver"), checks.end());
}

// Where a module came from (docs/facts/kernel-and-drivers.md §8): the NVIDIA modules of
// nvidia-dkms under updates/dkms, DOCA-OFED's mlx5_core built by mlnx-ofed-kernel-dkms and found through dkms'
// tree (a DEST_MODULE_LOCATION of its own), and an in-tree module that a file under updates/dkms does not make a
// DKMS one.
TEST(History, DkmsOrigin) {
  tree plain("matrix_aligned");
  auto p = judge(plain);
  EXPECT_EQ(p.fp.items.at("nvidia"), "580.82.09 (out-of-tree)");
  EXPECT_EQ(p.fp.items.at("mlx5_core"), "24.10-1.1.4 (OFED)");

  tree t("matrix_aligned");
  t.write("/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko.zst", "")
      .write("/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia-peermem.ko", "")
      .write("/var/lib/dkms/mlnx-ofed-kernel/24.10/6.1.0-18-amd64/x86_64/module/mlx5_core.ko.xz", "")
      // Built for another kernel only: not this one's.
      .write("/var/lib/dkms/mlnx-ofed-kernel/24.10/6.1.0-17-amd64/x86_64/module/ib_core.ko", "")
      .write("/lib/modules/6.1.0-18-amd64/updates/dkms/mlx5_ib.ko", "")
      .write("/sys/module/mlx5_ib/taint", "");
  fs::create_symlink("24.10/6.1.0-18-amd64/x86_64",
                     fs::path(t.dir()) / "var/lib/dkms/mlnx-ofed-kernel/kernel-6.1.0-18-amd64-x86_64");
  fs::create_symlink("24.10/6.1.0-17-amd64/x86_64",
                     fs::path(t.dir()) / "var/lib/dkms/mlnx-ofed-kernel/kernel-6.1.0-17-amd64-x86_64");
  // "kernel-6.1.0-18-amd64-" also starts this entry, of another kernel: its target says so.
  t.write("/var/lib/dkms/mlnx-ofed-kernel/24.10/6.1.0-18-amd64-rt/x86_64/module/ib_core.ko", "");
  fs::create_symlink("24.10/6.1.0-18-amd64-rt/x86_64",
                     fs::path(t.dir()) / "var/lib/dkms/mlnx-ofed-kernel/kernel-6.1.0-18-amd64-rt-x86_64");
  auto root = sysroot::open(t.dir());
  ASSERT_TRUE(root.is_ok());
  collect_options o;
  o.load_libraries = false;
  node_facts f = collect_facts(*root, o);
  EXPECT_EQ(read_dkms_modules(*root, f), (std::set<std::string>{"mlx5_core", "nvidia", "nvidia_peermem"}));
  auto d = judge(t);
  EXPECT_EQ(d.fp.items.at("nvidia"), "580.82.09 (DKMS)");
  EXPECT_EQ(d.fp.items.at("nvidia_peermem"), "580.82.09 (DKMS)");
  EXPECT_EQ(d.fp.items.at("mlx5_core"), "24.10-1.1.4 (OFED DKMS)");
  EXPECT_EQ(d.fp.items.at("ib_core"), "6.1.0-18-amd64 (OFED)");
  EXPECT_EQ(d.fp.items.at("mlx5_ib"), "6.1.0-18-amd64 (inbox)") << "an in-tree module is inbox wherever a file is";
  // A switch from the kmod packages to DKMS builds is a change of its own line.
  auto items = diff_fingerprints(p.fp, d.fp);
  std::set<std::string> keys;
  for (const auto& i : items) keys.insert(i.key);
  EXPECT_TRUE(keys.contains("mlx5_core") && keys.contains("nvidia")) << fmt::format("{}", fmt::join(keys, ","));
}

TEST(History, SameStackIsNoChangeAndHistoryIsBounded) {
  stack_history h;
  h.node = "n";
  stack_fingerprint fp;
  fp.items["kernel"] = "k0";
  report r;
  record_run(h, fp, r, 1);
  EXPECT_FALSE(record_run(h, fp, r, 2).has_value());
  for (int i = 1; i <= 70; ++i) {
    fp.items["kernel"] = "k" + std::to_string(i);
    ASSERT_TRUE(record_run(h, fp, r, 10 + i).has_value());
  }
  ASSERT_EQ(h.changes.size(), k_history_max_changes);
  EXPECT_EQ(h.changes.front().items[0].after, "k7");
  EXPECT_EQ(h.changes.back().items[0].after, "k70");
  // Round trip through the file's text.
  auto back = parse_history(history_to_text(h), "n");
  ASSERT_TRUE(back.is_ok()) << back.error().message();
  EXPECT_EQ(back->changes.size(), k_history_max_changes);
  EXPECT_EQ(back->current, h.current);
}

TEST(History, BadFilesAreErrorsNeverGuesses) {
  EXPECT_FALSE(parse_history("{not json", "n").is_ok());
  EXPECT_FALSE(parse_history("[]", "n").is_ok());
  EXPECT_FALSE(parse_history(R"({"format":"something else","version":1,"node":"n","current":{}})", "n").is_ok());
  auto future = parse_history(R"({"format":"mrcheck-stack-history","version":99,"node":"n","current":{}})", "n");
  ASSERT_FALSE(future.is_ok());
  EXPECT_NE(future.error().message().find("newer"), std::string::npos);
  auto foreign = parse_history(R"({"format":"mrcheck-stack-history","version":1,"node":"other","current":{}})", "n");
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_NE(foreign.error().message().find("other"), std::string::npos);
  EXPECT_TRUE(parse_history(R"({"format":"mrcheck-stack-history","version":1,"node":"n","current":{}})", "n").is_ok());
}

TEST(History, StoreIsAtomicPrivateAndRefusesSymlinks) {
  char tmpl[] = "/tmp/mrcheck-history-store-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  stack_history h;
  h.node = "n1";
  h.has_current = true;
  h.current.items["kernel"] = "6.1";
  ASSERT_TRUE(save_history(dir, h).is_ok());
  struct stat sb {};
  ASSERT_EQ(::stat((dir + "/history-n1.json").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  auto l = load_history(dir, "n1", ::geteuid());
  ASSERT_TRUE(l.history.has_value()) << l.error;
  EXPECT_EQ(l.history->current.items.at("kernel"), "6.1");
  // None yet: no error.
  auto none = load_history(dir, "n2", ::geteuid());
  EXPECT_FALSE(none.history.has_value());
  EXPECT_TRUE(none.error.empty());
  // A symlink planted under the name is neither followed for reading nor written through.
  std::ofstream(dir + "/target") << "secret";
  ASSERT_EQ(::symlink((dir + "/target").c_str(), (dir + "/history-n3.json").c_str()), 0);
  auto sym = load_history(dir, "n3", ::geteuid());
  EXPECT_FALSE(sym.history.has_value());
  EXPECT_TRUE(sym.restarted);
  h.node = "n3";
  ASSERT_TRUE(save_history(dir, h).is_ok());  // rename replaces the link itself
  EXPECT_EQ(slurp(dir + "/target"), "secret");
  // A corrupt file: one line, restarted.
  std::ofstream(dir + "/history-n4.json") << "garbage";
  ::chmod((dir + "/history-n4.json").c_str(), 0600);
  auto bad = load_history(dir, "n4", ::geteuid());
  EXPECT_TRUE(bad.restarted);
  EXPECT_NE(bad.error.find("history restarted"), std::string::npos) << bad.error;
  // A missing directory: an error, nothing written.
  EXPECT_FALSE(save_history(dir + "/missing", h).is_ok());
  fs::remove_all(dir);
}

// report_dir files take the stack from the history (load_last_stack): only of this boot, only a usable file.
TEST(History, LastStackIsOfThisBootOnly) {
  char tmpl[] = "/tmp/mrcheck-history-last-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  stack_history h;
  h.node = "n1";
  h.has_current = true;
  h.current.items["kernel"] = "6.1";
  h.current.boot_id = "boot-a";
  ASSERT_TRUE(save_history(dir, h).is_ok());
  auto same = load_last_stack(dir, "n1", ::geteuid(), "boot-a");
  ASSERT_TRUE(same.stack.has_value()) << same.error;
  EXPECT_EQ(same.stack->items.at("kernel"), "6.1");
  EXPECT_TRUE(load_last_stack(dir, "n1", ::geteuid(), "").stack.has_value()) << "no boot id to compare: taken";
  auto rebooted = load_last_stack(dir, "n1", ::geteuid(), "boot-b");
  EXPECT_FALSE(rebooted.stack.has_value()) << "a stack of an earlier boot is not this boot's";
  EXPECT_TRUE(rebooted.error.empty());
  auto none = load_last_stack(dir, "n2", ::geteuid(), "boot-a");
  EXPECT_FALSE(none.stack.has_value());
  EXPECT_TRUE(none.error.empty());
  std::ofstream(dir + "/history-n4.json") << "garbage";
  ::chmod((dir + "/history-n4.json").c_str(), 0600);
  auto bad = load_last_stack(dir, "n4", ::geteuid(), "boot-a");
  EXPECT_FALSE(bad.stack.has_value());
  EXPECT_FALSE(bad.error.empty());
  // Another owner's file (as the collector runs as root: a user's planted file) is not taken.
  auto foreign = load_last_stack(dir, "n1", ::geteuid() + 1, "boot-a");
  EXPECT_FALSE(foreign.stack.has_value());
  fs::remove_all(dir);
}

TEST(History, Hostlist) {
  EXPECT_EQ(hostlist({"node033", "node017", "node018", "node019"}), "node[017-019,033]");
  EXPECT_EQ(hostlist({"node017"}), "node017");
  EXPECT_EQ(hostlist({"gpu1", "gpu2", "login", "node01"}), "gpu[1-2],login,node01");
  EXPECT_EQ(hostlist({"a9", "a10"}), "a10,a9");  // different widths are different groups (a9 vs a10)
}

TEST(History, PrometheusLinesEscapeLabels) {
  stack_fingerprint fp;
  fp.items["kernel"] = "6.1\"x\\y\nz";
  fp.items["mlx5_0.fw"] = "28.39.1002";
  fp.items["mlx5_0.psid"] = "MT_1";
  stack_history h;
  h.changes.push_back({1764400000, "", std::nullopt, false, {}});
  std::string s = prometheus_stack_lines(fp, &h);
  EXPECT_NE(s.find("mrcheck_stack_changed_timestamp_seconds 1764400000\n"), std::string::npos) << s;
  EXPECT_NE(s.find("mrcheck_stack_info{kernel=\"6.1\\\"x\\\\y\\nz\",mlx5_0_fw=\"28.39.1002\"} 1\n"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace mrcheck

namespace mrcheck {
namespace {

TEST(Fleet, MajorityOutliersAndTheRuleThatFails) {
  std::vector<fleet_node> nodes;
  for (int i = 1; i <= 64; ++i) {
    fleet_node n;
    n.name = fmt::format("node{:03}", i);
    bool out = i == 17 || i == 33 || i == 34;
    n.fp.items["mlx5_core"] = out ? "6.1.0-28-amd64 (inbox)" : "24.10-1.1.4 (OFED)";
    n.fp.items["kernel"] = "6.1.0-28-amd64";
    if (out) n.failing["rdma_stack"] = "inbox mlx5_core under OFED user space";
    if (i == 5) n.failing["hca_fw"] = "old";  // fails, but not because of a fact that differs
    nodes.push_back(n);
  }
  fleet_result r = compare_fleet(nodes);
  EXPECT_EQ(r.nodes, 64u);
  EXPECT_EQ(r.same, 1u);
  ASSERT_EQ(r.differ.size(), 1u);
  EXPECT_TRUE(r.outlier_fails);
  EXPECT_EQ(r.differ[0].majority_nodes, 61u);
  EXPECT_EQ(fleet_text(r),
            "mrcheck fleet: 64 nodes; 1 facts the same on every node, 1 differ; an outlier fails a check\n"
            "mlx5_core: 61 nodes run 24.10-1.1.4 (OFED)\n"
            "  node[017,033-034]: mlx5_core 6.1.0-28-amd64 (inbox) while 61 nodes run 24.10-1.1.4 (OFED): "
            "rdma_stack fails: inbox mlx5_core under OFED user space\n");
  // An outlier that passes its rules is listed but does not fail the fleet.
  for (auto& n : nodes) n.failing.erase("rdma_stack");
  EXPECT_FALSE(compare_fleet(nodes).outlier_fails);
}

TEST(Fleet, ReportParsingFastPathAgreesWithTheFullParse) {
  nlohmann::json j = {{"checks", {{{"id", "rdma_stack"}, {"verdict", "fail"}, {"summary", "x \"stack\": y"}}}},
                      {"facts", {{"note", "\"stack\": {\"items\": {}}"}, {"deep", {{"a", {1, 2, {{"b", "}]"}}}}}}}},
                      {"stack", {{"items", {{"kernel", "6.1"}}}, {"host", "n7"}}},
                      {"verdict", "fail"}};
  auto fast = fleet_node_from_json(j.dump(2), "fallback");  // mrcheck's own layout
  ASSERT_TRUE(fast.is_ok()) << fast.error().message();
  EXPECT_EQ(fast->name, "n7");
  EXPECT_EQ(fast->fp.items.at("kernel"), "6.1");
  EXPECT_EQ(fast->failing.at("rdma_stack"), "x \"stack\": y");
  // The same report with "stack" first and compact: the same node.
  std::string reordered =
      R"({"stack":{"items":{"kernel":"6.1"},"host":"n7"},"checks":[{"id":"rdma_stack","verdict":"fail","summary":"x"}]})";
  auto other = fleet_node_from_json(reordered, "fallback");
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(other->fp, fast->fp);
  // The search from the end skips a key's name inside a later string value (escaped there) and finds the real one.
  nlohmann::json named = {{"checks", nlohmann::json::array()},
                          {"node", "n9"},
                          {"stack", {{"items", {{"kernel", "6.1"}}}}},
                          {"verdict", "pass"},
                          {"zz", "\"node\": \"evil\", \"stack\": {}"}};
  for (int indent : {-1, 2}) {
    auto n = fleet_node_from_json(named.dump(indent), "fallback");
    ASSERT_TRUE(n.is_ok()) << n.error().message();
    EXPECT_EQ(n->name, "n9");
    EXPECT_EQ(n->fp.items.at("kernel"), "6.1");
  }
  EXPECT_FALSE(fleet_node_from_json("{\"checks\": []}", "f").is_ok());
  EXPECT_FALSE(fleet_node_from_json("{\"stack\": [1, 2", "f").is_ok());
}

}  // namespace
}  // namespace mrcheck

namespace mrcheck {
namespace {

// A drain reason has 200 bytes: a list that changed is named by what left and came, so the cause still fits
// (the guests' slurm_prolog_drain_test: librxe removed, the reason was the two provider lists, cut).
TEST(history_reason, a_long_list_change_is_named_by_its_difference) {
  stack_change c;
  c.time = 1764500000;
  stack_change_item i{"verbs_providers",
                      "bnxt_re,cxgb4,efa,erdma,hfi1verbs,hns,ipathverbs,irdma,mana,mlx4,mlx5,mthca,ocrdma,qedr,rxe,siw",
                      "bnxt_re,cxgb4,efa,erdma,hfi1verbs,hns,ipathverbs,irdma,mana,mlx4,mlx5,mthca,ocrdma,qedr,siw"};
  EXPECT_EQ(change_words_short(c, i), "verbs_providers -rxe since 2025-11-30T10:53Z");
  stack_change_item k{"kernel", "6.1.0-50-amd64", "6.12.95+deb12-amd64"};
  EXPECT_EQ(change_words_short(c, k), change_words(c, k)) << "short enough as it is";
  stack_change_item swapped{"verbs_providers", std::string(120, 'a'), std::string(120, 'b')};
  EXPECT_EQ(change_words_short(c, swapped), "verbs_providers changed since 2025-11-30T10:53Z");
  check_result r;
  r.id = "rdma_stack";
  r.result = verdict::fail;
  r.summary = change_words_short(c, i) + ": rxe0 (rxe) has no rdma-core provider librxe in user space";
  EXPECT_NE(drain_reason(r).find("has no rdma-core provider librxe in user space"), std::string::npos)
      << drain_reason(r);
}

}  // namespace
}  // namespace mrcheck
