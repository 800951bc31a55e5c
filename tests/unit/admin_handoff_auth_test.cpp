// B8 (SECURITY.md): a user who binds node 0's admin handoff port first must not take the other nodes' records
// and answer "ok". The stranger (uid 65534, a private munged: munge_fixture.h) listens on the first port of the
// step's sequence and answers with its own credential; the collector refuses it with a line that names it and
// hands its record to root's listener on the next port. On the old handoff the stranger's "ok" was taken as
// delivered and the record was lost.
#include "munge_fixture.h"
#include "sys/tcp_listen.h"

#include <mrcheck/admin_record.h>
#include <mrcheck/nccl_probe.h>

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace mrcheck {
namespace {

using clock = std::chrono::steady_clock;

node_record one_record(std::uint32_t node_id) {
  return node_record{node_id, "node2", {{"memlock", verdict::warn, "memlock=8MiB"}}};
}

// The stranger's listener: reads each hello, answers with a credential of its own (it knows the nonce from the
// hello) and then "ok" to whatever comes.
void squat(std::uint16_t port, std::uint64_t job, std::uint64_t step, const munge_settings& ms) {
  int err = 0;
  int l = tcp_listen_any(port, 8, &err);
  if (l < 0) return;
  auto until = clock::now() + std::chrono::seconds(4);
  while (clock::now() < until) {
    pollfd p{l, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    int c = ::accept(l, nullptr, nullptr);
    if (c < 0) continue;
    char buf[256] = {};
    ssize_t n = ::recv(c, buf, sizeof buf - 1, 0);
    std::string hello(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    munge_session s({"admin-handoff", ms.cluster, job, step}, "listener", "collector", {0, 0}, ms);
    if (hello.size() > 33) s.set_peer_nonce(hello.substr(hello.size() - 33, 32));
    auto cred = s.seal("hello");
    std::string reply = "auth " + (cred ? *cred : std::string("x")) + "\n";
    (void)!::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
    (void)!::recv(c, buf, sizeof buf, 0);
    (void)!::send(c, "ok\n", 3, MSG_NOSIGNAL);
    ::close(c);
  }
  ::close(l);
}

TEST(admin_handoff_auth, a_user_on_node_0s_port_is_refused_and_the_record_reaches_root) {
  if (::geteuid() != 0) GTEST_SKIP() << "binding a source port below 1024 needs root";
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::uint64_t job = 3900000000ULL + static_cast<std::uint64_t>(::getpid());
  std::uint16_t first = nccl_pair_port(job, 7 ^ k_admin_port_salt, 0);
  pid_t stranger = test::start_stranger([&] { squat(first, job, 7, ms); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it binds before node 0's collector starts
  auto l = admin_listener::open(job, 7);
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_NE(l->port(), first);
  std::vector<std::string> refused;
  status sent = status::error("not run");
  std::thread t([&] {
    sent = admin_send_record("127.0.0.1", "127.0.0.1", job, 7, one_record(1), clock::now() + std::chrono::seconds(6),
                             ms, refused);
  });
  auto got = admin_accept_record(*l, job, 7, std::chrono::seconds(6), {"127.0.0.1", "127.0.0.1"}, ms);
  t.join();
  test::reap_stranger(stranger);
  ASSERT_TRUE(sent) << sent.message();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->node_id, 1u);
  EXPECT_EQ(*got, one_record(1));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("refused node 0 listener 127.0.0.1 port " + std::to_string(first)), std::string::npos)
      << refused[0];
  EXPECT_NE(refused[0].find("uid 65534"), std::string::npos) << refused[0];
}

TEST(admin_handoff_auth, munged_down_the_collectors_say_they_could_not_authenticate) {
  if (::geteuid() != 0) GTEST_SKIP() << "binding a source port below 1024 needs root";
  munge_settings down;
  down.socket = "/nonexistent/munge.socket";
  std::uint64_t job = 3800000000ULL + static_cast<std::uint64_t>(::getpid());
  auto l = admin_listener::open(job, 8);
  ASSERT_TRUE(l) << l.error().message();
  std::vector<std::string> refused;
  status sent = status::error("not run");
  std::thread t([&] {
    sent = admin_send_record("127.0.0.1", "127.0.0.1", job, 8, one_record(1), clock::now() + std::chrono::seconds(5),
                             down, refused);
  });
  auto got = admin_accept_record(*l, job, 8, std::chrono::seconds(5), {"127.0.0.1", "127.0.0.1"}, down);
  t.join();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message().find("could not authenticate"), std::string::npos) << got.error().message();
  ASSERT_FALSE(sent);
  EXPECT_NE(sent.message().find("could not authenticate"), std::string::npos) << sent.message();
}

}  // namespace
}  // namespace mrcheck
