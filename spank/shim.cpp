// spank_mrcheck.so: what Slurm loads into every srun, sbatch, salloc and slurmstepd of the cluster. It
// registers --mr-check, checks the Slurm version and says so in the load line, and decides whether this
// step checks anything at all. Only then does it load the checks (mrcheck_spank_core.so, beside it, in C++
// with its own libstdc++) and hand every hook on to them.
//
// Why two files: on a node that checks nothing for a step, the plugin must cost nothing (<= 1 % of
// `srun -n 2 true`). The core is ~1.4 MB of C++ whose dlopen and first calls cost ~0.8 ms of page faults in
// each of srun and slurmstepd (bench/plugin/README.md); this loader uses libc only and touches a few pages.
//
// When is the core loaded (docs/facts/slurm-spank.md §1 for the callback order):
//   slurmd (its start)       always: a bad mrcheck.conf fails there, in slurmd's log, where admins look
//   srun, sbatch, salloc     --mr-check given (the option callback validates the LIST before launch), or at
//                            init_post_opt when MRCHECK_CHECKS is set (an enclosing sbatch --mr-check) or the
//                            configuration has a default_checks line
//   slurmstepd               at init_post_opt, on the same three conditions (the option callbacks of a step
//                            run between init and init_post_opt)
// The three conditions are the one idle gate (gate.h, include/mrcheck/step_gate.h) that the core and the step
// engine ask too. The --mr-check value is held here only: the core reads it through the pointer its init gets.
// The default_checks test reads the plugstack arguments and the config= file without parsing them: any line
// that starts with `default_checks` loads the core, which parses and validates everything (one parser). An
// unreadable file loads it too, so its error is reported by the core.
//
// libc only, no exceptions: nothing here can throw, and spank/CMakeLists.txt fails the build if this file
// pulls in libstdc++.
#include "core_abi.h"
#include "gate.h"

#include <mrcheck/build_config.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
__attribute__((visibility("default"))) extern const char plugin_name[] = "mrcheck";
__attribute__((visibility("default"))) extern const char plugin_type[] = "spank";
__attribute__((visibility("default"))) extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
__attribute__((visibility("default"))) extern const unsigned int spank_plugin_version = 1;

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
// From 25.05 a failed slurm_spank_init of a `required` plugin drains the node unless the plugin says the job is
// at fault (spank(7), docs/slurm-releases.md). mrcheck never fails init in slurmstepd, and a node is drained
// only by mrcheck-prolog, with a reason that names mrcheck: should a later change make init fail there, the job
// fails and the node stays in service.
__attribute__((visibility("default"))) int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

// Linked into the same binary only by the hooks test (tests/spank); the real loader dlopens the core.
__attribute__((weak)) const mrcheck_core_hooks* mrcheck_spank_core_v1();
}

namespace mrcheck::spank_loader {
namespace {

// Per-process state: srun, sbatch and slurmstepd each have their own; slurmstepd's task children inherit it.
struct loader_state {
  bool inert = false;  // another Slurm major.minor: every hook does nothing
  // The --mr-check value as given (value nullptr: the bare option), copied: Slurm may free its own. The only
  // copy: the core reads it through a pointer (core_abi.h).
  mrcheck_step_option option{0, nullptr};
  int ac = 0;
  char** av = nullptr;  // plugstack arguments, kept by Slurm for the plugin's lifetime
  const mrcheck_core_hooks* core = nullptr;
  bool core_failed = false;  // tried and could not load: said once, then idle
  bool core_init_failed = false;
};
loader_state g;

constexpr size_t k_config_max = 1 << 20;  // the core refuses a larger mrcheck.conf (config.cpp)

// "mrcheck: spank_mrcheck.so 0.2.0 built against Slurm 24.11.5, loaded into Slurm 24.11.5". Returns false
// when the running Slurm has another major.minor (Slurm's loader refuses most of those itself; this says it
// in mrcheck's words, with what to do).
bool version_line(spank_t sp, char* line, size_t n) {
  unsigned b_major = (SLURM_VERSION_NUMBER >> 16) & 0xff, b_minor = (SLURM_VERSION_NUMBER >> 8) & 0xff,
           b_micro = SLURM_VERSION_NUMBER & 0xff;
  auto item = [&](spank_item_t it, unsigned* out) {
    char* v = nullptr;
    if (spank_get_item(sp, it, &v) != ESPANK_SUCCESS || v == nullptr || *v == '\0' || std::strlen(v) > 9) return false;
    char* end = nullptr;
    unsigned long x = std::strtoul(v, &end, 10);
    if (*end != '\0' || v[0] < '0' || v[0] > '9' || x > 0xffff) return false;
    *out = static_cast<unsigned>(x);
    return true;
  };
  unsigned r_major = 0, r_minor = 0, r_micro = 0;
  if (!item(S_SLURM_VERSION_MAJOR, &r_major) || !item(S_SLURM_VERSION_MINOR, &r_minor)) {
    std::snprintf(line, n,
                  "mrcheck: spank_mrcheck.so %s built against Slurm %u.%02u.%u, loaded into a Slurm that does not "
                  "say its version",
                  MRCHECK_VERSION, b_major, b_minor, b_micro);
    return true;
  }
  char running[40];
  if (item(S_SLURM_VERSION_MICRO, &r_micro)) {
    std::snprintf(running, sizeof running, "%u.%02u.%u", r_major, r_minor, r_micro);
  } else {
    std::snprintf(running, sizeof running, "%u.%02u", r_major, r_minor);
  }
  if (r_major != b_major || r_minor != b_minor) {
    std::snprintf(line, n,
                  "mrcheck: spank_mrcheck.so %s was built against Slurm %u.%02u and cannot run in Slurm %s: "
                  "rebuild and reinstall mrcheck against this Slurm's headers (a SPANK plugin's major.minor must "
                  "match); the plugin stays inactive",
                  MRCHECK_VERSION, b_major, b_minor, running);
    return false;
  }
  std::snprintf(line, n, "mrcheck: spank_mrcheck.so %s built against Slurm %u.%02u.%u, loaded into Slurm %s",
                MRCHECK_VERSION, b_major, b_minor, b_micro, running);
  return true;
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// Finds a line that starts (after blanks) with "default_checks", fed in pieces: a superset of what the core
// would accept as a non-empty default_checks, and a false yes only loads the core.
class default_checks_finder {
 public:
  bool feed(const char* p, size_t n) {
    static constexpr char key[] = "default_checks";
    for (size_t i = 0; i < n && !found_; ++i) {
      char c = p[i];
      if (c == '\n') {
        matched_ = 0;
        skipping_ = false;
      } else if (skipping_) {
        continue;
      } else if (matched_ == 0 && (c == ' ' || c == '\t')) {
        continue;
      } else if (c == key[matched_]) {
        found_ = ++matched_ == sizeof key - 1;
      } else {
        skipping_ = true;
      }
    }
    return found_;
  }

 private:
  size_t matched_ = 0;
  bool skipping_ = false;  // in a line that is not it: wait for the next
  bool found_ = false;
};

// true: the file has a default_checks line, or cannot be read whole (the core then reports why).
bool config_file_may_set_checks(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return true;
  default_checks_finder finder;
  char buf[4096];
  size_t total = 0;
  bool yes = false;
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      yes = r < 0;
      break;
    }
    total += static_cast<size_t>(r);
    if (finder.feed(buf, static_cast<size_t>(r)) || total > k_config_max) {
      yes = true;
      break;
    }
  }
  ::close(fd);
  return yes;
}

bool config_may_set_checks() {
  for (int i = 0; i < g.ac; ++i) {
    const char* a = g.av[i];
    if (a == nullptr) continue;
    if (default_checks_finder().feed(a, std::strlen(a))) return true;
    if (starts_with(a, "config=") && config_file_may_set_checks(a + 7)) return true;
  }
  return false;
}

// The core beside this file, from this build. nullptr (said once in the log) when it cannot be used.
const mrcheck_core_hooks* load_core() {
  if (g.core != nullptr || g.core_failed) return g.core;
  const mrcheck_core_hooks* core = nullptr;
  char path[PATH_MAX];
  const char* why = nullptr;
  if (mrcheck_spank_core_v1 != nullptr) {
    core = mrcheck_spank_core_v1();
  } else {
    Dl_info self{};
    const char* slash = nullptr;
    if (dladdr(reinterpret_cast<void*>(&version_line), &self) != 0 && self.dli_fname != nullptr) {
      slash = std::strrchr(self.dli_fname, '/');
    }
    if (slash == nullptr) {
      std::snprintf(path, sizeof path, "%s", MRCHECK_CORE_FILE);
      why = "cannot tell where spank_mrcheck.so was loaded from";
    } else if (std::snprintf(path, sizeof path, "%.*s/%s", static_cast<int>(slash - self.dli_fname), self.dli_fname,
                             MRCHECK_CORE_FILE) >= static_cast<int>(sizeof path)) {
      why = "path too long";
    } else if (void* so = dlopen(path, RTLD_NOW | RTLD_LOCAL); so == nullptr) {
      const char* e = dlerror();
      why = e != nullptr ? e : "dlopen failed";
    } else if (auto entry = reinterpret_cast<mrcheck_core_entry>(dlsym(so, MRCHECK_CORE_SYMBOL)); entry == nullptr) {
      why = "no " MRCHECK_CORE_SYMBOL " in it";
    } else {
      core = entry();
    }
    if (why == nullptr && (core == nullptr || core->abi != MRCHECK_CORE_ABI || core->version == nullptr ||
                           std::strcmp(core->version, MRCHECK_VERSION) != 0)) {
      why = "it is from another mrcheck version than spank_mrcheck.so " MRCHECK_VERSION
            " (reinstall the mrcheck package on this host)";
      core = nullptr;
    }
  }
  if (core == nullptr) {
    g.core_failed = true;
    slurm_error("mrcheck: cannot load the checks (%s): %s; nothing is checked here", path,
                why != nullptr ? why : "no core");
    return nullptr;
  }
  g.core = core;
  return core;
}

// Loads the core and gives it the configuration; returns init's result (Slurm's rule for init applies).
int start_core(spank_t sp) {
  if (g.core != nullptr) return g.core_init_failed ? -1 : 0;
  if (load_core() == nullptr) return -1;
  int rc = g.core->init(sp, g.ac, g.av, &g.option);
  g.core_init_failed = rc != 0;
  return rc;
}

extern "C" int mrcheck_option_cb(int val, const char* optarg, int remote) {
  if (g.inert) return 0;
  (void)val;
  g.option.seen = 1;
  std::free(const_cast<char*>(g.option.value));
  g.option.value = optarg != nullptr ? strdup(optarg) : nullptr;
  if (optarg != nullptr && g.option.value == nullptr) return remote ? 0 : -1;
  if (remote) return 0;  // slurmstepd: the core reads it when it is loaded at init_post_opt; never fail here
  // srun/sbatch: a bad LIST is refused now, before anything is launched (an option callback's error always
  // stops srun, an init_post_opt error of an `optional` plugin does not).
  start_core(nullptr);
  if (g.core == nullptr) return -1;
  return g.core->check_option();
}

struct spank_option k_option =
    {const_cast<char*>("mr-check"),
     const_cast<char*>("[LIST]"),
     const_cast<char*>("check RDMA memory registration before the job: LIST of memlock,mr,nccl,rdma,all,off,verbose"),
     2,
     0,
     mrcheck_option_cb};

void free_option() {
  std::free(const_cast<char*>(g.option.value));
  g.option = mrcheck_step_option{0, nullptr};
}

void reset() {
  free_option();
  g = loader_state{};
}

}  // namespace
}  // namespace mrcheck::spank_loader

using namespace mrcheck::spank_loader;

extern "C" {

__attribute__((visibility("default"))) int slurm_spank_init(spank_t sp, int ac, char** av) {
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_JOB_SCRIPT) return 0;
  reset();  // init comes first in every process that loads the plugin, before options
  g.ac = ac;
  g.av = av;
  char line[512];
  if (!version_line(sp, line, sizeof line)) {
    slurm_error("%s", line);
    g.inert = true;
    if (ctx != S_CTX_REMOTE) return -1;
    // slurmstepd: never an error from remote init (a batch step would drain the node, docs/facts/slurm-spank.md §5),
    // and the option stays registered (its callback does nothing) so a step launched with --mr-check still starts.
    spank_option_register(sp, &k_option);
    return 0;
  }
  // The load line goes to the daemons' log: info in slurmd (once, at its start), verbose in slurmstepd
  // (once per step) and in srun/sbatch (shown with -v only: the user's terminal stays untouched).
  if (ctx == S_CTX_SLURMD) {
    slurm_info("%s", line);
    return start_core(sp);
  }
  slurm_verbose("%s", line);
  spank_err_t rc = spank_option_register(sp, &k_option);
  if (rc != ESPANK_SUCCESS) slurm_error("mrcheck: cannot register --mr-check: %s", spank_strerror(rc));
  return 0;
}

__attribute__((visibility("default"))) int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  if (g.inert) return 0;
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_REMOTE && ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  int init_rc = g.core_init_failed ? -1 : 0;
  if (g.core == nullptr) {
    if (g.core_failed) return 0;
    // The gate's inputs, each read only when the ones before did not already decide: the configuration file
    // is read on idle steps only, as the core parses it anyway once loaded.
    int env = g.option.seen ? 0 : mrcheck_env_checks_set(sp, ctx);
    int site = g.option.seen || env ? 0 : config_may_set_checks();
    if (!mrcheck_step_may_check(g.option.seen, env, site)) return 0;  // idle
    init_rc = start_core(sp);
    if (g.core == nullptr) return ctx == S_CTX_REMOTE ? 0 : -1;
  }
  int rc = g.core->init_post_opt(sp, ac, av);
  // Never an error from slurmstepd here; in srun/sbatch the core's init error counts as Slurm would count it.
  if (ctx == S_CTX_REMOTE) return 0;
  return init_rc != 0 ? init_rc : rc;
}

#define MRCHECK_FORWARD(hook, member)                                              \
  __attribute__((visibility("default"))) int hook(spank_t sp, int ac, char** av) { \
    if (g.inert || g.core == nullptr) return 0;                                    \
    return g.core->member(sp, ac, av);                                             \
  }
MRCHECK_FORWARD(slurm_spank_task_init_privileged, task_init_privileged)
MRCHECK_FORWARD(slurm_spank_task_init, task_init)
MRCHECK_FORWARD(slurm_spank_user_init, user_init)
MRCHECK_FORWARD(slurm_spank_task_post_fork, task_post_fork)
MRCHECK_FORWARD(slurm_spank_task_exit, task_exit)
#undef MRCHECK_FORWARD

__attribute__((visibility("default"))) int slurm_spank_exit(spank_t sp, int ac, char** av) {
  int rc = 0;
  if (!g.inert && g.core != nullptr) rc = g.core->exit(sp, ac, av);
  free_option();
  return rc;
}
}
