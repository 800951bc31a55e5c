// The baseline for bench/nccl: the smallest two-process NCCL program doing what `mrcheck probe nccl --mode
// local-pair` does (docs/facts/nccl-test-harness.md §4): fork two ranks on GPU 0, distinct NCCL_HOSTID, unique id
// through a pipe, 1 Mi-float all-reduce (rank r contributes r+1), check every element is 3, destroy. No error
// explanation, no timeout, no log capture. `minimal_pair nodestroy` leaves without ncclCommDestroy, as the probe
// does (bench/nccl/README.md): the honest baseline.
//
// Build: g++ -O2 -std=c++17 minimal_pair.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl
#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#define CHECK(what, ok)                                        \
  do {                                                         \
    if (!(ok)) {                                               \
      std::fprintf(stderr, "minimal_pair: %s failed\n", what); \
      _exit(3);                                                \
    }                                                          \
  } while (0)

static int run_rank(int rank, int id_pipe[2], bool destroy) {
  setenv("NCCL_HOSTID", rank == 0 ? "minimal-rank0" : "minimal-rank1", 1);
  ncclUniqueId id;
  if (rank == 0) {
    CHECK("ncclGetUniqueId", ncclGetUniqueId(&id) == ncclSuccess);
    CHECK("write id", write(id_pipe[1], &id, sizeof id) == static_cast<ssize_t>(sizeof id));
  }
  CHECK("cudaSetDevice", cudaSetDevice(0) == cudaSuccess);
  const size_t n = 1 << 20;
  float *send = nullptr, *recv = nullptr;
  CHECK("cudaMalloc", cudaMalloc(&send, n * sizeof(float)) == cudaSuccess);
  CHECK("cudaMalloc", cudaMalloc(&recv, n * sizeof(float)) == cudaSuccess);
  std::vector<float> host(n, static_cast<float>(rank + 1));
  CHECK("cudaMemcpy", cudaMemcpy(send, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  cudaStream_t s;
  CHECK("cudaStreamCreate", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  if (rank == 1) {
    size_t got = 0;
    while (got < sizeof id) {
      ssize_t r = read(id_pipe[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
      CHECK("read id", r > 0);
      got += static_cast<size_t>(r);
    }
  }
  ncclComm_t comm;
  CHECK("ncclCommInitRank", ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess);
  CHECK("ncclAllReduce", ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, s) == ncclSuccess);
  CHECK("cudaStreamSynchronize", cudaStreamSynchronize(s) == cudaSuccess);
  CHECK("cudaMemcpy", cudaMemcpy(host.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  size_t bad = 0;
  for (float v : host) bad += v != 3.0f;
  if (destroy) CHECK("ncclCommDestroy", ncclCommDestroy(comm) == ncclSuccess);
  std::printf("minimal_pair: rank %d: %zu of %zu elements wrong\n", rank, bad, n);
  std::fflush(stdout);  // the rank leaves through _exit
  return bad == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const bool destroy = !(argc > 1 && std::string_view(argv[1]) == "nodestroy");
  int id_pipe[2];
  if (pipe(id_pipe) != 0) return 2;
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(run_rank(r, id_pipe, destroy));
  }
  int worst = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code > worst) worst = code;
  }
  return worst;
}
