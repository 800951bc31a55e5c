/* pre_c23_strtol.h - include first, right after _GNU_SOURCE, in every source of the fake libibverbs.
 * glibc 2.38 and later bind strtol, strtoul, atoi and sscanf to __isoc23_* (GLIBC_2.38) under _GNU_SOURCE; a fake
 * built in the Slurm 24.11 or 26.05 root would then not load in the container tests' bookworm image (glibc 2.36;
 * tests/container/). The pre-C23 functions differ only in parsing 0b numbers, which nothing here reads. */
#ifndef MRCHECK_FAKES_PRE_C23_STRTOL_H
#define MRCHECK_FAKES_PRE_C23_STRTOL_H
#include <features.h>
#undef __GLIBC_USE_C2X_STRTOL
#define __GLIBC_USE_C2X_STRTOL 0
#undef __GLIBC_USE_C23_STRTOL
#define __GLIBC_USE_C23_STRTOL 0
#endif
