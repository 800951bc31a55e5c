// MRCHECK_SUBMIT and SLURM_RLIMIT_MEMLOCK: the node treats both as untrusted text.
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

process_fact proc(pid_t pid, pid_t ppid, std::string comm, std::uint64_t soft, std::uint64_t hard) {
  process_fact p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = std::move(comm);
  p.memlock = memlock_limit{soft, hard};
  return p;
}

TEST(MemlockChainSubmit, RoundTripKeepsEveryField) {
  std::vector<process_fact> chain = {proc(4300, 4242, "srun", 65536, 8388608), proc(4242, 1, "bash", 65536, 8388608),
                                     proc(1, 0, "systemd", k_unlimited, k_unlimited)};
  chain[1].memlock = status::error("unreadable");
  auto r = make_submit_record("srun", "login1", std::string("65536"), "", chain);
  auto text = encode_submit_record(r);
  EXPECT_LE(text.size(), k_submit_record_max);
  auto back = decode_submit_record(text);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(back->chain[1].memlock.has_value());
  EXPECT_EQ(back->chain[2].memlock->soft, k_unlimited);
}

TEST(MemlockChainSubmit, HostileCommIsEscapedAndRestored) {
  std::vector<process_fact> chain = {proc(10, 1, "a|b;c:d%e f\n", 1, 2)};
  auto r = make_submit_record("sbatch", "login-1.example", std::nullopt, "77", chain);
  auto text = encode_submit_record(r);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  auto back = decode_submit_record(text);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->chain[0].comm, "a|b;c:d%e f\n");
  EXPECT_EQ(back->host, "login-1.example");
  // A forged host that is no hostname (newline, separators) makes the whole record invalid.
  for (const char* bad : {"h|x", "h\nx", "h x", ""}) {
    auto forged = encode_submit_record(make_submit_record("srun", bad, std::nullopt, "77", chain));
    EXPECT_FALSE(decode_submit_record(forged)) << bad;
  }
  EXPECT_EQ(back->job_id, "77");
  EXPECT_FALSE(back->sent.has_value());
}

TEST(MemlockChainSubmit, LongChainIsBoundedByDroppingOldestHops) {
  std::vector<process_fact> chain;
  for (int i = 0; i < 40; ++i) chain.push_back(proc(1000 + i, 1001 + i, std::string(15, 'x'), 65536, 8388608));
  auto r = make_submit_record("srun", std::string(200, 'h'), std::string("65536"), "", chain);
  EXPECT_EQ(r.chain.size(), k_submit_max_hops);
  auto text = encode_submit_record(r);
  EXPECT_LE(text.size(), k_submit_record_max);
  auto back = decode_submit_record(text);
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_FALSE(back->chain.empty());
  EXPECT_EQ(back->chain.front().pid, 1000);  // the tool itself is always kept
}

TEST(MemlockChainSubmit, ForgedOrBrokenRecordsAreRefused) {
  EXPECT_FALSE(decode_submit_record(""));
  EXPECT_FALSE(decode_submit_record("2|t=srun|h=a|s=-|j=-|c="));
  EXPECT_FALSE(decode_submit_record("1|t=evil|h=a|s=-|j=-|c="));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=a|s=abc|j=-|c="));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=a b|s=-|j=-|c="));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=a|s=-|j=-|c=1:bash:1"));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=a|s=-|j=-|c=0:bash:1:2"));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=%4|s=-|j=-|c="));
  EXPECT_FALSE(decode_submit_record("1|t=srun|h=a|s=-|j=-|c=" + std::string(2000, '1')));
  EXPECT_TRUE(decode_submit_record("1|t=srun|h=a|s=U65536|j=-|c=5:bash:u:u"));
}

TEST(MemlockChainSubmit, PropagatedValueWithUPrefix) {
  auto p = parse_propagated_limit("U65536");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->user_requested);
  EXPECT_EQ(p->value, 65536u);
  auto inf = parse_propagated_limit("18446744073709551615");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->value, k_unlimited);
  EXPECT_FALSE(inf->user_requested);
  EXPECT_FALSE(parse_propagated_limit("64K"));
  EXPECT_EQ(format_propagated_limit(k_unlimited), "18446744073709551615");
}

// slurmstepd's reading (docs/slurm-rlimit-memlock.md): `U`, then strtoul() base 10 with nothing after the number.
// "" and "U" are 0 to slurmstepd, and mrcheck had called them "not a number" and predicted no change.
TEST(MemlockChainSubmit, PropagatedValueReadAsSlurmstepdReadsIt) {
  struct row {
    const char* text;
    bool accepted;
    std::uint64_t value;
    bool user;
    bool canonical;
  };
  const row rows[] = {
      {"65536", true, 65536, false, true},
      {"U65536", true, 65536, true, true},
      {"", true, 0, false, false},
      {"U", true, 0, true, false},
      {" 65536", true, 65536, false, false},
      {"U\t65536", true, 65536, true, false},
      {"+65536", true, 65536, false, false},
      {"U+0", true, 0, true, false},
      {"-0", true, 0, false, false},
      {"065536", true, 65536, false, false},
      {"-1", true, k_unlimited, false, false},
      {"U-18446744073709486080", true, 65536, true, false},
      {"99999999999999999999", true, k_unlimited, false, false},
      {"-99999999999999999999", true, k_unlimited, false, false},
      {"18446744073709551615", true, k_unlimited, false, true},
      {"65536 ", false, 0, false, false},
      {"64K", false, 0, false, false},
      {"0x10", false, 0, false, false},
      {" ", false, 0, false, false},
      {"-", false, 0, false, false},
      {"UU1", false, 0, false, false},
      {" U1", false, 0, false, false},
      {"unlimited", false, 0, false, false},
  };
  for (const auto& r : rows) {
    auto p = parse_propagated_limit(r.text);
    ASSERT_EQ(p.is_ok(), r.accepted) << "'" << r.text << "'";
    if (!p) continue;
    EXPECT_EQ(p->value, r.value) << "'" << r.text << "'";
    EXPECT_EQ(p->user_requested, r.user) << "'" << r.text << "'";
    EXPECT_EQ(p->canonical, r.canonical) << "'" << r.text << "'";
  }
}

// _set_limit(): without `U` a value above the hard limit is cut to it; with `U` setrlimit() refuses it.
TEST(MemlockChainSubmit, SlurmstepdAppliesTheValueAsSetLimitDoes) {
  memlock_limit cur{1u << 20, 8u << 20};
  EXPECT_EQ(slurmstepd_soft({0, false, false}, cur), 0u);
  EXPECT_EQ(slurmstepd_soft({65536, true, false}, cur), 65536u);
  EXPECT_EQ(slurmstepd_soft({16u << 20, false, true}, cur), 8u << 20);
  EXPECT_EQ(slurmstepd_soft({16u << 20, true, true}, cur), 1u << 20);
  EXPECT_EQ(slurmstepd_soft({k_unlimited, false, true}, cur), 8u << 20);
  EXPECT_EQ(slurmstepd_soft({1u << 20, true, true}, cur), 1u << 20);
}

}  // namespace
}  // namespace mrcheck
