// The data-plane probe between nodes (include/mrcheck/rdma_probe.h, src/rdma/rdma_peers.cpp): two "nodes" of
// a step in one process (two threads on 127.0.0.1) over the fake libibverbs's data path (tests/fakes), meeting
// on the authenticated channel of the NCCL pair with a private munged (munge_fixture.h). The pair passes with
// every byte verified; each hostile or broken peer - a stranger listening first (uid 65534), a peer of another
// MUNGE key, garbage or a line the pair does not take after the meeting, silence, munged down - ends bounded,
// with the cause named; a failure on one node is named on the other.
#include "munge_fixture.h"
#include "rdma/dp_session.h"

#include <mrcheck/nccl_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/rdma_probe.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

namespace mrcheck {
namespace {

using clock = std::chrono::steady_clock;

TEST(rdma_nodelist, expands_slurm_hostlists_in_order) {
  EXPECT_EQ(expand_nodelist("node[1-3]").value_or(std::vector<std::string>{}),
            (std::vector<std::string>{"node1", "node2", "node3"}));
  EXPECT_EQ(expand_nodelist("gpu[003-004,9],cpu1").value_or(std::vector<std::string>{}),
            (std::vector<std::string>{"gpu003", "gpu004", "gpu9", "cpu1"}));
  EXPECT_EQ(expand_nodelist("a,b").value_or(std::vector<std::string>{}), (std::vector<std::string>{"a", "b"}));
  for (const char* bad : {"", "n[1-", "n[3-1]", "n[a]", "[1]", "n]", "n[1][2]", "n[1,,2]", "a,,b"}) {
    EXPECT_FALSE(expand_nodelist(bad).has_value()) << bad;
  }
  EXPECT_FALSE(expand_nodelist("n[1-100000]", 4096).has_value());
}

TEST(rdma_nodelist, pairs_are_node_k_with_node_k_plus_one) {
  auto r0 = rdma_pair_roles(2, 0), r1 = rdma_pair_roles(2, 1);
  ASSERT_EQ(r0.size(), 1u);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_TRUE(r0[0].serve);
  EXPECT_EQ(r0[0].peer, 1);
  EXPECT_FALSE(r1[0].serve);
  EXPECT_EQ(r1[0].peer, 0);
  EXPECT_EQ(r1[0].pair, 0);
  auto r = rdma_pair_roles(3, 0);  // a ring: serves pair 0 to node 1, joins pair 2 from node 2
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].peer, 1);
  EXPECT_EQ(r[1].pair, 2);
  EXPECT_EQ(r[1].peer, 2);
  EXPECT_TRUE(rdma_pair_roles(1, 0).empty());
  EXPECT_TRUE(rdma_pair_roles(3, 3).empty());
}

class rdma_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = std::string(MRCHECK_BINARY_DIR) + "/fakes/lib/libibverbs.so.1";
    if (!std::filesystem::exists(lib_)) GTEST_SKIP() << "fake libibverbs not built (target fake_ibverbs)";
    if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
    setenv("MRCHECK_FAKE_IBV_DEVICES", "rxe0", 1);
    setenv("MRCHECK_FAKE_IBV_PORT", "eth", 1);
    setenv("MRCHECK_FAKE_IBV_DATA", "loopback", 1);
    unsetenv("MRCHECK_FAKE_IBV_WC");
    job_ = 500000 + static_cast<std::uint64_t>(::getpid()) % 90000 + 100 * ++serial_;
  }
  void TearDown() override {
    for (const char* e :
         {"MRCHECK_FAKE_IBV_DEVICES", "MRCHECK_FAKE_IBV_PORT", "MRCHECK_FAKE_IBV_DATA", "MRCHECK_FAKE_IBV_WC"}) {
      unsetenv(e);
    }
  }
  rdma_probe_request request(int index, const munge_settings& ms, std::chrono::milliseconds meet) const {
    rdma_probe_request req;
    req.sizes = {64, 65536};
    req.iters = 4;
    req.wait = std::chrono::milliseconds(500);
    rdma_peer_request p;
    p.job_id = job_;
    p.step_id = 7;
    p.node_index = index;
    p.nodes = {"127.0.0.1", "127.0.0.1"};
    p.auth = ms;
    p.meet = meet;
    req.peers = p;
    return req;
  }
  // Node 0 and node 1 of the step, each in a thread, with their own munged settings.
  std::pair<rdma_probe_outcome, rdma_probe_outcome> both(const munge_settings& ms0, const munge_settings& ms1,
                                                         std::chrono::milliseconds meet = std::chrono::seconds(5)) {
    rdma_probe_outcome o0, o1;
    vector_log l0, l1;
    std::thread t0([&] { o0 = run_rdma_probe(request(0, ms0, meet), lib_, l0); });
    std::thread t1([&] { o1 = run_rdma_probe(request(1, ms1, meet), lib_, l1); });
    t0.join();
    t1.join();
    return {o0, o1};
  }

  std::string lib_;
  std::uint64_t job_ = 0;
  static inline int serial_ = 0;
};

TEST_F(rdma_pair, two_nodes_exchange_their_qps_and_verify_every_byte) {
  const munge_settings ms = test::shared_munged().settings();
  auto [o0, o1] = both(ms, ms);
  ASSERT_EQ(o0.pairs.size(), 1u);
  ASSERT_EQ(o1.pairs.size(), 1u);
  const auto& a = o0.pairs[0];
  const auto& b = o1.pairs[0];
  EXPECT_TRUE(a.ok) << a.step << ": " << a.message;
  EXPECT_TRUE(b.ok) << b.step << ": " << b.message;
  EXPECT_EQ(a.role, "serve");
  EXPECT_EQ(b.role, "join");
  ASSERT_EQ(a.sizes.size(), 2u);
  ASSERT_EQ(b.sizes.size(), 2u);
  EXPECT_TRUE(a.sizes[1].verified && b.sizes[1].verified);
  EXPECT_GT(a.sizes[1].write_mbps, 0);
  EXPECT_NEAR(b.sizes[1].write_mbps, a.sizes[1].write_mbps, 0.01);  // B reports A's figures
  EXPECT_EQ(a.device, "rxe0");
  EXPECT_EQ(a.peer_gid, b.gid);
  EXPECT_NE(a.tcp_port, 0);
  check_result c = data_plane_check(o0);
  EXPECT_EQ(c.result, verdict::pass) << c.summary;
  EXPECT_NE(c.summary.find("between nodes, every byte verified: pair 0 with 127.0.0.1 (sending)"), std::string::npos)
      << c.summary;
  nlohmann::json j = rdma_probe_to_json(o1);
  EXPECT_EQ(j["scope"], "loopback+nodes");
  EXPECT_EQ(j["pairs"][0]["role"], "join");
  EXPECT_EQ(j["pairs"][0]["ok"], true);
}

TEST_F(rdma_pair, a_completion_error_between_the_nodes_is_named_by_its_status_on_both) {
  // Every send completes with RETRY_EXC_ERR (the fake's counter is the process's, so no one send can be picked
  // here): each loopback fails first, then the pair on the same port.
  setenv("MRCHECK_FAKE_IBV_WC", "RETRY_EXC_ERR", 1);
  const munge_settings ms = test::shared_munged().settings();
  auto [o0, o1] = both(ms, ms);
  ASSERT_EQ(o0.pairs.size(), 1u);
  ASSERT_EQ(o1.pairs.size(), 1u);
  EXPECT_EQ(o0.pairs[0].step, "completion");
  EXPECT_EQ(o0.pairs[0].wc_status, "IBV_WC_RETRY_EXC_ERR");
  EXPECT_NE(o0.pairs[0].message.find("the send (64 bytes) completed with IBV_WC_RETRY_EXC_ERR"), std::string::npos)
      << o0.pairs[0].message;
  check_result c = data_plane_check(o0);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.detail.find("pair 0 with 127.0.0.1 (sending): FAILED at completion: the send (64 bytes) completed with "
                          "IBV_WC_RETRY_EXC_ERR"),
            std::string::npos)
      << c.detail;
  EXPECT_NE(c.hint.find("UDP port 4791"), std::string::npos) << c.hint;
  // The echoing node waited for a message that never came, and names what its peer said.
  EXPECT_FALSE(o1.pairs[0].ok);
  EXPECT_NE(o1.pairs[0].message.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos) << o1.pairs[0].message;
}

TEST_F(rdma_pair, a_stranger_listening_first_is_refused_named_and_passed_by) {
  const munge_settings ms = test::shared_munged().settings();
  const auto ch = dp::rdma_pair_channel(job_, 7, 0);
  // uid 65534 binds the pair's first port and answers with its own credential for 3 s.
  pid_t stranger = test::start_stranger([&] {
    std::vector<std::string> r;
    (void)detail::rendezvous_serve(ch, clock::now() + std::chrono::seconds(3), ms, r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto [o0, o1] = both(ms, ms);
  test::reap_stranger(stranger);
  ASSERT_EQ(o0.pairs.size(), 1u);
  ASSERT_EQ(o1.pairs.size(), 1u);
  EXPECT_TRUE(o0.pairs[0].ok) << o0.pairs[0].message;
  EXPECT_TRUE(o1.pairs[0].ok) << o1.pairs[0].message;
  // They met on the sequence's next port: the stranger held the first.
  EXPECT_EQ(o0.pairs[0].tcp_port, o1.pairs[0].tcp_port);
  EXPECT_EQ(o0.pairs[0].tcp_port, nccl_pair_port(job_, 7 ^ ch.port_salt, 1));
  ASSERT_FALSE(o1.pairs[0].refused.empty());
  EXPECT_NE(o1.pairs[0].refused[0].find("refused credential"), std::string::npos) << o1.pairs[0].refused[0];
  check_result c = data_plane_check(o1);
  EXPECT_EQ(c.result, verdict::pass) << c.summary;
  EXPECT_NE(c.summary.find("refused on the way: rdma pair 0: refused peer 127.0.0.1"), std::string::npos) << c.summary;
}

TEST_F(rdma_pair, a_peer_of_another_munge_key_is_refused_on_both_sides_in_bounded_time) {
  test::private_munged other;
  ASSERT_TRUE(other.ok()) << other.why();
  auto t0 = clock::now();
  auto [o0, o1] = both(test::shared_munged().settings(), other.settings(), std::chrono::milliseconds(2500));
  EXPECT_LT(clock::now() - t0, std::chrono::seconds(8));
  for (const auto* o : {&o0, &o1}) {
    ASSERT_EQ(o->pairs.size(), 1u);
    const auto& p = o->pairs[0];
    EXPECT_FALSE(p.ok);
    EXPECT_EQ(p.cause, "auth") << p.message;
    EXPECT_NE(p.message.find("MUNGE"), std::string::npos) << p.message;
    check_result c = data_plane_check(*o);
    EXPECT_EQ(c.result, verdict::fail);
    EXPECT_NE(c.hint.find("munged"), std::string::npos) << c.hint;
  }
}

TEST_F(rdma_pair, munged_down_fails_at_once_naming_it) {
  munge_settings down = test::shared_munged().settings();
  down.socket = "/nonexistent/munge.socket";
  rdma_probe_outcome o;
  vector_log l;
  auto t0 = clock::now();
  o = run_rdma_probe(request(1, down, std::chrono::seconds(5)), lib_, l);
  EXPECT_LT(clock::now() - t0, std::chrono::seconds(3));
  ASSERT_EQ(o.pairs.size(), 1u);
  EXPECT_EQ(o.pairs[0].cause, "auth");
  EXPECT_NE(o.pairs[0].message.find("could not authenticate"), std::string::npos) << o.pairs[0].message;
}

// A peer that meets properly (the job's uid, the right channel) and then says `line`: the pair ends bounded,
// naming why.
rdma_pair_result against_peer_saying(const std::string& lib, const rdma_probe_request& req, const std::string& line,
                                     bool sealed) {
  const munge_settings& ms = req.peers->auth;
  auto ch = dp::rdma_pair_channel(req.peers->job_id, req.peers->step_id, 0);
  std::thread peer([&] {
    std::vector<std::string> r;
    auto rv = detail::rendezvous_serve(ch, clock::now() + std::chrono::seconds(5), ms, r);
    if (!rv) return;
    if (sealed) {
      (void)detail::send_sealed_line(*rv, line);
    } else if (!line.empty()) {
      (void)!::write(rv->fd, line.data(), line.size());
    }
    (void)detail::read_sealed_line(*rv, clock::now() + std::chrono::seconds(3));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::close(rv->fd);
  });
  vector_log l;
  rdma_probe_outcome o = run_rdma_probe(req, lib, l);
  peer.join();
  return o.pairs.empty() ? rdma_pair_result{} : o.pairs[0];
}

TEST_F(rdma_pair, garbage_a_bad_qp_line_and_silence_after_the_meeting_end_bounded_and_named) {
  auto req = request(1, test::shared_munged().settings(), std::chrono::milliseconds(1200));
  auto t0 = clock::now();
  auto garbage = against_peer_saying(lib_, req, "m AAAAgarbage\n", false);
  EXPECT_EQ(garbage.cause, "auth") << garbage.message;
  EXPECT_NE(garbage.message.find("refused credential"), std::string::npos) << garbage.message;
  job_ += 1;
  req = request(1, test::shared_munged().settings(), std::chrono::milliseconds(1200));
  auto bad = against_peer_saying(lib_, req, "qp 0 0 - 9 0 0", true);
  EXPECT_EQ(bad.cause, "protocol") << bad.message;
  EXPECT_NE(bad.message.find("answered 'qp 0 0 - 9 0 0'"), std::string::npos) << bad.message;
  job_ += 1;
  req = request(1, test::shared_munged().settings(), std::chrono::milliseconds(1200));
  auto silent = against_peer_saying(lib_, req, "", false);
  EXPECT_EQ(silent.cause, "no_peer") << silent.message;
  EXPECT_NE(silent.message.find("no answer in time"), std::string::npos) << silent.message;
  EXPECT_LT(clock::now() - t0, std::chrono::seconds(15));
}

TEST_F(rdma_pair, nobody_on_the_other_node_is_no_route_on_the_joiner_and_no_peer_on_the_server) {
  vector_log l;
  auto t0 = clock::now();
  auto join = run_rdma_probe(request(1, test::shared_munged().settings(), std::chrono::milliseconds(800)), lib_, l);
  job_ += 1;
  auto serve = run_rdma_probe(request(0, test::shared_munged().settings(), std::chrono::milliseconds(800)), lib_, l);
  EXPECT_LT(clock::now() - t0, std::chrono::seconds(6));
  ASSERT_EQ(join.pairs.size(), 1u);
  ASSERT_EQ(serve.pairs.size(), 1u);
  EXPECT_EQ(join.pairs[0].cause, "no_route");
  EXPECT_NE(join.pairs[0].message.find("no route between the nodes"), std::string::npos) << join.pairs[0].message;
  EXPECT_EQ(serve.pairs[0].cause, "no_peer");
  check_result c = data_plane_check(join);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("RDMA between nodes: pair 0 with 127.0.0.1 on rxe0:1: connect: no route"), std::string::npos)
      << c.summary;
}

TEST_F(rdma_pair, a_node_whose_port_is_down_tells_its_peer_which_names_it) {
  // Node 1 without a device (its library lists none) still meets and says why; node 0 names node 1's cause.
  const munge_settings ms = test::shared_munged().settings();
  rdma_probe_outcome o0, o1;
  vector_log l0, l1;
  std::thread t0([&] { o0 = run_rdma_probe(request(0, ms, std::chrono::seconds(5)), lib_, l0); });
  std::thread t1([&] { o1 = run_rdma_probe(request(1, ms, std::chrono::seconds(5)), "libno-such-verbs.so.1", l1); });
  t0.join();
  t1.join();
  ASSERT_EQ(o0.pairs.size(), 1u);
  ASSERT_EQ(o1.pairs.size(), 1u);
  EXPECT_EQ(o1.pairs[0].cause, "port_down");
  EXPECT_EQ(o0.pairs[0].cause, "peer") << o0.pairs[0].message;
  EXPECT_NE(o0.pairs[0].message.find("127.0.0.1 failed: port: no ACTIVE port on this node for the pair"),
            std::string::npos)
      << o0.pairs[0].message;
}

}  // namespace
}  // namespace mrcheck
