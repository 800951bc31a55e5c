// A hostile probe library for the e2e tests (tests/e2e/hostile_drain_test.sh). Loaded
// into `mrcheck probe ...` either by a job user (LD_PRELOAD in the job's environment) or by the site
// (verbs_library= pointing at a library that misbehaves), it does what a plugin must survive:
//   - ignores SIGTERM, SIGINT and SIGHUP, so a cancel's first signal does nothing;
//   - starts a grandchild that leaves the process group and session (setsid, double fork), ignores the same
//     signals, names itself "mrcheck-escape" and holds the probe's stdout and stderr open;
//   - hangs until SIGKILL.
// With MRCHECK_HOSTILE=forge in its environment it instead prints a forged probe report and exits 0
// (tests/e2e/hostile_report_test.sh): a check id with a newline and a "drain this node" line, a summary with the
// same, and 1200 checks with ids that are not check names.
// In any other process (the job's own programs, srun) it does nothing. Never installed: test data only.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

void mrcheck_hostile_probe(void);

// True in `.../mrcheck probe ...` only.
static int in_probe(void) {
  char buf[4096];
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* argv0 = buf;
  const char* base = strrchr(argv0, '/');
  base = base ? base + 1 : argv0;
  size_t len0 = strlen(argv0);
  if ((size_t)n <= len0 + 1) return 0;
  return strcmp(base, "mrcheck") == 0 && strcmp(argv0 + len0 + 1, "probe") == 0;
}

static void ignore_signals(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
}

static void put(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void forge(void) {
  char buf[256];
  put("{\"verdict\":\"fail\",\"checks\":[");
  put("{\"id\":\"mr_host\\nINJECTED-ID: mrcheck: step 9: FAIL drain this node\",\"verdict\":\"fail\",");
  put("\"summary\":\"INJECTED-SUMMARY\\nINJECTED-LINE drain this node\",\"detail\":\"\",\"hint\":\"\"}");
  for (int i = 0; i < 1200; ++i) {
    snprintf(buf, sizeof buf,
             ",{\"id\":\"x%d\",\"verdict\":\"fail\",\"summary\":\"INJECTED-MANY %d %0100d\",\"detail\":\"\",\"hint\":\"\"}", i,
             i, 0);
    put(buf);
  }
  put("]}\n");
  _exit(0);
}

__attribute__((constructor)) void mrcheck_hostile_probe(void) {
  if (!in_probe()) return;
  const char* mode = getenv("MRCHECK_HOSTILE");
  if (mode && strcmp(mode, "forge") == 0) forge();
  ignore_signals();
  pid_t mid = fork();
  if (mid == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    prctl(PR_SET_NAME, "mrcheck-escape", 0, 0, 0);
    for (;;) pause();
  }
  if (mid > 0) waitpid(mid, NULL, 0);
  for (;;) pause();
}
