/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * <mprdma/regs_util.h> includes <stddef.h> for offsetof(). A kernel build
 * has no libc headers (-nostdinc), so this folder, first on the driver's
 * include path, stands in for it with the kernel's definition.
 */
#ifndef _MPRDMA_COMPAT_STDDEF_H_
#define _MPRDMA_COMPAT_STDDEF_H_

#include <linux/stddef.h>

#endif /* _MPRDMA_COMPAT_STDDEF_H_ */
