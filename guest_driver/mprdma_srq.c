// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma shared receive queues (docs/host-interface.md, "CREATE_SRQ ...").
 *
 * The kernel allocates the SRQ's ring in coherent memory and creates the
 * SRQ with CREATE_SRQ; the process maps the ring and keeps it as a linked
 * list (sw_stack/dp: mpr_dp_srq_init(), mpr_dp_post_srq_recv()), ringing
 * the SRQ doorbell on its context's UAR page. One slot, the list's tail,
 * always stays free: a ring of 2^log_size slots holds 2^log_size - 1 WQEs.
 *
 * Kernel consumers get no SRQ: the driver's kernel data path
 * (mprdma_kverbs.c) has no SRQ list.
 */

#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>

#include <mprdma/abi.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

/* The SRQ verbs, set on the device only when the NIC has CAPS.SRQ. */
const struct ib_device_ops mprdma_srq_ops = {
	.create_srq = mprdma_create_srq,
	.destroy_srq = mprdma_destroy_srq,
	.modify_srq = mprdma_modify_srq,
	.query_srq = mprdma_query_srq,

	INIT_RDMA_OBJ_SIZE(ib_srq, mprdma_srq, ibsrq),
};

static bool mprdma_has_srq(const struct mprdma_dev *dev)
{
	return MPR_GET(CAPS, SRQ, dev->attr.cap_flags) && dev->attr.max_srq &&
	       dev->attr.max_srq_wr > 1;
}

/* log2 of the largest ring CREATE_SRQ takes: slots are named by 16-bit
 * indices, and no queue is larger than max_srq_wr.
 */
static u32 mprdma_srq_max_log_size(const struct mprdma_dev *dev)
{
	return min_t(u32, 16, ilog2(dev->attr.max_srq_wr));
}

/* The SGEs a slot of 2^log_stride bytes holds after its link. */
static u32 mprdma_srq_slot_sge(u32 log_stride)
{
	return (BIT(log_stride) - sizeof(struct mpr_wqe_srq_next)) /
	       sizeof(struct mpr_wqe_data);
}

/**
 * mprdma_srq_query_device - the SRQ limits of query_device
 * @dev: device
 * @attr: where max_srq, max_srq_wr and max_srq_sge go (0 without CAPS.SRQ)
 *
 * max_srq_wr is what the largest ring holds: its slots minus the free tail.
 */
void mprdma_srq_query_device(struct mprdma_dev *dev,
			     struct ib_device_attr *attr)
{
	const struct mpr_device_attr *a = &dev->attr;

	if (!mprdma_has_srq(dev)) {
		attr->max_srq = 0;
		attr->max_srq_wr = 0;
		attr->max_srq_sge = 0;
		return;
	}
	attr->max_srq = min_t(u32, a->max_srq, INT_MAX);
	attr->max_srq_wr = BIT(mprdma_srq_max_log_size(dev)) - 1;
	attr->max_srq_sge = min_t(u32, a->max_srq_sge,
				  mprdma_srq_slot_sge(MPR_SRQ_LOG_STRIDE_MAX));
}

int mprdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init_attr,
		      struct ib_udata *udata)
{
	struct mprdma_ucontext *uctx = rdma_udata_to_drv_context(udata,
		struct mprdma_ucontext, ibucontext);
	struct mprdma_dev *dev = to_mdev(ibsrq->device);
	struct mprdma_srq *srq = to_msrq(ibsrq);
	struct ib_srq_attr *attr = &init_attr->attr;
	struct mpr_create_srq_resp resp = {};
	struct mpr_cmd_create_srq in = {};
	size_t bytes;
	u32 log_size;
	u32 log_stride;
	int err;

	if (!udata || !mprdma_has_srq(dev))
		return -EOPNOTSUPP;
	if (init_attr->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;
	/* The limit of create is ignored, as the verbs define it: only
	 * modify_srq arms one.
	 */
	if (!attr->max_wr || attr->max_wr > BIT(mprdma_srq_max_log_size(dev)) - 1 ||
	    attr->max_sge > dev->attr.max_srq_sge)
		return -EINVAL;

	/* One slot more than asked for: the list's tail stays free. */
	log_size = max(1, order_base_2(attr->max_wr + 1));
	log_stride = max_t(u32, MPR_SRQ_LOG_STRIDE_MIN,
			   order_base_2(sizeof(struct mpr_wqe_srq_next) +
					attr->max_sge *
					sizeof(struct mpr_wqe_data)));
	if (log_stride > MPR_SRQ_LOG_STRIDE_MAX)
		return -EINVAL;
	srq->log_size = log_size;
	srq->log_stride = log_stride;
	srq->max_sge = min_t(u32, dev->attr.max_srq_sge,
			     mprdma_srq_slot_sge(log_stride));
	bytes = (size_t)1 << (log_size + log_stride);

	srq->ring = mprdma_dma_entry_alloc(dev, &uctx->ibucontext, bytes);
	if (IS_ERR(srq->ring))
		return PTR_ERR(srq->ring);

	in.base = srq->ring->dma_addr;
	in.pdn = to_mpd(ibsrq->pd)->pdn;
	in.uar_index = uctx->uar_index;
	in.log_size = log_size;
	in.log_stride = log_stride;
	in.limit = 0;
	err = mprdma_cmd_create_srq(&dev->aq, &in, &srq->srqn);
	if (err)
		goto err_remove_ring;
	err = xa_err(xa_store(&dev->srqs, srq->srqn, srq, GFP_KERNEL));
	if (err)
		goto err_destroy_srq;

	attr->max_wr = BIT(log_size) - 1;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = 0;
	resp.srqn = srq->srqn;
	resp.log_size = log_size;
	resp.log_stride = log_stride;
	resp.mmap_key = rdma_user_mmap_get_offset(&srq->ring->rdma_entry);
	resp.bytes = bytes;
	resp.max_sge = srq->max_sge;
	err = mprdma_copy_resp(udata, &resp, sizeof(resp));
	if (err)
		goto err_erase;
	return 0;

err_erase:
	xa_erase(&dev->srqs, srq->srqn);
	synchronize_irq(dev->eq.irq);
err_destroy_srq:
	if (mprdma_cmd_destroy_srq(&dev->aq, srq->srqn))
		srq->ring->leak = true;
err_remove_ring:
	mprdma_entry_remove(srq->ring);
	return err;
}

/*
 * IB_SRQ_LIMIT arms the limit event (0 disarms it). The ring cannot grow
 * while the NIC reads it: IB_SRQ_MAX_WR is refused with -EINVAL, as mlx5
 * does, and the device attributes carry no IB_DEVICE_SRQ_RESIZE.
 */
int mprdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask attr_mask, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibsrq->device);
	struct mprdma_srq *srq = to_msrq(ibsrq);
	struct mpr_cmd_modify_srq in = {};

	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;
	if (attr_mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EOPNOTSUPP;
	if (attr_mask & IB_SRQ_MAX_WR)
		return -EINVAL;
	if (!(attr_mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > BIT(srq->log_size) - 1)
		return -EINVAL;
	in.srqn = srq->srqn;
	in.attr_mask = MPR_SRQ_ATTR_LIMIT;
	in.limit = attr->srq_limit;
	return mprdma_cmd_modify_srq(&dev->aq, &in);
}

int mprdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct mprdma_dev *dev = to_mdev(ibsrq->device);
	struct mprdma_srq *srq = to_msrq(ibsrq);
	struct mprdma_srq_state st;
	int err;

	err = mprdma_cmd_query_srq(&dev->aq, srq->srqn, &st);
	if (err)
		return err;
	attr->max_wr = BIT(srq->log_size) - 1;
	attr->max_sge = srq->max_sge;
	/* The NIC disarms the limit when the event fires: 0 again. */
	attr->srq_limit = st.limit;
	return 0;
}

int mprdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibsrq->device);
	struct mprdma_srq *srq = to_msrq(ibsrq);
	int err;

	/* No event handler may use the SRQ once this returns. */
	xa_erase(&dev->srqs, srq->srqn);
	synchronize_irq(dev->eq.irq);

	err = mprdma_cmd_destroy_srq(&dev->aq, srq->srqn);
	if (err == -EBUSY) {
		/* QPs still use it (ib_core checks this first, so only a
		 * driver bug gets here): the SRQ stays as it was.
		 */
		ibdev_warn(&dev->ibdev, "DESTROY_SRQ %u: still in use\n",
			   srq->srqn);
		if (!xa_err(xa_store(&dev->srqs, srq->srqn, srq, GFP_KERNEL)))
			return err;
		err = -ENOMEM;
	}
	if (err) {
		ibdev_warn(&dev->ibdev,
			   "DESTROY_SRQ %u failed (%d): its ring stays allocated\n",
			   srq->srqn, err);
		srq->ring->leak = true;
	}
	mprdma_entry_remove(srq->ring);
	return 0;
}
