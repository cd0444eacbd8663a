// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma: the data path of kernel verbs consumers.
 *
 * With post_send, post_recv, poll_cq, req_notify_cq and get_dma_mr the
 * device is a kernel verbs provider, so ib_core hands it to its kernel
 * clients: ib_mad opens the port's GSI QP (QP1), over which ib_cm sends the
 * connection manager's MADs, and rdma_cm (and with it librdmacm through
 * rdma_ucm) sees the device. Kernel QPs are UD or GSI only; their rings and
 * CQs live in coherent memory the driver owns, doorbells go to UAR page 0
 * (the kernel's), and WQEs and CQEs have the format the rdma-core provider
 * uses (<mprdma/hw.h>, docs/host-interface.md).
 */

#include <linux/dma-mapping.h>
#include <linux/ioport.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <net/ipv6.h>
#include <rdma/ib_verbs.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

/* The DMA MR's pages: 2 MiB, so that a 512 MiB guest needs 256 entries. */
#define MPRDMA_DMA_MR_SHIFT 21

int mprdma_kbuf_alloc(struct mprdma_dev *dev, struct mprdma_kbuf *buf,
		      size_t size)
{
	buf->size = PAGE_ALIGN(size);
	buf->leak = false;
	/* Zeroed: the owner bits of a new ring read "not written yet". */
	buf->cpu = dma_alloc_coherent(&dev->pdev->dev, buf->size, &buf->dma,
				      GFP_KERNEL);
	return buf->cpu ? 0 : -ENOMEM;
}

void mprdma_kbuf_free(struct mprdma_dev *dev, struct mprdma_kbuf *buf)
{
	if (buf->cpu && !buf->leak)
		dma_free_coherent(&dev->pdev->dev, buf->size, buf->cpu,
				  buf->dma);
	buf->cpu = NULL;
}

/* ---------------------------------------------------------------------- */
/* The DMA MR                                                               */
/* ---------------------------------------------------------------------- */

static int mprdma_ram_end(struct resource *res, void *arg)
{
	u64 *end = arg;

	*end = max_t(u64, *end, res->end + 1);
	return 0;
}

/*
 * The MR behind a kernel PD's local_dma_lkey: I/O virtual address = bus
 * address = physical address (the driver refuses guests with an IOMMU), over
 * every page from 0 to the end of System RAM. Pages with no RAM at all (a
 * hole below 4 GiB in a large guest) point at the first page instead: the
 * NIC takes only host memory into an MR, and no DMA mapping ever yields
 * such an address.
 */
struct ib_mr *mprdma_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct mprdma_dev *dev = to_mdev(ibpd->device);
	const u64 page = BIT_ULL(MPRDMA_DMA_MR_SHIFT);
	struct mpr_cmd_reg_mr in = {};
	struct mprdma_mr *mr;
	struct mpr_mtt *mtt;
	dma_addr_t mtt_dma;
	size_t mtt_bytes;
	u64 end = 0;
	u64 npages;
	u64 i;
	int err;

	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |
		       IB_ACCESS_REMOTE_WRITE))
		return ERR_PTR(-EOPNOTSUPP);
	walk_iomem_res_desc(IORES_DESC_NONE,
			    IORESOURCE_SYSTEM_RAM | IORESOURCE_BUSY, 0, -1,
			    &end, mprdma_ram_end);
	npages = DIV_ROUND_UP_ULL(end, page);
	if (!npages || npages * page > dev->attr.max_mr_size)
		return ERR_PTR(-EINVAL);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mtt_bytes = npages * sizeof(*mtt);
	mtt = dma_alloc_coherent(&dev->pdev->dev, mtt_bytes, &mtt_dma,
				 GFP_KERNEL);
	if (!mtt) {
		err = -ENOMEM;
		goto err_free_mr;
	}
	for (i = 0; i < npages; i++)
		mtt[i].pa = region_intersects(i * page, page,
					      IORESOURCE_SYSTEM_RAM,
					      IORES_DESC_NONE) ==
			    REGION_DISJOINT ? 0 : i * page;

	in.iova = 0;
	in.length = npages * page;
	in.pdn = to_mpd(ibpd)->pdn;
	in.access = MPR_ACCESS_LOCAL_WRITE;
	if (access & IB_ACCESS_REMOTE_READ)
		in.access |= MPR_ACCESS_REMOTE_READ;
	if (access & IB_ACCESS_REMOTE_WRITE)
		in.access |= MPR_ACCESS_REMOTE_WRITE;
	in.page_shift = MPRDMA_DMA_MR_SHIFT;
	in.num_pages = npages;
	err = mprdma_cmd_reg_mr(&dev->aq, &in, mtt_dma, &mr->ibmr.lkey);
	dma_free_coherent(&dev->pdev->dev, mtt_bytes, mtt, mtt_dma);
	if (err)
		goto err_free_mr;
	mr->ibmr.rkey = mr->ibmr.lkey;
	return &mr->ibmr;

err_free_mr:
	kfree(mr);
	return ERR_PTR(err);
}

/* ---------------------------------------------------------------------- */
/* Posting                                                                  */
/* ---------------------------------------------------------------------- */

static void *mprdma_wq_slot(struct mprdma_kbuf *ring, u32 idx, u8 log_size,
			    u8 log_stride)
{
	return ring->cpu + ((size_t)(idx & (BIT(log_size) - 1)) << log_stride);
}

static int mprdma_build_send(struct mprdma_qp *qp, const struct ib_send_wr *wr,
			     u8 *wqe)
{
	struct mpr_wqe_ctrl *ctrl = (struct mpr_wqe_ctrl *)wqe;
	const struct ib_ud_wr *ud = ud_wr(wr);
	struct mpr_wqe_data *data;
	struct mpr_wqe_ud *seg;
	u32 stride = BIT(qp->sq_log_stride);
	int i;

	/* Kernel QPs are datagram QPs: SENDs with an address handle. */
	if ((wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM) ||
	    !ud->ah || (wr->send_flags & IB_SEND_INLINE) ||
	    wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge)
		return -EINVAL;
	if (sizeof(*ctrl) + sizeof(*seg) + wr->num_sge * sizeof(*data) > stride)
		return -EINVAL;

	memset(wqe, 0, stride);
	seg = (struct mpr_wqe_ud *)(ctrl + 1);
	*seg = container_of(ud->ah, struct mprdma_ah, ibah)->ud;
	seg->remote_qpn = ud->remote_qpn & MPR_DB_QPN_MASK;
	seg->qkey = ud->remote_qkey;
	data = (struct mpr_wqe_data *)(seg + 1);
	for (i = 0; i < wr->num_sge; i++) {
		data[i].byte_count = wr->sg_list[i].length;
		data[i].lkey = wr->sg_list[i].lkey;
		data[i].addr = wr->sg_list[i].addr;
	}

	ctrl->opcode = wr->opcode == IB_WR_SEND ? MPR_WQE_SEND :
						  MPR_WQE_SEND_IMM;
	if (qp->sig_all || (wr->send_flags & IB_SEND_SIGNALED))
		ctrl->flags |= MPR_WQE_F_SIGNALED;
	if (wr->send_flags & IB_SEND_SOLICITED)
		ctrl->flags |= MPR_WQE_F_SOLICITED;
	if (wr->send_flags & IB_SEND_FENCE)
		ctrl->flags |= MPR_WQE_F_FENCE;
	ctrl->num_ds = (sizeof(*seg) + wr->num_sge * sizeof(*data)) /
		       MPR_WQE_SEG_SIZE;
	ctrl->wqe_index = (u16)qp->sq_pi;
	if (wr->opcode == IB_WR_SEND_WITH_IMM)
		ctrl->imm_data = (__force u32)wr->ex.imm_data;
	return 0;
}

int mprdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	unsigned long flags;
	u32 posted = 0;
	int err = 0;

	spin_lock_irqsave(&qp->sq_lock, flags);
	/* Sends from RTS on (in ERR the NIC flushes them). */
	if (READ_ONCE(qp->state) < IB_QPS_RTS)
		err = -EINVAL;
	for (; wr && !err; wr = wr->next) {
		if (qp->sq_pi - READ_ONCE(qp->sq_ci) >= BIT(qp->sq_log_size)) {
			err = -ENOMEM;
			break;
		}
		err = mprdma_build_send(qp, wr,
					mprdma_wq_slot(&qp->ksq, qp->sq_pi,
						       qp->sq_log_size,
						       qp->sq_log_stride));
		if (err)
			break;
		qp->sq_wrid[qp->sq_pi & (BIT(qp->sq_log_size) - 1)] = wr->wr_id;
		qp->sq_pi++;
		posted++;
	}
	/* writeq() orders the WQE stores before the doorbell. */
	if (posted)
		writeq(MPR_SQ_DB(qp->qpn, qp->sq_pi), dev->uar0 + MPR_UAR_SQ_DB);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

int mprdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	u32 max = BIT(qp->rq_log_stride) / sizeof(struct mpr_wqe_data);
	struct mpr_wqe_data *data;
	unsigned long flags;
	u32 posted = 0;
	int err = 0;
	int i;

	spin_lock_irqsave(&qp->rq_lock, flags);
	if (READ_ONCE(qp->state) == IB_QPS_RESET)
		err = -EINVAL;
	for (; wr && !err; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_recv_sge) {
			err = -EINVAL;
			break;
		}
		if (qp->rq_pi - READ_ONCE(qp->rq_ci) >= BIT(qp->rq_log_size)) {
			err = -ENOMEM;
			break;
		}
		data = mprdma_wq_slot(&qp->krq, qp->rq_pi, qp->rq_log_size,
				      qp->rq_log_stride);
		for (i = 0; i < wr->num_sge; i++) {
			data[i].byte_count = wr->sg_list[i].length;
			data[i].lkey = wr->sg_list[i].lkey;
			data[i].addr = wr->sg_list[i].addr;
		}
		if (i < max) {
			data[i].byte_count = 0;
			data[i].lkey = MPR_LKEY_END;
			data[i].addr = 0;
		}
		qp->rq_wrid[qp->rq_pi & (BIT(qp->rq_log_size) - 1)] = wr->wr_id;
		qp->rq_pi++;
		posted++;
	}
	if (posted)
		writeq(MPR_RQ_DB(qp->qpn, qp->rq_pi), dev->uar0 + MPR_UAR_RQ_DB);
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

/* ---------------------------------------------------------------------- */
/* Completions                                                              */
/* ---------------------------------------------------------------------- */

static struct mpr_cqe *mprdma_next_cqe(struct mprdma_cq *cq)
{
	/* Kernel CQs have 32-byte slots: the CQE is the whole slot. */
	struct mpr_cqe *cqe = (struct mpr_cqe *)cq->kring.cpu +
			      (cq->ci & (BIT(cq->log_size) - 1));

	if ((READ_ONCE(cqe->owner) & 1) != MPR_PHASE(cq->ci, cq->log_size))
		return NULL;
	/* The rest of the CQE is read after its owner bit. */
	dma_rmb();
	return cqe;
}

static enum ib_wc_opcode mprdma_wc_opcode(u8 opcode)
{
	switch (opcode) {
	case MPR_CQE_REQ_RDMA_WRITE:
		return IB_WC_RDMA_WRITE;
	case MPR_CQE_REQ_RDMA_READ:
		return IB_WC_RDMA_READ;
	case MPR_CQE_REQ_ATOMIC_CAS:
		return IB_WC_COMP_SWAP;
	case MPR_CQE_REQ_ATOMIC_FA:
		return IB_WC_FETCH_ADD;
	case MPR_CQE_RESP_RECV:
	case MPR_CQE_RESP_RECV_IMM:
		return IB_WC_RECV;
	case MPR_CQE_RESP_WRITE_IMM:
		return IB_WC_RECV_RDMA_WITH_IMM;
	default:
		return IB_WC_SEND;
	}
}

/* A CQE names the low 16 bits of its WQE's index: the free-running index
 * is the nearest at or above the queue's consumer index.
 */
static u32 mprdma_widen(u32 ci, u16 idx16)
{
	return ci + (u16)(idx16 - (u16)ci);
}

static void mprdma_cqe_to_wc(struct mprdma_dev *dev, const struct mpr_cqe *cqe,
			     struct ib_wc *wc)
{
	bool recv = cqe->opcode >= MPR_CQE_RESP_RECV;
	struct mprdma_qp *qp;
	u32 idx;

	memset(wc, 0, sizeof(*wc));
	/* The status codes are ib_wc_status's (= ibv_wc_status's). */
	wc->status = cqe->status;
	wc->opcode = mprdma_wc_opcode(cqe->opcode);
	wc->byte_len = cqe->byte_len;
	wc->src_qp = cqe->src_qp & MPR_DB_QPN_MASK;
	wc->port_num = MPRDMA_PORT;
	if (cqe->flags & MPR_CQE_F_IMM) {
		wc->ex.imm_data = (__force __be32)cqe->imm_data;
		wc->wc_flags |= IB_WC_WITH_IMM;
	}
	/* Every datagram arrives as RoCEv2 over IPv4: the IPv4 header sits in
	 * the last 20 bytes of the GRH space.
	 */
	if (cqe->flags & MPR_CQE_F_GRH) {
		wc->wc_flags |= IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
		wc->network_hdr_type = RDMA_NETWORK_IPV4;
	}

	qp = xa_load(&dev->qps, cqe->qpn & MPR_DB_QPN_MASK);
	if (!qp || !qp->kernel)
		return;
	wc->qp = &qp->ibqp;
	if (recv) {
		idx = mprdma_widen(qp->rq_ci, cqe->wqe_index);
		wc->wr_id = qp->rq_wrid[idx & (BIT(qp->rq_log_size) - 1)];
		if (idx - qp->rq_ci < qp->rq_pi - qp->rq_ci)
			WRITE_ONCE(qp->rq_ci, idx + 1);
	} else {
		idx = mprdma_widen(qp->sq_ci, cqe->wqe_index);
		wc->wr_id = qp->sq_wrid[idx & (BIT(qp->sq_log_size) - 1)];
		/* Also retires the unsignaled WQEs before it: the NIC
		 * completes a send queue in order.
		 */
		if (idx - qp->sq_ci < qp->sq_pi - qp->sq_ci)
			WRITE_ONCE(qp->sq_ci, idx + 1);
	}
}

int mprdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct mprdma_dev *dev = to_mdev(ibcq->device);
	struct mprdma_cq *cq = to_mcq(ibcq);
	struct mpr_cqe *cqe;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num_entries) {
		cqe = mprdma_next_cqe(cq);
		if (!cqe)
			break;
		mprdma_cqe_to_wc(dev, cqe, &wc[n]);
		/* A CQE of no kernel QP (destroyed since) is skipped. */
		cq->ci++;
		if (wc[n].qp)
			n++;
	}
	/* The NIC reads the record when the ring looks full. */
	WRITE_ONCE(*(u32 *)cq->kdbrec.cpu, cq->ci);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int mprdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct mprdma_dev *dev = to_mdev(ibcq->device);
	struct mprdma_cq *cq = to_mcq(ibcq);
	u32 cmd = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		  MPR_CQ_DB_ARM_SOLICITED : MPR_CQ_DB_ARM_NEXT;
	unsigned long irqflags;
	int missed = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	/* With CQEs waiting beyond ci the NIC raises the event at once. */
	writeq(MPR_CQ_DB(cq->cqn, cmd, cq->ci), dev->uar0 + MPR_UAR_CQ_DB);
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && mprdma_next_cqe(cq))
		missed = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return missed;
}
