// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma data path: WQE construction, doorbells and CQ polling.
 * See <mprdma/dp.h> and docs/host-interface.md.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <mprdma/dp.h>

/* Stores into the rings are ordered before the doorbell, and the owner bit
 * of a CQE is read before the rest of it. */
#define mpr_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define mpr_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)

static inline uint8_t *wq_slot(const struct mpr_dp_wq *wq, uint32_t idx)
{
	uint32_t mask = (1u << wq->log_size) - 1;

	return wq->buf + ((size_t)(idx & mask) << wq->log_stride);
}

static inline uint32_t wq_space(const struct mpr_dp_wq *wq)
{
	return (1u << wq->log_size) - (wq->pi - wq->ci);
}

uint32_t mpr_dp_sq_space(const struct mpr_dp_qp *qp)
{
	return wq_space(&qp->sq);
}

/* Bytes available for segments after the control segment. */
static inline uint32_t sq_seg_room(const struct mpr_dp_qp *qp)
{
	return (1u << qp->sq.log_stride) - (uint32_t)sizeof(struct mpr_wqe_ctrl);
}

static inline int qp_is_ud(const struct mpr_dp_qp *qp)
{
	return qp->qp_type == MPR_QPT_UD;
}

uint32_t mpr_dp_max_inline(const struct mpr_dp_qp *qp)
{
	/* Worst case: a remote segment (RC) or the UD address segment precedes
	 * the inline block. */
	uint32_t room = sq_seg_room(qp) -
			(qp_is_ud(qp) ? (uint32_t)sizeof(struct mpr_wqe_ud) :
					(uint32_t)sizeof(struct mpr_wqe_raddr)) -
			(uint32_t)sizeof(struct mpr_wqe_inline);

	return room < qp->max_inline ? room : qp->max_inline;
}

static int opcode_has_raddr(uint8_t op)
{
	return op == MPR_WQE_RDMA_WRITE || op == MPR_WQE_RDMA_WRITE_IMM ||
	       op == MPR_WQE_RDMA_READ || op == MPR_WQE_ATOMIC_CAS ||
	       op == MPR_WQE_ATOMIC_FA;
}

static int opcode_is_atomic(uint8_t op)
{
	return op == MPR_WQE_ATOMIC_CAS || op == MPR_WQE_ATOMIC_FA;
}

static int build_inline(struct mpr_dp_qp *qp, const struct mpr_send_wr *wr,
			uint8_t *seg, uint32_t room, uint32_t *num_ds)
{
	struct mpr_wqe_inline *hdr = (struct mpr_wqe_inline *)seg;
	uint8_t *dst = seg + sizeof(*hdr);
	uint64_t total = 0;
	uint32_t i;
	int err;

	/* 64-bit sum: 32-bit SGE lengths must not wrap past the limit. */
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > mpr_dp_max_inline(qp) ||
	    total + sizeof(*hdr) > room)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		const struct mpr_sge *sge = &wr->sg_list[i];

		if (!sge->length)
			continue;
		err = qp->ops->copy_from_user(qp->ops->ctx, dst, sge->addr,
					      sge->length);
		if (err)
			return err;
		dst += sge->length;
	}
	hdr->byte_count = htole32((uint32_t)total);
	*num_ds = (uint32_t)((sizeof(*hdr) + total + MPR_WQE_SEG_SIZE - 1) /
			     MPR_WQE_SEG_SIZE);
	return 0;
}

static int check_send_wr(const struct mpr_dp_qp *qp,
			 const struct mpr_send_wr *wr)
{
	if (qp->state == MPR_DP_QPS_RESET)
		return -EINVAL;
	if (wr->opcode == MPR_WQE_NOP || wr->opcode > MPR_WQE_OPCODE_MAX)
		return -EINVAL;
	if (wr->flags & ~MPR_WQE_F_ALL)
		return -EINVAL;
	if (wr->num_sge > qp->sq.max_sge)
		return -EINVAL;
	if (opcode_is_atomic(wr->opcode) &&
	    (wr->num_sge != 1 || wr->sg_list[0].length != 8 ||
	     (wr->flags & MPR_WQE_F_INLINE)))
		return -EINVAL;
	if (wr->opcode == MPR_WQE_RDMA_READ && (wr->flags & MPR_WQE_F_INLINE))
		return -EINVAL;
	if (qp_is_ud(qp) && ((wr->opcode != MPR_WQE_SEND &&
			      wr->opcode != MPR_WQE_SEND_IMM) || !wr->ud))
		return -EINVAL;
	return 0;
}

int mpr_dp_post_send(struct mpr_dp_qp *qp, const struct mpr_send_wr *wr,
		     int ring)
{
	uint8_t staging[1u << MPR_SQ_LOG_STRIDE_MAX];
	uint32_t stride = 1u << qp->sq.log_stride;
	struct mpr_wqe_ctrl *ctrl = (struct mpr_wqe_ctrl *)staging;
	uint8_t *seg = staging + sizeof(*ctrl);
	uint32_t num_ds = 0;
	uint32_t idx = qp->sq.pi;
	uint32_t i;
	int err;

	err = check_send_wr(qp, wr);
	if (err)
		return err;
	if (!wq_space(&qp->sq))
		return -ENOMEM;

	/* Build in a staging buffer so that a failed post leaves the ring
	 * untouched and the slot is written in one pass. */
	memset(staging, 0, stride);
	if (qp_is_ud(qp)) {
		struct mpr_wqe_ud *ud = (struct mpr_wqe_ud *)seg;

		*ud = *wr->ud;
		ud->remote_qpn = htole32(wr->ud->remote_qpn);
		ud->qkey = htole32(wr->ud->qkey);
		seg += sizeof(*ud);
		num_ds += (uint32_t)(sizeof(*ud) / MPR_WQE_SEG_SIZE);
	}
	if (opcode_has_raddr(wr->opcode)) {
		struct mpr_wqe_raddr *raddr = (struct mpr_wqe_raddr *)seg;

		raddr->remote_addr = htole64(wr->remote_addr);
		raddr->rkey = htole32(wr->rkey);
		seg += sizeof(*raddr);
		num_ds++;
	}
	if (opcode_is_atomic(wr->opcode)) {
		struct mpr_wqe_atomic *atomic = (struct mpr_wqe_atomic *)seg;

		if (wr->opcode == MPR_WQE_ATOMIC_CAS) {
			atomic->swap_add = htole64(wr->swap);
			atomic->compare = htole64(wr->compare_add);
		} else {
			atomic->swap_add = htole64(wr->compare_add);
		}
		seg += sizeof(*atomic);
		num_ds++;
	}
	if (wr->flags & MPR_WQE_F_INLINE) {
		uint32_t inline_ds;

		err = build_inline(qp, wr, seg,
				   stride - (uint32_t)(seg - staging),
				   &inline_ds);
		if (err)
			return err;
		num_ds += inline_ds;
	} else {
		if ((seg - staging) + wr->num_sge * sizeof(struct mpr_wqe_data) >
		    stride)
			return -EINVAL;
		for (i = 0; i < wr->num_sge; i++) {
			struct mpr_wqe_data *data = (struct mpr_wqe_data *)seg;

			data->byte_count = htole32(wr->sg_list[i].length);
			data->lkey = htole32(wr->sg_list[i].lkey);
			data->addr = htole64(wr->sg_list[i].addr);
			seg += sizeof(*data);
			num_ds++;
		}
	}

	ctrl->opcode = wr->opcode;
	ctrl->flags = wr->flags;
	if (qp->sq_sig_all)
		ctrl->flags |= MPR_WQE_F_SIGNALED;
	ctrl->num_ds = (uint8_t)num_ds;
	ctrl->wqe_index = htole16((uint16_t)idx);
	ctrl->imm_data = wr->imm_data;

	memcpy(wq_slot(&qp->sq, idx), staging, stride);
	qp->sq.wr_id[idx & ((1u << qp->sq.log_size) - 1)] = wr->wr_id;
	qp->sq.pi = idx + 1;
	if (ring)
		mpr_dp_ring_sq(qp);
	return 0;
}

int mpr_dp_post_send_mmio(struct mpr_dp_qp *qp, const struct mpr_send_wr *wr)
{
	int err = mpr_dp_post_send(qp, wr, 0);

	return err ? err : mpr_dp_ring_sq_mmio(qp);
}

int mpr_dp_ring_sq_mmio(struct mpr_dp_qp *qp)
{
	uint8_t chunk[MPR_UAR_BF_SIZE];
	struct mpr_wqe_ctrl *ctrl;
	uint32_t idx, len;

	idx = qp->sq.pi - 1;
	ctrl = (struct mpr_wqe_ctrl *)wq_slot(&qp->sq, idx);
	len = (uint32_t)(sizeof(*ctrl) + ctrl->num_ds * MPR_WQE_SEG_SIZE);
	len = (len + 63u) & ~63u;
	if (!qp->ops->uar_write_wc || len > sizeof(chunk)) {
		mpr_dp_ring_sq(qp);
		return 0;
	}
	memset(chunk, 0, sizeof(chunk));
	memcpy(chunk, ctrl, len < (1u << qp->sq.log_stride) ? len : (1u << qp->sq.log_stride));
	((struct mpr_wqe_ctrl *)chunk)->bf_qpn = htole32(qp->qpn);
	mpr_wmb();
	qp->ops->uar_write_wc(qp->ops->ctx, MPR_UAR_BF, chunk, len);
	return 1;
}

void mpr_dp_ring_sq(struct mpr_dp_qp *qp)
{
	mpr_wmb();
	qp->ops->uar_write64(qp->ops->ctx, MPR_UAR_SQ_DB,
			     MPR_SQ_DB(qp->qpn, qp->sq.pi));
}

int mpr_dp_post_recv(struct mpr_dp_qp *qp, const struct mpr_recv_wr *wr)
{
	return mpr_dp_post_recv_db(qp, wr, 1);
}

void mpr_dp_ring_rq(struct mpr_dp_qp *qp)
{
	mpr_wmb();
	qp->ops->uar_write64(qp->ops->ctx, MPR_UAR_RQ_DB,
			     MPR_RQ_DB(qp->qpn, qp->rq.pi));
}

/* A receive WQE's scatter list: the WR's entries, then an end marker
 * when the slot (`max` entries) has room for one. */
static void write_recv_segs(struct mpr_wqe_data *data, uint32_t max,
			    const struct mpr_recv_wr *wr)
{
	uint32_t i;

	for (i = 0; i < wr->num_sge; i++) {
		data[i].byte_count = htole32(wr->sg_list[i].length);
		data[i].lkey = htole32(wr->sg_list[i].lkey);
		data[i].addr = htole64(wr->sg_list[i].addr);
	}
	if (i < max) {
		data[i].byte_count = 0;
		data[i].lkey = htole32(MPR_LKEY_END);
		data[i].addr = 0;
	}
}

int mpr_dp_post_recv_db(struct mpr_dp_qp *qp, const struct mpr_recv_wr *wr,
			int ring)
{
	uint32_t stride = 1u << qp->rq.log_stride;
	uint32_t max = stride / sizeof(struct mpr_wqe_data);
	struct mpr_wqe_data *data;
	uint32_t idx = qp->rq.pi;

	/* A QP of an SRQ has no receive queue: its RECVs go to the SRQ. */
	if (qp->state == MPR_DP_QPS_RESET || qp->srq)
		return -EINVAL;
	if (wr->num_sge > qp->rq.max_sge || wr->num_sge > max)
		return -EINVAL;
	if (!wq_space(&qp->rq))
		return -ENOMEM;

	data = (struct mpr_wqe_data *)wq_slot(&qp->rq, idx);
	write_recv_segs(data, max, wr);
	qp->rq.wr_id[idx & ((1u << qp->rq.log_size) - 1)] = wr->wr_id;
	qp->rq.pi = idx + 1;
	if (ring)
		mpr_dp_ring_rq(qp);
	return 0;
}

static inline struct mpr_wqe_srq_next *srq_slot(const struct mpr_dp_srq *srq,
						uint32_t slot)
{
	return (struct mpr_wqe_srq_next *)(srq->buf +
					   ((size_t)slot << srq->log_stride));
}

void mpr_dp_srq_init(struct mpr_dp_srq *srq)
{
	uint32_t size = 1u << srq->log_size;
	uint32_t i;

	for (i = 0; i < size; i++) {
		struct mpr_wqe_srq_next *n = srq_slot(srq, i);

		n->next_index = htole16((uint16_t)((i + 1) & (size - 1)));
		n->rsvd0 = 0;
	}
	srq->head = 0;
	srq->tail = size - 1;
	srq->count = 0;
	srq->outstanding = 0;
}

uint32_t mpr_dp_srq_space(const struct mpr_dp_srq *srq)
{
	return (1u << srq->log_size) - 1 - srq->outstanding;
}

void mpr_dp_ring_srq(struct mpr_dp_srq *srq)
{
	mpr_wmb();
	srq->ops->uar_write64(srq->ops->ctx, MPR_UAR_SRQ_DB,
			      MPR_SRQ_DB(srq->srqn, srq->count));
}

int mpr_dp_post_srq_recv(struct mpr_dp_srq *srq, const struct mpr_recv_wr *wr,
			 int ring)
{
	uint32_t stride = 1u << srq->log_stride;
	uint32_t max = (stride - sizeof(struct mpr_wqe_srq_next)) /
		       sizeof(struct mpr_wqe_data);
	struct mpr_wqe_srq_next *next;
	struct mpr_wqe_data *data;

	if (wr->num_sge > srq->max_sge || wr->num_sge > max)
		return -EINVAL;
	if (srq->head == srq->tail)
		return -ENOMEM;
	next = srq_slot(srq, srq->head);
	data = (struct mpr_wqe_data *)(next + 1);
	write_recv_segs(data, max, wr);
	srq->wr_id[srq->head] = wr->wr_id;
	srq->head = le16toh(next->next_index) & ((1u << srq->log_size) - 1);
	srq->count++;
	srq->outstanding++;
	if (ring)
		mpr_dp_ring_srq(srq);
	return 0;
}

/* A completion gave slot `slot` back: it becomes the list's new tail. */
void mpr_dp_srq_free_slot(struct mpr_dp_srq *srq, uint32_t slot)
{
	const struct mpr_dp_ops *ops = srq->ops;

	slot &= (1u << srq->log_size) - 1;

	if (ops->srq_lock)
		ops->srq_lock(ops->ctx, srq, 1);
	srq_slot(srq, srq->tail)->next_index = htole16((uint16_t)slot);
	srq->tail = slot;
	if (srq->outstanding)
		srq->outstanding--;
	if (ops->srq_lock)
		ops->srq_lock(ops->ctx, srq, 0);
}

/* A CQE names the 16-bit index of the WQE it completes; recover the
 * free-running index nearest above the queue's consumer index. */
static uint32_t widen_index(uint32_t ci, uint16_t idx16)
{
	return ci + (uint16_t)(idx16 - (uint16_t)ci);
}

/* Inline receive: the CQE slot's first byte_len bytes go to the buffers of
 * the RECV WQE whose `max` segments start at `seg`, in order. Returns 0, or
 * -EFAULT when the buffers are too small or a copy fails. */
static int scatter_inline(struct mpr_dp_qp *qp, const struct mpr_wqe_data *seg,
			  uint32_t max, const uint8_t *data, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < max && len; i++) {
		uint32_t n = le32toh(seg[i].byte_count);

		if (le32toh(seg[i].lkey) == MPR_LKEY_END)
			break;
		if (n > len)
			n = len;
		if (!qp->ops->copy_to_user ||
		    qp->ops->copy_to_user(qp->ops->ctx, le64toh(seg[i].addr),
					  data, n))
			return -EFAULT;
		data += n;
		len -= n;
	}
	return len ? -EFAULT : 0;
}

int mpr_dp_poll_cq(struct mpr_dp_cq *cq, int n, struct mpr_wc *wc)
{
	uint32_t mask = (1u << cq->log_size) - 1;
	uint32_t log_slot = cq->log_cqe_size ? cq->log_cqe_size : MPR_CQ_LOG_CQE_SIZE_MIN;
	size_t slot = (size_t)1 << log_slot;
	int done = 0;

	while (done < n) {
		uint8_t *base = cq->buf + (size_t)(cq->ci & mask) * slot;
		struct mpr_cqe *cqe =
			(struct mpr_cqe *)(base + slot - sizeof(struct mpr_cqe));
		uint8_t owner = __atomic_load_n(&cqe->owner, __ATOMIC_ACQUIRE);
		struct mpr_wc *out = &wc[done];
		struct mpr_dp_qp *qp;
		struct mpr_dp_wq *wq;
		uint32_t idx;

		if ((owner & 1) != MPR_PHASE(cq->ci, cq->log_size))
			break;
		mpr_rmb();

		out->status = cqe->status;
		out->opcode = cqe->opcode;
		out->byte_len = le32toh(cqe->byte_len);
		out->imm_data = cqe->imm_data;
		out->qpn = le32toh(cqe->qpn) & MPR_DB_QPN_MASK;
		out->flags = cqe->flags;
		out->syndrome = cqe->syndrome;
		out->wqe_index = le16toh(cqe->wqe_index);
		out->is_recv = cqe->opcode >= MPR_CQE_RESP_RECV;
		out->src_qp = le32toh(cqe->src_qp) & MPR_DB_QPN_MASK;
		out->wr_id = 0;

		qp = cq->ops->lookup_qp(cq->ops->ctx, out->qpn);
		if (qp && out->is_recv && qp->srq) {
			struct mpr_dp_srq *srq = qp->srq;
			uint32_t slot = out->wqe_index & ((1u << srq->log_size) - 1);
			uint32_t stride = 1u << srq->log_stride;

			out->wr_id = srq->wr_id[slot];
			if ((out->flags & MPR_CQE_F_INLINE) &&
			    out->status == MPR_CQE_SUCCESS &&
			    (out->byte_len > MPR_CQE_INLINE_MAX(log_slot) ||
			     scatter_inline(qp,
					    (const struct mpr_wqe_data *)(srq_slot(srq, slot) + 1),
					    (stride - sizeof(struct mpr_wqe_srq_next)) /
						    sizeof(struct mpr_wqe_data),
					    base, out->byte_len))) {
				out->status = MPR_CQE_LOC_PROT_ERR;
				out->syndrome = MPR_SYN_DMA_FAULT;
			}
			mpr_dp_srq_free_slot(srq, slot);
		} else if (qp) {
			wq = out->is_recv ? &qp->rq : &qp->sq;
			idx = widen_index(wq->ci, (uint16_t)out->wqe_index);
			out->wr_id = wq->wr_id[idx & ((1u << wq->log_size) - 1)];
			if (out->is_recv && (out->flags & MPR_CQE_F_INLINE) &&
			    out->status == MPR_CQE_SUCCESS &&
			    (out->byte_len > MPR_CQE_INLINE_MAX(log_slot) ||
			     scatter_inline(qp,
					    (const struct mpr_wqe_data *)wq_slot(&qp->rq, idx),
					    (1u << qp->rq.log_stride) / sizeof(struct mpr_wqe_data),
					    base, out->byte_len))) {
				out->status = MPR_CQE_LOC_PROT_ERR;
				out->syndrome = MPR_SYN_DMA_FAULT;
			}
			/* A send CQE also retires the unsignaled WQEs before
			 * it: the NIC completes a send queue in order. A CQE
			 * naming a slot never posted (a doorbell that ran
			 * ahead of the ring) retires nothing. */
			if (idx - wq->ci < wq->pi - wq->ci)
				wq->ci = idx + 1;
		}
		cq->ci++;
		done++;
	}
	if (done && cq->dbrec)
		*cq->dbrec = htole32(cq->ci);
	return done;
}

void mpr_dp_arm_cq(struct mpr_dp_cq *cq, int solicited_only)
{
	uint32_t cmd = solicited_only ? MPR_CQ_DB_ARM_SOLICITED :
					MPR_CQ_DB_ARM_NEXT;

	mpr_wmb();
	cq->ops->uar_write64(cq->ops->ctx, MPR_UAR_CQ_DB,
			     MPR_CQ_DB(cq->cqn, cmd, cq->ci));
}

int mpr_transport_of_name(const char *name)
{
	unsigned int k;

	if (!name || !*name)
		return MPR_TRANSPORT_DEFAULT;
	/* The ABI's names (mpr_transport_name in <mprdma/hw.h>). */
	for (k = MPR_TRANSPORT_DEFAULT; k < MPR_TRANSPORT_EXPERIMENTAL_FIRST; k++)
		if (mpr_transport_name(k) && !strcmp(name, mpr_transport_name(k)))
			return (int)k;
	return -1;
}
