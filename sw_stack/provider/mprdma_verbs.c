// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma rdma-core provider: the verbs.
 *
 * Control verbs are uverbs commands to the kernel driver; the data path
 * (post_send, post_recv, poll_cq, req_notify_cq) runs sw_stack/dp on rings
 * the kernel allocated and this process mmap()ed.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "mprdma.h"
#include "mprdma_xlate.h"

/* The QP states of the NIC, the data path and verbs are one numbering
 * (the enums differ on purpose, hence the casts). */
#define SAME_VALUE(a, b) _Static_assert((int)(a) == (int)(b), #a " == " #b)
SAME_VALUE(MPR_DP_QPS_RESET, IBV_QPS_RESET);
SAME_VALUE(MPR_DP_QPS_INIT, IBV_QPS_INIT);
SAME_VALUE(MPR_DP_QPS_RTR, IBV_QPS_RTR);
SAME_VALUE(MPR_DP_QPS_RTS, IBV_QPS_RTS);
SAME_VALUE(MPR_DP_QPS_ERR, IBV_QPS_ERR);
/* And the QP types of the NIC and verbs. */
SAME_VALUE(MPR_QPT_RC, IBV_QPT_RC);
SAME_VALUE(MPR_QPT_UC, IBV_QPT_UC);
SAME_VALUE(MPR_QPT_UD, IBV_QPT_UD);

/* Completions translated per call of the data path's poll. */
#define MPRDMA_POLL_BATCH 16

/* Largest ring the 16-bit WQE index of doorbells and CQEs can address. */
#define MPRDMA_WQ_LOG_SIZE_MAX 15
#define MPRDMA_CQ_LOG_SIZE_MAX 24

void *mprdma_mmap(struct mprdma_context *ctx, size_t len, int prot,
		  uint64_t key, size_t *map_len)
{
	size_t rounded = (len + ctx->page_size - 1) & ~(ctx->page_size - 1);
	void *p;

	p = mmap(NULL, rounded, prot, MAP_SHARED, ctx->ibvctx.context.cmd_fd,
		 (off_t)key);
	if (p == MAP_FAILED)
		return NULL;
	*map_len = rounded;
	return p;
}

/* ------------------------------------------------------------------ */
/* sw_stack/dp glue                                                    */
/* ------------------------------------------------------------------ */

static void mprdma_uar_write64(void *opaque, uint32_t off, uint64_t value)
{
	struct mprdma_context *ctx = opaque;

	/* sw_stack/dp fences its ring stores with a C11 fence; the device
	 * barrier is what orders them before an MMIO store on every CPU
	 * rdma-core supports. The doorbell is one 64-bit store: BAR2 drops
	 * any other width. */
	udma_to_device_barrier();
	mmio_write64((uint8_t *)ctx->uar + off, value);
}

/*
 * WQE by MMIO: the WQE's 64-byte lines into the UAR page's MPR_UAR_BF
 * window, as 64-bit stores. The NIC assembles the window from 8-byte words
 * (a write-combining CPU would send whole lines; QEMU forwards each store),
 * and all QPs of the context share the page: one WQE at a time.
 */
static void mprdma_uar_write_wc(void *opaque, uint32_t off, const void *data,
				uint32_t len)
{
	struct mprdma_context *ctx = opaque;
	const uint8_t *src = data;
	uint64_t word;
	uint32_t i;

	pthread_spin_lock(&ctx->bf_lock);
	udma_to_device_barrier();
	for (i = 0; i < len; i += 8) {
		memcpy(&word, src + i, 8);
		mmio_write64((uint8_t *)ctx->uar + off + i, word);
	}
	pthread_spin_unlock(&ctx->bf_lock);
}

/*
 * Inline payloads are read from this process's own memory. A bad pointer
 * faults here, as it would in memcpy() in any other provider: there is no
 * cheap way to validate it and the verbs API does not ask for one.
 */
static int mprdma_copy_from_user(void *opaque, void *dst, uint64_t addr,
				 uint32_t len)
{
	memcpy(dst, (const void *)(uintptr_t)addr, len);
	return 0;
}

/* Inline receive: the CQE's bytes into the RECV's buffers, which the
 * process posted from its own memory (as for copy_from_user above). */
static int mprdma_copy_to_user(void *opaque, uint64_t addr, const void *src,
			       uint32_t len)
{
	memcpy((void *)(uintptr_t)addr, src, len);
	return 0;
}

static struct mprdma_qp **qp_bucket(struct mprdma_context *ctx, uint32_t qpn)
{
	return &ctx->qp_table[qpn & (MPRDMA_QP_TABLE_SIZE - 1)];
}

static struct mpr_dp_qp *mprdma_lookup_qp(void *opaque, uint32_t qpn)
{
	struct mprdma_context *ctx = opaque;
	struct mprdma_qp *qp;

	pthread_spin_lock(&ctx->qp_table_lock);
	for (qp = *qp_bucket(ctx, qpn); qp; qp = qp->next)
		if (qp->dp.qpn == qpn)
			break;
	pthread_spin_unlock(&ctx->qp_table_lock);
	return qp ? &qp->dp : NULL;
}

static void qp_table_insert(struct mprdma_context *ctx, struct mprdma_qp *qp)
{
	struct mprdma_qp **bucket = qp_bucket(ctx, qp->dp.qpn);

	pthread_spin_lock(&ctx->qp_table_lock);
	qp->next = *bucket;
	*bucket = qp;
	pthread_spin_unlock(&ctx->qp_table_lock);
}

static void qp_table_remove(struct mprdma_context *ctx, struct mprdma_qp *qp)
{
	struct mprdma_qp **link;

	pthread_spin_lock(&ctx->qp_table_lock);
	for (link = qp_bucket(ctx, qp->dp.qpn); *link; link = &(*link)->next) {
		if (*link == qp) {
			*link = qp->next;
			break;
		}
	}
	pthread_spin_unlock(&ctx->qp_table_lock);
}

static int mprdma_env_is_one(const char *v)
{
	return v && !strcmp(v, "1");
}

void mprdma_init_dp_ops(struct mprdma_context *ctx)
{
	ctx->dp_ops.uar_write64 = mprdma_uar_write64;
	ctx->dp_ops.copy_from_user = mprdma_copy_from_user;
	/* WQE by MMIO for single-WQE posts when the device offers it and
	 * MPRDMA_WQE_BY_MMIO=1. Off by default, unlike on hardware: under QEMU
	 * every 8-byte store is a VM exit and a round trip to the simulator,
	 * so a 64-byte line costs eight of them against one for a doorbell
	 * (ib_write_lat: 424 us typical against 53 us, wall clock). */
	ctx->dp_ops.uar_write_wc =
	    (ctx->uctx_flags & MPR_UCTX_F_WQE_BY_MMIO) &&
		    mprdma_env_is_one(getenv("MPRDMA_WQE_BY_MMIO"))
		? mprdma_uar_write_wc
		: NULL;
	ctx->dp_ops.lookup_qp = mprdma_lookup_qp;
	ctx->dp_ops.copy_to_user = mprdma_copy_to_user;
	/* A poll that frees an SRQ slot runs beside posts to that SRQ. */
	ctx->dp_ops.srq_lock = mprdma_srq_lock;
	ctx->dp_ops.ctx = ctx;
}

/* ------------------------------------------------------------------ */
/* Device, port, PD, MR                                                */
/* ------------------------------------------------------------------ */

int mprdma_query_device_ex(struct ibv_context *ibctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/* The driver reports the NIC's FW_VERSION register: major in bits
	 * 31:16, minor in 15:0. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u", (unsigned int)((fw >> 16) & 0xffff),
		 (unsigned int)(fw & 0xffff));
	return 0;
}

int mprdma_query_port(struct ibv_context *ibctx, uint8_t port,
		      struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(ibctx, port, attr, &cmd, sizeof(cmd));
}

struct ibv_pd *mprdma_alloc_pd(struct ibv_context *ibctx)
{
	struct ib_uverbs_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd = {};
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	ret =
	    ibv_cmd_alloc_pd(ibctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

int mprdma_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

struct ibv_mr *mprdma_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			     uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp = {};
	struct ibv_reg_mr cmd = {};
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

int mprdma_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Completion queues                                                   */
/* ------------------------------------------------------------------ */

struct ibv_cq *mprdma_create_cq(struct ibv_context *ibctx, int cqe,
				struct ibv_comp_channel *channel,
				int comp_vector)
{
	struct mprdma_context *ctx = to_mctx(ibctx);
	struct mprdma_create_cq_resp resp = {};
	struct mprdma_create_cq cmd = {};
	const struct mpr_create_cq_resp *r = &resp.drv_payload;
	struct mprdma_cq *cq;
	uint32_t log_slot;
	int ret;

	/* MPRDMA_INLINE_RECV: slots with room for small receives. */
	if (ctx->cq_log_cqe_size < 0) {
		errno = EINVAL;
		return NULL;
	}
	log_slot = ctx->cq_log_cqe_size ? (uint32_t)ctx->cq_log_cqe_size
					: MPR_CQ_LOG_CQE_SIZE_MIN;
	cmd.drv_payload.log_cqe_size = (uint8_t)ctx->cq_log_cqe_size;
	if (ctx->cq_log_cqe_size > MPR_CQ_LOG_CQE_SIZE_MIN)
		cmd.drv_payload.flags = MPR_CQ_F_INLINE_RECV;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	ret = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;

	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret)
		goto err_lock;

	/* Refuse a response this provider would read out of bounds. */
	if (r->log_size < 1 || r->log_size > MPRDMA_CQ_LOG_SIZE_MAX ||
	    r->ring_bytes < (uint64_t)1 << (r->log_size + log_slot)) {
		verbs_err(&ctx->ibvctx,
			  "mprdma: bad CQ geometry from kernel\n");
		ret = EPROTO;
		goto err_destroy;
	}
	cq->ring = mprdma_mmap(ctx, r->ring_bytes, PROT_READ | PROT_WRITE,
			       r->ring_mmap_key, &cq->ring_map_len);
	if (!cq->ring) {
		ret = errno;
		goto err_destroy;
	}
	/* The record is ours to write and the NIC's to read. */
	cq->dbrec_page =
	    mprdma_mmap(ctx, sizeof(uint32_t), PROT_READ | PROT_WRITE,
			r->dbrec_mmap_key, &cq->dbrec_map_len);
	if (!cq->dbrec_page) {
		ret = errno;
		goto err_unmap_ring;
	}

	cq->cqn = r->cqn;
	cq->dp.buf = cq->ring;
	cq->dp.dbrec = (volatile uint32_t *)cq->dbrec_page;
	cq->dp.cqn = r->cqn;
	cq->dp.log_size = r->log_size;
	cq->dp.log_cqe_size = (uint32_t)ctx->cq_log_cqe_size;
	cq->dp.ci = 0;
	cq->dp.ops = &ctx->dp_ops;
	return &cq->vcq.cq;

err_unmap_ring:
	munmap(cq->ring, cq->ring_map_len);
err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_lock:
	pthread_spin_destroy(&cq->lock);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}

int mprdma_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct mprdma_cq *cq = to_mcq(ibcq);
	struct mpr_wc mwc[MPRDMA_POLL_BATCH];
	int done = 0;

	pthread_spin_lock(&cq->lock);
	while (done < ne) {
		int want = ne - done;
		int got, i;

		if (want > MPRDMA_POLL_BATCH)
			want = MPRDMA_POLL_BATCH;
		got = mpr_dp_poll_cq(&cq->dp, want, mwc);
		for (i = 0; i < got; i++)
			mprdma_xlate_wc(&mwc[i], &wc[done + i]);
		done += got;
		if (got < want)
			break;
	}
	pthread_spin_unlock(&cq->lock);
	return done;
}

int mprdma_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct mprdma_cq *cq = to_mcq(ibcq);

	/* The arm doorbell carries the consumer index poll_cq moves. */
	pthread_spin_lock(&cq->lock);
	mpr_dp_arm_cq(&cq->dp, solicited_only);
	pthread_spin_unlock(&cq->lock);
	return 0;
}

/*
 * An event disarms the CQ in the NIC by itself and the arm doorbell carries
 * no sequence number, so there is nothing to acknowledge to the device; the
 * count only helps debugging.
 */
void mprdma_cq_event(struct ibv_cq *ibcq)
{
	__atomic_fetch_add(&to_mcq(ibcq)->events, 1, __ATOMIC_RELAXED);
}

int mprdma_destroy_cq(struct ibv_cq *ibcq)
{
	struct mprdma_cq *cq = to_mcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	munmap(cq->dbrec_page, cq->dbrec_map_len);
	munmap(cq->ring, cq->ring_map_len);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Queue pairs                                                         */
/* ------------------------------------------------------------------ */

/* Both CQs of a QP, locked in cqn order so that two QPs sharing CQs
 * crosswise cannot deadlock. */
static void lock_cqs(struct mprdma_cq *a, struct mprdma_cq *b)
{
	if (a == b) {
		pthread_spin_lock(&a->lock);
	} else if (a->cqn < b->cqn) {
		pthread_spin_lock(&a->lock);
		pthread_spin_lock(&b->lock);
	} else {
		pthread_spin_lock(&b->lock);
		pthread_spin_lock(&a->lock);
	}
}

static void unlock_cqs(struct mprdma_cq *a, struct mprdma_cq *b)
{
	pthread_spin_unlock(&a->lock);
	if (a != b)
		pthread_spin_unlock(&b->lock);
}

/* Drops the QP's unpolled CQEs once the NIC has forgotten the QP (the SRQ
 * slots of its receive completions go back to the SRQ's list). Called with
 * both CQ locks held. */
static void clean_cqs(struct mprdma_qp *qp, struct mprdma_cq *scq,
		      struct mprdma_cq *rcq)
{
	mprdma_cq_clean_srq(&scq->dp, qp->dp.qpn, qp->dp.srq);
	if (rcq != scq)
		mprdma_cq_clean_srq(&rcq->dp, qp->dp.qpn, qp->dp.srq);
}

static int map_wq(struct mprdma_context *ctx, struct mprdma_wq *wq,
		  struct mpr_dp_wq *dp, uint64_t key, uint32_t bytes,
		  uint32_t log_size, uint32_t log_stride, uint32_t max_sge)
{
	dp->wr_id = calloc((size_t)1 << log_size, sizeof(*dp->wr_id));
	if (!dp->wr_id)
		return ENOMEM;
	wq->map =
	    mprdma_mmap(ctx, bytes, PROT_READ | PROT_WRITE, key, &wq->map_len);
	if (!wq->map) {
		int err = errno;

		free(dp->wr_id);
		dp->wr_id = NULL;
		return err;
	}
	dp->buf = wq->map;
	dp->log_size = log_size;
	dp->log_stride = log_stride;
	dp->pi = 0;
	dp->ci = 0;
	dp->max_sge = max_sge;
	return 0;
}

static void unmap_wq(struct mprdma_wq *wq, struct mpr_dp_wq *dp)
{
	if (wq->map)
		munmap(wq->map, wq->map_len);
	free(dp->wr_id);
}

/* A QP of an SRQ (`srq`) has no receive ring: its rq fields are 0. */
static int check_qp_resp(const struct mpr_create_qp_resp *r, int srq)
{
	if (r->sq_log_size < 1 || r->sq_log_size > MPRDMA_WQ_LOG_SIZE_MAX ||
	    r->sq_log_stride < MPR_SQ_LOG_STRIDE_MIN ||
	    r->sq_log_stride > MPR_SQ_LOG_STRIDE_MAX ||
	    r->sq_bytes < (uint64_t)1 << (r->sq_log_size + r->sq_log_stride))
		return -1;
	if (srq)
		return r->rq_log_size || r->rq_log_stride || r->rq_bytes ||
			       r->max_recv_sge
			   ? -1
			   : 0;
	if (r->rq_log_size < 1 || r->rq_log_size > MPRDMA_WQ_LOG_SIZE_MAX ||
	    r->rq_log_stride < MPR_RQ_LOG_STRIDE_MIN ||
	    r->rq_log_stride > MPR_RQ_LOG_STRIDE_MAX ||
	    r->rq_bytes < (uint64_t)1 << (r->rq_log_size + r->rq_log_stride))
		return -1;
	return 0;
}

struct ibv_qp *mprdma_create_qp_ex(struct ibv_context *ibctx,
				   struct ibv_qp_init_attr_ex *attr)
{
	struct mprdma_context *ctx = to_mctx(ibctx);
	struct mprdma_create_qp_resp resp = {};
	struct mprdma_create_qp cmd = {};
	const struct mpr_create_qp_resp *r = &resp.drv_payload;
	struct mprdma_qp *qp;
	int ret;

	/* RC, UC and UD, with or without an SRQ, no XRC; the ibv_wr_*() API
	 * on RC and UC. */
	if ((attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
	     attr->qp_type != IBV_QPT_UD) ||
	    (attr->qp_type == IBV_QPT_UD &&
	     (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    (attr->comp_mask &
	     ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	/* The engine of RC QPs (MPRDMA_QP_TRANSPORT); UD QPs have none. */
	if (attr->qp_type == IBV_QPT_RC) {
		if (ctx->qp_transport < 0) {
			errno = EINVAL;
			return NULL;
		}
		cmd.drv_payload.transport = (uint8_t)ctx->qp_transport;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	/* Checked before the kernel creates anything. */
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ret = mprdma_qp_init_wr_ops(qp, attr->qp_type,
					    attr->send_ops_flags);
		if (ret)
			goto err_free;
	}
	ret = pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;
	ret = pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_sq_lock;

	ret = ibv_cmd_create_qp_ex(ibctx, &qp->vqp, attr, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret) {
		/* The NIC refuses an engine it does not offer (CAPS). */
		if (ret == EINVAL && cmd.drv_payload.transport)
			fprintf(stderr,
				"mprdma: the NIC refused QP transport %u "
				"(MPRDMA_QP_TRANSPORT=%s): not one it offers?\n",
				cmd.drv_payload.transport,
				getenv("MPRDMA_QP_TRANSPORT") ?: "");
		goto err_rq_lock;
	}
	if (check_qp_resp(r, attr->srq != NULL)) {
		verbs_err(&ctx->ibvctx,
			  "mprdma: bad QP geometry from kernel\n");
		ret = EPROTO;
		goto err_destroy;
	}

	ret = map_wq(ctx, &qp->sq, &qp->dp.sq, r->sq_mmap_key, r->sq_bytes,
		     r->sq_log_size, r->sq_log_stride, r->max_send_sge);
	if (ret)
		goto err_destroy;
	/* A QP of an SRQ takes its RECVs from the SRQ: no ring to map (the
	 * data path refuses post_recv on it). */
	if (attr->srq) {
		qp->dp.srq = &to_msrq(attr->srq)->dp;
	} else {
		ret = map_wq(ctx, &qp->rq, &qp->dp.rq, r->rq_mmap_key,
			     r->rq_bytes, r->rq_log_size, r->rq_log_stride,
			     r->max_recv_sge);
		if (ret)
			goto err_unmap_sq;
	}

	qp->dp.qpn = r->qpn;
	/* enum mpr_qp_type uses the verbs' numbers. */
	qp->dp.qp_type = attr->qp_type;
	qp->dp.state = MPR_DP_QPS_RESET;
	qp->dp.max_inline = r->max_inline;
	qp->dp.sq_sig_all = attr->sq_sig_all;
	qp->dp.ops = &ctx->dp_ops;

	/* Report what the rings really hold, which can exceed the request. */
	attr->cap.max_send_wr = 1u << r->sq_log_size;
	attr->cap.max_recv_wr = attr->srq ? 0 : 1u << r->rq_log_size;
	attr->cap.max_send_sge = r->max_send_sge;
	attr->cap.max_recv_sge = r->max_recv_sge;
	attr->cap.max_inline_data = mpr_dp_max_inline(&qp->dp);

	/* ibv_cmd_create_qp_ex() reset comp_mask: announce the ibv_wr_*()
	 * API (set up above) to ibv_qp_to_qp_ex() again. */
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		qp->vqp.comp_mask |= VERBS_QP_EX;

	qp_table_insert(ctx, qp);
	return &qp->vqp.qp;

err_unmap_sq:
	unmap_wq(&qp->sq, &qp->dp.sq);
err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_rq_lock:
	pthread_spin_destroy(&qp->rq.lock);
err_sq_lock:
	pthread_spin_destroy(&qp->sq.lock);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *mprdma_create_qp(struct ibv_pd *pd,
				struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {};
	struct ibv_qp *qp;

	attr_ex.qp_context = attr->qp_context;
	attr_ex.send_cq = attr->send_cq;
	attr_ex.recv_cq = attr->recv_cq;
	attr_ex.srq = attr->srq;
	attr_ex.cap = attr->cap;
	attr_ex.qp_type = attr->qp_type;
	attr_ex.sq_sig_all = attr->sq_sig_all;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd;

	qp = mprdma_create_qp_ex(pd->context, &attr_ex);
	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

int mprdma_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		    int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct ibv_query_qp cmd = {};
	int ret;

	ret = ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
			       sizeof(cmd));
	if (ret)
		return ret;
	/* The kernel knows the requested caps; the rings are the truth. */
	attr->cap.max_send_wr = 1u << qp->dp.sq.log_size;
	attr->cap.max_recv_wr = qp->dp.srq ? 0 : 1u << qp->dp.rq.log_size;
	attr->cap.max_send_sge = qp->dp.sq.max_sge;
	attr->cap.max_recv_sge = qp->dp.rq.max_sge;
	attr->cap.max_inline_data = mpr_dp_max_inline(&qp->dp);
	init_attr->cap = attr->cap;
	return 0;
}

int mprdma_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     int attr_mask)
{
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mprdma_cq *scq = to_mcq(ibqp->send_cq);
	struct mprdma_cq *rcq = to_mcq(ibqp->recv_cq);
	struct ibv_modify_qp cmd = {};
	int ret;

	ret = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (ret || !(attr_mask & IBV_QP_STATE))
		return ret;

	/* The data path refuses posts in RESET from this state; posts racing
	 * with the transition see the old or the new one, as on any NIC. */
	if (attr->qp_state == IBV_QPS_RESET) {
		/* The NIC restarts both queues at index 0 and forgets their
		 * WQEs: so does the data path, and CQEs already written for
		 * them must not complete WQEs posted after the reset. */
		lock_cqs(scq, rcq);
		clean_cqs(qp, scq, rcq);
		pthread_spin_lock(&qp->sq.lock);
		pthread_spin_lock(&qp->rq.lock);
		qp->dp.sq.pi = qp->dp.sq.ci = 0;
		qp->dp.rq.pi = qp->dp.rq.ci = 0;
		qp->dp.state = MPR_DP_QPS_RESET;
		pthread_spin_unlock(&qp->rq.lock);
		pthread_spin_unlock(&qp->sq.lock);
		unlock_cqs(scq, rcq);
	} else {
		pthread_spin_lock(&qp->sq.lock);
		pthread_spin_lock(&qp->rq.lock);
		qp->dp.state = attr->qp_state;
		pthread_spin_unlock(&qp->rq.lock);
		pthread_spin_unlock(&qp->sq.lock);
	}
	return 0;
}

int mprdma_destroy_qp(struct ibv_qp *ibqp)
{
	struct mprdma_context *ctx = to_mctx(ibqp->context);
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mprdma_cq *scq = to_mcq(ibqp->send_cq);
	struct mprdma_cq *rcq = to_mcq(ibqp->recv_cq);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;

	/* Under the CQ locks no poller holds a pointer to this QP (the data
	 * path looks QPs up only while polling), and its stale CQEs go
	 * before the kernel can hand the QPN to a new QP. */
	lock_cqs(scq, rcq);
	clean_cqs(qp, scq, rcq);
	qp_table_remove(ctx, qp);
	unlock_cqs(scq, rcq);

	unmap_wq(&qp->rq, &qp->dp.rq);
	unmap_wq(&qp->sq, &qp->dp.sq);
	pthread_spin_destroy(&qp->rq.lock);
	pthread_spin_destroy(&qp->sq.lock);
	free(qp);
	return 0;
}

struct ibv_ah *mprdma_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct mprdma_create_ah_resp resp = {};
	struct mprdma_ah *ah;
	int ret;

	/* RoCEv2: the GRH carries the addresses (IPv4-mapped GIDs). */
	if (!attr->is_global || attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	memcpy(ah->ud.dgid, attr->grh.dgid.raw, sizeof(ah->ud.dgid));
	memcpy(ah->ud.dmac, resp.drv_payload.dmac, sizeof(ah->ud.dmac));
	ah->ud.hop_limit = attr->grh.hop_limit;
	ah->ud.traffic_class = attr->grh.traffic_class;
	return &ah->ibv_ah;
}

int mprdma_destroy_ah(struct ibv_ah *ibah)
{
	int ret = ibv_cmd_destroy_ah(ibah);

	if (ret)
		return ret;
	free(to_mah(ibah));
	return 0;
}

int mprdma_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mpr_send_wr mwr;
	struct mpr_wqe_ud ud;
	int posted = 0;
	int err = 0;

	pthread_spin_lock(&qp->sq.lock);
	for (; wr; wr = wr->next) {
		err = mprdma_xlate_send_wr(wr, &mwr);
		/* UD: the AH's address segment with this WR's QP and Q_Key
		 * (bit 31 of remote_qkey: the QP's own, as the NIC reads it). */
		if (!err && qp->dp.qp_type == MPR_QPT_UD) {
			if (!wr->wr.ud.ah) {
				err = -EINVAL;
			} else {
				ud = to_mah(wr->wr.ud.ah)->ud;
				ud.remote_qpn = wr->wr.ud.remote_qpn;
				ud.qkey = wr->wr.ud.remote_qkey;
				mwr.ud = &ud;
			}
		}
		if (!err)
			err = mpr_dp_post_send(&qp->dp, &mwr, 0);
		if (err) {
			*bad_wr = wr;
			err = -err;
			break;
		}
		posted++;
	}
	/* One doorbell for the whole list, also when a later WR failed: the
	 * ones before it are posted. A lone WQE goes by MMIO instead where
	 * the device and MPRDMA_WQE_BY_MMIO allow (no DMA read of it). */
	if (posted == 1)
		mpr_dp_ring_sq_mmio(&qp->dp);
	else if (posted)
		mpr_dp_ring_sq(&qp->dp);
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

int mprdma_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mpr_recv_wr mwr;
	int err = 0;

	pthread_spin_lock(&qp->rq.lock);
	for (; wr; wr = wr->next) {
		mprdma_xlate_recv_wr(wr, &mwr);
		/* sw_stack/dp rings the RQ doorbell per WQE. */
		err = mpr_dp_post_recv(&qp->dp, &mwr);
		if (err) {
			*bad_wr = wr;
			err = -err;
			break;
		}
	}
	pthread_spin_unlock(&qp->rq.lock);
	return err;
}
