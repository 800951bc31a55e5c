// The floor for bench/nccl: what no two-rank NCCL smoke test can go below on this machine. One process creates a
// CUDA context on GPU 0 and one single-rank NCCL communicator (no peer, no network), runs a 1 Mi-float all-reduce
// and leaves without ncclCommDestroy, as the probe's ranks do (bench/nccl/README.md).
//
// Build: g++ -O2 -std=c++17 floor.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

int main() {
  ncclComm_t comm;
  float* buf = nullptr;
  cudaStream_t s;
  const size_t n = 1 << 20;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&buf, n * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "floor: CUDA set-up failed\n");
    return 3;
  }
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess ||
      ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) {
    std::fprintf(stderr, "floor: NCCL failed\n");
    return 3;
  }
  std::printf("floor: ok\n");
  return 0;
}
