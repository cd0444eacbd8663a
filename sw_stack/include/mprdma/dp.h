/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * mprdma data path: the user-space half of the hardware interface.
 *
 * Builds send and receive WQEs in host memory, rings doorbells and polls
 * completion queues. It has no SystemC and no libibverbs dependency: the
 * rdma-core provider (in a QEMU guest) and the modeled hosts (in the
 * simulator) link the same code and differ only in struct mpr_dp_ops, which
 * says how a doorbell reaches the UAR page and how bytes of a user buffer
 * are read for inline sends.
 *
 * Not thread-safe: callers serialise per QP and per CQ, as providers do.
 */
#ifndef MPRDMA_DP_H
#define MPRDMA_DP_H

#include <stddef.h>
#include <stdint.h>

#include <mprdma/hw.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mpr_dp_qp;
struct mpr_dp_srq;

struct mpr_dp_ops {
	/* Write a 64-bit doorbell at byte offset `off` of the UAR page. */
	void (*uar_write64)(void *ctx, uint32_t off, uint64_t value);
	/* Copy `len` bytes of the caller's buffer at `addr` into `dst`;
	 * returns 0, or -EFAULT if the address is not readable. */
	int (*copy_from_user)(void *ctx, void *dst, uint64_t addr, uint32_t len);
	/* Optional, for WQE by MMIO: write `len` bytes (a multiple of 64) at
	 * byte offset `off` of the UAR page with write-combining stores. NULL:
	 * mpr_dp_post_send_mmio() rings the doorbell instead. */
	void (*uar_write_wc)(void *ctx, uint32_t off, const void *data, uint32_t len);
	/* Find the QP a CQE names (CQs can be shared by QPs). */
	struct mpr_dp_qp *(*lookup_qp)(void *ctx, uint32_t qpn);
	void *ctx;
	/* Optional, for inline receive (MPR_CQ_F_INLINE_RECV): copy `len`
	 * bytes to the caller's buffer at `addr`; returns 0 or -EFAULT. NULL:
	 * such CQs must not be created. */
	int (*copy_to_user)(void *ctx, uint64_t addr, const void *src, uint32_t len);
	/* Optional: take (lock = 1) or release (0) the SRQ's lock, for a
	 * poll that frees a slot of an SRQ whose posts run in another
	 * thread. NULL: the caller serialises SRQ posts and polls. */
	void (*srq_lock)(void *ctx, struct mpr_dp_srq *srq, int lock);
};

/* A shared receive queue: a ring of slots that software keeps as a linked
 * list (<mprdma/hw.h>, struct mpr_wqe_srq_next). A post fills the slot at
 * `head` and moves head to that slot's next; a polled completion links its
 * slot after `tail`. The slot at tail stays free (it holds the link to the
 * next one posted), so 2^log_size - 1 WQEs fit. */
struct mpr_dp_srq {
	uint8_t *buf;       /* ring of 2^log_size slots of 2^log_stride bytes */
	uint64_t *wr_id;    /* 2^log_size entries, owned by the caller */
	uint32_t srqn;
	uint32_t log_size;
	uint32_t log_stride;
	uint32_t max_sge;
	uint32_t head;      /* slot the next WQE goes into */
	uint32_t tail;      /* the list's last free slot */
	uint32_t count;     /* WQEs posted since creation (the doorbell's count) */
	uint32_t outstanding; /* posted and not yet completed */
	const struct mpr_dp_ops *ops;
};

struct mpr_dp_wq {
	uint8_t *buf;       /* ring of 2^log_size slots of 2^log_stride bytes */
	uint64_t *wr_id;    /* 2^log_size entries, owned by the caller */
	uint32_t log_size;
	uint32_t log_stride;
	uint32_t pi;        /* next slot to fill (free-running) */
	uint32_t ci;        /* oldest slot not yet completed (free-running) */
	uint32_t max_sge;
};

/* Software view of the QP state, kept by whoever calls modify_qp. */
enum mpr_dp_qp_state {
	MPR_DP_QPS_RESET = MPR_QPS_RESET,
	MPR_DP_QPS_INIT = MPR_QPS_INIT,
	MPR_DP_QPS_RTR = MPR_QPS_RTR,
	MPR_DP_QPS_RTS = MPR_QPS_RTS,
	MPR_DP_QPS_ERR = MPR_QPS_ERR,
};

struct mpr_dp_qp {
	uint32_t qpn;
	uint32_t state;      /* enum mpr_dp_qp_state */
	uint32_t qp_type;    /* enum mpr_qp_type; 0 is taken as MPR_QPT_RC */
	uint32_t max_inline;
	int sq_sig_all;
	struct mpr_dp_wq sq;
	struct mpr_dp_wq rq;
	const struct mpr_dp_ops *ops;
	/* RECVs come from this SRQ (the QP has no rq ring); NULL: its own. */
	struct mpr_dp_srq *srq;
};

struct mpr_dp_cq {
	uint8_t *buf;            /* ring of 2^log_size CQE slots */
	volatile uint32_t *dbrec; /* consumer-index record the NIC may read */
	uint32_t cqn;
	uint32_t log_size;
	uint32_t ci;             /* free-running consumer index */
	const struct mpr_dp_ops *ops;
	uint32_t log_cqe_size;   /* slot of 2^log_cqe_size bytes; 0 = 32 */
};

struct mpr_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct mpr_send_wr {
	uint64_t wr_id;
	uint8_t opcode;       /* enum mpr_wqe_opcode */
	uint8_t flags;        /* MPR_WQE_F_* */
	uint32_t imm_data;    /* network byte order */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add; /* CAS: compare; FETCH_ADD: addend */
	uint64_t swap;        /* CAS: swap value */
	const struct mpr_sge *sg_list;
	uint32_t num_sge;
	/* UD QPs only: the destination (an address handle's fields and the
	 * remote QP); copied into the WQE's struct mpr_wqe_ud. */
	const struct mpr_wqe_ud *ud;
};

struct mpr_recv_wr {
	uint64_t wr_id;
	const struct mpr_sge *sg_list;
	uint32_t num_sge;
};

struct mpr_wc {
	uint64_t wr_id;
	uint32_t status;   /* enum mpr_cqe_status (= enum ibv_wc_status) */
	uint32_t opcode;   /* enum mpr_cqe_opcode */
	uint32_t byte_len;
	uint32_t imm_data; /* network byte order */
	uint32_t qpn;
	uint32_t flags;    /* MPR_CQE_F_* */
	uint32_t syndrome; /* enum mpr_cqe_syndrome */
	uint32_t wqe_index;
	int is_recv;
	uint32_t src_qp;   /* UD receive: the sender's QP */
};

/* Largest payload a WQE of this QP can carry inline. */
uint32_t mpr_dp_max_inline(const struct mpr_dp_qp *qp);

/* Builds the WQE for `wr` in the next SQ slot. Rings the SQ doorbell when
 * `ring` is non-zero (pass 0 to batch several WQEs behind one doorbell).
 * Returns 0, -ENOMEM when the SQ is full, -EINVAL for a malformed request
 * (unknown opcode, too many SGEs, inline payload too long, atomic without
 * exactly one 8-byte SGE; on a UD QP: not a SEND or no destination) or
 * when the QP is in RESET, -EFAULT if an inline
 * source is unreadable. On error nothing is posted. */
int mpr_dp_post_send(struct mpr_dp_qp *qp, const struct mpr_send_wr *wr, int ring);
/* Like mpr_dp_post_send(qp, wr, 1), but hands the WQE to the NIC by MMIO
 * (MPR_UAR_BF window) instead of a doorbell when the ops can and the WQE
 * fits the window; returns 1 when it went by MMIO, 0 by doorbell, or the
 * negative errors of mpr_dp_post_send(). */
int mpr_dp_post_send_mmio(struct mpr_dp_qp *qp, const struct mpr_send_wr *wr);
/* Hands the newest posted WQE (and, by its index, every one before it) to
 * the NIC by MMIO when the ops can and it fits the window, else rings the
 * doorbell; 1 by MMIO, 0 by doorbell. For a WQE posted with ring = 0. */
int mpr_dp_ring_sq_mmio(struct mpr_dp_qp *qp);
/* Rings the SQ doorbell with the current producer index. */
void mpr_dp_ring_sq(struct mpr_dp_qp *qp);

/* Posts a RECV WQE and rings the RQ doorbell. Same error convention. */
int mpr_dp_post_recv(struct mpr_dp_qp *qp, const struct mpr_recv_wr *wr);
/* Like mpr_dp_post_recv(), ringing the doorbell only when `ring` is set:
 * RECVs posted in a batch, then one mpr_dp_ring_rq(). */
int mpr_dp_post_recv_db(struct mpr_dp_qp *qp, const struct mpr_recv_wr *wr, int ring);
/* Rings the RQ doorbell with the current producer index. */
void mpr_dp_ring_rq(struct mpr_dp_qp *qp);

/* Links every slot of a new SRQ's ring to the next one and sets head,
 * tail and count as the NIC expects after CREATE_SRQ (buf, wr_id, log_size,
 * log_stride, max_sge, srqn and ops set by the caller). */
void mpr_dp_srq_init(struct mpr_dp_srq *srq);
/* Posts a RECV WQE to the SRQ, ringing its doorbell when `ring` is set.
 * Returns 0, -ENOMEM when the SRQ is full, -EINVAL for too many SGEs. */
int mpr_dp_post_srq_recv(struct mpr_dp_srq *srq, const struct mpr_recv_wr *wr, int ring);
/* Rings the SRQ doorbell with the count of WQEs posted. */
void mpr_dp_ring_srq(struct mpr_dp_srq *srq);
/* Free slots (WQEs that can still be posted). */
uint32_t mpr_dp_srq_space(const struct mpr_dp_srq *srq);
/* Links slot `slot` (a CQE's wqe_index, masked to the ring) after the
 * list's tail, under ops->srq_lock when set: what mpr_dp_poll_cq() does for
 * a receive completion of a QP of the SRQ, for callers that drop such a CQE
 * unpolled (a QP destroyed or reset with completions left in its CQ). */
void mpr_dp_srq_free_slot(struct mpr_dp_srq *srq, uint32_t slot);

/* The transport engine (enum mpr_transport) a name chooses: NULL or "" the
 * NIC's default, else mpr_transport_name()'s names in <mprdma/hw.h>. -1 for
 * any other name. One table for every user-space stack (the provider's
 * MPRDMA_QP_TRANSPORT, the modeled hosts' perftest key qp_transport). */
int mpr_transport_of_name(const char *name);

/* Polls up to `n` completions into `wc`; returns how many (0 if none).
 * Updates the consumer-index record. */
int mpr_dp_poll_cq(struct mpr_dp_cq *cq, int n, struct mpr_wc *wc);

/* Requests an event for the next completion (or the next solicited one). */
void mpr_dp_arm_cq(struct mpr_dp_cq *cq, int solicited_only);

/* Free slots in the send queue. */
uint32_t mpr_dp_sq_space(const struct mpr_dp_qp *qp);

#ifdef __cplusplus
}
#endif

#endif /* MPRDMA_DP_H */
