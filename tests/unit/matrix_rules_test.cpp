// The matrix rules file: grammar, errors named file:line, overrides on top of the defaults, and the shipped
// etc/mrcheck-rules.conf staying equal to the compiled-in defaults.
#include <mrcheck/matrix.h>
#include <mrcheck/slurm_conf.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace mrcheck {
namespace {

std::string error_of(std::string_view text) {
  auto r = parse_matrix_rules(text, "rules.conf");
  return r ? std::string("(parsed)") : r.error().message();
}

TEST(MatrixVersion, ComparesNumericallyAndPadsWithZero) {
  auto v = [](const char* s) { return parse_dotted_version(s).value(); };
  EXPECT_LT(v("28.9.1"), v("28.10.0"));
  EXPECT_LT(v("535.54.03"), v("535.104.05"));
  EXPECT_EQ(v("12.2"), v("12.2.0"));
  EXPECT_GT(v("2.28.9"), v("2.28"));
  EXPECT_FALSE(parse_dotted_version(""));
  EXPECT_FALSE(parse_dotted_version("1..2"));
  EXPECT_FALSE(parse_dotted_version("5.8-3.0.7"));
  EXPECT_FALSE(parse_dotted_version("1.2.3.4.5.6.7.8.9"));
  EXPECT_EQ(v("0580.082.009").to_string(), "580.82.9");
}

TEST(MatrixVersion, CudaAndNcclEncodings) {
  EXPECT_EQ(cuda_version_from_int(13000).to_string(), "13.0");
  EXPECT_EQ(cuda_version_from_int(12020).to_string(), "12.2");
  EXPECT_EQ(cuda_version_from_int(11070).to_string(), "11.7");
  EXPECT_EQ(nccl_version_from_int(22809).to_string(), "2.28.9");
  EXPECT_EQ(nccl_version_from_int(21803).to_string(), "2.18.3");
  EXPECT_EQ(nccl_version_from_int(2708).to_string(), "2.7.8");
}

TEST(MatrixRules, EmptyFileKeepsDefaults) {
  auto r = parse_matrix_rules("# nothing\n\n   \n", "x");
  ASSERT_TRUE(r) << r.error().message();
  auto d = default_matrix_rules();
  EXPECT_EQ(r->hca_families.size(), d.hca_families.size());
  EXPECT_EQ(r->gpu_driver_min, d.gpu_driver_min);
  EXPECT_EQ(r->source, "x");
}

TEST(MatrixRules, OverridesActionsAndValues) {
  auto r = parse_matrix_rules(
      "gpudirect require   # same as fail\n"
      "bar1 off\n"
      "propagate_limits\tfail\n"
      "gpu_driver.min 550.54.15\n"
      "gpu_driver.flavour open\n"
      "nccl.min none\n"
      "hca_family 40 ConnectX-8\n"
      "hca_fw.min 40 40.44.1000\n"
      "hca_fw.min 28 28.39.1002\n"
      "gpu_memory 2901 192G B200\n"
      "rdma_stack.uverbs_abi 6 7\n"
      "rdma_stack.ofed_user_marker mlnx doca\n"
      "slurmd_memlock.min 64G\n",
      "site.conf");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->gpudirect, rule_action::fail);
  EXPECT_EQ(r->bar1, rule_action::off);
  EXPECT_EQ(r->propagate_limits, rule_action::fail);
  EXPECT_EQ(r->gpu_driver_min->to_string(), "550.54.15");
  EXPECT_EQ(r->gpu_driver_flavour, flavour_rule::open);
  EXPECT_FALSE(r->nccl_min.has_value());
  EXPECT_EQ(r->hca_families.at(40).name, "ConnectX-8");
  EXPECT_EQ(r->hca_families.at(40).min->to_string(), "40.44.1000");
  EXPECT_EQ(r->hca_families.at(28).min->to_string(), "28.39.1002");
  EXPECT_EQ(r->hca_families.at(28).name, "ConnectX-7");  // the default family name stays
  EXPECT_EQ(r->gpu_memory.at("0x2901"), std::uint64_t{192} << 30);
  EXPECT_EQ(r->uverbs_abi, (std::vector<int>{6, 7}));
  EXPECT_EQ(r->ofed_user_markers, (std::vector<std::string>{"mlnx", "doca"}));
  EXPECT_EQ(r->slurmd_memlock_min, std::uint64_t{64} << 30);
}

TEST(MatrixRules, ErrorsNameFileAndLine) {
  EXPECT_EQ(error_of("bar1 warn\nbar_1 warn\n"), "rules.conf:2: unknown rule key 'bar_1'");
  EXPECT_EQ(error_of("\n\nbar1 maybe\n"), "rules.conf:3: 'bar1': 'maybe' is not fail, warn or off");
  EXPECT_EQ(error_of("bar1 warn\nbar1 fail\n"), "rules.conf:2: 'bar1' is set twice");
  EXPECT_EQ(error_of("hca_fw.min 40 40.1.1\n"), "rules.conf:1: 'hca_fw.min 40': no hca_family 40 declared");
  EXPECT_EQ(error_of("hca_fw.min 28 22.1.1\n"), "rules.conf:1: 'hca_fw.min 28': version 22.1.1 belongs to major 22");
  EXPECT_EQ(error_of("gpu_driver.min 5x\n"),
            "rules.conf:1: 'gpu_driver.min': '5x' is not a dotted version (digits and dots)");
  EXPECT_EQ(error_of("gpu_memory 0xzz 80G\n"), "rules.conf:1: '0xzz' is not a PCI device id (4 hex digits)");
  EXPECT_EQ(error_of("gpu_memory 2335 lots\n"), "rules.conf:1: 'gpu_memory 0x2335': 'lots' is not a memory size");
  EXPECT_EQ(error_of("bar1\n"), "rules.conf:1: 'bar1' takes fail|warn|off (got 0 values)");
  EXPECT_EQ(error_of("bar1.min 12 parsecs\n"), "rules.conf:1: 'bar1.min' takes auto|SIZE (got 2 values)");
  EXPECT_EQ(error_of("bar1.min lots\n"), "rules.conf:1: 'bar1.min': 'lots' is not a size (or 'auto')");
  EXPECT_EQ(error_of("bar1.min auto\nbar1.min 1G\n"), "rules.conf:2: 'bar1.min' is set twice");
  {
    auto r = parse_matrix_rules("bar1.too_small warn\nbar1.min 512M\n", "x");
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->bar1_too_small, rule_action::warn);
    EXPECT_EQ(r->bar1_min, std::uint64_t{512} << 20);
  }
  EXPECT_EQ(error_of("gpu_driver require\n"), "rules.conf:1: 'gpu_driver': 'require' is not fail, warn or off");
  // Untrusted bytes in a key are escaped in the message.
  EXPECT_EQ(error_of("bar\x1b[31m warn\n"), "rules.conf:1: unknown rule key 'bar\\x1b[31m'");
}

TEST(MatrixRules, MissingFileIsAnError) {
  auto r = load_matrix_rules("/nonexistent/mrcheck-rules.conf");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("/nonexistent/mrcheck-rules.conf"), std::string::npos);
}

TEST(MatrixRules, ShippedFileEqualsBuiltInDefaults) {
  std::string path = std::string(MRCHECK_FIXTURES_DIR) + "/../../etc/mrcheck-rules.conf";
  auto r = load_matrix_rules(path);
  ASSERT_TRUE(r) << r.error().message();
  auto d = default_matrix_rules();
  EXPECT_EQ(r->rdma_stack, d.rdma_stack);
  EXPECT_EQ(r->rdma_stack_ofed_version, d.rdma_stack_ofed_version);
  EXPECT_EQ(r->ofed_user_markers, d.ofed_user_markers);
  EXPECT_EQ(r->uverbs_abi, d.uverbs_abi);
  EXPECT_EQ(r->hca_fw, d.hca_fw);
  EXPECT_EQ(r->hca_fw_unknown, d.hca_fw_unknown);
  ASSERT_EQ(r->hca_families.size(), d.hca_families.size());
  for (const auto& [major, fam] : d.hca_families) {
    ASSERT_TRUE(r->hca_families.count(major)) << major;
    EXPECT_EQ(r->hca_families.at(major).name, fam.name) << major;
    EXPECT_EQ(r->hca_families.at(major).min, fam.min) << major;
  }
  EXPECT_EQ(r->gpu_driver, d.gpu_driver);
  EXPECT_EQ(r->gpu_driver_min, d.gpu_driver_min);
  EXPECT_EQ(r->gpu_driver_flavour, d.gpu_driver_flavour);
  EXPECT_EQ(r->gpudirect, d.gpudirect);
  EXPECT_EQ(r->dmabuf_kernel_min, d.dmabuf_kernel_min);
  EXPECT_EQ(r->dmabuf_cuda_min, d.dmabuf_cuda_min);
  EXPECT_EQ(r->cuda_driver, d.cuda_driver);
  EXPECT_EQ(r->cuda_driver_min, d.cuda_driver_min);
  EXPECT_EQ(r->nccl, d.nccl);
  EXPECT_EQ(r->nccl_min, d.nccl_min);
  EXPECT_EQ(r->bar1, d.bar1);
  EXPECT_EQ(r->bar1_too_small, d.bar1_too_small);
  EXPECT_EQ(r->bar1_min, d.bar1_min);
  EXPECT_EQ(r->gpu_memory, d.gpu_memory);
  EXPECT_EQ(r->slurmd_memlock, d.slurmd_memlock);
  EXPECT_EQ(r->slurmd_memlock_min, d.slurmd_memlock_min);
  EXPECT_EQ(r->propagate_limits, d.propagate_limits);
  EXPECT_EQ(r->max_map_count, d.max_map_count);
  EXPECT_EQ(r->max_map_count_min, d.max_map_count_min);
  EXPECT_EQ(r->max_map_count_recommended, d.max_map_count_recommended);
  EXPECT_EQ(r->hugepages, d.hugepages);
  EXPECT_EQ(r->hugepages_reserved_max_pct, d.hugepages_reserved_max_pct);
  EXPECT_EQ(r->hugepages_reserved_warn_pct, d.hugepages_reserved_warn_pct);
  EXPECT_EQ(r->hugepages_free_min, d.hugepages_free_min);
}

TEST(MatrixSlurmConf, PropagationRules) {
  auto p = [](const char* text) {
    slurm_conf_settings s;
    parse_slurm_conf_text(text, "slurm.conf", s);
    auto f = slurm_conf_facts_of(s);
    EXPECT_TRUE(f) << text;
    return f && f->memlock_propagated;
  };
  EXPECT_TRUE(p("ClusterName=x\n"));  // default ALL
  EXPECT_FALSE(p("PropagateResourceLimitsExcept=MEMLOCK\n"));
  EXPECT_FALSE(p("propagateresourcelimitsexcept=NOFILE,memlock # comment\n"));
  EXPECT_TRUE(p("PropagateResourceLimitsExcept=NOFILE,CORE\n"));
  EXPECT_FALSE(p("PropagateResourceLimits=NONE\n"));
  EXPECT_TRUE(p("PropagateResourceLimits=ALL\n"));
  EXPECT_FALSE(p("PropagateResourceLimits=NOFILE,CORE\n"));
  EXPECT_TRUE(p("PropagateResourceLimits=CORE,MEMLOCK\n"));
  EXPECT_TRUE(p("#PropagateResourceLimitsExcept=MEMLOCK\n"));                                      // commented out
  EXPECT_FALSE(p("PropagateResourceLimitsExcept=CORE\nPropagateResourceLimitsExcept=MEMLOCK\n"));  // last wins
}

}  // namespace
}  // namespace mrcheck
