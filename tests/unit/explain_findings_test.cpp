// From scanner groups to findings: evidence from a --root tree, host matching, text order and the JSON schema.
#include <mrcheck/diagnosis.h>
#include <mrcheck/explain.h>
#include <mrcheck/facts.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

nccl_log_scanner scan_lines(std::initializer_list<const char*> lines) {
  nccl_log_scanner s;
  for (const char* l : lines) s.feed_line(l);
  return s;
}

TEST(explain_findings, format_ranks_compresses_runs) {
  EXPECT_EQ(format_ranks({}), "");
  EXPECT_EQ(format_ranks({3}), "3");
  EXPECT_EQ(format_ranks({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
}

TEST(explain_findings, evidence_applies_only_to_the_hosts_in_the_log) {
  nccl_log_scanner s = scan_lines({
      "gpu01.cluster:10:11 [0] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
      "gpu02:20:21 [0] NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
  });
  node_evidence e;
  e.memlock_soft = k_unlimited;  // this node: unlimited, so ENOMEM here would be pinning resources
  e.memlock_source = "this shell on gpu01";
  e.has_dmabuf_mr = false;
  evidence_origin origin;
  origin.hostname = "gpu01";
  std::vector<finding> f = explain_groups(s, e, origin);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[0].evidence_applies);  // gpu01.cluster is gpu01
  EXPECT_EQ(f[0].diag.what, cause::pinning_resources);
  EXPECT_TRUE(f[0].diag.confirmed);
  EXPECT_FALSE(f[1].evidence_applies);  // gpu02's dmabuf failure: this node's rdma-core says nothing about it
  EXPECT_EQ(f[1].diag.what, cause::dmabuf_unsupported);
  EXPECT_FALSE(f[1].diag.confirmed);
  EXPECT_NE(f[1].diag.evidence.back().find("node facts not used: the failures are from gpu02, this is gpu01"),
            std::string::npos);

  // Run elsewhere (a login node, a laptop as root): nothing of this machine is used, nothing is confirmed. Its
  // CAP_IPC_LOCK would have turned the memlock failure into pinning_resources.
  e.memlock_soft = k_unlimited;
  e.cap_ipc_lock = true;
  origin.hostname = "laptop";
  f = explain_groups(s, e, origin);
  EXPECT_FALSE(f[0].evidence_applies);
  EXPECT_EQ(f[0].diag.what, cause::memlock);
  EXPECT_FALSE(f[0].diag.confirmed);
  for (const auto& line : f[0].diag.evidence) EXPECT_EQ(line.find("CAP_IPC_LOCK"), std::string::npos) << line;

  // A log that names no host is not this node's either.
  nccl_log_scanner anon = scan_lines(
      {"misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
       "Cannot allocate memory"});
  origin.hostname = "gpu01";
  f = explain_groups(anon, e, origin);
  EXPECT_FALSE(f[0].evidence_applies);
  EXPECT_FALSE(f[0].diag.confirmed);
  EXPECT_NE(f[0].diag.evidence.back().find("the log does not name the failing host"), std::string::npos);
  EXPECT_NE(f[0].diag.evidence.back().find("--root"), std::string::npos);

  // A --root tree is the node the user chose: its evidence applies whatever the log's host names.
  origin.from_root = true;
  f = explain_groups(s, e, origin);
  EXPECT_TRUE(f[1].evidence_applies);
  EXPECT_TRUE(f[1].diag.confirmed);
}

TEST(explain_findings, a_fatal_error_is_explained_by_the_warning_before_it) {
  nccl_log_scanner s = scan_lines({
      "n:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1234> failed : Connection "
      "refused",
      "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
  });
  std::vector<finding> f = explain_groups(s, node_evidence{}, evidence_origin{});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].diag.what, cause::unknown);
  EXPECT_NE(f[0].diag.evidence.front().find("connect failed with ECONNREFUSED"), std::string::npos);
  EXPECT_NE(f[0].diag.evidence.back().find("NCCL failed after: socketStartConnect"), std::string::npos);
  EXPECT_NE(f[0].diag.fix.find("peer's log"), std::string::npos);
}

TEST(explain_findings, the_header_counts_one_line_as_one_line) {
  nccl_log_scanner s = scan_lines(
      {"a:1:1 [0] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"});
  std::string text = findings_to_text(explain_groups(s, node_evidence{}, evidence_origin{}), "job.log", s);
  EXPECT_TRUE(text.starts_with("mrcheck: explain: job.log: 1 NCCL failure in 1 line\n")) << text;
}

TEST(explain_findings, text_orders_cause_why_evidence_fix_fallback) {
  nccl_log_scanner s = scan_lines({
      "0: a:1:1 [0] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
      "1: a:2:2 [1] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
  });
  node_evidence e;
  e.memlock_soft = 64 * 1024;
  evidence_origin origin;
  origin.from_root = true;
  std::string text = findings_to_text(explain_groups(s, e, origin), "job.log", s);
  EXPECT_TRUE(text.starts_with("mrcheck: explain: job.log: 1 NCCL failure in 2 lines\n")) << text;
  std::size_t head = text.find("1. memlock - ibv_reg_mr_iova2 failed: ENOMEM (Cannot allocate memory)");
  std::size_t seen = text.find("seen:     2 times, ranks 0-1, host a; lines 1,2");
  std::size_t why = text.find("why:");
  std::size_t ev = text.find("evidence: ibv_reg_mr_iova2 failed with ENOMEM 12");
  std::size_t limits = text.find("RLIMIT_MEMLOCK of the task: soft 64 KiB");
  std::size_t fix = text.find("fix:      set PropagateResourceLimitsExcept=MEMLOCK");
  std::size_t fallback = text.find("fallback: last resort: NCCL_IB_DISABLE=1");
  for (std::size_t p : {head, seen, why, ev, limits, fix, fallback}) ASSERT_NE(p, std::string::npos) << text;
  EXPECT_LT(head, seen);
  EXPECT_LT(why, ev);
  EXPECT_LT(ev, limits);  // errno first, then the limits
  EXPECT_LT(limits, fix);
  EXPECT_LT(fix, fallback);  // the TCP fallback last
}

TEST(explain_findings, json_schema_is_stable) {
  nccl_log_scanner s = scan_lines({
      "[rank2]: h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address",
      "h:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, opcode 0, len 0, vendor err "
      "129",
      "h:1:2 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[0] [send] via NET/IB/0/GDRDMA",  // the buffers are GPU memory
  });
  evidence_origin origin;
  origin.hostname = "h";
  nlohmann::json j = findings_to_json(explain_groups(s, node_evidence{}, origin), "-", s, origin);
  EXPECT_EQ(j.at("source"), "-");
  EXPECT_EQ(j.at("lines_read"), 3);
  EXPECT_EQ(j.at("evidence_from").at("host"), "h");
  EXPECT_EQ(j.at("evidence_from").at("root"), false);
  const auto& f = j.at("findings");
  ASSERT_EQ(f.size(), 2u);
  for (const char* key : {"cause",     "confirmed",    "kind",    "call",    "errno",           "errno_name",
                          "wc_status", "count",        "lines",   "ranks",   "ranks_truncated", "hosts",
                          "processes", "consequences", "example", "summary", "evidence",        "evidence_applies",
                          "fix",       "fallback"}) {
    EXPECT_TRUE(f[0].contains(key)) << key;
    EXPECT_TRUE(f[1].contains(key)) << key;
  }
  EXPECT_EQ(f[0].at("cause"), "gpu_peer_memory");
  EXPECT_EQ(f[0].at("call"), "ibv_reg_mr");
  EXPECT_EQ(f[0].at("errno"), EFAULT);
  EXPECT_EQ(f[0].at("errno_name"), "EFAULT");
  EXPECT_TRUE(f[0].at("wc_status").is_null());
  EXPECT_EQ(f[0].at("ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(f[0].at("lines"), nlohmann::json::array({1}));
  EXPECT_EQ(f[1].at("kind"), "completion_error");
  EXPECT_TRUE(f[1].at("call").is_null());
  EXPECT_TRUE(f[1].at("errno").is_null());
  EXPECT_EQ(f[1].at("wc_status"), 12);
  EXPECT_EQ(f[1].at("cause"), "unknown");
}

class explain_root : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("mrcheck-explain-root-{}", ::getpid());
    fs::remove_all(dir_);
    put("proc/sys/kernel/hostname", "node7\n");
    put("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    fs::create_directory_symlink("4242", dir_ / "proc/self");
    put("proc/4242/stat", "4242 (python) S 0 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n");
    put("proc/4242/status", "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
    put("proc/4242/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max locked memory         65536                8388608              bytes     \n");
    put("proc/sys/vm/max_map_count", "65530\n");
    put("sys/module/mlx5_core/version", "24.10-1.1.4\n");
    put("sys/module/mlx5_core/taint", "O\n");
    put("var/lib/dpkg/status", "Package: libibverbs1\nStatus: install ok installed\nVersion: 44.0-2\n\n");
    put(".dockerenv", "");
    // The second sign a container marker needs (container_evidence, diagnosis.h): an overlay as "/".
    put("proc/4242/mountinfo", "21 1 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/l\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

TEST_F(explain_root, evidence_comes_from_the_tree) {
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok()) << root.error().message();
  evidence_origin origin;
  node_evidence e = explain_evidence(*root, origin);
  EXPECT_EQ(origin.hostname, "node7");
  EXPECT_TRUE(origin.from_root);
  EXPECT_EQ(e.memlock_soft, 65536u);
  EXPECT_EQ(e.memlock_hard, 8u << 20);
  EXPECT_NE(e.memlock_source.find("pid 4242 (python)"), std::string::npos);
  EXPECT_EQ(e.cap_ipc_lock, false);
  EXPECT_EQ(e.max_map_count, 65530u);
  EXPECT_EQ(e.kernel_stack, rdma_flavour::ofed);
  EXPECT_EQ(e.user_stack, rdma_flavour::inbox);  // from dpkg: Debian's rdma-core under an OFED kernel
  EXPECT_EQ(e.in_container, true);

  // And the diagnosis that follows from it.
  failure f;
  f.call = "ibv_reg_mr_iova2";
  f.err = EINVAL;
  EXPECT_EQ(diagnose(f, e).what, cause::rdma_stack_mismatch);
  f.err = ENOMEM;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_NE(d.fix.find("--ulimit memlock=-1:-1"), std::string::npos);  // a container
}

// This process as the tree shows it: what `mrcheck probe` gives the ranks it starts.
TEST_F(explain_root, own_process_comes_from_the_tree) {
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok()) << root.error().message();
  own_process_facts own = read_own_process(*root);
  EXPECT_EQ(own.pid, 4242);
  ASSERT_TRUE(own.memlock.has_value());
  EXPECT_EQ(own.memlock->soft, 65536u);
  EXPECT_EQ(own.euid, 1000u);
  EXPECT_EQ(own.cap_ipc_lock, false);
  evidence_inputs in;
  in.own = &own;
  node_evidence e = build_evidence(in);
  EXPECT_EQ(e.memlock_hard, 8u << 20);
  EXPECT_EQ(e.is_root, false);
}

// An image made into a VM keeps its /.dockerenv: alone it is no container, for explain and the probe alike.
TEST_F(explain_root, a_marker_alone_is_no_container) {
  fs::remove(dir_ / "proc/4242/mountinfo");
  put("proc/1/cgroup", "0::/init.scope\n");
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok()) << root.error().message();
  node_evidence e;
  container_evidence(*root, {}, e);
  EXPECT_FALSE(e.in_container);
  EXPECT_EQ(e.container_why, "/.dockerenv exists, but / is unknown and PID 1's cgroup names no container engine");
  put("proc/4242/mountinfo", "21 1 0:50 / / rw - overlay overlay rw\n");
  node_evidence with_overlay;
  container_evidence(*root, {}, with_overlay);
  EXPECT_TRUE(with_overlay.in_container);
  EXPECT_EQ(with_overlay.runtime, container_runtime::docker);
  EXPECT_EQ(with_overlay.container_why, "/.dockerenv and / is overlay");
}

// A runtime's own sign counts alone; PID 1's cgroup naming an engine too.
TEST_F(explain_root, a_runtimes_sign_or_an_engines_cgroup_is_a_container) {
  fs::remove(dir_ / ".dockerenv");
  fs::remove(dir_ / "proc/4242/mountinfo");
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok()) << root.error().message();
  node_evidence none;
  container_evidence(*root, {"HOME=/root"}, none);
  EXPECT_FALSE(none.in_container);
  EXPECT_EQ(none.container_why, "");
  node_evidence apptainer;
  container_evidence(*root, {"APPTAINER_NAME=train.sif"}, apptainer);
  EXPECT_TRUE(apptainer.in_container);
  EXPECT_EQ(apptainer.runtime, container_runtime::apptainer);
  put("proc/1/cgroup", "0::/kubepods/besteffort/pod1/abc\n");
  node_evidence k8s;
  container_evidence(*root, {}, k8s);
  EXPECT_TRUE(k8s.in_container);
  EXPECT_EQ(k8s.runtime, container_runtime::kubernetes);
  EXPECT_EQ(k8s.container_why, "PID 1's cgroup names kubepods");
}

}  // namespace
}  // namespace mrcheck
