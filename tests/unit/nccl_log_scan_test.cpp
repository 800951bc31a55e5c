// The NCCL log scanner: each recognised format, prefixes, grouping, consequences, bounded memory.
#include <mrcheck/nccl_log.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

namespace mrcheck {
namespace {

nccl_event must_parse(std::string_view line) {
  auto e = parse_nccl_line(line);
  EXPECT_TRUE(e.has_value()) << line;
  return e.value_or(nccl_event{});
}

TEST(nccl_log_line, call_failed_with_strerror_and_nccl_header) {
  nccl_event e = must_parse(
      "gpu-node-07:4016:4653 [7] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
      "allocate memory");
  EXPECT_EQ(e.what.what, failure::kind::call);
  EXPECT_EQ(e.what.call, "ibv_reg_mr_iova2");
  EXPECT_EQ(e.what.err, ENOMEM);
  EXPECT_EQ(e.host, "gpu-node-07");
  EXPECT_EQ(e.pid, 4016);
  EXPECT_FALSE(e.rank.has_value());  // [7] is the CUDA device, not a rank
  EXPECT_EQ(e.text, "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory");
}

TEST(nccl_log_line, errno_as_numbers_and_other_messages) {
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error -12").what.err, 12);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error 12").what.err, 12);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed errno 14").what.err, 14);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error ENOMEM").what.err, 12);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Invalid argument ").what.err,
            EINVAL);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Operation not permitted").what.err,
            EPERM);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported")
                .what.err,
            EOPNOTSUPP);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to ibv_modify_qp failed with error No such device").what.err, ENODEV);
  EXPECT_EQ(must_parse("h:1:2 [0] NCCL WARN Call to posix_fallocate failed : No space left on device").what.err,
            ENOSPC);
  // Old NCCL printed no errno.
  nccl_event old = must_parse("hai-a100-3:376586:377441 [2] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed");
  EXPECT_EQ(old.what.call, "ibv_create_qp");
  EXPECT_EQ(old.what.err, 0);
  // NCCL 2.3 had no "NCCL" before WARN.
  nccl_event older = must_parse("dgj101:14560:14560 [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed");
  EXPECT_EQ(older.host, "dgj101");
  EXPECT_EQ(older.what.call, "ibv_create_qp");
}

TEST(nccl_log_line, errno_in_text_forms) {
  EXPECT_EQ(errno_in_text(" (errno 14) (Ib failure: Bad address)"), 14);
  EXPECT_EQ(errno_in_text("RC: -22, Error: Invalid argument"), 22);
  EXPECT_EQ(errno_in_text("RC: -12"), 12);
  EXPECT_EQ(errno_in_text("errno=1"), 1);
  EXPECT_EQ(errno_in_text("No such device or address"), ENXIO);  // longest message wins
  EXPECT_EQ(errno_in_text("with error"), 0);
  EXPECT_EQ(errno_in_text("error 123456"), 0);
  EXPECT_EQ(errno_in_text("EPROTONOSUPPORT"), EPROTONOSUPPORT);
}

TEST(nccl_log_line, launcher_prefixes_give_ranks_and_hosts) {
  nccl_event srun = must_parse(
      "12: gpu3:99:100 [1] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
      "allocate memory");
  EXPECT_EQ(srun.rank, 12);
  EXPECT_EQ(srun.host, "gpu3");
  nccl_event padded = must_parse(
      "  3: gpu3:99:100 [1] NCCL WARN Call to ibv_create_cq failed with error Cannot "
      "allocate memory");
  EXPECT_EQ(padded.rank, 3);
  nccl_event torch = must_parse(
      "[rank3]: misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
      "Invalid argument");
  EXPECT_EQ(torch.rank, 3);
  nccl_event ompi = must_parse(
      "[1,5]<stdout>:smc-gpu-03:29883:30404 [0] init.cc:497 NCCL WARN Duplicate GPU "
      "detected : rank 5 and rank 0 both on CUDA device 1000");
  EXPECT_EQ(ompi.rank, 5);
  EXPECT_EQ(ompi.host, "smc-gpu-03");
  EXPECT_EQ(ompi.what.what, failure::kind::duplicate_gpu);
  nccl_event pdsh = must_parse(
      "10.0.87.143: 10.0.87.143: ip-10-0-87-143:149:298 [5] register_mr_buffers:465 NCCL "
      "WARN NET/OFI Unable to register memory (type = 1) for device 0. RC: 12, Error: "
      "Cannot allocate memory");
  EXPECT_EQ(pdsh.host, "ip-10-0-87-143");
  EXPECT_EQ(pdsh.what.call, "fi_mr_regattr");
  EXPECT_EQ(pdsh.what.err, ENOMEM);
  nccl_event stamped = must_parse(
      "[2025-03-01 10:00:01] 2025-03-01T10:00:01.123Z n1:7:8 [0] NCCL WARN Call to "
      "ibv_reg_mr failed with error Bad address");
  EXPECT_EQ(stamped.host, "n1");
  EXPECT_EQ(stamped.what.err, EFAULT);
  // "RuntimeError: " is not a host.
  nccl_event rt = must_parse(
      "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL "
      "version 2.10.3");
  EXPECT_EQ(rt.host, "");
  EXPECT_EQ(rt.what.what, failure::kind::system_error);
}

TEST(nccl_log_line, completion_errors_carry_wc_status_not_errno) {
  nccl_event old = must_parse(
      "node1:5:6 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, opcode 1, len 21938, "
      "vendor err 81");
  EXPECT_EQ(old.what.what, failure::kind::completion_error);
  EXPECT_EQ(old.what.wc_status, 4);
  EXPECT_EQ(old.what.err, 0);
  nccl_event peer = must_parse(
      "node1:5:6 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.1.2<42911> with "
      "error 12, opcode 32753, len 0, vendor err 129 (Recv) localGid ::ffff:10.1.1.1 remoteGids ::ffff:10.1.1.2");
  EXPECT_EQ(peer.what.wc_status, 12);
  EXPECT_EQ(peer.what.peer, "10.1.1.2<42911>");
  nccl_event status = must_parse(
      "n:1:2 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<1234> with "
      "status=5 opcode=0 len=0 vendor err 249 (Send)");
  EXPECT_EQ(status.what.wc_status, 5);
}

TEST(nccl_log_line, no_device_dmabuf_register_and_wrappers) {
  EXPECT_EQ(must_parse("nccl-tests:286:286 [0] NCCL INFO NET/IB : No device found.").what.what,
            failure::kind::no_device);
  nccl_event ucx = must_parse(
      "[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: "
      "ibv_create_cq() failed: Cannot allocate memory. Please set max locked memory");
  EXPECT_EQ(ucx.what.call, "ibv_create_cq");
  EXPECT_EQ(ucx.what.err, ENOMEM);
  nccl_event ms = must_parse(
      "mscclpp._mscclpp.IbError: (14, 'ibv_reg_mr failed (errno 14) (Ib failure: Bad "
      "address)')");
  EXPECT_EQ(ms.what.call, "ibv_reg_mr");
  EXPECT_EQ(ms.what.err, EFAULT);
  nccl_event dma = must_parse("n:1:2 [0] NCCL WARN NET/IB : DMA-BUF registration failed: Operation not supported");
  EXPECT_EQ(dma.what.call, "dmabuf");
  EXPECT_EQ(dma.what.err, EOPNOTSUPP);
  nccl_event reg = must_parse("n:1:2 [0] NCCL WARN Failed to register memory");
  EXPECT_EQ(reg.what.call, "");
  EXPECT_EQ(reg.what.err, 0);
}

TEST(nccl_log_line, ordinary_lines_are_not_failures) {
  for (const char* line : {
           "n:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>",
           "n:1:1 [0] NCCL INFO DMA-BUF is available on GPU device 0",
           "n:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying",
           "n:1:1 [0] NCCL INFO transport/net_ib.cc:659 -> 2",
           "n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
           "#  Out of bounds values : 0 OK",
           "epoch 3 loss 0.123 (no failures so far)",
           "",
       }) {
    EXPECT_FALSE(parse_nccl_line(line).has_value()) << line;
  }
}

TEST(nccl_log_scanner, groups_repeats_and_lists_ranks_and_hosts) {
  nccl_log_scanner s;
  s.feed_line("a:100:100 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 4 cudaDev 0 busId 1000 - Init START");
  s.feed_line("a:101:101 [1] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 4 cudaDev 1 busId 2000 - Init START");
  s.feed_line("b:200:200 [0] NCCL INFO comm 0x3 rank 2 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0");
  for (const char* host_pid : {"a:100:150", "a:101:151", "b:200:250"}) {
    s.feed_line(std::string(host_pid) +
                " [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory");
    s.feed_line(std::string(host_pid) + " [0] NCCL INFO transport/net_ib.cc:1243 -> 2");
  }
  s.feed_line("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)");
  s.feed_line("b:201:201 [1] NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory");
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 2u);
  const nccl_group& g = *groups[0];
  EXPECT_EQ(g.what.call, "ibv_reg_mr_iova2");
  EXPECT_EQ(g.count, 3u);
  EXPECT_EQ(g.ranks, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(g.hosts, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(g.processes.size(), 3u);
  EXPECT_EQ(g.lines, (std::vector<std::uint64_t>{4, 6, 8}));
  EXPECT_EQ(g.consequences, 1u);  // the RuntimeError line
  EXPECT_EQ(groups[1]->what.call, "ibv_create_cq");
  EXPECT_TRUE(groups[1]->ranks.empty());  // pid 201 never announced a rank
  EXPECT_EQ(s.lines(), 11u);
}

TEST(nccl_log_scanner, system_error_after_unrecognised_warnings_makes_the_first_one_the_finding) {
  // The warning NCCL failed on is the finding (with its call and errno), not a bare "system error".
  nccl_log_scanner s;
  s.feed_line(
      "n:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1234> failed : "
      "Connection refused");
  s.feed_line("n:1:3 [0] NCCL WARN some other warning");
  auto ev = s.feed_line("torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error");
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->what.what, failure::kind::fatal_warning);
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->what.what, failure::kind::fatal_warning);
  EXPECT_EQ(groups[0]->what.call, "connect");
  EXPECT_EQ(groups[0]->what.err, ECONNREFUSED);
  EXPECT_EQ(groups[0]->lines, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(groups[0]->consequences, 1u);
  EXPECT_TRUE(groups[0]->context.empty());
}

TEST(nccl_log_scanner, system_error_alone_is_still_a_finding) {
  nccl_log_scanner s;
  s.feed_line("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)");
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->what.what, failure::kind::system_error);
}

TEST(nccl_log_scanner, consequence_window_is_bounded) {
  nccl_log_scanner::limits l;
  l.attach_window = 3;
  nccl_log_scanner s(l);
  s.feed_line("n:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address");
  for (int i = 0; i < 5; ++i) s.feed_line("noise");
  s.feed_line("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.");
  EXPECT_EQ(s.groups().size(), 2u);  // too far away: its own finding
}

TEST(nccl_log_scanner, caps_groups_ranks_and_lines) {
  nccl_log_scanner::limits l;
  l.max_groups = 2;
  l.max_ranks = 3;
  nccl_log_scanner s(l);
  for (int r = 0; r < 100; ++r) {
    s.feed_line(fmt::format("{}: n:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address", r));
  }
  s.feed_line("n:1:2 [0] NCCL WARN Call to ibv_create_qp failed with error Bad address");
  s.feed_line("n:1:2 [0] NCCL WARN Call to ibv_create_cq failed with error Bad address");
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]->count, 100u);
  EXPECT_EQ(groups[0]->ranks.size(), 3u);
  EXPECT_TRUE(groups[0]->ranks_capped);
  EXPECT_EQ(groups[0]->lines.size(), nccl_log_scanner::k_max_lines_kept);
  EXPECT_EQ(s.dropped_events(), 1u);
}

// Writes `data` to a pipe-backed temp file and scans it; returns the scanner.
nccl_log_scanner scan_string(const std::string& data, nccl_log_scanner::limits l = {}) {
  std::FILE* f = std::tmpfile();
  EXPECT_NE(f, nullptr);
  std::fwrite(data.data(), 1, data.size(), f);
  std::fflush(f);
  std::rewind(f);
  nccl_log_scanner s(l);
  status st = scan_fd(fileno(f), s);
  EXPECT_TRUE(st.is_ok()) << st.message();
  std::fclose(f);
  return s;
}

// "VmHWM:" or "VmRSS:" of this process in KiB; -1 if unreadable.
long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::char_traits<char>::length(key)));
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so a later VmHWM is the peak of what ran in between.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

TEST(nccl_log_stream, ten_megabyte_line_is_cut_not_stored) {
  std::string data(10 << 20, 'x');
  data += " NCCL WARN Call to ibv_reg_mr failed with error Bad address\n";  // beyond the cap: never seen
  data += "n:1:2 [0] NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n";
  nccl_log_scanner s = scan_string(data);
  EXPECT_EQ(s.lines(), 2u);
  EXPECT_EQ(s.truncated_lines(), 1u);
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->what.call, "ibv_create_cq");
}

TEST(nccl_log_stream, binary_garbage_and_no_trailing_newline) {
  std::mt19937 rng(42);
  std::string data;
  for (int i = 0; i < (4 << 20); ++i) data.push_back(static_cast<char>(rng() & 0xff));
  using namespace std::string_literals;
  data += "\n\0\0n:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address"s;  // last line unterminated
  nccl_log_scanner s = scan_string(data);
  bool found = false;
  for (const nccl_group* g : s.groups()) {
    if (g->what.call == "ibv_reg_mr" && g->what.err == EFAULT) found = true;
    EXPECT_EQ(g->example.find('\n'), std::string::npos);
  }
  EXPECT_TRUE(found);
}

TEST(nccl_log_stream, large_log_streams_in_bounded_memory) {
  // ~64 MiB of interleaved INFO lines from 64 ranks with a failure every 1000 lines, through a pipe so that nothing
  // can be mapped: peak RSS must not grow with the input.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  if (!reset_peak_rss()) GTEST_SKIP() << "cannot reset VmHWM through /proc/self/clear_refs";
  const long before = status_kib("VmRSS:");
  ASSERT_GT(before, 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    std::string chunk;
    for (int i = 0; i < 1000; ++i) {
      chunk += fmt::format("{}: node{:03}:{}:{} [{}] NCCL INFO Channel {:02}/32 : 0[0] -> 1[1] via NET/IB/0/GDRDMA\n",
                           i % 64, i % 16, 1000 + i % 64, 2000 + i, i % 8, i % 32);
    }
    chunk +=
        "7: node007:1007:2007 [7] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
        "Cannot allocate memory\n";
    std::size_t total = 0;
    while (total < (64u << 20)) {
      const char* p = chunk.data();
      std::size_t left = chunk.size();
      while (left > 0) {
        ssize_t w = write(fds[1], p, left);
        if (w <= 0) _exit(1);
        p += w;
        left -= static_cast<std::size_t>(w);
      }
      total += chunk.size();
    }
    _exit(0);
  }
  close(fds[1]);
  nccl_log_scanner s;
  status st = scan_fd(fds[0], s);
  close(fds[0]);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  ASSERT_TRUE(st.is_ok());
  EXPECT_GT(s.bytes(), 64u << 20);
  auto groups = s.groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_GT(groups[0]->count, 500u);
  EXPECT_EQ(groups[0]->ranks, std::set<int>{7});
  // The scanner's own state is a few KiB; allow 16 MiB of slack for allocator and test-framework noise. Under
  // AddressSanitizer freed blocks wait in its quarantine (256 MiB by default) instead of being reused, so there
  // the resident peak also counts the per-line header strings (host, thread) freed long ago: 64 MiB of slack,
  // still well below the 64 MiB stream a scanner that kept its input would hold on top.
#if defined(__SANITIZE_ADDRESS__)
  constexpr long k_slack_kib = 64 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr long k_slack_kib = 64 * 1024;
#else
  constexpr long k_slack_kib = 16 * 1024;
#endif
#else
  constexpr long k_slack_kib = 16 * 1024;
#endif
  const long peak = status_kib("VmHWM:");
  EXPECT_LT(peak - before, k_slack_kib) << "peak " << peak << " KiB, before " << before << " KiB";
}

}  // namespace
}  // namespace mrcheck
