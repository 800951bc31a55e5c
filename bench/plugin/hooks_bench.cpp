// What each hook of the real spank_mrcheck.so costs, without Slurm's noise: this host provides the spank_*
// and slurm_* symbols (tests/spank/fake_spank.cpp, exported with -rdynamic), dlopens the plugin as srun
// and slurmstepd do, and calls the hooks in slurmstepd's order. The task hooks run in a forked child, as
// in slurmstepd, so each task starts from the step's state.
//
// usage: spank_hooks_bench PLUGIN.so [RUNS] [plugstack args...]
//   env: SLURM_CONF (the slurm.conf slurmstepd would read), SLURMD_NODENAME
// Prints the median and the spread (min..max) in microseconds of: a fresh process that dlopens the plugin
// and runs init (srun/slurmstepd load), the srun side with and without --mr-check, and one task's
// task_init_privileged + task_init with and without --mr-check.
#include "fake_spank.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using hook = int (*)(spank_t, int, char**);
using clock_type = std::chrono::steady_clock;

struct plugin {
  void* so = nullptr;
  hook init = nullptr, post_opt = nullptr, user_init = nullptr, priv = nullptr, task = nullptr;
};

plugin load(const char* path) {
  plugin p;
  p.so = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!p.so) {
    std::fprintf(stderr, "mrcheck: bench: dlopen %s: %s\n", path, dlerror());
    std::exit(1);
  }
  p.init = reinterpret_cast<hook>(dlsym(p.so, "slurm_spank_init"));
  p.post_opt = reinterpret_cast<hook>(dlsym(p.so, "slurm_spank_init_post_opt"));
  p.user_init = reinterpret_cast<hook>(dlsym(p.so, "slurm_spank_user_init"));
  p.priv = reinterpret_cast<hook>(dlsym(p.so, "slurm_spank_task_init_privileged"));
  p.task = reinterpret_cast<hook>(dlsym(p.so, "slurm_spank_task_init"));
  return p;
}

std::vector<char*> g_av;

double cpu_self_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}
double cpu_children_us() {
  rusage r{};
  getrusage(RUSAGE_CHILDREN, &r);
  auto us = [](const timeval& v) { return static_cast<double>(v.tv_sec) * 1e6 + static_cast<double>(v.tv_usec); };
  return us(r.ru_utime) + us(r.ru_stime);
}

struct sample {
  double wall = -1;  // microseconds
  double cpu = -1;
};

void call(hook h) {
  if (h) h(nullptr, static_cast<int>(g_av.size()), g_av.data());
}

void option(const char* arg, int remote) {
  auto* o = fake_spank::the_host().registered;
  if (o && arg) o->cb(o->val, arg, remote);
}

// Runs `body` in a forked child `runs` times. `body` returns what to report; a negative wall/cpu means
// "the child's whole run" (timed here, in the child).
std::vector<sample> in_child(int runs, const std::function<sample()>& body) {
  std::vector<sample> out;
  for (int i = 0; i < runs; ++i) {
    int fd[2];
    if (pipe(fd) != 0) std::exit(1);
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      auto t0 = clock_type::now();
      double c0 = cpu_self_us();
      sample s = body();
      if (s.wall < 0) s.wall = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
      if (s.cpu < 0) s.cpu = cpu_self_us() - c0;
      if (write(fd[1], &s, sizeof s) != sizeof s) _exit(1);
      _exit(0);
    }
    close(fd[1]);
    sample s;
    if (read(fd[0], &s, sizeof s) != sizeof s) s = sample{};
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    out.push_back(s);
  }
  return out;
}

// One task as slurmstepd runs it: fork, `hooks` in the child, exit; wall time of the whole, CPU of the child.
sample one_task(const std::function<void()>& hooks) {
  double c0 = cpu_children_us();
  auto t0 = clock_type::now();
  pid_t c = fork();
  if (c == 0) {
    hooks();
    _exit(0);
  }
  int st = 0;
  waitpid(c, &st, 0);
  return {std::chrono::duration<double, std::micro>(clock_type::now() - t0).count(), cpu_children_us() - c0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void report(const std::string& what, const std::vector<sample>& v) {
  std::vector<double> wall, cpu;
  for (const auto& s : v) {
    wall.push_back(s.wall);
    cpu.push_back(s.cpu);
  }
  std::printf("  %-66s cpu %8.0f us   wall %8.0f us (min %6.0f)\n", what.c_str(), median(cpu), median(wall),
              *std::min_element(wall.begin(), wall.end()));
}

void remote_step(const char* so, const char* opt) {
  fake_spank::reset(S_CTX_REMOTE);
  auto& h = fake_spank::the_host();
  h.job_env["SLURMD_NODENAME"] = std::getenv("SLURMD_NODENAME") ? std::getenv("SLURMD_NODENAME") : "node1";
  h.job_env["SLURM_RLIMIT_MEMLOCK"] = "8388608";
  plugin p = load(so);
  call(p.init);
  option(opt, 1);
  call(p.post_opt);
  call(p.user_init);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLUGIN.so [RUNS] [plugstack args...]\n", argv[0]);
    return 2;
  }
  const char* so = argv[1];
  int runs = argc > 2 ? std::atoi(argv[2]) : 51;
  for (int i = 3; i < argc; ++i) g_av.push_back(argv[i]);
  std::printf("mrcheck: bench: hooks of %s, %d runs each, microseconds\n", so, runs);

  report("no plugin: one task (fork, exit)", in_child(runs, [&] { return one_task([] {}); }));
  report("srun: dlopen + init (config parse)", in_child(runs, [&] {
           fake_spank::reset(S_CTX_LOCAL);
           plugin p = load(so);
           call(p.init);
           return sample{};
         }));
  for (const char* opt : {static_cast<const char*>(nullptr), "memlock"}) {
    std::string tag = opt ? ", --mr-check=memlock" : ", idle";
    report("srun: dlopen + init + init_post_opt" + tag, in_child(runs, [&] {
             fake_spank::reset(S_CTX_LOCAL);
             plugin p = load(so);
             call(p.init);
             option(opt, 0);
             call(p.post_opt);
             return sample{};
           }));
    report("slurmstepd: dlopen + init..user_init (once per step)" + tag, in_child(runs, [&] {
             remote_step(so, opt);
             return sample{};
           }));
    report("slurmstepd: one task (fork, task_init_privileged + task_init, exit)" + tag, in_child(runs, [&] {
             remote_step(so, opt);
             plugin p = load(so);  // the same handle: already loaded
             return one_task([&] {
               call(p.priv);
               call(p.task);
             });
           }));
  }
  return 0;
}
