// The pure parsers behind the node facts: PCI resources and BAR1, meminfo, the NVIDIA version line, pid files,
// library versions from file names, and dlopen on this host.
#include <mrcheck/facts.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstdlib>
#include <filesystem>

namespace mrcheck {
namespace {

constexpr const char* k_zero = "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

TEST(facts_pci, bar1_on_line_2_for_64bit_bar0) {
  std::string res = std::string("0x0000104002000000 0x0000104002ffffff 0x0000000000140204\n") + k_zero +
                    "0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n" + k_zero +
                    "0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n" + k_zero + k_zero;
  auto r = parse_pci_resources(res);
  ASSERT_TRUE(r.is_ok()) << r.error().message();
  EXPECT_EQ(r->size(), 7u);
  EXPECT_EQ(find_bar1(*r), 2);
  EXPECT_EQ((*r)[2].size(), std::uint64_t{256} << 30);
}

TEST(facts_pci, bar1_on_line_1_for_32bit_bar0) {
  std::string res = std::string("0x00000000d8000000 0x00000000d8ffffff 0x0000000000040200\n") +
                    "0x0000380000000000 0x0000380fffffffff 0x000000000014220c\n" + k_zero +
                    "0x0000381000000000 0x0000381001ffffff 0x000000000014220c\n";
  auto r = parse_pci_resources(res);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(find_bar1(*r), 1);
}

TEST(facts_pci, rom_and_bridge_windows_are_not_bars) {
  // A huge prefetchable 64-bit window on line 7 (an SR-IOV BAR) must not be taken for BAR1.
  std::string res = std::string("0x00000000d8000000 0x00000000d8ffffff 0x0000000000040200\n") +
                    "0x00000000e0000000 0x00000000efffffff 0x000000000004220c\n" + k_zero + k_zero + k_zero + k_zero +
                    "0x00000000d9000000 0x00000000d907ffff 0x0000000000046200\n" +
                    "0x0000200000000000 0x00002fffffffffff 0x000000000014220c\n";
  auto r = parse_pci_resources(res);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(find_bar1(*r), 1);  // the 32-bit prefetchable 256 MiB BAR, as on old GPUs
  EXPECT_EQ((*r)[1].size(), 256u << 20);
}

TEST(facts_pci, none_and_garbage) {
  auto r = parse_pci_resources(std::string("0x00000000d8000000 0x00000000d8ffffff 0x0000000000040200\n") + k_zero);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(find_bar1(*r), -1);
  EXPECT_FALSE(parse_pci_resources("").is_ok());
  EXPECT_FALSE(parse_pci_resources("0x1 0x2\n").is_ok());
  EXPECT_FALSE(parse_pci_resources("0x1 0x2 0x3 0x4\n").is_ok());
  EXPECT_FALSE(parse_pci_resources("0xg 0x2 0x3\n").is_ok());
  EXPECT_FALSE(parse_pci_resources("0x1ffffffffffffffff 0x2 0x3\n").is_ok());
  EXPECT_EQ((pci_resource{10, 5, 0}.size()), 0u);  // end < start never yields a size
}

TEST(facts_meminfo, parses_and_refuses) {
  auto m = parse_meminfo(
      "MemTotal:       16318464 kB\nMemAvailable:    8000000 kB\nHugePages_Total:       4\n"
      "HugePages_Free:        1\nHugepagesize:    1048576 kB\n");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->mem_total, 16318464ull << 10);
  EXPECT_EQ(m->total, 4u);
  EXPECT_EQ(m->free, 1u);
  EXPECT_EQ(m->page_size, 1u << 30);
  auto no_huge = parse_meminfo("MemTotal: 1024 kB\n");
  ASSERT_TRUE(no_huge.is_ok());
  EXPECT_EQ(no_huge->total, 0u);
  EXPECT_FALSE(parse_meminfo("").is_ok());
  EXPECT_FALSE(parse_meminfo("MemFree: 5 kB\n").is_ok());
  EXPECT_FALSE(parse_meminfo("MemTotal: lots kB\n").is_ok());
  EXPECT_FALSE(parse_meminfo("MemTotal: 5 MB\n").is_ok());
  EXPECT_FALSE(parse_meminfo("MemTotal: 18446744073709551615 kB\n").is_ok());  // would overflow in bytes
}

TEST(facts_nvidia, open_and_proprietary) {
  auto o = parse_nvidia_version(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16)  Thu "
      "Nov 13 00:53:54 UTC 2025\nGCC version:  gcc version 13.3.0\n");
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->version, "580.159.04");
  EXPECT_EQ(o->flavour, nvidia_flavour::open);
  auto a = parse_nvidia_version("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build\n");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->version, "570.86.15");
  auto p = parse_nvidia_version(
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->version, "550.54.15");
  EXPECT_EQ(p->flavour, nvidia_flavour::proprietary);
  EXPECT_FALSE(parse_nvidia_version("").is_ok());
  EXPECT_FALSE(parse_nvidia_version("GCC version: 12\n").is_ok());
  EXPECT_FALSE(parse_nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module\n").is_ok());
  EXPECT_EQ(to_string(nvidia_flavour::unknown), "unknown");
}

TEST(facts_misc, pid_files_conf_and_library_names) {
  EXPECT_EQ(*parse_pid_file("1234\n"), 1234);
  EXPECT_FALSE(parse_pid_file("").is_ok());
  EXPECT_FALSE(parse_pid_file("0").is_ok());
  EXPECT_FALSE(parse_pid_file("-5").is_ok());
  EXPECT_FALSE(parse_pid_file("12 13").is_ok());
  EXPECT_FALSE(parse_pid_file("99999999999").is_ok());
  EXPECT_EQ(library_version_from_path("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"), "1.14.44.0");
  EXPECT_EQ(library_version_from_path("libnccl.so.2.28.3"), "2.28.3");
  EXPECT_EQ(library_version_from_path("/usr/lib/libcuda.so"), "");
  EXPECT_EQ(library_version_from_path("/opt/libfoo.so.1.2-rc"), "");
}

TEST(facts_libraries, dlopen_libibverbs_on_this_host) {
  auto l = load_library("libibverbs.so.1", {"ibv_reg_mr_iova2@IBVERBS_1.8", "ibv_reg_dmabuf_mr@IBVERBS_1.12",
                                            "ibv_reg_mr_iova2@IBVERBS_9.9", "no_such_symbol"});
  if (!l) GTEST_SKIP() << "libibverbs.so.1 not installed: " << l.error().message();
  char buf[PATH_MAX];
  ASSERT_NE(::realpath(l->path.c_str(), buf), nullptr);
  EXPECT_EQ(l->path, buf);  // already the real file, not the SONAME link
  EXPECT_EQ(l->version, library_version_from_path(l->path));
  EXPECT_FALSE(l->version.empty());
  EXPECT_TRUE(l->symbols.at("ibv_reg_mr_iova2@IBVERBS_1.8"));  // rdma-core >= 28
  EXPECT_FALSE(l->symbols.at("ibv_reg_mr_iova2@IBVERBS_9.9"));
  EXPECT_FALSE(l->symbols.at("no_such_symbol"));
  auto missing = load_library("libmrcheck-no-such-library.so.7", {});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error().message().find("libmrcheck-no-such-library.so.7"), std::string::npos);
}

TEST(facts_libraries, json_round_trip) {
  node_facts f;
  library_fact l;
  l.requested = "libibverbs.so.1";
  l.path = "/x/libibverbs.so.1.14.44.0";
  l.version = "1.14.44.0";
  l.symbols["ibv_reg_mr_iova2@IBVERBS_1.8"] = true;
  f.libibverbs = l;
  f.libcuda = status::error("dlopen libcuda.so.1: nope");
  f.cuda_driver_version = status::error("dlopen libcuda.so.1: nope");
  f.nccl_version = 22809;
  f.libnccl = status::error("x");
  node_facts back;
  libraries_from_json(libraries_to_json(f), back);
  ASSERT_TRUE(back.libibverbs.is_ok());
  EXPECT_EQ(back.libibverbs->path, l.path);
  EXPECT_TRUE(back.libibverbs->symbols.at("ibv_reg_mr_iova2@IBVERBS_1.8"));
  EXPECT_EQ(back.cuda_driver_version.error().message(), "dlopen libcuda.so.1: nope");
  EXPECT_EQ(*back.nccl_version, 22809);
  node_facts partial;
  libraries_from_json(nlohmann::json::object(), partial);
  EXPECT_EQ(partial.libibverbs.error().message(), "not recorded in the dump");
  node_facts bad;
  libraries_from_json(nlohmann::json::array(), bad);
  EXPECT_FALSE(bad.nccl_version.is_ok());
}

}  // namespace
}  // namespace mrcheck

TEST(FactsParsers, SlurmDaemonNames) {
  EXPECT_TRUE(mrcheck::is_slurm_daemon("slurmd", "slurmd"));
  // Debian 13's alternatives name, under which a re-executed daemon runs.
  EXPECT_TRUE(mrcheck::is_slurm_daemon("slurmd-wlm", "slurmd"));
  EXPECT_TRUE(mrcheck::is_slurm_daemon("slurmstepd-wlm", "slurmstepd"));
  EXPECT_FALSE(mrcheck::is_slurm_daemon("slurmdbd", "slurmd"));
  EXPECT_FALSE(mrcheck::is_slurm_daemon("slurmd-x", "slurmd"));
  EXPECT_FALSE(mrcheck::is_slurm_daemon("slurmstepd", "slurmd"));
  EXPECT_FALSE(mrcheck::is_slurm_daemon("", "slurmd"));
}

namespace mrcheck {
namespace {

// The package database and the EFA installer's record (docs/transports.md).
TEST(FactsParsers, DpkgStatusNamesTheRdmaPackages) {
  auto f = parse_dpkg_rdma(
      "Package: rdma-core\nStatus: install ok installed\nVersion: 2410mlnx54-1.2410068\n\n"
      "Package: libibverbs1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2410mlnx54-1.2410068\n\n"
      "Package: libfabric1\nStatus: deinstall ok config-files\nVersion: 1.17.0-3\n\n"
      "Package: libfabric1-aws\nStatus: install ok installed\nVersion: 1.19.0amzn4.0\n",
      "/var/lib/dpkg/status");
  ASSERT_TRUE(f.is_ok()) << f.error().message();
  EXPECT_EQ(f->libibverbs_package, "libibverbs1");
  EXPECT_EQ(f->libibverbs_version, "2410mlnx54-1.2410068");
  EXPECT_TRUE(f->ofed);
  EXPECT_EQ(f->libfabric_version, "1.19.0amzn4.0");  // the removed libfabric1 does not count
  auto none = parse_dpkg_rdma("Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2\n", "s");
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.error().message(), "s: no libibverbs1, rdma-core or libfabric package installed");
  auto distro = parse_dpkg_rdma("Package: libibverbs1\nStatus: install ok installed\nVersion: 44.0-2\n", "s");
  ASSERT_TRUE(distro.is_ok());
  EXPECT_FALSE(distro->ofed);
}

TEST(FactsParsers, EfaInstallerRecord) {
  // The layout of aws/aws-ofi-nccl #44 (EFA installer 1.8.3, deb names) and an rpm-style entry.
  auto f = parse_efa_installer(
      "# EFA installer version: 1.8.3\n# Debug packages installed: yes\n# Packages installed:\n"
      "ibacm_25.0-1_amd64 ibverbs-providers_25.0-1_amd64 libfabric-aws-bin_1.9.0amzn1.1_amd64 "
      "libfabric-aws-dev_1.9.0amzn1.1_amd64 libfabric1-aws_1.9.0amzn1.1_amd64\n");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->installer_version, "1.8.3");
  EXPECT_EQ(f->libfabric_version, "1.9.0amzn1.1");
  EXPECT_TRUE(f->ofi_nccl_version.empty());
  auto rpm = parse_efa_installer(
      "# EFA installer version: 1.38.0\nlibfabric-aws-2.0.0amzn1.0-1.amzn2023.x86_64 "
      "libnccl-ofi-1.13.2-1.amzn2023.x86_64\n");
  ASSERT_TRUE(rpm.is_ok());
  EXPECT_EQ(rpm->libfabric_version, "2.0.0amzn1.0");
  EXPECT_EQ(rpm->ofi_nccl_version, "1.13.2");
  EXPECT_FALSE(parse_efa_installer("ibacm_25.0-1_amd64\n").is_ok());
}

TEST(FactsParsers, MeminfoKeepsCma) {
  auto m = parse_meminfo("MemTotal:       127535436 kB\nCmaTotal:              0 kB\nCmaFree:          940604 kB\n");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->cma_total, 0u);
  EXPECT_EQ(m->cma_free, 940604ull * 1024);
  auto none = parse_meminfo("MemTotal:       1024 kB\n");
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->cma_free.has_value());
}

}  // namespace
}  // namespace mrcheck
