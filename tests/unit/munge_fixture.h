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
#include <sys/prctl.h>
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
    // In the foreground, as this process's child, dying with it: a test process that is killed (a ctest
    // timeout, an interrupted run) never reaches the destructor, and a daemonised munged outlived it.
    const std::string args[] = {"--foreground",
                                "--force",
                                "--socket=" + socket_,
                                "--key-file=" + key,
                                "--pid-file=" + dir_ + "/munged.pid",
                                "--log-file=" + dir_ + "/munged.log",
                                "--seed-file=" + dir_ + "/munged.seed"};
    const std::string out = dir_ + "/munged.out";
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execlp("munged", "munged", args[0].c_str(), args[1].c_str(), args[2].c_str(), args[3].c_str(), args[4].c_str(),
               args[5].c_str(), args[6].c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (pid_ < 0) {
      why_ = "fork for munged failed";
      return;
    }
    for (int i = 0; i < 100 && !std::filesystem::exists(socket_); ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: not installed, or refused its key
        pid_ = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ok_ = std::filesystem::exists(socket_);
    if (!ok_) why_ = "munged's socket did not appear (installed? see " + out + ")";
  }
  ~private_munged() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) {
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
  pid_t pid_ = 0;
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
