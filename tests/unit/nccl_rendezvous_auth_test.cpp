// B5 (SECURITY.md): a stranger must not play the other node of a job's node-pair NCCL probe. The port is a
// public function of job and step, so a stranger (uid 65534 here, against a private munged: munge_fixture.h)
// can connect first to rank 0's node or listen first on the port; both are refused, named, and the job's two
// nodes still meet. On the old rendezvous (hello "mrcheck-nccl 1 JOB.STEP" alone) the stranger was the peer.
#include "munge_fixture.h"
#include "nccl/rendezvous.h"

#include <mrcheck/nccl_probe.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace mrcheck {
namespace {

using clock = std::chrono::steady_clock;

bool any_names(const std::vector<std::string>& lines, std::string_view a, std::string_view b) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(nccl_rendezvous_auth, a_stranger_who_connects_first_is_refused_and_the_job_peer_meets) {
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::uint64_t job = 300000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  // The stranger knocks on the job's port for 1.5 s, from its first moment.
  pid_t stranger = test::start_stranger([&] {
    std::vector<std::string> r;
    (void)detail::rendezvous_join("127.0.0.1", job, 4, clock::now() + std::chrono::milliseconds(1500), ms, r);
  });
  auto deadline = clock::now() + std::chrono::seconds(10);
  std::vector<std::string> refused_s, refused_c;
  result<detail::rendezvous> server = status::error("not run");
  std::thread srv([&] { server = detail::rendezvous_serve(job, 4, deadline, ms, refused_s); });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // the stranger got there first
  auto client = detail::rendezvous_join("127.0.0.1", job, 4, deadline, ms, refused_c);
  srv.join();
  test::reap_stranger(stranger);
  ASSERT_TRUE(server.is_ok()) << server.error().message();
  ASSERT_TRUE(client.is_ok()) << client.error().message();
  EXPECT_TRUE(any_names(refused_s, "refused peer 127.0.0.1", "refused")) << joined(refused_s);
  // The session the job's two sides share carries the id; the stranger's never opened.
  auto id = client->auth->seal("id 0011");
  ASSERT_TRUE(id);
  EXPECT_EQ(server->auth->open(*id).value_or("refused"), "id 0011");
  ::close(server->fd);
  ::close(client->fd);
}

TEST(nccl_rendezvous_auth, a_stranger_who_listens_first_is_refused_and_the_walk_goes_on) {
  if (!test::shared_munged().ok()) GTEST_SKIP() << test::shared_munged().why();
  const munge_settings ms = test::shared_munged().settings();
  std::uint64_t job = 200000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  pid_t stranger = test::start_stranger([&] {
    std::vector<std::string> r;
    (void)detail::rendezvous_serve(job, 5, clock::now() + std::chrono::seconds(4), ms, r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // it holds the first port of the sequence
  auto deadline = clock::now() + std::chrono::seconds(10);
  std::vector<std::string> refused_s, refused_c;
  result<detail::rendezvous> server = status::error("not run");
  std::thread srv([&] { server = detail::rendezvous_serve(job, 5, deadline, ms, refused_s); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto client = detail::rendezvous_join("127.0.0.1", job, 5, deadline, ms, refused_c);
  srv.join();
  test::reap_stranger(stranger);
  ASSERT_TRUE(server.is_ok()) << server.error().message();
  ASSERT_TRUE(client.is_ok()) << client.error().message();
  EXPECT_EQ(server->attempt, 1);
  EXPECT_EQ(client->attempt, 1);
  EXPECT_TRUE(any_names(refused_c, "refused peer 127.0.0.1 port " + std::to_string(nccl_pair_port(job, 5, 0)),
                        "refused credential"))
      << joined(refused_c);
  ::close(server->fd);
  ::close(client->fd);
}

TEST(nccl_rendezvous_auth, munged_down_the_rendezvous_says_it_could_not_authenticate) {
  munge_settings down;
  down.socket = "/nonexistent/munge.socket";
  std::uint64_t job = 100000 + static_cast<std::uint64_t>(::getpid()) % 90000;
  auto deadline = clock::now() + std::chrono::seconds(5);
  std::vector<std::string> refused_s, refused_c;
  result<detail::rendezvous> server = status::error("not run");
  std::thread srv([&] { server = detail::rendezvous_serve(job, 6, deadline, down, refused_s); });
  auto client = detail::rendezvous_join("127.0.0.1", job, 6, deadline, down, refused_c);
  srv.join();
  ASSERT_FALSE(server.is_ok());
  ASSERT_FALSE(client.is_ok());
  EXPECT_NE(server.error().message().find("could not authenticate"), std::string::npos) << server.error().message();
  EXPECT_LT(clock::now(), deadline);  // it said so at once, it did not wait for a peer it cannot trust
}

}  // namespace
}  // namespace mrcheck
