/* fake_ibverbs_data.c - a loopback data path for the fake libibverbs (fake_ibverbs_data.h; the ports and GIDs
 * are fake_ibverbs_port.c).
 *
 * With MRCHECK_FAKE_IBV_DATA=loopback, RC queue pairs of this process connected to each other (dest_qp_num)
 * move bytes: a SEND takes the peer's first posted receive, an RDMA WRITE copies to the remote address, and
 * both complete on the CQs the way an HCA completes them. A peer that is not in this process (or not yet RTR)
 * never answers: the sender gets IBV_WC_RETRY_EXC_ERR, as after a real HCA's retries. No rkey is checked.
 */
#define _GNU_SOURCE
#include "pre_c23_strtol.h" /* before any libc header */
#include "fake_ibverbs_data.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP_MAX_QPS 256
#define DP_MAX_CQS 256
#define DP_RQ 256
#define DP_CQ 1024

struct dp_recv {
	uint64_t wr_id;
	struct ibv_sge sge[4];
	int num_sge;
};

struct dp_qp {
	struct ibv_qp *qp;
	uint32_t dest_qpn;
	struct dp_recv rq[DP_RQ];
	int rq_head, rq_len;
};

struct dp_cq {
	struct ibv_cq *cq;
	struct ibv_wc wc[DP_CQ];
	int head, len;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dp_qp *g_qps[DP_MAX_QPS];
static struct dp_cq *g_cqs[DP_MAX_CQS];
static unsigned long g_send_completions;

static struct dp_qp *find_qp(struct ibv_qp *qp, bool create)
{
	int free_slot = -1;
	for (int i = 0; i < DP_MAX_QPS; i++) {
		if (g_qps[i] && g_qps[i]->qp == qp)
			return g_qps[i];
		if (!g_qps[i] && free_slot < 0)
			free_slot = i;
	}
	if (!create || free_slot < 0)
		return NULL;
	struct dp_qp *q = calloc(1, sizeof(*q));
	if (q) {
		q->qp = qp;
		g_qps[free_slot] = q;
	}
	return q;
}

static struct dp_qp *find_qpn(uint32_t qpn)
{
	for (int i = 0; i < DP_MAX_QPS; i++)
		if (g_qps[i] && g_qps[i]->qp->qp_num == qpn)
			return g_qps[i];
	return NULL;
}

static struct dp_cq *find_cq(struct ibv_cq *cq, bool create)
{
	int free_slot = -1;
	for (int i = 0; i < DP_MAX_CQS; i++) {
		if (g_cqs[i] && g_cqs[i]->cq == cq)
			return g_cqs[i];
		if (!g_cqs[i] && free_slot < 0)
			free_slot = i;
	}
	if (!create || free_slot < 0)
		return NULL;
	struct dp_cq *c = calloc(1, sizeof(*c));
	if (c) {
		c->cq = cq;
		g_cqs[free_slot] = c;
	}
	return c;
}

void fake_dp_modified(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	pthread_mutex_lock(&g_lock);
	struct dp_qp *q = find_qp(qp, true);
	if (q && (mask & IBV_QP_DEST_QPN))
		q->dest_qpn = attr->dest_qp_num;
	pthread_mutex_unlock(&g_lock);
}

void fake_dp_forget_qp(struct ibv_qp *qp)
{
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < DP_MAX_QPS; i++)
		if (g_qps[i] && g_qps[i]->qp == qp) {
			free(g_qps[i]);
			g_qps[i] = NULL;
		}
	pthread_mutex_unlock(&g_lock);
}

void fake_dp_forget_cq(struct ibv_cq *cq)
{
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < DP_MAX_CQS; i++)
		if (g_cqs[i] && g_cqs[i]->cq == cq) {
			free(g_cqs[i]);
			g_cqs[i] = NULL;
		}
	pthread_mutex_unlock(&g_lock);
}

static void complete(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len,
		     uint32_t qpn)
{
	struct dp_cq *c = find_cq(cq, true);
	if (c == NULL || c->len >= DP_CQ)
		return; /* an overrun CQ loses completions, as the caller's CQ would overflow */
	struct ibv_wc *w = &c->wc[(c->head + c->len++) % DP_CQ];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->status = st;
	w->opcode = op;
	w->byte_len = len;
	w->qp_num = qpn;
}

/* MRCHECK_FAKE_IBV_WC for the send completion numbered `nth` (from 1): a status, or -1 for none. */
static int injected_status(unsigned long nth, bool *drop, bool *corrupt)
{
	const char *e = getenv("MRCHECK_FAKE_IBV_WC");
	*drop = e && strcmp(e, "drop") == 0;
	*corrupt = e && strcmp(e, "corrupt") == 0;
	if (e == NULL || *drop || *corrupt || *e == '\0')
		return -1;
	static const char *const names[] = {"SUCCESS",	      "LOC_LEN_ERR",	   "LOC_QP_OP_ERR",   "LOC_EEC_OP_ERR",
					    "LOC_PROT_ERR",   "WR_FLUSH_ERR",	   "MW_BIND_ERR",     "BAD_RESP_ERR",
					    "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",  "REM_OP_ERR",
					    "RETRY_EXC_ERR",  "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR"};
	char name[32];
	snprintf(name, sizeof(name), "%s", e);
	char *at = strchr(name, '@');
	if (at) {
		*at = '\0';
		if (strtoul(at + 1, NULL, 10) != nth)
			return -1;
	}
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	int v = atoi(name);
	return v > 0 && v <= IBV_WC_TM_RNDV_INCOMPLETE ? v : -1;
}

static uint32_t sge_len(const struct ibv_sge *s, int n)
{
	uint32_t t = 0;
	for (int i = 0; i < n; i++)
		t += s[i].length;
	return t;
}

/* Copies the gather list `src` into the scatter list `dst` (at most `room` bytes, checked by the caller). */
static void scatter(const struct ibv_sge *src, int nsrc, const struct ibv_sge *dst, int ndst, bool corrupt)
{
	int d = 0;
	uint32_t doff = 0;
	bool first = true;
	for (int i = 0; i < nsrc; i++) {
		const char *p = (const char *)(uintptr_t)src[i].addr;
		uint32_t left = src[i].length;
		while (left > 0 && d < ndst) {
			uint32_t room = dst[d].length - doff;
			uint32_t n = left < room ? left : room;
			char *q = (char *)(uintptr_t)dst[d].addr + doff;
			memcpy(q, p, n);
			if (corrupt && first && n > 0)
				q[0] = (char)~q[0];
			first = false;
			p += n;
			left -= n;
			doff += n;
			if (doff == dst[d].length) {
				d++;
				doff = 0;
			}
		}
	}
}

/* One work request of a QP in RTS. Caller holds g_lock. */
static void execute(struct dp_qp *q, struct ibv_send_wr *wr)
{
	bool drop, corrupt;
	int st = injected_status(++g_send_completions, &drop, &corrupt);
	if (drop)
		return;
	bool signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0; /* sq_sig_all is not honoured */
	enum ibv_wc_opcode op = wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
	uint32_t len = sge_len(wr->sg_list, wr->num_sge);
	struct dp_qp *peer = find_qpn(q->dest_qpn);
	if (st < 0 && (peer == NULL || peer->qp->state < IBV_QPS_RTR || peer->qp->state > IBV_QPS_SQD))
		st = IBV_WC_RETRY_EXC_ERR; /* nobody answers: the HCA retries, then gives up */
	if (st < 0 && wr->opcode == IBV_WR_SEND) {
		if (peer->rq_len == 0) {
			st = IBV_WC_RNR_RETRY_EXC_ERR;
		} else {
			struct dp_recv *r = &peer->rq[peer->rq_head];
			peer->rq_head = (peer->rq_head + 1) % DP_RQ;
			peer->rq_len--;
			if (len > sge_len(r->sge, r->num_sge)) {
				complete(peer->qp->recv_cq, r->wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, peer->qp->qp_num);
				st = IBV_WC_REM_INV_REQ_ERR;
			} else {
				scatter(wr->sg_list, wr->num_sge, r->sge, r->num_sge, corrupt);
				complete(peer->qp->recv_cq, r->wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, len, peer->qp->qp_num);
				st = IBV_WC_SUCCESS;
			}
		}
	} else if (st < 0) {
		struct ibv_sge dst = {.addr = wr->wr.rdma.remote_addr, .length = len, .lkey = 0};
		scatter(wr->sg_list, wr->num_sge, &dst, 1, corrupt);
		st = IBV_WC_SUCCESS;
	}
	if (signaled || st != IBV_WC_SUCCESS)
		complete(q->qp->send_cq, wr->wr_id, (enum ibv_wc_status)st, op, st == IBV_WC_SUCCESS ? len : 0,
			 q->qp->qp_num);
}

int fake_dp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	pthread_mutex_lock(&g_lock);
	int err = 0;
	struct dp_qp *q = find_qp(qp, true);
	for (; wr; wr = wr->next) {
		if (q == NULL || qp->state != IBV_QPS_RTS || wr->num_sge < 0 || wr->num_sge > 4 ||
		    (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_RDMA_WRITE)) {
			err = EINVAL;
			break;
		}
		execute(q, wr);
	}
	if (err && bad_wr)
		*bad_wr = wr;
	pthread_mutex_unlock(&g_lock);
	return err;
}

int fake_dp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	pthread_mutex_lock(&g_lock);
	int err = 0;
	struct dp_qp *q = find_qp(qp, true);
	for (; wr; wr = wr->next) {
		if (q == NULL || qp->state == IBV_QPS_RESET || wr->num_sge < 0 || wr->num_sge > 4) {
			err = EINVAL;
			break;
		}
		if (q->rq_len >= DP_RQ) {
			err = ENOMEM;
			break;
		}
		struct dp_recv *r = &q->rq[(q->rq_head + q->rq_len++) % DP_RQ];
		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		if (wr->num_sge > 0)
			memcpy(r->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
	}
	if (err && bad_wr)
		*bad_wr = wr;
	pthread_mutex_unlock(&g_lock);
	return err;
}

int fake_dp_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	pthread_mutex_lock(&g_lock);
	int n = 0;
	struct dp_cq *c = find_cq(cq, false);
	while (c && n < num_entries && c->len > 0) {
		wc[n++] = c->wc[c->head];
		c->head = (c->head + 1) % DP_CQ;
		c->len--;
	}
	pthread_mutex_unlock(&g_lock);
	return n;
}
