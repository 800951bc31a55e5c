/* fake_ibverbs_port.c - the fake libibverbs' port attributes, RoCE GID table and the kernel's ibv_modify_qp
 * checks that depend on them (fake_ibverbs_data.h: MRCHECK_FAKE_IBV_PORT, MRCHECK_FAKE_IBV_MODIFY).
 */
#define _GNU_SOURCE
#include "pre_c23_strtol.h" /* before any libc header */
#include "fake_ibverbs_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && strncmp(p, word, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

static const char *port_env(void)
{
	const char *e = getenv("MRCHECK_FAKE_IBV_PORT");
	return e ? e : "";
}

bool fake_dp_roce(void)
{
	return has_word(port_env(), "eth");
}

bool fake_dp_enabled(void)
{
	const char *e = getenv("MRCHECK_FAKE_IBV_DATA");
	return e && strcmp(e, "loopback") == 0;
}

void fake_dp_port_attr(struct ibv_port_attr *a)
{
	const char *env = port_env();
	if (has_word(env, "down")) {
		a->state = IBV_PORT_DOWN;
		a->phys_state = 3; /* Disabled */
	}
	if (fake_dp_roce()) {
		a->link_layer = IBV_LINK_LAYER_ETHERNET;
		a->lid = 0;
		a->sm_lid = 0;
		a->max_mtu = IBV_MTU_4096;
		a->active_mtu = IBV_MTU_1024; /* rxe on a 1500-byte netdev */
	}
	const char *m = strstr(env, "mtu=");
	if (m) {
		int bytes = atoi(m + 4);
		for (int v = IBV_MTU_256; v <= IBV_MTU_4096; v++)
			if ((128 << v) == bytes)
				a->active_mtu = (enum ibv_mtu)v;
	}
}

/* rxe's table on a netdev with one IPv4 address: link-local v1, v2, then the IPv4-mapped v1, v2; "noaddr" in
 * MRCHECK_FAKE_IBV_PORT: the netdev's address removed, only the link-local pair left. */
int fake_dp_gid(int dev_index, uint32_t index, union ibv_gid *gid, enum ibv_gid_type *type)
{
	memset(gid, 0, sizeof(*gid));
	if (index >= 128)
		return EINVAL;
	if (has_word(port_env(), "nogid") || index > 3 || (has_word(port_env(), "noaddr") && index > 1))
		return ENODATA;
	*type = (index % 2) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	if (index < 2) {
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		gid->raw[8] = 0x02;
		gid->raw[15] = (uint8_t)(dev_index + 1);
	} else {
		gid->raw[10] = gid->raw[11] = 0xff;
		gid->raw[12] = 192;
		gid->raw[14] = 2;
		gid->raw[15] = (uint8_t)(dev_index + 1);
	}
	return 0;
}

/* MRCHECK_FAKE_IBV_MODIFY=STATE=ERRNO: the transition to STATE (INIT, RTR, RTS) fails with ERRNO. */
static int modify_injected(enum ibv_qp_state to)
{
	static const struct {
		const char *name;
		int value;
	} k_errnos[] = {{"EINVAL", EINVAL},	      {"ETIMEDOUT", ETIMEDOUT}, {"ENETUNREACH", ENETUNREACH},
			{"EHOSTUNREACH", EHOSTUNREACH}, {"ENODATA", ENODATA},	  {"ENOMEM", ENOMEM}};
	const char *e = getenv("MRCHECK_FAKE_IBV_MODIFY");
	const char *state = to == IBV_QPS_INIT ? "INIT=" : to == IBV_QPS_RTR ? "RTR=" : to == IBV_QPS_RTS ? "RTS=" : NULL;
	if (e == NULL || state == NULL || strncmp(e, state, strlen(state)) != 0)
		return 0;
	const char *v = e + strlen(state);
	for (size_t i = 0; i < sizeof(k_errnos) / sizeof(k_errnos[0]); i++)
		if (strcmp(v, k_errnos[i].name) == 0)
			return k_errnos[i].value;
	int n = atoi(v);
	return n > 0 && n < 4096 ? n : 0;
}

int fake_dp_check_modify(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	(void)qp;
	if (!(mask & IBV_QP_STATE))
		return 0;
	int injected = modify_injected(attr->qp_state);
	if (injected)
		return injected;
	if (attr->qp_state != IBV_QPS_RTR)
		return 0;
	struct ibv_port_attr pa;
	memset(&pa, 0, sizeof(pa));
	pa.active_mtu = IBV_MTU_4096;
	fake_dp_port_attr(&pa);
	/* The kernel refuses a path MTU above the port's (ib_modify_qp_is_ok / the driver's own check). */
	if ((mask & IBV_QP_PATH_MTU) && attr->path_mtu > pa.active_mtu)
		return EINVAL;
	if (!(mask & IBV_QP_AV))
		return 0;
	if (fake_dp_roce()) {
		union ibv_gid g;
		enum ibv_gid_type t;
		/* RoCE needs a GRH whose source GID exists. */
		if (!attr->ah_attr.is_global || fake_dp_gid(0, attr->ah_attr.grh.sgid_index, &g, &t) != 0)
			return EINVAL;
	} else if (attr->ah_attr.dlid == 0) {
		return EINVAL;
	}
	return 0;
}

