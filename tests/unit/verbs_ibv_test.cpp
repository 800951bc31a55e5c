// The real verbs loader against the fake libibverbs.so.1 (tests/fakes, versioned symbols like rdma-core 44) and
// against the system's libibverbs: dlvsym at NCCL's versions, errnos passed through, handles released.
#include <mrcheck/verbs.h>

#include "doubles/memory_verbs.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace mrcheck {
namespace {

std::string fake_library() {
  std::string p = std::string(MRCHECK_BINARY_DIR) + "/fakes/lib/libibverbs.so.1";
  return std::filesystem::exists(p) ? p : "";
}

class VerbsIbvFake : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = fake_library();
    if (lib_.empty()) GTEST_SKIP() << "fake libibverbs not built (target fake_ibverbs)";
    setenv("MRCHECK_FAKE_IBV_DEVICES", "mlx5_0,mlx5_1", 1);
    unsetenv("MRCHECK_FAKE_IBV_INJECT");
  }
  void TearDown() override {
    unsetenv("MRCHECK_FAKE_IBV_DEVICES");
    unsetenv("MRCHECK_FAKE_IBV_INJECT");
  }
  std::string lib_;
};

TEST_F(VerbsIbvFake, LoadsAtNcclsSymbolVersionsAndRegisters) {
  auto v = load_verbs(lib_);
  ASSERT_TRUE(v) << v.error().message();
  verbs_api& api = **v;
  EXPECT_TRUE(api.has_reg_mr_iova2());
  EXPECT_TRUE(api.has_reg_dmabuf_mr());
  EXPECT_NE(api.library_path().find("libibverbs.so.1"), std::string::npos);
  auto names = api.device_names();
  ASSERT_TRUE(names);
  ASSERT_EQ(names->size(), 2u);
  EXPECT_EQ((*names)[1], "mlx5_1");

  auto ctx = api.open_device("mlx5_0");
  ASSERT_TRUE(ctx) << ctx.error().message();
  auto ports = api.query_ports(*ctx);
  ASSERT_TRUE(ports) << ports.error().message();
  ASSERT_FALSE(ports->empty());
  EXPECT_TRUE(ports->front().usable_by_nccl());
  auto pd = api.alloc_pd(*ctx);
  ASSERT_TRUE(pd);

  const std::size_t len = 4 * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  static_cast<char*>(mem)[0] = 1;
  auto mr = api.reg_mr_iova2(*pd, mem, len, reinterpret_cast<std::uintptr_t>(mem),
                             k_nccl_mr_access | k_ibv_access_relaxed_ordering);
  ASSERT_TRUE(mr) << mr.error().message();
  EXPECT_TRUE(api.dereg_mr(*mr));

  // NCCL's DMA-BUF probe: fd -1 -> EBADF means the kernel path exists.
  auto db = api.reg_dmabuf_mr(*pd, 0, 0, 0, -1, 0);
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().err(), EBADF);

  setenv("MRCHECK_FAKE_IBV_INJECT", "reg_mr_iova2=EINVAL", 1);
  auto bad = api.reg_mr_iova2(*pd, mem, len, reinterpret_cast<std::uintptr_t>(mem), k_nccl_mr_access);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().err(), EINVAL);
  EXPECT_NE(bad.error().message().find("ibv_reg_mr_iova2"), std::string::npos);
  unsetenv("MRCHECK_FAKE_IBV_INJECT");

  munmap(mem, len);
  EXPECT_TRUE(api.dealloc_pd(*pd));
  EXPECT_TRUE(api.close_device(*ctx));
  auto missing = api.open_device("mlx5_9");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().err(), ENODEV);
}

TEST(VerbsIbv, MissingLibraryIsAnErrorNamingIt) {
  auto v = load_verbs("/nonexistent/libibverbs.so.1");
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message().find("/nonexistent/libibverbs.so.1"), std::string::npos);
}

TEST(VerbsIbv, ALibraryWithoutTheBaseSymbolsIsRefused) {
  auto v = load_verbs("libc.so.6");
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message().find("IBVERBS_1.1"), std::string::npos) << v.error().message();
}

TEST(VerbsIbv, SystemLibraryLoadsAndListsWithoutHardware) {
  auto v = load_verbs("libibverbs.so.1");
  if (!v) GTEST_SKIP() << "no system libibverbs: " << v.error().message();
  EXPECT_TRUE((*v)->has_reg_mr_iova2());  // rdma-core >= 28 everywhere we support
  auto names = (*v)->device_names();
  EXPECT_TRUE(names) << names.error().message();  // no devices is an empty list, not an error
}

TEST(VerbsAccess, FlagsReadLikeTheHeader) {
  EXPECT_EQ(access_flags_string(k_nccl_mr_access | k_ibv_access_relaxed_ordering),
            "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|RELAXED_ORDERING");
  EXPECT_EQ(access_flags_string(0), "0");
  EXPECT_EQ(access_flags_string(1u << 30), "0x40000000");
  EXPECT_EQ(port_state_name(4), "ACTIVE");
  EXPECT_EQ(link_layer_name(2), "Ethernet");
}

TEST(VerbsMemory, InjectionsCountAndBudgetModelsMemlock) {
  memory_verbs v({{"mlx5_0", {verbs_port{1, k_ibv_port_active, k_ibv_link_layer_ethernet}}}});
  auto ctx = v.open_device("mlx5_0");
  ASSERT_TRUE(ctx);
  auto pd = v.alloc_pd(*ctx);
  ASSERT_TRUE(pd);
  v.set_pin_budget(8192);
  char buf[1];
  EXPECT_TRUE(v.reg_mr(*pd, buf, 8192, k_nccl_mr_access));
  auto over = v.reg_mr(*pd, buf, 1, k_nccl_mr_access);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().err(), ENOMEM);
  auto noflag = v.reg_mr(*pd, buf, 0, k_ibv_access_remote_write);  // REMOTE_WRITE without LOCAL_WRITE
  EXPECT_EQ(noflag.error().err(), EINVAL);
  v.fail("ibv_alloc_pd", EPERM, 1);
  EXPECT_EQ(v.alloc_pd(*ctx).error().err(), EPERM);
  EXPECT_TRUE(v.alloc_pd(*ctx));  // count 1: only once
  EXPECT_EQ(v.open_handles(), 1 + 2 + 1);
}

}  // namespace
}  // namespace mrcheck
