// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * The fake mprdma kernel driver: see fake_kernel.h. Sizing follows the
 * modeled host's driver (vp/host/verbs.cc), handles are allocated
 * lowest-free-first like the NIC's (so QPNs are reused at once).
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/driver.h>

#include "fake_kernel.h"
#include "mprdma-abi.h"

struct fake_kernel fk;

#define FK_PAGE 4096u

int fk_init(void)
{
	/* Each test starts on fresh "hardware". */
	if (fk.mem)
		munmap(fk.mem, fk.size);
	if (fk.fd > 0)
		close(fk.fd);
	memset(&fk, 0, sizeof(fk));
	fk.size = 64u << 20;
	fk.fd = memfd_create("mprdma-fake-uverbs", MFD_CLOEXEC);
	if (fk.fd < 0 || ftruncate(fk.fd, (off_t)fk.size))
		return -1;
	fk.mem =
	    mmap(NULL, fk.size, PROT_READ | PROT_WRITE, MAP_SHARED, fk.fd, 0);
	if (fk.mem == MAP_FAILED)
		return -1;
	fk.used = FK_PAGE; /* key 0 stays unused: a zero key is a bug */
	fk.abi_version = MPR_UVERBS_ABI_VERSION;
	return 0;
}

/* dma_alloc_coherent() memory is zeroed: so is a fresh memfd range. */
static uint64_t fk_alloc(uint64_t bytes)
{
	uint64_t key = fk.used;

	fk.used += (bytes + FK_PAGE - 1) & ~(uint64_t)(FK_PAGE - 1);
	return fk.used <= fk.size ? key : 0;
}

void *fk_ptr(uint64_t key)
{
	return fk.mem + key;
}

uint64_t fk_doorbell(uint32_t off)
{
	return __atomic_load_n((uint64_t *)(fk.mem + fk.uar_key + off),
			       __ATOMIC_ACQUIRE);
}

struct fk_cq *fk_cq(uint32_t cqn)
{
	return cqn < FK_MAX_OBJS && fk.cqs[cqn].live ? &fk.cqs[cqn] : NULL;
}

struct fk_qp *fk_qp(uint32_t qpn)
{
	int i;

	for (i = 0; i < FK_MAX_OBJS; i++)
		if (fk.qps[i].live && fk.qps[i].qpn == qpn)
			return &fk.qps[i];
	return NULL;
}

struct fk_srq *fk_srq(uint32_t srqn)
{
	return srqn < FK_MAX_OBJS && fk.srqs[srqn].live ? &fk.srqs[srqn] : NULL;
}

uint8_t *fk_srq_slot(struct fk_srq *srq, uint32_t slot)
{
	return (uint8_t *)fk_ptr(srq->ring_key) +
	       ((size_t)(slot & ((1u << srq->log_size) - 1)) << srq->log_stride);
}

uint8_t *fk_cqe_slot(struct fk_cq *cq, uint32_t idx)
{
	uint32_t mask = (1u << cq->log_size) - 1;
	uint32_t log_slot =
	    cq->log_cqe_size ? cq->log_cqe_size : MPR_CQ_LOG_CQE_SIZE_MIN;

	return (uint8_t *)fk_ptr(cq->ring_key) +
	       ((size_t)(idx & mask) << log_slot);
}

void fk_write_cqe(struct fk_cq *cq, uint32_t qpn, uint16_t wqe_index,
		  uint8_t opcode, uint8_t status, uint32_t byte_len,
		  uint8_t flags, uint32_t imm_be, uint8_t syndrome)
{
	uint32_t slot = 1u << (cq->log_cqe_size ? cq->log_cqe_size
						: MPR_CQ_LOG_CQE_SIZE_MIN);
	struct mpr_cqe *cqe = (struct mpr_cqe *)(fk_cqe_slot(cq, cq->pi) + slot -
						 sizeof(struct mpr_cqe));

	cqe->byte_len = htole32(byte_len);
	cqe->imm_data = imm_be;
	cqe->qpn = htole32(qpn);
	cqe->src_qp = 0;
	cqe->wqe_index = htole16(wqe_index);
	cqe->opcode = opcode;
	cqe->status = status;
	cqe->flags = flags;
	cqe->syndrome = syndrome;
	/* The owner byte last, as the NIC's single DMA write appears. */
	__atomic_store_n(&cqe->owner, MPR_PHASE(cq->pi, cq->log_size),
			 __ATOMIC_RELEASE);
	cq->pi++;
}

static uint32_t log2_ceil(uint64_t v)
{
	uint32_t l = 0;

	while ((1ull << l) < v)
		l++;
	return l;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

/* ------------------------------------------------------------------ */
/* The uverbs commands the provider issues                             */
/* ------------------------------------------------------------------ */

int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size)
{
	struct mprdma_alloc_ucontext_resp *r = (void *)resp;

	if (resp_size != sizeof(*r))
		return EINVAL;
	fk.uar_key = fk_alloc(MPR_UAR_PAGE_SIZE);
	r->ibv_resp.num_comp_vectors = 1;
	r->ibv_resp.async_fd = -1;
	r->drv_payload.abi_version = fk.abi_version;
	r->drv_payload.flags = fk.uctx_flags;
	r->drv_payload.uar_index = 1;
	r->drv_payload.uar_mmap_key = fk.uar_key;
	r->drv_payload.max_inline = 512;
	r->drv_payload.max_sge = 16;
	r->drv_payload.max_qp_wr = 16384;
	r->drv_payload.max_cqe = 4194304;
	context->context.num_comp_vectors = 1;
	return 0;
}

int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size)
{
	memset(attr, 0, attr_size);
	memset(resp, 0, *resp_size);
	resp->base.fw_ver = 0x00010000; /* FW_VERSION: 1.0 */
	attr->orig_attr.max_qp = 1024;
	attr->orig_attr.vendor_id = MPR_PCI_VENDOR_ID;
	attr->orig_attr.vendor_part_id = MPR_PCI_DEVICE_ID;
	attr->orig_attr.phys_port_cnt = 1;
	return 0;
}

int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size)
{
	if (port_num != 1)
		return EINVAL;
	memset(port_attr, 0, sizeof(*port_attr));
	port_attr->state = IBV_PORT_ACTIVE;
	port_attr->max_mtu = IBV_MTU_4096;
	port_attr->active_mtu = IBV_MTU_1024;
	port_attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{
	pd->context = context;
	pd->handle = 1;
	return 0;
}

int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	return 0;
}

int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)
{
	static uint32_t next_key = 0x100;

	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.lkey = vmr->ibv_mr.rkey = next_key++;
	vmr->access = access;
	return 0;
}

int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{
	return 0;
}

int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size)
{
	struct mprdma_create_cq_resp *r = (void *)resp;
	const struct mprdma_create_cq *c = (const void *)cmd;
	uint32_t log_size = max_u32(1, log2_ceil(cqe > 0 ? (uint64_t)cqe : 1));
	struct fk_cq *fcq = NULL;
	uint32_t i, log_slot;

	if (resp_size != sizeof(*r) || cmd_size != sizeof(*c) || cqe <= 0)
		return EINVAL;
	/* As the driver and NIC check them. */
	for (i = 0; i < sizeof(c->drv_payload.reserved); i++)
		if (c->drv_payload.reserved[i])
			return EINVAL;
	if (c->drv_payload.log_cqe_size &&
	    (c->drv_payload.log_cqe_size < MPR_CQ_LOG_CQE_SIZE_MIN ||
	     c->drv_payload.log_cqe_size > MPR_CQ_LOG_CQE_SIZE_MAX))
		return EINVAL;
	if ((c->drv_payload.flags & ~MPR_CQ_F_INLINE_RECV) ||
	    ((c->drv_payload.flags & MPR_CQ_F_INLINE_RECV) &&
	     c->drv_payload.log_cqe_size <= MPR_CQ_LOG_CQE_SIZE_MIN))
		return EINVAL;
	log_slot = c->drv_payload.log_cqe_size ? c->drv_payload.log_cqe_size
					       : MPR_CQ_LOG_CQE_SIZE_MIN;
	for (i = 0; i < FK_MAX_OBJS && !fcq; i++)
		if (!fk.cqs[i].live)
			fcq = &fk.cqs[i];
	if (!fcq)
		return ENOMEM;
	memset(fcq, 0, sizeof(*fcq));
	fcq->live = 1;
	fcq->cqn = (uint32_t)(fcq - fk.cqs);
	fcq->log_size = log_size;
	fcq->log_cqe_size = c->drv_payload.log_cqe_size;
	fcq->flags = c->drv_payload.flags;
	fcq->ring_key = fk_alloc((uint64_t)1 << (log_size + log_slot));
	fcq->dbrec_key = fk_alloc(FK_PAGE);

	cq->context = context;
	cq->channel = channel;
	cq->handle = fcq->cqn;
	cq->cqe = (int)(1u << log_size);
	r->ibv_resp.cq_handle = fcq->cqn;
	r->ibv_resp.cqe = 1u << log_size;
	r->drv_payload.cqn = fcq->cqn;
	r->drv_payload.log_size = log_size;
	r->drv_payload.ring_mmap_key = fcq->ring_key;
	r->drv_payload.dbrec_mmap_key = fcq->dbrec_key;
	r->drv_payload.ring_bytes = (uint32_t)1 << (log_size + log_slot);
	return 0;
}

int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	fk.cqs[cq->handle].live = 0;
	fk.destroyed_cqs++;
	return 0;
}

int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size)
{
	struct mprdma_create_qp_resp *r = (void *)resp;
	const struct mprdma_create_qp *c = (const void *)cmd;
	struct ibv_qp_cap *cap = &attr_ex->cap;
	struct fk_qp *fqp = NULL;
	uint32_t qpn, body;
	int i;

	if (resp_size != sizeof(*r) || cmd_size != sizeof(*c))
		return EINVAL;
	/* As the driver and NIC: reserved bytes zero, an engine for RC only,
	 * and this "NIC" offers all but IRN. */
	for (i = 0; i < (int)sizeof(c->drv_payload.reserved); i++)
		if (c->drv_payload.reserved[i])
			return EINVAL;
	if (c->drv_payload.transport == MPR_TRANSPORT_IRN ||
	    (attr_ex->qp_type == IBV_QPT_UD && c->drv_payload.transport))
		return EINVAL;
	/* Lowest free QPN from 2, as the NIC hands them out. */
	for (qpn = 2; fk_qp(qpn); qpn++)
		;
	for (i = 0; i < FK_MAX_OBJS && !fqp; i++)
		if (!fk.qps[i].live)
			fqp = &fk.qps[i];
	if (!fqp)
		return ENOMEM;
	memset(fqp, 0, sizeof(*fqp));
	fqp->live = 1;
	fqp->qpn = qpn;
	fqp->transport = c->drv_payload.transport;
	fqp->sq_log_size = max_u32(1, log2_ceil(cap->max_send_wr));
	fqp->rq_log_size = max_u32(1, log2_ceil(cap->max_recv_wr));
	if (attr_ex->srq) {
		/* As the driver: no receive ring, no receive caps. */
		struct fk_srq *fsrq = fk_srq(attr_ex->srq->handle);

		if (!fsrq) {
			fqp->live = 0;
			return EINVAL;
		}
		fsrq->num_qps++;
		fqp->srq = (int)(fsrq - fk.srqs) + 1;
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	body = max_u32(cap->max_send_sge * sizeof(struct mpr_wqe_data),
		       sizeof(struct mpr_wqe_inline) + cap->max_inline_data);
	fqp->sq_log_stride =
	    max_u32(MPR_SQ_LOG_STRIDE_MIN,
		    log2_ceil(sizeof(struct mpr_wqe_ctrl) +
			      sizeof(struct mpr_wqe_raddr) +
			      sizeof(struct mpr_wqe_atomic) + body));
	fqp->rq_log_stride =
	    max_u32(MPR_RQ_LOG_STRIDE_MIN,
		    log2_ceil(cap->max_recv_sge * sizeof(struct mpr_wqe_data)));
	fqp->sq_key = fk_alloc(1ull << (fqp->sq_log_size + fqp->sq_log_stride));
	if (fqp->srq)
		fqp->rq_log_size = fqp->rq_log_stride = 0;
	else
		fqp->rq_key =
		    fk_alloc(1ull << (fqp->rq_log_size + fqp->rq_log_stride));

	/* What libibverbs' own ibv_cmd_create_qp_ex() sets up. */
	qp->qp.context = context;
	qp->qp.qp_context = attr_ex->qp_context;
	qp->qp.pd = attr_ex->pd;
	qp->qp.send_cq = attr_ex->send_cq;
	qp->qp.recv_cq = attr_ex->recv_cq;
	qp->qp.srq = attr_ex->srq;
	qp->qp.qp_type = attr_ex->qp_type;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.events_completed = 0;
	qp->qp.handle = (uint32_t)(fqp - fk.qps);
	qp->qp.qp_num = qpn;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
	qp->comp_mask = 0;

	r->ibv_resp.qpn = qpn;
	r->drv_payload.qpn = qpn;
	r->drv_payload.sq_log_size = (uint8_t)fqp->sq_log_size;
	r->drv_payload.sq_log_stride = (uint8_t)fqp->sq_log_stride;
	r->drv_payload.rq_log_size = (uint8_t)fqp->rq_log_size;
	r->drv_payload.rq_log_stride = (uint8_t)fqp->rq_log_stride;
	r->drv_payload.sq_mmap_key = fqp->sq_key;
	r->drv_payload.rq_mmap_key = fqp->rq_key;
	r->drv_payload.sq_bytes = 1u << (fqp->sq_log_size + fqp->sq_log_stride);
	r->drv_payload.rq_bytes =
	    fqp->srq ? 0 : 1u << (fqp->rq_log_size + fqp->rq_log_stride);
	r->drv_payload.max_inline = cap->max_inline_data;
	r->drv_payload.max_send_sge = cap->max_send_sge;
	r->drv_payload.max_recv_sge = cap->max_recv_sge;
	return 0;
}

int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	if (fk.qps[qp->handle].srq)
		fk.srqs[fk.qps[qp->handle].srq - 1].num_qps--;
	fk.qps[qp->handle].live = 0;
	fk.destroyed_qps++;
	return 0;
}

int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
{
	struct mprdma_create_ah_resp *r = (void *)resp;

	if (resp_size < sizeof(*r))
		return EINVAL;
	memcpy(r->drv_payload.dmac, fk.ah_dmac, sizeof(fk.ah_dmac));
	ah->context = pd->context;
	ah->pd = pd;
	fk.live_ahs++;
	return 0;
}

int ibv_cmd_destroy_ah(struct ibv_ah *ah)
{
	fk.live_ahs--;
	return 0;
}

int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)
{
	fk.modify_calls++;
	return fk.modify_qp_errno;
}

int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size)
{
	memset(qp_attr, 0, sizeof(*qp_attr));
	memset(qp_init_attr, 0, sizeof(*qp_init_attr));
	qp_attr->qp_state = qp->state;
	qp_init_attr->qp_type = qp->qp_type;
	return 0;
}

/* As guest_driver/mprdma_srq.c sizes the ring: one slot more than max_wr. */
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	struct mprdma_create_srq_resp *r = (void *)resp;
	struct fk_srq *fsrq = NULL;
	int i;

	if (resp_size != sizeof(*r) || cmd_size != sizeof(*cmd) ||
	    !attr->attr.max_wr || attr->attr.max_wr > 65535 ||
	    attr->attr.max_sge > 16)
		return EINVAL;
	for (i = 0; i < FK_MAX_OBJS && !fsrq; i++)
		if (!fk.srqs[i].live)
			fsrq = &fk.srqs[i];
	if (!fsrq)
		return ENOMEM;
	memset(fsrq, 0, sizeof(*fsrq));
	fsrq->live = 1;
	fsrq->srqn = (uint32_t)(fsrq - fk.srqs);
	fsrq->log_size = max_u32(1, log2_ceil((uint64_t)attr->attr.max_wr + 1));
	fsrq->log_stride =
	    max_u32(MPR_SRQ_LOG_STRIDE_MIN,
		    log2_ceil(sizeof(struct mpr_wqe_srq_next) +
			      attr->attr.max_sge * sizeof(struct mpr_wqe_data)));
	fsrq->max_sge = ((1u << fsrq->log_stride) -
			 sizeof(struct mpr_wqe_srq_next)) /
			sizeof(struct mpr_wqe_data);
	fsrq->ring_key =
	    fk_alloc(1ull << (fsrq->log_size + fsrq->log_stride));

	srq->context = pd->context;
	srq->pd = pd;
	srq->handle = fsrq->srqn;
	attr->attr.max_wr = (1u << fsrq->log_size) - 1;
	attr->attr.max_sge = fsrq->max_sge;
	r->ibv_resp.srq_handle = fsrq->srqn;
	r->ibv_resp.srqn = fsrq->srqn;
	r->ibv_resp.max_wr = attr->attr.max_wr;
	r->ibv_resp.max_sge = attr->attr.max_sge;
	r->drv_payload.srqn = fsrq->srqn;
	r->drv_payload.log_size = (uint8_t)fsrq->log_size;
	r->drv_payload.log_stride = (uint8_t)fsrq->log_stride;
	r->drv_payload.mmap_key = fsrq->ring_key;
	r->drv_payload.bytes = 1u << (fsrq->log_size + fsrq->log_stride);
	r->drv_payload.max_sge = fsrq->max_sge;
	return 0;
}

int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size)
{
	struct fk_srq *fsrq = fk_srq(srq->handle);

	if (!fsrq || (srq_attr_mask & IBV_SRQ_MAX_WR))
		return EINVAL;
	if (srq_attr_mask & IBV_SRQ_LIMIT) {
		if (srq_attr->srq_limit > (1u << fsrq->log_size) - 1)
			return EINVAL;
		fsrq->limit = srq_attr->srq_limit;
	}
	return 0;
}

int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size)
{
	struct fk_srq *fsrq = fk_srq(srq->handle);

	if (!fsrq)
		return EINVAL;
	srq_attr->max_wr = (1u << fsrq->log_size) - 1;
	srq_attr->max_sge = fsrq->max_sge;
	srq_attr->srq_limit = fsrq->limit;
	return 0;
}

/* ib_core refuses to destroy an SRQ that QPs use. */
int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	struct fk_srq *fsrq = fk_srq(srq->handle);

	if (!fsrq)
		return EINVAL;
	if (fsrq->num_qps)
		return EBUSY;
	fsrq->live = 0;
	return 0;
}
