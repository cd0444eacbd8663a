// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/* Helpers of the bad-input guest programs: see bi_common.h. */
#define _GNU_SOURCE
#include "bi_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int bi_failures;

void bi_ok(const char *check)
{
	printf("BI-OK %s\n", check);
	fflush(stdout);
}

static void bi_vfail(const char *check, const char *fmt, va_list ap)
{
	printf("BI-FAIL %s: ", check);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	bi_failures++;
}

void bi_fail(const char *check, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bi_vfail(check, fmt, ap);
	va_end(ap);
}

bool bi_check(bool cond, const char *check, const char *fmt, ...)
{
	va_list ap;

	if (cond) {
		bi_ok(check);
		return true;
	}
	va_start(ap, fmt);
	bi_vfail(check, fmt, ap);
	va_end(ap);
	return false;
}

void bi_count(const char *name, long long value)
{
	printf("BI-COUNT %s %lld\n", name, value);
	fflush(stdout);
}

int bi_done(void)
{
	printf("BI-DONE failures=%d\n", bi_failures);
	fflush(stdout);
	return bi_failures ? 1 : 0;
}

void bi_die(const char *check, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bi_vfail(check, fmt, ap);
	va_end(ap);
	exit(bi_done());
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *bi_wc_status(enum ibv_wc_status s)
{
	return ibv_wc_status_str(s);
}

void bi_check_kernel_log(void)
{
	static const char *const bad[] = { "WARNING:", "BUG:", "Oops", "Call Trace" };
	int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *log, *line;
	size_t i;
	int n;

	if (size <= 0)
		bi_die("kernel_log", "klogctl: %s", strerror(errno));
	log = calloc(1, (size_t)size + 1);
	if (!log)
		bi_die("kernel_log", "no memory");
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, size);
	if (n < 0)
		bi_die("kernel_log", "klogctl: %s", strerror(errno));
	log[n] = 0;
	for (line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(line, bad[i])) {
				bi_fail("guest_kernel_log_clean", "%s", line);
				free(log);
				return;
			}
	bi_ok("guest_kernel_log_clean");
	free(log);
}

/* ---------------------------------------------------------------------- */
/* Raw admin commands                                                       */
/* ---------------------------------------------------------------------- */

int bi_raw_open(void)
{
	const char *pattern = "/sys/kernel/debug/mprdma/*/admin_raw";
	glob_t g;
	int fd = -1;

	if (access("/sys/kernel/debug/mprdma", F_OK) != 0 &&
	    mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL) != 0 &&
	    errno != EBUSY)
		return -1;
	if (glob(pattern, 0, NULL, &g) != 0)
		return -1;
	if (g.gl_pathc == 1)
		fd = open(g.gl_pathv[0], O_RDWR);
	globfree(&g);
	return fd;
}

int bi_raw(int fd, const struct mpr_cmd *cmd, const void *in, size_t in_bytes,
	   struct mpr_cmd_comp *comp, void *out, size_t out_size)
{
	uint8_t req[sizeof(*cmd) + 4096];
	uint8_t resp[sizeof(*comp) + 4096];
	ssize_t n;

	if (in_bytes > sizeof(req) - sizeof(*cmd) ||
	    out_size > sizeof(resp) - sizeof(*comp))
		return -E2BIG;
	memcpy(req, cmd, sizeof(*cmd));
	if (in_bytes)
		memcpy(req + sizeof(*cmd), in, in_bytes);
	n = write(fd, req, sizeof(*cmd) + in_bytes);
	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(*cmd) + in_bytes)
		return -EIO;
	n = pread(fd, resp, sizeof(*comp) + out_size, 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(*comp))
		return -EIO;
	memcpy(comp, resp, sizeof(*comp));
	if (out_size) {
		memset(out, 0, out_size);
		memcpy(out, resp + sizeof(*comp), (size_t)n - sizeof(*comp));
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Guest-physical memory map                                                */
/* ---------------------------------------------------------------------- */

/* Calls fn for every System RAM range of /proc/iomem (root sees addresses). */
static void for_each_ram(void (*fn)(uint64_t start, uint64_t end, void *arg),
			 void *arg)
{
	FILE *f = fopen("/proc/iomem", "r");
	char line[256];

	if (!f)
		bi_die("iomem", "cannot open /proc/iomem: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end;

		if (!strstr(line, ": System RAM"))
			continue;
		if (sscanf(line, " %" SCNx64 "-%" SCNx64, &start, &end) == 2)
			fn(start, end, arg);
	}
	fclose(f);
}

struct overlap {
	uint64_t start, end;
	bool hit;
	uint64_t max_end;
	uint64_t first_above_1m;
};

static void check_overlap(uint64_t start, uint64_t end, void *arg)
{
	struct overlap *o = arg;

	if (start <= o->end && o->start <= end)
		o->hit = true;
	if (end > o->max_end)
		o->max_end = end;
	if (start >= 0x100000 && !o->first_above_1m)
		o->first_above_1m = start;
}

uint64_t bi_outside_ram(uint64_t len)
{
	struct overlap o = { .start = 1ull << 40 };

	o.end = o.start + len - 1;
	for_each_ram(check_overlap, &o);
	if (o.hit || !o.max_end)
		bi_die("outside_ram", "0x%" PRIx64 " is System RAM (RAM ends at 0x%" PRIx64 ")",
		       o.start, o.max_end);
	printf("BI-INFO guest RAM ends at 0x%" PRIx64 "; using 0x%" PRIx64 " as an address outside it\n",
	       o.max_end, o.start);
	return o.start;
}

uint64_t bi_inside_ram(void)
{
	struct overlap o = { .start = 1, .end = 0 };

	for_each_ram(check_overlap, &o);
	if (!o.first_above_1m)
		bi_die("inside_ram", "no System RAM above 1 MiB in /proc/iomem");
	return o.first_above_1m;
}

/* ---------------------------------------------------------------------- */
/* Device                                                                   */
/* ---------------------------------------------------------------------- */

/*
 * Creates and destroys one object through admin_raw; returns its number,
 * which the next object of that kind gets. A CQ is created on EQ 0 with its
 * ring on the first page of RAM above 1 MiB, which is not ours: the NIC
 * refuses rings outside RAM (BAD_PARAM/SYN_ADDRESS), and this one never
 * makes it write there: no QP uses the CQ, nobody rings its doorbell, and
 * it is destroyed at once.
 */
static uint32_t probe_handle(int fd, uint16_t create, uint16_t destroy)
{
	struct mpr_cmd cmd = { .hdr.opcode = create };
	struct mpr_cmd_comp comp;
	uint32_t handle;
	int err;

	if (create == MPR_CMD_CREATE_CQ) {
		cmd.u.create_cq.base = bi_inside_ram();
		cmd.u.create_cq.log_size = 1;
	}
	err = bi_raw(fd, &cmd, NULL, 0, &comp, NULL, 0);
	if (err || comp.status != MPR_CMD_OK)
		bi_die("handle_probe", "raw command %#x: err %d status %u", create, err,
		       comp.status);
	handle = comp.out[0];
	memset(&cmd, 0, sizeof(cmd));
	cmd.hdr.opcode = destroy;
	cmd.u.handle.handle = handle;	/* pdn and handle share the offset */
	err = bi_raw(fd, &cmd, NULL, 0, &comp, NULL, 0);
	if (err || comp.status != MPR_CMD_OK)
		bi_die("handle_probe", "raw command %#x of %u: err %d status %u", destroy,
		       handle, err, comp.status);
	return handle;
}

void bi_open(struct bi_dev *d, bool raw)
{
	struct ibv_device **list;
	int i, n;

	memset(d, 0, sizeof(*d));
	d->raw_fd = -1;
	list = ibv_get_device_list(&n);
	if (!list)
		bi_die("open", "ibv_get_device_list: %s", strerror(errno));
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "mprdma_0"))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		bi_die("open", "cannot open mprdma_0");

	if (raw) {
		d->raw_fd = bi_raw_open();
		if (d->raw_fd < 0)
			bi_die("admin_raw_open", "no /sys/kernel/debug/mprdma/*/admin_raw: %s",
			       strerror(errno));
		d->pdn = probe_handle(d->raw_fd, MPR_CMD_ALLOC_PD, MPR_CMD_DEALLOC_PD);
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		bi_die("open", "ibv_alloc_pd: %s", strerror(errno));
	if (raw)
		d->cqn = probe_handle(d->raw_fd, MPR_CMD_CREATE_CQ, MPR_CMD_DESTROY_CQ);
	d->cq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	if (!d->cq)
		bi_die("open", "ibv_create_cq: %s", strerror(errno));
	d->buf = aligned_alloc(4096, BI_BUF_LEN);
	if (!d->buf)
		bi_die("open", "no memory");
	memset(d->buf, 0, BI_BUF_LEN);
	d->mr = ibv_reg_mr(d->pd, d->buf, BI_BUF_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	if (!d->mr)
		bi_die("open", "ibv_reg_mr: %s", strerror(errno));
	/* ib_core fills the GID table from eth0's addresses shortly after
	 * the driver binds the port: wait for the IPv4-mapped entry.
	 */
	for (i = 0; i < 100; i++) {
		if (ibv_query_gid(d->ctx, 1, BI_GID_INDEX, &d->gid) == 0 &&
		    d->gid.raw[10] == 0xff && d->gid.raw[11] == 0xff)
			return;
		usleep(100000);
	}
	bi_die("open", "GID %d is not an IPv4-mapped address", BI_GID_INDEX);
}

void bi_close(struct bi_dev *d)
{
	ibv_dereg_mr(d->mr);
	ibv_destroy_cq(d->cq);
	ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	free(d->buf);
	if (d->raw_fd >= 0)
		close(d->raw_fd);
}

/* A QP of `type` on the device's CQ, 16 WRs each way; dies on failure. */
static struct ibv_qp *create_qp_of(struct bi_dev *d, enum ibv_qp_type type, uint32_t sges)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = {
			.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = sges,
			.max_recv_sge = sges,
		},
		.qp_type = type,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &attr);

	if (!qp)
		bi_die("create_qp", "ibv_create_qp: %s", strerror(errno));
	return qp;
}

struct ibv_qp *bi_create_qp(struct bi_dev *d)
{
	return create_qp_of(d, IBV_QPT_RC, 2);
}

struct ibv_qp *bi_create_ud_qp(struct bi_dev *d)
{
	struct ibv_qp *qp = create_qp_of(d, IBV_QPT_UD, 1);
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = BI_QKEY;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		bi_die("create_ud_qp", "to INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		bi_die("create_ud_qp", "to RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		bi_die("create_ud_qp", "to RTS: %s", strerror(errno));
	return qp;
}

int bi_connect_qp(struct ibv_qp *qp, const struct bi_peer *local,
		  const struct bi_peer *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return errno;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = BI_GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return errno;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = local->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		return errno;
	return 0;
}

int bi_poll(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t deadline = now_ms() + BI_TIMEOUT_MS;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			bi_die("poll_cq", "ibv_poll_cq: %d", n);
		if (n == 1)
			return 1;
	} while (now_ms() < deadline);
	return 0;
}

int bi_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
	    uint64_t addr, uint32_t len, uint32_t lkey, uint64_t raddr,
	    uint32_t rkey)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* ---------------------------------------------------------------------- */
/* TCP line protocol                                                        */
/* ---------------------------------------------------------------------- */

int bi_tcp_connect(const char *host, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	uint64_t deadline = now_ms() + 120000;
	int one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		bi_die("tcp_connect", "bad address %s", host);
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			bi_die("tcp_connect", "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		/* The server's guest may still be booting: retry. */
		if (now_ms() > deadline)
			bi_die("tcp_connect", "cannot reach %s:%d: %s", host, port,
			       strerror(errno));
		usleep(200000);
	}
}

int bi_tcp_accept(int port)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	int one = 1;
	int lfd, fd;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		bi_die("tcp_accept", "socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		bi_die("tcp_accept", "bind/listen: %s", strerror(errno));
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		bi_die("tcp_accept", "accept: %s", strerror(errno));
	close(lfd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

void bi_send_line(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	n = strlen(line);
	line[n++] = '\n';
	if (write(fd, line, n) != (ssize_t)n)
		bi_die("tcp_send", "write: %s", strerror(errno));
}

void bi_recv_line(int fd, char *line, size_t size)
{
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r <= 0)
			bi_die("tcp_recv", "connection closed (%s)", r ? strerror(errno) : "EOF");
		if (c == '\n')
			break;
		if (n + 1 < size)
			line[n++] = c;
	}
	line[n] = 0;
}

void bi_gid_to_hex(const union ibv_gid *gid, char hex[33])
{
	int i;

	for (i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", gid->raw[i]);
}

int bi_hex_to_gid(const char *hex, union ibv_gid *gid)
{
	int i;

	if (strlen(hex) != 32)
		return -1;
	for (i = 0; i < 16; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		gid->raw[i] = (uint8_t)b;
	}
	return 0;
}
