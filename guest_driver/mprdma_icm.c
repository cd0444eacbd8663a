// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma ICM: the host memory in which the NIC keeps its QP, CQ, MR and
 * page-translation tables (it caches entries on chip and reads or writes
 * them here by DMA). QUERY_DEVICE says how many 4 KiB pages the NIC needs;
 * the driver allocates them as physically contiguous chunks and hands them
 * over with MAP_ICM before any object is created. See docs/host-interface.md,
 * "ICM".
 */

#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

/* Chunks of 256 KiB (order 6) where the page allocator has them, else
 * single pages: one chunk size for the whole ICM keeps MAP_ICM simple.
 */
static const u32 mprdma_icm_log_chunks[] = { 18, 12 };

static void mprdma_icm_free_chunks(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	size_t size = (size_t)1 << icm->log_chunk;
	u32 i;

	for (i = 0; i < icm->nchunks; i++)
		if (icm->cpu[i])
			dma_free_coherent(&dev->pdev->dev, size, icm->cpu[i],
					  icm->dma[i]);
	kfree(icm->cpu);
	kfree(icm->dma);
	icm->cpu = NULL;
	icm->dma = NULL;
	icm->nchunks = 0;
}

static int mprdma_icm_alloc_chunks(struct mprdma_dev *dev, u32 log_chunk)
{
	struct mprdma_icm *icm = &dev->icm;
	u32 pages_per_chunk = 1u << (log_chunk - MPR_ICM_PAGE_SHIFT);
	u32 i;

	icm->log_chunk = log_chunk;
	icm->nchunks = DIV_ROUND_UP(icm->pages, pages_per_chunk);
	icm->cpu = kcalloc(icm->nchunks, sizeof(*icm->cpu), GFP_KERNEL);
	icm->dma = kcalloc(icm->nchunks, sizeof(*icm->dma), GFP_KERNEL);
	if (!icm->cpu || !icm->dma)
		goto fail;
	for (i = 0; i < icm->nchunks; i++) {
		icm->cpu[i] = dma_alloc_coherent(&dev->pdev->dev,
						 (size_t)1 << log_chunk,
						 &icm->dma[i],
						 GFP_KERNEL | __GFP_NOWARN);
		if (!icm->cpu[i])
			goto fail;
		/* dma_alloc_coherent aligns to the allocation's order; the
		 * NIC requires chunks aligned to their size.
		 */
		if (icm->dma[i] & (((dma_addr_t)1 << log_chunk) - 1))
			goto fail;
	}
	return 0;
fail:
	mprdma_icm_free_chunks(dev);
	return -ENOMEM;
}

/* Hands the chunks to the NIC, MPR_ICM_MAP_MAX per command. */
static int mprdma_icm_map(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	u32 pages_per_chunk = 1u << (icm->log_chunk - MPR_ICM_PAGE_SHIFT);
	dma_addr_t list_dma;
	__le64 *list;
	u32 first, n, i;
	int err = 0;

	list = dma_alloc_coherent(&dev->pdev->dev, MPR_ICM_MAP_MAX * 8,
				  &list_dma, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	for (first = 0; first < icm->nchunks && !err; first += n) {
		n = min_t(u32, MPR_ICM_MAP_MAX, icm->nchunks - first);
		for (i = 0; i < n; i++)
			list[i] = cpu_to_le64(icm->dma[first + i]);
		err = mprdma_cmd_map_icm(&dev->aq, first * pages_per_chunk, n,
					 icm->log_chunk, list_dma);
	}
	dma_free_coherent(&dev->pdev->dev, MPR_ICM_MAP_MAX * 8, list, list_dma);
	return err;
}

int mprdma_icm_init(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	size_t i;
	int err = -ENOMEM;

	icm->pages = dev->attr.icm_pages;
	if (!icm->pages)
		return 0;
	for (i = 0; i < ARRAY_SIZE(mprdma_icm_log_chunks); i++) {
		err = mprdma_icm_alloc_chunks(dev, mprdma_icm_log_chunks[i]);
		if (!err)
			break;
	}
	if (err) {
		dev_err(&dev->pdev->dev, "cannot allocate %u KiB of ICM\n",
			icm->pages * 4);
		return err;
	}
	err = mprdma_icm_map(dev);
	if (err) {
		dev_err(&dev->pdev->dev, "MAP_ICM failed: %d\n", err);
		mprdma_icm_free_chunks(dev);
		return err;
	}
	dev_info(&dev->pdev->dev, "ICM: %u KiB in %u chunks of %u KiB\n",
		 icm->pages * 4, icm->nchunks, (1u << icm->log_chunk) / 1024);
	return 0;
}

/* After the device was reset: the NIC no longer uses the chunks. */
void mprdma_icm_destroy(struct mprdma_dev *dev)
{
	mprdma_icm_free_chunks(dev);
}
