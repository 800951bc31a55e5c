// The channel between nodes (include/mrcheck/munge_auth.h) against a private munged (munge_fixture.h): what it
// accepts, and each credential it must refuse: forged, of another key, replayed, expired, of another uid, of
// another purpose, cluster, job, step or connection, and munged down.
#include "munge_fixture.h"

#include <mrcheck/munge_auth.h>

#include <gtest/gtest.h>

#include <thread>

namespace mrcheck {
namespace {

using test::as_stranger;
using test::private_munged;
using test::shared_munged;

class munge_channel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!shared_munged().ok()) GTEST_SKIP() << "no private munged: " << shared_munged().why();
    ms_ = shared_munged().settings();
  }
  munge_session side(bool serve, munge_binding b = {"nccl-pair", "test", 7, 1}) const {
    return munge_session(b, serve ? "serve" : "join", serve ? "join" : "serve", {::getuid(), ::getgid()}, ms_);
  }
  munge_settings ms_;
};

TEST_F(munge_channel, both_directions_carry_their_bodies_in_sequence) {
  munge_session srv = side(true), cli = side(false);
  srv.set_peer_nonce(cli.nonce());
  auto c1 = srv.seal("hello");
  ASSERT_TRUE(c1) << c1.error().message();
  EXPECT_EQ(c1->find('\n'), std::string::npos);
  auto b1 = cli.open(*c1);
  ASSERT_TRUE(b1) << b1.error().message();
  EXPECT_EQ(*b1, "hello");
  auto c2 = cli.seal("id 00ff");
  ASSERT_TRUE(c2);
  auto b2 = srv.open(*c2);
  ASSERT_TRUE(b2) << b2.error().message();
  EXPECT_EQ(*b2, "id 00ff");
  auto c3 = srv.seal("peer-result ok");
  ASSERT_TRUE(c3);
  EXPECT_EQ(cli.open(*c3).value_or("refused"), "peer-result ok");
}

TEST_F(munge_channel, a_forged_credential_is_refused) {
  munge_session cli = side(false);
  for (const char* forged : {"MUNGE:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==:", "hello", ""}) {
    auto b = cli.open(forged);
    ASSERT_FALSE(b) << forged;
    EXPECT_NE(b.error().message().find("refused credential"), std::string::npos) << b.error().message();
  }
}

TEST_F(munge_channel, a_credential_of_another_key_is_refused) {
  private_munged other;  // another munged, another key: another cluster's credential
  ASSERT_TRUE(other.ok()) << other.why();
  munge_session cli = side(false);
  munge_session srv(munge_binding{"nccl-pair", "test", 7, 1}, "serve", "join", {::getuid(), ::getgid()},
                    other.settings());
  srv.set_peer_nonce(cli.nonce());
  auto c = srv.seal("hello");
  ASSERT_TRUE(c) << c.error().message();
  auto b = cli.open(*c);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("refused credential"), std::string::npos) << b.error().message();
}

TEST_F(munge_channel, a_replayed_credential_is_refused) {
  munge_session srv = side(true), cli = side(false);
  srv.set_peer_nonce(cli.nonce());
  auto c = srv.seal("hello");
  ASSERT_TRUE(c);
  ASSERT_TRUE(cli.open(*c));
  auto again = cli.open(*c);  // the same session: out of sequence, and munged has seen it
  ASSERT_FALSE(again);
  munge_session copy = side(false);
  auto elsewhere = copy.open(*c);  // another session: munged's replay cache
  ASSERT_FALSE(elsewhere);
  EXPECT_NE(elsewhere.error().message().find("eplayed"), std::string::npos) << elsewhere.error().message();
}

TEST_F(munge_channel, an_expired_credential_is_refused) {
  munge_settings short_lived = ms_;
  short_lived.max_age = std::chrono::seconds(1);
  munge_session cli = side(false);
  munge_session srv(munge_binding{"nccl-pair", "test", 7, 1}, "serve", "join", {::getuid(), ::getgid()}, short_lived);
  srv.set_peer_nonce(cli.nonce());
  auto c = srv.seal("hello");
  ASSERT_TRUE(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  auto b = cli.open(*c);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("xpired"), std::string::npos) << b.error().message();
}

TEST_F(munge_channel, a_credential_of_another_uid_is_refused_and_named) {
  munge_session cli = side(false);
  std::string nonce = cli.nonce();
  munge_settings ms = ms_;
  // The stranger may make a credential only the receiver (root) may decode; the receiver still refuses it.
  std::string cred = as_stranger([&] {
    munge_session srv(munge_binding{"nccl-pair", "test", 7, 1}, "serve", "join", {0, 0}, ms);
    srv.set_peer_nonce(nonce);
    auto c = srv.seal("hello");
    return c ? *c : std::string();
  });
  ASSERT_FALSE(cred.empty());
  auto b = cli.open(cred);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("uid 65534 gid 65534"), std::string::npos) << b.error().message();
}

TEST_F(munge_channel, a_credential_of_another_purpose_cluster_job_step_or_connection_is_refused) {
  std::vector<munge_binding> others = {{"admin-handoff", "test", 7, 1},
                                       {"nccl-pair", "other", 7, 1},
                                       {"nccl-pair", "test", 8, 1},
                                       {"nccl-pair", "test", 7, 2}};
  for (const auto& o : others) {
    munge_session cli = side(false);
    munge_session srv = side(true, o);
    srv.set_peer_nonce(cli.nonce());
    auto c = srv.seal("hello");
    ASSERT_TRUE(c);
    auto b = cli.open(*c);
    ASSERT_FALSE(b) << o.purpose << " " << o.cluster << " " << o.job << "." << o.step;
    EXPECT_NE(b.error().message().find("another purpose"), std::string::npos) << b.error().message();
  }
  // The right step, but made for another connection's nonce.
  munge_session cli = side(false), other_cli = side(false), srv = side(true);
  srv.set_peer_nonce(other_cli.nonce());
  auto c = srv.seal("hello");
  ASSERT_TRUE(c);
  EXPECT_FALSE(cli.open(*c));
}

TEST_F(munge_channel, munged_down_refuses_to_run_and_says_so) {
  munge_settings down = ms_;
  down.socket = "/nonexistent/munge.socket";
  munge_session s(munge_binding{"nccl-pair", "test", 7, 1}, "serve", "join", {::getuid(), ::getgid()}, down);
  auto c = s.seal("hello");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message().rfind("could not authenticate", 0), 0u) << c.error().message();
  auto b = s.open("MUNGE:AAAA:");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message().rfind("could not authenticate", 0), 0u) << b.error().message();
}

}  // namespace
}  // namespace mrcheck
