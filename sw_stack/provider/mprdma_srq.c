// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma rdma-core provider: shared receive queues.
 *
 * The kernel allocates the SRQ's ring and creates it in the NIC; the
 * process maps the ring and keeps it as a linked list through sw_stack/dp
 * (mpr_dp_srq_init(), mpr_dp_post_srq_recv(), and mpr_dp_poll_cq(), which
 * links a slot back when it polls the slot's completion). The ring of
 * 2^log_size slots holds 2^log_size - 1 WQEs: the list's tail stays free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mprdma.h"
#include "mprdma_xlate.h"

/* Largest ring the NIC's 16-bit slot indices can name. */
#define MPRDMA_SRQ_LOG_SIZE_MAX 16

void mprdma_srq_lock(void *ctx, struct mpr_dp_srq *dsrq, int lock)
{
	struct mprdma_srq *srq = container_of(dsrq, struct mprdma_srq, dp);

	(void)ctx;
	if (lock)
		pthread_spin_lock(&srq->lock);
	else
		pthread_spin_unlock(&srq->lock);
}

/* Refuse a response this provider would read out of bounds. */
static int check_srq_resp(const struct mpr_create_srq_resp *r)
{
	if (r->log_size < 1 || r->log_size > MPRDMA_SRQ_LOG_SIZE_MAX ||
	    r->log_stride < MPR_SRQ_LOG_STRIDE_MIN ||
	    r->log_stride > MPR_SRQ_LOG_STRIDE_MAX)
		return -1;
	if (r->bytes < (uint64_t)1 << (r->log_size + r->log_stride))
		return -1;
	if (r->max_sge > (((uint32_t)1 << r->log_stride) -
			  sizeof(struct mpr_wqe_srq_next)) /
			     sizeof(struct mpr_wqe_data))
		return -1;
	return 0;
}

struct ibv_srq *mprdma_create_srq(struct ibv_pd *pd,
				  struct ibv_srq_init_attr *attr)
{
	struct mprdma_context *ctx = to_mctx(pd->context);
	struct mprdma_create_srq_resp resp = {};
	const struct mpr_create_srq_resp *r = &resp.drv_payload;
	struct ibv_create_srq cmd = {};
	struct mprdma_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	ret = pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;

	ret = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_lock;
	if (check_srq_resp(r)) {
		verbs_err(&ctx->ibvctx,
			  "mprdma: bad SRQ geometry from kernel\n");
		ret = EPROTO;
		goto err_destroy;
	}

	srq->dp.wr_id = calloc((size_t)1 << r->log_size, sizeof(uint64_t));
	if (!srq->dp.wr_id) {
		ret = ENOMEM;
		goto err_destroy;
	}
	srq->map = mprdma_mmap(ctx, r->bytes, PROT_READ | PROT_WRITE,
			       r->mmap_key, &srq->map_len);
	if (!srq->map) {
		ret = errno;
		goto err_free_wrid;
	}
	srq->dp.buf = srq->map;
	srq->dp.srqn = r->srqn;
	srq->dp.log_size = r->log_size;
	srq->dp.log_stride = r->log_stride;
	srq->dp.max_sge = r->max_sge;
	srq->dp.ops = &ctx->dp_ops;
	/* Slot 0 is the list's head in the NIC after CREATE_SRQ. */
	mpr_dp_srq_init(&srq->dp);

	/* What the ring holds, which can exceed the request. */
	attr->attr.max_wr = ((uint32_t)1 << r->log_size) - 1;
	attr->attr.max_sge = r->max_sge;
	return &srq->ibv_srq;

err_free_wrid:
	free(srq->dp.wr_id);
err_destroy:
	ibv_cmd_destroy_srq(&srq->ibv_srq);
err_lock:
	pthread_spin_destroy(&srq->lock);
err_free:
	free(srq);
	errno = ret;
	return NULL;
}

/* The kernel arms the limit (IBV_SRQ_LIMIT) and refuses a resize. */
int mprdma_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		      int attr_mask)
{
	struct ibv_modify_srq cmd = {};

	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

int mprdma_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

/* EBUSY (from ib_core) while QPs use the SRQ: nothing is released then. */
int mprdma_destroy_srq(struct ibv_srq *ibsrq)
{
	struct mprdma_srq *srq = to_msrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	munmap(srq->map, srq->map_len);
	free(srq->dp.wr_id);
	pthread_spin_destroy(&srq->lock);
	free(srq);
	return 0;
}

int mprdma_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct mprdma_srq *srq = to_msrq(ibsrq);
	struct mpr_recv_wr mwr;
	int posted = 0;
	int err = 0;

	pthread_spin_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		mprdma_xlate_recv_wr(wr, &mwr);
		/* EINVAL: too many SGEs; ENOMEM: the SRQ is full. */
		err = mpr_dp_post_srq_recv(&srq->dp, &mwr, 0);
		if (err) {
			*bad_wr = wr;
			err = -err;
			break;
		}
		posted++;
	}
	/* One doorbell for the whole list, also when a later WR failed: the
	 * ones before it are posted. */
	if (posted)
		mpr_dp_ring_srq(&srq->dp);
	pthread_spin_unlock(&srq->lock);
	return err;
}
