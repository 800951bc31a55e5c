// SPDX-License-Identifier: GPL-2.0-or-later
// A real ibv_reg_mr on a guest's rxe0 (tests/guest/probe_mr_test.sh), for what `mrcheck probe mr` never asks the
// kernel: a registration of an address with nothing mapped there. Prints one line, as a verbs user logs it:
//   reg_mr: ibv_reg_mr(DEVICE, ADDR, LEN) failed: STRERROR (errno N)   exit 1
//   reg_mr: ibv_reg_mr(DEVICE, ADDR, LEN) ok                           exit 0
// usage: reg_mr DEVICE BYTES mapped|unmapped
#include <infiniband/verbs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: reg_mr DEVICE BYTES mapped|unmapped\n");
    return 2;
  }
  size_t len = strtoull(argv[2], NULL, 0);
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = NULL;
  for (int i = 0; list && i < n && !ctx; i++) {
    if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
  }
  if (!ctx) {
    fprintf(stderr, "reg_mr: no device %s\n", argv[1]);
    return 2;
  }
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  void* buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!pd || buf == MAP_FAILED) {
    fprintf(stderr, "reg_mr: no protection domain or buffer\n");
    return 2;
  }
  if (strcmp(argv[3], "unmapped") == 0) munmap(buf, len);  // the address stays, the pages go
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, len, access);
  if (!mr) {
    int e = errno;
    printf("reg_mr: ibv_reg_mr(%s, %p, %zu) failed: %s (errno %d)\n", argv[1], buf, len, strerror(e), e);
    return 1;
  }
  printf("reg_mr: ibv_reg_mr(%s, %p, %zu) ok\n", argv[1], buf, len);
  ibv_dereg_mr(mr);
  return 0;
}
