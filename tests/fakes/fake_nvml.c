/* A fake libnvidia-ml.so.1 for the MNNVL tests (include/mrcheck/fabric.h): the few NVML entry points mrcheck's
 * fabric reader calls, with the types and values of NVIDIA's public nvml.h (docs/facts/mnnvl.md §2), answering
 * what the environment says. Never installed.
 *
 *   MRCHECK_FAKE_NVML_GPUS    comma list, one entry per GPU: STATE[:STATUS[:CLIQUE[:UUIDHEX[:HEALTH]]]]
 *                             STATE 0-3 (nvmlGpuFabricState_t) or "ns" (the call returns NOT_SUPPORTED);
 *                             UUIDHEX 32 hex digits (zero when absent); unset: no GPU
 *   MRCHECK_FAKE_NVML_FAIL    init | count | fabric: that call returns NVML_ERROR_UNKNOWN (999)
 *                             crash-init | hang-init: nvmlInit_v2 raises SIGSEGV / never returns
 *   MRCHECK_FAKE_NVML_NO_FABRIC_API  set: nvmlDeviceGetGpuFabricInfoV is not exported (an NVML before the API)
 *                             (built as a second library, fake_nvml_old, since a symbol cannot vanish at run time)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvml_device* nvmlDevice_t;
typedef struct {
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

enum { k_success = 0, k_invalid_argument = 2, k_not_supported = 3, k_argument_version_mismatch = 25, k_unknown = 999 };
enum { k_max = 16 };

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
#ifndef FAKE_NVML_NO_FABRIC_API
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfo_v2_t* info);
#endif

static int fails(const char* what) {
  const char* f = getenv("MRCHECK_FAKE_NVML_FAIL");
  return f && strcmp(f, what) == 0;
}

/* The Nth entry of MRCHECK_FAKE_NVML_GPUS into `out` (NUL-terminated); 0 when there is none. */
static int entry(unsigned n, char* out, size_t size) {
  const char* s = getenv("MRCHECK_FAKE_NVML_GPUS");
  if (!s || !*s) return 0;
  for (unsigned i = 0; i < n; ++i) {
    s = strchr(s, ',');
    if (!s) return 0;
    ++s;
  }
  size_t len = strcspn(s, ",");
  if (len >= size) len = size - 1;
  memcpy(out, s, len);
  out[len] = 0;
  return 1;
}

static unsigned gpu_count(void) {
  char buf[128];
  unsigned n = 0;
  while (n < k_max && entry(n, buf, sizeof buf)) ++n;
  return n;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (fails("crash-init")) {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  if (fails("hang-init")) {
    for (;;) pause();
  }
  return fails("init") ? k_unknown : k_success;
}

nvmlReturn_t nvmlShutdown(void) { return k_success; }

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case k_success: return "Success";
    case k_not_supported: return "Not Supported";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!count) return k_invalid_argument;
  if (fails("count")) return k_unknown;
  *count = gpu_count();
  return k_success;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!device || index >= gpu_count()) return k_invalid_argument;
  *device = (nvmlDevice_t)(uintptr_t)(index + 1);
  return k_success;
}

#ifndef FAKE_NVML_NO_FABRIC_API
static unsigned hex(char c) { return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10); }

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfo_v2_t* info) {
  unsigned index = (unsigned)(uintptr_t)device - 1;
  char buf[128];
  if (!info || !entry(index, buf, sizeof buf)) return k_invalid_argument;
  if (info->version != ((unsigned)sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24))) return k_argument_version_mismatch;
  if (fails("fabric")) return k_unknown;
  if (strncmp(buf, "ns", 2) == 0) return k_not_supported;
  char* field[5] = {buf, 0, 0, 0, 0};
  for (int i = 1; i < 5; ++i) {
    char* c = field[i - 1] ? strchr(field[i - 1], ':') : 0;
    if (c) *c++ = 0;
    field[i] = c;
  }
  memset(info->clusterUuid, 0, sizeof info->clusterUuid);
  info->state = (unsigned char)strtoul(field[0], 0, 10);
  info->status = field[1] ? (int)strtol(field[1], 0, 10) : 0;
  info->cliqueId = field[2] ? (unsigned)strtoul(field[2], 0, 0) : 0;
  if (field[3] && strlen(field[3]) == 32) {
    for (int i = 0; i < 16; ++i) info->clusterUuid[i] = (unsigned char)(hex(field[3][2 * i]) << 4 | hex(field[3][2 * i + 1]));
  }
  info->healthMask = field[4] ? (unsigned)strtoul(field[4], 0, 0) : 0;
  return k_success;
}
#endif
