// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma event queue. EQ 0 is the first EQ created, so the NIC sends it
 * every asynchronous event; every CQ also reports its completion events to
 * it. An armed EQ raises its vector once and disarms; the handler consumes
 * the events, then reports the consumer index and re-arms through the EQ
 * doorbell on UAR page 0, which raises the vector again at once if more
 * events arrived meanwhile.
 */

#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

#define MPRDMA_EQ_ENTRIES BIT(MPRDMA_EQ_LOG_SIZE)
#define MPRDMA_EQ_BYTES (MPRDMA_EQ_ENTRIES * sizeof(struct mpr_eqe))

static void mprdma_eq_doorbell(struct mprdma_dev *dev, bool arm)
{
	/* One aligned 64-bit store: the NIC drops any other width. */
	writeq(MPR_EQ_DB(dev->eq.eqn, arm, dev->eq.ci),
	       dev->uar0 + MPR_UAR_EQ_DB);
}

/*
 * Objects are looked up under RCU (xa_load); destroy_cq, destroy_qp and
 * destroy_srq erase them and then synchronize_irq(), so one found here stays valid
 * until the handler returns.
 */
static void mprdma_eq_cq_event(struct mprdma_dev *dev, u32 cqn, bool error)
{
	struct mprdma_cq *cq = xa_load(&dev->cqs, cqn);
	struct ib_event event = {};

	if (!cq) {
		dev_dbg_ratelimited(&dev->pdev->dev,
				    "event for unknown CQ %u\n", cqn);
		return;
	}
	if (!error) {
		if (cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
		return;
	}
	dev_warn_ratelimited(&dev->pdev->dev, "CQ %u overflowed\n", cqn);
	if (!cq->ibcq.event_handler)
		return;
	event.device = &dev->ibdev;
	event.element.cq = &cq->ibcq;
	event.event = IB_EVENT_CQ_ERR;
	cq->ibcq.event_handler(&event, cq->ibcq.cq_context);
}

static void mprdma_eq_qp_event(struct mprdma_dev *dev,
			       const struct mpr_eqe *eqe,
			       enum ib_event_type type)
{
	struct mprdma_qp *qp = xa_load(&dev->qps, eqe->data0);
	struct ib_event event = {};

	dev_dbg_ratelimited(&dev->pdev->dev,
			    "QP %u: %s (syndrome %u)\n", eqe->data0,
			    ib_event_msg(type), eqe->data1);
	if (!qp || !qp->ibqp.event_handler)
		return;
	event.device = &dev->ibdev;
	event.element.qp = &qp->ibqp;
	event.event = type;
	qp->ibqp.event_handler(&event, qp->ibqp.qp_context);
}

static void mprdma_eq_srq_event(struct mprdma_dev *dev,
				const struct mpr_eqe *eqe,
				enum ib_event_type type)
{
	struct mprdma_srq *srq = xa_load(&dev->srqs, eqe->data0);
	struct ib_event event = {};

	dev_dbg_ratelimited(&dev->pdev->dev,
			    "SRQ %u: %s (syndrome %u)\n", eqe->data0,
			    ib_event_msg(type), eqe->data1);
	if (!srq || !srq->ibsrq.event_handler)
		return;
	event.device = &dev->ibdev;
	event.element.srq = &srq->ibsrq;
	event.event = type;
	srq->ibsrq.event_handler(&event, srq->ibsrq.srq_context);
}

static void mprdma_eq_port_event(struct mprdma_dev *dev,
				 enum ib_event_type type)
{
	struct ib_event event = {};

	event.device = &dev->ibdev;
	event.element.port_num = MPRDMA_PORT;
	event.event = type;
	/* Queues a work item: callable from the interrupt handler. */
	ib_dispatch_event(&event);
}

static void mprdma_eq_handle(struct mprdma_dev *dev, const struct mpr_eqe *eqe)
{
	switch (eqe->type) {
	case MPR_EQE_COMPLETION:
		mprdma_eq_cq_event(dev, eqe->data0, false);
		break;
	case MPR_EQE_CQ_ERROR:
		mprdma_eq_cq_event(dev, eqe->data0, true);
		break;
	case MPR_EQE_QP_FATAL:
		mprdma_eq_qp_event(dev, eqe, IB_EVENT_QP_FATAL);
		break;
	case MPR_EQE_QP_REQ_ERR:
		mprdma_eq_qp_event(dev, eqe, IB_EVENT_QP_REQ_ERR);
		break;
	case MPR_EQE_QP_ACCESS_ERR:
		mprdma_eq_qp_event(dev, eqe, IB_EVENT_QP_ACCESS_ERR);
		break;
	case MPR_EQE_QP_LAST_WQE:
		mprdma_eq_qp_event(dev, eqe, IB_EVENT_QP_LAST_WQE_REACHED);
		break;
	case MPR_EQE_COMM_EST:
		mprdma_eq_qp_event(dev, eqe, IB_EVENT_COMM_EST);
		break;
	case MPR_EQE_SRQ_LIMIT:
		mprdma_eq_srq_event(dev, eqe, IB_EVENT_SRQ_LIMIT_REACHED);
		break;
	case MPR_EQE_SRQ_ERR:
		mprdma_eq_srq_event(dev, eqe, IB_EVENT_SRQ_ERR);
		break;
	case MPR_EQE_PORT_ACTIVE:
		mprdma_eq_port_event(dev, IB_EVENT_PORT_ACTIVE);
		break;
	case MPR_EQE_PORT_DOWN:
		mprdma_eq_port_event(dev, IB_EVENT_PORT_ERR);
		break;
	default:
		dev_warn_ratelimited(&dev->pdev->dev,
				     "unknown event type %#x\n", eqe->type);
		break;
	}
}

static irqreturn_t mprdma_eq_intr(int irq, void *data)
{
	struct mprdma_dev *dev = data;
	struct mprdma_eq *eq = &dev->eq;
	struct mpr_eqe *eqe;

	for (;;) {
		eqe = &eq->ring[eq->ci & (MPRDMA_EQ_ENTRIES - 1)];
		if ((READ_ONCE(eqe->owner) & 1) !=
		    MPR_PHASE(eq->ci, MPRDMA_EQ_LOG_SIZE))
			break;
		/* Owner byte first, the rest of the entry only after it. */
		dma_rmb();
		mprdma_eq_handle(dev, eqe);
		eq->ci++;
	}
	mprdma_eq_doorbell(dev, true);
	return IRQ_HANDLED;
}

/**
 * mprdma_eq_init - create EQ 0 and arm it
 * @dev: device whose admin queue works and which has no EQ yet
 *
 * Return: 0 or a negative errno; on error nothing is left to undo.
 */
int mprdma_eq_init(struct mprdma_dev *dev)
{
	struct mprdma_eq *eq = &dev->eq;
	struct mpr_cmd_create_eq in = {};
	struct mpr_eqe *ring;
	int err;

	/* Zeroed by dma_alloc_coherent(): owner 0 is "not written" on the
	 * first lap.
	 */
	ring = dma_alloc_coherent(&dev->pdev->dev, MPRDMA_EQ_BYTES, &eq->dma,
				  GFP_KERNEL);
	if (!ring)
		return -ENOMEM;
	eq->ring = ring;
	eq->ci = 0;

	eq->irq = pci_irq_vector(dev->irq_pdev, MPRDMA_EQ_VECTOR);
	snprintf(dev->eq_irq_name, sizeof(dev->eq_irq_name), "mprdma-eq@pci:%s",
		 pci_name(dev->pdev));
	/* Requested before the EQ exists: the NIC raises the vector only for
	 * an armed EQ, so nothing arrives before the arm below.
	 */
	err = request_irq(eq->irq, mprdma_eq_intr, 0, dev->eq_irq_name, dev);
	if (err)
		goto err_free_ring;

	in.base = eq->dma;
	in.log_size = MPRDMA_EQ_LOG_SIZE;
	in.vector = MPRDMA_EQ_VECTOR;
	err = mprdma_cmd_create_eq(&dev->aq, &in, &eq->eqn);
	if (err) {
		dev_err(&dev->pdev->dev, "CREATE_EQ failed: %d\n", err);
		goto err_free_irq;
	}
	if (eq->eqn != 0) {
		/* Asynchronous events go to EQ 0 only: with another EQ
		 * there, they would be lost.
		 */
		dev_err(&dev->pdev->dev, "the NIC gave EQ %u, not EQ 0\n",
			eq->eqn);
		err = -EIO;
		goto err_free_irq;
	}

	mprdma_eq_doorbell(dev, true);
	return 0;

err_free_irq:
	free_irq(eq->irq, dev);
err_free_ring:
	/* Nothing writes the ring: a failed CREATE_EQ made no EQ, and an EQ
	 * other than 0 that no CQ uses receives no event (the device reset
	 * after the failed probe forgets it).
	 */
	dma_free_coherent(&dev->pdev->dev, MPRDMA_EQ_BYTES, ring, eq->dma);
	eq->ring = NULL;
	return err;
}

/**
 * mprdma_eq_destroy - release EQ 0
 * @dev: device, reset by the caller so that the NIC no longer writes the
 *       ring or raises the vector
 *
 * Does nothing when mprdma_eq_init() did not succeed.
 */
void mprdma_eq_destroy(struct mprdma_dev *dev)
{
	struct mprdma_eq *eq = &dev->eq;

	if (!eq->ring)
		return;
	free_irq(eq->irq, dev);
	dma_free_coherent(&dev->pdev->dev, MPRDMA_EQ_BYTES, eq->ring, eq->dma);
	eq->ring = NULL;
}
