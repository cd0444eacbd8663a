// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mprdma ICM: the host memory in which the NIC keeps its QP, CQ, MR and
 * page-translation tables (it caches entries on chip and reads or writes
 * them here by DMA). QUERY_DEVICE says how many 4 KiB pages the NIC needs;
 * the driver allocates them as physically contiguous chunks and hands them
 * over with MAP_ICM before any object is created. See docs/host-interface.md,
 * "MAP_ICM (0x04): ICM".
 *
 * Chunks are 1 << icm_log_chunk bytes (256 KiB by default) while the page
 * allocator has them; when an allocation fails the rest of ICM is taken in
 * the next smaller size, down to 4 KiB, and the tail in the largest sizes
 * that fit, so nothing past the end of ICM is allocated. Sizes only ever
 * shrink along ICM: every chunk then starts at a multiple of its own size,
 * as MAP_ICM asks. One MAP_ICM command maps a run of up to MPR_ICM_MAP_MAX
 * chunks of one size.
 */

#include <linux/dma-mapping.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "mprdma.h"
#include "mprdma_com_cmd.h"

static unsigned int icm_log_chunk = 18;
module_param(icm_log_chunk, uint, 0444);
MODULE_PARM_DESC(icm_log_chunk,
		 "Largest ICM chunk, log2 of its bytes, 12..22 (default 18: 256 KiB)");

static u32 mprdma_icm_chunk_pages(u32 log_size)
{
	return 1u << (log_size - MPR_ICM_PAGE_SHIFT);
}

static void mprdma_icm_free_chunks(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	u32 i;

	for (i = 0; i < icm->nchunks; i++)
		dma_free_coherent(&dev->pdev->dev,
				  (size_t)1 << icm->chunks[i].log_size,
				  icm->chunks[i].cpu, icm->chunks[i].dma);
	kvfree(icm->chunks);
	icm->chunks = NULL;
	icm->nchunks = 0;
	icm->ncmds = 0;
}

/* One chunk of 1 << @log_size bytes aligned to its size, or NULL. */
static void *mprdma_icm_alloc_chunk(struct mprdma_dev *dev, u32 log_size,
				    dma_addr_t *dma)
{
	size_t size = (size_t)1 << log_size;
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN;
	void *cpu;

	/* A failed large allocation only means smaller chunks: no hard
	 * reclaim for it.
	 */
	if (size > PAGE_SIZE)
		gfp |= __GFP_NORETRY;
	cpu = dma_alloc_coherent(&dev->pdev->dev, size, dma, gfp);
	if (!cpu)
		return NULL;
	/* The page allocator aligns to the order; an IOMMU or bounce buffer
	 * need not.
	 */
	if (*dma & (size - 1)) {
		dma_free_coherent(&dev->pdev->dev, size, cpu, *dma);
		return NULL;
	}
	return cpu;
}

static int mprdma_icm_alloc(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	u32 log_size = clamp_t(u32, icm_log_chunk, MPR_ICM_PAGE_SHIFT,
			       MPR_ICM_LOG_CHUNK_MAX);
	u32 page = 0;

	icm->chunks = kvcalloc(icm->pages, sizeof(*icm->chunks), GFP_KERNEL);
	if (!icm->chunks)
		return -ENOMEM;
	while (page < icm->pages) {
		struct mprdma_icm_chunk *chunk = &icm->chunks[icm->nchunks];

		/* The tail: no chunk larger than what is left. */
		while (mprdma_icm_chunk_pages(log_size) > icm->pages - page)
			log_size--;
		chunk->cpu = mprdma_icm_alloc_chunk(dev, log_size, &chunk->dma);
		if (!chunk->cpu) {
			if (log_size == MPR_ICM_PAGE_SHIFT) {
				mprdma_icm_free_chunks(dev);
				return -ENOMEM;
			}
			log_size--;
			continue;
		}
		chunk->first_page = page;
		chunk->log_size = log_size;
		icm->nchunks++;
		page += mprdma_icm_chunk_pages(log_size);
	}
	return 0;
}

/* Hands the chunks to the NIC: one command per run of equal sizes, at most
 * MPR_ICM_MAP_MAX chunks each.
 */
static int mprdma_icm_map(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	size_t list_size = MPR_ICM_MAP_MAX * sizeof(__le64);
	const struct mprdma_icm_chunk *first;
	dma_addr_t list_dma;
	__le64 *list;
	u32 start, n;
	int err = 0;

	list = dma_alloc_coherent(&dev->pdev->dev, list_size, &list_dma,
				  GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	for (start = 0; start < icm->nchunks; start += n) {
		first = &icm->chunks[start];
		for (n = 0; n < MPR_ICM_MAP_MAX && start + n < icm->nchunks &&
		     icm->chunks[start + n].log_size == first->log_size; n++)
			list[n] = cpu_to_le64(icm->chunks[start + n].dma);
		err = mprdma_cmd_map_icm(&dev->aq, first->first_page, n,
					 first->log_size, list_dma);
		if (err) {
			dev_err(&dev->pdev->dev,
				"MAP_ICM of pages %u.. (%u chunks of %u KiB) failed: %d\n",
				first->first_page, n,
				(1u << first->log_size) / 1024, err);
			break;
		}
		icm->ncmds++;
	}
	dma_free_coherent(&dev->pdev->dev, list_size, list, list_dma);
	return err;
}

/**
 * mprdma_icm_init - allocate the ICM that QUERY_DEVICE asked for and map it
 * @dev: device whose admin queue runs and whose attributes are known
 *
 * On failure nothing stays allocated. The NIC may have mapped part of it by
 * then, which is harmless: it creates no object before the whole is mapped
 * and the caller resets the device before giving up.
 *
 * Return: 0 or a negative errno.
 */
int mprdma_icm_init(struct mprdma_dev *dev)
{
	struct mprdma_icm *icm = &dev->icm;
	const struct mprdma_icm_chunk *last;
	u64 bytes;
	int err;

	icm->pages = dev->attr.icm_pages;
	if (!icm->pages)
		return 0;
	bytes = (u64)icm->pages << MPR_ICM_PAGE_SHIFT;
	/* A device asking for most of RAM would only get the OOM killer. */
	if (bytes > ((u64)totalram_pages() << PAGE_SHIFT) / 2) {
		dev_err(&dev->pdev->dev,
			"the NIC asks for %llu KiB of ICM, more than half the RAM\n",
			bytes / 1024);
		return -ENOMEM;
	}
	err = mprdma_icm_alloc(dev);
	if (err) {
		dev_err(&dev->pdev->dev, "cannot allocate %llu KiB of ICM\n",
			bytes / 1024);
		return err;
	}
	err = mprdma_icm_map(dev);
	if (err) {
		mprdma_icm_free_chunks(dev);
		return err;
	}
	last = &icm->chunks[icm->nchunks - 1];
	dev_info(&dev->pdev->dev,
		 "ICM: %llu KiB in %u chunks of %u..%u KiB, %u MAP_ICM commands\n",
		 bytes / 1024, icm->nchunks, (1u << last->log_size) / 1024,
		 (1u << icm->chunks[0].log_size) / 1024, icm->ncmds);
	return 0;
}

/**
 * mprdma_icm_destroy - free the ICM
 * @dev: device reset by the caller: the NIC no longer reads or writes ICM
 */
void mprdma_icm_destroy(struct mprdma_dev *dev)
{
	mprdma_icm_free_chunks(dev);
}
