// Finding F6 (first half) of tests/fuzz/README.md: load_config_file() checked its 1 MiB cap only after getline
// had read a whole line, so a one-line multi-GiB file or config=/dev/zero was read into memory first (in
// slurmstepd, for every step). The cap must bound the read itself.
#include <mrcheck/config.h>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define MRCHECK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MRCHECK_TEST_ASAN 1
#endif
#endif

namespace mrcheck {
namespace {

std::string temp_with(const std::string& text) {
  char name[] = "/tmp/mrcheck_fuzzfix_config_XXXXXX";
  int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(name, std::ios::binary) << text;
  return name;
}

// Runs load_config_file(path) in a child with a 10 s alarm and (outside ASan, whose shadow memory needs a large
// address space) a 1 GiB address-space limit, so an unbounded read fails this test instead of the machine.
std::string load_in_child(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(10);
#ifndef MRCHECK_TEST_ASAN
    rlimit as{1ul << 30, 1ul << 30};
    setrlimit(RLIMIT_AS, &as);
#endif
    config c;
    status s = load_config_file(c, path);
    std::string msg = s ? "ok" : s.message();
    ssize_t n = write(fds[1], msg.data(), msg.size());
    _exit(n < 0 ? 2 : 0);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) return "child killed by signal " + std::to_string(WTERMSIG(st));
  return out;
}

TEST(FuzzFixConfigFile, EndlessFileIsRefusedAfterTheCap) {
  std::string msg = load_in_child("/dev/zero");
  EXPECT_NE(msg.find("/dev/zero: larger than 1 MiB"), std::string::npos) << msg;
}

TEST(FuzzFixConfigFile, OneHugeLineIsRefused) {
  auto path = temp_with(std::string(3u << 20, '#') + "\nenforce=yes\n");
  std::string msg = load_in_child(path);
  EXPECT_NE(msg.find("larger than 1 MiB"), std::string::npos) << msg;
  unlink(path.c_str());
}

TEST(FuzzFixConfigFile, CapIsOneMebibyteOfFileAndLinesStillCount) {
  // Exactly 1 MiB (comment padding, newlines included) is read; one byte more is refused.
  std::string head = "enforce=yes\r\n\n  memlock_min = 1G  # site\n";
  std::string pad = "#" + std::string((1u << 20) - head.size() - 2, 'x') + "\n";
  std::string exact = head + pad;
  ASSERT_EQ(exact.size(), 1u << 20);
  auto ok_path = temp_with(exact);
  config c;
  status s = load_config_file(c, ok_path);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(c.memlock_min, 1ull << 30);
  EXPECT_TRUE(c.enforce);
  auto big_path = temp_with(exact + "\n");
  config d;
  status t = load_config_file(d, big_path);
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("larger than 1 MiB"), std::string::npos) << t.message();
  // No trailing newline: the last line is still read, and a bad line is still named path:line.
  auto last_path = temp_with("enforce=yes\n\nbogus");
  config e;
  status u = load_config_file(e, last_path);
  ASSERT_FALSE(u);
  EXPECT_NE(u.message().find(last_path + ":3"), std::string::npos) << u.message();
  unlink(ok_path.c_str());
  unlink(big_path.c_str());
  unlink(last_path.c_str());
}

}  // namespace
}  // namespace mrcheck
