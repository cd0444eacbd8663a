// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * tt_attacker: the hostile tenant of the two-tenants test (runs on g0 as
 * root, against tt_victim on g1; two_tenants_test.py).
 *
 *   tt_attacker VICTIM_IP
 *
 * It holds a legitimate service connection to the victim (a QP of the
 * victim's in protection domain B, with a public MR) and uses it, and QPs
 * of its own, against the victim:
 *
 *  keys       READs and WRITEs with forged rkeys: the 255 other random
 *             parts of the public key, keys of the 6 nearest MPT indices
 *             (the victim's private MR among them), the victim's private
 *             key itself (which the victim discloses, as if it had leaked:
 *             the worst case), and the public key beyond its MR. Each must fail with IBV_WC_REM_ACCESS_ERR and put the
 *             victim's service QP in error with a remote access event; a
 *             READ must bring no data. Each attempt takes a connection of
 *             its own (the failure ends the QPs on both sides).
 *  stale_key  the victim deregisters and registers its public MR again: the
 *             old key must fail the same way, the new one work.
 *  forged_qps QPs of its own connected (RTR/RTS) to guessed victim QP
 *             numbers, the nearest to its service QP's, with the
 *             victim's address and random PSNs, WRITE with the private
 *             key: the victim's NIC must drop them (a connected QP takes
 *             packets from its peer's address only: rx.foreign_drops), so
 *             no answer ever comes and they end in RETRY_EXC_ERR. Also a
 *             P_Key index other than 0, which is refused.
 *
 * Console markers: those of bi_common.h, and for the host's checks
 *   TT-GUESS <qpn> <writes>   a forged QP sent <writes> WRITEs to victim QP <qpn>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bi_common.h"

#define TT_PORT 19100
#define PUBLIC_BYTE 0x50
/* Where forged WRITEs aim in the public buffer: nothing legitimate writes
 * there, so it must still hold PUBLIC_BYTE at the end.
 */
#define FORGED_OFF 16384
#define FORGED_LEN 4096
/* Keys of other MPT indices: the nearest ones to the public key's. */
#define OTHER_INDICES 6
/* The forged QPs: the nearest numbers to the service QP's. */
#define NEIGHBOURS 12
#define FORGED_WRITES 2

static struct bi_dev dev;
static int vic = -1;
static char reply[512];
static long long rkey_attempts, error_cqes;
static uint64_t rng_state = 0x74656e616e74ull; /* fixed: the same attack every run */

struct conn {
	struct ibv_qp *qp;
	struct bi_peer peer;
};

static uint32_t rng(void)
{
	/* xorshift64 */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void request(const char *fmt, const char *arg)
{
	bi_send_line(vic, fmt, arg);
	bi_recv_line(vic, reply, sizeof(reply));
}

/* A new QP of ours, connected to a new service QP of the victim. */
static struct conn new_conn(void)
{
	struct bi_peer local = { 0 };
	char hex[33], peer_hex[64];
	struct conn c;
	uint64_t addr;
	int err;

	c.qp = bi_create_qp(&dev);
	local.qpn = c.qp->qp_num;
	local.psn = (c.qp->qp_num * 104729u) & 0xffffff;
	bi_gid_to_hex(&dev.gid, hex);
	bi_send_line(vic, "CONNECT %u %u %s", local.qpn, local.psn, hex);
	bi_recv_line(vic, reply, sizeof(reply));
	if (sscanf(reply, "QP %" SCNu32 " %" SCNu32 " %40s %" SCNu64 " %" SCNu32 " %" SCNu32,
		   &c.peer.qpn, &c.peer.psn, peer_hex, &addr, &c.peer.rkey, &c.peer.len) != 6 ||
	    bi_hex_to_gid(peer_hex, &c.peer.gid))
		bi_die("connect", "victim answered '%s'", reply);
	c.peer.addr = addr;
	err = bi_connect_qp(c.qp, &local, &c.peer);
	if (err)
		bi_die("connect", "QP %u to RTS: %s", local.qpn, strerror(err));
	return c;
}

static void close_conn(struct conn *c)
{
	char arg[16];

	snprintf(arg, sizeof(arg), "%u", c->peer.qpn);
	request("CLOSE %s", arg);
	if (strcmp(reply, "OK"))
		bi_fail("close_service", "victim answered '%s'", reply);
	ibv_destroy_qp(c->qp);
}

/* One signaled operation on c; its completion, or a status of -1. */
static struct ibv_wc run_op(struct conn *c, enum ibv_wr_opcode op, uint64_t wr_id, uint8_t *buf,
			    uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc = { .status = (enum ibv_wc_status)-1 };

	if (bi_post(c->qp, op, wr_id, (uintptr_t)buf, len, dev.mr->lkey, raddr, rkey)) {
		printf("BI-INFO ibv_post_send: %s\n", strerror(errno));
		return wc;
	}
	if (!bi_poll(dev.cq, &wc)) {
		wc.status = (enum ibv_wc_status)-1;
		return wc;
	}
	if (wc.status != IBV_WC_SUCCESS)
		error_cqes++;
	return wc;
}

static const char *status_text(const struct ibv_wc *wc)
{
	return (int)wc->status == -1 ? "no completion" : bi_wc_status(wc->status);
}

/*
 * One forged operation on a fresh connection: it must fail with a remote
 * access error (vendor_err MPR_SYN_NAK_REM_ACCESS), a READ must bring no
 * data, and the victim must see a remote access error event on its service
 * QP. Returns true if all of that held; else describes why in `why`.
 */
static bool forged(enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey, char *why,
		   size_t why_size)
{
	uint8_t *buf = dev.buf + (op == IBV_WR_RDMA_READ ? 0 : FORGED_LEN);
	struct conn c = new_conn();
	struct ibv_wc wc;
	int type = -1;
	unsigned int qpn = 0;
	bool ok = true;
	uint32_t i;
	char arg[16];

	memset(buf, op == IBV_WR_RDMA_READ ? 0xaa : 0xee, FORGED_LEN);
	rkey_attempts++;
	wc = run_op(&c, op, 0xf00, buf, FORGED_LEN, raddr, rkey);
	if (wc.status != IBV_WC_REM_ACCESS_ERR || wc.vendor_err != MPR_SYN_NAK_REM_ACCESS) {
		snprintf(why, why_size, "%s of key %#x at %#" PRIx64 ": %s (vendor_err %u)",
			 op == IBV_WR_RDMA_READ ? "READ" : "WRITE", rkey, raddr, status_text(&wc),
			 wc.vendor_err);
		ok = false;
	}
	if (op == IBV_WR_RDMA_READ)
		for (i = 0; i < FORGED_LEN && ok; i++)
			if (buf[i] != 0xaa) {
				snprintf(why, why_size, "READ of key %#x brought data: byte %u is %#x",
					 rkey, i, buf[i]);
				ok = false;
			}
	snprintf(arg, sizeof(arg), "%u", c.peer.qpn);
	request("ACCESSERR %s", arg);
	if (sscanf(reply, "EVENT %d %u", &type, &qpn) != 2 || type != IBV_EVENT_QP_ACCESS_ERR ||
	    qpn != c.peer.qpn) {
		if (ok)
			snprintf(why, why_size, "key %#x: the victim's event: %.100s", rkey, reply);
		ok = false;
		/* Its QP is still there: let it go. */
		request("CLOSE %s", arg);
	}
	ibv_destroy_qp(c.qp);
	return ok;
}

/* A group of forged attempts, one check: how many failed as they must. */
struct group {
	const char *check;
	int tried, refused;
	char why[256];
};

static void attempt(struct group *g, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey)
{
	char why[256];

	g->tried++;
	if (forged(op, raddr, rkey, why, sizeof(why)))
		g->refused++;
	else if (!g->why[0])
		snprintf(g->why, sizeof(g->why), "%s", why);
}

static void group_done(struct group *g)
{
	bi_check(g->tried > 0 && g->refused == g->tried, g->check,
		 "%d of %d refused as they must be; first otherwise: %s", g->refused, g->tried,
		 g->why);
	printf("BI-INFO %s: %d forged attempt(s), all refused: %s\n", g->check, g->tried,
	       g->refused == g->tried ? "yes" : "no");
}

/* The public buffer's bytes [off, off + len) must all be `byte`. */
static void victim_check(const char *check, unsigned int off, unsigned int len, uint8_t byte)
{
	char args[64];

	snprintf(args, sizeof(args), "%u %u %u", off, len, byte);
	request("CHECK %s", args);
	bi_check(!strcmp(reply, "OK"), check, "CHECK %s: %s", args, reply);
}

static void phase(const char *name)
{
	request("PHASE %s", name);
	if (strncmp(reply, "OK ", 3))
		bi_die("phase", "victim answered '%s'", reply);
	printf("BI-INFO phase %s (victim's private iterations so far: %s)\n", name, reply + 3);
}

/*
 * The n-th nearest number to `x` other than x itself, from `lowest` up:
 * x + 1, x - 1, x + 2, x - 2, ..., skipping those below `lowest`.
 */
static uint32_t nearest(uint32_t x, uint32_t lowest, int n)
{
	int64_t d = 1;
	int sign = 1;

	for (;;) {
		int64_t v = (int64_t)x + sign * d;

		if (v >= lowest && n-- == 0)
			return (uint32_t)v;
		if (sign < 0)
			d++;
		sign = -sign;
	}
}

/* ---------------------------------------------------------------------- */
/* keys: forged rkeys on the service connection                             */
/* ---------------------------------------------------------------------- */

static void test_keys(uint32_t *pub_key, uint64_t *pub_addr)
{
	struct group variants = { .check = "public_key_other_random_bits_refused" };
	struct group indices = { .check = "neighbouring_mpt_indices_refused" };
	struct group leaked_read = { .check = "leaked_private_key_read_refused" };
	struct group leaked_write = { .check = "leaked_private_key_write_refused" };
	struct group beyond = { .check = "public_key_beyond_its_mr_refused" };
	uint64_t secret_addr;
	uint32_t secret_key, secret_len, key, index, bits, v;
	struct ibv_wc wc;
	struct conn c;
	int i;

	/* The control: the public key works, both ways. */
	c = new_conn();
	*pub_key = c.peer.rkey;
	*pub_addr = c.peer.addr;
	memset(dev.buf, 0, 4096);
	wc = run_op(&c, IBV_WR_RDMA_READ, 1, dev.buf, 4096, c.peer.addr, c.peer.rkey);
	bi_check(wc.status == IBV_WC_SUCCESS, "control_read_with_public_key", "%s",
		 status_text(&wc));
	for (i = 0; i < 4096 && dev.buf[i] == PUBLIC_BYTE; i++)
		;
	bi_check(i == 4096, "control_read_data", "byte %d is %#x", i, dev.buf[i]);
	memset(dev.buf, 0x77, 4096);
	wc = run_op(&c, IBV_WR_RDMA_WRITE, 2, dev.buf, 4096, c.peer.addr + 8192, c.peer.rkey);
	bi_check(wc.status == IBV_WC_SUCCESS, "control_write_with_public_key", "%s",
		 status_text(&wc));
	victim_check("victim_sees_control_write", 8192, 4096, 0x77);
	close_conn(&c);

	index = *pub_key >> 8;
	bits = *pub_key & 0xff;
	printf("BI-INFO public key %#x: MPT index %u, random bits %#x\n", *pub_key, index, bits);

	/* Every other random part of the public key: 255 guesses, READs and
	 * WRITEs in turn, none may get through.
	 */
	for (v = 0; v < 256; v++)
		if (v != bits)
			attempt(&variants, v & 1 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
				*pub_addr + FORGED_OFF, index << 8 | v);
	group_done(&variants);

	/* The nearest MPT indices (the victim's other regions, its private
	 * ones among them), with the public key's random part and with
	 * another.
	 */
	for (i = 0; i < OTHER_INDICES; i++) {
		key = nearest(index, 0, i) << 8;
		attempt(&indices, IBV_WR_RDMA_READ, *pub_addr + FORGED_OFF, key | bits);
		attempt(&indices, IBV_WR_RDMA_WRITE, *pub_addr + FORGED_OFF, key | (rng() & 0xff));
	}
	group_done(&indices);

	/* The private MR's exact key and address, used through the service
	 * connection: the key is right, but the region belongs to another
	 * protection domain than the service QP.
	 */
	request("%s", "LEAK");
	if (sscanf(reply, "SECRET %" SCNu64 " %" SCNu32 " %" SCNu32, &secret_addr, &secret_key,
		   &secret_len) != 3)
		bi_die("leak", "victim answered '%s'", reply);
	printf("BI-INFO leaked private key %#x (MPT index %u) at %#" PRIx64 "\n", secret_key,
	       secret_key >> 8, secret_addr);
	attempt(&leaked_read, IBV_WR_RDMA_READ, secret_addr, secret_key);
	group_done(&leaked_read);
	attempt(&leaked_write, IBV_WR_RDMA_WRITE, secret_addr, secret_key);
	group_done(&leaked_write);

	/* The right key, past the end of its region. */
	attempt(&beyond, IBV_WR_RDMA_READ, *pub_addr + BI_BUF_LEN - 100, *pub_key);
	group_done(&beyond);

	victim_check("public_data_unchanged_by_forged_writes", FORGED_OFF, FORGED_LEN,
		     PUBLIC_BYTE);
}

/* ---------------------------------------------------------------------- */
/* stale_key: a key kept after its region was deregistered                  */
/* ---------------------------------------------------------------------- */

static void test_stale_key(uint32_t old_key, uint64_t addr)
{
	struct group stale_read = { .check = "stale_public_key_read_refused" };
	struct group stale_write = { .check = "stale_public_key_write_refused" };
	uint32_t new_key, len;
	uint64_t new_addr;
	struct ibv_wc wc;
	struct conn c;
	int i;

	request("%s", "REREG");
	if (sscanf(reply, "MR %" SCNu64 " %" SCNu32 " %" SCNu32, &new_addr, &new_key, &len) != 3)
		bi_die("rereg", "victim answered '%s'", reply);
	printf("BI-INFO public MR registered again: key %#x (MPT index %u), was %#x\n", new_key,
	       new_key >> 8, old_key);
	bi_check(new_key != old_key, "reregistered_key_differs", "the same key %#x", new_key);
	attempt(&stale_read, IBV_WR_RDMA_READ, addr + FORGED_OFF, old_key);
	group_done(&stale_read);
	attempt(&stale_write, IBV_WR_RDMA_WRITE, addr + FORGED_OFF, old_key);
	group_done(&stale_write);

	c = new_conn();
	bi_check(c.peer.rkey == new_key, "service_offers_the_new_key", "%#x, expected %#x",
		 c.peer.rkey, new_key);
	memset(dev.buf, 0, 4096);
	wc = run_op(&c, IBV_WR_RDMA_READ, 3, dev.buf, 4096, new_addr, new_key);
	for (i = 0; i < 4096 && dev.buf[i] == PUBLIC_BYTE; i++)
		;
	bi_check(wc.status == IBV_WC_SUCCESS && i == 4096, "new_public_key_works",
		 "%s, byte %d is %#x", status_text(&wc), i, i < 4096 ? dev.buf[i] : 0);
	close_conn(&c);
	victim_check("public_data_unchanged_by_stale_key", FORGED_OFF, FORGED_LEN, PUBLIC_BYTE);
}

/* ---------------------------------------------------------------------- */
/* forged_qps: our QPs connected to guessed victim QPs                      */
/* ---------------------------------------------------------------------- */

static void test_forged_qps(void)
{
	struct ibv_qp *forged_qp[NEIGHBOURS];
	uint32_t guess[NEIGHBOURS];
	uint64_t secret_addr;
	uint32_t secret_key, secret_len;
	int n = 0, i, k, answered = 0, wrong = 0;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct conn s;
	char why[160] = "";

	/* A QP may name only P_Key index 0 (the port's one partition): no
	 * packet of ours can carry another P_Key.
	 */
	qp = bi_create_qp(&dev);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 1;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	errno = 0;
	k = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS);
	bi_check(k != 0, "pkey_index_1_refused", "ibv_modify_qp accepted P_Key index 1");
	ibv_destroy_qp(qp);

	/* The live service connection whose QP number we know. */
	s = new_conn();
	memset(dev.buf, 0x33, 64);
	wc = run_op(&s, IBV_WR_RDMA_WRITE, 4, dev.buf, 64, s.peer.addr + 12288, s.peer.rkey);
	bi_check(wc.status == IBV_WC_SUCCESS, "service_connection_works", "%s", status_text(&wc));
	request("%s", "LEAK");
	if (sscanf(reply, "SECRET %" SCNu64 " %" SCNu32 " %" SCNu32, &secret_addr, &secret_key,
		   &secret_len) != 3)
		bi_die("leak", "victim answered '%s'", reply);

	/* The nearest numbers to its own (QP numbers start at 2), each with a
	 * QP of ours that claims to be its peer: the victim's address, a
	 * random PSN each way, WRITEs of 0xee with the private key into the
	 * secret.
	 */
	memset(dev.buf, 0xee, 64);
	for (k = 0; k < NEIGHBOURS; k++) {
		struct bi_peer local = { 0 }, peer = { 0 };
		uint32_t g = nearest(s.peer.qpn, 2, k) & 0xffffff;
		int err;

		qp = bi_create_qp(&dev);
		local.qpn = qp->qp_num;
		local.psn = rng() & 0xffffff;
		peer.qpn = g;
		peer.psn = rng() & 0xffffff;
		peer.gid = s.peer.gid;
		err = bi_connect_qp(qp, &local, &peer);
		if (err)
			bi_die("forged_connect", "QP %u to victim QP %u: %s", qp->qp_num, g,
			       strerror(err));
		for (i = 0; i < FORGED_WRITES; i++)
			if (bi_post(qp, IBV_WR_RDMA_WRITE, (uint64_t)n << 8 | (uint64_t)i,
				    (uintptr_t)dev.buf, 64, dev.mr->lkey, secret_addr + 64 * i,
				    secret_key))
				bi_die("forged_post", "ibv_post_send: %s", strerror(errno));
		printf("TT-GUESS %u %d\n", g, FORGED_WRITES);
		guess[n] = g;
		forged_qp[n++] = qp;
	}
	/* Nothing may answer them: each QP's first WRITE ends in
	 * RETRY_EXC_ERR when its retries run out, the other is flushed.
	 */
	for (i = 0; i < n * FORGED_WRITES; i++) {
		unsigned int which, nth;

		if (!bi_poll(dev.cq, &wc)) {
			bi_fail("forged_qps_never_answered", "%d of %d completions", i,
				n * FORGED_WRITES);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS)
			error_cqes++;
		which = (unsigned int)(wc.wr_id >> 8);
		nth = (unsigned int)(wc.wr_id & 0xff);
		if (wc.status == IBV_WC_SUCCESS)
			answered++;
		if (which >= (unsigned int)n ||
		    wc.status != (nth ? IBV_WC_WR_FLUSH_ERR : IBV_WC_RETRY_EXC_ERR)) {
			if (!wrong++)
				snprintf(why, sizeof(why), "WRITE %u to victim QP %u: %s", nth,
					 which < (unsigned int)n ? guess[which] : 0,
					 bi_wc_status(wc.status));
		}
	}
	if (i == n * FORGED_WRITES)
		bi_check(!wrong, "forged_qps_never_answered",
			 "%d of %d completions otherwise (%d successful); first: %s", wrong,
			 n * FORGED_WRITES, answered, why);
	bi_count("forged_qps", n);
	for (i = 0; i < n; i++)
		ibv_destroy_qp(forged_qp[i]);

	/* The service connection was not disturbed. */
	memset(dev.buf, 0x34, 64);
	wc = run_op(&s, IBV_WR_RDMA_WRITE, 5, dev.buf, 64, s.peer.addr + 12288, s.peer.rkey);
	bi_check(wc.status == IBV_WC_SUCCESS, "service_connection_works_after", "%s",
		 status_text(&wc));
	victim_check("victim_sees_service_write", 12288, 64, 0x34);
	close_conn(&s);
}

int main(int argc, char **argv)
{
	uint64_t pub_addr;
	uint32_t pub_key;
	struct ibv_wc wc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s VICTIM_IP\n", argv[0]);
		return 2;
	}
	bi_open(&dev, false);
	vic = bi_tcp_connect(argv[1], TT_PORT);
	phase("keys");
	test_keys(&pub_key, &pub_addr);
	phase("stale_key");
	test_stale_key(pub_key, pub_addr);
	phase("forged_qps");
	test_forged_qps();
	phase("end");
	bi_check(ibv_poll_cq(dev.cq, 1, &wc) == 0, "no_stray_cqes", "a CQE is waiting: QP %u %s",
		 wc.qp_num, bi_wc_status(wc.status));
	request("%s", "DONE");
	bi_check(!strncmp(reply, "BYE 0", 5), "victim_clean", "victim answered '%s'", reply);
	bi_check_kernel_log();
	bi_count("rkey_attempts", rkey_attempts);
	bi_count("error_cqes", error_cqes);
	bi_close(&dev);
	return bi_done();
}
