/* A stand-in libnccl.so.2 for the job-NCCL tests (tests/unit/job_nccl_test.cpp), never installed: a version
 * string where NCCL keeps its own (.rodata, "NCCL version X"), ncclGetVersion, and with FAKE_NCCL_CRASH an
 * ncclGetVersion that crashes (a hostile or broken library in a job's venv); with FAKE_NCCL_UNRESOLVED one that
 * the loader refuses (a symbol nothing defines, as an NCCL built against a newer C++ runtime than the node's); with
 * FAKE_NCCL_NET_PLUGIN it is a net plugin instead, exporting the ABI symbols NCCL looks up (ncclNetPlugin_v8, _v9). */
#include <signal.h>
#include <stddef.h>

#ifdef FAKE_NCCL_NET_PLUGIN
const struct { const char* name; } ncclNetPlugin_v8 = {"fake"}, ncclNetPlugin_v9 = {"fake"};
#else
const char mrcheck_fake_nccl_version[] = "NCCL version 2.99.1+cuda12.4";

int ncclGetVersion(int* v); /* as nccl.h declares it (ncclResult_t is an int-sized enum) */

#ifdef FAKE_NCCL_UNRESOLVED
int mrcheck_fake_nccl_nowhere(void); /* defined by no library: dlopen(RTLD_NOW) fails on it */
#endif

int ncclGetVersion(int* v) {
#ifdef FAKE_NCCL_CRASH
  raise(SIGSEGV);
#endif
#ifdef FAKE_NCCL_UNRESOLVED
  if (mrcheck_fake_nccl_nowhere() != 0) return 3;
#endif
  if (v == NULL) return 4;
  *v = 29901;
  return mrcheck_fake_nccl_version[0] == 'N' ? 0 : 3;
}
#endif
