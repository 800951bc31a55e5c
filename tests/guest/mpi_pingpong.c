// SPDX-License-Identifier: GPL-2.0-or-later
// A two-rank MPI ping-pong for tests/guest/make_logs.sh: Open MPI over UCX on a guest, so its logs are Open MPI's
// own. It opens Debian 12's libmpi.so.40 at run time (dlopen) rather than linking against it: the host needs no
// MPI headers to build it. MPI_COMM_WORLD and MPI_BYTE are Open MPI's predefined objects, which its mpi.h names
// as the addresses of ompi_mpi_comm_world and ompi_mpi_byte.
//   usage: mpirun -np 2 mpi_pingpong BYTES ITERATIONS
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_fn)(int *, char ***);
typedef int (*rank_fn)(void *, int *);
typedef int (*send_fn)(const void *, int, void *, int, int, void *);
typedef int (*recv_fn)(void *, int, void *, int, int, void *, void *);
typedef int (*fin_fn)(void);

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mpi_pingpong BYTES ITERATIONS\n");
    return 2;
  }
  int bytes = atoi(argv[1]), iterations = atoi(argv[2]);
  void *mpi = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
  if (mpi == NULL) {
    fprintf(stderr, "mpi_pingpong: %s\n", dlerror());
    return 2;
  }
  init_fn mpi_init = (init_fn)dlsym(mpi, "MPI_Init");
  rank_fn mpi_rank = (rank_fn)dlsym(mpi, "MPI_Comm_rank");
  send_fn mpi_send = (send_fn)dlsym(mpi, "MPI_Send");
  recv_fn mpi_recv = (recv_fn)dlsym(mpi, "MPI_Recv");
  fin_fn mpi_finalize = (fin_fn)dlsym(mpi, "MPI_Finalize");
  void *world = dlsym(mpi, "ompi_mpi_comm_world");
  void *byte = dlsym(mpi, "ompi_mpi_byte");
  if (!mpi_init || !mpi_rank || !mpi_send || !mpi_recv || !mpi_finalize || !world || !byte) {
    fprintf(stderr, "mpi_pingpong: libmpi.so.40 is not Open MPI's\n");
    return 2;
  }
  int rank = -1;
  if (mpi_init(&argc, &argv) != 0 || mpi_rank(world, &rank) != 0) return 1;
  char *buf = malloc((size_t)bytes);
  if (buf == NULL) return 1;
  memset(buf, rank, (size_t)bytes);
  for (int i = 0; i < iterations; i++) {
    // MPI_STATUS_IGNORE is NULL in Open MPI's mpi.h.
    if (rank == 0) {
      if (mpi_send(buf, bytes, byte, 1, 0, world) != 0 || mpi_recv(buf, bytes, byte, 1, 0, world, NULL) != 0) return 1;
    } else if (rank == 1) {
      if (mpi_recv(buf, bytes, byte, 0, 0, world, NULL) != 0 || mpi_send(buf, bytes, byte, 0, 0, world) != 0) return 1;
    }
  }
  if (rank == 0) printf("mpi_pingpong: %d x %d bytes done\n", iterations, bytes);
  free(buf);
  mpi_finalize();
  return 0;
}
