// How often the post-exec watcher sees a task that execs and exits at once (`srun true`), the way slurmstepd
// runs it: a parent forks the task and reaps it the moment it exits; the task starts the watcher from its own
// process (as task_init does), waits 3 ms (a TaskProlog), lowers its memlock and execs /bin/true. Seen = the
// watcher wrote its FAIL line. Run it on a quiet machine and beside CPU hogs (the README has the command).
// usage: watch_bench [ROUNDS]      build: see bench/plugin/README.md
#include <mrcheck/step.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  int seen = 0;
  for (int i = 0; i < rounds; ++i) {
    // A file per round: a watcher that writes late cannot count for the next round.
    const std::string out_path = "/tmp/mrcheck_watch_bench." + std::to_string(::getpid()) + "." + std::to_string(i);
    int out = ::open(out_path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    if (out < 0) return 1;
    pid_t task = ::fork();
    if (task == 0) {
      ::prctl(PR_SET_NAME, "slurmstepd", 0, 0, 0);
      struct rlimit r {};
      ::getrlimit(RLIMIT_MEMLOCK, &r);
      mrcheck::memlock_limit predicted{r.rlim_cur, r.rlim_max};
      mrcheck::post_exec_watch w;
      w.task = ::getpid();
      w.predicted = predicted;
      w.required = 1 << 20;
      w.task_prolog = "/etc/taskprolog";
      w.fd = out;
      w.window = std::chrono::milliseconds(100);
      if (!mrcheck::spawn_post_exec_watcher(w)) ::_exit(9);
      ::usleep(3000);
      r.rlim_cur = 65536;
      ::setrlimit(RLIMIT_MEMLOCK, &r);
      ::execl("/bin/true", "true", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int st = 0;
    ::waitpid(task, &st, 0);
    for (int k = 0; k < 50; ++k) {  // the watcher writes within its window (100 ms) or not at all
      ::usleep(10000);
      struct stat sb {};
      if (::fstat(out, &sb) == 0 && sb.st_size > 0) {
        ++seen;
        break;
      }
    }
    ::close(out);
    if (!std::getenv("WATCH_BENCH_KEEP")) ::unlink(out_path.c_str());
  }
  std::printf("short task seen: %d of %d\n", seen, rounds);
  return 0;
}
