// A private munged for the unit tests of the channel between nodes (include/mrcheck/munge_auth.h): its own key,
// socket, pid file and log in a temporary directory, never /etc/munge or /run/munge. munged refuses to run as a
// user other than its key's owner and the tests that play a stranger need setuid: skipped unless root and munged
// is installed (scripts/install-deps.sh installs it; CI runs as root).
#pragma once

#include <mrcheck/build_config.h>

#include <mrcheck/munge_auth.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace mrcheck::test {

class private_munged {
 public:
  // Starts munged with a fresh random key; ok() false (and why()) when it cannot.
  private_munged() {
    char tmpl[] = "/tmp/mrcheck-munge-XXXXXX";
    if (!MRCHECK_HAVE_MUNGE) {  // -DMRCHECK_WITH_MUNGE=OFF: the channel refuses everything (src/sys/munge_auth.cpp)
      why_ = "built without libmunge";
      return;
    }
    if (::geteuid() != 0 || !::mkdtemp(tmpl)) {
      why_ = "needs root";
      return;
    }
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);  // munged wants its socket directory not writable by others; clients reach it
    std::string key = dir_ + "/munge.key";
    {
      std::ifstream r("/dev/urandom", std::ios::binary);
      std::ofstream w(key, std::ios::binary);
      char buf[1024];
      r.read(buf, sizeof buf);
      w.write(buf, sizeof buf);
    }
    ::chmod(key.c_str(), 0400);
    socket_ = dir_ + "/munge.socket";
    std::string cmd = "munged --force --socket=" + socket_ + " --key-file=" + key + " --pid-file=" + dir_ +
                      "/munged.pid --log-file=" + dir_ + "/munged.log --seed-file=" + dir_ + "/munged.seed" + " >" +
                      dir_ + "/munged.out 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      why_ = "munged did not start (installed? see " + dir_ + "/munged.out)";
      return;
    }
    for (int i = 0; i < 100 && !std::filesystem::exists(socket_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ok_ = std::filesystem::exists(socket_);
    if (!ok_) why_ = "munged's socket did not appear";
  }
  ~private_munged() {
    std::ifstream pid(dir_ + "/munged.pid");
    pid_t p = 0;
    if (pid >> p && p > 1) ::kill(p, SIGTERM);
    if (!dir_.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  private_munged(const private_munged&) = delete;
  private_munged& operator=(const private_munged&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  munge_settings settings(std::string cluster = "test") const {
    munge_settings s;
    s.socket = socket_;
    s.cluster = std::move(cluster);
    return s;
  }

 private:
  std::string dir_;
  std::string socket_;
  std::string why_;
  bool ok_ = false;
};

// One munged per test process, started at first use.
inline private_munged& shared_munged() {
  static private_munged m;
  return m;
}

// Runs `f` in a child process as uid/gid 65534 (nobody) and returns what it wrote to its pipe: a stranger.
inline std::string as_stranger(const std::function<std::string()>& f) {
  int p[2];
  if (::pipe(p) != 0) return "";
  pid_t c = ::fork();
  if (c == 0) {
    ::close(p[0]);
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
    std::string out = f();
    (void)!::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(c, &st, 0);
  return out;
}

// Starts `f` in a child process as uid/gid 65534 and returns its pid at once (fork before any thread starts).
inline pid_t start_stranger(const std::function<void()>& f) {
  pid_t c = ::fork();
  if (c == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
    f();
    ::_exit(0);
  }
  return c;
}

inline void reap_stranger(pid_t c) {
  if (c <= 0) return;
  ::kill(c, SIGKILL);
  int st = 0;
  ::waitpid(c, &st, 0);
}

}  // namespace mrcheck::test
