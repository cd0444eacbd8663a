/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * mprdma hardware interface: the one definition of every structure the NIC
 * and the host software exchange through host memory or MMIO.
 *
 * Included by the SystemC model (vp/nic), the modeled host and the data-path
 * library (sw_stack/dp), the Linux driver (guest_driver) and the rdma-core
 * provider. Register offsets live in the generated <mprdma/regs.h>; this file
 * holds queue entries, doorbells, admin commands and context layouts.
 *
 * Conventions (see docs/host-interface.md):
 *  - every multi-byte field is little-endian;
 *  - structures are naturally aligned, their sizes are asserted below;
 *  - "owner" bits use the phase convention: the entry at ring position
 *    idx is valid when its owner bit equals MPR_PHASE(idx, log_size);
 *  - reserved fields must be written as zero and are ignored on read.
 */
#ifndef MPRDMA_HW_H
#define MPRDMA_HW_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/build_bug.h>
#define MPR_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#include <stdint.h>
#ifdef __cplusplus
#define MPR_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define MPR_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
#endif

/* ---------------------------------------------------------------------- */
/* Identification                                                          */
/* ---------------------------------------------------------------------- */
#define MPR_PCI_VENDOR_ID 0xC0DE /* unassigned; virtual device only */
#define MPR_PCI_DEVICE_ID 0x4D50 /* "MP" */
#define MPR_IF_VERSION_MAJOR 1
#define MPR_IF_VERSION_MINOR 0

#define MPR_PAGE_SHIFT 12
#define MPR_PAGE_SIZE (1u << MPR_PAGE_SHIFT)
/* Largest message (IB: 2^31 bytes); QUERY_DEVICE's max_msg_size. A request
 * longer than this is answered with NAK invalid request. */
#define MPR_MAX_MSG_SIZE 0x80000000u

/* Phase bit expected at ring position idx of a ring of 2^log_size entries. */
#define MPR_PHASE(idx, log_size) ((uint8_t)((((idx) >> (log_size)) & 1u) ^ 1u))

/* ---------------------------------------------------------------------- */
/* BAR2: user access region (UAR) pages                                     */
/* ---------------------------------------------------------------------- */
/* BAR2 is an array of 4 KiB UAR pages. Page 0 belongs to the kernel driver;
 * each user context gets its own page. A doorbell naming a QP or CQ that is
 * not bound to the page it was written to is dropped and counted (the NIC
 * raises no error: a process must not be able to disturb another one). */
#define MPR_UAR_PAGE_SIZE 4096u
#define MPR_UAR_SQ_DB 0x000u /* 64-bit write, see MPR_SQ_DB_* */
#define MPR_UAR_RQ_DB 0x008u /* 64-bit write, see MPR_RQ_DB_* */
#define MPR_UAR_CQ_DB 0x010u /* 64-bit write, see MPR_CQ_DB_* */
#define MPR_UAR_EQ_DB 0x018u /* 64-bit write, kernel page only */
#define MPR_UAR_SRQ_DB 0x020u /* 64-bit write, see MPR_SRQ_DB */
#define MPR_UAR_BF 0x100u    /* WQE-by-MMIO window, see below */
#define MPR_UAR_BF_SIZE 256u

/* WQE by MMIO (BlueFlame-style, CAPS.WQE_BY_MMIO): instead of ringing the SQ
 * doorbell, software writes the whole send WQE (ctrl first, then its num_ds
 * segments, padded to 64 bytes) into the window at MPR_UAR_BF of the QP's UAR
 * page, with write-combining stores, and ctrl.bf_qpn = the QP number. The
 * WQE must also be in the send ring at its index (as always). The NIC takes
 * the WQE from the window once all its bytes have arrived, without a DMA
 * read, and treats it as an SQ doorbell with producer index wqe_index + 1;
 * if it is not the next WQE the NIC would fetch, it is a plain doorbell and
 * the NIC reads the ring. A WQE larger than the window cannot be sent so. */

/* SQ/RQ doorbell: qpn in bits 23:0, new producer index in bits 47:32. */
#define MPR_DB_QPN_MASK 0x00ffffffull
#define MPR_DB_PI_SHIFT 32
#define MPR_DB_PI_MASK 0xffffull
#define MPR_SQ_DB(qpn, pi) \
	(((uint64_t)(qpn) & MPR_DB_QPN_MASK) | (((uint64_t)(pi) & MPR_DB_PI_MASK) << MPR_DB_PI_SHIFT))
#define MPR_RQ_DB(qpn, pi) MPR_SQ_DB(qpn, pi)
/* SRQ doorbell: srqn in bits 23:0, in bits 47:32 the count of WQEs posted
 * to the SRQ since it was created (free-running, wraps at 2^16). */
#define MPR_SRQ_DB(srqn, count) MPR_SQ_DB(srqn, count)

/* CQ doorbell: cqn in 23:0, command in 27:24, consumer index in 55:32. */
#define MPR_CQ_DB_CMD_SHIFT 24
#define MPR_CQ_DB_CMD_MASK 0xfull
#define MPR_CQ_DB_CI_SHIFT 32
#define MPR_CQ_DB_CI_MASK 0xffffffull
enum mpr_cq_db_cmd {
	MPR_CQ_DB_SET_CI = 0,        /* only report the consumer index */
	MPR_CQ_DB_ARM_NEXT = 1,      /* event on the next completion */
	MPR_CQ_DB_ARM_SOLICITED = 2, /* event on the next solicited or error completion */
};
#define MPR_CQ_DB(cqn, cmd, ci)                                              \
	(((uint64_t)(cqn) & MPR_DB_QPN_MASK) |                               \
	 (((uint64_t)(cmd) & MPR_CQ_DB_CMD_MASK) << MPR_CQ_DB_CMD_SHIFT) |   \
	 (((uint64_t)(ci) & MPR_CQ_DB_CI_MASK) << MPR_CQ_DB_CI_SHIFT))

/* EQ doorbell: eqn in 23:0, bit 24 re-arms the interrupt, ci in 55:32. */
#define MPR_EQ_DB_ARM (1ull << 24)
#define MPR_EQ_DB(eqn, arm, ci)                                      \
	(((uint64_t)(eqn) & MPR_DB_QPN_MASK) | ((arm) ? MPR_EQ_DB_ARM : 0) | \
	 (((uint64_t)(ci) & MPR_CQ_DB_CI_MASK) << MPR_CQ_DB_CI_SHIFT))

/* ---------------------------------------------------------------------- */
/* Send queue WQE                                                           */
/* ---------------------------------------------------------------------- */
/* A send WQE occupies exactly one slot of 2^sq_log_stride bytes (64..1024).
 * It is a control segment followed by num_ds 16-byte segments, in this order:
 *   UD address seg.  (UD QPs: every WQE, struct mpr_wqe_ud, 2 segments)
 *   remote segment   (RDMA WRITE[_IMM], RDMA READ, atomics)
 *   atomic segment   (CAS, FETCH_ADD)
 *   data segments    (or one inline block when MPR_WQE_F_INLINE is set)
 * An inline block is a 4-byte length followed by the bytes, padded to a
 * multiple of 16 bytes; every 16 bytes count as one segment. */
enum mpr_wqe_opcode {
	MPR_WQE_NOP = 0x00,
	MPR_WQE_SEND = 0x01,
	MPR_WQE_SEND_IMM = 0x02,
	MPR_WQE_RDMA_WRITE = 0x03,
	MPR_WQE_RDMA_WRITE_IMM = 0x04,
	MPR_WQE_RDMA_READ = 0x05,
	MPR_WQE_ATOMIC_CAS = 0x06,
	MPR_WQE_ATOMIC_FA = 0x07,
	MPR_WQE_OPCODE_MAX = 0x07,
};

#define MPR_WQE_F_SIGNALED (1u << 0)  /* write a CQE when the WQE completes */
#define MPR_WQE_F_FENCE (1u << 1)     /* wait for earlier READ/atomics first */
#define MPR_WQE_F_SOLICITED (1u << 2) /* set the SE bit on the last packet */
#define MPR_WQE_F_INLINE (1u << 3)    /* payload follows in the WQE */
#define MPR_WQE_F_SYNC (1u << 4)      /* MP-RDMA synchronise: see transport docs */
#define MPR_WQE_F_ALL 0x1fu

struct mpr_wqe_ctrl {
	uint8_t opcode;     /* enum mpr_wqe_opcode */
	uint8_t flags;      /* MPR_WQE_F_* */
	uint8_t num_ds;     /* 16-byte segments after this one */
	uint8_t rsvd0;
	uint16_t wqe_index; /* low 16 bits of this WQE's producer index */
	uint16_t rsvd1;
	uint32_t imm_data;  /* network byte order, copied to the ImmDt header */
	uint32_t bf_qpn;    /* WQE by MMIO: the QP number; ignored in the ring */
};

struct mpr_wqe_raddr {
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t rsvd;
};

struct mpr_wqe_atomic {
	uint64_t swap_add; /* CAS: swap value; FETCH_ADD: addend */
	uint64_t compare;  /* CAS only */
};

/* UD address segment (UD QPs only, 32 bytes = 2 segments, right after the
 * control segment): where the datagram goes. The NIC builds the packet's
 * Ethernet, IPv4, UDP, BTH and DETH headers from it; the source is the
 * port's GID 0 and the QP itself. */
struct mpr_wqe_ud {
	uint32_t remote_qpn;   /* destination QP, bits 23:0 */
	uint32_t qkey;         /* DETH Q_Key; bit 31 set: use the QP's Q_Key */
	uint8_t dgid[16];      /* IPv4-mapped destination address */
	uint8_t dmac[6];       /* next-hop MAC */
	uint8_t hop_limit;     /* IPv4 TTL, 0 = 64 */
	uint8_t traffic_class; /* DSCP << 2 (ECN bits ignored) */
};

struct mpr_wqe_data {
	uint32_t byte_count;
	uint32_t lkey;
	uint64_t addr;
};

/* First 4 bytes of an inline block; the payload follows immediately. */
struct mpr_wqe_inline {
	uint32_t byte_count;
};

#define MPR_WQE_SEG_SIZE 16u
#define MPR_SQ_LOG_STRIDE_MIN 6
#define MPR_SQ_LOG_STRIDE_MAX 10

/* ---------------------------------------------------------------------- */
/* Receive queue WQE                                                        */
/* ---------------------------------------------------------------------- */
/* A receive WQE is an array of struct mpr_wqe_data filling a slot of
 * 2^rq_log_stride bytes (16..1024). A segment whose lkey equals
 * MPR_LKEY_END terminates the list early. */
#define MPR_LKEY_END 0xffffffffu
#define MPR_RQ_LOG_STRIDE_MIN 4
#define MPR_RQ_LOG_STRIDE_MAX 10

/* ---------------------------------------------------------------------- */
/* Shared receive queue WQE                                                 */
/* ---------------------------------------------------------------------- */
/* An SRQ is a ring of 2^log_size slots of 2^log_stride bytes (32..1024),
 * used as a linked list: each WQE starts with struct mpr_wqe_srq_next,
 * followed by struct mpr_wqe_data segments as in a receive WQE. The NIC
 * takes WQEs from the head of the list (slot 0 after CREATE_SRQ), following
 * next_index from each WQE it takes, as many as the SRQ doorbell's count
 * says were posted. Software keeps the list: a WQE it posts goes into the
 * slot the previous one's next_index named, and a slot whose completion it
 * has polled is linked at the list's tail again, so that slots are reused in
 * any order the QPs complete them. A receive completion of a QP attached to
 * an SRQ carries the SRQ slot in wqe_index. */
struct mpr_wqe_srq_next {
	uint16_t next_index; /* slot of the WQE after this one */
	uint16_t rsvd0;
	uint32_t rsvd1[3];
};
#define MPR_SRQ_LOG_STRIDE_MIN 5
#define MPR_SRQ_LOG_STRIDE_MAX 10

/* ---------------------------------------------------------------------- */
/* Completion queue entry (32 bytes, at the end of a 32..128-byte slot)     */
/* ---------------------------------------------------------------------- */
/* A CQ's slots are 2^log_cqe_size bytes (CREATE_CQ); struct mpr_cqe is the
 * last 32 bytes of its slot (so the owner byte is the slot's last byte) and
 * the bytes before it hold inline receive data (MPR_CQE_F_INLINE). */
#define MPR_CQE_INLINE_MAX(log_cqe_size) \
	((log_cqe_size) > 5 ? (1u << (log_cqe_size)) - 32u : 0u)
enum mpr_cqe_opcode {
	MPR_CQE_REQ_SEND = 0x01,
	MPR_CQE_REQ_RDMA_WRITE = 0x02,
	MPR_CQE_REQ_RDMA_READ = 0x03,
	MPR_CQE_REQ_ATOMIC_CAS = 0x04,
	MPR_CQE_REQ_ATOMIC_FA = 0x05,
	MPR_CQE_RESP_RECV = 0x10,
	MPR_CQE_RESP_RECV_IMM = 0x11,
	MPR_CQE_RESP_WRITE_IMM = 0x12,
};

/* Completion status. The values are those of enum ibv_wc_status, so that the
 * provider passes them through. */
enum mpr_cqe_status {
	MPR_CQE_SUCCESS = 0,
	MPR_CQE_LOC_LEN_ERR = 1,
	MPR_CQE_LOC_QP_OP_ERR = 2,
	MPR_CQE_LOC_PROT_ERR = 4,
	MPR_CQE_WR_FLUSH_ERR = 5,
	MPR_CQE_BAD_RESP_ERR = 7,
	MPR_CQE_LOC_ACCESS_ERR = 8,
	MPR_CQE_REM_INV_REQ_ERR = 9,
	MPR_CQE_REM_ACCESS_ERR = 10,
	MPR_CQE_REM_OP_ERR = 11,
	MPR_CQE_RETRY_EXC_ERR = 12,
	MPR_CQE_RNR_RETRY_EXC_ERR = 13,
	MPR_CQE_GENERAL_ERR = 21,
};

/* Vendor syndrome: why the NIC chose the status above. */
enum mpr_cqe_syndrome {
	MPR_SYN_NONE = 0,
	MPR_SYN_BAD_OPCODE = 1,      /* unknown WQE opcode */
	MPR_SYN_BAD_WQE = 2,         /* num_ds, index or inline size inconsistent */
	MPR_SYN_BAD_LKEY = 3,        /* lkey unknown, freed or in another PD */
	MPR_SYN_LKEY_BOUNDS = 4,     /* SGE outside the memory region */
	MPR_SYN_LKEY_ACCESS = 5,     /* MR lacks local write for a placement */
	MPR_SYN_RECV_TOO_SMALL = 6,  /* SEND longer than the RECV buffers */
	MPR_SYN_DMA_FAULT = 7,       /* host memory address not backed */
	MPR_SYN_NAK_REM_ACCESS = 8,  /* peer answered NAK remote access */
	MPR_SYN_NAK_INV_REQ = 9,     /* peer answered NAK invalid request */
	MPR_SYN_NAK_REM_OP = 10,     /* peer answered NAK remote operational */
	MPR_SYN_RETRY_EXCEEDED = 11, /* transport retries exhausted */
	MPR_SYN_RNR_EXCEEDED = 12,   /* RNR retries exhausted */
	MPR_SYN_FLUSHED = 13,        /* QP entered the error state */
	MPR_SYN_ATOMIC_ALIGN = 14,   /* atomic not 8-byte sized and aligned */
	MPR_SYN_BAD_RESPONSE = 15,   /* unexpected response opcode */
	MPR_SYN_UNSUPPORTED = 16,    /* opcode the QP's transport does not carry */
	MPR_SYN_MSG_TOO_LONG = 17,   /* UD SEND longer than the path MTU, or than the RECV (+ 40 B GRH) */
	MPR_SYN_NO_CONTEXT = 18,     /* the transport engine has no context left for the QP (RTR) */
};

#define MPR_CQE_F_IMM (1u << 0)       /* imm_data is valid */
#define MPR_CQE_F_SOLICITED (1u << 1) /* the message had the SE bit */
#define MPR_CQE_F_GRH (1u << 2)       /* UD receive: the first 40 bytes placed are the GRH */
#define MPR_CQE_F_INLINE (1u << 3)    /* receive: the byte_len bytes are at the slot's start */

/* UD receive: every datagram is placed after MPR_UD_GRH_BYTES of GRH space
 * at the start of the RECV's buffers (byte_len counts them). For RoCEv2 over
 * IPv4 the first 20 bytes are zero and the last 20 hold the packet's IPv4
 * header. */
#define MPR_UD_GRH_BYTES 40u

struct mpr_cqe {
	uint32_t byte_len;  /* bytes placed (receive) or transferred (send) */
	uint32_t imm_data;  /* network byte order, valid with MPR_CQE_F_IMM */
	uint32_t qpn;       /* bits 23:0 */
	uint32_t src_qp;    /* UD receive: the sender's QP (DETH), bits 23:0; else 0 */
	uint16_t wqe_index; /* SQ or RQ index of the completed WQE */
	uint8_t opcode;     /* enum mpr_cqe_opcode */
	uint8_t status;     /* enum mpr_cqe_status */
	uint8_t flags;      /* MPR_CQE_F_* */
	uint8_t syndrome;   /* enum mpr_cqe_syndrome */
	uint16_t rsvd0;
	uint32_t rsvd1;
	uint8_t rsvd2[3];
	uint8_t owner;      /* bit 0: phase, see MPR_PHASE */
};

/* ---------------------------------------------------------------------- */
/* Event queue entry (16 bytes)                                             */
/* ---------------------------------------------------------------------- */
enum mpr_eqe_type {
	MPR_EQE_COMPLETION = 0x01,    /* data0: cqn */
	MPR_EQE_CQ_ERROR = 0x02,      /* data0: cqn, data1: 0 (overflow) or MPR_SYN_DMA_FAULT (dbrec unreadable) */
	MPR_EQE_QP_FATAL = 0x03,      /* data0: qpn, data1: syndrome */
	MPR_EQE_QP_REQ_ERR = 0x04,    /* data0: qpn: invalid request arrived */
	MPR_EQE_QP_ACCESS_ERR = 0x05, /* data0: qpn: remote access violation */
	MPR_EQE_QP_LAST_WQE = 0x06,   /* data0: qpn */
	MPR_EQE_COMM_EST = 0x07,      /* data0: qpn: first packet in RTR */
	MPR_EQE_PORT_ACTIVE = 0x08,   /* data0: port */
	MPR_EQE_PORT_DOWN = 0x09,     /* data0: port */
	MPR_EQE_SRQ_LIMIT = 0x0a,     /* data0: srqn: fewer WQEs than the armed limit */
	MPR_EQE_SRQ_ERR = 0x0b,       /* data0: srqn, data1: syndrome: SRQ unusable */
};

struct mpr_eqe {
	uint8_t type; /* enum mpr_eqe_type */
	uint8_t rsvd0[3];
	uint32_t data0;
	uint32_t data1;
	uint8_t rsvd1[3];
	uint8_t owner; /* bit 0: phase */
};

/* ---------------------------------------------------------------------- */
/* Admin queue                                                              */
/* ---------------------------------------------------------------------- */
/* The driver writes 128-byte commands into the admin submission ring and
 * writes the new producer index to AQ_PI; the command processor answers
 * each with a 32-byte completion in the admin completion ring, in order.
 * Inputs and outputs that do not fit go through DMA mailboxes. */
enum mpr_cmd_opcode {
	MPR_CMD_NOP = 0x00,
	MPR_CMD_QUERY_DEVICE = 0x01,
	MPR_CMD_QUERY_PORT = 0x02,
	MPR_CMD_SET_GID = 0x03,
	MPR_CMD_MAP_ICM = 0x04,
	MPR_CMD_QUERY_COUNTERS = 0x05,
	MPR_CMD_ALLOC_PD = 0x10,
	MPR_CMD_DEALLOC_PD = 0x11,
	MPR_CMD_REG_MR = 0x12,
	MPR_CMD_DEREG_MR = 0x13,
	MPR_CMD_CREATE_EQ = 0x20,
	MPR_CMD_DESTROY_EQ = 0x21,
	MPR_CMD_CREATE_CQ = 0x22,
	MPR_CMD_DESTROY_CQ = 0x23,
	MPR_CMD_CREATE_QP = 0x30,
	MPR_CMD_MODIFY_QP = 0x31,
	MPR_CMD_QUERY_QP = 0x32,
	MPR_CMD_DESTROY_QP = 0x33,
	MPR_CMD_CREATE_SRQ = 0x38,
	MPR_CMD_MODIFY_SRQ = 0x39,
	MPR_CMD_QUERY_SRQ = 0x3a,
	MPR_CMD_DESTROY_SRQ = 0x3b,
};

enum mpr_cmd_status {
	MPR_CMD_OK = 0x00,
	MPR_CMD_BAD_OPCODE = 0x01,   /* unknown opcode */
	MPR_CMD_BAD_PARAM = 0x02,    /* a field is out of range: syndrome names it */
	MPR_CMD_BAD_HANDLE = 0x03,   /* pdn/cqn/eqn/qpn/key does not exist */
	MPR_CMD_NO_RESOURCES = 0x04, /* table full */
	MPR_CMD_BAD_STATE = 0x05,    /* QP state transition not allowed */
	MPR_CMD_BAD_ATTR = 0x06,     /* attribute missing or not allowed */
	MPR_CMD_BUSY = 0x07,         /* resource still referenced */
	MPR_CMD_DMA_ERROR = 0x08,    /* mailbox not in host memory */
	MPR_CMD_INTERNAL = 0x09,
	MPR_CMD_NO_ICM = 0x0a,       /* the object's context entry lies in ICM not mapped */
};

/* Fields a command's syndrome can name when the status is BAD_PARAM or
 * BAD_ATTR: the offending field's MPR_QP_ATTR_* bit, or one of these. */
enum mpr_cmd_syndrome {
	MPR_CMD_SYN_NONE = 0,
	MPR_CMD_SYN_LOG_SIZE = 1,
	MPR_CMD_SYN_STRIDE = 2,
	MPR_CMD_SYN_ADDRESS = 3,
	MPR_CMD_SYN_ACCESS = 4,
	MPR_CMD_SYN_LENGTH = 5,
	MPR_CMD_SYN_PAGE_SHIFT = 6,
	MPR_CMD_SYN_QP_TYPE = 7,
	MPR_CMD_SYN_UAR = 8,
	MPR_CMD_SYN_VECTOR = 9,
	MPR_CMD_SYN_INDEX = 10,
	MPR_CMD_SYN_TRANSPORT = 11,
	MPR_CMD_SYN_RESERVED = 12, /* a reserved field was not zero */
	MPR_CMD_SYN_SRQ = 13,      /* CREATE_QP: the SRQ (or a UD/RC/UC mismatch) */
	MPR_CMD_SYN_LIMIT = 14,    /* MODIFY_SRQ: limit beyond the SRQ's size */
};

struct mpr_cmd_hdr {
	uint16_t opcode; /* enum mpr_cmd_opcode */
	uint16_t cmd_id; /* echoed in the completion */
	uint32_t rsvd0;
	uint64_t in_mailbox;  /* DMA address of extra input, or 0 */
	uint64_t out_mailbox; /* DMA address for extra output, or 0 */
	uint32_t in_len;      /* bytes at in_mailbox */
	uint32_t out_len;     /* bytes available at out_mailbox */
};

#define MPR_CMD_SIZE 128u
#define MPR_CMD_PAYLOAD_SIZE (MPR_CMD_SIZE - sizeof(struct mpr_cmd_hdr))

/* Access flags for MRs and QPs (the values of enum ibv_access_flags). */
#define MPR_ACCESS_LOCAL_WRITE (1u << 0)
#define MPR_ACCESS_REMOTE_WRITE (1u << 1)
#define MPR_ACCESS_REMOTE_READ (1u << 2)
#define MPR_ACCESS_REMOTE_ATOMIC (1u << 3)
#define MPR_ACCESS_ALL 0xfu

struct mpr_cmd_set_gid {
	uint32_t index; /* GID table index, < max_gids */
	uint32_t rsvd;
	uint8_t gid[16]; /* RoCEv2: IPv4-mapped IPv6 (::ffff:a.b.c.d) */
};

/* ICM (interconnect context memory): the NIC keeps its QP, CQ, MR and page
 * translation tables in host memory that the driver gives it, and caches
 * entries on chip; a cache miss is a DMA read of the entry, an eviction of a
 * modified entry a DMA write. QUERY_DEVICE reports the ICM size in 4 KiB
 * pages (icm_pages); the driver maps host pages at ICM page indices with
 * MAP_ICM, before creating objects whose entries lie there (CREATE_CQ,
 * CREATE_QP and REG_MR fail with MPR_CMD_NO_ICM otherwise). The layout of
 * the tables inside ICM is the NIC's business (docs/host-interface.md).
 *
 * MAP_ICM input mailbox: num_chunks 8-byte host addresses (in_len =
 * 8 * num_chunks), each of a physically contiguous chunk of 2^log_chunk
 * bytes aligned to its size, mapped at ICM page first_page and on: chunk i
 * covers ICM pages first_page + i * 2^(log_chunk - 12) onwards. first_page
 * is a multiple of the pages per chunk; the last chunk may reach past the
 * end of ICM (the excess is unused). Mapping a page again replaces the
 * mapping; a device reset clears the map. */
#define MPR_ICM_PAGE_SHIFT 12u
#define MPR_ICM_MAP_MAX 512u          /* chunks per MAP_ICM: one 4 KiB mailbox */
#define MPR_ICM_LOG_CHUNK_MAX 22u     /* chunks of 4 KiB .. 4 MiB */

struct mpr_cmd_map_icm {
	uint32_t first_page; /* ICM page index (4 KiB units), < icm_pages */
	uint32_t num_chunks; /* 1..MPR_ICM_MAP_MAX */
	uint32_t log_chunk;  /* MPR_ICM_PAGE_SHIFT..MPR_ICM_LOG_CHUNK_MAX */
	uint32_t rsvd;
};

struct mpr_cmd_pd {
	uint32_t pdn; /* DEALLOC_PD input */
};

/* REG_MR: the MTT (one 8-byte page address per page, ascending iova) is in
 * the input mailbox: in_len = 8 * num_pages. */
struct mpr_cmd_reg_mr {
	uint64_t iova;       /* first byte's address as the verbs see it */
	uint64_t length;     /* bytes */
	uint32_t pdn;
	uint32_t access;     /* MPR_ACCESS_* */
	uint32_t page_shift; /* 12..30 */
	uint32_t num_pages;
};

struct mpr_cmd_dereg_mr {
	uint32_t key;
};

struct mpr_cmd_create_eq {
	uint64_t base;   /* ring of 2^log_size struct mpr_eqe, physically contiguous */
	uint32_t log_size;
	uint32_t vector; /* MSI-X vector */
};

struct mpr_cmd_create_cq {
	uint64_t base;      /* ring of 2^log_size CQE slots, physically contiguous */
	uint64_t dbrec;     /* 4-byte consumer-index record the provider updates */
	uint32_t log_size;
	uint32_t eqn;
	uint32_t uar_index; /* UAR page allowed to ring this CQ's doorbell */
	uint8_t log_cqe_size; /* CQE slot: 0 or 5 = 32 B, 6 = 64 B, 7 = 128 B */
	uint8_t flags;        /* MPR_CQ_F_* */
	uint16_t rsvd;
};

/* CREATE_CQ flags. INLINE_RECV (CAPS.INLINE_RECV; slots of 64 B or more):
 * a receive of at most MPR_CQE_INLINE_MAX(log_cqe_size) bytes (UD: GRH
 * included) is written into its CQE slot (MPR_CQE_F_INLINE) instead of the
 * RECV's buffers; the data path copies it there when it polls the CQE. */
#define MPR_CQ_F_INLINE_RECV (1u << 0)
#define MPR_CQ_LOG_CQE_SIZE_MIN 5
#define MPR_CQ_LOG_CQE_SIZE_MAX 7

enum mpr_qp_type {
	/* IB_QPT_GSI: the port's QP1, a UD QP whose packets carry QPN 1 (DETH
	 * source QP) and that receives every datagram sent to QPN 1; one per
	 * NIC. CAPS.UD. Its handle (the QPN CREATE_QP returns, used by every
	 * other command, doorbell and CQE) is an ordinary QPN. */
	MPR_QPT_GSI = 1,
	MPR_QPT_RC = 2, /* IBV_QPT_RC */
	MPR_QPT_UC = 3, /* IBV_QPT_UC: connected, no ACKs (SEND, WRITE), CAPS.UC */
	MPR_QPT_UD = 4, /* IBV_QPT_UD: datagrams, CAPS.UD */
};

enum mpr_transport {
	MPR_TRANSPORT_DEFAULT = 0, /* the NIC's configured engine */
	MPR_TRANSPORT_GBN = 1,     /* RoCEv2 go-back-N */
	MPR_TRANSPORT_MP_RDMA = 2,
	MPR_TRANSPORT_DCQCN = 3,
	MPR_TRANSPORT_IRN = 4,
	/* Ids of engines the ABI does not name (under development, or a
	 * test's): a NIC runs one only as its configured engine, QPs reach it
	 * as MPR_TRANSPORT_DEFAULT and CAPS has no bit for it. */
	MPR_TRANSPORT_EXPERIMENTAL_FIRST = 16,
	MPR_TRANSPORT_EXPERIMENTAL_LAST = 31,
};

/* The name of an engine of the ABI: what scenarios, the provider's
 * MPRDMA_TRANSPORT and the simulator's engine registry call it. NULL for an
 * id the ABI does not name. */
static inline const char *mpr_transport_name(unsigned int kind)
{
	switch (kind) {
	case MPR_TRANSPORT_DEFAULT:
		return "default";
	case MPR_TRANSPORT_GBN:
		return "gbn";
	case MPR_TRANSPORT_MP_RDMA:
		return "mprdma";
	case MPR_TRANSPORT_DCQCN:
		return "dcqcn";
	case MPR_TRANSPORT_IRN:
		return "irn";
	default:
		return 0;
	}
}

struct mpr_cmd_create_qp {
	uint64_t sq_base; /* physically contiguous rings */
	uint64_t rq_base;
	uint32_t pdn;
	uint32_t send_cqn;
	uint32_t recv_cqn;
	uint32_t uar_index;
	uint8_t qp_type;   /* enum mpr_qp_type */
	uint8_t sq_log_size;
	uint8_t sq_log_stride;
	uint8_t rq_log_size;
	uint8_t rq_log_stride;
	uint8_t transport; /* enum mpr_transport */
	uint8_t sq_sig_all;
	uint8_t flags;     /* MPR_CREATE_QP_F_* */
	uint32_t max_inline;
	uint32_t srqn;     /* with MPR_CREATE_QP_F_SRQ */
};

/* CREATE_QP flags. SRQ (CAPS.SRQ): the QP's RECVs come from SRQ srqn (of the
 * same PD); it has no receive queue of its own (rq_base and rq_log_* must
 * be 0) and an RQ doorbell naming it is dropped. */
#define MPR_CREATE_QP_F_SRQ (1u << 0)

/* CREATE_SRQ: a ring of 2^log_size slots of 2^log_stride bytes at base
 * (physically contiguous), the list starting at slot 0. out[0]: srqn. */
struct mpr_cmd_create_srq {
	uint64_t base;
	uint32_t pdn;
	uint32_t uar_index; /* UAR page allowed to ring its doorbell */
	uint8_t log_size;
	uint8_t log_stride;
	uint16_t rsvd0;
	uint32_t limit;     /* armed limit, 0 = not armed */
};

/* MODIFY_SRQ attr_mask: the values of enum ibv_srq_attr_mask. Changing the
 * size (MAX_WR) is not supported (BAD_ATTR). LIMIT arms the limit event:
 * when fewer than `limit` WQEs are left in the SRQ the NIC raises
 * MPR_EQE_SRQ_LIMIT once and disarms it; 0 disarms. */
#define MPR_SRQ_ATTR_MAX_WR (1u << 0)
#define MPR_SRQ_ATTR_LIMIT (1u << 1)

struct mpr_cmd_modify_srq {
	uint32_t srqn;
	uint32_t attr_mask;
	uint32_t max_wr;
	uint32_t limit;
};
/* QUERY_SRQ and DESTROY_SRQ take struct mpr_cmd_handle (the srqn). QUERY_SRQ
 * answers in the completion: out[0] the armed limit (0 if none), out[1]
 * WQEs posted and not yet taken by a QP, out[2] QPs attached, out[3] the
 * ring's 2^log_size. DESTROY_SRQ fails with BUSY while QPs use it. */


enum mpr_qp_state {
	MPR_QPS_RESET = 0,
	MPR_QPS_INIT = 1,
	MPR_QPS_RTR = 2,
	MPR_QPS_RTS = 3,
	MPR_QPS_SQD = 4, /* not supported: a transition to it fails */
	MPR_QPS_SQE = 5, /* not supported */
	MPR_QPS_ERR = 6,
};

/* attr_mask bits: the values of enum ibv_qp_attr_mask. */
#define MPR_QP_ATTR_STATE (1u << 0)
#define MPR_QP_ATTR_CUR_STATE (1u << 1)
#define MPR_QP_ATTR_ACCESS_FLAGS (1u << 3)
#define MPR_QP_ATTR_PKEY_INDEX (1u << 4)
#define MPR_QP_ATTR_PORT (1u << 5)
#define MPR_QP_ATTR_QKEY (1u << 6) /* UD only */
#define MPR_QP_ATTR_AV (1u << 7)
#define MPR_QP_ATTR_PATH_MTU (1u << 8)
#define MPR_QP_ATTR_TIMEOUT (1u << 9)
#define MPR_QP_ATTR_RETRY_CNT (1u << 10)
#define MPR_QP_ATTR_RNR_RETRY (1u << 11)
#define MPR_QP_ATTR_RQ_PSN (1u << 12)
#define MPR_QP_ATTR_MAX_QP_RD_ATOMIC (1u << 13)
#define MPR_QP_ATTR_MIN_RNR_TIMER (1u << 15)
#define MPR_QP_ATTR_SQ_PSN (1u << 16)
#define MPR_QP_ATTR_MAX_DEST_RD_ATOMIC (1u << 17)
#define MPR_QP_ATTR_DEST_QPN (1u << 20)

/* IB path MTU codes (enum ibv_mtu). */
enum mpr_mtu {
	MPR_MTU_256 = 1,
	MPR_MTU_512 = 2,
	MPR_MTU_1024 = 3,
	MPR_MTU_2048 = 4,
	MPR_MTU_4096 = 5,
};

/* Attributes of MODIFY_QP (input, inline in the command) and QUERY_QP
 * (output, in the mailbox). */
struct mpr_qp_attr {
	uint32_t attr_mask; /* MPR_QP_ATTR_* */
	uint8_t qp_state;   /* enum mpr_qp_state: the new state */
	uint8_t cur_state;
	uint8_t path_mtu;   /* enum mpr_mtu */
	uint8_t timeout;    /* local ACK timeout: 4.096 us * 2^timeout, 0 = infinite */
	uint8_t retry_cnt;  /* 0..7 */
	uint8_t rnr_retry;  /* 0..7, 7 = infinite */
	uint8_t min_rnr_timer; /* IB encoding 0..31 */
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class; /* DSCP << 2 | ECN bits ignored */
	uint32_t access_flags; /* MPR_ACCESS_REMOTE_* */
	uint32_t sq_psn;       /* 24 bits */
	uint32_t rq_psn;       /* 24 bits */
	uint32_t dest_qpn;     /* 24 bits */
	uint16_t pkey_index;
	uint16_t udp_sport;    /* RoCEv2 UDP source port, 0 = NIC picks from the QPNs */
	uint8_t dgid[16];      /* IPv4-mapped destination address */
	uint8_t dmac[6];
	uint8_t port_num;      /* 1 */
	uint8_t rsvd0;
	uint32_t qkey;         /* UD: Q_Key the QP accepts and sends with (MPR_QP_ATTR_QKEY) */
};

struct mpr_cmd_modify_qp {
	uint32_t qpn;
	uint32_t rsvd;
	struct mpr_qp_attr attr;
};

struct mpr_cmd_qpn {
	uint32_t qpn; /* QUERY_QP, DESTROY_QP */
};

struct mpr_cmd_handle {
	uint32_t handle; /* DESTROY_EQ, DESTROY_CQ */
};

struct mpr_cmd {
	struct mpr_cmd_hdr hdr;
	union {
		uint8_t raw[MPR_CMD_SIZE - 32];
		struct mpr_cmd_set_gid set_gid;
		struct mpr_cmd_map_icm map_icm;
		struct mpr_cmd_pd pd;
		struct mpr_cmd_reg_mr reg_mr;
		struct mpr_cmd_dereg_mr dereg_mr;
		struct mpr_cmd_create_eq create_eq;
		struct mpr_cmd_create_cq create_cq;
		struct mpr_cmd_create_qp create_qp;
		struct mpr_cmd_modify_qp modify_qp;
		struct mpr_cmd_qpn qpn;
		struct mpr_cmd_handle handle;
		struct mpr_cmd_create_srq create_srq;
		struct mpr_cmd_modify_srq modify_srq;
	} u;
};

struct mpr_cmd_comp {
	uint16_t cmd_id;
	uint8_t status;   /* enum mpr_cmd_status */
	uint8_t rsvd0;
	uint32_t syndrome; /* enum mpr_cmd_syndrome or an MPR_QP_ATTR_* bit */
	uint32_t out[4];   /* PD: pdn; MR: key; EQ: eqn; CQ: cqn; QP: qpn */
	uint8_t rsvd1[7];
	uint8_t owner;     /* bit 0: phase */
};

/* QUERY_DEVICE output (mailbox). The NIC writes min(out_len, sizeof) bytes:
 * a caller built for interface 1.0 asks for the first
 * MPR_DEVICE_ATTR_V1_SIZE bytes (up to icm_pages) and gets those; less is
 * BAD_PARAM / SYN_LENGTH. */
#define MPR_DEVICE_ATTR_V1_SIZE 80u
struct mpr_device_attr {
	uint32_t fw_version;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t max_qp_rd_atom;
	uint32_t max_inline;
	uint32_t max_eq;
	uint32_t num_uar_pages;
	uint32_t max_gids;
	uint32_t max_msg_size;
	uint32_t cap_flags; /* the value of the CAPS register (MPRDMA_BAR0__CAPS__*) */
	uint32_t icm_pages; /* 4 KiB pages of ICM the driver must map (MAP_ICM) */
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint32_t rsvd0;
};

enum mpr_port_state {
	MPR_PORT_DOWN = 1,
	MPR_PORT_ACTIVE = 4,
};

/* QUERY_COUNTERS output (mailbox): the port's counters since the last
 * device reset, one 64-bit value each, in this order. */
enum mpr_port_counter {
	MPR_CNT_TX_PACKETS,          /* frames sent by the port */
	MPR_CNT_RX_PACKETS,          /* frames received by the port */
	MPR_CNT_TX_BYTES,
	MPR_CNT_RX_BYTES,
	MPR_CNT_RETRANSMITS,         /* request packets sent again */
	MPR_CNT_LOCAL_ACK_TIMEOUTS,  /* transport timeouts of requesters */
	MPR_CNT_NAKS_RECEIVED,       /* NAKs a requester received */
	MPR_CNT_SEQ_NAKS_SENT,       /* PSN sequence error NAKs a responder sent */
	MPR_CNT_RNR_NAKS_SENT,
	MPR_CNT_DUPLICATE_REQUESTS,  /* requests a responder had executed */
	MPR_CNT_RX_DROPS,            /* frames the port dropped (no buffer) */
	MPR_CNT_ECN_MARKED_RX,       /* frames received with ECN CE */
	MPR_CNT_CNP_SENT,            /* DCQCN notification point */
	MPR_CNT_CNP_HANDLED,         /* DCQCN reaction point */
	MPR_CNT_ERROR_CQES,          /* completions with an error status */
	MPR_CNT_NUM
};

struct mpr_port_counters {
	uint64_t value[MPR_CNT_NUM];
};

/* QUERY_PORT output (mailbox). */
struct mpr_port_attr {
	uint8_t state;      /* enum mpr_port_state */
	uint8_t max_mtu;    /* enum mpr_mtu */
	uint8_t active_mtu;
	uint8_t rsvd0;
	uint32_t speed_mbps;
	uint8_t mac[6];
	uint16_t rsvd1;
};

/* ---------------------------------------------------------------------- */
/* Context layouts                                                          */
/* ---------------------------------------------------------------------- */
/* What the NIC keeps per object. The command processor writes them; the
 * data path reads them. They are visible to the host only through QUERY_*
 * commands; they are specified so that the context memory can be sized and,
 * later, cached from host-memory tables. */

/* Memory protection table entry. */
struct mpr_mpt {
	uint64_t iova;
	uint64_t length;
	uint32_t key;
	uint32_t pdn;
	uint32_t access;   /* MPR_ACCESS_* */
	uint32_t mtt_base; /* index of the first page address in the MTT */
	uint32_t num_pages;
	uint8_t page_shift;
	uint8_t valid;
	uint16_t rsvd0;
	uint64_t rsvd1;
};

/* Memory translation table entry: one page's physical address. */
struct mpr_mtt {
	uint64_t pa;
};

struct mpr_cqc {
	uint64_t base;
	uint64_t dbrec;
	uint32_t cqn;
	uint32_t eqn;
	uint32_t uar_index;
	uint32_t pi;        /* producer index (hardware) */
	uint32_t ci;        /* last consumer index seen */
	uint8_t log_size;
	uint8_t arm;        /* enum mpr_cq_db_cmd, 0 = not armed */
	uint8_t valid;
	uint8_t overflow;
	uint32_t num_qps;   /* QPs attached */
	uint8_t log_cqe_size; /* 5..7 */
	uint8_t flags;        /* MPR_CQ_F_* */
	uint8_t rsvd0[2];
	uint32_t rsvd[4];
};

/* SRQ context: on chip (limits.max_srq of them). */
struct mpr_srqc {
	uint64_t base;
	uint32_t srqn;
	uint32_t pdn;
	uint32_t uar_index;
	uint32_t limit;     /* armed limit, 0 = not armed */
	uint32_t posted;    /* WQEs posted: the last doorbell's count, extended */
	uint32_t taken;     /* WQEs taken by QPs */
	uint32_t num_qps;   /* QPs attached */
	uint16_t head;      /* slot of the next WQE to fetch */
	uint8_t log_size;
	uint8_t log_stride;
	uint8_t valid;
	uint8_t error;      /* unusable (its ring could not be read) */
	uint8_t rsvd0[2];
	uint32_t rsvd1[5];
};

struct mpr_eqc {
	uint64_t base;
	uint32_t eqn;
	uint32_t vector;
	uint32_t pi;
	uint32_t ci;
	uint8_t log_size;
	uint8_t armed;
	uint8_t valid;
	uint8_t rsvd0;
	uint32_t num_cqs;
};

/* QP context: the driver-visible part. The NIC's transport engine keeps its
 * own per-connection state beside it; docs/host-interface.md lists its size
 * per engine. */
struct mpr_qpc {
	uint64_t sq_base;
	uint64_t rq_base;
	uint32_t qpn;
	uint32_t pdn;
	uint32_t send_cqn;
	uint32_t recv_cqn;
	uint32_t uar_index;
	uint32_t max_inline;
	uint8_t qp_type;
	uint8_t state;
	uint8_t sq_log_size;
	uint8_t sq_log_stride;
	uint8_t rq_log_size;
	uint8_t rq_log_stride;
	uint8_t transport;
	uint8_t sq_sig_all;
	uint8_t valid;
	uint8_t flags;  /* MPR_CREATE_QP_F_* */
	uint8_t rsvd0[2];
	uint32_t sq_pi; /* last doorbelled producer indices */
	uint32_t rq_pi;
	struct mpr_qp_attr attr; /* the attributes of the last MODIFY_QP */
	uint32_t srqn;  /* with MPR_CREATE_QP_F_SRQ */
};

MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_ctrl) == 16, "wqe ctrl");
MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_raddr) == 16, "wqe raddr");
MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_atomic) == 16, "wqe atomic");
MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_data) == 16, "wqe data");
MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_ud) == 32, "wqe ud");
MPR_STATIC_ASSERT(sizeof(struct mpr_cqe) == 32, "cqe");
MPR_STATIC_ASSERT(sizeof(struct mpr_eqe) == 16, "eqe");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd_hdr) == 32, "cmd hdr");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd) == MPR_CMD_SIZE, "cmd");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd_comp) == 32, "cmd comp");
MPR_STATIC_ASSERT(sizeof(struct mpr_qp_attr) == 64, "qp attr");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd_modify_qp) <= MPR_CMD_SIZE - 32, "modify qp");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd_create_qp) <= MPR_CMD_SIZE - 32, "create qp");
MPR_STATIC_ASSERT(sizeof(struct mpr_device_attr) == 96, "device attr");
MPR_STATIC_ASSERT(sizeof(struct mpr_wqe_srq_next) == 16, "srq next");
MPR_STATIC_ASSERT(sizeof(struct mpr_srqc) == 64, "srqc");
MPR_STATIC_ASSERT(sizeof(struct mpr_cmd_create_srq) <= MPR_CMD_SIZE - 32, "create srq");
MPR_STATIC_ASSERT(sizeof(struct mpr_port_attr) == 16, "port attr");
MPR_STATIC_ASSERT(sizeof(struct mpr_mpt) == 48, "mpt");
MPR_STATIC_ASSERT(sizeof(struct mpr_cqc) == 64, "cqc");
MPR_STATIC_ASSERT(sizeof(struct mpr_eqc) == 32, "eqc");
MPR_STATIC_ASSERT(sizeof(struct mpr_qpc) == 128, "qpc");

#endif /* MPRDMA_HW_H */
