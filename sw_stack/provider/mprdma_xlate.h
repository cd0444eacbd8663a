/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Pure translations between the verbs API and the mprdma data path
 * (<mprdma/dp.h>), and the CQ clean-up the provider does when a QP goes
 * away. Nothing here touches rdma-core internals, the kernel or a device:
 * it needs only the public <infiniband/verbs.h>, so it is unit-tested on its
 * own (tests/sw_stack/provider_xlate_test.cc).
 */
#ifndef MPRDMA_XLATE_H
#define MPRDMA_XLATE_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include <mprdma/dp.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fills *out from the verbs work request *wr. The SGE list is not copied:
 * out->sg_list points at wr->sg_list, whose layout equals struct mpr_sge
 * (asserted in mprdma_xlate.c). Returns 0, or -EINVAL for an opcode or send
 * flag the device does not have.
 */
int mprdma_xlate_send_wr(const struct ibv_send_wr *wr, struct mpr_send_wr *out);

/* The WQE flags (MPR_WQE_F_*) of verbs send flags; -EINVAL for a flag the
 * device does not have. */
int mprdma_xlate_send_flags(unsigned int send_flags, uint8_t *out);

/* Same for a receive work request. Never fails. */
void mprdma_xlate_recv_wr(const struct ibv_recv_wr *wr,
			  struct mpr_recv_wr *out);

/*
 * Fills *out from a completion the data path polled. Every field of *out is
 * written (callers pass uninitialised arrays).
 */
void mprdma_xlate_wc(const struct mpr_wc *in, struct ibv_wc *out);

/*
 * The CQE slot (log2 of its bytes) named by the value of
 * MPRDMA_INLINE_RECV: NULL, "" or "0" is 0 (32-byte slots, no inline
 * receive); "64" is 6 and "128" is 7 (receives of up to 32 or 96 bytes land
 * in the CQE). -1 for anything else.
 */
int mprdma_inline_recv_slot(const char *value);
/* The verbs completion opcode of a CQE opcode; -1 if it has none. */
int mprdma_wc_opcode(uint32_t cqe_opcode);

/*
 * Removes from the CQ every completion of QP `qpn` that the NIC has written
 * but the consumer has not polled yet, and returns how many. Called, under
 * the CQ lock, once the kernel has destroyed or reset the QP (so the NIC
 * writes no more CQEs for it): its QPN may be handed out again at once, and
 * a stale CQE would then complete a WQE of the new QP.
 *
 * The survivors are moved towards the producer end and the consumer index
 * skips the freed slots, so the NIC, which only writes beyond the producer
 * index, never sees a slot change under it.
 */
uint32_t mprdma_cq_clean(struct mpr_dp_cq *cq, uint32_t qpn);
/* The same for a QP of an SRQ: the SRQ slot of each receive completion
 * removed is linked back into the SRQ's list (mpr_dp_srq_free_slot()). */
uint32_t mprdma_cq_clean_srq(struct mpr_dp_cq *cq, uint32_t qpn,
			     struct mpr_dp_srq *srq);

#ifdef __cplusplus
}
#endif

#endif /* MPRDMA_XLATE_H */
