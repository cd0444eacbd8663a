/*
 * bar_probe: a 64 KiB x86 firmware image (QEMU -bios) that exercises the
 * NIC through QEMU's proxy device without an operating system, so the
 * bridge tests can run real QEMU without a guest image.
 *
 * From the reset vector it enters 32-bit protected mode (flat segments,
 * interrupts off) and then:
 *   1. prints "MPRDMA-READY" on COM1;
 *   2. programs the NIC at 00:04.0 through config mechanism #1 (0xCF8/0xCFC):
 *      BAR0 = 0xC0000000, BAR2 = 0xC1000000, command = memory | bus master;
 *   3. marker read of BAR0's ID register, a pure-instruction spin of
 *      SPIN iterations (2 instructions each), a second marker read; in the
 *      synchronised time mode the instruction counts of the two reads
 *      differ by 2 x SPIN plus a handful;
 *   4. writes 0x12345000 to AQ_BASE_LO (BAR0 + 0x20) and reads it back;
 *   5. READS further reads of the ID register, counting wrong values;
 *   6. prints "MPRDMA-RUN-EXIT <0|1>" and writes to isa-debug-exit at port
 *      0xF4: 0x10 when every value was right (QEMU exits with 33), 0x20 if
 *      not (exit 65).
 * Linked at 0xFFFF0000 (the image ends at 4 GiB); the reset vector is at
 * offset 0xFFF0.
 */
#define BAR0 0xC0000000
#define BAR2 0xC1000000
#define NIC_CFG 0x80002000 /* bus 0, device 4, function 0 */
#define ID_VALUE 0x4D50C0DE
#ifndef SPIN
#define SPIN 100000
#endif
#ifndef READS
#define READS 2000
#endif

	.section .text
	.globl image_start
image_start:
	.code16
start16:
	cli
	cld
	lgdtl %cs:(gdt_desc - image_start)
	movl %cr0, %eax
	orl $1, %eax
	movl %eax, %cr0
	ljmpl $0x08, $start32

	.code32
start32:
	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	movw %ax, %fs
	movw %ax, %gs
	movl $0x7000, %esp

	movl $msg_ready, %esi
	call puts

	/* 2. BARs and command register of 00:04.0 */
	movl $(NIC_CFG | 0x10), %eax
	movl $BAR0, %ebx
	call cfg_write32
	movl $(NIC_CFG | 0x18), %eax
	movl $BAR2, %ebx
	call cfg_write32
	movl $(NIC_CFG | 0x04), %eax
	movl $0x0006, %ebx
	call cfg_write32

	xorl %edi, %edi            /* wrong values seen */

	/* 3. marker, spin, marker */
	movl BAR0, %eax
	cmpl $ID_VALUE, %eax
	je 1f
	incl %edi
1:	movl $SPIN, %ecx
2:	decl %ecx
	jnz 2b
	movl BAR0, %eax
	cmpl $ID_VALUE, %eax
	je 3f
	incl %edi
3:
	/* 4. a register write read back */
	movl $0x12345000, BAR0 + 0x20
	movl BAR0 + 0x20, %eax
	cmpl $0x12345000, %eax
	je 4f
	incl %edi
4:
	/* 5. back-to-back reads */
	movl $READS, %ecx
5:	movl BAR0, %eax
	cmpl $ID_VALUE, %eax
	je 6f
	incl %edi
6:	decl %ecx
	jnz 5b

	/* 6. report and exit */
	testl %edi, %edi
	jnz 7f
	movl $msg_ok, %esi
	call puts
	movb $0x10, %al
	jmp 8f
7:	movl $msg_bad, %esi
	call puts
	movb $0x20, %al
8:	outb %al, $0xf4
9:	hlt
	jmp 9b

/* Config write: address in %eax, value in %ebx. */
cfg_write32:
	movw $0xcf8, %dx
	outl %eax, %dx
	movw $0xcfc, %dx
	movl %ebx, %eax
	outl %eax, %dx
	ret

/* Prints the NUL-terminated string at %esi on COM1. */
puts:
	movw $0x3f8, %dx
10:	lodsb
	testb %al, %al
	jz 11f
	outb %al, %dx
	jmp 10b
11:	ret

msg_ready:
	.asciz "MPRDMA-READY\r\n"
msg_ok:
	.asciz "MPRDMA-RUN-EXIT 0\r\n"
msg_bad:
	.asciz "MPRDMA-RUN-EXIT 1\r\n"

	.p2align 3
gdt:
	.quad 0                      /* null */
	.quad 0x00cf9a000000ffff     /* 0x08: code, base 0, 4 GiB, 32-bit */
	.quad 0x00cf92000000ffff     /* 0x10: data, base 0, 4 GiB */
gdt_desc:
	.word gdt_desc - gdt - 1
	.long gdt

	/* Reset vector: CS base 0xFFFF0000, IP 0xFFF0. */
	.org 0xfff0
	.code16
reset_vector:
	jmp start16
	.org 0x10000, 0xf4
