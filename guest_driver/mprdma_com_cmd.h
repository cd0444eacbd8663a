/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mprdma typed admin commands: one function per command of
 * docs/host-interface.md, over the transport of mprdma_admin.c.
 */
#ifndef _MPRDMA_COM_CMD_H_
#define _MPRDMA_COM_CMD_H_

#include <linux/types.h>

#include <mprdma/hw.h>

#include "mprdma_admin.h"

int mprdma_cmd_query_device(struct mprdma_aq *aq,
			    struct mpr_device_attr *attr);
int mprdma_cmd_query_port(struct mprdma_aq *aq, struct mpr_port_attr *attr);
int mprdma_cmd_query_counters(struct mprdma_aq *aq, struct mpr_port_counters *c);
int mprdma_cmd_map_icm(struct mprdma_aq *aq, u32 first_page, u32 num_chunks,
		       u32 log_chunk, dma_addr_t list);
int mprdma_cmd_set_gid(struct mprdma_aq *aq, u32 index, const u8 *gid);
int mprdma_cmd_alloc_pd(struct mprdma_aq *aq, u32 *pdn);
int mprdma_cmd_dealloc_pd(struct mprdma_aq *aq, u32 pdn);
int mprdma_cmd_reg_mr(struct mprdma_aq *aq, const struct mpr_cmd_reg_mr *in,
		      dma_addr_t mtt, u32 *key);
int mprdma_cmd_dereg_mr(struct mprdma_aq *aq, u32 key);
int mprdma_cmd_create_eq(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_eq *in, u32 *eqn);
int mprdma_cmd_create_cq(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_cq *in, u32 *cqn);
int mprdma_cmd_destroy_cq(struct mprdma_aq *aq, u32 cqn);
int mprdma_cmd_create_qp(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_qp *in, u32 *qpn);
int mprdma_cmd_modify_qp(struct mprdma_aq *aq, u32 qpn,
			 const struct mpr_qp_attr *attr);
int mprdma_cmd_query_qp(struct mprdma_aq *aq, u32 qpn,
			struct mpr_qp_attr *attr);
int mprdma_cmd_destroy_qp(struct mprdma_aq *aq, u32 qpn);
int mprdma_cmd_create_srq(struct mprdma_aq *aq,
			  const struct mpr_cmd_create_srq *in, u32 *srqn);
int mprdma_cmd_modify_srq(struct mprdma_aq *aq,
			  const struct mpr_cmd_modify_srq *in);

/* QUERY_SRQ's answer (the completion's out[0..3]). */
struct mprdma_srq_state {
	u32 limit;	/* armed limit, 0 if none */
	u32 wqes;	/* WQEs posted and not yet taken by a QP */
	u32 num_qps;	/* QPs attached */
	u32 slots;	/* ring slots */
};

int mprdma_cmd_query_srq(struct mprdma_aq *aq, u32 srqn,
			 struct mprdma_srq_state *st);
int mprdma_cmd_destroy_srq(struct mprdma_aq *aq, u32 srqn);

#endif /* _MPRDMA_COM_CMD_H_ */
