/* The floor for the registration probe: what pinning the same bytes costs without any verbs at all - mmap,
 * touch every page, mlock, munlock, munmap - in one process. Prints microseconds as JSON on stdout.
 *   mlock_baseline BYTES */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mlock_baseline BYTES\n");
		return 2;
	}
	size_t bytes = strtoull(argv[1], NULL, 0);
	long ps = sysconf(_SC_PAGESIZE);
	long long t0 = now_us();
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (size_t off = 0; off < bytes; off += (size_t)ps)
		p[off] = 1;
	long long t1 = now_us();
	if (mlock(p, bytes) != 0) {
		fprintf(stderr, "mlock: %s\n", strerror(errno));
		return 1;
	}
	munlock(p, bytes);
	long long t2 = now_us();
	munmap(p, bytes);
	long long t3 = now_us();
	printf("{\"bytes\":%zu,\"touch_us\":%lld,\"lock_unlock_us\":%lld,\"total_us\":%lld}\n", bytes, t1 - t0, t2 - t1,
	       t3 - t0);
	return 0;
}
