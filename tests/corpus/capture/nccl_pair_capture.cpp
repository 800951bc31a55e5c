// Captures real NCCL output for the log corpus on a one-GPU machine: two ranks as two processes on GPU 0.
//   same    both ranks look like one host -> NCCL refuses ("Duplicate GPU detected")
//   hostid  NCCL_HOSTID differs per rank -> two "nodes", NET transport (sockets without an HCA), a clean run
// Build and run (see capture.sh):  g++ -O1 nccl_pair_capture.cpp -I/usr/local/cuda/include \
//   -L/usr/local/cuda/lib64 -lcudart -lnccl -o capture && NCCL_COMM_ID=127.0.0.1:29511 ./capture same
#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int rank_main(int rank) {
  if (cudaSetDevice(0) != cudaSuccess) {
    std::fprintf(stderr, "capture: rank %d: cudaSetDevice failed\n", rank);
    return 1;
  }
  ncclUniqueId id;
  // With NCCL_COMM_ID set both ranks get the same id; rank 0 runs the bootstrap root inside init.
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "capture: rank %d: ncclCommInitRank: %s\n", rank, ncclGetErrorString(r));
    return 2;
  }
  const size_t n = 1 << 20;
  float* buf = nullptr;
  cudaMalloc(&buf, n * sizeof(float));
  cudaMemset(buf, 0, n * sizeof(float));
  cudaStream_t s;
  cudaStreamCreate(&s);
  r = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s);
  cudaStreamSynchronize(s);
  ncclCommDestroy(comm);
  cudaFree(buf);
  std::fprintf(stderr, "capture: rank %d: all-reduce %s\n", rank, r == ncclSuccess ? "ok" : ncclGetErrorString(r));
  return r == ncclSuccess ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  const bool hostid = argc > 1 && std::strcmp(argv[1], "hostid") == 0;
  pid_t kids[2];
  for (int rank = 0; rank < 2; ++rank) {
    kids[rank] = fork();
    if (kids[rank] == 0) {
      if (hostid) setenv("NCCL_HOSTID", rank == 0 ? "rankA" : "rankB", 1);
      std::exit(rank_main(rank));
    }
  }
  int worst = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    if (rc > worst) worst = rc;
  }
  return worst;
}
