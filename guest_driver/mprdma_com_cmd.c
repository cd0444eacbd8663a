// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma typed admin commands. Each builds one struct mpr_cmd (reserved
 * fields zero, as the NIC checks some of them) and runs it through
 * mprdma_aq_exec(); the NIC's checks and errors per command are listed in
 * docs/host-interface.md, "Commands".
 */

#include <linux/string.h>

#include "mprdma_com_cmd.h"

static void mprdma_cmd_init(struct mpr_cmd *cmd, u16 opcode)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->hdr.opcode = opcode;
}

int mprdma_cmd_query_device(struct mprdma_aq *aq, struct mpr_device_attr *attr)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	return mprdma_aq_exec(aq, &cmd, attr, sizeof(*attr), NULL);
}

int mprdma_cmd_query_port(struct mprdma_aq *aq, struct mpr_port_attr *attr)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_QUERY_PORT);
	return mprdma_aq_exec(aq, &cmd, attr, sizeof(*attr), NULL);
}

int mprdma_cmd_query_counters(struct mprdma_aq *aq, struct mpr_port_counters *c)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_QUERY_COUNTERS);
	return mprdma_aq_exec(aq, &cmd, c, sizeof(*c), NULL);
}

/* Any GID is stored; an all-zero GID clears the entry. */
int mprdma_cmd_set_gid(struct mprdma_aq *aq, u32 index, const u8 *gid)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_SET_GID);
	cmd.u.set_gid.index = index;
	memcpy(cmd.u.set_gid.gid, gid, sizeof(cmd.u.set_gid.gid));
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

/* @list: DMA address of @num_chunks 8-byte chunk addresses. */
int mprdma_cmd_map_icm(struct mprdma_aq *aq, u32 first_page, u32 num_chunks,
		       u32 log_chunk, dma_addr_t list)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_MAP_ICM);
	cmd.hdr.in_mailbox = list;
	cmd.hdr.in_len = num_chunks * 8;
	cmd.u.map_icm.first_page = first_page;
	cmd.u.map_icm.num_chunks = num_chunks;
	cmd.u.map_icm.log_chunk = log_chunk;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_alloc_pd(struct mprdma_aq *aq, u32 *pdn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_ALLOC_PD);
	return mprdma_aq_exec(aq, &cmd, NULL, 0, pdn);
}

int mprdma_cmd_dealloc_pd(struct mprdma_aq *aq, u32 pdn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_DEALLOC_PD);
	cmd.u.pd.pdn = pdn;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

/* @mtt: DMA address of in->num_pages page addresses, read by the NIC. */
int mprdma_cmd_reg_mr(struct mprdma_aq *aq, const struct mpr_cmd_reg_mr *in,
		      dma_addr_t mtt, u32 *key)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_REG_MR);
	cmd.hdr.in_mailbox = mtt;
	cmd.hdr.in_len = in->num_pages * sizeof(struct mpr_mtt);
	cmd.u.reg_mr = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, key);
}

int mprdma_cmd_dereg_mr(struct mprdma_aq *aq, u32 key)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_DEREG_MR);
	cmd.u.dereg_mr.key = key;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_create_eq(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_eq *in, u32 *eqn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_CREATE_EQ);
	cmd.u.create_eq = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, eqn);
}

int mprdma_cmd_create_cq(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_cq *in, u32 *cqn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_CREATE_CQ);
	cmd.u.create_cq = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, cqn);
}

int mprdma_cmd_destroy_cq(struct mprdma_aq *aq, u32 cqn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_DESTROY_CQ);
	cmd.u.handle.handle = cqn;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_create_qp(struct mprdma_aq *aq,
			 const struct mpr_cmd_create_qp *in, u32 *qpn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_CREATE_QP);
	cmd.u.create_qp = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, qpn);
}

int mprdma_cmd_modify_qp(struct mprdma_aq *aq, u32 qpn,
			 const struct mpr_qp_attr *attr)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_MODIFY_QP);
	cmd.u.modify_qp.qpn = qpn;
	cmd.u.modify_qp.attr = *attr;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_query_qp(struct mprdma_aq *aq, u32 qpn,
			struct mpr_qp_attr *attr)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_QUERY_QP);
	cmd.u.qpn.qpn = qpn;
	return mprdma_aq_exec(aq, &cmd, attr, sizeof(*attr), NULL);
}

int mprdma_cmd_destroy_qp(struct mprdma_aq *aq, u32 qpn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_DESTROY_QP);
	cmd.u.qpn.qpn = qpn;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_create_srq(struct mprdma_aq *aq,
			  const struct mpr_cmd_create_srq *in, u32 *srqn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_CREATE_SRQ);
	cmd.u.create_srq = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, srqn);
}

int mprdma_cmd_modify_srq(struct mprdma_aq *aq,
			  const struct mpr_cmd_modify_srq *in)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_MODIFY_SRQ);
	cmd.u.modify_srq = *in;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}

int mprdma_cmd_query_srq(struct mprdma_aq *aq, u32 srqn,
			 struct mprdma_srq_state *st)
{
	u32 outs[MPRDMA_AQ_OUTS];
	struct mpr_cmd cmd;
	int err;

	mprdma_cmd_init(&cmd, MPR_CMD_QUERY_SRQ);
	cmd.u.handle.handle = srqn;
	err = mprdma_aq_exec_outs(aq, &cmd, NULL, 0, outs);
	if (err)
		return err;
	st->limit = outs[0];
	st->wqes = outs[1];
	st->num_qps = outs[2];
	st->slots = outs[3];
	return 0;
}

/* -EBUSY while QPs use the SRQ. */
int mprdma_cmd_destroy_srq(struct mprdma_aq *aq, u32 srqn)
{
	struct mpr_cmd cmd;

	mprdma_cmd_init(&cmd, MPR_CMD_DESTROY_SRQ);
	cmd.u.handle.handle = srqn;
	return mprdma_aq_exec(aq, &cmd, NULL, 0, NULL);
}
