// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma admin queue transport (docs/host-interface.md, "Admin queue
 * protocol"). Commands are 128-byte entries in a submission ring announced
 * through AQ_PI; the NIC answers each with a 32-byte completion whose owner
 * bit flips every lap of the completion ring. Commands run strictly one at a
 * time in the NIC, so the driver keeps one in flight and waits for it.
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/jiffies.h>

#include <mprdma/regs_util.h>

#include "mprdma_admin.h"

/* With the interrupt, how long one sleep lasts before the ring is read
 * again: a lost or early interrupt costs at most this much.
 */
#define MPRDMA_AQ_IRQ_RECHECK_MS 10
/* Polling interval without the interrupt. */
#define MPRDMA_AQ_POLL_MIN_US 20
#define MPRDMA_AQ_POLL_MAX_US 100

#define MPRDMA_AQ_ENTRIES BIT(MPRDMA_AQ_LOG_SIZE)
#define MPRDMA_AQ_MASK (MPRDMA_AQ_ENTRIES - 1)

/* The NIC wants both rings 4 KiB aligned; a whole page is both. */
#define MPRDMA_AQ_SQ_BYTES \
	PAGE_ALIGN(MPRDMA_AQ_ENTRIES * sizeof(struct mpr_cmd))
#define MPRDMA_AQ_CQ_BYTES \
	PAGE_ALIGN(MPRDMA_AQ_ENTRIES * sizeof(struct mpr_cmd_comp))

static void mprdma_aq_write(struct mprdma_aq *aq, u32 off, u32 val)
{
	writel(val, aq->bar0 + off);
}

static irqreturn_t mprdma_aq_intr(int irq, void *data)
{
	struct mprdma_aq *aq = data;

	complete(&aq->comp);
	return IRQ_HANDLED;
}

/**
 * mprdma_aq_init - allocate the admin rings and enable the admin queue
 * @aq: admin queue to set up
 * @dmadev: device the rings are DMA-mapped for
 * @bar0: mapped BAR0 of a NIC that is READY
 * @irq: Linux IRQ of admin completions, or -1 to poll for them
 * @vector: the NIC's interrupt vector that raises @irq
 * @timeout_ms: how long a command may take before the queue is declared dead
 *
 * Return: 0 or a negative errno; on error nothing is left to undo.
 */
int mprdma_aq_init(struct mprdma_aq *aq, struct device *dmadev,
		   void __iomem *bar0, int irq, int vector,
		   unsigned int timeout_ms)
{
	u32 cfg;
	int err = -ENOMEM;

	aq->dmadev = dmadev;
	aq->bar0 = bar0;
	aq->timeout_ms = timeout_ms;
	aq->irq = irq;
	mutex_init(&aq->lock);
	init_completion(&aq->comp);

	/* dma_alloc_coherent() zeroes the memory: a zero owner bit is "not
	 * written yet" on the first lap of the completion ring.
	 */
	aq->sq = dma_alloc_coherent(dmadev, MPRDMA_AQ_SQ_BYTES, &aq->sq_dma,
				    GFP_KERNEL);
	if (!aq->sq)
		goto err;
	aq->cq = dma_alloc_coherent(dmadev, MPRDMA_AQ_CQ_BYTES, &aq->cq_dma,
				    GFP_KERNEL);
	if (!aq->cq)
		goto err_free_sq;
	aq->mailbox = dma_alloc_coherent(dmadev, MPRDMA_AQ_MAILBOX_SIZE,
					 &aq->mailbox_dma, GFP_KERNEL);
	if (!aq->mailbox)
		goto err_free_cq;

	if (irq >= 0) {
		snprintf(aq->irq_name, sizeof(aq->irq_name), "mprdma-aq@pci:%s",
			 dev_name(dmadev));
		err = request_irq(irq, mprdma_aq_intr, 0, aq->irq_name, aq);
		if (err) {
			dev_err(dmadev, "cannot request the admin IRQ: %d\n",
				err);
			goto err_free_mailbox;
		}
	}

	/* The bases and sizes are ignored once ENABLE is set: write them
	 * first, then the whole configuration at once.
	 */
	mprdma_aq_write(aq, MPR_BAR0_OFF(AQ_BASE_LO), lower_32_bits(aq->sq_dma));
	mprdma_aq_write(aq, MPR_BAR0_OFF(AQ_BASE_HI), upper_32_bits(aq->sq_dma));
	mprdma_aq_write(aq, MPR_BAR0_OFF(ACQ_BASE_LO), lower_32_bits(aq->cq_dma));
	mprdma_aq_write(aq, MPR_BAR0_OFF(ACQ_BASE_HI), upper_32_bits(aq->cq_dma));
	cfg = MPR_SET(AQ_CFG, SQ_LOG_SIZE, MPRDMA_AQ_LOG_SIZE) |
	      MPR_SET(AQ_CFG, CQ_LOG_SIZE, MPRDMA_AQ_LOG_SIZE) |
	      MPR_SET(AQ_CFG, ENABLE, 1);
	if (irq >= 0)
		cfg |= MPR_SET(AQ_CFG, VECTOR, vector) |
		       MPR_SET(AQ_CFG, INTR_EN, 1);
	mprdma_aq_write(aq, MPR_BAR0_OFF(AQ_CFG), cfg);
	return 0;

err_free_mailbox:
	dma_free_coherent(dmadev, MPRDMA_AQ_MAILBOX_SIZE, aq->mailbox,
			  aq->mailbox_dma);
err_free_cq:
	dma_free_coherent(dmadev, MPRDMA_AQ_CQ_BYTES, aq->cq, aq->cq_dma);
err_free_sq:
	dma_free_coherent(dmadev, MPRDMA_AQ_SQ_BYTES, aq->sq, aq->sq_dma);
err:
	mutex_destroy(&aq->lock);
	return err;
}

/**
 * mprdma_aq_destroy - free the admin interrupt and rings
 * @aq: admin queue set up by mprdma_aq_init()
 *
 * The caller resets the device first: after a timed-out command the NIC may
 * still write a completion, and only a reset makes the rings unreachable.
 */
void mprdma_aq_destroy(struct mprdma_aq *aq)
{
	if (aq->irq >= 0)
		free_irq(aq->irq, aq);
	dma_free_coherent(aq->dmadev, MPRDMA_AQ_MAILBOX_SIZE, aq->mailbox,
			  aq->mailbox_dma);
	dma_free_coherent(aq->dmadev, MPRDMA_AQ_CQ_BYTES, aq->cq, aq->cq_dma);
	dma_free_coherent(aq->dmadev, MPRDMA_AQ_SQ_BYTES, aq->sq, aq->sq_dma);
	mutex_destroy(&aq->lock);
}

/* Wait until the completion at the consumer index is written, then take it. */
static int mprdma_aq_wait(struct mprdma_aq *aq, struct mpr_cmd_comp *comp)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(aq->timeout_ms);
	struct mpr_cmd_comp *slot = &aq->cq[aq->cq_ci & MPRDMA_AQ_MASK];
	u8 phase = MPR_PHASE(aq->cq_ci, MPRDMA_AQ_LOG_SIZE);

	while ((READ_ONCE(slot->owner) & 1) != phase) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		if (aq->irq >= 0)
			wait_for_completion_timeout(&aq->comp,
						    msecs_to_jiffies(MPRDMA_AQ_IRQ_RECHECK_MS));
		else
			usleep_range(MPRDMA_AQ_POLL_MIN_US,
				     MPRDMA_AQ_POLL_MAX_US);
	}
	/* Owner byte first, the rest of the entry only after it. */
	dma_rmb();
	memcpy(comp, slot, sizeof(*comp));
	aq->cq_ci++;
	return 0;
}

static int mprdma_aq_errno(u8 status)
{
	switch (status) {
	case MPR_CMD_OK:
		return 0;
	case MPR_CMD_BAD_OPCODE:
		return -EOPNOTSUPP;
	case MPR_CMD_BAD_PARAM:
	case MPR_CMD_BAD_HANDLE:
	case MPR_CMD_BAD_STATE:
	case MPR_CMD_BAD_ATTR:
		return -EINVAL;
	case MPR_CMD_NO_RESOURCES:
	case MPR_CMD_NO_ICM:
		return -ENOMEM;
	case MPR_CMD_BUSY:
		return -EBUSY;
	default:
		/* DMA_ERROR (the NIC could not read a kernel mailbox) and
		 * INTERNAL are faults of the driver or the device.
		 */
		return -EIO;
	}
}

/*
 * Submit one command and wait for its completion, with aq->lock held. The
 * driver fills in cmd_id. Returns 0 when the completion arrived, whatever
 * its status.
 */
static int mprdma_aq_submit(struct mprdma_aq *aq, struct mpr_cmd *cmd,
			    struct mpr_cmd_comp *comp)
{
	int err;

	lockdep_assert_held(&aq->lock);
	if (aq->dead)
		return -EIO;
	cmd->hdr.cmd_id = ++aq->cmd_id;
	memcpy(&aq->sq[aq->sq_pi & MPRDMA_AQ_MASK], cmd, sizeof(*cmd));
	aq->sq_pi++;
	/* An interrupt of an earlier command may have completed it late. */
	reinit_completion(&aq->comp);
	/* writel() orders the command's stores to coherent memory before the
	 * doorbell reaches the device.
	 */
	mprdma_aq_write(aq, MPR_BAR0_OFF(AQ_PI), MPR_SET(AQ_PI, PI, aq->sq_pi));

	err = mprdma_aq_wait(aq, comp);
	if (err) {
		aq->dead = true;
		dev_err(aq->dmadev,
			"admin command %#x timed out after %u ms (STATUS %#x, FATAL_SYNDROME %#x); admin queue disabled\n",
			cmd->hdr.opcode, aq->timeout_ms,
			readl(aq->bar0 + MPR_BAR0_OFF(STATUS)),
			readl(aq->bar0 + MPR_BAR0_OFF(FATAL_SYNDROME)));
		return err;
	}
	if (comp->cmd_id != cmd->hdr.cmd_id) {
		aq->dead = true;
		dev_err(aq->dmadev,
			"admin completion for command id %u, expected %u; admin queue disabled\n",
			comp->cmd_id, cmd->hdr.cmd_id);
		return -EIO;
	}
	return 0;
}

/**
 * mprdma_aq_exec_outs - execute one admin command and wait for its completion
 * @aq: admin queue
 * @cmd: command; its opcode, inline input and input mailbox are set, the
 *       driver fills in cmd_id and the output mailbox
 * @out: where to copy the output mailbox, or NULL
 * @out_len: bytes of output expected, at most MPRDMA_AQ_MAILBOX_SIZE
 * @outs: where to store the completion's out[0..3], or NULL
 *
 * Sleeps. A command that does not complete within the timeout marks the
 * queue dead (its indices no longer match the NIC's): every later command
 * fails with -EIO until the device is reset and the driver reloaded.
 *
 * Return: 0, the errno of the command's status, -ETIMEDOUT or -EIO.
 */
int mprdma_aq_exec_outs(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
			u32 out_len, u32 outs[MPRDMA_AQ_OUTS])
{
	struct mpr_cmd_comp comp;
	int err;

	BUILD_BUG_ON(sizeof(comp.out) != MPRDMA_AQ_OUTS * sizeof(u32));
	if (WARN_ON(out && out_len > MPRDMA_AQ_MAILBOX_SIZE))
		return -EINVAL;

	mutex_lock(&aq->lock);
	if (out) {
		cmd->hdr.out_mailbox = aq->mailbox_dma;
		cmd->hdr.out_len = out_len;
	}
	err = mprdma_aq_submit(aq, cmd, &comp);
	if (err)
		goto out_unlock;
	err = mprdma_aq_errno(comp.status);
	if (err) {
		/* Debug level: user requests fail here for ordinary reasons
		 * (bad attributes, full tables) and must not flood the log.
		 */
		dev_dbg(aq->dmadev,
			"admin command %#x failed: status %#x syndrome %#x\n",
			cmd->hdr.opcode, comp.status, comp.syndrome);
		goto out_unlock;
	}
	if (out)
		memcpy(out, aq->mailbox, out_len);
	if (outs)
		memcpy(outs, comp.out, sizeof(comp.out));

out_unlock:
	mutex_unlock(&aq->lock);
	return err;
}

/**
 * mprdma_aq_exec - execute one admin command and wait for its completion
 * @aq: admin queue
 * @cmd: command, as for mprdma_aq_exec_outs()
 * @out: where to copy the output mailbox, or NULL
 * @out_len: bytes of output expected, at most MPRDMA_AQ_MAILBOX_SIZE
 * @out0: where to store the completion's out[0] (a new handle), or NULL
 *
 * Return: as mprdma_aq_exec_outs().
 */
int mprdma_aq_exec(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
		   u32 out_len, u32 *out0)
{
	u32 outs[MPRDMA_AQ_OUTS];
	int err;

	err = mprdma_aq_exec_outs(aq, cmd, out, out_len, out0 ? outs : NULL);
	if (!err && out0)
		*out0 = outs[0];
	return err;
}

/**
 * mprdma_aq_exec_raw - execute a command as given and return its completion
 * @aq: admin queue
 * @cmd: command as the caller built it; only cmd_id is filled in, and
 *       out_mailbox when @out is given
 * @out: when not NULL, the output mailbox is the driver's: it is zeroed,
 *       named in out_mailbox (out_len is left as the caller set it) and
 *       @out_len bytes of it are copied here after the completion
 * @out_len: at most MPRDMA_AQ_MAILBOX_SIZE
 * @comp: the completion, whatever its status
 *
 * For the debugfs admin_raw interface: the command's status is not turned
 * into an errno.
 *
 * Return: 0 when a completion arrived, -EINVAL, -ETIMEDOUT or -EIO.
 */
int mprdma_aq_exec_raw(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
		       u32 out_len, struct mpr_cmd_comp *comp)
{
	int err;

	if (out && out_len > MPRDMA_AQ_MAILBOX_SIZE)
		return -EINVAL;

	mutex_lock(&aq->lock);
	if (out) {
		/* No output of an earlier command may show through. */
		memset(aq->mailbox, 0, out_len);
		cmd->hdr.out_mailbox = aq->mailbox_dma;
	}
	err = mprdma_aq_submit(aq, cmd, comp);
	if (!err && out)
		memcpy(out, aq->mailbox, out_len);
	mutex_unlock(&aq->lock);
	return err;
}
