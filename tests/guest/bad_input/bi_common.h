/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Helpers shared by the bad-input guest programs (bi_client, bi_server):
 * checks and their console markers, the verbs set-up of one device, an RC
 * connection through a line protocol over TCP, raw admin commands through
 * the driver's debugfs file, and addresses outside the guest's RAM.
 *
 * Console markers (parsed by bad_input_test.py on the host):
 *   BI-OK <check>                a check passed
 *   BI-FAIL <check>: <detail>    a check failed
 *   BI-COUNT <name> <value>      a figure the host compares with results.json
 *   BI-DONE failures=<n>         last line; the exit status is 0 iff n == 0
 */
#ifndef BI_COMMON_H
#define BI_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <mprdma/hw.h>

/* Where the server listens (the guests' eth0 network). */
#define BI_PORT 19000
/* GID index of the IPv4-mapped RoCEv2 address on a fresh interface. */
#define BI_GID_INDEX 3
/* Guest-side limit of every wait: a lost completion fails, never hangs. */
#define BI_TIMEOUT_MS 30000
/* Registered buffer of each side. */
#define BI_BUF_LEN 65536

/* admin_raw's marker for "the driver's own mailbox" (guest_driver/README.md). */
#define BI_RAW_MAILBOX 1ull

extern int bi_failures;

void bi_ok(const char *check);
void bi_fail(const char *check, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* bi_ok(check) if cond, else bi_fail(check, fmt, ...); returns cond. */
bool bi_check(bool cond, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void bi_count(const char *name, long long value);
/* Prints BI-DONE and returns the exit status. */
int bi_done(void);
/* An unrecoverable set-up error: BI-FAIL, BI-DONE, exit 1. */
void bi_die(const char *check, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* One opened device with a PD, a CQ and a registered buffer. */
struct bi_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint32_t pdn;		/* the NIC's number of pd (bi_open with raw) */
	struct ibv_cq *cq;
	uint32_t cqn;		/* the NIC's number of cq (bi_open with raw) */
	uint8_t *buf;
	struct ibv_mr *mr;
	union ibv_gid gid;
	int raw_fd;		/* admin_raw, or -1 */
};

/*
 * Opens mprdma_0. With raw, also opens admin_raw and learns the NIC's
 * numbers of the verbs PD and CQ: handles are allocated lowest-free-first,
 * so an object allocated and freed through admin_raw right before the verbs
 * call has the number the verbs object then gets (nothing else in the guest
 * allocates them meanwhile). The tests confirm the numbers (BUSY answers).
 */
void bi_open(struct bi_dev *d, bool raw);
void bi_close(struct bi_dev *d);

/* What one side tells the other about its QP and buffer. */
struct bi_peer {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct ibv_qp *bi_create_qp(struct bi_dev *d);
/* Q_Key of the UD QPs of the "ud" case. */
#define BI_QKEY 0x11110000u
/* A UD QP on the device's CQ, brought to RTS with Q_Key BI_QKEY; dies on
 * failure. */
struct ibv_qp *bi_create_ud_qp(struct bi_dev *d);
/* RESET -> INIT -> RTR -> RTS towards peer; 0 or an errno. */
int bi_connect_qp(struct ibv_qp *qp, const struct bi_peer *local,
		  const struct bi_peer *peer);

/* Next completion within BI_TIMEOUT_MS: 1, or 0 on timeout. */
int bi_poll(struct ibv_cq *cq, struct ibv_wc *wc);
/* Posts one signaled work request with one SGE. */
int bi_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
	    uint64_t addr, uint32_t len, uint32_t lkey, uint64_t raddr,
	    uint32_t rkey);

/* Line protocol over TCP. */
int bi_tcp_connect(const char *host, int port);
int bi_tcp_accept(int port);
void bi_send_line(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Reads one line (without the newline); exits on EOF or error. */
void bi_recv_line(int fd, char *line, size_t size);

void bi_gid_to_hex(const union ibv_gid *gid, char hex[33]);
int bi_hex_to_gid(const char *hex, union ibv_gid *gid);

/*
 * One raw admin command through admin_raw: cmd (cmd_id is the driver's),
 * in_bytes of input-mailbox data (with in_mailbox = BI_RAW_MAILBOX), the
 * completion and out_size bytes of output. Returns 0 or -errno of the
 * write (the driver refused the request or the admin queue failed).
 */
int bi_raw(int fd, const struct mpr_cmd *cmd, const void *in,
	   size_t in_bytes, struct mpr_cmd_comp *comp, void *out,
	   size_t out_size);
/* Opens admin_raw, mounting debugfs if needed; -1 if there is none. */
int bi_raw_open(void);

/*
 * A page-aligned guest-physical address with at least `len` bytes outside
 * every "System RAM" range of /proc/iomem: 1 TiB, checked.
 */
uint64_t bi_outside_ram(uint64_t len);
/*
 * The first page of System RAM above 1 MiB: for driver refusal checks, and
 * for the rings of objects created only to exercise the NIC's parameter
 * checks (it refuses rings outside RAM). The page is not ours: nothing may
 * make the NIC write there (no doorbells, no CQEs, no events).
 */
uint64_t bi_inside_ram(void);
/* The MSI window of x86 (0xFEE00000-0xFEEFFFFF): writes there are
 * interrupts; the NIC refuses any address in it.
 */
#define BI_MSI_WINDOW 0xfee00000ull

const char *bi_wc_status(enum ibv_wc_status s);

/* Checks the guest kernel's log for warnings, oopses and BUGs: bad input
 * must not make the driver or the kernel complain.
 */
void bi_check_kernel_log(void);

#endif /* BI_COMMON_H */
