/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * uverbs command wrappers of the mprdma provider.
 *
 * The driver-specific payloads are those of <mprdma/abi.h>, the one
 * definition of the driver/provider ABI; this file only glues them behind
 * the core uverbs structures the way libibverbs' ibv_cmd_*() helpers expect
 * (DECLARE_DRV_CMD also asserts that no padding creeps in between the core
 * part and ours).
 */
#ifndef MPRDMA_PROVIDER_ABI_H
#define MPRDMA_PROVIDER_ABI_H

#include <infiniband/kern-abi.h>

#include <mprdma/abi.h>

/*
 * DECLARE_DRV_CMD places a "tagless" copy of the payload beside the tagged
 * one, normally generated from the kernel headers. Ours are not part of
 * rdma-core's kernel-headers, so the tagless copy is left empty and the code
 * reads everything through .drv_payload instead: one layout, no duplicate.
 */
/* clang-format off */
#define _STRUCT_mpr_alloc_ucontext_resp struct {}
#define _STRUCT_mpr_create_cq_cmd struct {}
#define _STRUCT_mpr_create_cq_resp struct {}
#define _STRUCT_mpr_create_qp_cmd struct {}
#define _STRUCT_mpr_create_qp_resp struct {}
#define _STRUCT_mpr_create_ah_resp struct {}
#define _STRUCT_mpr_create_srq_resp struct {}
/* clang-format on */

/* alloc_ucontext, create_ah and create_srq take no driver input;
 * create_cq gives the CQE slot size, create_qp the QP's transport engine. */
DECLARE_DRV_CMD(mprdma_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT, empty,
		mpr_alloc_ucontext_resp);
DECLARE_DRV_CMD(mprdma_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		mpr_create_cq_cmd, mpr_create_cq_resp);
DECLARE_DRV_CMD(mprdma_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		mpr_create_qp_cmd, mpr_create_qp_resp);
DECLARE_DRV_CMD(mprdma_create_ah, IB_USER_VERBS_CMD_CREATE_AH, empty,
		mpr_create_ah_resp);
DECLARE_DRV_CMD(mprdma_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ, empty,
		mpr_create_srq_resp);

#endif /* MPRDMA_PROVIDER_ABI_H */
