// What loading spank_mrcheck.so costs a C program such as srun: dlopen, then slurm_spank_init and
// slurm_spank_init_post_opt as srun calls them with no --mr-check (the idle path), in a fresh process each
// run (page faults are most of the cost on a VM, and only a fresh process pays them). Before timing, the
// host calls snprintf and Slurm's log functions once, as srun has long done by the time it loads plugins:
// their pages are warm there, and their first-touch faults are not the plugin's. This host links
// libslurmfull as srun does and provides the few spank_* calls the hooks make; it prints one line per run:
//   dlopen_us init_us post_opt_us faults_in_dlopen faults_in_init
// Build and run (the median of 101 fresh processes), against an empty .so for the floor:
//   gcc -O2 -rdynamic bench/plugin/load_bench.c -o lb -ldl -L/usr/lib/x86_64-linux-gnu/slurm-wlm
//       -Wl,--no-as-needed -lslurmfull -Wl,-rpath,/usr/lib/x86_64-linux-gnu/slurm-wlm
//   for i in $(seq 101); do ./lb BUILD/spank/spank_mrcheck.so memlock_min=8M; done | sort -n | sed -n 51p
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include <slurm/slurm_version.h>
#include <slurm/spank.h>

spank_context_t spank_context(void) { return S_CTX_LOCAL; }

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...) {
  (void)sp;
  static char major[8], minor[8], micro[8];
  snprintf(major, sizeof major, "%d", SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER));
  snprintf(minor, sizeof minor, "%02d", SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER));
  snprintf(micro, sizeof micro, "%d", SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
  va_list ap;
  va_start(ap, item);
  char** out = va_arg(ap, char**);
  va_end(ap);
  if (item == S_SLURM_VERSION_MAJOR) *out = major;
  else if (item == S_SLURM_VERSION_MINOR) *out = minor;
  else if (item == S_SLURM_VERSION_MICRO) *out = micro;
  else return ESPANK_BAD_ARG;
  return ESPANK_SUCCESS;
}
spank_err_t spank_option_register(spank_t sp, struct spank_option* opt) {
  (void)sp;
  (void)opt;
  return ESPANK_SUCCESS;
}

static long faults(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt + r.ru_majflt;
}
static long us(struct timespec a, struct timespec b) {
  return (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [plugstack args...]\n", argv[0]);
    return 2;
  }
  typedef int (*hook)(spank_t, int, char**);
  char warm[64];
  snprintf(warm, sizeof warm, "%s %u.%02u", "warm", 22u, 5u);
  slurm_verbose("%s", warm);
  slurm_debug("%s", warm);
  struct timespec t0, t1, t2, t3;
  long f0 = faults();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void* so = dlopen(argv[1], RTLD_LAZY | RTLD_GLOBAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (so == NULL) {
    fprintf(stderr, "mrcheck: load_bench: %s\n", dlerror());
    return 1;
  }
  long f1 = faults();
  hook init = (hook)dlsym(so, "slurm_spank_init");
  hook post = (hook)dlsym(so, "slurm_spank_init_post_opt");
  int rc = init ? init(NULL, argc - 2, argv + 2) : 0;
  clock_gettime(CLOCK_MONOTONIC, &t2);
  long f2 = faults();
  rc |= post ? post(NULL, argc - 2, argv + 2) : 0;
  clock_gettime(CLOCK_MONOTONIC, &t3);
  printf("%ld %ld %ld %ld %ld\n", us(t0, t1), us(t1, t2), us(t2, t3), f1 - f0, f2 - f1);
  return rc != 0;
}
