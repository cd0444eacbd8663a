// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mprdma rdma-core provider: device matching, device and context life cycle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mprdma.h"
#include "mprdma_xlate.h"

/*
 * The kernel driver registers with RDMA_DRIVER_UNKNOWN (there is no
 * upstream driver id for this device), so libibverbs cannot match it by
 * driver id and falls back to the PCI modalias of the device's parent.
 */
/* Tables keep the kernel's indentation. */
/* clang-format off */
static const struct verbs_match_ent mprdma_match_table[] = {
	VERBS_PCI_MATCH(MPR_PCI_VENDOR_ID, MPR_PCI_DEVICE_ID, NULL),
	{},
};
/* clang-format on */

static void mprdma_free_context(struct ibv_context *ibctx)
{
	struct mprdma_context *ctx = to_mctx(ibctx);

	munmap(ctx->uar, ctx->uar_map_len);
	pthread_spin_destroy(&ctx->bf_lock);
	pthread_spin_destroy(&ctx->qp_table_lock);
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
}

/* Verbs left out fall back to libibverbs' defaults, which fail with
 * EOPNOTSUPP: XRC SRQs (create_srq_ex), memory windows, XRC, flows, extended CQs, resize_cq,
 * rereg_mr, ... */
/* clang-format off */
static const struct verbs_context_ops mprdma_ctx_ops = {
	.query_device_ex = mprdma_query_device_ex,
	.query_port = mprdma_query_port,
	.alloc_pd = mprdma_alloc_pd,
	.dealloc_pd = mprdma_dealloc_pd,
	.reg_mr = mprdma_reg_mr,
	.dereg_mr = mprdma_dereg_mr,
	.create_ah = mprdma_create_ah,
	.create_cq = mprdma_create_cq,
	.poll_cq = mprdma_poll_cq,
	.req_notify_cq = mprdma_req_notify_cq,
	.cq_event = mprdma_cq_event,
	.destroy_cq = mprdma_destroy_cq,
	.create_qp = mprdma_create_qp,
	.create_qp_ex = mprdma_create_qp_ex,
	.create_srq = mprdma_create_srq,
	.query_qp = mprdma_query_qp,
	.modify_qp = mprdma_modify_qp,
	.destroy_ah = mprdma_destroy_ah,
	.destroy_qp = mprdma_destroy_qp,
	.destroy_srq = mprdma_destroy_srq,
	.modify_srq = mprdma_modify_srq,
	.post_send = mprdma_post_send,
	.post_recv = mprdma_post_recv,
	.post_srq_recv = mprdma_post_srq_recv,
	.query_srq = mprdma_query_srq,
	.free_context = mprdma_free_context,
};
/* clang-format on */

static struct verbs_context *
mprdma_alloc_context(struct ibv_device *ibdev, int cmd_fd, void *private_data)
{
	struct mprdma_device *dev = to_mdev(ibdev);
	struct mprdma_alloc_ucontext_resp resp = {};
	struct mprdma_alloc_ucontext cmd = {};
	struct mprdma_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibvctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	ctx->page_size = dev->page_size;

	if (ibv_cmd_get_context(&ctx->ibvctx, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp)))
		goto err_free;

	/* A driver of another ABI lays its responses out differently: every
	 * mmap key and size read below would be garbage. */
	if (resp.drv_payload.abi_version != MPR_UVERBS_ABI_VERSION) {
		verbs_err(&ctx->ibvctx,
			  "mprdma: kernel ABI %u, provider ABI %u\n",
			  resp.drv_payload.abi_version, MPR_UVERBS_ABI_VERSION);
		errno = EPROTONOSUPPORT;
		goto err_free;
	}
	ctx->uar_index = resp.drv_payload.uar_index;
	ctx->max_inline = resp.drv_payload.max_inline;
	ctx->max_sge = resp.drv_payload.max_sge;
	ctx->max_qp_wr = resp.drv_payload.max_qp_wr;
	ctx->max_cqe = resp.drv_payload.max_cqe;
	ctx->uctx_flags = resp.drv_payload.flags;
	ctx->cq_log_cqe_size =
	    mprdma_inline_recv_slot(getenv("MPRDMA_INLINE_RECV"));
	if (ctx->cq_log_cqe_size < 0)
		fprintf(stderr,
			"mprdma: MPRDMA_INLINE_RECV=%s is not a CQE size "
			"(0, 64 or 128): CQs will not be created\n",
			getenv("MPRDMA_INLINE_RECV"));
	ctx->qp_transport =
	    mpr_transport_of_name(getenv("MPRDMA_QP_TRANSPORT"));
	if (ctx->qp_transport < 0)
		fprintf(stderr,
			"mprdma: MPRDMA_QP_TRANSPORT=%s names no transport "
			"(default, gbn, dcqcn, mprdma or irn): RC QPs will "
			"not be created\n",
			getenv("MPRDMA_QP_TRANSPORT"));

	/* Doorbells are stores only: the page is mapped write-only. */
	ctx->uar =
	    mprdma_mmap(ctx, MPR_UAR_PAGE_SIZE, PROT_WRITE,
			resp.drv_payload.uar_mmap_key, &ctx->uar_map_len);
	if (!ctx->uar) {
		verbs_err(&ctx->ibvctx, "mprdma: cannot map the UAR page: %s\n",
			  strerror(errno));
		goto err_free;
	}

	if (pthread_spin_init(&ctx->qp_table_lock, PTHREAD_PROCESS_PRIVATE)) {
		errno = ENOMEM;
		goto err_unmap;
	}
	if (pthread_spin_init(&ctx->bf_lock, PTHREAD_PROCESS_PRIVATE)) {
		pthread_spin_destroy(&ctx->qp_table_lock);
		errno = ENOMEM;
		goto err_unmap;
	}
	mprdma_init_dp_ops(ctx);
	verbs_set_ops(&ctx->ibvctx, &mprdma_ctx_ops);
	return &ctx->ibvctx;

err_unmap:
	munmap(ctx->uar, ctx->uar_map_len);
err_free:
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *
mprdma_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct mprdma_device *dev;
	long page_size = sysconf(_SC_PAGESIZE);

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	dev->page_size = page_size > 0 ? (size_t)page_size : MPR_PAGE_SIZE;
	return &dev->vdev;
}

static void mprdma_uninit_device(struct verbs_device *vdev)
{
	free(to_mdev(&vdev->device));
}

/*
 * The uverbs abi_version sysfs file shows the driver's uverbs_abi_ver:
 * MPR_UVERBS_ABI_VERSION when the kernel driver sets it, 0 when it leaves
 * it unset. Both are accepted here; the authoritative check is the
 * abi_version of the alloc_ucontext response.
 */
/* clang-format off */
static const struct verbs_device_ops mprdma_dev_ops = {
	.name = "mprdma",
	.match_min_abi_version = 0,
	.match_max_abi_version = MPR_UVERBS_ABI_VERSION,
	.match_table = mprdma_match_table,
	.alloc_device = mprdma_alloc_device,
	.uninit_device = mprdma_uninit_device,
	.alloc_context = mprdma_alloc_context,
};
/* clang-format on */

PROVIDER_DRIVER(mprdma, mprdma_dev_ops);
