// SPDX-License-Identifier: MIT
/*
 * rdma_check: functional checks of an RDMA device through plain libibverbs,
 * run inside the QEMU guests by the guest tests (tests/guest/).
 *
 * Built on the host against Debian's libibverbs-dev headers and linked with
 * -libverbs; it runs in the guest against rdma-core v55's libibverbs.so.1
 * (same ABI, versioned symbols) and our provider.
 *
 *   rdma_check MODE [options]            server (waits for one client)
 *   rdma_check MODE [options] SERVER_IP  client
 *
 * Both sides exchange QPN, PSN, GID, rkey and buffer address over TCP (the
 * client retries connecting for --connect-timeout seconds), bring an RC QP
 * to RTS and run MODE. Every result is printed as a machine-parseable line
 * starting with "RDMA-CHECK "; the exit status is 0 only if every check of
 * this side passed.
 *
 * Modes:
 *   write      the client RDMA-WRITEs a seeded pattern into the server's
 *              buffer for each size; the server verifies every byte and a
 *              guard area on both sides (nothing written outside).
 *              "RDMA-CHECK write size=N ok" | "... FAIL mismatches=M first=O"
 *   read       the server fills its buffer with the pattern; the client
 *              RDMA-READs it and verifies every byte and the guards locally.
 *   send       the server posts a RECV (larger than the message), the client
 *              SENDs; the server checks status, opcode, byte_len, every byte
 *              and the guard; the last message is a SEND_WITH_IMM whose
 *              immediate is checked.
 *   badlkey    the client posts a good WRITE (must succeed), then a WRITE
 *              with a corrupted lkey and two good WRITEs: expects
 *              IBV_WC_LOC_PROT_ERR on the bad one, IBV_WC_WR_FLUSH_ERR on
 *              the others, the QP in ERR, and a WR posted in ERR flushed.
 *   wait_error the client keeps RDMA-WRITEs in flight until a completion
 *              error arrives (the peer died), prints its status and the QP
 *              state (ibv_query_qp), exits 0 if it saw an error completion
 *              and the QP is in ERR; 1 if --duration passes without one.
 *              The server waits until the client's data lands in its
 *              buffer, prints "RDMA-CHECK wait_error traffic seen" (and
 *              creates --ready-file), then idles until killed.
 *
 * Options:
 *   -d DEV     device (default: the first one)
 *   -i PORT    device port (default 1)
 *   -g IDX     GID index (default 3: the IPv4-mapped RoCEv2 GID)
 *   -p PORT    TCP port (default 18650)
 *   -S SEED    pattern seed (default 1)
 *   -s LIST    comma-separated sizes (default: 1 2 63 64 65 MTU-1 MTU MTU+1
 *              2MTU-1 2MTU+1 4095 4096 4097 65536 65537 1MiB 4MiB)
 *   --timeout N    QP local ACK timeout exponent (4.096 us * 2^N), default 14
 *   --retry N      QP retry_cnt (default 7)
 *   --connect-timeout S   client: how long to retry connecting (default 60)
 *   --duration S          wait_error: give up after S seconds (default 60)
 *   --ready-file F        wait_error server: created when traffic is seen
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MAX_SIZE (4u << 20)
#define GUARD 64u            /* guard bytes checked on each side of a transfer */
#define SLACK 8192u          /* offsets + guards */
#define BUF_SIZE (MAX_SIZE + SLACK)
#define SENTINEL 0xA5
#define CQ_DEPTH 512
#define POLL_TIMEOUT_S 30.0

enum mode { M_WRITE, M_READ, M_SEND, M_BADLKEY, M_WAIT_ERROR };

static struct {
	enum mode mode;
	const char *mode_name;
	const char *dev_name;
	int ib_port;
	int gid_idx;
	int tcp_port;
	uint64_t seed;
	const char *sizes;
	int qp_timeout;
	int retry_cnt;
	double connect_timeout;
	double duration;
	const char *ready_file;
	const char *server;
} opt = {
	.ib_port = 1,
	.gid_idx = 3,
	.tcp_port = 18650,
	.seed = 1,
	.qp_timeout = 14,
	.retry_cnt = 7,
	.connect_timeout = 60,
	.duration = 60,
};

struct peer {
	uint32_t qpn, psn, rkey;
	uint64_t va;
	union ibv_gid gid;
	int mtu; /* enum ibv_mtu */
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static uint8_t *buf;
static struct peer local, remote;
static int sock = -1;
static int failures;

static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("RDMA-CHECK ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("RDMA-CHECK FAIL ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	failures++;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("RDMA-CHECK FAIL ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *status_name(enum ibv_wc_status s)
{
	static const char *const names[] = {
		"IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR",
		"IBV_WC_LOC_EEC_OP_ERR", "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR",
		"IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR", "IBV_WC_LOC_ACCESS_ERR",
		"IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
		"IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
		"IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR",
		"IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR", "IBV_WC_RESP_TIMEOUT_ERR",
		"IBV_WC_GENERAL_ERR",
	};
	static char other[32];

	if ((unsigned)s < sizeof(names) / sizeof(names[0]))
		return names[s];
	snprintf(other, sizeof(other), "IBV_WC_STATUS_%d", (int)s);
	return other;
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	static char other[32];

	if ((unsigned)s < sizeof(names) / sizeof(names[0]))
		return names[s];
	snprintf(other, sizeof(other), "STATE_%d", (int)s);
	return other;
}

/* ---- the pattern: a seeded xorshift64* stream, different per size ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545F4914F6CDD1DULL;
}

static void pattern_fill(uint8_t *p, size_t n, size_t size)
{
	uint64_t s = mix(opt.seed * 0x9E3779B97F4A7C15ULL + size + 1) | 1;

	for (size_t i = 0; i < n; i += 8) {
		s = mix(s);
		for (size_t k = 0; k < 8 && i + k < n; k++)
			p[i + k] = (uint8_t)(s >> (8 * k));
	}
}

/*
 * Compares [p, p+size) with the pattern and the GUARD bytes on each side with
 * the sentinel. Returns the number of bad bytes; *first is the first bad
 * offset relative to p (negative: in the leading guard).
 */
static size_t verify(const uint8_t *p, size_t size, long *first)
{
	uint8_t *want = malloc(size ? size : 1);
	size_t bad = 0;

	if (!want)
		die("out of memory");
	pattern_fill(want, size, size);
	*first = 0;
	for (long i = -(long)GUARD; i < 0; i++)
		if (p[i] != SENTINEL && bad++ == 0)
			*first = i;
	for (size_t i = 0; i < size; i++)
		if (p[i] != want[i] && bad++ == 0)
			*first = (long)i;
	for (size_t i = size; i < size + GUARD; i++)
		if (p[i] != SENTINEL && bad++ == 0)
			*first = (long)i;
	free(want);
	return bad;
}

/* Offsets vary with the size so transfers start and end at odd addresses. */
static size_t local_off(size_t size) { return GUARD + (size * 7) % 1024; }
static size_t remote_off(size_t size) { return GUARD + 2048 + (size * 13) % 1024; }

/* ---- TCP control channel: one line per message ---- */

static void send_line(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	for (int done = 0; done < n;) {
		ssize_t w = write(sock, line + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("control channel: write: %s", strerror(errno));
		done += w;
	}
}

/* Reads one line (without the newline); returns false on EOF. */
static bool recv_line(char *line, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		char c;
		ssize_t r = read(sock, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("control channel: read: %s", strerror(errno));
		if (r == 0)
			return false;
		if (c == '\n')
			break;
		line[n++] = c;
	}
	line[n] = 0;
	return true;
}

static void expect_line(char *line, size_t cap)
{
	if (!recv_line(line, cap))
		die("control channel: the peer closed the connection");
}

static void tcp_connect(void)
{
	double deadline = now() + opt.connect_timeout;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(opt.tcp_port) };
	int attempts = 0;

	if (inet_pton(AF_INET, opt.server, &a.sin_addr) != 1)
		die("bad server address '%s'", opt.server);
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		attempts++;
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			sock = fd;
			break;
		}
		int err = errno;

		close(fd);
		if (now() > deadline)
			die("cannot connect to %s:%d within %.0f s (%d attempts): %s", opt.server,
			    opt.tcp_port, opt.connect_timeout, attempts, strerror(err));
		usleep(200000);
	}
	int one = 1;

	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	say("%s connected to %s:%d after %d attempt(s)", opt.mode_name, opt.server, opt.tcp_port,
	    attempts);
}

static void tcp_accept(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(opt.tcp_port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (lfd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1))
		die("cannot listen on port %d: %s", opt.tcp_port, strerror(errno));
	say("%s server listening on port %d", opt.mode_name, opt.tcp_port);
	sock = accept(lfd, NULL, NULL);
	if (sock < 0)
		die("accept: %s", strerror(errno));
	close(lfd);
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	say("%s server accepted a client", opt.mode_name);
}

static void exchange(void)
{
	char line[512], gid[33];

	for (int i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", local.gid.raw[i]);
	send_line("%06x %06x %08x %016" PRIx64 " %s %d", local.qpn, local.psn, local.rkey, local.va,
		  gid, local.mtu);
	expect_line(line, sizeof(line));
	if (sscanf(line, "%x %x %x %" SCNx64 " %32s %d", &remote.qpn, &remote.psn, &remote.rkey,
		   &remote.va, gid, &remote.mtu) != 6 || strlen(gid) != 32)
		die("control channel: bad peer parameters '%s'", line);
	for (int i = 0; i < 16; i++) {
		unsigned v;

		sscanf(gid + 2 * i, "%2x", &v);
		remote.gid.raw[i] = (uint8_t)v;
	}
	char l[INET6_ADDRSTRLEN], r[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, local.gid.raw, l, sizeof(l));
	inet_ntop(AF_INET6, remote.gid.raw, r, sizeof(r));
	say("local qpn=0x%06x psn=0x%06x rkey=0x%x va=0x%" PRIx64 " gid=%s", local.qpn, local.psn,
	    local.rkey, local.va, l);
	say("remote qpn=0x%06x psn=0x%06x rkey=0x%x va=0x%" PRIx64 " gid=%s", remote.qpn,
	    remote.psn, remote.rkey, remote.va, r);
}

/* ---- verbs set-up ---- */

static void open_device(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;

	if (!list || n == 0)
		die("no RDMA device");
	for (int i = 0; i < n; i++)
		if (!opt.dev_name || !strcmp(ibv_get_device_name(list[i]), opt.dev_name)) {
			dev = list[i];
			break;
		}
	if (!dev)
		die("no device named %s", opt.dev_name);
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device(%s): %s", ibv_get_device_name(dev), strerror(errno));
	ibv_free_device_list(list);

	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, opt.ib_port, &pa))
		die("ibv_query_port: %s", strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE)
		die("port %d is not active (state %d)", opt.ib_port, pa.state);
	local.mtu = pa.active_mtu;
	if (ibv_query_gid(ctx, opt.ib_port, opt.gid_idx, &local.gid))
		die("ibv_query_gid(%d): %s", opt.gid_idx, strerror(errno));

	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	cq = ibv_create_cq(ctx, CQ_DEPTH, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	if (posix_memalign((void **)&buf, 4096, BUF_SIZE))
		die("out of memory");
	memset(buf, SENTINEL, BUF_SIZE);
	mr = ibv_reg_mr(pd, buf, BUF_SIZE,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr(%u bytes): %s", BUF_SIZE, strerror(errno));

	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 128, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	qp = ibv_create_qp(pd, &qa);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	srand48(getpid() ^ (long)(now() * 1e6));
	local.qpn = qp->qp_num;
	local.psn = lrand48() & 0xffffff;
	local.rkey = mr->rkey;
	local.va = (uintptr_t)buf;
}

static void connect_qp(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = opt.ib_port,
		.qp_access_flags =
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify_qp to INIT: %s", strerror(errno));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = local.mtu < remote.mtu ? local.mtu : remote.mtu;
	a.dest_qp_num = remote.qpn;
	a.rq_psn = remote.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = remote.gid;
	a.ah_attr.grh.sgid_index = opt.gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = opt.ib_port;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify_qp to RTR: %s", strerror(errno));

	const int path_mtu = a.path_mtu;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = opt.qp_timeout;
	a.retry_cnt = opt.retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = local.psn;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp to RTS: %s", strerror(errno));
	/* enum ibv_mtu: IBV_MTU_256 = 1, ... */
	say("%s qp connected: path_mtu=%d timeout=%d retry_cnt=%d", opt.mode_name, 128 << path_mtu,
	    opt.qp_timeout, opt.retry_cnt);
}

/* ---- data path helpers ---- */

static int post_rdma(enum ibv_wr_opcode op, uint64_t wr_id, size_t loff, size_t roff, size_t len,
		     uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + loff, .length = (uint32_t)len,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = remote.va + roff;
		wr.wr.rdma.rkey = remote.rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* Polls one completion; false on timeout. */
static bool poll_one(struct ibv_wc *wc, double timeout)
{
	double deadline = now() + timeout;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			die("ibv_poll_cq: %d", n);
		if (n == 1)
			return true;
		if (now() > deadline)
			return false;
	}
}

static void buf_sentinel(size_t off, size_t size)
{
	memset(buf + off - GUARD, SENTINEL, size + 2 * GUARD);
}

static void report(const char *what, size_t size, size_t bad, long first)
{
	if (!bad)
		say("%s size=%zu ok", what, size);
	else
		fail("%s size=%zu mismatches=%zu first=%ld", what, size, bad, first);
}

/* Parses the size list; returns the count. */
static size_t sizes(size_t *out, size_t cap)
{
	size_t n = 0;

	if (opt.sizes) {
		char *copy = strdup(opt.sizes), *save = NULL;

		for (char *t = strtok_r(copy, ",", &save); t && n < cap;
		     t = strtok_r(NULL, ",", &save)) {
			unsigned long v = strtoul(t, NULL, 0);

			if (v < 1 || v > MAX_SIZE)
				die("size %s out of range 1..%u", t, MAX_SIZE);
			out[n++] = v;
		}
		free(copy);
		return n;
	}
	size_t mtu = 128u << local.mtu; /* IBV_MTU_256 = 1 */
	size_t def[] = { 1, 2, 63, 64, 65, mtu - 1, mtu, mtu + 1, 2 * mtu - 1, 2 * mtu + 1,
			 4095, 4096, 4097, 65536, 65537, 1u << 20, MAX_SIZE };

	for (size_t i = 0; i < sizeof(def) / sizeof(def[0]) && n < cap; i++)
		out[n++] = def[i];
	return n;
}

/* ---- modes ---- */

/* write: client writes, server verifies. read: server fills, client reads and verifies. */
static void run_transfer(bool client)
{
	size_t list[64], n = sizes(list, 64);
	char line[256];
	const bool write_mode = opt.mode == M_WRITE;

	if (!client) {
		/* Serve requests until "bye". */
		for (;;) {
			size_t size, roff;
			char cmd[32];

			if (!recv_line(line, sizeof(line)))
				die("control channel closed before 'bye'");
			if (!strncmp(line, "bye", 3)) {
				int peer_fail = atoi(line + 4);

				say("%s server done: %d local failure(s), %d on the client", opt.mode_name,
				    failures, peer_fail);
				failures += peer_fail;
				return;
			}
			if (sscanf(line, "%31s %zu %zu", cmd, &size, &roff) != 3)
				die("control channel: bad request '%s'", line);
			if (!strcmp(cmd, "prep")) {
				buf_sentinel(roff, size);
				if (!write_mode)
					pattern_fill(buf + roff, size, size);
				send_line("ready");
			} else if (!strcmp(cmd, "check")) {
				long first;
				size_t bad = verify(buf + roff, size, &first);

				report(opt.mode_name, size, bad, first);
				send_line("%zu %ld", bad, first);
			} else {
				die("control channel: unknown request '%s'", line);
			}
		}
	}

	for (size_t i = 0; i < n; i++) {
		size_t size = list[i], loff = local_off(size), roff = remote_off(size);
		struct ibv_wc wc;
		double t0;

		send_line("prep %zu %zu", size, roff);
		expect_line(line, sizeof(line));
		buf_sentinel(loff, size);
		if (write_mode)
			pattern_fill(buf + loff, size, size);
		t0 = now();
		if (post_rdma(write_mode ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, size, loff, roff, size,
			      mr->lkey))
			die("ibv_post_send(%s, %zu bytes) failed", opt.mode_name, size);
		if (!poll_one(&wc, POLL_TIMEOUT_S)) {
			fail("%s size=%zu no completion within %.0f s", opt.mode_name, size,
			     POLL_TIMEOUT_S);
			break;
		}
		double us = (now() - t0) * 1e6;

		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != size ||
		    wc.opcode != (write_mode ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ)) {
			fail("%s size=%zu completion status=%s opcode=%d wr_id=%" PRIu64
			     " vendor_err=0x%x",
			     opt.mode_name, size, status_name(wc.status), wc.opcode, wc.wr_id,
			     wc.vendor_err);
			break;
		}
		if (write_mode) {
			size_t bad;
			long first;

			send_line("check %zu %zu", size, roff);
			expect_line(line, sizeof(line));
			if (sscanf(line, "%zu %ld", &bad, &first) != 2)
				die("control channel: bad check answer '%s'", line);
			if (bad)
				fail("write size=%zu server found mismatches=%zu first=%ld", size, bad,
				     first);
			else
				say("write size=%zu ok (%.0f us)", size, us);
		} else {
			long first;
			size_t bad = verify(buf + loff, size, &first);

			if (bad)
				report("read", size, bad, first);
			else
				say("read size=%zu ok (%.0f us)", size, us);
		}
	}
	send_line("bye %d", failures);
	say("%s client done: %zu sizes, %d failure(s)", opt.mode_name, n, failures);
}

static void post_recv(size_t off, size_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = (uint32_t)len,
			       .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv failed");
}

#define IMM_VALUE 0x12345678u

static void run_send(bool client)
{
	size_t list[64], n = sizes(list, 64);
	char line[256];

	if (!client) {
		for (;;) {
			size_t size, roff;
			int imm;
			char cmd[32];

			if (!recv_line(line, sizeof(line)))
				die("control channel closed before 'bye'");
			if (!strncmp(line, "bye", 3)) {
				int peer_fail = atoi(line + 4);

				say("send server done: %d local failure(s), %d on the client", failures,
				    peer_fail);
				failures += peer_fail;
				return;
			}
			if (sscanf(line, "%31s %zu %zu %d", cmd, &size, &roff, &imm) != 4)
				die("control channel: bad request '%s'", line);
			if (!strcmp(cmd, "prep")) {
				buf_sentinel(roff, size);
				/* The RECV is larger than the message: byte_len must say size. */
				post_recv(roff, size + GUARD / 2, size);
				send_line("ready");
				continue;
			}
			struct ibv_wc wc;
			long first = 0;
			size_t bad = 0;

			if (!poll_one(&wc, POLL_TIMEOUT_S)) {
				fail("send size=%zu no RECV completion within %.0f s", size,
				     POLL_TIMEOUT_S);
				send_line("1 -1");
				continue;
			}
			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
			    wc.wr_id != size || wc.byte_len != size) {
				fail("send size=%zu RECV completion status=%s opcode=%d wr_id=%" PRIu64
				     " byte_len=%u",
				     size, status_name(wc.status), wc.opcode, wc.wr_id, wc.byte_len);
				bad = 1;
			} else if (imm && (!(wc.wc_flags & IBV_WC_WITH_IMM) ||
					   ntohl(wc.imm_data) != IMM_VALUE)) {
				fail("send size=%zu immediate: wc_flags=0x%x imm=0x%x (want 0x%x)", size,
				     wc.wc_flags, ntohl(wc.imm_data), IMM_VALUE);
				bad = 1;
			} else if (!imm && (wc.wc_flags & IBV_WC_WITH_IMM)) {
				fail("send size=%zu unexpected IBV_WC_WITH_IMM", size);
				bad = 1;
			} else {
				/* The RECV buffer beyond the message keeps the sentinel. */
				bad = verify(buf + roff, size, &first);
				if (imm)
					say("send_imm size=%zu imm=0x%x", size, ntohl(wc.imm_data));
				report("send", size, bad, first);
			}
			send_line("%zu %ld", bad, first);
		}
	}

	for (size_t i = 0; i <= n; i++) {
		/* The last round repeats the first size as SEND_WITH_IMM. */
		const bool imm = i == n;
		size_t size = imm ? list[0] : list[i], loff = local_off(size),
		       roff = remote_off(size);
		struct ibv_sge sge = { .addr = (uintptr_t)buf + loff, .length = (uint32_t)size,
				       .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = size,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(IMM_VALUE),
		}, *badwr;
		struct ibv_wc wc;
		size_t bad;
		long first;

		send_line("prep %zu %zu %d", size, roff, imm);
		expect_line(line, sizeof(line));
		pattern_fill(buf + loff, size, size);
		if (ibv_post_send(qp, &wr, &badwr))
			die("ibv_post_send(SEND, %zu bytes) failed", size);
		if (!poll_one(&wc, POLL_TIMEOUT_S)) {
			fail("send size=%zu no completion within %.0f s", size, POLL_TIMEOUT_S);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND || wc.wr_id != size) {
			fail("send size=%zu completion status=%s opcode=%d vendor_err=0x%x", size,
			     status_name(wc.status), wc.opcode, wc.vendor_err);
			break;
		}
		send_line("check %zu %zu %d", size, roff, imm);
		expect_line(line, sizeof(line));
		if (sscanf(line, "%zu %ld", &bad, &first) != 2)
			die("control channel: bad check answer '%s'", line);
		if (bad)
			fail("%s size=%zu server found mismatches=%zu first=%ld",
			     imm ? "send_imm" : "send", size, bad, first);
		else
			say("%s size=%zu ok", imm ? "send_imm" : "send", size);
	}
	send_line("bye %d", failures);
	say("send client done: %zu sizes + 1 with immediate, %d failure(s)", n, failures);
}

static enum ibv_qp_state query_state(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) {
		fail("ibv_query_qp: %s", strerror(errno));
		return (enum ibv_qp_state)-1;
	}
	return a.qp_state;
}

static void run_badlkey(bool client)
{
	char line[64];

	if (!client) {
		if (!recv_line(line, sizeof(line)))
			die("control channel closed before 'bye'");
		say("badlkey server done: client says '%s'", line);
		failures += atoi(line + 4);
		return;
	}

	static const enum ibv_wc_status want[] = { IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR,
						   IBV_WC_WR_FLUSH_ERR };
	struct ibv_wc wc;
	const uint32_t bad_lkey = mr->lkey ^ 0x00abcd00u;

	/* A good WRITE first: the QP works. */
	if (post_rdma(IBV_WR_RDMA_WRITE, 100, 4096, 4096, 4096, mr->lkey))
		die("ibv_post_send failed");
	if (!poll_one(&wc, POLL_TIMEOUT_S))
		die("badlkey: no completion of the good WRITE");
	say("badlkey wr_id=100 status=%s", status_name(wc.status));
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 100)
		fail("badlkey: the good WRITE completed with %s", status_name(wc.status));

	/* The bad one (lkey 0x... instead of the MR's), then two good ones. */
	say("badlkey lkey=0x%x bad_lkey=0x%x", mr->lkey, bad_lkey);
	if (post_rdma(IBV_WR_RDMA_WRITE, 101, 4096, 4096, 4096, bad_lkey) ||
	    post_rdma(IBV_WR_RDMA_WRITE, 102, 4096, 4096, 4096, mr->lkey) ||
	    post_rdma(IBV_WR_RDMA_WRITE, 103, 4096, 4096, 4096, mr->lkey))
		die("ibv_post_send failed");
	for (int i = 0; i < 3; i++) {
		if (!poll_one(&wc, POLL_TIMEOUT_S)) {
			fail("badlkey: completion %d of 3 missing after %.0f s", i + 1, POLL_TIMEOUT_S);
			break;
		}
		say("badlkey wr_id=%" PRIu64 " status=%s vendor_err=0x%x", wc.wr_id,
		    status_name(wc.status), wc.vendor_err);
		if (wc.wr_id != 101u + i || wc.status != want[i])
			fail("badlkey: completion %d: wr_id=%" PRIu64 " status=%s, want wr_id=%d %s",
			     i + 1, wc.wr_id, status_name(wc.status), 101 + i, status_name(want[i]));
	}
	enum ibv_qp_state st = query_state();

	say("badlkey qp_state=%s", state_name(st));
	if (st != IBV_QPS_ERR)
		fail("badlkey: QP state %s after the error, want ERR", state_name(st));

	/* A WR posted to a QP in ERR completes with a flush error. */
	if (post_rdma(IBV_WR_RDMA_WRITE, 104, 4096, 4096, 4096, mr->lkey)) {
		say("badlkey post in ERR refused by ibv_post_send");
	} else if (!poll_one(&wc, POLL_TIMEOUT_S)) {
		fail("badlkey: a WR posted in ERR never completed");
	} else {
		say("badlkey wr_id=%" PRIu64 " status=%s (posted in ERR)", wc.wr_id,
		    status_name(wc.status));
		if (wc.status != IBV_WC_WR_FLUSH_ERR)
			fail("badlkey: a WR posted in ERR completed with %s", status_name(wc.status));
	}
	if (ibv_poll_cq(cq, 1, &wc) == 1)
		fail("badlkey: an extra completion wr_id=%" PRIu64 " status=%s", wc.wr_id,
		     status_name(wc.status));
	send_line("bye %d", failures);
	if (!failures)
		say("badlkey ok");
}

static void run_wait_error(bool client)
{
	if (!client) {
		/* The client writes a non-zero counter into the first 8 bytes. */
		volatile uint64_t *first = (volatile uint64_t *)buf;

		memset(buf, 0, 4096);
		while (*first == 0)
			;
		say("wait_error traffic seen");
		if (opt.ready_file) {
			int fd = open(opt.ready_file, O_CREAT | O_WRONLY, 0644);

			if (fd >= 0)
				close(fd);
		}
		/* Idle until the guest dies (or the client hangs up). */
		char line[64];

		recv_line(line, sizeof(line));
		say("wait_error server: the client hung up");
		return;
	}

	const unsigned window = 16, msg = 65536;
	uint64_t posted = 0, ok = 0, flushed = 0;
	double t0 = now(), deadline = t0 + opt.duration, last_report = t0;
	struct ibv_wc wc;
	bool got_error = false;

	memset(buf, 0, 4096);
	while (posted < window) {
		posted++;
		*(uint64_t *)buf = posted;
		if (post_rdma(IBV_WR_RDMA_WRITE, posted, 0, 0, msg, mr->lkey))
			die("ibv_post_send failed");
	}
	say("wait_error writing: %u x %u bytes in flight, timeout=%d retry_cnt=%d", window, msg,
	    opt.qp_timeout, opt.retry_cnt);
	while (!got_error) {
		int n = ibv_poll_cq(cq, 1, &wc);
		double t = now();

		if (n < 0)
			die("ibv_poll_cq: %d", n);
		/* Checked whether or not completions keep coming. */
		if (t > deadline)
			break;
		if (t - last_report > 5) {
			say("wait_error still writing: %" PRIu64 " completions", ok);
			last_report = t;
		}
		if (n == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			got_error = true;
			say("wait_error status=%s vendor_err=0x%x wr_id=%" PRIu64
			    " after %" PRIu64 " successful completions, %.3f s",
			    status_name(wc.status), wc.vendor_err, wc.wr_id, ok, now() - t0);
			break;
		}
		ok++;
		posted++;
		*(uint64_t *)buf = posted;
		if (post_rdma(IBV_WR_RDMA_WRITE, posted, 0, 0, msg, mr->lkey))
			die("ibv_post_send failed after %" PRIu64 " completions", ok);
	}
	if (!got_error) {
		fail("wait_error timeout: no error completion within %.0f s (%" PRIu64
		     " successful completions)",
		     opt.duration, ok);
		return;
	}
	/* The rest of the window: flushed (or the same error). */
	uint64_t other = 0;
	double drain_end = now() + POLL_TIMEOUT_S;

	while (flushed + other + ok + 1 < posted && now() < drain_end) {
		if (ibv_poll_cq(cq, 1, &wc) != 1)
			continue;
		if (wc.status == IBV_WC_WR_FLUSH_ERR)
			flushed++;
		else
			other++;
	}
	say("wait_error drained: %" PRIu64 " flushed, %" PRIu64 " other, %" PRIu64
	    " missing of %" PRIu64 " outstanding",
	    flushed, other, posted - ok - 1 - flushed - other, posted - ok - 1);
	if (flushed + other + ok + 1 != posted)
		fail("wait_error: %" PRIu64 " outstanding WRs never completed",
		     posted - ok - 1 - flushed - other);
	if (ok == 0)
		fail("wait_error: the error came before any successful write (no transfer)");
	enum ibv_qp_state st = query_state();

	say("wait_error qp_state=%s", state_name(st));
	if (st != IBV_QPS_ERR)
		fail("wait_error: QP state %s after the error, want ERR", state_name(st));
	if (!failures)
		say("wait_error ok");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rdma_check write|read|send|badlkey|wait_error [-d DEV] [-i PORT] [-g GIDX]\n"
		"       [-p TCPPORT] [-S SEED] [-s SIZES] [--timeout N] [--retry N]\n"
		"       [--connect-timeout S] [--duration S] [--ready-file F] [SERVER_IP]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 1 },
		{ "retry", required_argument, NULL, 2 },
		{ "connect-timeout", required_argument, NULL, 3 },
		{ "duration", required_argument, NULL, 4 },
		{ "ready-file", required_argument, NULL, 5 },
		{ 0 },
	};
	static const char *const modes[] = { "write", "read", "send", "badlkey", "wait_error" };
	int c;

	if (argc < 2)
		usage();
	opt.mode_name = argv[1];
	for (c = 0; c < 5; c++)
		if (!strcmp(argv[1], modes[c]))
			break;
	if (c == 5)
		usage();
	opt.mode = (enum mode)c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "d:i:g:p:S:s:", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': opt.dev_name = optarg; break;
		case 'i': opt.ib_port = atoi(optarg); break;
		case 'g': opt.gid_idx = atoi(optarg); break;
		case 'p': opt.tcp_port = atoi(optarg); break;
		case 'S': opt.seed = strtoull(optarg, NULL, 0); break;
		case 's': opt.sizes = optarg; break;
		case 1: opt.qp_timeout = atoi(optarg); break;
		case 2: opt.retry_cnt = atoi(optarg); break;
		case 3: opt.connect_timeout = atof(optarg); break;
		case 4: opt.duration = atof(optarg); break;
		case 5: opt.ready_file = optarg; break;
		default: usage();
		}
	}
	if (optind < argc)
		opt.server = argv[optind++];
	if (optind != argc)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	const bool client = opt.server != NULL;

	open_device();
	if (client)
		tcp_connect();
	else
		tcp_accept();
	exchange();
	connect_qp();
	/* Both QPs are ready before any data moves. */
	char line[16];

	send_line("rts");
	expect_line(line, sizeof(line));

	switch (opt.mode) {
	case M_WRITE:
	case M_READ: run_transfer(client); break;
	case M_SEND: run_send(client); break;
	case M_BADLKEY: run_badlkey(client); break;
	case M_WAIT_ERROR: run_wait_error(client); break;
	}
	say("%s %s exit %d", opt.mode_name, client ? "client" : "server", failures ? 1 : 0);
	return failures ? 1 : 0;
}
