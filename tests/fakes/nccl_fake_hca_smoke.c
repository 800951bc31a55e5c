/* nccl_fake_hca_smoke.c - two NCCL ranks on one GPU that must talk over NET (and so over the fake HCA
 * when LD_LIBRARY_PATH puts the fake libibverbs first), to see what the real NCCL does with it.
 *
 * The ranks are two processes with different NCCL_HOSTID, so NCCL sees two nodes, skips P2P/SHM and
 * the duplicate-GPU check, and picks a network transport (docs/facts/nccl-test-harness.md §1). Each
 * rank all-reduces COUNT floats (rank0 = 1, rank1 = 2) and checks the result is 3.
 *
 * Usage: nccl_fake_hca_smoke [COUNT [TIMEOUT_S]]
 * Exit: 0 all-reduce correct on both ranks; 1 a clean NCCL error on some rank; 3 timeout (the rank
 * aborted its communicator); 4 wrong result; 5 a rank died from a signal; 77 no GPU.
 * Output lines start with "mrcheck: nccl_smoke: ".
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rank_main(int rank, int id_rd, int id_wr, size_t count, int timeout_s)
{
	char hostid[32];
	snprintf(hostid, sizeof(hostid), "mrcheck-fake-rank%d", rank);
	setenv("NCCL_HOSTID", hostid, 1); /* before the first NCCL call */
	ncclUniqueId id;
	if (rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess) {
			printf("mrcheck: nccl_smoke: rank 0: ncclGetUniqueId: %s\n", ncclGetErrorString(r));
			return 1;
		}
		if (write(id_wr, &id, sizeof(id)) != (ssize_t)sizeof(id))
			return 1;
	} else if (read(id_rd, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
		printf("mrcheck: nccl_smoke: rank 1: no unique id from rank 0\n");
		return 1;
	}
	if (cudaSetDevice(0) != cudaSuccess)
		return 77;
	cudaStream_t stream;
	float *sbuf = NULL, *rbuf = NULL;
	float *host = malloc(count * sizeof(float));
	if (host == NULL || cudaStreamCreate(&stream) != cudaSuccess ||
	    cudaMalloc((void **)&sbuf, count * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&rbuf, count * sizeof(float)) != cudaSuccess) {
		printf("mrcheck: nccl_smoke: rank %d: CUDA setup failed\n", rank);
		return 1;
	}
	for (size_t i = 0; i < count; i++)
		host[i] = (float)(rank + 1);
	cudaMemcpy(sbuf, host, count * sizeof(float), cudaMemcpyHostToDevice);

	double t0 = now_s();
	ncclComm_t comm;
	ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
	printf("mrcheck: nccl_smoke: rank %d: ncclCommInitRank: %s (%.2f s)\n", rank, ncclGetErrorString(r), now_s() - t0);
	if (r != ncclSuccess) {
		printf("mrcheck: nccl_smoke: rank %d: last error: %s\n", rank, ncclGetLastError(NULL));
		return 1;
	}
	r = ncclAllReduce(sbuf, rbuf, count, ncclFloat, ncclSum, comm, stream);
	if (r != ncclSuccess) {
		printf("mrcheck: nccl_smoke: rank %d: ncclAllReduce: %s: %s\n", rank, ncclGetErrorString(r),
		       ncclGetLastError(comm));
		ncclCommAbort(comm);
		return 1;
	}
	double deadline = now_s() + timeout_s;
	for (;;) {
		cudaError_t q = cudaStreamQuery(stream);
		if (q == cudaSuccess)
			break;
		if (q != cudaErrorNotReady) {
			printf("mrcheck: nccl_smoke: rank %d: stream: %s\n", rank, cudaGetErrorString(q));
			ncclCommAbort(comm);
			return 1;
		}
		ncclResult_t ae = ncclSuccess;
		ncclCommGetAsyncError(comm, &ae);
		if (ae != ncclSuccess && ae != ncclInProgress) {
			printf("mrcheck: nccl_smoke: rank %d: async error: %s: %s\n", rank, ncclGetErrorString(ae),
			       ncclGetLastError(comm));
			ncclCommAbort(comm);
			return 1;
		}
		if (now_s() > deadline) {
			printf("mrcheck: nccl_smoke: rank %d: all-reduce did not finish in %d s; aborting\n", rank, timeout_s);
			ncclCommAbort(comm);
			return 3;
		}
		usleep(1000);
	}
	cudaMemcpy(host, rbuf, count * sizeof(float), cudaMemcpyDeviceToHost);
	size_t bad = 0;
	for (size_t i = 0; i < count; i++)
		bad += host[i] != 3.0f;
	printf("mrcheck: nccl_smoke: rank %d: all-reduce of %zu floats: %s\n", rank, count, bad ? "WRONG" : "correct");
	ncclCommDestroy(comm);
	return bad ? 4 : 0;
}

int main(int argc, char **argv)
{
	size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : (1u << 20);
	int timeout_s = argc > 2 ? atoi(argv[2]) : 20;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pid_t pids[2];
	for (int rank = 0; rank < 2; rank++) {
		fflush(stdout);
		pids[rank] = fork();
		if (pids[rank] == 0)
			_exit(rank_main(rank, p[0], p[1], count, timeout_s));
	}
	close(p[0]);
	close(p[1]);
	int worst = 0;
	double deadline = now_s() + timeout_s + 40; /* init itself may block on a dead peer */
	int left = 2;
	int status[2] = {0, 0};
	while (left > 0) {
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);
		if (w > 0) {
			for (int r = 0; r < 2; r++)
				if (w == pids[r])
					status[r] = st;
			left--;
			continue;
		}
		if (now_s() > deadline) {
			for (int r = 0; r < 2; r++)
				kill(pids[r], SIGKILL);
			printf("mrcheck: nccl_smoke: ranks still running after %d s: killed\n", timeout_s + 40);
			worst = 3;
			deadline = now_s() + 3600;
		}
		usleep(10000);
	}
	for (int r = 0; r < 2; r++) {
		int code;
		if (WIFSIGNALED(status[r])) {
			printf("mrcheck: nccl_smoke: rank %d: killed by signal %d\n", r, WTERMSIG(status[r]));
			code = WTERMSIG(status[r]) == SIGKILL && worst == 3 ? 3 : 5;
		} else {
			code = WEXITSTATUS(status[r]);
			printf("mrcheck: nccl_smoke: rank %d: exit %d\n", r, code);
		}
		if (code == 77 || (code > worst && worst != 77))
			worst = code;
	}
	return worst;
}
