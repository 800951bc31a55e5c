// MNNVL readiness (include/mrcheck/fabric.h): NVML's fabric answer through a fake libnvidia-ml.so.1
// (tests/fakes/fake_nvml.c) in a child, an NVML that is missing, old, failing, crashing or hanging, the IMEX facts
// of fixture trees, and the mnnvl check's verdicts: skip without a fabric, fail (owner node) on an incomplete
// fabric or a stopped IMEX daemon, and the prolog's drain reason for it.
#include <mrcheck/check_registry.h>
#include <mrcheck/checks.h>
#include <mrcheck/fabric.h>
#include <mrcheck/matrix.h>
#include <mrcheck/owner.h>

#include "judge.h"
#include "prolog/node_action.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

namespace mrcheck {
namespace {

using namespace std::chrono_literals;

constexpr const char* k_uuid = "4f3c9e2a71d84b0e9a6c2b5d8e1f0a37";

class FakeNvml : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("MRCHECK_FAKE_NVML_GPUS");
    ::unsetenv("MRCHECK_FAKE_NVML_FAIL");
  }
  static void gpus(const std::string& v) { ::setenv("MRCHECK_FAKE_NVML_GPUS", v.c_str(), 1); }
  static void fail(const char* v) { ::setenv("MRCHECK_FAKE_NVML_FAIL", v, 1); }
};

TEST_F(FakeNvml, ReadsEveryGpusFabricInAChild) {
  gpus(std::string("3:0:0x7ffe:") + k_uuid + ":0xaa,3:0:0x7ffe:" + k_uuid + ":0xa9,ns");
  fabric_facts f = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML);
  ASSERT_TRUE(f.gpus) << f.gpus.error().message();
  ASSERT_EQ(f.gpus->size(), 3u);
  const auto& g = (*f.gpus)[0];
  EXPECT_EQ(g.state, fabric_state::completed);
  EXPECT_EQ(g.clique_id, 0x7ffeu);
  EXPECT_EQ(g.uuid_string(), "4f3c9e2a-71d8-4b0e-9a6c-2b5d8e1f0a37");
  EXPECT_EQ(g.health_mask, 0xaau);
  EXPECT_FALSE(g.degraded_bandwidth());
  EXPECT_TRUE((*f.gpus)[1].degraded_bandwidth());
  EXPECT_EQ((*f.gpus)[2].query_error, 3);  // NVML_ERROR_NOT_SUPPORTED: no fabric on that GPU
  EXPECT_NE(f.library.find("nvml"), std::string::npos) << f.library;
}

TEST_F(FakeNvml, AnH100LikeNodeHasNoFabricAndSkips) {
  gpus("ns,ns,ns,ns,ns,ns,ns,ns");
  mnnvl_facts m;
  m.nvidia_loaded = true;
  m.fabric = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML);
  auto r = check_mnnvl(m);
  EXPECT_EQ(r.result, verdict::skip);
  EXPECT_EQ(r.summary, "no GPU reports a multi-node NVLink fabric (8 asked): MNNVL not used, nothing to check");
  // Fabric state 0 (NOT_SUPPORTED) answered without an error reads the same.
  gpus("0,0");
  m.fabric = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML);
  EXPECT_EQ(check_mnnvl(m).result, verdict::skip);
}

// An NVML that cannot answer: one line, the check's own error (never a drain), nothing else changed.
TEST_F(FakeNvml, BrokenNvmlGivesOneClearLine) {
  gpus(std::string("3:0:1:") + k_uuid);
  struct bad {
    const char* fail;
    const char* expect;
  };
  for (const auto& b :
       {bad{"init", "nvmlInit_v2: Unknown Error (999)"}, bad{"count", "nvmlDeviceGetCount_v2: Unknown Error (999)"},
        bad{"crash-init", "crashed (killed by SIGSEGV)"}, bad{"hang-init", "did not answer within 300 ms"}}) {
    SCOPED_TRACE(b.fail);
    fail(b.fail);
    mnnvl_facts m;
    m.nvidia_loaded = true;
    m.fabric = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML, 300ms);
    ASSERT_FALSE(m.fabric.gpus);
    EXPECT_NE(m.fabric.gpus.error().message().find(b.expect), std::string::npos) << m.fabric.gpus.error().message();
    auto r = check_mnnvl(m);
    EXPECT_EQ(r.result, verdict::error);
    EXPECT_EQ(r.summary.find('\n'), std::string::npos);
    EXPECT_EQ(r.summary.rfind("NVML could not be asked: ", 0), 0u) << r.summary;
  }
  // A failing fabric call on one GPU is that GPU's answer, not NVML's failure.
  fail("fabric");
  auto f = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML);
  ASSERT_TRUE(f.gpus);
  EXPECT_EQ((*f.gpus)[0].query_error, 999);
}

TEST_F(FakeNvml, MissingAndOldNvml) {
  auto missing = read_gpu_fabric_isolated("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.gpus);
  EXPECT_NE(missing.gpus.error().message().find("dlopen /nonexistent/libnvidia-ml.so.1"), std::string::npos);
  // An NVML from before nvmlDeviceGetGpuFabricInfoV: no GPU can report a fabric.
  gpus("3");
  auto old = read_gpu_fabric_isolated(MRCHECK_FAKE_LIBNVML_OLD);
  ASSERT_TRUE(old.gpus) << old.gpus.error().message();
  EXPECT_TRUE(old.gpus->empty());
}

gpu_fabric completed(unsigned i) {
  gpu_fabric g;
  g.index = i;
  g.state = fabric_state::completed;
  g.clique_id = 1;
  g.cluster_uuid[0] = 0x4f;
  g.health_mask = 0xaa;
  return g;
}

mnnvl_facts ready() {
  mnnvl_facts m;
  m.nvidia_loaded = true;
  m.fabric.gpus = std::vector<gpu_fabric>{completed(0), completed(1)};
  m.imex.daemon_pid = 3100;
  m.imex.nodes_config = true;
  return m;
}

TEST(Mnnvl, Verdicts) {
  EXPECT_EQ(check_mnnvl(ready()).result, verdict::pass);
  EXPECT_EQ(check_mnnvl(ready()).owner, fix_owner::node);

  auto zero = ready();
  (*zero.fabric.gpus)[1].cluster_uuid = {};
  auto r = check_mnnvl(zero);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.summary, "GPU 1: fabric completed with a zero cluster UUID: NCCL runs without MNNVL");
  // Every GPU without a cluster UUID: an HGX board's own NVSwitch fabric, no MNNVL, no IMEX needed.
  (*zero.fabric.gpus)[0].cluster_uuid = {};
  zero.imex = {};
  r = check_mnnvl(zero);
  EXPECT_EQ(r.result, verdict::skip);
  EXPECT_EQ(r.summary, "2 GPUs in a single-node NVLink fabric (no cluster UUID): MNNVL not used");
  // ... whose fabric manager failed (azhpc-images #506: completed, Insufficient Resources, zero UUID).
  (*zero.fabric.gpus)[0].status = 23;
  r = check_mnnvl(zero);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.summary, "GPU 0: fabric registration failed (NVML status 23): NVLink between the GPUs is not ready");

  auto status = ready();
  (*status.fabric.gpus)[0].status = 14;
  EXPECT_EQ(check_mnnvl(status).summary, "GPU 0: fabric registration failed (NVML status 14): NCCL runs without MNNVL");

  auto down = ready();
  down.imex.daemon_pid.reset();
  r = check_mnnvl(down);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.hint, "start the IMEX service (systemctl start nvidia-imex), check nvidia-imex-ctl -N");
  down.imex.nodes_config = false;
  EXPECT_EQ(check_mnnvl(down).hint, "install and configure IMEX (/etc/nvidia-imex/nodes_config.cfg), then start it");

  auto degraded = ready();
  (*degraded.fabric.gpus)[0].health_mask = 0xa9;
  r = check_mnnvl(degraded);
  EXPECT_EQ(r.result, verdict::warn);
  EXPECT_EQ(r.summary, "1 of 2 GPUs report degraded NVLink fabric bandwidth");

  mnnvl_facts no_driver;
  no_driver.fabric.gpus = status::error("x");
  EXPECT_EQ(check_mnnvl(no_driver).result, verdict::skip);
  EXPECT_EQ(default_owner("mnnvl"), fix_owner::node);
}

TEST(Mnnvl, FabricJsonRoundTripAndBadInput) {
  fabric_facts f;
  f.library = "/usr/lib/libnvidia-ml.so.1";
  f.gpus = std::vector<gpu_fabric>{completed(0)};
  auto back = fabric_from_json(fabric_to_json(f));
  ASSERT_TRUE(back.gpus);
  EXPECT_EQ((*back.gpus)[0].uuid_string(), (*f.gpus)[0].uuid_string());
  EXPECT_EQ((*back.gpus)[0].state, fabric_state::completed);
  EXPECT_FALSE(fabric_from_json(nlohmann::json::array()).gpus);
  EXPECT_FALSE(fabric_from_json(nlohmann::json{{"gpus", 3}}).gpus);
  auto odd = fabric_from_json(
      nlohmann::json::parse(R"({"gpus":[{"index":-1,"state":9,"cluster_uuid":"zz","health_mask":"x"}, 7]})"));
  ASSERT_TRUE(odd.gpus);
  ASSERT_EQ(odd.gpus->size(), 1u);
  EXPECT_EQ((*odd.gpus)[0].state, fabric_state::not_supported);
  EXPECT_TRUE((*odd.gpus)[0].uuid_zero());
}

struct tree_case {
  const char* tree;
  verdict v;
  const char* reason;  // the prolog's drain reason, "" when it does not drain
};

report judge_tree(const std::string& name) {
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(root);
  node_facts f = collect_facts(*root, collect_options{});
  matrix_facts extra = collect_matrix_facts(*root, "/etc/slurm/slurm.conf", !f.libibverbs.is_ok());
  auto rules = load_matrix_rules(std::string(MRCHECK_FIXTURES_DIR) + "/../../etc/mrcheck-rules.conf");
  EXPECT_TRUE(rules);
  return run_checks(matrix_only(), node_check_inputs(f, *rules, nullptr, &extra));
}

TEST(Mnnvl, FixtureTrees) {
  for (const auto& c : {tree_case{"mnnvl_ready", verdict::pass, ""},
                        tree_case{"mnnvl_imex_down", verdict::fail,
                                  "mrcheck: mnnvl (node): 4 GPUs in an NVLink fabric but no nvidia-imex daemon runs: "
                                  "NCCL 2.27.3+ fails every communicator"},
                        tree_case{"mnnvl_fabric_incomplete", verdict::fail,
                                  "mrcheck: mnnvl (node): GPU 2: fabric state in progress: NCCL runs without MNNVL"},
                        tree_case{"matrix_aligned", verdict::skip, ""}}) {
    SCOPED_TRACE(c.tree);
    report rep = judge_tree(c.tree);
    const check_result* r = rep.find("mnnvl");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->result, c.v) << r->summary;
    auto want = plan_action(rep, fail_policy::warn);
    if (*c.reason) {
      EXPECT_EQ(want.what, desired_action::kind::drain);
      EXPECT_EQ(want.reason, c.reason);
    } else {
      EXPECT_NE(want.what, desired_action::kind::drain) << want.reason;
    }
  }
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/mnnvl_ready");
  ASSERT_TRUE(root);
  EXPECT_TRUE(imex_installed(*root));
  auto plain = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/matrix_aligned");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(imex_installed(*plain));  // the host would not ask NVML there
  EXPECT_EQ(judge_tree("matrix_aligned").find("mnnvl")->summary,
            "this tree has no .mrcheck/fabric.json (NVML's answer)");
  auto imex = read_imex_facts(*root);
  EXPECT_EQ(imex.daemon_pid, 3100);
  EXPECT_TRUE(imex.nodes_config);
  EXPECT_EQ(imex.channels, (std::vector<unsigned>{0}));
  EXPECT_EQ(judge_tree("mnnvl_ready").find("mnnvl")->summary,
            "4 GPUs in NVLink fabric clique 32766 of cluster 4f3c9e2a-71d8-4b0e-9a6c-2b5d8e1f0a37, nvidia-imex "
            "running (pid 3100)");
}

}  // namespace
}  // namespace mrcheck
