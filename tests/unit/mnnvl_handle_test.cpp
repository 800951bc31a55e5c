// mnnvl_handle (src/checks/mnnvl_handle.cpp): the fabric-handle buffer through the probe's own CUDA path
// (open_cuda_gpu, src/rdma/cuda_gpu.cpp) against a fake libcuda.so.1 (tests/fakes/fake_cuda.c) that answers success,
// CUDA_ERROR_NOT_PERMITTED or CUDA_ERROR_NOT_SUPPORTED; the verdicts and owners; and `mrcheck probe mr --gpu` end to
// end with the fake libcuda and the fake NVML found through LD_LIBRARY_PATH as the driver's would be.
#include <mrcheck/build_config.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/child.h>
#include <mrcheck/fabric.h>
#include <mrcheck/log.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/owner.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/sysroot.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace mrcheck {
namespace {

constexpr const char* k_uuid = "4f3c9e2a71d84b0e9a6c2b5d8e1f0a37";

// NVML's answer for a GB200-like node: every GPU in one completed fabric with a cluster UUID.
fabric_facts gb200_nvml() {
  fabric_facts f;
  std::vector<gpu_fabric> gpus(4);
  for (unsigned i = 0; i < gpus.size(); ++i) {
    gpus[i].index = i;
    gpus[i].state = fabric_state::completed;
    gpus[i].clique_id = 0x7ffe;
    gpus[i].cluster_uuid.fill(0x4f);
  }
  f.gpus = gpus;
  return f;
}

fabric_facts h100_nvml() {
  fabric_facts f;
  std::vector<gpu_fabric> gpus(1);
  gpus[0].query_error = 3;  // NVML_ERROR_NOT_SUPPORTED: no fabric
  f.gpus = gpus;
  return f;
}

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MRCHECK_HAVE_CUDA_HEADERS) GTEST_SKIP() << "built without CUDA headers: the probe has no CUDA path";
  }
  void TearDown() override {
    for (const char* v : {"MRCHECK_FAKE_CUDA_FABRIC", "MRCHECK_FAKE_CUDA_FABRIC_ATTR", "MRCHECK_FAKE_CUDA_NO_DEVICE"})
      ::unsetenv(v);
  }
  // The probe's facts and the check's verdict with the fake answering `mode`.
  check_result judge(const char* mode, const fabric_facts& nvml = gb200_nvml()) {
    ::setenv("MRCHECK_FAKE_CUDA_FABRIC", mode, 1);
    bool skip = false;
    auto gpu = open_cuda_gpu(skip, MRCHECK_FAKE_LIBCUDA);
    EXPECT_TRUE(gpu) << (gpu ? "" : gpu.error().message());
    null_log sink;
    mr_probe_outcome o;
    o.gpu_requested = true;
    o.fabric = probe_fabric_handle(nvml, gpu ? gpu->get() : nullptr, "", true, sink);
    return mnnvl_handle_check(o).result;
  }
};

TEST_F(FakeCuda, ExportWorksPasses) {
  check_result r = judge("ok");
  EXPECT_EQ(r.result, verdict::pass) << r.summary;
  EXPECT_NE(r.summary.find("a 2 MiB fabric-handle buffer on GPU 0 (0009:01:00.0) made, exported and imported"),
            std::string::npos)
      << r.summary;
  EXPECT_EQ(owner_of(r), fix_owner::site);  // the registry's owner; a pass has none of its own
  EXPECT_EQ(r.owner, fix_owner::none);
}

// The channel missing from this process's namespace (the test machine has none): NCCL's failure, the site's.
TEST_F(FakeCuda, NotPermittedFailsNamingTheChannelOwnerSite) {
  ASSERT_FALSE(std::filesystem::exists("/dev/nvidia-caps-imex-channels")) << "this test assumes a machine without IMEX";
  for (const char* mode : {"not_permitted", "export_not_permitted"}) {
    SCOPED_TRACE(mode);
    check_result r = judge(mode);
    EXPECT_EQ(r.result, verdict::fail);
    EXPECT_EQ(r.owner, fix_owner::site);
    EXPECT_NE(r.summary.find("CUDA_ERROR_NOT_PERMITTED"), std::string::npos) << r.summary;
    EXPECT_NE(r.summary.find("no /dev/nvidia-caps-imex-channels in this process's mount namespace"), std::string::npos)
        << r.summary;
    EXPECT_NE(r.hint.find("switch/nvidia_imex"), std::string::npos) << r.hint;
  }
  EXPECT_NE(judge("not_permitted").summary.find("cuMemCreate 2 MiB"), std::string::npos);
  EXPECT_NE(judge("export_not_permitted").summary.find("cuMemExportToShareableHandle 2 MiB"), std::string::npos);
}

TEST_F(FakeCuda, NotSupportedSkipsSayingSo) {
  check_result r = judge("not_supported");
  EXPECT_EQ(r.result, verdict::skip);
  EXPECT_EQ(r.summary,
            "cuMemCreate with a fabric handle on GPU 0 (0009:01:00.0): CUDA_ERROR_NOT_SUPPORTED: fabric handles not "
            "supported here, not tested");
}

TEST_F(FakeCuda, AnotherErrorFailsOwnerNode) {
  check_result r = judge("oom");
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.owner, fix_owner::node);
  EXPECT_NE(r.summary.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << r.summary;
}

// No fabric (the project's H100): nothing allocated, an honest skip, whatever libcuda would have said.
TEST_F(FakeCuda, NoFabricSkipsWithoutAllocating) {
  check_result r = judge("not_permitted", h100_nvml());
  EXPECT_EQ(r.result, verdict::skip);
  EXPECT_EQ(r.summary, "no NVLink fabric on this node: fabric handles not tested (NVML asked 1 GPU: none in a fabric)");
  fabric_facts broken;
  broken.gpus = status::error("dlopen libnvidia-ml.so.1: not found");
  r = judge("ok", broken);
  EXPECT_EQ(r.result, verdict::skip);
  EXPECT_NE(r.summary.find("fabric handles not tested (NVML could not be asked: dlopen"), std::string::npos)
      << r.summary;
}

TEST_F(FakeCuda, NoFabricHandleSupportWarns) {
  ::setenv("MRCHECK_FAKE_CUDA_FABRIC_ATTR", "0", 1);
  check_result r = judge("ok");
  EXPECT_EQ(r.result, verdict::warn);
  EXPECT_EQ(r.owner, fix_owner::node);
  EXPECT_NE(r.summary.find("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED 0"), std::string::npos) << r.summary;
}

// The judge alone: a channel the probe sees and may open, refused by the driver, is the node's.
TEST(MnnvlHandle, UsableChannelRefusedIsTheNodes) {
  mr_probe_outcome o;
  o.gpu_requested = true;
  fabric_probe_result& f = o.fabric;
  f.asked = f.node_fabric = f.handle_attr = f.channels_dir = true;
  f.channels = f.usable = {0};
  f.attempt = {true, false, "cuMemCreate", k_cuda_error_not_permitted, "CUDA_ERROR_NOT_PERMITTED", 2u << 20};
  check_result r = mnnvl_handle_check(o).result;
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.owner, fix_owner::node);
  EXPECT_NE(r.summary.find("channel0 present and read-write for this user"), std::string::npos) << r.summary;
  EXPECT_NE(r.hint.find("/proc/devices"), std::string::npos) << r.hint;
  // The same with the channel not the user's: the site's (switch/nvidia_imex sets its mode).
  f.usable.clear();
  r = mnnvl_handle_check(o).result;
  EXPECT_EQ(r.owner, fix_owner::site);
  EXPECT_NE(r.summary.find("channel0 present but not read-write for this user"), std::string::npos) << r.summary;
  // CUDA not set up on a fabric node: no GPU visible is a skip, a broken CUDA the check's own error.
  f.cuda_problem = "no GPU visible to this task (cuDeviceGetCount: 0)";
  f.cuda_problem_skip = true;
  EXPECT_EQ(mnnvl_handle_check(o).result.result, verdict::skip);
  f.cuda_problem_skip = false;
  EXPECT_EQ(mnnvl_handle_check(o).result.result, verdict::error);
}

TEST(MnnvlHandle, RegisteredAsAProbeCheckOfTheMrGroup) {
  const check_def* d = find_check("mnnvl_handle");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->group, check_group::mr);
  EXPECT_EQ(d->origin, check_origin::probe);
  EXPECT_EQ(default_owner("mnnvl_handle"), fix_owner::site);
}

// `mrcheck probe mr --gpu --json` with LD_LIBRARY_PATH at the fake driver directory: the CLI finds libcuda.so.1 and
// libnvidia-ml.so.1 there by name, as it finds the driver's; the fake libibverbs gives it an RDMA device, so CUDA is
// set up and NVML asked (without one and without IMEX, neither is: bench/probe/README.md).
class ProbeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MRCHECK_HAVE_CUDA_HEADERS) GTEST_SKIP() << "built without CUDA headers";
    if (!std::filesystem::exists(k_mrcheck)) GTEST_SKIP() << "build the mrcheck target first: " << k_mrcheck;
    if (!std::filesystem::exists(k_verbs)) GTEST_SKIP() << "build the fake_ibverbs target first: " << k_verbs;
  }
  void TearDown() override { std::filesystem::remove(log_); }
  nlohmann::json probe(const std::string& nvml_gpus, const std::string& mode, int* exit_code = nullptr,
                       const std::string& verbs = k_verbs, const std::vector<std::string>& extra = {}) {
    std::filesystem::remove(log_);
    child_spec s;
    s.argv = {k_mrcheck, "probe", "mr", "--gpu", "--json", "--size", "1M", "--verbs-library", verbs};
    s.env = {"PATH=/usr/bin:/bin", std::string("LD_LIBRARY_PATH=") + MRCHECK_FAKE_DRIVER_DIR,
             "MRCHECK_FAKE_NVML_GPUS=" + nvml_gpus, "MRCHECK_FAKE_CUDA_FABRIC=" + mode,
             "MRCHECK_FAKE_CUDA_LOG=" + log_};
    s.env.insert(s.env.end(), extra.begin(), extra.end());
    s.timeout = std::chrono::milliseconds(20000);
    auto out = run_child(s);
    EXPECT_TRUE(out) << (out ? "" : out.error().message());
    if (!out) return {};
    if (exit_code) *exit_code = out->exit_code;
    auto j = nlohmann::json::parse(out->out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out->out << out->err;
    return j;
  }
  static nlohmann::json check(const nlohmann::json& j, const std::string& id) {
    for (const auto& c : j.value("checks", nlohmann::json::array())) {
      if (c.value("id", "") == id) return c;
    }
    return {};
  }
  // The fake's calls, one line each ("cuMemCreate 0"), and "leak N" for handles never released.
  std::string calls() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static inline const std::string k_mrcheck = std::string(MRCHECK_BINARY_DIR) + "/cli/mrcheck";
  static inline const std::string k_verbs = std::string(MRCHECK_BINARY_DIR) + "/fakes/lib/libibverbs.so.1";
  const std::string log_ =
      (std::filesystem::temp_directory_path() / ("mnnvl_handle_" + std::to_string(::getpid()))).string();
};

TEST_F(ProbeCli, EachVerdictThroughTheRealLoadPath) {
  const std::string gb200 = std::string("3:0:0x7ffe:") + k_uuid + ":0xaa";
  auto j = probe(gb200, "ok");
  auto c = check(j, "mnnvl_handle");
  EXPECT_EQ(c.value("verdict", ""), "pass") << j.dump();
  EXPECT_EQ(j["probe"]["fabric"]["attempt"]["bytes"], 2u << 20) << j.dump();
  // NCCL's sequence, every handle released.
  EXPECT_EQ(calls(),
            "cuMemCreate 0\ncuMemExportToShareableHandle 0\ncuMemImportFromShareableHandle 0\ncuMemRelease 0\n"
            "cuMemRelease 0\n");

  int rc = 0;
  j = probe(gb200, "not_permitted", &rc);
  c = check(j, "mnnvl_handle");
  EXPECT_EQ(c.value("verdict", ""), "fail") << j.dump();
  EXPECT_EQ(c.value("owner", ""), "site") << j.dump();
  EXPECT_EQ(j["probe"]["fabric"]["attempt"]["error_name"], "CUDA_ERROR_NOT_PERMITTED");
  EXPECT_EQ(rc, 1);

  j = probe(gb200, "not_supported");
  EXPECT_EQ(check(j, "mnnvl_handle").value("verdict", ""), "skip") << j.dump();

  // The H100 here: NVML says no fabric; the check skips and says so, and no fabric handle is made.
  j = probe("ns", "not_permitted");
  c = check(j, "mnnvl_handle");
  EXPECT_EQ(c.value("verdict", ""), "skip") << j.dump();
  EXPECT_EQ(c.value("summary", ""),
            "no NVLink fabric on this node: fabric handles not tested (NVML asked 1 GPU: none in a fabric)");
  EXPECT_EQ(j["probe"]["fabric"]["node_fabric"], false);
  EXPECT_EQ(calls(), "");

  // A fabric node whose task sees no GPU: CUDA's own words (mr_gpu's reason is the same one here).
  j = probe(gb200, "ok", nullptr, k_verbs, {"MRCHECK_FAKE_CUDA_NO_DEVICE=1"});
  c = check(j, "mnnvl_handle");
  EXPECT_EQ(c.value("verdict", ""), "skip") << j.dump();
  EXPECT_NE(c.value("summary", "").find("but CUDA could not be set up: no GPU visible (cuInit: CUDA_ERROR_NO_DEVICE)"),
            std::string::npos)
      << c.dump();

  // No RDMA device and no IMEX on the machine: neither NVML nor CUDA is asked (what this machine has).
  ASSERT_FALSE(imex_installed(sysroot{}));
  j = probe(gb200, "ok", nullptr, "/nonexistent/libibverbs.so.1");
  c = check(j, "mnnvl_handle");
  EXPECT_EQ(c.value("verdict", ""), "skip") << j.dump();
  EXPECT_EQ(c.value("summary", ""),
            "no NVLink fabric on this node: fabric handles not tested (NVML not asked: no IMEX on this node and no "
            "RDMA device)");
  EXPECT_EQ(calls(), "");
}

}  // namespace
}  // namespace mrcheck
