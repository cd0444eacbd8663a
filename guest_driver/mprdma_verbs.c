// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma verbs.
 *
 * The kernel creates every object through admin commands and allocates the
 * rings (SQ, RQ, CQ) and the CQ consumer-index records in coherent memory.
 * For a user object the rdma-core provider maps them and drives them
 * (posting, polling, doorbells) in the process; the udata layouts are
 * <mprdma/abi.h>. Kernel consumers (ib_mad's GSI QP, for ib_cm and
 * rdma_cm) get UD and GSI QPs whose data path is mprdma_kverbs.c.
 */

#include <linux/dma-mapping.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <net/ipv6.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>

#include <mprdma/abi.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

/* Page sizes of MRs: the NIC takes page shifts 12..30. */
#define MPRDMA_MR_PAGE_SIZES GENMASK_ULL(30, 12)

/* A send WQE slot holds the control, remote and atomic segments, then the
 * SGEs or an inline block (4-byte length, then the payload); an inline
 * block follows only the control and remote segments. These sizes are how
 * vp/host/verbs.cc sizes the rings and what CREATE_QP checks max_inline
 * against.
 */
#define MPRDMA_SQ_HDR_BYTES \
	(sizeof(struct mpr_wqe_ctrl) + sizeof(struct mpr_wqe_raddr) + \
	 sizeof(struct mpr_wqe_atomic))
#define MPRDMA_INLINE_HDR_BYTES \
	(sizeof(struct mpr_wqe_ctrl) + sizeof(struct mpr_wqe_raddr) + \
	 sizeof(struct mpr_wqe_inline))
/* UD: the address segment precedes the inline block instead. */
#define MPRDMA_UD_INLINE_HDR_BYTES \
	(sizeof(struct mpr_wqe_ctrl) + sizeof(struct mpr_wqe_ud) + \
	 sizeof(struct mpr_wqe_inline))

/* The NIC's MTU and QP state codes are those of the verbs; the code below
 * passes MTUs through and maps states through a table.
 */
static_assert((int)MPR_MTU_256 == (int)IB_MTU_256 &&
	      (int)MPR_MTU_4096 == (int)IB_MTU_4096);

struct mprdma_bit_map {
	u32 ib;
	u32 hw;
};

static const struct mprdma_bit_map mprdma_access_map[] = {
	{ IB_ACCESS_LOCAL_WRITE, MPR_ACCESS_LOCAL_WRITE },
	{ IB_ACCESS_REMOTE_WRITE, MPR_ACCESS_REMOTE_WRITE },
	{ IB_ACCESS_REMOTE_READ, MPR_ACCESS_REMOTE_READ },
	{ IB_ACCESS_REMOTE_ATOMIC, MPR_ACCESS_REMOTE_ATOMIC },
};

/* Every QP attribute the NIC takes; others are refused with -EOPNOTSUPP. */
static const struct mprdma_bit_map mprdma_qp_attr_map[] = {
	{ IB_QP_STATE, MPR_QP_ATTR_STATE },
	{ IB_QP_CUR_STATE, MPR_QP_ATTR_CUR_STATE },
	{ IB_QP_ACCESS_FLAGS, MPR_QP_ATTR_ACCESS_FLAGS },
	{ IB_QP_PKEY_INDEX, MPR_QP_ATTR_PKEY_INDEX },
	{ IB_QP_PORT, MPR_QP_ATTR_PORT },
	{ IB_QP_AV, MPR_QP_ATTR_AV },
	{ IB_QP_PATH_MTU, MPR_QP_ATTR_PATH_MTU },
	{ IB_QP_TIMEOUT, MPR_QP_ATTR_TIMEOUT },
	{ IB_QP_RETRY_CNT, MPR_QP_ATTR_RETRY_CNT },
	{ IB_QP_RNR_RETRY, MPR_QP_ATTR_RNR_RETRY },
	{ IB_QP_RQ_PSN, MPR_QP_ATTR_RQ_PSN },
	{ IB_QP_MAX_QP_RD_ATOMIC, MPR_QP_ATTR_MAX_QP_RD_ATOMIC },
	{ IB_QP_MIN_RNR_TIMER, MPR_QP_ATTR_MIN_RNR_TIMER },
	{ IB_QP_SQ_PSN, MPR_QP_ATTR_SQ_PSN },
	{ IB_QP_MAX_DEST_RD_ATOMIC, MPR_QP_ATTR_MAX_DEST_RD_ATOMIC },
	{ IB_QP_DEST_QPN, MPR_QP_ATTR_DEST_QPN },
	{ IB_QP_QKEY, MPR_QP_ATTR_QKEY },
};

static const u8 mprdma_qps_to_hw[] = {
	[IB_QPS_RESET] = MPR_QPS_RESET,
	[IB_QPS_INIT] = MPR_QPS_INIT,
	[IB_QPS_RTR] = MPR_QPS_RTR,
	[IB_QPS_RTS] = MPR_QPS_RTS,
	[IB_QPS_SQD] = MPR_QPS_SQD,
	[IB_QPS_SQE] = MPR_QPS_SQE,
	[IB_QPS_ERR] = MPR_QPS_ERR,
};

/* IB rates for the port's speed: the fastest not above the link's. */
static const struct {
	u32 mbps;
	u16 speed;
	u8 width;
} mprdma_speeds[] = {
	{ 400000, IB_SPEED_NDR, IB_WIDTH_4X },
	{ 200000, IB_SPEED_HDR, IB_WIDTH_4X },
	{ 100000, IB_SPEED_EDR, IB_WIDTH_4X },
	{ 50000, IB_SPEED_HDR, IB_WIDTH_1X },
	{ 40000, IB_SPEED_QDR, IB_WIDTH_4X },
	{ 25000, IB_SPEED_EDR, IB_WIDTH_1X },
	{ 20000, IB_SPEED_DDR, IB_WIDTH_4X },
	{ 10000, IB_SPEED_QDR, IB_WIDTH_1X },
	{ 5000, IB_SPEED_DDR, IB_WIDTH_1X },
};

/* Translate the bits of @in through @map; false if @in has a bit it lacks. */
static bool mprdma_map_bits(u32 in, const struct mprdma_bit_map *map,
			    size_t n, u32 *out)
{
	size_t i;

	*out = 0;
	for (i = 0; i < n; i++) {
		if (in & map[i].ib) {
			*out |= map[i].hw;
			in &= ~map[i].ib;
		}
	}
	return !in;
}

static u32 mprdma_unmap_bits(u32 hw, const struct mprdma_bit_map *map,
			     size_t n)
{
	u32 out = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (hw & map[i].hw)
			out |= map[i].ib;
	return out;
}

static enum ib_qp_state mprdma_qps_from_hw(u8 state)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mprdma_qps_to_hw); i++)
		if (mprdma_qps_to_hw[i] == state)
			return i;
	return IB_QPS_ERR;
}

/* The uverbs write ABI hands drivers the bytes after the core command:
 * this ABI has no driver input, so anything there must be zero.
 */
/*
 * A driver input of `size` bytes: an older provider sends less (the rest
 * reads as zero); a newer one may send more, which must be zero.
 */
static int mprdma_udata_cmd(struct ib_udata *udata, void *cmd, size_t size)
{
	size_t len = min(udata->inlen, size);

	memset(cmd, 0, size);
	if (len && ib_copy_from_udata(cmd, udata, len))
		return -EFAULT;
	if (udata->inlen > size &&
	    !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EOPNOTSUPP;
	return 0;
}

bool mprdma_udata_in_ok(struct ib_udata *udata)
{
	return !udata || !udata->inlen ||
	       ib_is_udata_cleared(udata, 0, udata->inlen);
}

int mprdma_copy_resp(struct ib_udata *udata, void *resp, size_t len)
{
	return ib_copy_to_udata(udata, resp, min(len, udata->outlen));
}

static int mprdma_clamp_int(u32 v)
{
	return min_t(u32, v, INT_MAX);
}

/* ---------------------------------------------------------------------- */
/* Device and port                                                          */
/* ---------------------------------------------------------------------- */

int mprdma_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibdev);
	const struct mpr_device_attr *a = &dev->attr;

	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;

	attr->fw_ver = a->fw_version;
	attr->sys_image_guid = ibdev->node_guid;
	attr->max_mr_size = a->max_mr_size;
	attr->page_size_cap = a->page_size_cap & MPRDMA_MR_PAGE_SIZES;
	attr->vendor_id = MPR_PCI_VENDOR_ID;
	attr->vendor_part_id = MPR_PCI_DEVICE_ID;
	attr->hw_ver = dev->pdev->revision;
	attr->max_qp = mprdma_clamp_int(a->max_qp);
	/* Queues are powers of two: the largest is the one below max_qp_wr. */
	attr->max_qp_wr = mprdma_clamp_int(rounddown_pow_of_two(a->max_qp_wr));
	attr->device_cap_flags = IB_DEVICE_CURR_QP_STATE_MOD |
				 IB_DEVICE_RC_RNR_NAK_GEN;
	attr->max_send_sge = mprdma_clamp_int(a->max_sge);
	attr->max_recv_sge = mprdma_clamp_int(a->max_sge);
	attr->max_sge_rd = mprdma_clamp_int(a->max_sge);
	attr->max_cq = mprdma_clamp_int(a->max_cq);
	attr->max_cqe = mprdma_clamp_int(rounddown_pow_of_two(a->max_cqe));
	attr->max_mr = mprdma_clamp_int(a->max_mr);
	attr->max_pd = mprdma_clamp_int(a->max_pd);
	attr->max_qp_rd_atom = mprdma_clamp_int(a->max_qp_rd_atom);
	attr->max_qp_init_rd_atom = attr->max_qp_rd_atom;
	attr->max_res_rd_atom =
		mprdma_clamp_int(min_t(u64, (u64)a->max_qp_rd_atom * a->max_qp,
				       U32_MAX));
	/* Atomic with respect to other atomics through this NIC only. */
	attr->atomic_cap = MPR_GET(CAPS, ATOMICS, a->cap_flags) ?
			   IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	attr->max_pkeys = 1;
	mprdma_srq_query_device(dev, attr);
	return 0;
}

static void mprdma_speed(u32 mbps, u16 *speed, u8 *width)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mprdma_speeds); i++) {
		if (mbps >= mprdma_speeds[i].mbps) {
			*speed = mprdma_speeds[i].speed;
			*width = mprdma_speeds[i].width;
			return;
		}
	}
	*speed = IB_SPEED_SDR;
	*width = IB_WIDTH_1X;
}

/*
 * Port counters (`rdma statistic`, /sys/class/infiniband/<dev>/ports/1/
 * hw_counters/): the NIC's, read with QUERY_COUNTERS (enum
 * mpr_port_counter, since the last device reset). Names follow mlx5's where
 * the meaning is the same.
 */
static const struct rdma_stat_desc mprdma_port_stats[] = {
	[MPR_CNT_TX_PACKETS].name = "tx_packets",
	[MPR_CNT_RX_PACKETS].name = "rx_packets",
	[MPR_CNT_TX_BYTES].name = "tx_bytes",
	[MPR_CNT_RX_BYTES].name = "rx_bytes",
	[MPR_CNT_RETRANSMITS].name = "retransmits",
	[MPR_CNT_LOCAL_ACK_TIMEOUTS].name = "local_ack_timeout_err",
	[MPR_CNT_NAKS_RECEIVED].name = "naks_received",
	[MPR_CNT_SEQ_NAKS_SENT].name = "out_of_sequence",
	[MPR_CNT_RNR_NAKS_SENT].name = "rnr_naks_sent",
	[MPR_CNT_DUPLICATE_REQUESTS].name = "duplicate_request",
	[MPR_CNT_RX_DROPS].name = "rx_drops",
	[MPR_CNT_ECN_MARKED_RX].name = "np_ecn_marked_roce_packets",
	[MPR_CNT_CNP_SENT].name = "np_cnp_sent",
	[MPR_CNT_CNP_HANDLED].name = "rp_cnp_handled",
	[MPR_CNT_ERROR_CQES].name = "error_cqes",
};

struct rdma_hw_stats *mprdma_alloc_hw_port_stats(struct ib_device *ibdev,
						 u32 port)
{
	BUILD_BUG_ON(ARRAY_SIZE(mprdma_port_stats) != MPR_CNT_NUM);
	return rdma_alloc_hw_stats_struct(mprdma_port_stats, MPR_CNT_NUM,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int mprdma_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			u32 port, int index)
{
	struct mprdma_dev *dev = to_mdev(ibdev);
	struct mpr_port_counters *c;
	int err, i;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	err = mprdma_cmd_query_counters(&dev->aq, c);
	if (!err)
		for (i = 0; i < MPR_CNT_NUM; i++)
			stats->value[i] = c->value[i];
	kfree(c);
	return err ?: MPR_CNT_NUM;
}

int mprdma_query_port(struct ib_device *ibdev, u32 port,
		      struct ib_port_attr *attr)
{
	struct mprdma_dev *dev = to_mdev(ibdev);
	struct mpr_port_attr p;
	bool active;
	int err;

	/* Asked each time: the NIC owns the link state. */
	err = mprdma_cmd_query_port(&dev->aq, &p);
	if (err)
		return err;

	active = p.state == MPR_PORT_ACTIVE;
	attr->state = active ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = active ? IB_PORT_PHYS_STATE_LINK_UP :
				    IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = p.max_mtu;
	attr->active_mtu = p.active_mtu;
	attr->phys_mtu = ib_mtu_enum_to_int(p.max_mtu);
	attr->gid_tbl_len = dev->attr.max_gids;
	attr->ip_gids = true;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = dev->attr.max_msg_size;
	attr->pkey_tbl_len = 1;
	mprdma_speed(p.speed_mbps, &attr->active_speed, &attr->active_width);
	return 0;
}

int mprdma_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable)
{
	struct mprdma_dev *dev = to_mdev(ibdev);

	immutable->pkey_tbl_len = 1;
	immutable->gid_tbl_len = dev->attr.max_gids;
	/* RoCE v1 and v2 GIDs, as docs/design/qemu-guests.md expects (the
	 * IPv4 v2 GID of a fresh interface is index 3); the NIC sends RoCEv2
	 * from either.
	 */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE |
				    RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

enum rdma_link_layer mprdma_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

void mprdma_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u32 fw = to_mdev(ibdev)->attr.fw_version;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.%u.%u", fw >> 16,
		 (fw >> 8) & 0xff, fw & 0xff);
}

int mprdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	/* The NIC sends P_Key 0xFFFF and checks none. */
	*pkey = 0xffff;
	return 0;
}

/* ib_core mirrors the netdev's addresses into the GID table; the NIC keeps
 * the same table at the same indices.
 */
int mprdma_add_gid(const struct ib_gid_attr *attr, void **context)
{
	struct mprdma_dev *dev = to_mdev(attr->device);

	return mprdma_cmd_set_gid(&dev->aq, attr->index, attr->gid.raw);
}

int mprdma_del_gid(const struct ib_gid_attr *attr, void **context)
{
	static const u8 zero_gid[sizeof(union ib_gid)];
	struct mprdma_dev *dev = to_mdev(attr->device);

	return mprdma_cmd_set_gid(&dev->aq, attr->index, zero_gid);
}

/* ---------------------------------------------------------------------- */
/* User contexts and mmap                                                   */
/* ---------------------------------------------------------------------- */

/*
 * A ring or record the NIC uses and the process maps. The pages come from
 * the linear map (dma_alloc_coherent() without an IOMMU), so the process can
 * map them by pfn; memory outside it is refused.
 */
struct mprdma_mmap_entry *
mprdma_dma_entry_alloc(struct mprdma_dev *dev, struct ib_ucontext *ibuctx,
		       size_t size)
{
	struct mprdma_mmap_entry *entry;
	int err;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return ERR_PTR(-ENOMEM);
	entry->type = MPRDMA_MMAP_DMA;
	entry->size = PAGE_ALIGN(size);
	/* Zeroed: the owner bits of a new ring read "not written yet". The
	 * size comes from user space: a ring beyond the page allocator's
	 * largest block fails with ENOMEM, without a kernel warning.
	 */
	entry->cpu_addr = dma_alloc_coherent(&dev->pdev->dev, entry->size,
					     &entry->dma_addr,
					     GFP_KERNEL | __GFP_NOWARN);
	if (!entry->cpu_addr) {
		err = -ENOMEM;
		goto err_free_entry;
	}
	if (!virt_addr_valid(entry->cpu_addr)) {
		dev_err_once(&dev->pdev->dev,
			     "coherent memory outside the linear map (an IOMMU?): cannot map rings to user space\n");
		err = -EOPNOTSUPP;
		goto err_free_dma;
	}
	entry->address = virt_to_phys(entry->cpu_addr);
	err = rdma_user_mmap_entry_insert(ibuctx, &entry->rdma_entry,
					  entry->size);
	if (err)
		goto err_free_dma;
	return entry;

err_free_dma:
	dma_free_coherent(&dev->pdev->dev, entry->size, entry->cpu_addr,
			  entry->dma_addr);
err_free_entry:
	kfree(entry);
	return ERR_PTR(err);
}

/* The memory goes in mprdma_mmap_free(), once no mapping is left. */
void mprdma_entry_remove(struct mprdma_mmap_entry *entry)
{
	rdma_user_mmap_entry_remove(&entry->rdma_entry);
}

int mprdma_alloc_ucontext(struct ib_ucontext *ibuctx, struct ib_udata *udata)
{
	struct mprdma_ucontext *uctx = to_muctx(ibuctx);
	struct mprdma_dev *dev = to_mdev(ibuctx->device);
	struct mpr_alloc_ucontext_resp resp = {};
	struct mprdma_mmap_entry *entry;
	int index;
	int err;

	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;

	/* Page 0 is the kernel's (EQ doorbells). */
	index = ida_alloc_range(&dev->uar_ida, 1, dev->num_uar_pages - 1,
				GFP_KERNEL);
	if (index < 0)
		return index;
	uctx->uar_index = index;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry) {
		err = -ENOMEM;
		goto err_free_uar;
	}
	entry->type = MPRDMA_MMAP_UAR;
	entry->size = PAGE_SIZE;
	entry->address = dev->bar2_start + (phys_addr_t)index * MPR_UAR_PAGE_SIZE;
	err = rdma_user_mmap_entry_insert(ibuctx, &entry->rdma_entry,
					  entry->size);
	if (err) {
		kfree(entry);
		goto err_free_uar;
	}
	uctx->uar_entry = entry;

	resp.abi_version = MPR_UVERBS_ABI_VERSION;
	resp.uar_index = index;
	resp.uar_mmap_key = rdma_user_mmap_get_offset(&entry->rdma_entry);
	resp.max_inline = dev->attr.max_inline;
	resp.max_sge = dev->attr.max_sge;
	resp.max_qp_wr = rounddown_pow_of_two(dev->attr.max_qp_wr);
	resp.max_cqe = rounddown_pow_of_two(dev->attr.max_cqe);
	if (MPR_GET(CAPS, WQE_BY_MMIO, dev->attr.cap_flags))
		resp.flags |= MPR_UCTX_F_WQE_BY_MMIO;
	err = mprdma_copy_resp(udata, &resp, sizeof(resp));
	if (err)
		goto err_remove_entry;
	return 0;

err_remove_entry:
	mprdma_entry_remove(entry);
err_free_uar:
	ida_free(&dev->uar_ida, index);
	return err;
}

/*
 * Called when the process's file is released, or after disassociation: every
 * mapping is gone and every QP and CQ bound to the UAR page destroyed.
 */
void mprdma_dealloc_ucontext(struct ib_ucontext *ibuctx)
{
	struct mprdma_ucontext *uctx = to_muctx(ibuctx);
	struct mprdma_dev *dev = to_mdev(ibuctx->device);

	mprdma_entry_remove(uctx->uar_entry);
	ida_free(&dev->uar_ida, uctx->uar_index);
}

/*
 * Nothing of the device needs undoing before ib_core zaps the process's
 * mappings and destroys its objects; providing the hook lets the device be
 * removed (rmmod) while processes still hold contexts, instead of waiting
 * for them to exit.
 */
void mprdma_disassociate_ucontext(struct ib_ucontext *ibuctx)
{
}

int mprdma_mmap(struct ib_ucontext *ibuctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct mprdma_mmap_entry *entry;
	pgprot_t prot;
	int err;

	/* Also checks that the length is the entry's, rounded to pages. */
	rdma_entry = rdma_user_mmap_entry_get(ibuctx, vma);
	if (!rdma_entry)
		return -EINVAL;
	entry = to_mentry(rdma_entry);

	/* Doorbells must reach the device store by store; rings live in
	 * coherent memory, cacheable like the kernel's view of it.
	 */
	if (entry->type == MPRDMA_MMAP_UAR)
		prot = pgprot_noncached(vma->vm_page_prot);
	else
		prot = vma->vm_page_prot;
	err = rdma_user_mmap_io(ibuctx, vma, PHYS_PFN(entry->address),
				entry->size, prot, rdma_entry);
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

void mprdma_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct mprdma_mmap_entry *entry = to_mentry(rdma_entry);
	struct mprdma_dev *dev = to_mdev(rdma_entry->ucontext->device);

	if (entry->type == MPRDMA_MMAP_DMA && !entry->leak)
		dma_free_coherent(&dev->pdev->dev, entry->size, entry->cpu_addr,
				  entry->dma_addr);
	kfree(entry);
}

/* ---------------------------------------------------------------------- */
/* Protection domains and memory regions                                    */
/* ---------------------------------------------------------------------- */

int mprdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibpd->device);

	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;
	return mprdma_cmd_alloc_pd(&dev->aq, &to_mpd(ibpd)->pdn);
}

int mprdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibpd->device);
	u32 pdn = to_mpd(ibpd)->pdn;
	int err;

	/* ib_core frees the PD whatever is returned here; the NIC's PD, if it
	 * survives, holds no memory of the host.
	 */
	err = mprdma_cmd_dealloc_pd(&dev->aq, pdn);
	if (err)
		ibdev_warn(&dev->ibdev, "DEALLOC_PD %u failed: %d\n", pdn, err);
	return 0;
}

struct ib_mr *mprdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access,
				 struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibpd->device);
	struct mpr_cmd_reg_mr in = {};
	struct ib_block_iter biter;
	struct mprdma_mr *mr;
	struct mpr_mtt *mtt;
	unsigned long pgsz;
	dma_addr_t mtt_dma;
	size_t mtt_bytes;
	size_t npages;
	size_t i = 0;
	u32 hw_access;
	int err;

	if (!mprdma_udata_in_ok(udata))
		return ERR_PTR(-EINVAL);
	/* Optional flags (relaxed ordering) may be ignored by definition. */
	if (!mprdma_map_bits(access & ~IB_ACCESS_OPTIONAL, mprdma_access_map,
			     ARRAY_SIZE(mprdma_access_map), &hw_access))
		return ERR_PTR(-EOPNOTSUPP);
	if ((hw_access & MPR_ACCESS_REMOTE_ATOMIC) &&
	    !MPR_GET(CAPS, ATOMICS, dev->attr.cap_flags))
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || length > dev->attr.max_mr_size)
		return ERR_PTR(-EINVAL);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_free_mr;
	}

	/* The largest page size that maps the region: fewer MTT entries. */
	pgsz = ib_umem_find_best_pgsz(mr->umem,
				      dev->attr.page_size_cap &
				      MPRDMA_MR_PAGE_SIZES, virt_addr);
	if (!pgsz) {
		err = -EINVAL;
		goto err_release;
	}
	npages = ib_umem_num_dma_blocks(mr->umem, pgsz);
	if (npages > U32_MAX / sizeof(*mtt)) {
		err = -EINVAL;
		goto err_release;
	}
	/* The MTT goes to the NIC as one input mailbox: contiguous memory,
	 * sized by user space (a failure is ENOMEM, not a kernel warning).
	 */
	mtt_bytes = npages * sizeof(*mtt);
	mtt = dma_alloc_coherent(&dev->pdev->dev, mtt_bytes, &mtt_dma,
				 GFP_KERNEL | __GFP_NOWARN);
	if (!mtt) {
		err = -ENOMEM;
		goto err_release;
	}
	rdma_umem_for_each_dma_block(mr->umem, &biter, pgsz)
		mtt[i++].pa = rdma_block_iter_dma_address(&biter);

	in.iova = virt_addr;
	in.length = length;
	in.pdn = to_mpd(ibpd)->pdn;
	in.access = hw_access;
	in.page_shift = ilog2(pgsz);
	in.num_pages = npages;
	err = mprdma_cmd_reg_mr(&dev->aq, &in, mtt_dma, &mr->ibmr.lkey);
	/* Read by the NIC before it completed the command. */
	dma_free_coherent(&dev->pdev->dev, mtt_bytes, mtt, mtt_dma);
	if (err)
		goto err_release;
	/* One key serves as both. */
	mr->ibmr.rkey = mr->ibmr.lkey;
	return &mr->ibmr;

err_release:
	ib_umem_release(mr->umem);
err_free_mr:
	kfree(mr);
	return ERR_PTR(err);
}

int mprdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibmr->device);
	struct mprdma_mr *mr = to_mmr(ibmr);
	int err;

	err = mprdma_cmd_dereg_mr(&dev->aq, ibmr->lkey);
	if (err)
		/* The NIC may still write these pages: keep them pinned. */
		ibdev_warn(&dev->ibdev,
			   "DEREG_MR %#x failed (%d): its pages stay pinned\n",
			   ibmr->lkey, err);
	else
		ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Completion queues                                                        */
/* ---------------------------------------------------------------------- */

/* A CQ of a kernel consumer: 32-byte CQEs, polled by mprdma_poll_cq(). */
static int mprdma_create_kernel_cq(struct mprdma_dev *dev,
				   struct mprdma_cq *cq,
				   const struct ib_cq_init_attr *attr)
{
	struct mpr_cmd_create_cq in = {};
	int err;

	if (attr->flags || attr->comp_vector)
		return -EINVAL;
	if (attr->cqe < 1 || attr->cqe > dev->attr.max_cqe)
		return -EINVAL;
	cq->log_size = max(1, order_base_2(attr->cqe));
	if (BIT_ULL(cq->log_size) > dev->attr.max_cqe)
		return -EINVAL;
	cq->kernel = true;
	spin_lock_init(&cq->lock);
	cq->ci = 0;
	err = mprdma_kbuf_alloc(dev, &cq->kring,
				BIT(cq->log_size) * sizeof(struct mpr_cqe));
	if (err)
		return err;
	err = mprdma_kbuf_alloc(dev, &cq->kdbrec, sizeof(u32));
	if (err)
		goto err_free_ring;

	in.base = cq->kring.dma;
	in.dbrec = cq->kdbrec.dma;
	in.log_size = cq->log_size;
	in.eqn = dev->eq.eqn;
	in.uar_index = 0;	/* the kernel's page */
	err = mprdma_cmd_create_cq(&dev->aq, &in, &cq->cqn);
	if (err)
		goto err_free_dbrec;
	err = xa_err(xa_store(&dev->cqs, cq->cqn, cq, GFP_KERNEL));
	if (err)
		goto err_destroy_cq;
	cq->ibcq.cqe = BIT(cq->log_size);
	return 0;

err_destroy_cq:
	if (mprdma_cmd_destroy_cq(&dev->aq, cq->cqn)) {
		cq->kring.leak = true;
		cq->kdbrec.leak = true;
	}
err_free_dbrec:
	mprdma_kbuf_free(dev, &cq->kdbrec);
err_free_ring:
	mprdma_kbuf_free(dev, &cq->kring);
	return err;
}

int mprdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata)
{
	struct mprdma_ucontext *uctx = rdma_udata_to_drv_context(udata,
		struct mprdma_ucontext, ibucontext);
	struct mprdma_dev *dev = to_mdev(ibcq->device);
	struct mprdma_cq *cq = to_mcq(ibcq);
	struct mpr_create_cq_resp resp = {};
	struct mpr_create_cq_cmd ucmd;
	struct mpr_cmd_create_cq in = {};
	unsigned int log_slot;
	size_t ring_bytes;
	int err;

	if (!udata)
		return mprdma_create_kernel_cq(dev, cq, attr);
	if (attr->flags)
		return -EINVAL;
	err = mprdma_udata_cmd(udata, &ucmd, sizeof(ucmd));
	if (err)
		return err;
	/* The slot size sets the ring's; the NIC checks the rest (inline
	 * receive needs CAPS.INLINE_RECV and slots of 64 bytes or more). */
	if (memchr_inv(ucmd.reserved, 0, sizeof(ucmd.reserved)) ||
	    (ucmd.log_cqe_size && (ucmd.log_cqe_size < MPR_CQ_LOG_CQE_SIZE_MIN ||
				   ucmd.log_cqe_size > MPR_CQ_LOG_CQE_SIZE_MAX)))
		return -EINVAL;
	log_slot = ucmd.log_cqe_size ?: MPR_CQ_LOG_CQE_SIZE_MIN;
	if (attr->cqe < 1 || attr->cqe > dev->attr.max_cqe)
		return -EINVAL;
	cq->log_size = max(1, order_base_2(attr->cqe));
	if (BIT_ULL(cq->log_size) > dev->attr.max_cqe)
		return -EINVAL;
	ring_bytes = (size_t)1 << (cq->log_size + log_slot);

	cq->ring = mprdma_dma_entry_alloc(dev, &uctx->ibucontext, ring_bytes);
	if (IS_ERR(cq->ring))
		return PTR_ERR(cq->ring);
	/* A page of its own: the process stores its consumer index in the
	 * first 4 bytes, and shares the page with no other CQ.
	 */
	cq->dbrec = mprdma_dma_entry_alloc(dev, &uctx->ibucontext, PAGE_SIZE);
	if (IS_ERR(cq->dbrec)) {
		err = PTR_ERR(cq->dbrec);
		goto err_remove_ring;
	}

	in.base = cq->ring->dma_addr;
	in.dbrec = cq->dbrec->dma_addr;
	in.log_size = cq->log_size;
	in.eqn = dev->eq.eqn;
	in.uar_index = uctx->uar_index;
	in.log_cqe_size = ucmd.log_cqe_size;
	in.flags = ucmd.flags;
	err = mprdma_cmd_create_cq(&dev->aq, &in, &cq->cqn);
	if (err)
		goto err_remove_dbrec;
	err = xa_err(xa_store(&dev->cqs, cq->cqn, cq, GFP_KERNEL));
	if (err)
		goto err_destroy_cq;

	ibcq->cqe = BIT(cq->log_size);
	resp.cqn = cq->cqn;
	resp.log_size = cq->log_size;
	resp.ring_mmap_key = rdma_user_mmap_get_offset(&cq->ring->rdma_entry);
	resp.dbrec_mmap_key = rdma_user_mmap_get_offset(&cq->dbrec->rdma_entry);
	resp.ring_bytes = ring_bytes;
	err = mprdma_copy_resp(udata, &resp, sizeof(resp));
	if (err)
		goto err_erase;
	return 0;

err_erase:
	xa_erase(&dev->cqs, cq->cqn);
	synchronize_irq(dev->eq.irq);
err_destroy_cq:
	if (mprdma_cmd_destroy_cq(&dev->aq, cq->cqn)) {
		cq->ring->leak = true;
		cq->dbrec->leak = true;
	}
err_remove_dbrec:
	mprdma_entry_remove(cq->dbrec);
err_remove_ring:
	mprdma_entry_remove(cq->ring);
	return err;
}

int mprdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibcq->device);
	struct mprdma_cq *cq = to_mcq(ibcq);
	int err;

	/* No event handler may use the CQ once this returns. */
	xa_erase(&dev->cqs, cq->cqn);
	synchronize_irq(dev->eq.irq);

	err = mprdma_cmd_destroy_cq(&dev->aq, cq->cqn);
	if (err) {
		ibdev_warn(&dev->ibdev,
			   "DESTROY_CQ %u failed (%d): its ring stays allocated\n",
			   cq->cqn, err);
		if (cq->kernel) {
			cq->kring.leak = true;
			cq->kdbrec.leak = true;
		} else {
			cq->ring->leak = true;
			cq->dbrec->leak = true;
		}
	}
	if (cq->kernel) {
		mprdma_kbuf_free(dev, &cq->kdbrec);
		mprdma_kbuf_free(dev, &cq->kring);
		return 0;
	}
	mprdma_entry_remove(cq->dbrec);
	mprdma_entry_remove(cq->ring);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Queue pairs                                                              */
/* ---------------------------------------------------------------------- */

/*
 * Ring geometry from the requested capabilities, computed as
 * vp/host/verbs.cc does, and the capabilities the geometry grants (at least
 * those requested).
 */
static int mprdma_qp_set_sizes(struct mprdma_dev *dev,
			       const struct ib_qp_cap *req, bool srq,
			       struct mprdma_qp *qp)
{
	const struct mpr_device_attr *a = &dev->attr;
	u32 max_log_size = ilog2(a->max_qp_wr);
	u32 body;
	u32 sq_slot;
	u32 rq_slot;

	if (req->max_send_wr > a->max_qp_wr || req->max_recv_wr > a->max_qp_wr ||
	    req->max_send_sge > a->max_sge || req->max_recv_sge > a->max_sge ||
	    req->max_inline_data > a->max_inline)
		return -EINVAL;

	qp->sq_log_size = max(1, order_base_2(req->max_send_wr));
	qp->rq_log_size = max(1, order_base_2(req->max_recv_wr));
	if (qp->sq_log_size > max_log_size || qp->rq_log_size > max_log_size)
		return -EINVAL;

	body = max_t(u32, req->max_send_sge * sizeof(struct mpr_wqe_data),
		     sizeof(struct mpr_wqe_inline) + req->max_inline_data);
	qp->sq_log_stride = max_t(u32, MPR_SQ_LOG_STRIDE_MIN,
				  order_base_2(MPRDMA_SQ_HDR_BYTES + body));
	qp->rq_log_stride = max_t(u32, MPR_RQ_LOG_STRIDE_MIN,
				  order_base_2(req->max_recv_sge *
					       sizeof(struct mpr_wqe_data)));
	if (qp->sq_log_stride > MPR_SQ_LOG_STRIDE_MAX ||
	    qp->rq_log_stride > MPR_RQ_LOG_STRIDE_MAX)
		return -EINVAL;

	sq_slot = BIT(qp->sq_log_stride);
	rq_slot = BIT(qp->rq_log_stride);
	qp->cap.max_send_wr = BIT(qp->sq_log_size);
	qp->cap.max_recv_wr = BIT(qp->rq_log_size);
	qp->cap.max_send_sge = min_t(u32, a->max_sge,
				     (sq_slot - MPRDMA_SQ_HDR_BYTES) /
				     sizeof(struct mpr_wqe_data));
	qp->cap.max_recv_sge = min_t(u32, a->max_sge,
				     rq_slot / sizeof(struct mpr_wqe_data));
	qp->cap.max_inline_data =
		min_t(u32, a->max_inline,
		      sq_slot - (qp->type == IB_QPT_UD || qp->type == IB_QPT_GSI ?
				 MPRDMA_UD_INLINE_HDR_BYTES :
				 MPRDMA_INLINE_HDR_BYTES));
	/* A QP of an SRQ has no receive queue. */
	if (srq) {
		qp->rq_log_size = 0;
		qp->rq_log_stride = 0;
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	}
	return 0;
}

/*
 * The provider's create_qp input (struct mpr_create_qp_cmd): the QP's
 * transport engine. An older provider sends less (the rest reads as zero);
 * a newer one may send more, which must be zero. The NIC checks the engine
 * against what it offers.
 */
static int mprdma_qp_ucmd(struct ib_udata *udata, enum ib_qp_type type,
			  struct mpr_create_qp_cmd *ucmd)
{
	int err = mprdma_udata_cmd(udata, ucmd, sizeof(*ucmd));

	if (err)
		return err;
	if (memchr_inv(ucmd->reserved, 0, sizeof(ucmd->reserved)))
		return -EINVAL;
	if (type != IB_QPT_RC && ucmd->transport != MPR_TRANSPORT_DEFAULT)
		return -EINVAL;
	return 0;
}

/* The NIC's QP types are ib_core's numbers; only these four exist. */
static u8 mprdma_qpt_to_hw(enum ib_qp_type type)
{
	switch (type) {
	case IB_QPT_GSI:
		return MPR_QPT_GSI;
	case IB_QPT_UD:
		return MPR_QPT_UD;
	case IB_QPT_UC:
		return MPR_QPT_UC;
	default:
		return MPR_QPT_RC;
	}
}

static void mprdma_free_kernel_qp(struct mprdma_dev *dev,
				  struct mprdma_qp *qp)
{
	mprdma_kbuf_free(dev, &qp->krq);
	mprdma_kbuf_free(dev, &qp->ksq);
	kfree(qp->rq_wrid);
	kfree(qp->sq_wrid);
}

/*
 * A QP of a kernel consumer: UD, or the port's GSI QP (QP1, which ib_mad
 * creates for the connection manager's MADs). The NIC's GSI QP has an
 * ordinary handle and answers to QPN 1 on the wire; ib_core sees QPN 1.
 * No inline data: kernel consumers post buffers with the DMA MR's lkey.
 */
static int mprdma_create_kernel_qp(struct mprdma_dev *dev,
				   struct mprdma_qp *qp,
				   struct ib_qp_init_attr *init_attr)
{
	struct mpr_cmd_create_qp in = {};
	int err;

	if ((init_attr->qp_type != IB_QPT_UD &&
	     init_attr->qp_type != IB_QPT_GSI) ||
	    init_attr->srq || init_attr->create_flags ||
	    init_attr->cap.max_inline_data)
		return -EOPNOTSUPP;
	if (!init_attr->send_cq || !init_attr->recv_cq ||
	    !to_mcq(init_attr->send_cq)->kernel ||
	    !to_mcq(init_attr->recv_cq)->kernel)
		return -EINVAL;
	qp->type = init_attr->qp_type;
	qp->kernel = true;
	err = mprdma_qp_set_sizes(dev, &init_attr->cap, false, qp);
	if (err)
		return err;
	qp->cap.max_inline_data = 0;
	mutex_init(&qp->lock);
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);
	qp->state = IB_QPS_RESET;
	qp->sig_all = init_attr->sq_sig_type == IB_SIGNAL_ALL_WR;

	err = -ENOMEM;
	qp->sq_wrid = kcalloc(BIT(qp->sq_log_size), sizeof(u64), GFP_KERNEL);
	qp->rq_wrid = kcalloc(BIT(qp->rq_log_size), sizeof(u64), GFP_KERNEL);
	if (!qp->sq_wrid || !qp->rq_wrid)
		goto err_free;
	err = mprdma_kbuf_alloc(dev, &qp->ksq,
				BIT(qp->sq_log_size + qp->sq_log_stride));
	if (err)
		goto err_free;
	err = mprdma_kbuf_alloc(dev, &qp->krq,
				BIT(qp->rq_log_size + qp->rq_log_stride));
	if (err)
		goto err_free;

	in.sq_base = qp->ksq.dma;
	in.rq_base = qp->krq.dma;
	in.pdn = to_mpd(qp->ibqp.pd)->pdn;
	in.send_cqn = to_mcq(init_attr->send_cq)->cqn;
	in.recv_cqn = to_mcq(init_attr->recv_cq)->cqn;
	in.uar_index = 0;	/* the kernel's page */
	in.qp_type = mprdma_qpt_to_hw(qp->type);
	in.sq_log_size = qp->sq_log_size;
	in.sq_log_stride = qp->sq_log_stride;
	in.rq_log_size = qp->rq_log_size;
	in.rq_log_stride = qp->rq_log_stride;
	in.sq_sig_all = qp->sig_all;
	err = mprdma_cmd_create_qp(&dev->aq, &in, &qp->qpn);
	if (err)
		goto err_free;
	qp->ibqp.qp_num = qp->type == IB_QPT_GSI ? 1 : qp->qpn;
	err = xa_err(xa_store(&dev->qps, qp->qpn, qp, GFP_KERNEL));
	if (err)
		goto err_destroy_qp;
	init_attr->cap = qp->cap;
	return 0;

err_destroy_qp:
	if (mprdma_cmd_destroy_qp(&dev->aq, qp->qpn)) {
		qp->ksq.leak = true;
		qp->krq.leak = true;
	}
err_free:
	mprdma_free_kernel_qp(dev, qp);
	mutex_destroy(&qp->lock);
	return err;
}

int mprdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		     struct ib_udata *udata)
{
	struct mprdma_ucontext *uctx = rdma_udata_to_drv_context(udata,
		struct mprdma_ucontext, ibucontext);
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mpr_create_qp_resp resp = {};
	struct mpr_create_qp_cmd ucmd;
	struct mpr_cmd_create_qp in = {};
	struct mprdma_srq *srq = NULL;
	size_t sq_bytes;
	size_t rq_bytes = 0;
	int err;

	if (!udata)
		return mprdma_create_kernel_qp(dev, qp, init_attr);
	if ((init_attr->qp_type != IB_QPT_RC &&
	     init_attr->qp_type != IB_QPT_UC &&
	     init_attr->qp_type != IB_QPT_UD) ||
	    init_attr->create_flags)
		return -EOPNOTSUPP;
	/* RECVs from an SRQ (of the QP's PD: the NIC checks): no RQ ring,
	 * and the receive caps are ignored (granted as 0).
	 */
	if (init_attr->srq) {
		srq = to_msrq(init_attr->srq);
		init_attr->cap.max_recv_wr = 0;
		init_attr->cap.max_recv_sge = 0;
	}
	if (!init_attr->send_cq || !init_attr->recv_cq)
		return -EINVAL;
	err = mprdma_qp_ucmd(udata, init_attr->qp_type, &ucmd);
	if (err)
		return err;

	qp->type = init_attr->qp_type;
	err = mprdma_qp_set_sizes(dev, &init_attr->cap, !!srq, qp);
	if (err)
		return err;
	mutex_init(&qp->lock);
	qp->state = IB_QPS_RESET;
	qp->sig_all = init_attr->sq_sig_type == IB_SIGNAL_ALL_WR;

	sq_bytes = BIT(qp->sq_log_size + qp->sq_log_stride);
	qp->sq = mprdma_dma_entry_alloc(dev, &uctx->ibucontext, sq_bytes);
	if (IS_ERR(qp->sq)) {
		err = PTR_ERR(qp->sq);
		goto err_destroy_lock;
	}
	if (srq) {
		qp->rq = NULL;
		in.flags = MPR_CREATE_QP_F_SRQ;
		in.srqn = srq->srqn;
	} else {
		rq_bytes = BIT(qp->rq_log_size + qp->rq_log_stride);
		qp->rq = mprdma_dma_entry_alloc(dev, &uctx->ibucontext,
						rq_bytes);
		if (IS_ERR(qp->rq)) {
			err = PTR_ERR(qp->rq);
			goto err_remove_sq;
		}
		in.rq_base = qp->rq->dma_addr;
	}

	in.sq_base = qp->sq->dma_addr;
	in.pdn = to_mpd(ibqp->pd)->pdn;
	in.send_cqn = to_mcq(init_attr->send_cq)->cqn;
	in.recv_cqn = to_mcq(init_attr->recv_cq)->cqn;
	in.uar_index = uctx->uar_index;
	in.qp_type = mprdma_qpt_to_hw(qp->type);
	in.sq_log_size = qp->sq_log_size;
	in.sq_log_stride = qp->sq_log_stride;
	in.rq_log_size = qp->rq_log_size;
	in.rq_log_stride = qp->rq_log_stride;
	in.transport = ucmd.transport;
	in.sq_sig_all = qp->sig_all;
	/* The NIC checks inline payloads against the granted size. */
	in.max_inline = qp->cap.max_inline_data;
	err = mprdma_cmd_create_qp(&dev->aq, &in, &qp->qpn);
	if (err)
		goto err_remove_rq;
	ibqp->qp_num = qp->qpn;
	err = xa_err(xa_store(&dev->qps, qp->qpn, qp, GFP_KERNEL));
	if (err)
		goto err_destroy_qp;

	init_attr->cap = qp->cap;
	resp.qpn = qp->qpn;
	resp.sq_log_size = qp->sq_log_size;
	resp.sq_log_stride = qp->sq_log_stride;
	resp.rq_log_size = qp->rq_log_size;
	resp.rq_log_stride = qp->rq_log_stride;
	resp.sq_mmap_key = rdma_user_mmap_get_offset(&qp->sq->rdma_entry);
	if (qp->rq)
		resp.rq_mmap_key =
			rdma_user_mmap_get_offset(&qp->rq->rdma_entry);
	resp.sq_bytes = sq_bytes;
	resp.rq_bytes = rq_bytes;
	resp.max_inline = qp->cap.max_inline_data;
	resp.max_send_sge = qp->cap.max_send_sge;
	resp.max_recv_sge = qp->cap.max_recv_sge;
	err = mprdma_copy_resp(udata, &resp, sizeof(resp));
	if (err)
		goto err_erase;
	return 0;

err_erase:
	xa_erase(&dev->qps, qp->qpn);
	synchronize_irq(dev->eq.irq);
err_destroy_qp:
	if (mprdma_cmd_destroy_qp(&dev->aq, qp->qpn)) {
		qp->sq->leak = true;
		if (qp->rq)
			qp->rq->leak = true;
	}
err_remove_rq:
	if (qp->rq)
		mprdma_entry_remove(qp->rq);
err_remove_sq:
	mprdma_entry_remove(qp->sq);
err_destroy_lock:
	mutex_destroy(&qp->lock);
	return err;
}

static int mprdma_av_to_hw(const struct rdma_ah_attr *ah,
			   struct mpr_qp_attr *out)
{
	const struct ib_global_route *grh;

	/* RoCE needs the GRH: it carries the addresses of the IP header. */
	if (ah->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(ah) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(ah);
	/* The NIC's GID table mirrors ib_core's index for index. */
	out->sgid_index = grh->sgid_index;
	out->hop_limit = grh->hop_limit;
	out->traffic_class = grh->traffic_class;
	/* Without a flow label the NIC derives the port from the QPNs. */
	if (grh->flow_label)
		out->udp_sport = rdma_flow_label_to_udp_sport(grh->flow_label);
	memcpy(out->dgid, grh->dgid.raw, sizeof(out->dgid));
	/* Resolved by ib_core (ARP on the bound netdev) for user QPs. */
	memcpy(out->dmac, ah->roce.dmac, sizeof(out->dmac));
	return 0;
}

/* Only the fields whose bit is in attr_mask are set: the NIC reads no other. */
static int mprdma_qp_attr_to_hw(const struct ib_qp_attr *attr, int mask,
				enum ib_qp_state cur, enum ib_qp_state new,
				struct mpr_qp_attr *out)
{
	int err;

	if (!mprdma_map_bits(mask, mprdma_qp_attr_map,
			     ARRAY_SIZE(mprdma_qp_attr_map), &out->attr_mask))
		return -EOPNOTSUPP;
	if (mask & IB_QP_STATE)
		out->qp_state = mprdma_qps_to_hw[new];
	if (mask & IB_QP_CUR_STATE)
		out->cur_state = mprdma_qps_to_hw[cur];
	if ((mask & IB_QP_ACCESS_FLAGS) &&
	    !mprdma_map_bits(attr->qp_access_flags, mprdma_access_map,
			     ARRAY_SIZE(mprdma_access_map), &out->access_flags))
		return -EOPNOTSUPP;
	if (mask & IB_QP_PKEY_INDEX)
		out->pkey_index = attr->pkey_index;
	if (mask & IB_QP_PORT)
		out->port_num = attr->port_num;
	if (mask & IB_QP_AV) {
		err = mprdma_av_to_hw(&attr->ah_attr, out);
		if (err)
			return err;
	}
	if (mask & IB_QP_PATH_MTU)
		out->path_mtu = attr->path_mtu;
	if (mask & IB_QP_TIMEOUT)
		out->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		out->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		out->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_RQ_PSN)
		out->rq_psn = attr->rq_psn;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		out->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		out->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_SQ_PSN)
		out->sq_psn = attr->sq_psn;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		out->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_DEST_QPN)
		out->dest_qpn = attr->dest_qp_num;
	if (mask & IB_QP_QKEY)
		out->qkey = attr->qkey;
	return 0;
}

int mprdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int attr_mask, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mpr_qp_attr in = {};
	enum ib_qp_state cur;
	enum ib_qp_state new;
	int err;

	if (!mprdma_udata_in_ok(udata))
		return -EINVAL;

	mutex_lock(&qp->lock);
	cur = attr_mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	new = attr_mask & IB_QP_STATE ? attr->qp_state : cur;
	if (!ib_modify_qp_is_ok(cur, new, qp->type, attr_mask)) {
		err = -EINVAL;
		goto out_unlock;
	}
	if (new == IB_QPS_SQD || new == IB_QPS_SQE) {
		err = -EOPNOTSUPP;
		goto out_unlock;
	}
	err = mprdma_qp_attr_to_hw(attr, attr_mask, cur, new, &in);
	if (err)
		goto out_unlock;
	/* ib_core gives a GSI QP no port (it has the one it was created
	 * on); the NIC's datagram rules ask for it on RESET to INIT.
	 */
	if (qp->type == IB_QPT_GSI && cur == IB_QPS_RESET &&
	    new == IB_QPS_INIT) {
		in.attr_mask |= MPR_QP_ATTR_PORT;
		in.port_num = MPRDMA_PORT;
	}
	err = mprdma_cmd_modify_qp(&dev->aq, qp->qpn, &in);
	if (!err)
		WRITE_ONCE(qp->state, new);

out_unlock:
	mutex_unlock(&qp->lock);
	return err;
}

int mprdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_qp_init_attr *init_attr)
{
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	struct mpr_qp_attr out;
	enum ib_qp_state state;
	int err;

	mutex_lock(&qp->lock);
	err = mprdma_cmd_query_qp(&dev->aq, qp->qpn, &out);
	if (err)
		goto out_unlock;
	/* The NIC moves a QP to ERR on its own after fatal errors. */
	state = mprdma_qps_from_hw(out.qp_state);
	qp->state = state;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	attr->cur_qp_state = state;
	attr->path_mtu = out.path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qp_access_flags = mprdma_unmap_bits(out.access_flags,
						  mprdma_access_map,
						  ARRAY_SIZE(mprdma_access_map));
	attr->pkey_index = out.pkey_index;
	attr->port_num = MPRDMA_PORT;
	attr->sq_psn = out.sq_psn;
	attr->rq_psn = out.rq_psn;
	attr->dest_qp_num = out.dest_qpn;
	attr->timeout = out.timeout;
	attr->retry_cnt = out.retry_cnt;
	attr->rnr_retry = out.rnr_retry;
	attr->min_rnr_timer = out.min_rnr_timer;
	attr->max_rd_atomic = out.max_rd_atomic;
	attr->max_dest_rd_atomic = out.max_dest_rd_atomic;
	attr->qkey = out.qkey;
	attr->cap = qp->cap;
	attr->ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr->ah_attr, MPRDMA_PORT);
	rdma_ah_set_grh(&attr->ah_attr, NULL, 0, out.sgid_index, out.hop_limit,
			out.traffic_class);
	rdma_ah_set_dgid_raw(&attr->ah_attr, out.dgid);
	memcpy(attr->ah_attr.roce.dmac, out.dmac, ETH_ALEN);

	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_type = qp->type;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR :
					       IB_SIGNAL_REQ_WR;

out_unlock:
	mutex_unlock(&qp->lock);
	return err;
}

/* ---------------------------------------------------------------------- */
/* Address handles (UD)                                                     */
/* ---------------------------------------------------------------------- */

/*
 * ib_core has resolved the RoCE destination MAC (ARP on the bound netdev)
 * before it calls this for a user AH; the provider builds the UD address
 * segment of every WQE from its own attributes and this MAC. Kernel
 * consumers resolve it themselves (ib_cm from the path or the received
 * GRH); their AH keeps the address segment. Never sleeps: ib_cm creates
 * AHs under spinlocks.
 */
int mprdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		     struct ib_udata *udata)
{
	const struct rdma_ah_attr *ah = init_attr->ah_attr;
	struct mprdma_ah *mah = container_of(ibah, struct mprdma_ah, ibah);
	const struct ib_global_route *grh;
	const struct ib_gid_attr *sgid;
	struct mpr_create_ah_resp resp = {};

	if (ah->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(ah) & IB_AH_GRH) ||
	    rdma_ah_get_port_num(ah) != MPRDMA_PORT)
		return -EINVAL;
	/*
	 * The NIC sends datagrams as RoCEv2 over IPv4 from the port's address:
	 * a source GID of another kind (RoCEv1, a link-local or other IPv6
	 * GID) would not be honoured, so it is refused rather than ignored.
	 */
	sgid = rdma_ah_read_grh(ah)->sgid_attr;
	if (!sgid || sgid->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP ||
	    !ipv6_addr_v4mapped((const struct in6_addr *)sgid->gid.raw))
		return -EINVAL;
	if (!udata) {
		/* The NIC sends datagrams to IPv4 destinations only. */
		grh = rdma_ah_read_grh(ah);
		if (!ipv6_addr_v4mapped((const struct in6_addr *)grh->dgid.raw))
			return -EINVAL;
		memcpy(mah->ud.dgid, grh->dgid.raw, sizeof(mah->ud.dgid));
		memcpy(mah->ud.dmac, ah->roce.dmac, sizeof(mah->ud.dmac));
		mah->ud.hop_limit = grh->hop_limit;
		mah->ud.traffic_class = grh->traffic_class;
		return 0;
	}
	memcpy(resp.dmac, ah->roce.dmac, sizeof(resp.dmac));
	return mprdma_copy_resp(udata, &resp, sizeof(resp));
}

int mprdma_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

int mprdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct mprdma_dev *dev = to_mdev(ibqp->device);
	struct mprdma_qp *qp = to_mqp(ibqp);
	int err;

	/* No event handler may use the QP once this returns. */
	xa_erase(&dev->qps, qp->qpn);
	synchronize_irq(dev->eq.irq);

	err = mprdma_cmd_destroy_qp(&dev->aq, qp->qpn);
	if (err) {
		ibdev_warn(&dev->ibdev,
			   "DESTROY_QP %u failed (%d): its rings stay allocated\n",
			   qp->qpn, err);
		if (qp->kernel) {
			qp->ksq.leak = true;
			qp->krq.leak = true;
		} else {
			qp->sq->leak = true;
			if (qp->rq)
				qp->rq->leak = true;
		}
	}
	if (qp->kernel) {
		mprdma_free_kernel_qp(dev, qp);
	} else {
		if (qp->rq)
			mprdma_entry_remove(qp->rq);
		mprdma_entry_remove(qp->sq);
	}
	mutex_destroy(&qp->lock);
	return 0;
}
