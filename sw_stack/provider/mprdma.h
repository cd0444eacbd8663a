/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * mprdma rdma-core provider: objects and internal interfaces.
 *
 * The provider is glue: uverbs commands go to the kernel driver through
 * libibverbs' ibv_cmd_*() helpers, the rings the kernel allocated are
 * mmap()ed, and the data path (WQE building, doorbells, CQ polling) is the
 * shared C library sw_stack/dp, the same code the simulator's modeled hosts
 * run. Locking follows the usual provider model: one spinlock per CQ and one
 * per send, receive and shared receive queue, because sw_stack/dp is not
 * thread-safe. A poll that frees an SRQ slot takes the SRQ's lock inside
 * the CQ's (mpr_dp_ops.srq_lock), never the other way round.
 */
#ifndef MPRDMA_PROVIDER_H
#define MPRDMA_PROVIDER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/driver.h>

#include <mprdma/dp.h>
#include <mprdma/hw.h>

#include "mprdma-abi.h"

/* Buckets of the per-context qpn -> QP table (power of two). */
#define MPRDMA_QP_TABLE_SIZE 256

struct mprdma_device {
	struct verbs_device vdev;
	size_t page_size;
};

struct mprdma_qp;

struct mprdma_context {
	struct verbs_context ibvctx;
	void *uar; /* this context's UAR page (doorbells) */
	size_t uar_map_len;
	uint32_t uar_index;
	uint32_t max_inline; /* device limits from alloc_ucontext */
	uint32_t max_sge;
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	/* Engine of the RC QPs this context creates (enum mpr_transport),
	 * from MPRDMA_QP_TRANSPORT at open; -1: that names no engine. */
	int qp_transport;
	uint32_t uctx_flags; /* MPR_UCTX_F_* from alloc_ucontext */
	/* CQE slot of the context's CQs (log2 bytes; 0: 32-byte slots, no
	 * inline receive), from MPRDMA_INLINE_RECV at open; -1: that names
	 * no slot size. */
	int cq_log_cqe_size;
	/* WQE by MMIO: every QP of the context shares the UAR page's window,
	 * so one WQE is written into it at a time. */
	pthread_spinlock_t bf_lock;
	size_t page_size;
	/* How sw_stack/dp reaches this process's UAR page and QPs. */
	struct mpr_dp_ops dp_ops;
	/* CQEs name a QP by number: the data path finds its wr_id arrays
	 * here. Taken inside a CQ lock, never the other way round. */
	pthread_spinlock_t qp_table_lock;
	struct mprdma_qp *qp_table[MPRDMA_QP_TABLE_SIZE];
};

struct mprdma_cq {
	struct verbs_cq vcq;
	pthread_spinlock_t lock;
	struct mpr_dp_cq dp;
	void *ring;
	size_t ring_map_len;
	void *dbrec_page;
	size_t dbrec_map_len;
	uint32_t cqn;
	uint32_t events; /* completion events acknowledged (cq_event) */
};

struct mprdma_wq {
	pthread_spinlock_t lock;
	void *map;
	size_t map_len;
};

/* Inline buffers one ibv_wr_set_inline_data_list() call may name. */
#define MPRDMA_WR_MAX_INLINE_BUFS 16

/*
 * The work request being built through the ibv_wr_*() API, between
 * ibv_wr_start() and ibv_wr_complete()/ibv_wr_abort() (under the SQ lock).
 */
struct mprdma_wr_batch {
	struct mpr_send_wr wr;
	int open;	   /* wr has an opcode and awaits its data */
	int err;	   /* first error since wr_start (positive errno) */
	uint32_t start_pi; /* SQ producer index at wr_start, for roll-back */
	uint32_t posted;
};

struct mprdma_qp {
	struct verbs_qp vqp;
	struct mprdma_wr_batch batch;
	struct mprdma_wq sq;
	struct mprdma_wq rq;
	struct mpr_dp_qp dp;
	struct mprdma_qp *next; /* qp_table bucket chain */
};

/* A shared receive queue: the list sw_stack/dp keeps on the ring the
 * kernel allocated and this process mapped. */
struct mprdma_srq {
	struct ibv_srq ibv_srq;
	pthread_spinlock_t lock; /* posts, and polls freeing a slot */
	struct mpr_dp_srq dp;
	void *map;
	size_t map_len;
};

static inline struct mprdma_srq *to_msrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct mprdma_srq, ibv_srq);
}

/* A UD address handle: the address segment every WQE to it starts from
 * (remote_qpn and qkey come with each work request). */
struct mprdma_ah {
	struct ibv_ah ibv_ah;
	struct mpr_wqe_ud ud;
};

static inline struct mprdma_ah *to_mah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct mprdma_ah, ibv_ah);
}

static inline struct mprdma_device *to_mdev(struct ibv_device *ibdev)
{
	return container_of(ibdev, struct mprdma_device, vdev.device);
}

static inline struct mprdma_context *to_mctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct mprdma_context, ibvctx.context);
}

static inline struct mprdma_cq *to_mcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct mprdma_cq, vcq.cq);
}

static inline struct mprdma_qp *to_mqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct mprdma_qp, vqp.qp);
}

/* mprdma_verbs.c: the verbs of struct verbs_context_ops */
int mprdma_query_device_ex(struct ibv_context *ibctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size);
int mprdma_query_port(struct ibv_context *ibctx, uint8_t port,
		      struct ibv_port_attr *attr);
struct ibv_pd *mprdma_alloc_pd(struct ibv_context *ibctx);
int mprdma_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *mprdma_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			     uint64_t hca_va, int access);
int mprdma_dereg_mr(struct verbs_mr *vmr);
struct ibv_cq *mprdma_create_cq(struct ibv_context *ibctx, int cqe,
				struct ibv_comp_channel *channel,
				int comp_vector);
int mprdma_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int mprdma_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
void mprdma_cq_event(struct ibv_cq *ibcq);
int mprdma_destroy_cq(struct ibv_cq *ibcq);
struct ibv_qp *mprdma_create_qp(struct ibv_pd *pd,
				struct ibv_qp_init_attr *attr);
struct ibv_qp *mprdma_create_qp_ex(struct ibv_context *ibctx,
				   struct ibv_qp_init_attr_ex *attr);
int mprdma_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		    int attr_mask, struct ibv_qp_init_attr *init_attr);
int mprdma_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     int attr_mask);
int mprdma_destroy_qp(struct ibv_qp *ibqp);
struct ibv_ah *mprdma_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int mprdma_destroy_ah(struct ibv_ah *ah);
int mprdma_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr);
int mprdma_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr);

/* mprdma_srq.c: shared receive queues */
struct ibv_srq *mprdma_create_srq(struct ibv_pd *pd,
				  struct ibv_srq_init_attr *attr);
int mprdma_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		      int attr_mask);
int mprdma_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int mprdma_destroy_srq(struct ibv_srq *ibsrq);
int mprdma_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
/* mpr_dp_ops.srq_lock. */
void mprdma_srq_lock(void *ctx, struct mpr_dp_srq *srq, int lock);

/* mprdma_wr.c: the ibv_qp_ex work-request API. Returns 0, or EOPNOTSUPP
 * for send_ops_flags the device does not have. */
int mprdma_qp_init_wr_ops(struct mprdma_qp *qp, enum ibv_qp_type type,
			  uint64_t send_ops_flags);

/* Points ctx->dp_ops at this context's UAR page and QP table. */
void mprdma_init_dp_ops(struct mprdma_context *ctx);
/* mmap()s `len` bytes of the uverbs file at the kernel's mmap key. */
void *mprdma_mmap(struct mprdma_context *ctx, size_t len, int prot,
		  uint64_t key, size_t *map_len);

#endif /* MPRDMA_PROVIDER_H */
