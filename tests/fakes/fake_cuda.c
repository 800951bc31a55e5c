/* A fake libcuda.so.1 for the mnnvl_handle tests (src/rdma/cuda_gpu.cpp, src/checks/mnnvl_handle.cpp): the CUDA
 * driver API entry points mrcheck's GPU probe loads, with the types and values of NVIDIA's public cuda.h (CUDA 12.3+;
 * docs/facts/mnnvl.md §5), one GPU, answering what the environment says. Never installed; no memory is real: the
 * probe's mr_gpu half is not what these tests are about (they run it without an RDMA device).
 *
 *   MRCHECK_FAKE_CUDA_FABRIC       ok (default) | not_permitted | not_supported | export_not_permitted | oom:
 *                                  what cuMemCreate with CU_MEM_HANDLE_TYPE_FABRIC answers (export_not_permitted:
 *                                  cuMemCreate works, cuMemExportToShareableHandle returns CUDA_ERROR_NOT_PERMITTED)
 *   MRCHECK_FAKE_CUDA_FABRIC_ATTR  0: CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is 0 (default 1)
 *   MRCHECK_FAKE_CUDA_NO_DEVICE    set: cuInit returns CUDA_ERROR_NO_DEVICE
 *
 * cuMemCreate checks what a fabric-handle allocation needs (type PINNED, location DEVICE, requestedHandleTypes
 * exactly FABRIC, a size that is a multiple of the granularity) and answers CUDA_ERROR_INVALID_VALUE otherwise;
 * the import checks that it gets the 64 bytes the export wrote. Every handle must be released: MRCHECK_FAKE_CUDA_LOG
 * (a file) gets one line per call and "leak N" at exit when N handles were not released.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct fake_ctx *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

/* cuda.h's CUmemAllocationProp_v1, as laid out there. */
typedef struct {
	int type;
	int requestedHandleTypes;
	struct {
		int type;
		int id;
	} location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

enum {
	k_success = 0,
	k_invalid_value = 1,
	k_out_of_memory = 2,
	k_no_device = 100,
	k_not_permitted = 800,
	k_not_supported = 801,
};
enum { k_pinned = 0x1, k_location_device = 0x1, k_handle_fabric = 0x8, k_granularity = 2 << 20 };
enum {
	k_attr_vmm = 102,
	k_attr_handle_fabric = 128,
};

CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);
CUresult cuCtxSetCurrent(CUcontext c);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuGetErrorName(CUresult r, const char **name);
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option);
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle h);
CUresult cuMemExportToShareableHandle(void *shared, CUmemGenericAllocationHandle h, int type, unsigned long long flags);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *shared, int type);

static int live_handles;

static void note(const char *what, CUresult r)
{
	const char *path = getenv("MRCHECK_FAKE_CUDA_LOG");
	if (!path)
		return;
	FILE *f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%s %d\n", what, r);
	fclose(f);
}

static void __attribute__((destructor)) report_leaks(void)
{
	if (live_handles != 0)
		note("leak", live_handles);
}

static const char *mode(void)
{
	const char *m = getenv("MRCHECK_FAKE_CUDA_FABRIC");
	return m && *m ? m : "ok";
}

CUresult cuInit(unsigned flags)
{
	if (flags != 0)
		return k_invalid_value;
	return getenv("MRCHECK_FAKE_CUDA_NO_DEVICE") ? k_no_device : k_success;
}
CUresult cuDriverGetVersion(int *v)
{
	*v = 12080;
	return k_success;
}
CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return k_success;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return k_invalid_value;
	*d = 0;
	return k_success;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
	(void)d;
	const char *fa = getenv("MRCHECK_FAKE_CUDA_FABRIC_ATTR");
	*v = 0;
	if (attr == k_attr_handle_fabric)
		*v = fa && strcmp(fa, "0") == 0 ? 0 : 1;
	if (attr == k_attr_vmm)
		*v = 1;
	return k_success;
}
CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d)
{
	(void)d;
	snprintf(bus, (size_t)len, "0009:01:00.0");
	return k_success;
}
static struct fake_ctx {
	int unused;
} the_ctx;
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	(void)d;
	*c = &the_ctx;
	return k_success;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	(void)d;
	return k_success;
}
CUresult cuCtxSetCurrent(CUcontext c)
{
	return c == &the_ctx ? k_success : k_invalid_value;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
	(void)p;
	(void)bytes;
	return k_out_of_memory;
}
CUresult cuMemFree_v2(CUdeviceptr p)
{
	(void)p;
	return k_success;
}

CUresult cuGetErrorName(CUresult r, const char **name)
{
	switch (r) {
	case k_success:
		*name = "CUDA_SUCCESS";
		return k_success;
	case k_invalid_value:
		*name = "CUDA_ERROR_INVALID_VALUE";
		return k_success;
	case k_out_of_memory:
		*name = "CUDA_ERROR_OUT_OF_MEMORY";
		return k_success;
	case k_no_device:
		*name = "CUDA_ERROR_NO_DEVICE";
		return k_success;
	case k_not_permitted:
		*name = "CUDA_ERROR_NOT_PERMITTED";
		return k_success;
	case k_not_supported:
		*name = "CUDA_ERROR_NOT_SUPPORTED";
		return k_success;
	default:
		*name = NULL;
		return k_invalid_value;
	}
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option)
{
	(void)option;
	if (!prop || prop->location.type != k_location_device)
		return k_invalid_value;
	*g = k_granularity;
	return k_success;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags)
{
	CUresult r = k_success;
	if (flags != 0 || !prop || prop->type != k_pinned || prop->location.type != k_location_device ||
	    prop->requestedHandleTypes != k_handle_fabric || size == 0 || size % k_granularity != 0) {
		r = k_invalid_value;
	} else if (strcmp(mode(), "not_permitted") == 0) {
		r = k_not_permitted;
	} else if (strcmp(mode(), "not_supported") == 0) {
		r = k_not_supported;
	} else if (strcmp(mode(), "oom") == 0) {
		r = k_out_of_memory;
	}
	if (r == k_success) {
		*h = 0x1000 + (CUmemGenericAllocationHandle)live_handles;
		++live_handles;
	}
	note("cuMemCreate", r);
	return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	if (h < 0x1000 || live_handles == 0)
		return k_invalid_value;
	--live_handles;
	note("cuMemRelease", k_success);
	return k_success;
}

/* The handle's 64 bytes (CUmemFabricHandle): a pattern the import checks. */
CUresult cuMemExportToShareableHandle(void *shared, CUmemGenericAllocationHandle h, int type, unsigned long long flags)
{
	CUresult r = k_success;
	if (type != k_handle_fabric || flags != 0 || h < 0x1000) {
		r = k_invalid_value;
	} else if (strcmp(mode(), "export_not_permitted") == 0) {
		r = k_not_permitted;
	} else {
		memset(shared, 0xab, 64);
	}
	note("cuMemExportToShareableHandle", r);
	return r;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *shared, int type)
{
	const unsigned char *b = shared;
	CUresult r = k_success;
	if (type != k_handle_fabric)
		r = k_invalid_value;
	for (int i = 0; r == k_success && i < 64; ++i) {
		if (b[i] != 0xab)
			r = k_invalid_value;
	}
	if (r == k_success) {
		*h = 0x1000 + (CUmemGenericAllocationHandle)live_handles;
		++live_handles;
	}
	note("cuMemImportFromShareableHandle", r);
	return r;
}
