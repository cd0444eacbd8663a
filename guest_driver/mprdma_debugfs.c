// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma debugfs: /sys/kernel/debug/mprdma/<PCI name>/admin_raw, a debug
 * interface that sends admin commands to the NIC as user space wrote them
 * (for tests of the NIC's error handling, like mlx5's command debugfs).
 *
 * write(2) one command: the 128-byte struct mpr_cmd, optionally followed by
 * up to MPRDMA_AQ_MAILBOX_SIZE bytes of input-mailbox data. The driver
 * fills in cmd_id and runs the command under the admin queue's lock, so it
 * never interleaves with the driver's own commands. Mailbox addresses:
 *   0                     no mailbox, sent as 0;
 *   MPRDMA_RAW_MAILBOX    the driver's mailbox: for input, the bytes
 *                         written after the command; for output, read back
 *                         after the completion. Its length field must not
 *                         exceed MPRDMA_AQ_MAILBOX_SIZE;
 *   anything else         sent unchanged if [address, address + length)
 *                         lies outside System RAM (to exercise the NIC's
 *                         DMA error handling); refused with EINVAL if it
 *                         touches RAM, which the NIC must not read or
 *                         write at a user's will.
 * The write returns its byte count once the completion arrived, whatever
 * the command's status; EINVAL for a malformed request, EIO or ETIMEDOUT
 * when the admin queue failed.
 *
 * read(2) (from offset 0: a write rewinds the file) returns the 32-byte
 * struct mpr_cmd_comp, followed by out_len bytes of the driver's output
 * mailbox when the command named it.
 *
 * Root only (the file is 0600 and opening it needs CAP_SYS_RAWIO). Objects
 * created this way are unknown to the driver: whoever creates them destroys
 * them (unloading the driver resets the device, which destroys everything).
 */

#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/ioport.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "mprdma.h"

/* Result of the last command on one open file: completion + output. */
struct mprdma_raw_file {
	struct mprdma_dev *dev;
	/* Serialises commands and reads on this file. */
	struct mutex lock;
	size_t len;		/* valid bytes in buf; 0 before any command */
	u8 buf[sizeof(struct mpr_cmd_comp) + MPRDMA_AQ_MAILBOX_SIZE];
};

static struct dentry *mprdma_debugfs_root;

/* True when [addr, addr + len) (at least one byte) touches no System RAM. */
static bool mprdma_raw_outside_ram(u64 addr, u32 len)
{
	u64 last;

	/* A range that wraps around includes address 0 onwards: RAM. */
	if (check_add_overflow(addr, (u64)max_t(u32, len, 1) - 1, &last))
		return false;
	return region_intersects(addr, last - addr + 1, IORESOURCE_SYSTEM_RAM,
				 IORES_DESC_NONE) == REGION_DISJOINT;
}

static int mprdma_raw_open(struct inode *inode, struct file *file)
{
	struct mprdma_raw_file *rf;

	/* The NIC can be made to DMA anywhere outside RAM: as for /dev/mem. */
	if (!capable(CAP_SYS_RAWIO))
		return -EPERM;
	rf = kzalloc(sizeof(*rf), GFP_KERNEL);
	if (!rf)
		return -ENOMEM;
	rf->dev = inode->i_private;
	mutex_init(&rf->lock);
	file->private_data = rf;
	return 0;
}

/* Only the file's own memory: the device may be gone by now. */
static int mprdma_raw_release(struct inode *inode, struct file *file)
{
	struct mprdma_raw_file *rf = file->private_data;

	mutex_destroy(&rf->lock);
	kfree(rf);
	return 0;
}

static ssize_t mprdma_raw_write(struct file *file, const char __user *ubuf,
				size_t count, loff_t *ppos)
{
	struct mprdma_raw_file *rf = file->private_data;
	struct mprdma_dev *dev = rf->dev;
	size_t in_bytes = count - sizeof(struct mpr_cmd);
	struct mpr_cmd_comp comp;
	struct mpr_cmd cmd;
	bool in_own, out_own;
	u32 out_len = 0;
	int err;

	if (count < sizeof(cmd) || in_bytes > MPRDMA_AQ_MAILBOX_SIZE)
		return -EINVAL;
	if (copy_from_user(&cmd, ubuf, sizeof(cmd)))
		return -EFAULT;

	in_own = cmd.hdr.in_mailbox == MPRDMA_RAW_MAILBOX;
	out_own = cmd.hdr.out_mailbox == MPRDMA_RAW_MAILBOX;
	/* Input bytes are only ever read from the driver's mailbox. */
	if (in_bytes && !in_own)
		return -EINVAL;
	if (in_own && cmd.hdr.in_len > MPRDMA_AQ_MAILBOX_SIZE)
		return -EINVAL;
	if (out_own && cmd.hdr.out_len > MPRDMA_AQ_MAILBOX_SIZE)
		return -EINVAL;
	if (!in_own && cmd.hdr.in_mailbox &&
	    !mprdma_raw_outside_ram(cmd.hdr.in_mailbox, cmd.hdr.in_len))
		return -EINVAL;
	if (!out_own && cmd.hdr.out_mailbox &&
	    !mprdma_raw_outside_ram(cmd.hdr.out_mailbox, cmd.hdr.out_len))
		return -EINVAL;
	if (out_own)
		out_len = cmd.hdr.out_len;

	mutex_lock(&rf->lock);
	rf->len = 0;
	/* The input mailbox is the device's: one raw command at a time. */
	mutex_lock(&dev->raw_lock);
	if (in_own) {
		memset(dev->raw_in, 0, MPRDMA_AQ_MAILBOX_SIZE);
		if (copy_from_user(dev->raw_in, ubuf + sizeof(cmd), in_bytes)) {
			err = -EFAULT;
			goto out_unlock;
		}
		cmd.hdr.in_mailbox = dev->raw_in_dma;
	}
	err = mprdma_aq_exec_raw(&dev->aq, &cmd,
				 out_own ? rf->buf + sizeof(comp) : NULL,
				 out_len, &comp);
	if (err)
		goto out_unlock;
	memcpy(rf->buf, &comp, sizeof(comp));
	rf->len = sizeof(comp) + out_len;
	/* The next read(2) starts at the new result. */
	*ppos = 0;
	err = count;

out_unlock:
	mutex_unlock(&dev->raw_lock);
	mutex_unlock(&rf->lock);
	return err;
}

static ssize_t mprdma_raw_read(struct file *file, char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	struct mprdma_raw_file *rf = file->private_data;
	ssize_t ret;

	mutex_lock(&rf->lock);
	ret = simple_read_from_buffer(ubuf, count, ppos, rf->buf, rf->len);
	mutex_unlock(&rf->lock);
	return ret;
}

static const struct file_operations mprdma_raw_fops = {
	.owner = THIS_MODULE,
	.open = mprdma_raw_open,
	.release = mprdma_raw_release,
	.write = mprdma_raw_write,
	.read = mprdma_raw_read,
	.llseek = default_llseek,
};

/* Module load: the "mprdma" folder. Without debugfs nothing is created. */
void mprdma_debugfs_init(void)
{
	mprdma_debugfs_root = debugfs_create_dir(DRV_MODULE_NAME, NULL);
}

void mprdma_debugfs_cleanup(void)
{
	debugfs_remove_recursive(mprdma_debugfs_root);
	mprdma_debugfs_root = NULL;
}

/**
 * mprdma_debugfs_add - create the device's folder and admin_raw
 * @dev: device whose admin queue is running
 *
 * Failures are not errors: the device then has no debug files.
 */
void mprdma_debugfs_add(struct mprdma_dev *dev)
{
	mutex_init(&dev->raw_lock);
	dev->raw_in = dma_alloc_coherent(&dev->pdev->dev,
					 MPRDMA_AQ_MAILBOX_SIZE,
					 &dev->raw_in_dma, GFP_KERNEL);
	if (!dev->raw_in) {
		dev_warn(&dev->pdev->dev,
			 "no memory for the admin_raw mailbox: no debugfs files\n");
		return;
	}
	dev->debugfs = debugfs_create_dir(pci_name(dev->pdev),
					  mprdma_debugfs_root);
	debugfs_create_file("admin_raw", 0600, dev->debugfs, dev,
			    &mprdma_raw_fops);
}

/**
 * mprdma_debugfs_remove - remove the device's debug files
 * @dev: device given to mprdma_debugfs_add()
 *
 * Returns after every write in progress has finished; open files keep only
 * their own memory. The input mailbox is freed later, by
 * mprdma_debugfs_free() after the device reset: a timed-out command could
 * still make the NIC read it.
 */
void mprdma_debugfs_remove(struct mprdma_dev *dev)
{
	debugfs_remove_recursive(dev->debugfs);
	dev->debugfs = NULL;
}

void mprdma_debugfs_free(struct mprdma_dev *dev)
{
	if (dev->raw_in)
		dma_free_coherent(&dev->pdev->dev, MPRDMA_AQ_MAILBOX_SIZE,
				  dev->raw_in, dev->raw_in_dma);
	dev->raw_in = NULL;
	mutex_destroy(&dev->raw_lock);
}
