// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma rdma-core provider: the ibv_qp_ex work-request API (ibv_wr_start,
 * ibv_wr_rdma_write, ibv_wr_set_sge, ..., ibv_wr_complete), which perftest
 * uses by default.
 *
 * sw_stack/dp builds a WQE from a whole request, so each request is
 * collected here (opcode call, then its data setter) and handed to
 * mpr_dp_post_send() without a doorbell as soon as its data is known: the
 * caller may reuse an inline buffer once the setter returns. wr_complete
 * rings the doorbell once for the batch. On any error the batch is dropped
 * whole: the producer index goes back to its value at wr_start, which is
 * safe because the NIC only reads WQEs a doorbell has announced.
 */
#include <errno.h>
#include <string.h>

#include "mprdma.h"
#include "mprdma_xlate.h"

static struct mprdma_qp *qpx_to_mqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct mprdma_qp, vqp.qp_ex);
}

static void batch_fail(struct mprdma_wr_batch *b, int err)
{
	if (!b->err)
		b->err = err;
}

/* Posts the open request with the data given (none: a zero-length one). */
static void batch_post(struct mprdma_qp *qp)
{
	struct mprdma_wr_batch *b = &qp->batch;
	int ret;

	if (!b->open)
		return;
	b->open = 0;
	if (b->err)
		return;
	ret = mpr_dp_post_send(&qp->dp, &b->wr, 0);
	if (ret)
		batch_fail(b, -ret);
	else
		b->posted++;
}

static void batch_begin(struct ibv_qp_ex *qpx, uint8_t opcode)
{
	struct mprdma_qp *qp = qpx_to_mqp(qpx);
	struct mprdma_wr_batch *b = &qp->batch;

	batch_post(qp); /* a previous request without a data setter */
	memset(&b->wr, 0, sizeof(b->wr));
	b->wr.wr_id = qpx->wr_id;
	b->wr.opcode = opcode;
	if (mprdma_xlate_send_flags(qpx->wr_flags, &b->wr.flags))
		batch_fail(b, EINVAL);
	b->open = 1;
}

static void mprdma_wr_send(struct ibv_qp_ex *qpx)
{
	batch_begin(qpx, MPR_WQE_SEND);
}

static void mprdma_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	batch_begin(qpx, MPR_WQE_SEND_IMM);
	qpx_to_mqp(qpx)->batch.wr.imm_data = imm_data;
}

static void mprdma_wr_rdma(struct ibv_qp_ex *qpx, uint8_t opcode, uint32_t rkey,
			   uint64_t remote_addr)
{
	struct mprdma_wr_batch *b = &qpx_to_mqp(qpx)->batch;

	batch_begin(qpx, opcode);
	b->wr.rkey = rkey;
	b->wr.remote_addr = remote_addr;
}

static void mprdma_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr)
{
	mprdma_wr_rdma(qpx, MPR_WQE_RDMA_WRITE, rkey, remote_addr);
}

static void mprdma_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, __be32 imm_data)
{
	mprdma_wr_rdma(qpx, MPR_WQE_RDMA_WRITE_IMM, rkey, remote_addr);
	qpx_to_mqp(qpx)->batch.wr.imm_data = imm_data;
}

static void mprdma_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr)
{
	mprdma_wr_rdma(qpx, MPR_WQE_RDMA_READ, rkey, remote_addr);
}

static void mprdma_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, uint64_t compare,
				     uint64_t swap)
{
	struct mprdma_wr_batch *b = &qpx_to_mqp(qpx)->batch;

	mprdma_wr_rdma(qpx, MPR_WQE_ATOMIC_CAS, rkey, remote_addr);
	b->wr.compare_add = compare;
	b->wr.swap = swap;
}

static void mprdma_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				       uint64_t remote_addr, uint64_t add)
{
	mprdma_wr_rdma(qpx, MPR_WQE_ATOMIC_FA, rkey, remote_addr);
	qpx_to_mqp(qpx)->batch.wr.compare_add = add;
}

/* The data setters complete the open request and post it at once. */
static void post_with(struct ibv_qp_ex *qpx, const struct mpr_sge *sge,
		      uint32_t num_sge, int is_inline)
{
	struct mprdma_qp *qp = qpx_to_mqp(qpx);
	struct mprdma_wr_batch *b = &qp->batch;

	if (!b->open) {
		/* A setter without an opcode call before it. */
		batch_fail(b, EINVAL);
		return;
	}
	b->wr.sg_list = sge;
	b->wr.num_sge = num_sge;
	if (is_inline)
		b->wr.flags |= MPR_WQE_F_INLINE;
	batch_post(qp);
}

static void mprdma_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			      uint64_t addr, uint32_t length)
{
	struct mpr_sge sge = {.addr = addr, .length = length, .lkey = lkey};

	post_with(qpx, &sge, 1, 0);
}

static void mprdma_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				   const struct ibv_sge *sg_list)
{
	/* struct ibv_sge and struct mpr_sge share one layout (asserted in
	 * mprdma_xlate.c); a count beyond 32 bits is refused by dp anyway. */
	post_with(qpx, (const struct mpr_sge *)sg_list,
		  num_sge > UINT32_MAX ? UINT32_MAX : (uint32_t)num_sge, 0);
}

static void mprdma_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				      size_t length)
{
	struct mpr_sge sge = {.addr = (uintptr_t)addr,
			      .length = length > UINT32_MAX ? UINT32_MAX
							    : (uint32_t)length};

	post_with(qpx, &sge, 1, 1);
}

static void mprdma_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					   size_t num_buf,
					   const struct ibv_data_buf *buf_list)
{
	struct mpr_sge sge[MPRDMA_WR_MAX_INLINE_BUFS];
	size_t i;

	if (num_buf > MPRDMA_WR_MAX_INLINE_BUFS) {
		struct mprdma_wr_batch *b = &qpx_to_mqp(qpx)->batch;

		b->open = 0;
		batch_fail(b, EINVAL);
		return;
	}
	for (i = 0; i < num_buf; i++) {
		sge[i].addr = (uintptr_t)buf_list[i].addr;
		sge[i].length = buf_list[i].length > UINT32_MAX
				    ? UINT32_MAX
				    : (uint32_t)buf_list[i].length;
		sge[i].lkey = 0;
	}
	post_with(qpx, sge, (uint32_t)num_buf, 1);
}

static void mprdma_wr_start(struct ibv_qp_ex *qpx)
{
	struct mprdma_qp *qp = qpx_to_mqp(qpx);

	pthread_spin_lock(&qp->sq.lock);
	qp->batch.open = 0;
	qp->batch.err = 0;
	qp->batch.posted = 0;
	qp->batch.start_pi = qp->dp.sq.pi;
}

static int mprdma_wr_complete(struct ibv_qp_ex *qpx)
{
	struct mprdma_qp *qp = qpx_to_mqp(qpx);
	struct mprdma_wr_batch *b = &qp->batch;
	int err;

	batch_post(qp);
	err = b->err;
	if (err)
		qp->dp.sq.pi = b->start_pi;
	else if (b->posted == 1)
		mpr_dp_ring_sq_mmio(&qp->dp); /* MMIO when enabled, else a doorbell */
	else if (b->posted)
		mpr_dp_ring_sq(&qp->dp);
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static void mprdma_wr_abort(struct ibv_qp_ex *qpx)
{
	struct mprdma_qp *qp = qpx_to_mqp(qpx);

	qp->batch.open = 0;
	qp->dp.sq.pi = qp->batch.start_pi;
	pthread_spin_unlock(&qp->sq.lock);
}

int mprdma_qp_init_wr_ops(struct mprdma_qp *qp, enum ibv_qp_type type,
			  uint64_t send_ops_flags)
{
	uint64_t known =
	    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
	    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	/* UC has no READ and no atomics (no responses to carry them). */
	if (type == IBV_QPT_RC)
		known |= IBV_QP_EX_WITH_RDMA_READ |
			 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	/* LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, FLUSH, ATOMIC_WRITE: no
	 * such WQE. */
	if (send_ops_flags & ~known)
		return EOPNOTSUPP;
	qpx->wr_send = mprdma_wr_send;
	qpx->wr_send_imm = mprdma_wr_send_imm;
	qpx->wr_rdma_write = mprdma_wr_rdma_write;
	qpx->wr_rdma_write_imm = mprdma_wr_rdma_write_imm;
	qpx->wr_rdma_read = mprdma_wr_rdma_read;
	qpx->wr_atomic_cmp_swp = mprdma_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = mprdma_wr_atomic_fetch_add;
	qpx->wr_set_sge = mprdma_wr_set_sge;
	qpx->wr_set_sge_list = mprdma_wr_set_sge_list;
	qpx->wr_set_inline_data = mprdma_wr_set_inline_data;
	qpx->wr_set_inline_data_list = mprdma_wr_set_inline_data_list;
	qpx->wr_start = mprdma_wr_start;
	qpx->wr_complete = mprdma_wr_complete;
	qpx->wr_abort = mprdma_wr_abort;
	/* What ibv_qp_to_qp_ex() looks for. */
	qp->vqp.comp_mask |= VERBS_QP_EX;
	return 0;
}
