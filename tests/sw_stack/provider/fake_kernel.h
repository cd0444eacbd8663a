/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * A fake mprdma kernel driver for testing the rdma-core provider without a
 * device: it replaces libibverbs' ibv_cmd_*() helpers the provider calls
 * (the test executable's definitions win over libibverbs.so at link time)
 * and answers them the way guest_driver does per <mprdma/abi.h>. Queue
 * memory and the UAR page live in one memfd that stands for the uverbs
 * file: mmap keys are offsets in it, and the test reads doorbells and WQEs
 * and writes CQEs through its own mapping, as the NIC would.
 */
#ifndef MPRDMA_FAKE_KERNEL_H
#define MPRDMA_FAKE_KERNEL_H

#include <stdint.h>

#include <mprdma/hw.h>

#define FK_MAX_OBJS 64

struct fk_cq {
	int live;
	uint32_t cqn;
	uint32_t log_size;
	uint64_t ring_key;
	uint64_t dbrec_key;
	uint32_t pi; /* the NIC's producer index */
	/* struct mpr_create_cq_cmd as the provider sent it */
	uint8_t log_cqe_size, flags;
};

struct fk_qp {
	int live;
	uint32_t qpn;
	uint32_t sq_log_size, sq_log_stride, rq_log_size, rq_log_stride;
	uint64_t sq_key, rq_key;
	uint8_t transport; /* struct mpr_create_qp_cmd as the provider sent it */
	int srq;	   /* index in fk.srqs + 1 of its SRQ, 0 if none */
};

struct fk_srq {
	int live;
	uint32_t srqn;
	uint32_t log_size, log_stride, max_sge;
	uint64_t ring_key;
	uint32_t limit;	  /* armed limit (MODIFY_SRQ) */
	uint32_t num_qps; /* QPs attached: DESTROY_SRQ is EBUSY meanwhile */
};

struct fake_kernel {
	int fd;	      /* the memfd standing for the uverbs file */
	uint8_t *mem; /* the test's ("the NIC's") view of it */
	uint64_t size;
	uint64_t used;	      /* bump allocator, page-aligned */
	uint32_t abi_version; /* what alloc_ucontext answers */
	uint32_t uctx_flags;  /* its flags (MPR_UCTX_F_*) */
	uint64_t uar_key;
	int modify_qp_errno; /* non-zero: MODIFY_QP fails with it */
	int modify_calls;
	int destroyed_qps;
	int destroyed_cqs;
	int live_ahs;        /* create_ah minus destroy_ah */
	uint8_t ah_dmac[6];  /* what create_ah answers as the resolved MAC */
	struct fk_cq cqs[FK_MAX_OBJS];
	struct fk_qp qps[FK_MAX_OBJS];
	struct fk_srq srqs[FK_MAX_OBJS];
};

extern struct fake_kernel fk;

/* Creates the memfd; returns 0 or -1. */
int fk_init(void);
void *fk_ptr(uint64_t key);
uint64_t fk_doorbell(uint32_t off);
struct fk_cq *fk_cq(uint32_t cqn);
struct fk_qp *fk_qp(uint32_t qpn);
struct fk_srq *fk_srq(uint32_t srqn);
/* The slot `slot` of the SRQ's ring. */
uint8_t *fk_srq_slot(struct fk_srq *srq, uint32_t slot);
/* The NIC writes the next CQE of `cq`. */
void fk_write_cqe(struct fk_cq *cq, uint32_t qpn, uint16_t wqe_index,
		  uint8_t opcode, uint8_t status, uint32_t byte_len,
		  uint8_t flags, uint32_t imm_be, uint8_t syndrome);
/* The slot of CQE `idx` (its inline data area starts here), by the CQ's
 * slot size. */
uint8_t *fk_cqe_slot(struct fk_cq *cq, uint32_t idx);

#endif /* MPRDMA_FAKE_KERNEL_H */
