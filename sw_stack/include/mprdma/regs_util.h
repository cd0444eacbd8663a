/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Accessors over the generated register map <mprdma/regs.h> (from
 * sw_stack/regs/mprdma_regs.rdl): byte offsets of registers and field
 * extraction, so that no offset or bit position is written by hand.
 */
#ifndef MPRDMA_REGS_UTIL_H
#define MPRDMA_REGS_UTIL_H

#ifdef __KERNEL__
#include <linux/stddef.h>
#else
#include <stddef.h>
#endif

#include <mprdma/regs.h>

/* Byte offset of a BAR0 register. */
#define MPR_BAR0_OFF(reg) offsetof(mprdma_bar0_t, reg)
/* Byte offset of register `reg` of MSI-X table entry `i`. */
#define MPR_BAR0_MSIX_OFF(i, reg)                                      \
	(offsetof(mprdma_bar0_t, MSIX) +                                   \
	 (i) * sizeof(mprdma_bar0__msix_entry_t_t) +                       \
	 offsetof(mprdma_bar0__msix_entry_t_t, reg))
#define MPR_BAR0_MSIX_ENTRY_SIZE sizeof(mprdma_bar0__msix_entry_t_t)

/* Field `field` of register `reg` in the 32-bit value v, and back. */
#define MPR_GET(reg, field, v) \
	(((v) & MPRDMA_BAR0__##reg##__##field##_bm) >> MPRDMA_BAR0__##reg##__##field##_bp)
#define MPR_SET(reg, field, x)                          \
	(((uint32_t)(x) << MPRDMA_BAR0__##reg##__##field##_bp) & \
	 MPRDMA_BAR0__##reg##__##field##_bm)
/* Reset value of a whole register, from its fields' reset values. */
#define MPR_RESET(reg, field) MPR_SET(reg, field, MPRDMA_BAR0__##reg##__##field##_reset)

#endif /* MPRDMA_REGS_UTIL_H */
