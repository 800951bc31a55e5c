// The table of line forms (src/explain/read/form_table.cpp): every row's real sample is recognised, the one errno reader
// reads every notation, the one prefix reader every launcher/collector/library header, and the lines a user
// pastes, as written.
#include "explain/read/line_forms.h"

#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace mrcheck {
namespace {

TEST(explain_forms, every_row_recognises_its_sample) {
  ASSERT_GE(forms::rows().size(), 25u);
  for (const forms::form_row& r : forms::rows()) {
    SCOPED_TRACE(std::string(r.sample));
    EXPECT_GE(r.anchor.size(), 4u);
    // A public source, or a real log of the project's own (tests/fixtures/ or tests/corpus/, made by a script that
    // says how), or mrcheck's own line where an end-to-end test asserts it (tests/e2e/).
    if (r.source.starts_with("tests/fixtures/") || r.source.starts_with("tests/corpus/") ||
        r.source.starts_with("tests/e2e/")) {
      EXPECT_TRUE(
          std::filesystem::exists(std::filesystem::path(MRCHECK_FIXTURES_DIR) / ".." / ".." / std::string(r.source)))
          << r.source;
    } else {
      EXPECT_TRUE(r.source.starts_with("https://")) << r.source;
    }
    EXPECT_NE(r.sample.find(r.anchor), std::string_view::npos) << "the sample must contain the row's anchor";
    EXPECT_NE(forms::classify(r.sample) & forms::k_form, 0u) << "the cheap rejection must keep the sample";
    EXPECT_TRUE(parse_nccl_line(r.sample).has_value());
  }
}

TEST(explain_forms, errno_in_every_notation) {
  struct c {
    const char* text;
    int err;
  };
  const c cases[] = {
      {"failed with error Cannot allocate memory", 12},
      {"ibv_reg_mr_iova2 failed -12", 12},
      {"ibv_reg_mr_iova2 return -12", 12},
      {"returned -1 (errno=1)", 1},
      {"returned -1", 0},  // the C failure convention, not EPERM
      {"failed (errno 14)", 14},
      {"errno:22 (Invalid argument)", 22},
      {"ibv_reg_mr failed [error code: 14]", 14},
      {"err info:Os { code: 12, kind: OutOfMemory, message: \"Cannot allocate memory\" }", 12},
      {"failed: Unknown error 524", 524},
      {"rdma_create_qp: Cannot allocate memory (12)", 12},
      {"fi_enableCannot allocate memory (-12)", 12},
      {"ibv_create_cq: Invalid argument(22)", 22},
      {"Failed to register memory 0x7f56e6600000: Numerical result out of range [34]", 34},
      {"fi_mr_reg failed, ret is:-12, Cannot allocate memory", 12},
      {"NET/OFI Couldn't enable endpoint. RC: -12, ERROR: Cannot allocate memory", 12},
      {"LibfabricError: code -93 (\"Protocol not supported\"), context: fi_mr_regattr", 93},
      {"CREATE_MKEY(0x200) op_mod(0x0) failed, status limits exceeded(0x8), syndrome (0x18af6), err(-12)", 12},
      {"async reg mr failed. status -121", 121},
      {"Failed to allocate pd[-12]", 12},
      {"Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12", 12},
      {"ibv_reg_mr failed: ENOMEM", 12},
      {"ibv_create_cq(cqe=4096) failed", 0},
      {"mlx5_0 port 1 state 4", 0},
  };
  for (const c& x : cases) EXPECT_EQ(forms::errno_in(x.text), x.err) << x.text;
}

TEST(explain_forms, prefixes_of_launchers_collectors_and_libraries) {
  forms::prefix p = forms::read_prefix(
      "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed");
  EXPECT_EQ(p.host, "cn0022");
  EXPECT_EQ(p.pid, 4071024);
  p = forms::read_prefix("[1,3]<stderr>:gpu7:11:12 [0] NCCL WARN Call to ibv_reg_mr failed");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.host, "gpu7");
  EXPECT_TRUE(p.warn);
  p = forms::read_prefix("12: node17: 2024-01-02T03:04:05.123Z ibv_reg_mr failed");
  EXPECT_EQ(p.rank, 12);
  EXPECT_EQ(p.host, "node17");
  EXPECT_EQ(p.rest, "ibv_reg_mr failed");
  p = forms::read_prefix("  | 2025-05-16T16:39:51.208-07:00 | ip-10-0-0-1:79:79 [0] NCCL WARN x");
  EXPECT_EQ(p.host, "ip-10-0-0-1");
  p = forms::read_prefix("E0605 17:54:16.878770 178707 rdma_context.cpp:198] Failed to register memory");
  EXPECT_EQ(p.thread, "tid 178707");
  EXPECT_EQ(p.rest, "Failed to register memory");
  p = forms::read_prefix("Aug 13 17:14:20.751285 [145661] *ERROR* peer.c: 173: rpma_peer_mr_reg: x");
  EXPECT_TRUE(p.rest.starts_with("[145661]")) << p.rest;
  p = forms::read_prefix("[1038619.687627] infiniband efa_0: Failed to register mr [-12]");
  EXPECT_EQ(p.rest, "infiniband efa_0: Failed to register mr [-12]");
}

// The lines a user pastes, as written.
TEST(explain_forms, the_issue_lines) {
  auto e = parse_nccl_line("NCCL ERROR ibv: ibv_reg_mr_iova2 failed -12");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->what.call, "ibv_reg_mr_iova2");
  EXPECT_EQ(e->what.err, 12);
  e = parse_nccl_line("gpu1:1:2 [0] NCCL WARN NET/IB : ibv_reg_mr_iova2 return -12");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->what.err, 12);
  EXPECT_EQ(e->host, "gpu1");
  e = parse_nccl_line("rank 3: ibv_reg_mr_iova2 returned -1 (errno=1)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->what.err, 1);
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(diagnose(e->what, {}).what, cause::capability);
  // A work completion status is not an errno, even printed through strerror.
  e = parse_nccl_line("  what():  a work item failed: status 12 (Ib failure: Cannot allocate memory)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->what.what, failure::kind::completion_error);
  EXPECT_EQ(e->what.wc_status, 12);
  EXPECT_EQ(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
  // A DEBUG probe and an <info> line are not failures.
  EXPECT_FALSE(
      parse_nccl_line("[1.2] [h:1:0] ib_md.c:1759 UCX  DEBUG mlx5_0: ibv_reg_dmabuf_mr(fd=-1) returned "
                      "Protocol not supported, dmabuf is not supported"));
  EXPECT_FALSE(
      parse_nccl_line("libfabric:verbs:fabric:fi_ibv_create_ep():231<info> rdma_create_ep: Invalid "
                      "argument(22)"));
}

TEST(explain_forms, hca_object_limits_are_not_pinning) {
  auto e = parse_nccl_line(
      "mlx5_core 0000:5e:00.0: mlx5_cmd_check:824:(pid 46096): CREATE_QP(0x500) op_mod(0x0) failed, status limits "
      "exceeded(0x8), syndrome (0x19c6d6)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->what.call, "mlx5_create_qp");
  EXPECT_EQ(diagnose(e->what, {}).what, cause::hca_resources);
  e = parse_nccl_line("infiniband efa_0: Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12");
  ASSERT_TRUE(e);
  EXPECT_EQ(diagnose(e->what, {}).what, cause::hca_resources);
  // An rdma_create_qp ENOMEM alone is the usual memlock; with the HCA's refusal in the same log it is that limit.
  nccl_log_scanner s;
  s.feed_line("libfabric:1:2:verbs:ep_ctrl:vrb_ep_enable():884<warn> rdma_create_qp: Cannot allocate memory (12)");
  EXPECT_EQ(explain_groups(s, {}, {})[0].diag.what, cause::memlock);
  s.feed_line(
      "[1.2] mlx5_core 0000:5e:00.0: mlx5_cmd_check:824:(pid 4): CREATE_QP(0x500) op_mod(0x0) failed, status limits "
      "exceeded(0x8), syndrome (0x19c6d6)");
  for (const finding& f : explain_groups(s, {}, {})) EXPECT_EQ(f.diag.what, cause::hca_resources);
}

// Garbage and hostile lines: bounded work, no event from bytes that only look like anchors.
TEST(explain_forms, garbage_is_cheap_and_harmless) {
  std::string junk(1 << 20, '\xff');
  for (std::size_t i = 0; i < junk.size(); i += 7) junk[i] = "rror egistr ailed -> "[i % 21];
  EXPECT_NO_THROW((void)parse_nccl_line(junk));
  std::string digits(70000, '9');
  EXPECT_EQ(forms::errno_in(digits), 0);
  EXPECT_EQ(forms::errno_in("(((((((((((((((("), 0);
  EXPECT_EQ(forms::classify(""), 0u);
  EXPECT_EQ(forms::classify("abc"), 0u);
}

// The cheap rejection reads four bigrams per step and looks for each anchor's last five bytes: an anchor must be
// found at every offset (a block's first, middle and last byte, the line's very start and end, a window across two
// blocks), in lines of every length around the block size, and a near miss must stay unclassified.
TEST(explain_forms, classify_finds_an_anchor_at_every_offset) {
  struct want {
    std::string_view anchor;
    unsigned cls;
  };
  const want anchors[] = {{" WARN", forms::k_warn},    {"nRanks", forms::k_rank},
                          {"errno", forms::k_form},    {"Got completion", forms::k_form},
                          {"NET/IB", forms::k_net_ib}, {"Stack size limit", forms::k_env}};
  for (const want& w : anchors) {
    for (std::size_t before = 0; before < 20; ++before) {
      for (std::size_t after = 0; after < 9; ++after) {
        std::string line = std::string(before, 'q') + std::string(w.anchor) + std::string(after, 'q');
        EXPECT_EQ(forms::classify(line) & w.cls, w.cls) << '"' << line << '"';
        // One byte short of the anchor (its first, or its last): the same class must not come from it.
        std::string cut = std::string(before, 'q') + std::string(w.anchor.substr(1)) + std::string(after, 'q');
        EXPECT_EQ(forms::classify(cut) & w.cls, 0u) << '"' << cut << '"';
        cut = std::string(before, 'q') + std::string(w.anchor.substr(0, w.anchor.size() - 1)) + std::string(after, 'q');
        EXPECT_EQ(forms::classify(cut) & w.cls, 0u) << '"' << cut << '"';
      }
    }
  }
  // Two anchors in one line, the second right after the first: both classes.
  EXPECT_EQ(forms::classify("nRanks WARN"), forms::k_rank | forms::k_warn);
  EXPECT_EQ(forms::classify("gpu000:1:2 [0] NCCL INFO comm 0x1 rank 1 nRanks 64 nNodes 8"), forms::k_rank);
}

}  // namespace
}  // namespace mrcheck
