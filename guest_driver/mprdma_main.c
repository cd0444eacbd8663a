// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma: PCI probe and remove, interrupts, the ib_device and its netdev.
 *
 * Bring-up follows docs/host-interface.md ("Bring-up sequence") and the
 * modelled host's driver (vp/host/driver.cc): reset and wait for READY,
 * identify, program the NIC's MSI-X table, enable the admin queue, query
 * the device and the port, create and arm EQ 0. In a QEMU guest the NIC's
 * interrupt messages arrive as MSI-X vectors of the ivshmem function in the
 * same slot (docs/design/qemu-guests.md), so the IRQs are requested on that
 * function.
 */

#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>

#include <mprdma/abi.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

MODULE_AUTHOR("mprdma-vp");
MODULE_DESCRIPTION("mprdma virtual RDMA NIC (RoCEv2, user-space verbs)");
MODULE_LICENSE("Dual BSD/GPL");

static unsigned int timeout_ms = 10000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms,
		 "How long to wait for a device reset and for each admin command, in ms (default 10000)");

static bool admin_poll;
module_param(admin_poll, bool, 0444);
MODULE_PARM_DESC(admin_poll,
		 "Poll for admin command completions instead of taking the admin interrupt (default N)");

/* The ivshmem-doorbell function that carries the NIC's interrupts. */
#define MPRDMA_IVSHMEM_DEVICE_ID 0x1110
#define MPRDMA_IRQ_FN 1

#define MPRDMA_REG_BAR 0
#define MPRDMA_UAR_BAR 2

#define MPRDMA_READY_POLL_MIN_US 100
#define MPRDMA_READY_POLL_MAX_US 1000

static const struct pci_device_id mprdma_pci_tbl[] = {
	{ PCI_DEVICE(MPR_PCI_VENDOR_ID, MPR_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, mprdma_pci_tbl);

/*
 * /sys/class/infiniband/<dev>/transports: the transport engines a QP may
 * choose (MPRDMA_QP_TRANSPORT in user space), from the CAPS register.
 */
static ssize_t transports_show(struct device *device,
			       struct device_attribute *attr, char *buf)
{
	struct mprdma_dev *dev =
		rdma_device_to_drv_device(device, struct mprdma_dev, ibdev);
	u32 caps = dev->attr.cap_flags;

	return sysfs_emit(buf, "gbn%s%s%s\n",
			  MPR_GET(CAPS, DCQCN, caps) ? " dcqcn" : "",
			  MPR_GET(CAPS, MP_RDMA, caps) ? " mprdma" : "",
			  MPR_GET(CAPS, IRN, caps) ? " irn" : "");
}
static DEVICE_ATTR_RO(transports);

static struct attribute *mprdma_attrs[] = {
	&dev_attr_transports.attr,
	NULL,
};

static const struct attribute_group mprdma_attr_group = {
	.attrs = mprdma_attrs,
};

static const struct ib_device_ops mprdma_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = MPR_UVERBS_ABI_VERSION,
	.device_group = &mprdma_attr_group,

	.add_gid = mprdma_add_gid,
	.alloc_pd = mprdma_alloc_pd,
	.alloc_ucontext = mprdma_alloc_ucontext,
	.create_ah = mprdma_create_ah,
	.create_cq = mprdma_create_cq,
	.create_qp = mprdma_create_qp,
	.create_user_ah = mprdma_create_ah,
	.dealloc_pd = mprdma_dealloc_pd,
	.dealloc_ucontext = mprdma_dealloc_ucontext,
	.del_gid = mprdma_del_gid,
	.dereg_mr = mprdma_dereg_mr,
	.destroy_ah = mprdma_destroy_ah,
	.destroy_cq = mprdma_destroy_cq,
	.destroy_qp = mprdma_destroy_qp,
	.disassociate_ucontext = mprdma_disassociate_ucontext,
	.get_dev_fw_str = mprdma_get_dev_fw_str,
	.get_dma_mr = mprdma_get_dma_mr,
	.get_link_layer = mprdma_get_link_layer,
	.alloc_hw_port_stats = mprdma_alloc_hw_port_stats,
	.get_hw_stats = mprdma_get_hw_stats,
	.get_port_immutable = mprdma_get_port_immutable,
	.mmap = mprdma_mmap,
	.mmap_free = mprdma_mmap_free,
	.modify_qp = mprdma_modify_qp,
	.poll_cq = mprdma_poll_cq,
	.post_recv = mprdma_post_recv,
	.post_send = mprdma_post_send,
	.query_device = mprdma_query_device,
	.query_pkey = mprdma_query_pkey,
	.query_port = mprdma_query_port,
	.query_qp = mprdma_query_qp,
	.reg_user_mr = mprdma_reg_user_mr,
	.req_notify_cq = mprdma_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, mprdma_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, mprdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, mprdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, mprdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, mprdma_ucontext, ibucontext),
};

/* ---------------------------------------------------------------------- */
/* Device                                                                   */
/* ---------------------------------------------------------------------- */

/*
 * Reset the NIC and wait for READY. A reset destroys every object, stops
 * the admin queue, masks every vector and abandons the NIC's DMA: after it
 * no host memory given to the NIC is written any more.
 */
static int mprdma_dev_reset(struct mprdma_dev *dev)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	/* The STATUS read below travels behind the posted RESET write, so it
	 * cannot see READY from before the reset.
	 */
	mprdma_reg_write(dev, MPR_BAR0_OFF(RESET), MPR_SET(RESET, RESET, 1));
	while (!MPR_GET(STATUS, READY,
			mprdma_reg_read(dev, MPR_BAR0_OFF(STATUS)))) {
		if (time_after(jiffies, deadline)) {
			dev_err(&dev->pdev->dev,
				"not ready %u ms after reset\n", timeout_ms);
			return -ETIMEDOUT;
		}
		usleep_range(MPRDMA_READY_POLL_MIN_US,
			     MPRDMA_READY_POLL_MAX_US);
	}
	return 0;
}

/* Make sure BAR0 is this NIC's and the interface is one this driver knows. */
static int mprdma_check_device(struct mprdma_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	u32 id = mprdma_reg_read(dev, MPR_BAR0_OFF(ID));
	u32 version = mprdma_reg_read(dev, MPR_BAR0_OFF(VERSION));
	u32 caps = mprdma_reg_read(dev, MPR_BAR0_OFF(CAPS));
	u32 uar_cfg = mprdma_reg_read(dev, MPR_BAR0_OFF(UAR_CFG));
	resource_size_t bar2_len = pci_resource_len(pdev, MPRDMA_UAR_BAR);

	if (MPR_GET(ID, VENDOR, id) != MPR_PCI_VENDOR_ID ||
	    MPR_GET(ID, DEVICE, id) != MPR_PCI_DEVICE_ID) {
		dev_err(&pdev->dev, "BAR0 ID reads %#x: not an mprdma NIC\n",
			id);
		return -ENODEV;
	}
	if (MPR_GET(VERSION, MAJOR, version) != MPR_IF_VERSION_MAJOR) {
		dev_err(&pdev->dev,
			"host interface version %u.%u, driver knows %u.x\n",
			MPR_GET(VERSION, MAJOR, version),
			MPR_GET(VERSION, MINOR, version), MPR_IF_VERSION_MAJOR);
		return -ENODEV;
	}
	if (!MPR_GET(CAPS, RC, caps)) {
		dev_err(&pdev->dev, "no RC support (CAPS %#x)\n", caps);
		return -ENODEV;
	}

	/* User space maps UAR pages one CPU page at a time. */
	BUILD_BUG_ON(PAGE_SIZE != MPR_UAR_PAGE_SIZE);
	dev->num_uar_pages = MPR_GET(UAR_CFG, NUM_PAGES, uar_cfg);
	if (MPR_GET(UAR_CFG, LOG_PAGE_SIZE, uar_cfg) != MPR_PAGE_SHIFT) {
		dev_err(&pdev->dev, "UAR pages of 2^%u bytes unsupported\n",
			MPR_GET(UAR_CFG, LOG_PAGE_SIZE, uar_cfg));
		return -ENODEV;
	}
	/* Page 0 is the kernel's; user contexts need at least one more. */
	if (dev->num_uar_pages < 2 ||
	    (u64)dev->num_uar_pages * MPR_UAR_PAGE_SIZE > bar2_len) {
		dev_err(&pdev->dev, "%u UAR pages do not fit BAR2 of %pa\n",
			dev->num_uar_pages, &bar2_len);
		return -ENODEV;
	}
	return 0;
}

static int mprdma_map_bars(struct mprdma_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;

	if (!(pci_resource_flags(pdev, MPRDMA_REG_BAR) & IORESOURCE_MEM) ||
	    !(pci_resource_flags(pdev, MPRDMA_UAR_BAR) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, MPRDMA_REG_BAR) < sizeof(mprdma_bar0_t) ||
	    pci_resource_len(pdev, MPRDMA_UAR_BAR) < MPR_UAR_PAGE_SIZE) {
		dev_err(&pdev->dev, "BAR0 or BAR2 missing or too small\n");
		return -ENODEV;
	}
	dev->bar0 = pci_iomap(pdev, MPRDMA_REG_BAR, 0);
	if (!dev->bar0)
		return -ENOMEM;
	dev->bar2_start = pci_resource_start(pdev, MPRDMA_UAR_BAR);
	/* Only the kernel's page; user pages are mapped into processes. */
	dev->uar0 = ioremap(dev->bar2_start, MPR_UAR_PAGE_SIZE);
	if (!dev->uar0) {
		pci_iounmap(pdev, dev->bar0);
		return -ENOMEM;
	}
	return 0;
}

static void mprdma_unmap_bars(struct mprdma_dev *dev)
{
	iounmap(dev->uar0);
	pci_iounmap(dev->pdev, dev->bar0);
}

/* ---------------------------------------------------------------------- */
/* Interrupts                                                               */
/* ---------------------------------------------------------------------- */

/* Vector v sends data v to the MSI address, which the bridge turns into
 * MSI-X vector v of the ivshmem function. Both masks must be clear.
 */
static void mprdma_msix_enable(struct mprdma_dev *dev, u32 vectors)
{
	u32 mask = 0;
	u32 v;

	for (v = 0; v < MPRDMA_NUM_MSIX; v++) {
		if (!(vectors & BIT(v)))
			continue;
		mprdma_reg_write(dev, MPR_BAR0_MSIX_OFF(v, ADDR_LO),
				 lower_32_bits(MPRDMA_MSI_ADDR));
		mprdma_reg_write(dev, MPR_BAR0_MSIX_OFF(v, ADDR_HI),
				 upper_32_bits(MPRDMA_MSI_ADDR));
		mprdma_reg_write(dev, MPR_BAR0_MSIX_OFF(v, DATA), v);
		mprdma_reg_write(dev, MPR_BAR0_MSIX_OFF(v, CTRL), 0);
		mask |= BIT(v);
	}
	mprdma_reg_write(dev, MPR_BAR0_OFF(INTR_MASK), ~mask);
}

/*
 * Take function 1 of the slot, the ivshmem device whose MSI-X vectors are
 * the NIC's, and allocate its vectors. No driver binds it: this one enables
 * it and uses its vectors as its own.
 */
static int mprdma_irq_init(struct mprdma_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	struct pci_dev *fn;
	int nvec;
	int err;

	fn = pci_get_slot(pdev->bus,
			  PCI_DEVFN(PCI_SLOT(pdev->devfn), MPRDMA_IRQ_FN));
	if (!fn || fn->vendor != PCI_VENDOR_ID_REDHAT_QUMRANET ||
	    fn->device != MPRDMA_IVSHMEM_DEVICE_ID) {
		dev_err(&pdev->dev,
			"no ivshmem device (%04x:%04x) at function %u of the slot: it carries the NIC's interrupts\n",
			PCI_VENDOR_ID_REDHAT_QUMRANET, MPRDMA_IVSHMEM_DEVICE_ID,
			MPRDMA_IRQ_FN);
		err = -ENODEV;
		goto err_put;
	}
	if (fn->driver) {
		dev_err(&pdev->dev, "%s is bound to driver %s\n",
			pci_name(fn), fn->driver->name);
		err = -EBUSY;
		goto err_put;
	}
	dev->irq_pdev = fn;

	err = pci_enable_device(fn);
	if (err) {
		dev_err(&pdev->dev, "cannot enable %s: %d\n", pci_name(fn), err);
		goto err_put;
	}
	/* QEMU delivers the function's MSI-X messages only with bus
	 * mastering on.
	 */
	pci_set_master(fn);

	nvec = pci_alloc_irq_vectors(fn, 1, MPRDMA_MAX_VECTORS, PCI_IRQ_MSIX);
	if (nvec < 0) {
		dev_err(&pdev->dev, "no MSI-X vectors on %s: %d\n",
			pci_name(fn), nvec);
		err = nvec;
		goto err_disable;
	}
	dev->num_vectors = nvec;

	dev->aq_use_irq = !admin_poll && nvec > MPRDMA_AQ_VECTOR;
	if (!dev->aq_use_irq)
		dev_info(&pdev->dev, "admin completions are polled\n");
	mprdma_msix_enable(dev, BIT(MPRDMA_EQ_VECTOR) |
			   (dev->aq_use_irq ? BIT(MPRDMA_AQ_VECTOR) : 0));
	return 0;

err_disable:
	pci_disable_device(fn);
err_put:
	pci_dev_put(fn);
	dev->irq_pdev = NULL;
	return err;
}

static void mprdma_irq_destroy(struct mprdma_dev *dev)
{
	pci_free_irq_vectors(dev->irq_pdev);
	pci_disable_device(dev->irq_pdev);
	pci_dev_put(dev->irq_pdev);
	dev->irq_pdev = NULL;
}

/* ---------------------------------------------------------------------- */
/* Netdev association                                                       */
/* ---------------------------------------------------------------------- */

/*
 * The port's netdev is the interface with the NIC's MAC (the launcher gives
 * the guest's virtio-net interface that MAC). Stacked devices (VLANs,
 * bridges, macvlans) can share the MAC but have no parent device; the first
 * real one found wins.
 */
static bool mprdma_netdev_matches(struct mprdma_dev *dev,
				  struct net_device *ndev)
{
	return ndev->type == ARPHRD_ETHER && ndev->addr_len == ETH_ALEN &&
	       ndev->dev.parent && ether_addr_equal(ndev->dev_addr, dev->mac);
}

/* Under RTNL. */
static void mprdma_set_netdev(struct mprdma_dev *dev, struct net_device *ndev)
{
	int err;

	err = ib_device_set_netdev(&dev->ibdev, ndev, MPRDMA_PORT);
	if (err) {
		dev_warn(&dev->pdev->dev, "cannot bind the port to %s: %d\n",
			 ndev ? netdev_name(ndev) : "nothing", err);
		return;
	}
	if (ndev)
		dev_info(&dev->pdev->dev, "port %u bound to %s\n", MPRDMA_PORT,
			 netdev_name(ndev));
	else
		dev_info(&dev->pdev->dev, "port %u unbound from %s\n",
			 MPRDMA_PORT, netdev_name(dev->netdev));
	dev->netdev = ndev;
	/* ib_register_device() fills the GID table itself. Afterwards ib_core
	 * adds GIDs on the netdev's later events only, so addresses it
	 * already has need a rescan, which takes RTNL: from a work item.
	 */
	if (ndev && dev->registered)
		schedule_work(&dev->rescan_work);
}

static void mprdma_rescan_work(struct work_struct *work)
{
	struct mprdma_dev *dev = container_of(work, struct mprdma_dev,
					      rescan_work);

	rdma_roce_rescan_device(&dev->ibdev);
}

/*
 * Registering the notifier replays NETDEV_REGISTER for every existing
 * netdev, which binds an interface present at probe; unregistering it
 * replays NETDEV_UNREGISTER, which unbinds.
 */
static int mprdma_netdev_event(struct notifier_block *nb, unsigned long event,
			       void *ptr)
{
	struct mprdma_dev *dev = container_of(nb, struct mprdma_dev, netdev_nb);
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);

	ASSERT_RTNL();
	switch (event) {
	case NETDEV_REGISTER:
	case NETDEV_CHANGEADDR:
		if (ndev == dev->netdev && !mprdma_netdev_matches(dev, ndev))
			mprdma_set_netdev(dev, NULL);
		else if (!dev->netdev && mprdma_netdev_matches(dev, ndev))
			mprdma_set_netdev(dev, ndev);
		break;
	case NETDEV_UNREGISTER:
		/* ib_core requires the port to let go of it now. */
		if (ndev == dev->netdev)
			mprdma_set_netdev(dev, NULL);
		break;
	default:
		break;
	}
	return NOTIFY_DONE;
}

/* ---------------------------------------------------------------------- */
/* ib_device                                                                */
/* ---------------------------------------------------------------------- */

static int mprdma_ib_device_add(struct mprdma_dev *dev)
{
	struct ib_device *ibdev = &dev->ibdev;
	bool bound;
	int err;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->dev.parent = &dev->pdev->dev;
	addrconf_addr_eui48((u8 *)&ibdev->node_guid, dev->mac);
	ib_set_device_ops(ibdev, &mprdma_dev_ops);
	/* No SRQ verbs on a NIC without SRQs: uverbs answers EOPNOTSUPP. */
	if (MPR_GET(CAPS, SRQ, dev->attr.cap_flags))
		ib_set_device_ops(ibdev, &mprdma_srq_ops);

	INIT_WORK(&dev->rescan_work, mprdma_rescan_work);
	dev->netdev_nb.notifier_call = mprdma_netdev_event;
	err = register_netdevice_notifier(&dev->netdev_nb);
	if (err) {
		dev_err(&dev->pdev->dev, "cannot watch netdevs: %d\n", err);
		return err;
	}

	err = ib_register_device(ibdev, "mprdma_%d", &dev->pdev->dev);
	if (err) {
		dev_err(&dev->pdev->dev, "ib_register_device failed: %d\n",
			err);
		goto err_unregister_notifier;
	}

	rtnl_lock();
	dev->registered = true;
	bound = dev->netdev;
	rtnl_unlock();
	/* A netdev bound after the registration scanned for GIDs but before
	 * the flag was set would get no rescan. Adding a GID that exists is
	 * a no-op, so an extra rescan costs little: always do one.
	 */
	if (bound)
		schedule_work(&dev->rescan_work);
	else
		ibdev_info(ibdev,
			   "no netdev with MAC %pM yet: the GID table stays empty until one appears\n",
			   dev->mac);
	return 0;

err_unregister_notifier:
	unregister_netdevice_notifier(&dev->netdev_nb);
	cancel_work_sync(&dev->rescan_work);
	return err;
}

static void mprdma_ib_device_remove(struct mprdma_dev *dev)
{
	/* First stop binding and rescanning: a rescan must not run on a
	 * device being unregistered.
	 */
	unregister_netdevice_notifier(&dev->netdev_nb);
	cancel_work_sync(&dev->rescan_work);
	/* Destroys every user object through the verbs, with the NIC still
	 * answering commands.
	 */
	ib_unregister_device(&dev->ibdev);
}

/* ---------------------------------------------------------------------- */
/* PCI driver                                                               */
/* ---------------------------------------------------------------------- */

/* Reset first: the NIC then no longer touches the rings freed after it. */
static void mprdma_hw_teardown(struct mprdma_dev *dev)
{
	mprdma_dev_reset(dev);
	/* Only after the reset: the NIC no longer reads or writes ICM. */
	mprdma_icm_destroy(dev);
	mprdma_eq_destroy(dev);
	mprdma_aq_destroy(&dev->aq);
}

static int mprdma_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct mpr_port_attr port;
	struct mprdma_dev *dev;
	int err;

	dev = ib_alloc_device(mprdma_dev, ibdev);
	if (!dev)
		return -ENOMEM;
	dev->pdev = pdev;
	ida_init(&dev->uar_ida);
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	xa_init(&dev->srqs);
	pci_set_drvdata(pdev, dev);

	err = pci_enable_device_mem(pdev);
	if (err) {
		dev_err(&pdev->dev, "cannot enable the device: %d\n", err);
		goto err_dealloc;
	}
	pci_set_master(pdev);
	err = pci_request_mem_regions(pdev, DRV_MODULE_NAME);
	if (err)
		goto err_disable;
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err) {
		dev_err(&pdev->dev, "no 64-bit DMA: %d\n", err);
		goto err_release;
	}
	err = mprdma_map_bars(dev);
	if (err)
		goto err_release;

	/* The device may come from an earlier driver instance: start from
	 * a reset, as the host interface asks of a driver taking over.
	 */
	err = mprdma_dev_reset(dev);
	if (err)
		goto err_unmap;
	err = mprdma_check_device(dev);
	if (err)
		goto err_unmap;
	err = mprdma_irq_init(dev);
	if (err)
		goto err_unmap;
	err = mprdma_aq_init(&dev->aq, &pdev->dev, dev->bar0,
			     dev->aq_use_irq ?
			     pci_irq_vector(dev->irq_pdev, MPRDMA_AQ_VECTOR) : -1,
			     MPRDMA_AQ_VECTOR, timeout_ms);
	if (err)
		goto err_irq;

	err = mprdma_cmd_query_device(&dev->aq, &dev->attr);
	if (err) {
		dev_err(&pdev->dev, "QUERY_DEVICE failed: %d\n", err);
		goto err_teardown;
	}
	err = mprdma_cmd_query_port(&dev->aq, &port);
	if (err) {
		dev_err(&pdev->dev, "QUERY_PORT failed: %d\n", err);
		goto err_teardown;
	}
	ether_addr_copy(dev->mac, port.mac);
	err = mprdma_icm_init(dev);
	if (err)
		goto err_teardown;
	if (dev->attr.num_uar_pages < dev->num_uar_pages)
		dev->num_uar_pages = dev->attr.num_uar_pages;
	if (dev->num_uar_pages < 2 || !dev->attr.max_gids) {
		dev_err(&pdev->dev, "device limits unusable (%u UAR pages, %u GIDs)\n",
			dev->num_uar_pages, dev->attr.max_gids);
		err = -ENODEV;
		goto err_teardown;
	}

	err = mprdma_eq_init(dev);
	if (err)
		goto err_teardown;
	err = mprdma_ib_device_add(dev);
	if (err)
		goto err_teardown;

	mprdma_debugfs_add(dev);

	/* The engines a QP may choose (MPRDMA_QP_TRANSPORT in user space). */
	dev_info(&pdev->dev,
		 "mprdma NIC: firmware %#x, MAC %pM, %u QPs, %d vector(s), engines%s%s%s%s\n",
		 dev->attr.fw_version, dev->mac, dev->attr.max_qp,
		 dev->num_vectors,
		 MPR_GET(CAPS, GBN, dev->attr.cap_flags) ? " gbn" : "",
		 MPR_GET(CAPS, DCQCN, dev->attr.cap_flags) ? " dcqcn" : "",
		 MPR_GET(CAPS, MP_RDMA, dev->attr.cap_flags) ? " mprdma" : "",
		 MPR_GET(CAPS, IRN, dev->attr.cap_flags) ? " irn" : "");
	return 0;

err_teardown:
	mprdma_hw_teardown(dev);
err_irq:
	mprdma_irq_destroy(dev);
err_unmap:
	mprdma_unmap_bars(dev);
err_release:
	pci_release_mem_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_dealloc:
	xa_destroy(&dev->srqs);
	xa_destroy(&dev->qps);
	xa_destroy(&dev->cqs);
	ida_destroy(&dev->uar_ida);
	ib_dealloc_device(&dev->ibdev);
	return err;
}

static void mprdma_remove(struct pci_dev *pdev)
{
	struct mprdma_dev *dev = pci_get_drvdata(pdev);

	/* No raw command may run while the device goes away. */
	mprdma_debugfs_remove(dev);
	mprdma_ib_device_remove(dev);
	/* The reset leaves the device as probe found it for the next load. */
	mprdma_hw_teardown(dev);
	mprdma_debugfs_free(dev);
	mprdma_irq_destroy(dev);
	mprdma_unmap_bars(dev);
	pci_release_mem_regions(pdev);
	pci_disable_device(pdev);
	WARN_ON(!xa_empty(&dev->qps) || !xa_empty(&dev->cqs) ||
		!xa_empty(&dev->srqs));
	xa_destroy(&dev->srqs);
	xa_destroy(&dev->qps);
	xa_destroy(&dev->cqs);
	ida_destroy(&dev->uar_ida);
	ib_dealloc_device(&dev->ibdev);
}

static struct pci_driver mprdma_pci_driver = {
	.name = DRV_MODULE_NAME,
	.id_table = mprdma_pci_tbl,
	.probe = mprdma_probe,
	.remove = mprdma_remove,
};

static int __init mprdma_init(void)
{
	int err;

	mprdma_debugfs_init();
	err = pci_register_driver(&mprdma_pci_driver);
	if (err)
		mprdma_debugfs_cleanup();
	return err;
}

static void __exit mprdma_exit(void)
{
	pci_unregister_driver(&mprdma_pci_driver);
	mprdma_debugfs_cleanup();
}

module_init(mprdma_init);
module_exit(mprdma_exit);
