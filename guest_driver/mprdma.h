/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mprdma: Linux driver of the mprdma virtual RDMA NIC.
 *
 * The hardware interface (queue entries, commands, doorbells) is
 * <mprdma/hw.h>, the register map the generated <mprdma/regs.h>, the
 * driver/provider ABI <mprdma/abi.h>; docs/host-interface.md explains them
 * and docs/design/qemu-guests.md how the device appears in a QEMU guest.
 */
#ifndef _MPRDMA_H_
#define _MPRDMA_H_

#include <asm/byteorder.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#include <mprdma/hw.h>
#include <mprdma/regs_util.h>

#include "mprdma_admin.h"

#ifdef __BIG_ENDIAN
#error "hw.h declares the NIC's little-endian fields as plain integers"
#endif

#define DRV_MODULE_NAME "mprdma"

/* The one Ethernet port. */
#define MPRDMA_PORT 1

/*
 * Interrupt vectors. Vector v of the NIC is MSI-X vector v of the ivshmem
 * function beside it: EQ 0 (asynchronous and completion events) uses vector
 * 0, admin completions vector 1 when the ivshmem function has a second one.
 */
#define MPRDMA_EQ_VECTOR 0
#define MPRDMA_AQ_VECTOR 1
#define MPRDMA_MAX_VECTORS 2
/* The message the NIC's MSI-X table sends; the bridge to QEMU turns a write
 * to this address with data v into MSI-X vector v of the ivshmem function.
 */
#define MPRDMA_MSI_ADDR 0xfee00000ULL
#define MPRDMA_NUM_MSIX \
	(sizeof_field(mprdma_bar0_t, MSIX) / MPR_BAR0_MSIX_ENTRY_SIZE)

/* EQ 0 holds one completion event per armed CQ plus asynchronous events:
 * 1024 entries leave room for both.
 */
#define MPRDMA_EQ_LOG_SIZE 10

struct mprdma_eq {
	struct mpr_eqe *ring;	/* NULL until mprdma_eq_init() succeeds */
	dma_addr_t dma;
	u32 eqn;
	u32 ci;			/* free-running consumer index */
	int irq;
};

/* One physically contiguous piece of ICM: 1 << log_size bytes at ICM page
 * first_page, aligned to its size in bus and ICM addresses.
 */
struct mprdma_icm_chunk {
	void *cpu;
	dma_addr_t dma;
	u32 first_page;
	u32 log_size;
};

/* The host memory holding the NIC's context tables (mprdma_icm.c). Chunk
 * sizes never grow along the array, so that each chunk's first page is a
 * multiple of its pages.
 */
struct mprdma_icm {
	u32 pages;	/* 4 KiB pages the NIC asked for */
	u32 nchunks;
	u32 ncmds;	/* MAP_ICM commands that mapped them */
	struct mprdma_icm_chunk *chunks;	/* room for one per page */
};

struct mprdma_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	/* Function 1 of the slot (ivshmem): owner of the interrupt vectors. */
	struct pci_dev *irq_pdev;
	int num_vectors;
	bool aq_use_irq;	/* else admin completions are polled */
	char eq_irq_name[32];

	void __iomem *bar0;
	void __iomem *uar0;	/* UAR page 0: the kernel's doorbells */
	resource_size_t bar2_start;
	u32 num_uar_pages;

	struct mprdma_aq aq;
	struct mprdma_eq eq;
	struct mpr_device_attr attr;
	struct mprdma_icm icm;
	u8 mac[ETH_ALEN];

	/* UAR pages 1..num_uar_pages-1, one per user context. */
	struct ida uar_ida;
	/* cqn, qpn and srqn to object, for the event queue. */
	struct xarray cqs;
	struct xarray qps;
	struct xarray srqs;

	/* debugfs (mprdma_debugfs.c): the device's folder. */
	struct dentry *debugfs;
	/* Serialises raw commands: they share the input mailbox below. */
	struct mutex raw_lock;
	void *raw_in;		/* admin_raw's input mailbox, or NULL */
	dma_addr_t raw_in_dma;

	struct notifier_block netdev_nb;
	/* The netdev bound to the port, and whether ib_register_device()
	 * returned: both under RTNL.
	 */
	struct net_device *netdev;
	bool registered;
	struct work_struct rescan_work;
};

struct mprdma_ucontext {
	struct ib_ucontext ibucontext;
	u32 uar_index;
	struct mprdma_mmap_entry *uar_entry;
};

struct mprdma_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

struct mprdma_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
};

/*
 * Memory of a kernel consumer's ring or record: coherent, owned by the
 * driver (no mapping). leak: the NIC did not confirm that it stopped using
 * it, so it is never freed.
 */
struct mprdma_kbuf {
	void *cpu;
	dma_addr_t dma;
	size_t size;
	bool leak;
};

struct mprdma_cq {
	struct ib_cq ibcq;
	u32 cqn;
	u32 log_size;
	/* A user CQ: mapped by the process, which polls it. */
	struct mprdma_mmap_entry *ring;
	struct mprdma_mmap_entry *dbrec;
	/* A kernel CQ (mprdma_kverbs.c): polled by the driver. */
	bool kernel;
	spinlock_t lock;	/* ci and the ring's consumer side */
	u32 ci;			/* free-running consumer index */
	struct mprdma_kbuf kring;
	struct mprdma_kbuf kdbrec;
};

struct mprdma_qp {
	struct ib_qp ibqp;
	u32 qpn;
	/* Serialises modify_qp and query_qp on this QP; protects state. */
	struct mutex lock;
	enum ib_qp_state state;
	enum ib_qp_type type;	/* IB_QPT_RC, _UC, _UD or (kernel) _GSI */
	bool sig_all;
	struct ib_qp_cap cap;	/* what was granted */
	u8 sq_log_size;
	u8 sq_log_stride;
	u8 rq_log_size;
	u8 rq_log_stride;
	/* A user QP: rings mapped by the process; no rq for a QP of an SRQ. */
	struct mprdma_mmap_entry *sq;
	struct mprdma_mmap_entry *rq;
	/* A kernel QP (mprdma_kverbs.c): the driver posts; wr_ids by slot. */
	bool kernel;
	spinlock_t sq_lock;	/* sq_pi and the SQ ring */
	spinlock_t rq_lock;	/* rq_pi and the RQ ring */
	u32 sq_pi, sq_ci;	/* free-running; ci advanced by poll_cq */
	u32 rq_pi, rq_ci;
	u64 *sq_wrid;
	u64 *rq_wrid;
	struct mprdma_kbuf ksq;
	struct mprdma_kbuf krq;
};

/*
 * A shared receive queue (mprdma_srq.c): a ring of 2^log_size slots of
 * 2^log_stride bytes that the process maps and keeps as a linked list
 * (<mprdma/hw.h>, struct mpr_wqe_srq_next); the tail slot stays free, so
 * 2^log_size - 1 WQEs fit. User SRQs only.
 */
struct mprdma_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	u8 log_size;
	u8 log_stride;
	u32 max_sge;		/* granted */
	struct mprdma_mmap_entry *ring;
};

/*
 * An address handle: the NIC keeps none (a UD WQE carries the destination).
 * A user AH only hands ib_core's resolved MAC to the provider; a kernel AH
 * keeps the address segment its sends copy (remote QPN and Q_Key are the
 * work request's).
 */
struct mprdma_ah {
	struct ib_ah ibah;
	struct mpr_wqe_ud ud;
};

enum mprdma_mmap_type {
	MPRDMA_MMAP_UAR,	/* a BAR2 page, mapped non-cached */
	MPRDMA_MMAP_DMA,	/* a ring or record in coherent memory */
};

/*
 * What user space can mmap. A DMA entry owns its memory: it is freed in
 * mmap_free, once the object is destroyed and no mapping is left.
 */
struct mprdma_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	enum mprdma_mmap_type type;
	size_t size;		/* bytes, a multiple of PAGE_SIZE */
	phys_addr_t address;	/* what the mapping points to */
	void *cpu_addr;		/* DMA entries only */
	dma_addr_t dma_addr;	/* DMA entries only */
	/* The NIC did not confirm that it stopped using the memory: never
	 * free it (a leak is better than DMA into freed pages).
	 */
	bool leak;
};

static inline struct mprdma_dev *to_mdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct mprdma_dev, ibdev);
}

static inline struct mprdma_ucontext *to_muctx(struct ib_ucontext *ibuctx)
{
	return container_of(ibuctx, struct mprdma_ucontext, ibucontext);
}

static inline struct mprdma_pd *to_mpd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct mprdma_pd, ibpd);
}

static inline struct mprdma_mr *to_mmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct mprdma_mr, ibmr);
}

static inline struct mprdma_cq *to_mcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct mprdma_cq, ibcq);
}

static inline struct mprdma_qp *to_mqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct mprdma_qp, ibqp);
}

static inline struct mprdma_srq *to_msrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct mprdma_srq, ibsrq);
}

static inline struct mprdma_mmap_entry *
to_mentry(struct rdma_user_mmap_entry *rdma_entry)
{
	return container_of(rdma_entry, struct mprdma_mmap_entry, rdma_entry);
}

static inline u32 mprdma_reg_read(struct mprdma_dev *dev, u32 off)
{
	return readl(dev->bar0 + off);
}

static inline void mprdma_reg_write(struct mprdma_dev *dev, u32 off, u32 val)
{
	writel(val, dev->bar0 + off);
}

/* admin_raw: a mailbox address that names the driver's own mailbox. */
#define MPRDMA_RAW_MAILBOX 1ULL

/* mprdma_debugfs.c */
void mprdma_debugfs_init(void);
void mprdma_debugfs_cleanup(void);
void mprdma_debugfs_add(struct mprdma_dev *dev);
void mprdma_debugfs_remove(struct mprdma_dev *dev);
void mprdma_debugfs_free(struct mprdma_dev *dev);

/* mprdma_eq.c */
int mprdma_eq_init(struct mprdma_dev *dev);
void mprdma_eq_destroy(struct mprdma_dev *dev);

/* mprdma_verbs.c */
int mprdma_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			struct ib_udata *udata);
struct rdma_hw_stats *mprdma_alloc_hw_port_stats(struct ib_device *ibdev,
						 u32 port);
int mprdma_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			u32 port, int index);
int mprdma_query_port(struct ib_device *ibdev, u32 port,
		      struct ib_port_attr *attr);
int mprdma_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable);
enum rdma_link_layer mprdma_get_link_layer(struct ib_device *ibdev, u32 port);
void mprdma_get_dev_fw_str(struct ib_device *ibdev, char *str);
int mprdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
		      u16 *pkey);
int mprdma_add_gid(const struct ib_gid_attr *attr, void **context);
int mprdma_del_gid(const struct ib_gid_attr *attr, void **context);
int mprdma_alloc_ucontext(struct ib_ucontext *ibuctx, struct ib_udata *udata);
void mprdma_dealloc_ucontext(struct ib_ucontext *ibuctx);
void mprdma_disassociate_ucontext(struct ib_ucontext *ibuctx);
int mprdma_mmap(struct ib_ucontext *ibuctx, struct vm_area_struct *vma);
void mprdma_mmap_free(struct rdma_user_mmap_entry *rdma_entry);
int mprdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int mprdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
struct ib_mr *mprdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access,
				 struct ib_udata *udata);
int mprdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
int mprdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata);
int mprdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int mprdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		     struct ib_udata *udata);
int mprdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int attr_mask, struct ib_udata *udata);
int mprdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_qp_init_attr *init_attr);
int mprdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int mprdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		     struct ib_udata *udata);
int mprdma_destroy_ah(struct ib_ah *ibah, u32 flags);
bool mprdma_udata_in_ok(struct ib_udata *udata);
int mprdma_copy_resp(struct ib_udata *udata, void *resp, size_t len);
struct mprdma_mmap_entry *
mprdma_dma_entry_alloc(struct mprdma_dev *dev, struct ib_ucontext *ibuctx,
		       size_t size);
void mprdma_entry_remove(struct mprdma_mmap_entry *entry);

/* mprdma_srq.c: shared receive queues (user space only) */
extern const struct ib_device_ops mprdma_srq_ops;
void mprdma_srq_query_device(struct mprdma_dev *dev,
			     struct ib_device_attr *attr);
int mprdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init_attr,
		      struct ib_udata *udata);
int mprdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask attr_mask, struct ib_udata *udata);
int mprdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int mprdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);

/* mprdma_kverbs.c: the data path of kernel consumers (ib_mad's GSI QP) */
struct ib_mr *mprdma_get_dma_mr(struct ib_pd *ibpd, int access);
int mprdma_kbuf_alloc(struct mprdma_dev *dev, struct mprdma_kbuf *buf,
		      size_t size);
void mprdma_kbuf_free(struct mprdma_dev *dev, struct mprdma_kbuf *buf);
int mprdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int mprdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
int mprdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int mprdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);

/* mprdma_icm.c */
int mprdma_icm_init(struct mprdma_dev *dev);
void mprdma_icm_destroy(struct mprdma_dev *dev);

#endif /* _MPRDMA_H_ */
