/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mprdma admin queue transport: the submission and completion rings, one
 * command at a time, completion by interrupt or by polling.
 */
#ifndef _MPRDMA_ADMIN_H_
#define _MPRDMA_ADMIN_H_

#include <linux/completion.h>
#include <linux/device.h>
#include <linux/interrupt.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <mprdma/hw.h>

/* Both rings hold 2^4 entries. The driver keeps a single command in flight,
 * which the NIC's flow-control rule (at most a ring's worth of commands
 * whose completions are not consumed) then always satisfies.
 */
#define MPRDMA_AQ_LOG_SIZE 4
/* Output mailbox: large enough for every QUERY_* result. */
#define MPRDMA_AQ_MAILBOX_SIZE PAGE_SIZE

struct mprdma_aq {
	struct device *dmadev;
	void __iomem *bar0;
	/* Serialises commands: one in flight, rings and mailbox included. */
	struct mutex lock;
	struct mpr_cmd *sq;
	dma_addr_t sq_dma;
	struct mpr_cmd_comp *cq;
	dma_addr_t cq_dma;
	void *mailbox;
	dma_addr_t mailbox_dma;
	u16 sq_pi;	/* free-running; AQ_PI carries 16 bits */
	u32 cq_ci;	/* free-running; its lap gives the expected phase */
	u16 cmd_id;
	/* Completed by the admin interrupt; the waiter re-checks the ring. */
	struct completion comp;
	int irq;		/* -1: completions are polled */
	char irq_name[32];
	/* A command timed out: the rings no longer match the NIC's indices. */
	bool dead;
	unsigned int timeout_ms;
};

int mprdma_aq_init(struct mprdma_aq *aq, struct device *dmadev,
		   void __iomem *bar0, int irq, int vector,
		   unsigned int timeout_ms);
void mprdma_aq_destroy(struct mprdma_aq *aq);
/* Words of output a completion carries (struct mpr_cmd_comp, out). */
#define MPRDMA_AQ_OUTS 4

int mprdma_aq_exec_outs(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
			u32 out_len, u32 outs[MPRDMA_AQ_OUTS]);
int mprdma_aq_exec(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
		   u32 out_len, u32 *out0);
int mprdma_aq_exec_raw(struct mprdma_aq *aq, struct mpr_cmd *cmd, void *out,
		       u32 out_len, struct mpr_cmd_comp *comp);

#endif /* _MPRDMA_ADMIN_H_ */
