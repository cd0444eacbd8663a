// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * tt_victim: the tenant under attack in the two-tenants test (runs on g1
 * as root, against tt_attacker on g0; two_tenants_test.py).
 *
 *   tt_victim
 *
 * Its private work: two RC QPs of its own in protection domain A, connected
 * to each other through its own address (the packets go out to the switch
 * and come back), moving data without pause for the whole attack: WRITEs
 * into a work buffer and READs of a secret MR whose pattern every READ
 * verifies. Its service: RC QPs in protection domain B with a public MR,
 * one per connection the attacker asks for over TCP. At the end the secret
 * must be intact, every private transfer must have succeeded with the right
 * data, the private QPs must still be in RTS, every asynchronous event must
 * have been a remote access error on a service QP, and the kernel log must
 * be clean.
 *
 * Requests (one line each, answered with one line):
 *   CONNECT <qpn> <psn> <gid>  a service QP in PD B connected to the caller's
 *                              -> QP <qpn> <psn> <gid> <addr> <rkey> <len>
 *   ACCESSERR <qpn>            wait for the remote access error event of that
 *                              service QP, then destroy it
 *                              -> EVENT <type> <qpn> | EVENT timeout
 *   CLOSE <qpn>                destroy that service QP -> OK | ERR ...
 *   LEAK                       the secret MR's address and key, as an
 *                              attacker who learned them would know them
 *                              -> SECRET <addr> <rkey> <len>
 *   REREG                      deregister the public MR, register the same
 *                              buffer again -> MR <addr> <rkey> <len>
 *   CHECK <off> <len> <byte>   are these bytes of the public buffer all
 *                              <byte>? -> OK | BAD <off> <value>
 *   PHASE <name>               the attack enters a phase: note how far the
 *                              private traffic got (BI-COUNT iterations_at_<name>)
 *                              -> OK <iterations>
 *   DONE                       stop the private traffic, check everything
 *                              -> BYE <failures>, then exit
 *
 * Console markers: those of bi_common.h, and for the host's checks
 *   TT-QPN private|service <qpn>   every QP number this side allocated
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bi_common.h"

#define TT_PORT 19100
#define MAX_SERVICE 16
/* The secret and the private work buffer. */
#define SECRET_LEN 65536
#define CHUNK 4096
/* Work buffer: WRITE sources, WRITE destinations, READ destinations. */
#define WORK_SRC 0
#define WORK_DST (4 * CHUNK)
#define WORK_RD (8 * CHUNK)
#define WORK_LEN (12 * CHUNK)
/* What the public buffer holds before anyone writes it. */
#define PUBLIC_BYTE 0x50

static struct bi_dev dev;	/* its PD is B, its MR the public one */
static struct ibv_qp *service[MAX_SERVICE];
static int nservice;
static long long access_events, stray_events;

static uint8_t secret_byte(size_t i)
{
	return (uint8_t)((i * 131 + 17) ^ (i >> 8));
}

/* ---------------------------------------------------------------------- */
/* The private connection                                                   */
/* ---------------------------------------------------------------------- */

static struct {
	struct ibv_pd *pd;		/* PD A */
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	uint8_t *secret, *work;
	struct ibv_mr *secret_mr, *work_mr;
	pthread_t thread;
	atomic_int stop;
	atomic_llong iterations;
	atomic_int failed;
	char failure[256];		/* written once, by the thread, before failed */
} priv;

static void priv_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void priv_failed(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(priv.failure, sizeof(priv.failure), fmt, ap);
	va_end(ap);
	atomic_store(&priv.failed, 1);
}

/*
 * One iteration k: QP 0 WRITEs a fresh 4 KiB pattern into the work buffer
 * through QP 1, and QP 1 READs 4 KiB of the secret through QP 0; both must
 * succeed, the written bytes must have arrived and the read ones must be
 * the secret's.
 */
static bool priv_iteration(long long k)
{
	const size_t slot = (size_t)(k % 4) * CHUNK;
	const size_t soff = (size_t)(k % (SECRET_LEN / CHUNK)) * CHUNK;
	uint8_t *src = priv.work + WORK_SRC + slot, *dst = priv.work + WORK_DST + slot;
	uint8_t *rd = priv.work + WORK_RD + slot;
	bool wrote = false, read = false;
	struct ibv_wc wc;
	size_t i;

	for (i = 0; i < CHUNK; i++)
		src[i] = (uint8_t)(k * 7 + i);
	memset(rd, 0, CHUNK);
	if (bi_post(priv.qp[0], IBV_WR_RDMA_WRITE, 1, (uintptr_t)src, CHUNK,
		    priv.work_mr->lkey, (uintptr_t)dst, priv.work_mr->rkey) ||
	    bi_post(priv.qp[1], IBV_WR_RDMA_READ, 2, (uintptr_t)rd, CHUNK, priv.work_mr->lkey,
		    (uintptr_t)priv.secret + soff, priv.secret_mr->rkey)) {
		priv_failed("iteration %lld: ibv_post_send: %s", k, strerror(errno));
		return false;
	}
	while (!wrote || !read) {
		if (!bi_poll(priv.cq, &wc)) {
			priv_failed("iteration %lld: no completion within %d ms", k,
				    BI_TIMEOUT_MS);
			return false;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			priv_failed("iteration %lld: QP %u wr_id %" PRIu64 ": %s (vendor_err %u)",
				    k, wc.qp_num, wc.wr_id, bi_wc_status(wc.status),
				    wc.vendor_err);
			return false;
		}
		if (wc.wr_id == 1)
			wrote = true;
		else
			read = true;
	}
	if (memcmp(src, dst, CHUNK)) {
		priv_failed("iteration %lld: the WRITE's data did not arrive", k);
		return false;
	}
	for (i = 0; i < CHUNK; i++)
		if (rd[i] != secret_byte(soff + i)) {
			priv_failed("iteration %lld: READ of the secret at %zu gave %u, not %u", k,
				    soff + i, rd[i], secret_byte(soff + i));
			return false;
		}
	return true;
}

static void *priv_thread(void *arg)
{
	long long k = 0;

	(void)arg;
	while (!atomic_load(&priv.stop)) {
		if (!priv_iteration(k++))
			return NULL;
		atomic_store(&priv.iterations, k);
		/* One guest vCPU for both threads: leave it to the service
		 * for a moment (pacing, not synchronisation).
		 */
		usleep(1000);
	}
	return NULL;
}

static void priv_start(void)
{
	struct bi_dev a = { .ctx = dev.ctx };
	struct bi_peer ends[2] = { { 0 }, { 0 } };
	size_t i;
	int err, q;

	priv.pd = ibv_alloc_pd(dev.ctx);
	priv.cq = priv.pd ? ibv_create_cq(dev.ctx, 64, NULL, NULL, 0) : NULL;
	priv.secret = aligned_alloc(4096, SECRET_LEN);
	priv.work = aligned_alloc(4096, WORK_LEN);
	if (!priv.pd || !priv.cq || !priv.secret || !priv.work)
		bi_die("private_setup", "PD, CQ or buffers: %s", strerror(errno));
	for (i = 0; i < SECRET_LEN; i++)
		priv.secret[i] = secret_byte(i);
	memset(priv.work, 0, WORK_LEN);
	/* Remote write too: were a stranger let in, it could overwrite the
	 * secret, and the final comparison would show it.
	 */
	priv.secret_mr = ibv_reg_mr(priv.pd, priv.secret, SECRET_LEN,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ);
	priv.work_mr = ibv_reg_mr(priv.pd, priv.work, WORK_LEN,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ);
	if (!priv.secret_mr || !priv.work_mr)
		bi_die("private_setup", "ibv_reg_mr: %s", strerror(errno));
	a.pd = priv.pd;
	a.cq = priv.cq;
	for (q = 0; q < 2; q++) {
		priv.qp[q] = bi_create_qp(&a);
		ends[q].qpn = priv.qp[q]->qp_num;
		ends[q].psn = (priv.qp[q]->qp_num * 48271u + 11) & 0xffffff;
		ends[q].gid = dev.gid;
		printf("TT-QPN private %u\n", priv.qp[q]->qp_num);
	}
	for (q = 0; q < 2; q++) {
		err = bi_connect_qp(priv.qp[q], &ends[q], &ends[1 - q]);
		if (err)
			bi_die("private_setup", "QP %u to RTS: %s", ends[q].qpn, strerror(err));
	}
	printf("BI-INFO private: PD A, QPs %u and %u connected through this guest's own address; secret key %#x, public key %#x\n",
	       ends[0].qpn, ends[1].qpn, priv.secret_mr->rkey, dev.mr->rkey);
	/* The first iteration runs before the attacker is served: the path
	 * through the switch works.
	 */
	bi_check(priv_iteration(0), "private_connection_works", "%s", priv.failure);
	atomic_store(&priv.iterations, 1);
	err = pthread_create(&priv.thread, NULL, priv_thread, NULL);
	if (err)
		bi_die("private_setup", "pthread_create: %s", strerror(err));
}

/*
 * The attack is over: the private traffic must still complete an iteration.
 * Waits for it (or for the thread's failure) with a deadline of 120 s of
 * guest time, polling the counter the thread advances.
 */
static int priv_moves_on(void)
{
	long long n = atomic_load(&priv.iterations);
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (atomic_load(&priv.iterations) > n)
			return 1;
		if (atomic_load(&priv.failed))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 120)
			return 0;
		usleep(1000);
	}
}

/* Stops the private traffic and checks what it and the secret went through. */
static void priv_finish(long long attack_start)
{
	long long n;
	size_t i;
	int q;

	bi_check(priv_moves_on(), "private_traffic_after_attack",
		 "no private iteration completed after the attack ended");
	atomic_store(&priv.stop, 1);
	pthread_join(priv.thread, NULL);
	n = atomic_load(&priv.iterations);
	bi_count("private_iterations", n);
	bi_count("private_iterations_during_attack", n - attack_start);
	bi_check(!atomic_load(&priv.failed), "private_transfers_all_succeeded", "%s",
		 priv.failure);
	for (i = 0; i < SECRET_LEN; i++)
		if (priv.secret[i] != secret_byte(i))
			break;
	bi_check(i == SECRET_LEN, "private_secret_intact", "byte %zu is %u, not %u", i,
		 i < SECRET_LEN ? priv.secret[i] : 0, i < SECRET_LEN ? secret_byte(i) : 0);
	for (q = 0; q < 2; q++) {
		struct ibv_qp_init_attr init;
		struct ibv_qp_attr attr;
		int err = ibv_query_qp(priv.qp[q], &attr, IBV_QP_STATE, &init);

		bi_check(!err && attr.qp_state == IBV_QPS_RTS,
			 q ? "private_qp_b_in_rts" : "private_qp_a_in_rts",
			 "QP %u: err %d state %d", priv.qp[q]->qp_num, err, attr.qp_state);
	}
	/* After the check of their state: one more round shows they work. */
	bi_check(!atomic_load(&priv.failed) && priv_iteration(n), "private_connection_works_after",
		 "%s", priv.failure);
	for (q = 0; q < 2; q++)
		ibv_destroy_qp(priv.qp[q]);
	ibv_dereg_mr(priv.secret_mr);
	ibv_dereg_mr(priv.work_mr);
	ibv_destroy_cq(priv.cq);
	ibv_dealloc_pd(priv.pd);
	free(priv.secret);
	free(priv.work);
}

/* ---------------------------------------------------------------------- */
/* Asynchronous events                                                      */
/* ---------------------------------------------------------------------- */

static bool is_private(uint32_t qpn)
{
	return qpn == priv.qp[0]->qp_num || qpn == priv.qp[1]->qp_num;
}

/*
 * Reads one event within timeout_ms (0: only if one is there). Every event
 * this side can get names a QP; a remote access error on a service QP is
 * the one expected, anything else is counted as stray. Returns the event's
 * type, or -1 if none came.
 */
static int next_event(int timeout_ms, uint32_t *qpn)
{
	struct pollfd p = { .fd = dev.ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int type;

	if (poll(&p, 1, timeout_ms) != 1 || ibv_get_async_event(dev.ctx, &ev))
		return -1;
	type = ev.event_type;
	*qpn = 0;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		*qpn = ev.element.qp->qp_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	if (type == IBV_EVENT_QP_ACCESS_ERR && *qpn && !is_private(*qpn)) {
		access_events++;
	} else {
		stray_events++;
		printf("BI-INFO unexpected event %s on QP %u%s\n", ibv_event_type_str(type), *qpn,
		       *qpn && is_private(*qpn) ? " (a private QP)" : "");
	}
	return type;
}

/* ---------------------------------------------------------------------- */
/* Service                                                                  */
/* ---------------------------------------------------------------------- */

static int find_service(uint32_t qpn)
{
	int i;

	for (i = 0; i < nservice; i++)
		if (service[i]->qp_num == qpn)
			return i;
	return -1;
}

static bool destroy_service(uint32_t qpn)
{
	int i = find_service(qpn);

	if (i < 0 || ibv_destroy_qp(service[i]))
		return false;
	service[i] = service[--nservice];
	return true;
}

static void do_connect(int fd, const char *args)
{
	struct bi_peer peer = { 0 }, local = { 0 };
	char hex[64], mine[33];
	struct ibv_qp *qp;
	int err;

	if (sscanf(args, "%" SCNu32 " %" SCNu32 " %40s", &peer.qpn, &peer.psn, hex) != 3 ||
	    bi_hex_to_gid(hex, &peer.gid) || nservice == MAX_SERVICE) {
		bi_send_line(fd, "ERR bad CONNECT");
		return;
	}
	qp = bi_create_qp(&dev);
	local.qpn = qp->qp_num;
	local.psn = (qp->qp_num * 7919u) & 0xffffff;
	printf("TT-QPN service %u\n", qp->qp_num);
	err = bi_connect_qp(qp, &local, &peer);
	if (err) {
		bi_fail("service_connect", "QP %u: %s", qp->qp_num, strerror(err));
		bi_send_line(fd, "ERR %d", err);
		ibv_destroy_qp(qp);
		return;
	}
	service[nservice++] = qp;
	bi_gid_to_hex(&dev.gid, mine);
	bi_send_line(fd, "QP %u %u %s %" PRIu64 " %u %u", local.qpn, local.psn, mine,
		     (uint64_t)(uintptr_t)dev.buf, dev.mr->rkey, BI_BUF_LEN);
}

static void do_accesserr(int fd, const char *args)
{
	uint32_t want, qpn;
	int i, type;

	if (sscanf(args, "%" SCNu32, &want) != 1 || find_service(want) < 0) {
		bi_send_line(fd, "ERR no such service QP");
		return;
	}
	/* Events of other QPs, should any come first, are counted as stray. */
	for (i = 0; i < 8; i++) {
		type = next_event(BI_TIMEOUT_MS, &qpn);
		if (type < 0)
			break;
		if (qpn != want)
			continue;
		if (!destroy_service(want))
			bi_fail("service_destroy", "QP %u: %s", want, strerror(errno));
		bi_send_line(fd, "EVENT %d %u", type, qpn);
		return;
	}
	bi_send_line(fd, "EVENT timeout");
}

static void do_rereg(int fd)
{
	uint32_t old = dev.mr->rkey;

	if (ibv_dereg_mr(dev.mr))
		bi_die("rereg", "ibv_dereg_mr: %s", strerror(errno));
	dev.mr = ibv_reg_mr(dev.pd, dev.buf, BI_BUF_LEN,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ);
	if (!dev.mr)
		bi_die("rereg", "ibv_reg_mr: %s", strerror(errno));
	printf("BI-INFO public MR registered again: key %#x, was %#x\n", dev.mr->rkey, old);
	bi_send_line(fd, "MR %" PRIu64 " %u %u", (uint64_t)(uintptr_t)dev.buf, dev.mr->rkey,
		     BI_BUF_LEN);
}

static void do_check(int fd, const char *args)
{
	unsigned int off, len, byte, i;

	if (sscanf(args, "%u %u %u", &off, &len, &byte) != 3 || off > BI_BUF_LEN ||
	    len > BI_BUF_LEN - off) {
		bi_send_line(fd, "ERR bad CHECK");
		return;
	}
	for (i = off; i < off + len; i++)
		if (dev.buf[i] != byte) {
			bi_send_line(fd, "BAD %u %u", i, dev.buf[i]);
			return;
		}
	bi_send_line(fd, "OK");
}

int main(void)
{
	long long attack_start = -1;
	char line[512];
	uint32_t qpn;
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	bi_open(&dev, false);
	memset(dev.buf, PUBLIC_BYTE, BI_BUF_LEN);
	priv_start();
	printf("BI-INFO victim: listening on %d\n", TT_PORT);
	fd = bi_tcp_accept(TT_PORT);
	for (;;) {
		bi_recv_line(fd, line, sizeof(line));
		if (!strncmp(line, "CONNECT ", 8)) {
			do_connect(fd, line + 8);
		} else if (!strncmp(line, "ACCESSERR ", 10)) {
			do_accesserr(fd, line + 10);
		} else if (!strncmp(line, "CLOSE ", 6)) {
			if (sscanf(line + 6, "%" SCNu32, &qpn) == 1 && destroy_service(qpn))
				bi_send_line(fd, "OK");
			else
				bi_send_line(fd, "ERR %s", strerror(errno));
		} else if (!strcmp(line, "LEAK")) {
			bi_send_line(fd, "SECRET %" PRIu64 " %u %u",
				     (uint64_t)(uintptr_t)priv.secret, priv.secret_mr->rkey,
				     SECRET_LEN);
		} else if (!strcmp(line, "REREG")) {
			do_rereg(fd);
		} else if (!strncmp(line, "CHECK ", 6)) {
			do_check(fd, line + 6);
		} else if (!strncmp(line, "PHASE ", 6)) {
			long long n = atomic_load(&priv.iterations);

			char name[64];

			if (attack_start < 0)
				attack_start = n;
			snprintf(name, sizeof(name), "iterations_at_%.40s", line + 6);
			bi_count(name, n);
			bi_send_line(fd, "OK %lld", n);
		} else if (!strcmp(line, "DONE")) {
			break;
		} else {
			bi_send_line(fd, "ERR unknown request");
		}
	}
	if (attack_start < 0)
		attack_start = 0;
	priv_finish(attack_start);
	/* Whatever events are still queued (none expected). */
	while (next_event(0, &qpn) >= 0)
		;
	bi_count("access_events", access_events);
	bi_check(!stray_events, "no_stray_events", "%lld event(s) other than a remote access "
		 "error on a service QP", stray_events);
	while (nservice)
		if (!destroy_service(service[0]->qp_num))
			bi_die("service_destroy", "QP %u: %s", service[0]->qp_num,
			       strerror(errno));
	bi_close(&dev);
	bi_check_kernel_log();
	bi_send_line(fd, "BYE %d", bi_failures);
	close(fd);
	return bi_done();
}
