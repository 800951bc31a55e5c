/* fake_ibverbs_data.h - the fake libibverbs' ports, GIDs and loopback data path (fake_ibverbs_data.c), called
 * from fake_ibverbs.c. Environment (read at every call):
 *   MRCHECK_FAKE_IBV_PORT  comma list: down (port state DOWN), eth (RoCE: link layer Ethernet, no LID, a GID
 *                          table like rxe's), nogid (with eth: every GID slot empty), noaddr (with eth: the
 *                          link-local GIDs only, as with the netdev's addresses removed), mtu=256..4096 (active MTU)
 *   MRCHECK_FAKE_IBV_DATA  "loopback": posted work moves bytes between QPs of this process and completes;
 *                          unset: posting fails with EOPNOTSUPP (the fake moves no data)
 *   MRCHECK_FAKE_IBV_WC    STATUS[@N]: the Nth send-side completion (every one without @N) carries the
 *                          ibv_wc_status STATUS (a number, or a name such as RETRY_EXC_ERR) and moves nothing;
 *                          "drop": nothing ever completes; "corrupt": the first delivered byte is flipped
 *   MRCHECK_FAKE_IBV_MODIFY STATE=ERRNO: ibv_modify_qp to STATE (INIT, RTR, RTS) fails with ERRNO (a name such as
 *                          ETIMEDOUT or EINVAL, or a number), whichever call it is
 */
#ifndef MRCHECK_FAKE_IBVERBS_DATA_H
#define MRCHECK_FAKE_IBVERBS_DATA_H

#include <infiniband/verbs.h>

#include <stdbool.h>
#include <stdint.h>

/* Applies MRCHECK_FAKE_IBV_PORT to an InfiniBand port's attributes. */
void fake_dp_port_attr(struct ibv_port_attr *a);
bool fake_dp_roce(void);
/* RoCE GID slot `index` of device `dev_index`: 0, or ENODATA for an empty slot, EINVAL past the table. */
int fake_dp_gid(int dev_index, uint32_t index, union ibv_gid *gid, enum ibv_gid_type *type);
/* What the kernel refuses in ibv_modify_qp beyond the fake's own checks: an errno, or 0. */
int fake_dp_check_modify(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask);
void fake_dp_modified(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask);
void fake_dp_forget_qp(struct ibv_qp *qp);
void fake_dp_forget_cq(struct ibv_cq *cq);
bool fake_dp_enabled(void);
int fake_dp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int fake_dp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int fake_dp_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);

#endif
