// The admins' record: node records, the step line, appending within the length limit, report_dir.
#include <mrcheck/admin_record.h>
#include <mrcheck/step.h>

#include "munge_fixture.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace mrcheck {
namespace {

node_record rec(std::uint32_t id, std::string node, std::vector<node_check> checks) {
  return node_record{id, std::move(node), std::move(checks)};
}
node_check pass_memlock() { return {"memlock", verdict::pass, "memlock=8MiB"}; }
node_check fail_memlock() { return {"memlock", verdict::fail, "memlock=64KiB (submit-host propagation)"}; }

TEST(admin_record, memlock_token_names_the_limit_and_the_hop) {
  node_state st;
  st.active = true;
  st.prediction.start = {64 * 1024, 8 << 20};
  st.prediction.hop = memlock_hop::submit_host;
  report rep;
  rep.checks.push_back(
      {"memlock", verdict::fail, "task will start with memlock soft 64 KiB < required 8 MiB", "", "fix"});
  rep.checks.push_back({"mr_host", verdict::fail, "ibv_reg_mr: ENOMEM | injected; x", "", ""});
  rep.checks.push_back({"dmabuf", verdict::skip, "no GPU", "", ""});
  node_record r = make_node_record(2, "node2", st, rep);
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[0].token, "memlock=64KiB (submit-host propagation)");
  EXPECT_EQ(r.checks[1].token.find('|'), std::string::npos) << r.checks[1].token;
  EXPECT_EQ(r.checks[1].token.find(';'), std::string::npos) << r.checks[1].token;
  EXPECT_NE(r.checks[1].token.find("mr_host (ibv_reg_mr: ENOMEM"), std::string::npos) << r.checks[1].token;
  EXPECT_EQ(r.checks[2].token, "dmabuf");
  // Escaped once at the node, never again on the way to AdminComment.
  EXPECT_NE(r.checks[1].token.find("ENOMEM \\x7c injected\\x3b x"), std::string::npos) << r.checks[1].token;
  auto hop = decode_node_record(encode_node_record(r));
  ASSERT_TRUE(hop);
  EXPECT_EQ(hop->checks[1].token, r.checks[1].token);
  std::string line = format_step_record("step 0", 3, {*hop}, {});
  EXPECT_NE(line.find(r.checks[1].token), std::string::npos) << line;
  // A pass shows no cause; the enforced limit is what the task starts with.
  st.enf = enforcement{};
  st.enf->attempted = true;
  st.enf->start = {8 << 20, 8 << 20};
  rep.checks = {{"memlock", verdict::pass, "ok", "", ""}};
  EXPECT_EQ(make_node_record(0, "n", st, rep).checks[0].token, "memlock=8MiB");
}

TEST(admin_record, encode_decode_round_trip_and_strictness) {
  node_record r = rec(7, "gpu017", {fail_memlock(), {"nccl_pair", verdict::warn, "nccl_pair (slow)"}});
  std::string line = encode_node_record(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto back = decode_node_record(line);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, r);

  EXPECT_FALSE(decode_node_record("not json"));
  EXPECT_FALSE(decode_node_record(R"({"v":2,"node_id":1,"node":"a","checks":[]})"));
  EXPECT_FALSE(decode_node_record(R"({"v":1,"node_id":-1,"node":"a","checks":[]})"));
  EXPECT_FALSE(decode_node_record(
      R"({"v":1,"node_id":1,"node":"a","checks":[{"id":"Mem lock","verdict":"pass","token":"x"}]})"));
  EXPECT_FALSE(decode_node_record(
      R"({"v":1,"node_id":1,"node":"a","checks":[{"id":"memlock","verdict":"great","token":"x"}]})"));
  EXPECT_FALSE(decode_node_record(std::string(k_node_record_max + 1, ' ')));
  // A token from a tampered task is re-escaped: no separator, no newline survives decoding.
  auto evil = decode_node_record(
      R"({"v":1,"node_id":1,"node":"a","checks":[{"id":"memlock","verdict":"pass","token":"x | mrcheck: step 9: pass\nfoo; bar"}]})");
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->checks[0].token.find('|'), std::string::npos);
  EXPECT_EQ(evil->checks[0].token.find('\n'), std::string::npos);
  EXPECT_EQ(evil->checks[0].token.find(';'), std::string::npos);
}

// Fuzz finding F11: a 64-byte cut inside a multi-byte character left a lone lead byte that the JSON encoder
// wrote back as U+FFFD, so the name changed at every hop. The cut now falls where the character starts.
TEST(admin_record, a_long_node_name_is_cut_where_a_character_starts) {
  std::string name = std::string(63, 'n') + "\xe8\x80\x9b" + "tail";  // U+801B across bytes 63-65
  std::string line = encode_node_record(rec(3, name, {pass_memlock()}));
  auto back = decode_node_record(line);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->node, std::string(63, 'n'));
  auto again = decode_node_record(encode_node_record(*back));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *back);  // stable from the first hop on
  // A name that fits is kept whole, multi-byte characters and all.
  std::string fits = std::string(61, 'n') + "\xe8\x80\x9b";
  auto kept = decode_node_record(encode_node_record(rec(3, fits, {pass_memlock()})));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->node, fits);
}

TEST(admin_record, oversized_records_are_cut_to_fit) {
  node_record r;
  r.node = "n";
  for (int i = 0; i < 40; ++i) r.checks.push_back({"c" + std::to_string(i), verdict::fail, std::string(400, 'x')});
  std::string line = encode_node_record(r);
  EXPECT_LE(line.size(), k_node_record_max);
  auto back = decode_node_record(line);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->checks.size(), k_node_checks_max);
}

TEST(admin_record, step_record_names_the_bad_node_and_counts_the_rest) {
  std::vector<node_record> got = {rec(0, "node1", {pass_memlock()}), rec(1, "node2", {fail_memlock()}),
                                  rec(2, "node3", {pass_memlock()})};
  EXPECT_EQ(format_step_record("step 3", 3, got, {}),
            "mrcheck: step 3: FAIL memlock=64KiB (submit-host propagation) on node2; pass on 2 nodes");
  EXPECT_EQ(format_step_record("step 0", 3, {got[0], got[2], got[0]}, {"node1", "node2", "node3"}),
            "mrcheck: step 0: pass on 2 nodes; no report from node2");
  EXPECT_EQ(format_step_record("batch", 1, {got[0]}, {}), "mrcheck: batch: pass on 1 node");
  EXPECT_EQ(format_step_record("step 1", 2, {}, {"a"}), "mrcheck: step 1: no report from a,node index 1");
  // Node 0's task began checking and ended without its record (a cancelled step).
  EXPECT_EQ(format_step_record("step 4", 2, {}, {"n1", "n2"}, true),
            "mrcheck: step 4: cancelled; no report from n1,n2");
  EXPECT_EQ(format_step_record("step 5", 3, {got[2]}, {"node1", "node2", "node3"}, true),
            "mrcheck: step 5: cancelled; pass on 1 node; no report from node1,node2");
  // The same finding on several nodes is one item; worst first.
  std::vector<node_record> many = {rec(0, "a", {{"mr_host", verdict::warn, "mr_host (slow)"}}),
                                   rec(1, "b", {fail_memlock()}), rec(2, "c", {fail_memlock()})};
  EXPECT_EQ(
      format_step_record("step 2", 3, many, {}),
      "mrcheck: step 2: FAIL memlock=64KiB (submit-host propagation) on b,c; WARN mr_host (slow) on a per the job's "
      "probe");
  // What the job's own probe said is marked as such, failing or passing (README, "What the AdminComment record says").
  std::vector<node_record> probed =
      {rec(0, "a", {pass_memlock(), {"mr_host", verdict::pass, "mr_host"}, {"nccl_pair", verdict::pass, "nccl_pair"}}),
       rec(1, "b", {pass_memlock(), {"mr_host", verdict::fail, "mr_host (ENOMEM)"}})};
  EXPECT_EQ(
      format_step_record("step 5", 2, probed, {}),
      "mrcheck: step 5: FAIL mr_host (ENOMEM) on b per the job's probe; pass on 1 node (mr_host,nccl_pair per the "
      "job's probe)");
  // The container helper's checks are the job's word too: its image's libraries ran in it (README, "What the
  // AdminComment record says").
  std::vector<node_record> contained = {
      rec(0, "a", {pass_memlock(), {"container_mr", verdict::fail, "container_mr (ENOMEM)"}})};
  EXPECT_EQ(format_step_record("step 6", 1, contained, {}),
            "mrcheck: step 6: FAIL container_mr (ENOMEM) on a per the job's probe");
  // Node ids out of range are ignored; hostile names cannot add items or records.
  std::vector<node_record> hostile = {rec(0, "x|y;z,w\nv", {pass_memlock()}), rec(5, "ghost", {fail_memlock()})};
  std::string line = format_step_record("step 4", 1, hostile, {});
  EXPECT_EQ(line.find('|'), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.find("ghost"), std::string::npos) << line;
  EXPECT_NE(line.find("pass on 1 node"), std::string::npos) << line;
}

TEST(admin_record, long_node_lists_are_bounded) {
  std::vector<node_record> got;
  for (std::uint32_t i = 0; i < 100; ++i) got.push_back(rec(i, "gpu" + std::to_string(i), {fail_memlock()}));
  std::string line = format_step_record("step 0", 100, got, {});
  EXPECT_NE(line.find("+92 more"), std::string::npos) << line;
  EXPECT_LT(line.size(), 300u) << line;
}

TEST(admin_record, later_steps_append_and_keep_other_text) {
  auto a = append_admin_comment("", "mrcheck: step 0: pass on 1 node", 4096);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "mrcheck: step 0: pass on 1 node");
  auto b = append_admin_comment("site: reboot after job | " + *a, "mrcheck: step 1: FAIL memlock=64KiB on n1", 4096);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, "site: reboot after job | mrcheck: step 0: pass on 1 node | mrcheck: step 1: FAIL memlock=64KiB on n1");
}

// Fuzz finding F9: another tool's text ending in '|' must neither hide our record nor change.
TEST(admin_record, text_ending_in_a_bar_keeps_our_record_recognised) {
  std::string rec0 = "mrcheck: step 0: FAIL memlock=64KiB (slurmd limit) on n1";
  auto a = append_admin_comment("note |", rec0, 4096);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "note | | " + rec0);
  // Small enough that step 0 must be folded to make room for step 1: only possible if it is seen as ours.
  std::string rec1 = "mrcheck: step 1: pass on 1 node";
  auto b = append_admin_comment(*a, rec1, a->size() + 3 + rec1.size() - 1);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->starts_with("note | | mrcheck: earlier steps")) << *b;
  EXPECT_TRUE(b->ends_with(rec1)) << *b;
}

TEST(admin_record, the_length_limit_summarises_oldest_first) {
  std::string ac = "ops: keep me";
  for (int i = 0; i < 40; ++i) {
    std::string r = fmt::format("mrcheck: step {}: {} on node{}; pass on 15 nodes", i,
                                i % 4 == 0 ? "FAIL memlock=64KiB (submit-host propagation)" : "pass", i);
    if (i % 4 != 0) r = fmt::format("mrcheck: step {}: pass on 16 nodes", i);
    auto next = append_admin_comment(ac, r, 400);
    ASSERT_TRUE(next) << i;
    EXPECT_LE(next->size(), 400u) << *next;
    ac = *next;
  }
  EXPECT_TRUE(ac.starts_with("ops: keep me | mrcheck: earlier steps (")) << ac;
  // The newest record is whole, the oldest are counted: 40 steps in all, 10 of them FAIL.
  EXPECT_TRUE(ac.ends_with("mrcheck: step 39: pass on 16 nodes")) << ac;
  std::size_t kept = 0;
  for (std::size_t p = 0; (p = ac.find("mrcheck: step ", p)) != std::string::npos; ++p) ++kept;
  EXPECT_NE(ac.find(fmt::format("earlier steps ({}):", 40 - kept)), std::string::npos) << ac;
  std::size_t kept_fail = 0;
  for (std::size_t p = 0; (p = ac.find(": FAIL", p)) != std::string::npos; ++p) ++kept_fail;
  EXPECT_NE(ac.find(fmt::format("{} FAIL", 10 - kept_fail)), std::string::npos) << ac;
  // Records always stay whole except the newest, which is cut only when nothing else can go.
  auto cut = append_admin_comment("", std::string(600, 'x'), 300);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->size(), 300u);
  EXPECT_TRUE(cut->ends_with("..."));
  // Others' text filling the field is never touched: the record is not written.
  EXPECT_FALSE(append_admin_comment(std::string(290, 'o'), "mrcheck: step 0: pass on 1 node", 300));
}

class admin_report_dir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mrcheck_admin_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(admin_report_dir, writes_the_report_atomically) {
  if (::geteuid() != 0) GTEST_SKIP() << "report_dir must be root's: run as root";
  auto s = write_node_report(dir_, 12, "step 3", "node2", R"({"verdict":"pass","checks":[]})");
  ASSERT_TRUE(s) << s.message();
  std::ifstream f(dir_ + "/job12.step_3.node2.json");
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["verdict"], "pass");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/job12.step_3.node2.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // Overwritten by a later report of the same step and node, never appended to.
  ASSERT_TRUE(write_node_report(dir_, 12, "step 3", "node2", R"({"verdict":"fail","checks":[]})"));
  std::ifstream g(dir_ + "/job12.step_3.node2.json");
  EXPECT_EQ(nlohmann::json::parse(g)["verdict"], "fail");
}

TEST_F(admin_report_dir, refuses_unsafe_dirs_and_names) {
  EXPECT_FALSE(write_node_report("relative", 1, "step 0", "n", "{}"));
  EXPECT_FALSE(write_node_report(dir_, 1, "step 0", "../etc", "{}"));
  EXPECT_FALSE(write_node_report(dir_, 1, "step 0", "a/b", "{}"));
  // A directory others can write: a user could plant links in it.
  ::chmod(dir_.c_str(), 0777);
  auto s = write_node_report(dir_, 1, "step 0", "n", "{}");
  EXPECT_FALSE(s);
  ::chmod(dir_.c_str(), 0755);
  // A symlink as the directory itself is not followed.
  std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_FALSE(write_node_report(link, 1, "step 0", "n", "{}"));
  if (::geteuid() != 0) return;
  // Not root's.
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(write_node_report(dir_, 1, "step 0", "n", "{}"));
}

TEST(admin_handoff, a_record_reaches_node_0_only_from_a_reserved_port) {
  if (::geteuid() != 0) GTEST_SKIP() << "binding a source port below 1024 needs root";
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::vector<std::string> refused;
  std::uint64_t job = 4000000000ULL + static_cast<std::uint64_t>(::getpid());
  auto l = admin_listener::open(job, 3);
  ASSERT_TRUE(l) << l.error().message();
  const std::vector<std::string> addrs = {"127.0.0.1", "127.0.0.1", "127.0.0.1"};
  node_record sent = rec(2, "node3", {fail_memlock()});
  std::thread t([&] {
    auto s = admin_send_record("127.0.0.1", "127.0.0.1", job, 3, sent,
                               std::chrono::steady_clock::now() + std::chrono::seconds(5), ms, refused);
    EXPECT_TRUE(s) << s.message();
  });
  auto got = admin_accept_record(*l, job, 3, std::chrono::seconds(5), addrs, ms);
  t.join();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, sent);

  // A user's process (unprivileged source port) saying the right hello with a forged record is refused.
  std::thread user([&] {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(l->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    std::string msg = fmt::format("mrcheck-admin 2 {}.3 {}\n{}\n", job, munge_nonce(),
                                  encode_node_record(rec(1, "node2", {pass_memlock()})));
    ASSERT_EQ(::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL), static_cast<ssize_t>(msg.size()));
    char buf[16];
    ::recv(fd, buf, sizeof buf, 0);
    ::close(fd);
  });
  auto forged = admin_accept_record(*l, job, 3, std::chrono::seconds(3), addrs, ms);
  user.join();
  ASSERT_FALSE(forged);
  EXPECT_NE(forged.error().message().find("unprivileged port"), std::string::npos) << forged.error().message();
}

// Root elsewhere (a reserved port, the right hello) is still not the node: node 0 takes a record only from the
// address Slurm has for the node index it names, and the sender is told so instead of retrying.
TEST(admin_handoff, a_record_from_another_address_than_its_nodes_is_refused) {
  if (::geteuid() != 0) GTEST_SKIP() << "binding a source port below 1024 needs root";
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::vector<std::string> refused;
  std::uint64_t job = 4100000000ULL + static_cast<std::uint64_t>(::getpid());
  auto l = admin_listener::open(job, 5);
  ASSERT_TRUE(l) << l.error().message();
  node_record sent = rec(1, "node2", {pass_memlock()});
  for (const auto& addrs : {std::vector<std::string>{"127.0.0.1", "192.0.2.7"},  // node 1 lives elsewhere
                            std::vector<std::string>{"127.0.0.1"}}) {            // no node index 1 in the step
    status s = status::ok();
    std::thread t([&] {
      s = admin_send_record("127.0.0.1", "", job, 5, sent, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                            ms, refused);
    });
    auto got = admin_accept_record(*l, job, 5, std::chrono::seconds(5), addrs, ms);
    t.join();
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message().find("refused a record for node index 1 from 127.0.0.1"), std::string::npos)
        << got.error().message();
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("node 0 refused the record"), std::string::npos) << s.message();
  }
  // The sender binds the address it is given when it is one of this host's: 127.0.0.2 is (the loopback /8).
  std::thread t([&] {
    auto s = admin_send_record("127.0.0.1", "127.0.0.2", job, 5, sent,
                               std::chrono::steady_clock::now() + std::chrono::seconds(5), ms, refused);
    EXPECT_TRUE(s) << s.message();
  });
  auto got = admin_accept_record(*l, job, 5, std::chrono::seconds(5), {"127.0.0.1", "127.0.0.2"}, ms);
  t.join();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->node_id, 1u);
}

}  // namespace
}  // namespace mrcheck

namespace mrcheck {

// docs/jobstats.md: jobstats' summary is never changed, and others' text of any content comes back byte for byte.
TEST(admin_record, a_jobstats_summary_is_never_changed) {
  const std::string rec = "mrcheck: step 0: pass on 1 node";
  for (std::string js : {"JS1:H4sIAAAAAAAAA6tWyk9OLkpNTFGyqlbKzU8pzUlVslIqSS0uUapVqgUA", "JS1:Short", "JS1:None"}) {
    EXPECT_TRUE(is_jobstats_summary(js)) << js;
    EXPECT_FALSE(append_admin_comment(js, rec, 65535)) << js;
  }
  EXPECT_FALSE(is_jobstats_summary("site: JS1:x"));
  EXPECT_FALSE(is_jobstats_summary(""));
}

TEST(admin_record, foreign_text_is_kept_byte_for_byte) {
  const std::string rec = "mrcheck: step 2: pass on 1 node";
  std::vector<std::string> foreign = {" lead and trail  ",       "a |  | b", "ends | ",   " | ",
                                      "line\nbreak\ttab",        "|||",      "x | | y |", std::string("nul\0in", 6),
                                      "\xff\xfe utf8? \xc3\xa9", "q\"uo'te;"};
  foreign.push_back(std::string(65535 - 3 - rec.size(), 'z'));  // the most that still leaves room for the record
  for (const auto& f : foreign) {
    auto out = append_admin_comment(f, rec, 65535);
    ASSERT_TRUE(out) << f.size();
    EXPECT_EQ(*out, f + " | " + rec) << f.substr(0, 40);
  }
  // Too big for the record: not written, never cut.
  EXPECT_FALSE(append_admin_comment(std::string(65535, 'z'), rec, 65535));
  EXPECT_FALSE(append_admin_comment(std::string(5000, 'z'), rec, 4096));
  // Folding our own records leaves theirs where they were, byte for byte.
  std::string ac = " ops  | mrcheck: step 0: FAIL memlock=64KiB on n1 | x |";
  auto out = append_admin_comment(ac, rec, ac.size() + 3 + rec.size() - 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, " ops  | mrcheck: earlier steps (1): 1 FAIL | x | | " + rec);
}

}  // namespace mrcheck
