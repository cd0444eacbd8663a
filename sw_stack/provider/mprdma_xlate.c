// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma provider: verbs <-> data-path translations and CQ clean-up.
 * See mprdma_xlate.h.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <mprdma/hw.h>

#include "mprdma_xlate.h"

/* Work requests hand their SGE arrays to the data path without a copy. */
_Static_assert(sizeof(struct ibv_sge) == sizeof(struct mpr_sge), "sge size");
_Static_assert(offsetof(struct ibv_sge, addr) == offsetof(struct mpr_sge, addr),
	       "sge addr");
_Static_assert(offsetof(struct ibv_sge, length) ==
		   offsetof(struct mpr_sge, length),
	       "sge length");
_Static_assert(offsetof(struct ibv_sge, lkey) == offsetof(struct mpr_sge, lkey),
	       "sge lkey");

/* The NIC reports ibv_wc_status values (hw.h), passed through unchanged.
 * The casts keep -Wenum-compare quiet: the enums differ on purpose. */
#define SAME_VALUE(a, b) _Static_assert((int)(a) == (int)(b), #a " == " #b)
SAME_VALUE(MPR_CQE_SUCCESS, IBV_WC_SUCCESS);
SAME_VALUE(MPR_CQE_LOC_LEN_ERR, IBV_WC_LOC_LEN_ERR);
SAME_VALUE(MPR_CQE_LOC_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR);
SAME_VALUE(MPR_CQE_LOC_PROT_ERR, IBV_WC_LOC_PROT_ERR);
SAME_VALUE(MPR_CQE_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR);
SAME_VALUE(MPR_CQE_BAD_RESP_ERR, IBV_WC_BAD_RESP_ERR);
SAME_VALUE(MPR_CQE_LOC_ACCESS_ERR, IBV_WC_LOC_ACCESS_ERR);
SAME_VALUE(MPR_CQE_REM_INV_REQ_ERR, IBV_WC_REM_INV_REQ_ERR);
SAME_VALUE(MPR_CQE_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR);
SAME_VALUE(MPR_CQE_REM_OP_ERR, IBV_WC_REM_OP_ERR);
SAME_VALUE(MPR_CQE_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR);
SAME_VALUE(MPR_CQE_RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR);
SAME_VALUE(MPR_CQE_GENERAL_ERR, IBV_WC_GENERAL_ERR);

static int wqe_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return MPR_WQE_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return MPR_WQE_SEND_IMM;
	case IBV_WR_RDMA_WRITE:
		return MPR_WQE_RDMA_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return MPR_WQE_RDMA_WRITE_IMM;
	case IBV_WR_RDMA_READ:
		return MPR_WQE_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return MPR_WQE_ATOMIC_CAS;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return MPR_WQE_ATOMIC_FA;
	default:
		/* SEND_WITH_INV, LOCAL_INV, BIND_MW, TSO, ...: no such WQE. */
		return -1;
	}
}

int mprdma_xlate_send_flags(unsigned int send_flags, uint8_t *out)
{
	unsigned int known = IBV_SEND_SIGNALED | IBV_SEND_FENCE |
			     IBV_SEND_SOLICITED | IBV_SEND_INLINE;
	uint8_t flags = 0;

	/* IP_CSUM and any future flag would be silently dropped otherwise. */
	if (send_flags & ~known)
		return -EINVAL;
	if (send_flags & IBV_SEND_SIGNALED)
		flags |= MPR_WQE_F_SIGNALED;
	if (send_flags & IBV_SEND_FENCE)
		flags |= MPR_WQE_F_FENCE;
	if (send_flags & IBV_SEND_SOLICITED)
		flags |= MPR_WQE_F_SOLICITED;
	if (send_flags & IBV_SEND_INLINE)
		flags |= MPR_WQE_F_INLINE;
	*out = flags;
	return 0;
}

int mprdma_xlate_send_wr(const struct ibv_send_wr *wr, struct mpr_send_wr *out)
{
	int op = wqe_opcode(wr->opcode);

	if (op < 0)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (mprdma_xlate_send_flags(wr->send_flags, &out->flags))
		return -EINVAL;
	out->wr_id = wr->wr_id;
	out->opcode = (uint8_t)op;
	/* Both sides keep the immediate in network byte order. */
	if (op == MPR_WQE_SEND_IMM || op == MPR_WQE_RDMA_WRITE_IMM)
		out->imm_data = wr->imm_data;

	switch (op) {
	case MPR_WQE_RDMA_WRITE:
	case MPR_WQE_RDMA_WRITE_IMM:
	case MPR_WQE_RDMA_READ:
		out->remote_addr = wr->wr.rdma.remote_addr;
		out->rkey = wr->wr.rdma.rkey;
		break;
	case MPR_WQE_ATOMIC_CAS:
	case MPR_WQE_ATOMIC_FA:
		out->remote_addr = wr->wr.atomic.remote_addr;
		out->rkey = wr->wr.atomic.rkey;
		out->compare_add = wr->wr.atomic.compare_add;
		out->swap = wr->wr.atomic.swap;
		break;
	default:
		break;
	}

	out->sg_list = (const struct mpr_sge *)wr->sg_list;
	/* A negative count would become a huge one: the data path refuses it
	 * against max_sge. */
	out->num_sge = (uint32_t)wr->num_sge;
	return 0;
}

void mprdma_xlate_recv_wr(const struct ibv_recv_wr *wr, struct mpr_recv_wr *out)
{
	out->wr_id = wr->wr_id;
	out->sg_list = (const struct mpr_sge *)wr->sg_list;
	out->num_sge = (uint32_t)wr->num_sge;
}

int mprdma_wc_opcode(uint32_t cqe_opcode)
{
	switch (cqe_opcode) {
	case MPR_CQE_REQ_SEND:
		return IBV_WC_SEND;
	case MPR_CQE_REQ_RDMA_WRITE:
		return IBV_WC_RDMA_WRITE;
	case MPR_CQE_REQ_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case MPR_CQE_REQ_ATOMIC_CAS:
		return IBV_WC_COMP_SWAP;
	case MPR_CQE_REQ_ATOMIC_FA:
		return IBV_WC_FETCH_ADD;
	case MPR_CQE_RESP_RECV:
	case MPR_CQE_RESP_RECV_IMM:
		/* SEND with immediate is a RECV carrying IBV_WC_WITH_IMM. */
		return IBV_WC_RECV;
	case MPR_CQE_RESP_WRITE_IMM:
		return IBV_WC_RECV_RDMA_WITH_IMM;
	default:
		return -1;
	}
}

void mprdma_xlate_wc(const struct mpr_wc *in, struct ibv_wc *out)
{
	int op = mprdma_wc_opcode(in->opcode);

	memset(out, 0, sizeof(*out));
	out->wr_id = in->wr_id;
	out->status = (enum ibv_wc_status)in->status;
	if (op < 0) {
		/* A CQE opcode this provider does not know is a device or
		 * provider bug: report it rather than guess a meaning. */
		op = in->is_recv ? IBV_WC_RECV : IBV_WC_SEND;
		if (out->status == IBV_WC_SUCCESS)
			out->status = IBV_WC_GENERAL_ERR;
	}
	out->opcode = (enum ibv_wc_opcode)op;
	out->vendor_err = in->syndrome;
	out->byte_len = in->byte_len;
	out->qp_num = in->qpn;
	/* src_qp is meaningful for UD only (RC CQEs carry 0); a UD receive
	 * placed the 40-byte GRH first. */
	out->src_qp = in->src_qp;
	if (in->flags & MPR_CQE_F_GRH)
		out->wc_flags |= IBV_WC_GRH;
	if (in->flags & MPR_CQE_F_IMM) {
		out->wc_flags |= IBV_WC_WITH_IMM;
		out->imm_data = in->imm_data;
	}
}

static size_t cqe_slot(const struct mpr_dp_cq *cq)
{
	return (size_t)1 << (cq->log_cqe_size ? cq->log_cqe_size
					      : MPR_CQ_LOG_CQE_SIZE_MIN);
}

/* The CQE of slot `idx`: the last 32 bytes of the slot. */
static struct mpr_cqe *cqe_at(struct mpr_dp_cq *cq, uint32_t idx)
{
	uint32_t mask = (1u << cq->log_size) - 1;
	size_t slot = cqe_slot(cq);

	return (struct mpr_cqe *)(cq->buf + (size_t)(idx & mask) * slot +
				  slot - sizeof(struct mpr_cqe));
}

static int cqe_valid(struct mpr_dp_cq *cq, uint32_t idx)
{
	uint8_t owner =
	    __atomic_load_n(&cqe_at(cq, idx)->owner, __ATOMIC_ACQUIRE);

	return (owner & 1) == MPR_PHASE(idx, cq->log_size);
}

uint32_t mprdma_cq_clean(struct mpr_dp_cq *cq, uint32_t qpn)
{
	return mprdma_cq_clean_srq(cq, qpn, NULL);
}

uint32_t mprdma_cq_clean_srq(struct mpr_dp_cq *cq, uint32_t qpn,
			     struct mpr_dp_srq *srq)
{
	uint32_t size = 1u << cq->log_size;
	uint32_t nfreed = 0;
	uint32_t pi = cq->ci;
	uint32_t i;

	/* The NIC may still be appending CQEs of other QPs: work only below
	 * the first slot found empty. */
	while (pi - cq->ci < size && cqe_valid(cq, pi))
		pi++;

	/* Walk from the newest down, sliding each survivor up by the number
	 * of stale entries found above it. */
	for (i = pi; i != cq->ci;) {
		struct mpr_cqe *cqe;

		i--;
		cqe = cqe_at(cq, i);
		if ((le32toh(cqe->qpn) & MPR_DB_QPN_MASK) == qpn) {
			/* A receive of a QP of an SRQ held an SRQ slot: give
			 * it back to the list, as a poll would have. */
			if (srq && cqe->opcode >= MPR_CQE_RESP_RECV)
				mpr_dp_srq_free_slot(srq,
						     le16toh(cqe->wqe_index));
			nfreed++;
		} else if (nfreed) {
			struct mpr_cqe *dst = cqe_at(cq, i + nfreed);
			size_t slot = cqe_slot(cq);

			/* The whole slot: inline receive data travels with
			 * its CQE. */
			memcpy((uint8_t *)(dst + 1) - slot,
			       (const uint8_t *)(cqe + 1) - slot, slot);
			/* The owner bit is that of the slot's new index. */
			dst->owner =
			    (uint8_t)((cqe->owner & ~1u) |
				      MPR_PHASE(i + nfreed, cq->log_size));
		}
	}
	if (nfreed) {
		cq->ci += nfreed;
		if (cq->dbrec)
			*cq->dbrec = htole32(cq->ci);
	}
	return nfreed;
}

int mprdma_inline_recv_slot(const char *value)
{
	if (!value || !*value || !strcmp(value, "0"))
		return 0;
	if (!strcmp(value, "64"))
		return 6;
	if (!strcmp(value, "128"))
		return 7;
	return -1;
}
