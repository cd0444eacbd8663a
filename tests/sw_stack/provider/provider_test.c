// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * The mprdma rdma-core provider end to end, without a device: the provider's
 * own code, rdma-core v55's libibverbs, and a fake kernel driver
 * (fake_kernel.c) whose rings live in a memfd. Applications' calls go
 * through libibverbs' public API (ibv_create_qp, ibv_post_send,
 * ibv_poll_cq, ...); the test plays the NIC: it reads the doorbells and WQEs
 * the provider wrote and writes the CQEs it polls.
 *
 * Prints one line per test and "N passed, N failed" at the end.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

#include <mprdma/hw.h>

#include "fake_kernel.h"
#include "mprdma.h"

/* The provider's registration, reached directly: no sysfs, no /dev. */
extern const struct verbs_device_ops verbs_provider_mprdma;

static int test_failed;

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n",         \
				__FILE__, __LINE__, #c);                       \
			test_failed = 1;                                       \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		unsigned long long _a = (unsigned long long)(a);               \
		unsigned long long _b = (unsigned long long)(b);               \
		if (_a != _b) {                                                \
			fprintf(                                               \
			    stderr,                                            \
			    "  %s:%d: %s == %s failed: 0x%llx != 0x%llx\n",    \
			    __FILE__, __LINE__, #a, #b, _a, _b);               \
			test_failed = 1;                                       \
		}                                                              \
	} while (0)

/* ------------------------------------------------------------------ */
/* Fixture                                                             */
/* ------------------------------------------------------------------ */

static struct verbs_device *vdev;

static struct ibv_context *open_ctx(void)
{
	struct verbs_context *vctx;
	int fd = dup(fk.fd); /* the context closes its cmd_fd */

	vctx = verbs_provider_mprdma.alloc_context(&vdev->device, fd, NULL);
	return vctx ? &vctx->context : NULL;
}

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct fk_cq *fcq;
	struct fk_qp *fqp;
	uint8_t buf[8192];
	struct ibv_mr *mr;
};

static struct ibv_qp *make_qp(struct env *e, struct ibv_cq *scq,
			      struct ibv_cq *rcq, uint32_t send_wr,
			      uint32_t recv_wr)
{
	struct ibv_qp_init_attr attr = {
	    .send_cq = scq,
	    .recv_cq = rcq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = send_wr,
		    .max_recv_wr = recv_wr,
		    .max_send_sge = 2,
		    .max_recv_sge = 2,
		    .max_inline_data = 64},
	};

	return ibv_create_qp(e->pd, &attr);
}

static int modify_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr = {.qp_state = state};

	return ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

static int to_rts(struct ibv_qp *qp)
{
	return modify_state(qp, IBV_QPS_INIT) ?:
	       modify_state(qp, IBV_QPS_RTR) ?: modify_state(qp, IBV_QPS_RTS);
}

static void env_up(struct env *e, uint32_t send_wr)
{
	memset(e, 0, sizeof(*e));
	e->ctx = open_ctx();
	if (!e->ctx)
		abort();
	e->pd = ibv_alloc_pd(e->ctx);
	e->mr =
	    ibv_reg_mr(e->pd, e->buf, sizeof(e->buf), IBV_ACCESS_LOCAL_WRITE);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	if (!e->pd || !e->mr || !e->cq)
		abort();
	e->qp = make_qp(e, e->cq, e->cq, send_wr, 16);
	if (!e->qp)
		abort();
	e->fcq = fk_cq(to_mcq(e->cq)->cqn);
	e->fqp = fk_qp(e->qp->qp_num);
}

static void env_down(struct env *e)
{
	if (e->qp)
		CHECK_EQ(ibv_destroy_qp(e->qp), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	CHECK_EQ(ibv_close_device(e->ctx), 0);
}

static uint8_t *sq_slot(struct fk_qp *q, uint32_t idx)
{
	uint32_t mask = (1u << q->sq_log_size) - 1;

	return (uint8_t *)fk_ptr(q->sq_key) +
	       ((size_t)(idx & mask) << q->sq_log_stride);
}

static struct ibv_send_wr send_wr(uint64_t wr_id, enum ibv_wr_opcode op,
				  struct ibv_sge *sge, unsigned int flags)
{
	struct ibv_send_wr wr = {
	    .wr_id = wr_id,
	    .opcode = op,
	    .sg_list = sge,
	    .num_sge = sge ? 1 : 0,
	    .send_flags = flags,
	};
	return wr;
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static void test_context_and_abi_check(void)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	struct ibv_context *ctx;

	ctx = open_ctx();
	CHECK(ctx != NULL);
	if (!ctx)
		return;
	CHECK(to_mctx(ctx)->uar != NULL);
	CHECK_EQ(to_mctx(ctx)->uar_index, 1);
	CHECK_EQ(to_mctx(ctx)->max_inline, 512);

	CHECK_EQ(ibv_query_device(ctx, &dattr), 0);
	CHECK(strcmp(dattr.fw_ver, "1.0") == 0);
	CHECK_EQ(dattr.vendor_id, MPR_PCI_VENDOR_ID);
	CHECK_EQ(ibv_query_port(ctx, 1, &pattr), 0);
	CHECK_EQ(pattr.state, IBV_PORT_ACTIVE);
	CHECK_EQ(ibv_close_device(ctx), 0);

	/* A kernel of another ABI is refused at open. */
	fk.abi_version = MPR_UVERBS_ABI_VERSION + 1;
	errno = 0;
	ctx = open_ctx();
	CHECK(ctx == NULL);
	CHECK_EQ(errno, EPROTONOSUPPORT);
	fk.abi_version = MPR_UVERBS_ABI_VERSION;
}

static void test_create_qp_caps_and_refusals(void)
{
	struct ibv_qp_init_attr attr = {};
	struct ibv_qp_init_attr_ex xattr = {};
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	struct env e;
	struct ibv_qp *qp;

	env_up(&e, 100);
	/* The rings hold a power of two; the caps say so. */
	attr.send_cq = e.cq;
	attr.recv_cq = e.cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = 100;
	attr.cap.max_recv_wr = 10;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 3;
	attr.cap.max_inline_data = 64;
	qp = ibv_create_qp(e.pd, &attr);
	CHECK(qp != NULL);
	CHECK_EQ(attr.cap.max_send_wr, 128);
	CHECK_EQ(attr.cap.max_recv_wr, 16);
	CHECK_EQ(attr.cap.max_send_sge, 2);
	CHECK_EQ(attr.cap.max_recv_sge, 3);
	CHECK_EQ(attr.cap.max_inline_data, 64);
	CHECK_EQ(ibv_query_qp(qp, &qattr, IBV_QP_CAP, &qinit), 0);
	CHECK_EQ(qattr.cap.max_send_wr, 128);
	CHECK_EQ(qinit.cap.max_inline_data, 64);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	/* RC, UC and UD; not a raw packet QP. */
	attr.qp_type = IBV_QPT_UC;
	qp = ibv_create_qp(e.pd, &attr);
	CHECK(qp != NULL);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	attr.qp_type = IBV_QPT_RAW_PACKET;
	errno = 0;
	CHECK(ibv_create_qp(e.pd, &attr) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	attr.qp_type = IBV_QPT_RC;

	/* UC has no READ or atomics: not in its ibv_wr_*() API either. */
	xattr.qp_type = IBV_QPT_UC;
	xattr.send_cq = e.cq;
	xattr.recv_cq = e.cq;
	xattr.cap = attr.cap;
	xattr.pd = e.pd;
	xattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xattr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	errno = 0;
	CHECK(ibv_create_qp_ex(e.ctx, &xattr) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);

	/* ibv_wr_*() operations without a WQE are refused at create. */
	xattr.qp_type = IBV_QPT_RC;
	xattr.send_cq = e.cq;
	xattr.recv_cq = e.cq;
	xattr.cap = attr.cap;
	xattr.pd = e.pd;
	xattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xattr.send_ops_flags =
	    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW;
	errno = 0;
	CHECK(ibv_create_qp_ex(e.ctx, &xattr) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	CHECK_EQ(fk.qps[0].live + fk.qps[1].live, 1); /* only e.qp */
	/* Plain create_qp_ex works, without the ibv_wr_*() API. */
	xattr.comp_mask = IBV_QP_INIT_ATTR_PD;
	qp = ibv_create_qp_ex(e.ctx, &xattr);
	CHECK(qp != NULL);
	if (qp) {
		CHECK(ibv_qp_to_qp_ex(qp) == NULL);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}

	/* Verbs the device lacks fail with EOPNOTSUPP (libibverbs' defaults).
	 */
	errno = 0;
	CHECK(ibv_alloc_mw(e.pd, IBV_MW_TYPE_1) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	env_down(&e);
}

/* MPRDMA_QP_TRANSPORT, read at open, names the engine of the context's RC
 * QPs in create_qp's driver input; UD QPs send none; a name the provider
 * does not know refuses RC QPs; one the NIC does not offer is the kernel's
 * EINVAL. */
static void test_qp_transport_from_environment(void)
{
	struct ibv_qp_init_attr ud = {};
	struct env e;
	struct ibv_qp *qp;
	int name;

	unsetenv("MPRDMA_QP_TRANSPORT");
	env_up(&e, 8);
	CHECK_EQ(e.fqp->transport, MPR_TRANSPORT_DEFAULT);
	env_down(&e);

	setenv("MPRDMA_QP_TRANSPORT", "mprdma", 1);
	env_up(&e, 8);
	CHECK_EQ(e.fqp->transport, MPR_TRANSPORT_MP_RDMA);
	/* The variable is read at open: a later change does not apply. */
	setenv("MPRDMA_QP_TRANSPORT", "gbn", 1);
	qp = make_qp(&e, e.cq, e.cq, 8, 8);
	CHECK(qp != NULL);
	if (qp) {
		CHECK_EQ(fk_qp(qp->qp_num)->transport, MPR_TRANSPORT_MP_RDMA);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	/* A UD QP of the same context carries no engine. */
	ud.send_cq = e.cq;
	ud.recv_cq = e.cq;
	ud.qp_type = IBV_QPT_UD;
	ud.cap.max_send_wr = ud.cap.max_recv_wr = 4;
	ud.cap.max_send_sge = ud.cap.max_recv_sge = 1;
	qp = ibv_create_qp(e.pd, &ud);
	CHECK(qp != NULL);
	if (qp) {
		CHECK_EQ(fk_qp(qp->qp_num)->transport, MPR_TRANSPORT_DEFAULT);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	env_down(&e);

	/* The fake NIC does not offer IRN: the kernel's EINVAL. A name that
	 * is no engine: the context opens, RC QPs are refused before the
	 * kernel is asked. UD QPs are created either way. */
	for (name = 0; name < 2; name++) {
		int live = 0, i;

		setenv("MPRDMA_QP_TRANSPORT", name ? "tcp" : "irn", 1);
		e.ctx = open_ctx();
		CHECK(e.ctx != NULL);
		if (!e.ctx)
			continue;
		e.pd = ibv_alloc_pd(e.ctx);
		e.cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
		CHECK(e.pd && e.cq);
		errno = 0;
		CHECK(make_qp(&e, e.cq, e.cq, 8, 8) == NULL);
		CHECK_EQ(errno, EINVAL);
		for (i = 0; i < FK_MAX_OBJS; i++)
			live += fk.qps[i].live;
		CHECK_EQ(live, 0);
		ud.send_cq = ud.recv_cq = e.cq;
		qp = ibv_create_qp(e.pd, &ud);
		CHECK(qp != NULL);
		if (qp)
			CHECK_EQ(ibv_destroy_qp(qp), 0);
		CHECK_EQ(ibv_destroy_cq(e.cq), 0);
		CHECK_EQ(ibv_dealloc_pd(e.pd), 0);
		CHECK_EQ(ibv_close_device(e.ctx), 0);
	}
	unsetenv("MPRDMA_QP_TRANSPORT");
}

static void test_post_send_list_one_doorbell(void)
{
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3];
	struct mpr_wqe_ctrl *ctrl;
	struct mpr_wqe_raddr *raddr;
	struct env e;
	uint32_t qpn;

	env_up(&e, 16);
	qpn = e.qp->qp_num;
	memcpy(e.buf, "hello", 5);
	sge[0] = (struct ibv_sge){(uintptr_t)e.buf, 256, e.mr->lkey};
	sge[1] = (struct ibv_sge){(uintptr_t)e.buf, 5, e.mr->lkey};
	sge[2] = (struct ibv_sge){(uintptr_t)e.buf + 512, 128, e.mr->lkey};
	wr[0] = send_wr(10, IBV_WR_RDMA_WRITE, &sge[0], 0);
	wr[0].wr.rdma.remote_addr = 0x10000;
	wr[0].wr.rdma.rkey = 0x77;
	wr[1] = send_wr(11, IBV_WR_SEND, &sge[1], IBV_SEND_INLINE);
	wr[2] = send_wr(12, IBV_WR_RDMA_READ, &sge[2], IBV_SEND_SIGNALED);
	wr[2].wr.rdma.remote_addr = 0x20000;
	wr[2].wr.rdma.rkey = 0x78;
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];

	/* RESET refuses posts: EINVAL, bad_wr is the first WR, no doorbell. */
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[0]);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), 0);

	CHECK_EQ(to_rts(e.qp), 0);
	CHECK_EQ(to_mqp(e.qp)->dp.state, MPR_DP_QPS_RTS);
	bad = NULL;
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
	CHECK(bad == NULL);
	/* One doorbell after the last WQE: producer index 3. */
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 3));

	ctrl = (struct mpr_wqe_ctrl *)sq_slot(e.fqp, 0);
	raddr = (struct mpr_wqe_raddr *)(ctrl + 1);
	CHECK_EQ(ctrl->opcode, MPR_WQE_RDMA_WRITE);
	CHECK_EQ(ctrl->flags, 0);
	CHECK_EQ(le16toh(ctrl->wqe_index), 0);
	CHECK_EQ(le64toh(raddr->remote_addr), 0x10000);
	CHECK_EQ(le32toh(raddr->rkey), 0x77);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(e.fqp, 1);
	CHECK_EQ(ctrl->opcode, MPR_WQE_SEND);
	CHECK_EQ(ctrl->flags, MPR_WQE_F_INLINE);
	CHECK_EQ(le32toh(*(uint32_t *)(ctrl + 1)), 5);
	CHECK(memcmp((uint8_t *)(ctrl + 1) + 4, "hello", 5) == 0);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(e.fqp, 2);
	CHECK_EQ(ctrl->opcode, MPR_WQE_RDMA_READ);
	CHECK_EQ(ctrl->flags, MPR_WQE_F_SIGNALED);
	CHECK_EQ(le16toh(ctrl->wqe_index), 2);

	/* A bad WR in the middle: the ones before it are posted and rung,
	 * the rest is not; the error is a positive errno. */
	wr[1] = send_wr(21, IBV_WR_LOCAL_INV, NULL, 0);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	bad = NULL;
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 4));
	env_down(&e);
}

/* WQE by MMIO: with MPRDMA_WQE_BY_MMIO=1 and the device's
 * MPR_UCTX_F_WQE_BY_MMIO, a post of one WR writes the WQE (ctrl.bf_qpn set,
 * zero-padded to 64-byte lines) into the UAR page's MPR_UAR_BF window and
 * rings no doorbell; a list rings one doorbell and leaves the window alone;
 * without the variable (the default) or without the device's flag every
 * post rings the doorbell. The WQE is in the ring either way. */
static void test_wqe_by_mmio(void)
{
	struct ibv_send_wr wr[2], *bad = NULL;
	struct ibv_sge sge;
	const uint8_t *bf;
	uint8_t zero[MPR_UAR_BF_SIZE] = {0};
	struct mpr_wqe_ctrl ctrl;
	struct env e;
	uint32_t qpn, len;
	int run;

	for (run = 0; run < 3; run++) {
		/* 0: offered and asked for; 1: offered, not asked for;
		 * 2: asked for, not offered. */
		fk.uctx_flags = run == 2 ? 0 : MPR_UCTX_F_WQE_BY_MMIO;
		if (run != 1)
			setenv("MPRDMA_WQE_BY_MMIO", "1", 1);
		env_up(&e, 16);
		unsetenv("MPRDMA_WQE_BY_MMIO");
		qpn = e.qp->qp_num;
		bf = (const uint8_t *)fk_ptr(fk.uar_key) + MPR_UAR_BF;
		CHECK_EQ(to_rts(e.qp), 0);
		sge = (struct ibv_sge){(uintptr_t)e.buf, 100, e.mr->lkey};
		wr[0] = send_wr(1, IBV_WR_RDMA_WRITE, &sge, IBV_SEND_SIGNALED);
		wr[0].wr.rdma.remote_addr = 0x10000;
		wr[0].wr.rdma.rkey = 0x77;
		CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
		CHECK_EQ(to_mqp(e.qp)->dp.sq.pi, 1);
		if (run == 0) {
			CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), 0);
			memcpy(&ctrl, bf, sizeof(ctrl));
			CHECK_EQ(le32toh(ctrl.bf_qpn), qpn);
			CHECK_EQ(ctrl.opcode, MPR_WQE_RDMA_WRITE);
			len = (uint32_t)(sizeof(ctrl) + ctrl.num_ds * MPR_WQE_SEG_SIZE);
			/* The ring slot holds the same WQE (bf_qpn, bytes
			 * 12-15, aside). */
			CHECK(memcmp(bf, sq_slot(e.fqp, 0), 12) == 0);
			CHECK(memcmp(bf + 16, sq_slot(e.fqp, 0) + 16, len - 16) == 0);
			CHECK(memcmp(bf + len, zero, ((len + 63u) & ~63u) - len) == 0);
		} else {
			CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 1));
			CHECK(memcmp(bf, zero, sizeof(zero)) == 0);
		}
		/* A list of two: one doorbell, the window is not written. */
		memset((void *)bf, 0, sizeof(zero));
		wr[1] = wr[0];
		wr[0].next = &wr[1];
		wr[1].next = NULL;
		CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
		CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 3));
		CHECK(memcmp(bf, zero, sizeof(zero)) == 0);
		/* A lone bad WR: EINVAL, nothing posted or written. */
		wr[0] = send_wr(2, IBV_WR_LOCAL_INV, NULL, 0);
		bad = NULL;
		CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), EINVAL);
		CHECK(bad == &wr[0]);
		CHECK_EQ(to_mqp(e.qp)->dp.sq.pi, 3);
		CHECK(memcmp(bf, zero, sizeof(zero)) == 0);
		env_down(&e);
	}
	fk.uctx_flags = 0;
}

/* MPRDMA_INLINE_RECV=64: the context's CQs ask for 64-byte slots with
 * MPR_CQ_F_INLINE_RECV; a receive the NIC wrote into its slot
 * (MPR_CQE_F_INLINE) is copied into the RECV's buffer at poll time, one
 * written normally is not touched; destroying a QP slides later CQEs with
 * their inline bytes. Unset: 32-byte slots; a bad value: no CQ. */
static void test_inline_recv(void)
{
	struct ibv_recv_wr rwr[3], *rbad;
	struct ibv_sge sge[3];
	struct ibv_wc wc[4];
	struct ibv_qp *qp2;
	struct env e;
	uint32_t qpn;
	uint8_t *slot;
	int i;

	setenv("MPRDMA_INLINE_RECV", "64", 1);
	env_up(&e, 16);
	unsetenv("MPRDMA_INLINE_RECV");
	CHECK_EQ(e.fcq->log_cqe_size, 6);
	CHECK_EQ(e.fcq->flags, MPR_CQ_F_INLINE_RECV);
	qpn = e.qp->qp_num;
	qp2 = make_qp(&e, e.cq, e.cq, 4, 4);
	CHECK(qp2 != NULL);
	CHECK_EQ(to_rts(e.qp), 0);
	CHECK_EQ(to_rts(qp2), 0);
	memset(e.buf, 0xee, 256);
	for (i = 0; i < 3; i++) {
		sge[i] = (struct ibv_sge){(uintptr_t)e.buf + 64 * i, 64,
					  e.mr->lkey};
		memset(&rwr[i], 0, sizeof(rwr[i]));
		rwr[i].wr_id = 300 + i;
		rwr[i].sg_list = &sge[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_recv(e.qp, rwr, &rbad), 0);

	/* A CQE of qp2 first (to be cleaned away), then: RECV 0 inline (20
	 * bytes in the slot), RECV 1 placed by DMA (the NIC wrote the
	 * buffer), RECV 2 inline (32 bytes: the most a 64-byte slot holds). */
	fk_write_cqe(e.fcq, qp2->qp_num, 0, MPR_CQE_REQ_RDMA_WRITE,
		     MPR_CQE_SUCCESS, 8, 0, 0, 0);
	slot = fk_cqe_slot(e.fcq, e.fcq->pi);
	memcpy(slot, "twenty bytes inline!", 20);
	fk_write_cqe(e.fcq, qpn, 0, MPR_CQE_RESP_RECV, MPR_CQE_SUCCESS, 20,
		     MPR_CQE_F_INLINE, 0, 0);
	memcpy(e.buf + 64, "by dma", 6);
	fk_write_cqe(e.fcq, qpn, 1, MPR_CQE_RESP_RECV, MPR_CQE_SUCCESS, 6, 0,
		     0, 0);
	slot = fk_cqe_slot(e.fcq, e.fcq->pi);
	for (i = 0; i < 32; i++)
		slot[i] = (uint8_t)(0x40 + i);
	fk_write_cqe(e.fcq, qpn, 2, MPR_CQE_RESP_RECV, MPR_CQE_SUCCESS, 32,
		     MPR_CQE_F_INLINE, 0, 0);

	/* Destroying qp2 removes its CQE; the survivors keep their data. */
	CHECK_EQ(ibv_destroy_qp(qp2), 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 3);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(wc[i].wr_id, 300 + i);
		CHECK_EQ(wc[i].status, IBV_WC_SUCCESS);
		CHECK_EQ(wc[i].opcode, IBV_WC_RECV);
	}
	CHECK_EQ(wc[0].byte_len, 20);
	CHECK(memcmp(e.buf, "twenty bytes inline!", 20) == 0);
	CHECK_EQ(e.buf[20], 0xee); /* nothing past byte_len */
	CHECK(memcmp(e.buf + 64, "by dma", 6) == 0);
	CHECK_EQ(e.buf[64 + 6], 0xee);
	for (i = 0; i < 32; i++)
		CHECK_EQ(e.buf[128 + i], 0x40 + i);
	CHECK_EQ(e.buf[128 + 32], 0xee);
	env_down(&e);

	/* Unset: 32-byte slots, no flag. */
	env_up(&e, 4);
	CHECK_EQ(e.fcq->log_cqe_size, 0);
	CHECK_EQ(e.fcq->flags, 0);
	env_down(&e);

	/* A value that is no slot size: the context opens, CQs are refused. */
	setenv("MPRDMA_INLINE_RECV", "48", 1);
	e.ctx = open_ctx();
	unsetenv("MPRDMA_INLINE_RECV");
	CHECK(e.ctx != NULL);
	if (e.ctx) {
		errno = 0;
		CHECK(ibv_create_cq(e.ctx, 16, NULL, NULL, 0) == NULL);
		CHECK_EQ(errno, EINVAL);
		CHECK_EQ(ibv_close_device(e.ctx), 0);
	}
}

static void test_ud_address_handles(void)
{
	static const uint8_t mac[6] = {0x02, 0x00, 0x0a, 0x00, 0x00, 0x02};
	struct ibv_qp_init_attr attr = {0};
	struct ibv_qp_init_attr_ex xattr = {0};
	struct ibv_ah_attr ah_attr = {0};
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	struct mpr_wqe_ctrl *ctrl;
	struct mpr_wqe_ud *ud;
	struct ibv_wc wc;
	struct mpr_cqe *cqe;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct env e;

	env_up(&e, 16);
	attr.send_cq = e.cq;
	attr.recv_cq = e.cq;
	attr.qp_type = IBV_QPT_UD;
	attr.cap.max_send_wr = 8;
	attr.cap.max_recv_wr = 8;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = 16;
	qp = ibv_create_qp(e.pd, &attr);
	CHECK(qp != NULL);
	CHECK_EQ(to_mqp(qp)->dp.qp_type, MPR_QPT_UD);

	/* RoCE AHs need the GRH (the IP addresses). */
	ah_attr.port_num = 1;
	errno = 0;
	CHECK(ibv_create_ah(e.pd, &ah_attr) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(fk.live_ahs, 0);
	ah_attr.is_global = 1;
	ah_attr.grh.dgid.raw[10] = 0xff;
	ah_attr.grh.dgid.raw[11] = 0xff;
	ah_attr.grh.dgid.raw[12] = 10;
	ah_attr.grh.dgid.raw[15] = 2;
	ah_attr.grh.hop_limit = 17;
	ah_attr.grh.traffic_class = 0x28;
	memcpy(fk.ah_dmac, mac, sizeof(mac));
	ah = ibv_create_ah(e.pd, &ah_attr);
	CHECK(ah != NULL);
	CHECK_EQ(fk.live_ahs, 1);

	/* A SEND through it: the WQE's address segment holds the AH and the
	 * WR's QP and Q_Key. */
	CHECK_EQ(to_rts(qp), 0);
	memcpy(e.buf, "datagram", 8);
	sge = (struct ibv_sge){(uintptr_t)e.buf, 8, e.mr->lkey};
	wr = send_wr(7, IBV_WR_SEND_WITH_IMM, &sge, IBV_SEND_INLINE);
	wr.imm_data = htobe32(99);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0x123;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fk_qp(qp->qp_num), 0);
	ud = (struct mpr_wqe_ud *)(ctrl + 1);
	CHECK_EQ(ctrl->opcode, MPR_WQE_SEND_IMM);
	CHECK_EQ(le32toh(ud->remote_qpn), 0x123);
	CHECK_EQ(le32toh(ud->qkey), 0x11111111);
	CHECK(memcmp(ud->dgid, ah_attr.grh.dgid.raw, 16) == 0);
	CHECK(memcmp(ud->dmac, mac, 6) == 0);
	CHECK_EQ(ud->hop_limit, 17);
	CHECK_EQ(ud->traffic_class, 0x28);
	CHECK(memcmp((uint8_t *)(ud + 1) + 4, "datagram", 8) == 0);
	/* No AH: refused, nothing posted. */
	wr.wr.ud.ah = NULL;
	bad = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);

	/* A UD receive completion reports the sender's QP and the GRH. */
	fk_write_cqe(e.fcq, qp->qp_num, 0, MPR_CQE_RESP_RECV, MPR_CQE_SUCCESS,
		     48, MPR_CQE_F_GRH, 0, 0);
	cqe = (struct mpr_cqe *)fk_ptr(e.fcq->ring_key) +
	      ((e.fcq->pi - 1) & ((1u << e.fcq->log_size) - 1));
	cqe->src_qp = htole32(0x456);
	CHECK_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
	CHECK_EQ(wc.src_qp, 0x456);
	CHECK(wc.wc_flags & IBV_WC_GRH);
	CHECK_EQ(wc.byte_len, 48);

	/* The ibv_wr_*() API is for RC QPs. */
	xattr.qp_type = IBV_QPT_UD;
	xattr.send_cq = e.cq;
	xattr.recv_cq = e.cq;
	xattr.cap = attr.cap;
	xattr.pd = e.pd;
	xattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xattr.send_ops_flags = IBV_QP_EX_WITH_SEND;
	errno = 0;
	CHECK(ibv_create_qp_ex(e.ctx, &xattr) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);

	CHECK_EQ(ibv_destroy_ah(ah), 0);
	CHECK_EQ(fk.live_ahs, 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	env_down(&e);
}

static void test_poll_translates_completions(void)
{
	struct ibv_send_wr wr[3], *bad;
	struct ibv_recv_wr rwr[2], *rbad;
	struct ibv_sge sge = {0, 64, 0};
	struct ibv_wc wc[4];
	struct env e;
	uint32_t qpn;
	int i;

	env_up(&e, 16);
	qpn = e.qp->qp_num;
	sge.addr = (uintptr_t)e.buf;
	sge.lkey = e.mr->lkey;
	CHECK_EQ(to_rts(e.qp), 0);
	for (i = 0; i < 3; i++) {
		wr[i] = send_wr(100 + i, IBV_WR_RDMA_WRITE, &sge,
				i == 2 ? IBV_SEND_SIGNALED : 0);
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_send(e.qp, wr, &bad), 0);
	for (i = 0; i < 2; i++) {
		memset(&rwr[i], 0, sizeof(rwr[i]));
		rwr[i].wr_id = 200 + i;
		rwr[i].sg_list = &sge;
		rwr[i].num_sge = 1;
		rwr[i].next = i < 1 ? &rwr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_recv(e.qp, rwr, &rbad), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_RQ_DB), MPR_RQ_DB(qpn, 2));

	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 0);

	/* The NIC completes the signaled WRITE (index 2: retires 0..2), a
	 * WRITE_IMM into RECV 0 and a too-long SEND into RECV 1. */
	fk_write_cqe(e.fcq, qpn, 2, MPR_CQE_REQ_RDMA_WRITE, MPR_CQE_SUCCESS, 64,
		     0, 0, 0);
	fk_write_cqe(e.fcq, qpn, 0, MPR_CQE_RESP_WRITE_IMM, MPR_CQE_SUCCESS,
		     4096, MPR_CQE_F_IMM, htonl(0xa1b2c3d4), 0);
	fk_write_cqe(e.fcq, qpn, 1, MPR_CQE_RESP_RECV, MPR_CQE_LOC_LEN_ERR, 0,
		     0, 0, MPR_SYN_RECV_TOO_SMALL);

	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 3);
	CHECK_EQ(wc[0].wr_id, 102);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CHECK_EQ(wc[0].byte_len, 64);
	CHECK_EQ(wc[0].qp_num, qpn);
	CHECK_EQ(wc[0].wc_flags, 0);
	CHECK_EQ(wc[1].wr_id, 200);
	CHECK_EQ(wc[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK_EQ(wc[1].wc_flags, IBV_WC_WITH_IMM);
	CHECK_EQ(wc[1].imm_data, htonl(0xa1b2c3d4));
	CHECK_EQ(wc[1].byte_len, 4096);
	CHECK_EQ(wc[2].wr_id, 201);
	CHECK_EQ(wc[2].status, IBV_WC_LOC_LEN_ERR);
	CHECK_EQ(wc[2].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[2].vendor_err, MPR_SYN_RECV_TOO_SMALL);
	/* The consumer-index record follows the poll. */
	CHECK_EQ(le32toh(*(uint32_t *)fk_ptr(e.fcq->dbrec_key)), 3);
	/* The SQ got its three slots back from one signaled CQE. */
	CHECK_EQ(mpr_dp_sq_space(&to_mqp(e.qp)->dp), 16);

	/* Arming carries the consumer index. */
	CHECK_EQ(ibv_req_notify_cq(e.cq, 0), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_CQ_DB),
		 MPR_CQ_DB(e.fcq->cqn, MPR_CQ_DB_ARM_NEXT, 3));
	CHECK_EQ(ibv_req_notify_cq(e.cq, 1), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_CQ_DB),
		 MPR_CQ_DB(e.fcq->cqn, MPR_CQ_DB_ARM_SOLICITED, 3));

	/* poll_cq with a small array leaves the rest for the next call. */
	for (i = 0; i < 20; i++)
		fk_write_cqe(e.fcq, qpn, (uint16_t)(3 + i),
			     MPR_CQE_REQ_RDMA_WRITE, MPR_CQE_WR_FLUSH_ERR, 0, 0,
			     0, MPR_SYN_FLUSHED);
	CHECK_EQ(ibv_poll_cq(e.cq, 1, wc), 1);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	{
		struct ibv_wc many[32];

		/* More than the provider's internal batch of 16. */
		CHECK_EQ(ibv_poll_cq(e.cq, 32, many), 19);
	}
	env_down(&e);
}

/* An RC QP of e's PD and CQ with the ibv_wr_*() operations `ops`, 16 WRs
 * and `sges` SGEs each way, 64 bytes inline. */
static struct ibv_qp *make_qp_ex(struct env *e, uint32_t sges, uint64_t ops)
{
	struct ibv_qp_init_attr_ex xattr = {};

	xattr.qp_type = IBV_QPT_RC;
	xattr.send_cq = e->cq;
	xattr.recv_cq = e->cq;
	xattr.cap.max_send_wr = 16;
	xattr.cap.max_recv_wr = 16;
	xattr.cap.max_send_sge = sges;
	xattr.cap.max_recv_sge = sges;
	xattr.cap.max_inline_data = 64;
	xattr.pd = e->pd;
	xattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xattr.send_ops_flags = ops;
	return ibv_create_qp_ex(e->ctx, &xattr);
}

/* The ibv_wr_*() API with MPRDMA_WQE_BY_MMIO=1: a batch of one request goes
 * to the BF window at wr_complete, a batch of two rings the doorbell. */
static void test_wr_api_wqe_by_mmio(void)
{
	const uint8_t *bf;
	struct mpr_wqe_ctrl ctrl;
	struct ibv_qp_ex *qpx;
	struct ibv_qp *qp;
	struct env e;
	int i;

	fk.uctx_flags = MPR_UCTX_F_WQE_BY_MMIO;
	setenv("MPRDMA_WQE_BY_MMIO", "1", 1);
	env_up(&e, 16);
	unsetenv("MPRDMA_WQE_BY_MMIO");
	qp = make_qp_ex(&e, 1, IBV_QP_EX_WITH_RDMA_WRITE);
	CHECK(qp != NULL);
	if (!qp) {
		env_down(&e);
		fk.uctx_flags = 0;
		return;
	}
	qpx = ibv_qp_to_qp_ex(qp);
	CHECK_EQ(to_rts(qp), 0);
	bf = (const uint8_t *)fk_ptr(fk.uar_key) + MPR_UAR_BF;

	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, 0x77, 0x10000);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 256);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), 0);
	memcpy(&ctrl, bf, sizeof(ctrl));
	CHECK_EQ(le32toh(ctrl.bf_qpn), qp->qp_num);
	CHECK_EQ(ctrl.opcode, MPR_WQE_RDMA_WRITE);
	CHECK_EQ(le16toh(ctrl.wqe_index), 0);

	ibv_wr_start(qpx);
	for (i = 0; i < 2; i++) {
		qpx->wr_id = 2 + i;
		qpx->wr_flags = 0;
		ibv_wr_rdma_write(qpx, 0x77, 0x10000);
		ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 64);
	}
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qp->qp_num, 3));
	memcpy(&ctrl, bf, sizeof(ctrl));
	CHECK_EQ(le16toh(ctrl.wqe_index), 0); /* the window still holds the first */
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	env_down(&e);
	fk.uctx_flags = 0;
}

static void test_wr_api(void)
{
	struct ibv_sge list[5];
	struct ibv_data_buf bufs[2];
	struct mpr_wqe_ctrl *ctrl;
	struct mpr_wqe_atomic *atomic;
	struct ibv_wc wc[4];
	struct ibv_qp_ex *qpx;
	struct ibv_qp *qp;
	struct fk_qp *fqp;
	struct env e;
	uint8_t *payload;
	uint32_t qpn;
	int i;

	env_up(&e, 16);
	qp = make_qp_ex(&e, 2,
			IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
			    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	CHECK(qp != NULL);
	if (!qp) {
		env_down(&e);
		return;
	}
	qpx = ibv_qp_to_qp_ex(qp);
	CHECK(qpx != NULL);
	qpn = qp->qp_num;
	fqp = fk_qp(qpn);
	CHECK_EQ(to_rts(qp), 0);

	/* Three requests, one doorbell. */
	memcpy(e.buf, "hello", 5);
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = 0;
	ibv_wr_rdma_write(qpx, 0x77, 0x10000);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 256);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	ibv_wr_send_imm(qpx, htonl(0x01020304));
	ibv_wr_set_inline_data(qpx, e.buf, 5);
	memset(e.buf, 0, 5); /* copied already */
	qpx->wr_id = 3;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(qpx, 0x78, 0x20000, 11, 22);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf + 64, 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 3));

	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fqp, 0);
	CHECK_EQ(ctrl->opcode, MPR_WQE_RDMA_WRITE);
	CHECK_EQ(ctrl->num_ds, 2);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fqp, 1);
	CHECK_EQ(ctrl->opcode, MPR_WQE_SEND_IMM);
	CHECK_EQ(ctrl->flags,
		 MPR_WQE_F_SIGNALED | MPR_WQE_F_SOLICITED | MPR_WQE_F_INLINE);
	CHECK_EQ(ctrl->imm_data, htonl(0x01020304));
	payload = (uint8_t *)(ctrl + 1);
	CHECK_EQ(le32toh(*(uint32_t *)payload), 5);
	CHECK(memcmp(payload + 4, "hello", 5) == 0);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fqp, 2);
	atomic = (struct mpr_wqe_atomic *)((uint8_t *)(ctrl + 1) + 16);
	CHECK_EQ(ctrl->opcode, MPR_WQE_ATOMIC_CAS);
	CHECK_EQ(le64toh(atomic->compare), 11);
	CHECK_EQ(le64toh(atomic->swap_add), 22);

	fk_write_cqe(e.fcq, qpn, 2, MPR_CQE_REQ_ATOMIC_CAS, 0, 8, 0, 0, 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, 3);
	CHECK_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);

	/* Any bad request drops the whole batch: no doorbell, and the next
	 * batch starts where this one did. */
	ibv_wr_start(qpx);
	qpx->wr_id = 4;
	qpx->wr_flags = 0;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 16);
	for (i = 0; i < 5; i++)
		list[i] = (struct ibv_sge){(uintptr_t)e.buf, 8, e.mr->lkey};
	ibv_wr_rdma_write(qpx, 1, 2);
	ibv_wr_set_sge_list(qpx, 5, list); /* max_send_sge is 2 */
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 3));
	CHECK_EQ(to_mqp(qp)->dp.sq.pi, 3);

	/* Unknown send flags are an error too. */
	ibv_wr_start(qpx);
	qpx->wr_flags = IBV_SEND_IP_CSUM;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 16);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);

	/* wr_abort forgets the batch. */
	ibv_wr_start(qpx);
	qpx->wr_flags = 0;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, e.mr->lkey, (uintptr_t)e.buf, 16);
	ibv_wr_abort(qpx);
	CHECK_EQ(to_mqp(qp)->dp.sq.pi, 3);

	/* An inline list, and a request with no data setter (zero-length
	 * SEND) closed by wr_complete. */
	memcpy(e.buf, "abc", 3);
	memcpy(e.buf + 100, "defg", 4);
	bufs[0] = (struct ibv_data_buf){e.buf, 3};
	bufs[1] = (struct ibv_data_buf){e.buf + 100, 4};
	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data_list(qpx, 2, bufs);
	qpx->wr_id = 6;
	ibv_wr_send(qpx);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 5));
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fqp, 3);
	payload = (uint8_t *)(ctrl + 1);
	CHECK_EQ(le32toh(*(uint32_t *)payload), 7);
	CHECK(memcmp(payload + 4, "abcdefg", 7) == 0);
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(fqp, 4);
	CHECK_EQ(ctrl->opcode, MPR_WQE_SEND);
	CHECK_EQ(ctrl->num_ds, 0);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	env_down(&e);
}

static void test_send_queue_full(void)
{
	struct ibv_send_wr wr, *bad;
	struct env e;
	int i, posted = 0, ret = 0;

	env_up(&e, 8);
	CHECK_EQ(to_rts(e.qp), 0);
	wr = send_wr(1, IBV_WR_SEND, NULL, 0);
	for (i = 0; i < 20 && !ret; i++) {
		ret = ibv_post_send(e.qp, &wr, &bad);
		if (!ret)
			posted++;
	}
	CHECK_EQ(posted, 8);
	CHECK_EQ(ret, ENOMEM);
	CHECK(bad == &wr);
	env_down(&e);
}

static void test_destroy_qp_drops_its_cqes(void)
{
	struct ibv_wc wc[8];
	struct env e;
	struct ibv_qp *other, *fresh;
	uint32_t dead, live;

	env_up(&e, 16);
	other = make_qp(&e, e.cq, e.cq, 16, 16);
	CHECK(other != NULL);
	if (!other)
		return;
	dead = e.qp->qp_num;
	live = other->qp_num;
	CHECK(dead != live);
	CHECK_EQ(to_rts(e.qp), 0);
	CHECK_EQ(to_rts(other), 0);

	fk_write_cqe(e.fcq, dead, 0, MPR_CQE_REQ_SEND, 0, 1, 0, 0, 0);
	fk_write_cqe(e.fcq, live, 0, MPR_CQE_REQ_SEND, 0, 2, 0, 0, 0);
	fk_write_cqe(e.fcq, dead, 1, MPR_CQE_REQ_SEND, 0, 3, 0, 0, 0);
	fk_write_cqe(e.fcq, live, 1, MPR_CQE_REQ_SEND, 0, 4, 0, 0, 0);
	CHECK_EQ(ibv_destroy_qp(e.qp), 0);
	e.qp = NULL;

	/* The NIC hands the QPN out again at once. */
	fresh = make_qp(&e, e.cq, e.cq, 16, 16);
	CHECK(fresh != NULL);
	if (fresh)
		CHECK_EQ(fresh->qp_num, dead);

	CHECK_EQ(ibv_poll_cq(e.cq, 8, wc), 2);
	CHECK_EQ(wc[0].qp_num, live);
	CHECK_EQ(wc[0].byte_len, 2);
	CHECK_EQ(wc[1].qp_num, live);
	CHECK_EQ(wc[1].byte_len, 4);
	CHECK_EQ(le32toh(*(uint32_t *)fk_ptr(e.fcq->dbrec_key)), 4);

	if (fresh)
		CHECK_EQ(ibv_destroy_qp(fresh), 0);
	CHECK_EQ(ibv_destroy_qp(other), 0);
	env_down(&e);
}

static uint16_t srq_next(struct fk_srq *fsrq, uint32_t slot)
{
	return le16toh(
	    ((struct mpr_wqe_srq_next *)fk_srq_slot(fsrq, slot))->next_index);
}

/* Chains wr[0..n-1] into a list of one-SGE RECVs with wr_ids from `id`. */
static void srq_wrs(struct env *e, struct ibv_recv_wr *wr,
		    struct ibv_sge *sge, int n, uint64_t id)
{
	int i;

	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)e->buf + 64 * (size_t)i;
		sge[i].length = 64;
		sge[i].lkey = e->mr->lkey;
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = id + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
}

/*
 * A shared receive queue: the ring's list as the NIC expects it after
 * CREATE_SRQ, one doorbell per list of RECVs carrying the count posted, QPs
 * of the SRQ without a receive queue (post_recv is EINVAL), completions of
 * two QPs in any order naming their WQEs and linking their slots after the
 * tail, a full SRQ (ENOMEM) and too many SGEs (EINVAL) with *bad_wr set,
 * destroy refused while a QP uses the SRQ, an unpolled receive of a
 * destroyed QP giving its slot back, the limit through modify and query.
 */
static void test_srq(void)
{
	struct ibv_srq_init_attr sattr = {.attr = {.max_wr = 6, .max_sge = 2}};
	struct ibv_srq_attr sa = {};
	struct ibv_qp_init_attr qattr = {};
	struct ibv_recv_wr wr[8], *bad;
	struct ibv_sge sge[8];
	struct ibv_wc wc[8];
	struct fk_srq *fsrq;
	struct ibv_qp *q1, *q2;
	struct ibv_srq *srq;
	struct env e;
	uint32_t i;

	env_up(&e, 16);
	srq = ibv_create_srq(e.pd, &sattr);
	CHECK(srq != NULL);
	if (!srq) {
		env_down(&e);
		return;
	}
	fsrq = fk_srq(srq->handle);
	/* 8 slots of 64 bytes: 7 WQEs (the tail stays free) of 3 SGEs. */
	CHECK_EQ(sattr.attr.max_wr, 7);
	CHECK_EQ(sattr.attr.max_sge, 3);
	for (i = 0; i < 8; i++)
		CHECK_EQ(srq_next(fsrq, i), (i + 1) & 7);

	qattr.send_cq = e.cq;
	qattr.recv_cq = e.cq;
	qattr.srq = srq;
	qattr.qp_type = IBV_QPT_RC;
	qattr.cap.max_send_wr = 4;
	qattr.cap.max_send_sge = 1;
	qattr.cap.max_recv_wr = 100; /* ignored with an SRQ */
	qattr.cap.max_recv_sge = 5;
	q1 = ibv_create_qp(e.pd, &qattr);
	CHECK(q1 != NULL);
	CHECK_EQ(qattr.cap.max_recv_wr, 0);
	CHECK_EQ(qattr.cap.max_recv_sge, 0);
	q2 = ibv_create_qp(e.pd, &qattr);
	CHECK(q2 != NULL);
	if (!q1 || !q2)
		abort();
	CHECK(q1->srq == srq);
	CHECK_EQ(to_rts(q1), 0);
	CHECK_EQ(to_rts(q2), 0);

	/* A list of three: slots 0, 1, 2 and one doorbell saying 3. */
	srq_wrs(&e, wr, sge, 3, 100);
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), 0);
	CHECK_EQ(fk_doorbell(MPR_UAR_SRQ_DB), MPR_SRQ_DB(fsrq->srqn, 3));
	for (i = 0; i < 3; i++) {
		const struct mpr_wqe_data *d =
		    (const void *)(fk_srq_slot(fsrq, i) +
				   sizeof(struct mpr_wqe_srq_next));

		CHECK_EQ(le64toh(d[0].addr), (uintptr_t)e.buf + 64 * i);
		CHECK_EQ(le32toh(d[0].byte_count), 64);
		CHECK_EQ(le32toh(d[0].lkey), e.mr->lkey);
		CHECK_EQ(le32toh(d[1].lkey), MPR_LKEY_END);
	}

	/* RECVs of a QP of an SRQ go to the SRQ. */
	wr[0].next = NULL;
	bad = NULL;
	CHECK_EQ(ibv_post_recv(q1, wr, &bad), EINVAL);
	CHECK(bad == wr);

	/* Slot 2 completes on q2 before slot 0 on q1: both slots go after
	 * the tail (7 -> 2 -> 0). */
	fk_write_cqe(e.fcq, q2->qp_num, 2, MPR_CQE_RESP_RECV, 0, 10, 0, 0, 0);
	fk_write_cqe(e.fcq, q1->qp_num, 0, MPR_CQE_RESP_RECV, 0, 11, 0, 0, 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 8, wc), 2);
	CHECK_EQ(wc[0].wr_id, 102);
	CHECK_EQ(wc[0].qp_num, q2->qp_num);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 10);
	CHECK_EQ(wc[1].wr_id, 100);
	CHECK_EQ(wc[1].qp_num, q1->qp_num);
	CHECK_EQ(srq_next(fsrq, 7), 2);
	CHECK_EQ(srq_next(fsrq, 2), 0);

	/* Too many SGEs: EINVAL, nothing posted, no doorbell. */
	srq_wrs(&e, wr, sge, 1, 300);
	wr[0].num_sge = 4;
	bad = NULL;
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), EINVAL);
	CHECK(bad == wr);
	CHECK_EQ(fk_doorbell(MPR_UAR_SRQ_DB), MPR_SRQ_DB(fsrq->srqn, 3));

	/* Six fit (slot 1 is still out): slots 3..7, then 2. The seventh is
	 * ENOMEM; the six are posted, with one doorbell. */
	srq_wrs(&e, wr, sge, 7, 200);
	bad = NULL;
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), ENOMEM);
	CHECK(bad == &wr[6]);
	CHECK_EQ(fk_doorbell(MPR_UAR_SRQ_DB), MPR_SRQ_DB(fsrq->srqn, 9));
	fk_write_cqe(e.fcq, q2->qp_num, 2, MPR_CQE_RESP_RECV, 0, 12, 0, 0, 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 205);

	/* In use: refused, and still usable. */
	CHECK_EQ(ibv_destroy_srq(srq), EBUSY);

	/* q1 goes with a receive completion unpolled (slot 2 again, posted
	 * into below): its slot returns to the list. Head and tail meet at
	 * slot 0 once one more is posted. */
	srq_wrs(&e, wr, sge, 1, 400);
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), 0);
	fk_write_cqe(e.fcq, q1->qp_num, 0, MPR_CQE_RESP_RECV, 0, 13, 0, 0, 0);
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), ENOMEM);
	CHECK_EQ(ibv_destroy_qp(q1), 0);
	CHECK_EQ(ibv_post_srq_recv(srq, wr, &bad), 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 8, wc), 0);

	/* The limit is the kernel's; a resize is refused. */
	sa.srq_limit = 3;
	CHECK_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
	memset(&sa, 0, sizeof(sa));
	CHECK_EQ(ibv_query_srq(srq, &sa), 0);
	CHECK_EQ(sa.srq_limit, 3);
	CHECK_EQ(sa.max_wr, 7);
	sa.max_wr = 64;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) != 0);

	CHECK_EQ(ibv_destroy_qp(q2), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	env_down(&e);
}

static void test_reset_restarts_queues(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc[4];
	struct mpr_wqe_ctrl *ctrl;
	struct env e;
	uint32_t qpn;

	env_up(&e, 16);
	qpn = e.qp->qp_num;
	CHECK_EQ(to_rts(e.qp), 0);
	wr = send_wr(7, IBV_WR_SEND, NULL, IBV_SEND_SIGNALED);
	CHECK_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
	CHECK_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
	fk_write_cqe(e.fcq, qpn, 0, MPR_CQE_REQ_SEND, 0, 0, 0, 0, 0);

	CHECK_EQ(modify_state(e.qp, IBV_QPS_RESET), 0);
	CHECK_EQ(e.qp->state, IBV_QPS_RESET);
	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 0); /* the stale CQE is gone */
	CHECK_EQ(ibv_post_send(e.qp, &wr, &bad), EINVAL);

	CHECK_EQ(modify_state(e.qp, IBV_QPS_INIT), 0);
	wr.wr_id = 8;
	CHECK_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
	/* Back at index 0, as the NIC expects after RESET. */
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB), MPR_SQ_DB(qpn, 1));
	ctrl = (struct mpr_wqe_ctrl *)sq_slot(e.fqp, 0);
	CHECK_EQ(le16toh(ctrl->wqe_index), 0);
	fk_write_cqe(e.fcq, qpn, 0, MPR_CQE_REQ_SEND, 0, 0, 0, 0, 0);
	CHECK_EQ(ibv_poll_cq(e.cq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, 8);

	/* A failed MODIFY_QP changes nothing in the provider. */
	fk.modify_qp_errno = EINVAL;
	CHECK_EQ(modify_state(e.qp, IBV_QPS_RESET), EINVAL);
	fk.modify_qp_errno = 0;
	CHECK_EQ(to_mqp(e.qp)->dp.state, MPR_DP_QPS_INIT);
	CHECK_EQ(to_mqp(e.qp)->dp.sq.pi, 1);
	env_down(&e);
}

struct poster {
	struct ibv_qp *qp;
	int n;
	int failures;
	atomic_int *go;
};

static void *post_many(void *arg)
{
	struct poster *p = arg;
	struct ibv_send_wr wr = send_wr(0, IBV_WR_SEND, NULL, 0), *bad;
	int i;

	while (!atomic_load(p->go))
		;
	for (i = 0; i < p->n; i++) {
		wr.wr_id = (uint64_t)(uintptr_t)p + (uint64_t)i;
		if (ibv_post_send(p->qp, &wr, &bad))
			p->failures++;
	}
	return NULL;
}

static void test_concurrent_posts_are_serialised(void)
{
	struct poster p[2];
	pthread_t t[2];
	atomic_int go = 0;
	struct ibv_send_wr wr = send_wr(0, IBV_WR_SEND, NULL, 0), *bad;
	struct env e;
	uint32_t i, bad_index = 0;

	env_up(&e, 1024);
	CHECK_EQ(to_rts(e.qp), 0);
	for (i = 0; i < 2; i++) {
		p[i] = (struct poster){e.qp, 512, 0, &go};
		pthread_create(&t[i], NULL, post_many, &p[i]);
	}
	atomic_store(&go, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(p[0].failures + p[1].failures, 0);
	CHECK_EQ(to_mqp(e.qp)->dp.sq.pi, 1024);
	CHECK_EQ(fk_doorbell(MPR_UAR_SQ_DB) >> MPR_DB_PI_SHIFT, 1024);
	for (i = 0; i < 1024; i++) {
		struct mpr_wqe_ctrl *ctrl = (void *)sq_slot(e.fqp, i);

		if (le16toh(ctrl->wqe_index) != i ||
		    ctrl->opcode != MPR_WQE_SEND)
			bad_index++;
	}
	CHECK_EQ(bad_index, 0);
	CHECK_EQ(ibv_post_send(e.qp, &wr, &bad), ENOMEM);
	env_down(&e);
}

static void test_close_releases_everything(void)
{
	struct env e;

	env_up(&e, 16);
	env_down(&e);
	CHECK_EQ(atomic_load(&vdev->refcount), 1);
}

/* ------------------------------------------------------------------ */

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
    {"context_and_abi_check", test_context_and_abi_check},
    {"create_qp_caps_and_refusals", test_create_qp_caps_and_refusals},
    {"qp_transport_from_environment", test_qp_transport_from_environment},
    {"wqe_by_mmio", test_wqe_by_mmio},
    {"inline_recv", test_inline_recv},
    {"wr_api_wqe_by_mmio", test_wr_api_wqe_by_mmio},
    {"post_send_list_one_doorbell", test_post_send_list_one_doorbell},
    {"poll_translates_completions", test_poll_translates_completions},
    {"ud_address_handles", test_ud_address_handles},
    {"wr_api", test_wr_api},
    {"send_queue_full", test_send_queue_full},
    {"destroy_qp_drops_its_cqes", test_destroy_qp_drops_its_cqes},
    {"srq", test_srq},
    {"reset_restarts_queues", test_reset_restarts_queues},
    {"concurrent_posts_are_serialised", test_concurrent_posts_are_serialised},
    {"close_releases_everything", test_close_releases_everything},
};

int main(int argc, char **argv)
{
	struct verbs_sysfs_dev sysfs = {};
	int passed = 0, failed = 0;
	size_t i;

	/* What libibverbs does for a matched device, minus sysfs. */
	vdev = verbs_provider_mprdma.alloc_device(&sysfs);
	if (!vdev)
		return 2;
	vdev->ops = &verbs_provider_mprdma;
	atomic_init(&vdev->refcount, 1);
	vdev->device.node_type = IBV_NODE_CA;
	vdev->device.transport_type = IBV_TRANSPORT_IB;
	snprintf(vdev->device.name, sizeof(vdev->device.name), "mprdma0");

	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		if (fk_init()) {
			perror("fake kernel");
			return 2;
		}
		test_failed = 0;
		tests[i].fn();
		printf("%s %s\n", test_failed ? "FAILED" : "ok    ",
		       tests[i].name);
		if (test_failed)
			failed++;
		else
			passed++;
	}
	verbs_provider_mprdma.uninit_device(vdev);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
