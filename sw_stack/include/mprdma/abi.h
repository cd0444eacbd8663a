/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * mprdma driver/provider ABI: the udata structures that the rdma-core
 * provider (sw_stack/provider) and the kernel driver (guest_driver)
 * exchange through uverbs. The one definition of that ABI.
 *
 * Queue memory (SQ, RQ, SRQ, CQ rings and the CQ consumer-index record) is
 * allocated by the kernel driver as DMA-coherent, physically contiguous
 * memory (the NIC's contexts take one base address per ring) and mapped
 * into the process with mmap() on the uverbs file at the offset given in
 * the response ("mmap key"). The UAR page is mapped the same way.
 */
#ifndef MPRDMA_ABI_H
#define MPRDMA_ABI_H

#include <linux/types.h>

/* Bumped on any incompatible change; the provider refuses another one. */
#define MPR_UVERBS_ABI_VERSION 1

/* alloc_ucontext: no input. */
struct mpr_alloc_ucontext_resp {
	__u32 abi_version;   /* MPR_UVERBS_ABI_VERSION */
	__u32 uar_index;     /* this context's UAR page */
	__aligned_u64 uar_mmap_key; /* mmap offset of the UAR page (4 KiB) */
	__u32 max_inline;    /* bytes */
	__u32 max_sge;
	__u32 max_qp_wr;
	__u32 max_cqe;
	__u32 flags;         /* MPR_UCTX_F_*; an older driver leaves it 0 */
	__u32 reserved;
};

/* mpr_alloc_ucontext_resp.flags: what the device lets user space do. */
enum {
	/* Send WQEs may be written into the UAR page's MPR_UAR_BF window
	 * (CAPS.WQE_BY_MMIO) instead of ringing the SQ doorbell. */
	MPR_UCTX_F_WQE_BY_MMIO = 1 << 0,
};

/*
 * create_cq input: the CQE slot size and flags of CREATE_CQ (struct
 * mpr_cmd_create_cq in <mprdma/hw.h>): log_cqe_size 0 or 5 (32-byte slots),
 * 6 or 7 (64 or 128 bytes, room for inline receive data); flags
 * MPR_CQ_F_INLINE_RECV. A provider that sends none gets 32-byte slots.
 */
struct mpr_create_cq_cmd {
	__u8 log_cqe_size;
	__u8 flags;
	__u8 reserved[6]; /* must be zero */
};

struct mpr_create_cq_resp {
	__u32 cqn;
	__u32 log_size;               /* ring of 2^log_size struct mpr_cqe */
	__aligned_u64 ring_mmap_key;  /* mmap offset of the ring */
	__aligned_u64 dbrec_mmap_key; /* mmap offset of the consumer-index record page */
	__u32 ring_bytes;
	__u32 reserved;
};

/*
 * create_qp input: the QP's transport engine, enum mpr_transport of
 * <mprdma/hw.h> (0 = the NIC's default engine; the NIC's CAPS register says
 * which others it offers; RC QPs only). A provider that sends no input, or a
 * shorter one, gets 0 for the missing fields.
 */
struct mpr_create_qp_cmd {
	__u8 transport;
	__u8 reserved[7]; /* must be zero */
};

/* create_qp response: sizes come from the standard command's caps. */
struct mpr_create_qp_resp {
	__u32 qpn;
	__u8 sq_log_size;
	__u8 sq_log_stride;
	__u8 rq_log_size;
	__u8 rq_log_stride;
	__aligned_u64 sq_mmap_key;
	__aligned_u64 rq_mmap_key;
	__u32 sq_bytes;
	__u32 rq_bytes;
	__u32 max_inline;  /* the inline size granted */
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 reserved;
};

/*
 * create_srq: no driver input. The SRQ's ring: 2^log_size slots of
 * 2^log_stride bytes, each a struct mpr_wqe_srq_next followed by up to
 * max_sge struct mpr_wqe_data (<mprdma/hw.h>). The provider keeps it as a
 * linked list (mpr_dp_srq_init() and the rest of <mprdma/dp.h>) and rings
 * the doorbell MPR_UAR_SRQ_DB on its context's UAR page; 2^log_size - 1
 * WQEs fit. A QP created with an SRQ has no receive ring: its create_qp
 * response has rq_log_size, rq_log_stride, rq_mmap_key, rq_bytes and
 * max_recv_sge 0.
 */
struct mpr_create_srq_resp {
	__u32 srqn;
	__u8 log_size;
	__u8 log_stride;
	__u8 reserved0[2];
	__aligned_u64 mmap_key; /* mmap offset of the ring */
	__u32 bytes;            /* the ring's bytes */
	__u32 max_sge;          /* SGEs a WQE may carry (granted) */
};

/* create_ah (UD): the destination MAC ib_core resolved for the AH. */
struct mpr_create_ah_resp {
	__u8 dmac[6];
	__u8 reserved[2];
};

#endif /* MPRDMA_ABI_H */
