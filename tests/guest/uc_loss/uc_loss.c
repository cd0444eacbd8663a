// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * uc_loss: UC RDMA WRITEs across a link that drops packets (the guest test
 * uc_loss_test.py; the fabric drops every 29th frame g0 sends).
 *
 *   uc_loss server         on g1: the target buffer; checks what landed
 *   uc_loss client HOST    on g0: writes UC_MSGS messages, then fences
 *
 * The client writes UC_MSGS messages of UC_PKTS packets each (path MTU
 * 1024) with RDMA WRITE with immediate (the immediate is the message's
 * index) into the server's buffer, then UC_FENCES one-packet fences (a
 * tagged immediate). UC has no ACK and no retransmission: every WRITE
 * completes successfully at the sender, lost or not. At the receiver a lost
 * packet drops the rest of its message (IBA ch. 9, UC): the message gives
 * no completion, the packets before the lost one stay in memory, and the
 * lost packet's bytes and everything after it in that message are never
 * written. The next message starts afresh.
 *
 * The fabric drops at most one frame in 29 and keeps the order of the
 * client's frames (one QP, one path): once the server sees a fence's
 * completion, every message before it has arrived or been lost, and at
 * most one of three fences can be lost. The server then checks each
 * message's bytes against the pattern: a completed message entirely, a
 * lost one as a prefix of whole packets followed by untouched bytes.
 *
 * Console markers as bi_common.h (BI-OK / BI-FAIL / BI-COUNT / BI-DONE).
 * The server's BI-COUNTs let uc_loss_test.py compare with the NICs' and
 * the link's counters: complete, lost, lost_at_first (the first packet
 * lost: nothing written), partial_packets (packets of lost messages that
 * landed), tail_packets (packets of lost messages after the lost one: the
 * responder's UC drops), fences_seen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bi_common.h"

#define UC_PORT (BI_PORT + 9)
#define UC_MTU 1024u
#define UC_PKTS 8u
#define UC_MSG (UC_PKTS * UC_MTU)
#define UC_MSGS 24u
#define UC_FENCES 3u
#define UC_FENCE_LEN 64u
#define UC_FENCE_TAG 0xfe000000u
/* Bytes of the server's buffer no WRITE has reached. The pattern stays
 * below 0x80, so an untouched byte never looks written.
 */
#define UC_UNTOUCHED 0xee
#define UC_CQ_DEPTH 128
#define UC_BUF_LEN (UC_MSGS * UC_MSG + UC_FENCES * UC_FENCE_LEN + 4096u)
/* Where the RECVs of WRITE with immediate point (nothing is written there). */
#define UC_SCRATCH (UC_MSGS * UC_MSG + UC_FENCES * UC_FENCE_LEN)

static struct bi_dev dev;

static uint8_t pattern(uint32_t msg, uint32_t off)
{
	return (uint8_t)((msg * 37u + off * 11u + (off >> 8)) & 0x7f);
}

/* A buffer of our own (bi_dev's is 64 KiB), registered for what `access`
 * says, with a CQ deep enough for every WRITE or RECV of the run.
 */
static uint8_t *buf;
static struct ibv_mr *mr;
static struct ibv_cq *cq;

static void setup(int access)
{
	buf = aligned_alloc(4096, UC_BUF_LEN);
	if (!buf)
		bi_die("setup", "no memory");
	memset(buf, UC_UNTOUCHED, UC_BUF_LEN);
	mr = ibv_reg_mr(dev.pd, buf, UC_BUF_LEN, access);
	if (!mr)
		bi_die("setup", "ibv_reg_mr: %s", strerror(errno));
	cq = ibv_create_cq(dev.ctx, UC_CQ_DEPTH, NULL, NULL, 0);
	if (!cq)
		bi_die("setup", "ibv_create_cq: %s", strerror(errno));
}

static struct ibv_qp *create_uc_qp(void)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {
			.max_send_wr = UC_MSGS + UC_FENCES,
			.max_recv_wr = UC_MSGS + UC_FENCES,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = IBV_QPT_UC,
	};
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &attr);

	if (!qp)
		bi_die("uc_qp_created", "ibv_create_qp(UC): %s", strerror(errno));
	bi_ok("uc_qp_created");
	return qp;
}

/* RESET -> INIT -> RTR -> RTS with UC's attributes only (no ACK timeout,
 * retries or RDMA READ depths: ib_core's UC column refuses them).
 */
static void connect_uc(struct ibv_qp *qp, uint32_t psn, const struct bi_peer *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		bi_die("uc_qp_connected", "to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = BI_GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		bi_die("uc_qp_connected", "to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		bi_die("uc_qp_connected", "to RTS: %s", strerror(errno));
	bi_ok("uc_qp_connected");
}

/* Each side sends its QP, PSN, GID and buffer; returns the peer's. */
static struct bi_peer exchange(int fd, struct ibv_qp *qp, uint32_t psn, bool first)
{
	struct bi_peer peer;
	char line[256], hex[33], mine[33];

	bi_gid_to_hex(&dev.gid, mine);
	if (first)
		bi_send_line(fd, "QP %u %u %s %" PRIu64 " %u", qp->qp_num, psn, mine,
			     (uint64_t)(uintptr_t)buf, mr->rkey);
	bi_recv_line(fd, line, sizeof(line));
	memset(&peer, 0, sizeof(peer));
	if (sscanf(line, "QP %u %u %32s %" SCNu64 " %u", &peer.qpn, &peer.psn, hex,
		   &peer.addr, &peer.rkey) != 5 || bi_hex_to_gid(hex, &peer.gid))
		bi_die("exchange", "bad line '%s'", line);
	if (!first)
		bi_send_line(fd, "QP %u %u %s %" PRIu64 " %u", qp->qp_num, psn, mine,
			     (uint64_t)(uintptr_t)buf, mr->rkey);
	return peer;
}

/* ------------------------------------------------------------------ */
/* Client                                                              */
/* ------------------------------------------------------------------ */

static int post_write_imm(struct ibv_qp *qp, uint64_t wr_id, uint32_t off, uint32_t len,
			  uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)(buf + off),
		.length = len,
		.lkey = mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(imm),
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int client(const char *host)
{
	const uint32_t psn = 0x2000;
	struct ibv_qp *qp;
	struct bi_peer peer;
	struct ibv_wc wc;
	uint32_t i, ok = 0, bad = 0, posted = 0;
	char line[128];
	int fd, rc;

	bi_open(&dev, false);
	setup(IBV_ACCESS_LOCAL_WRITE);
	for (i = 0; i < UC_MSGS * UC_MSG; i++)
		buf[i] = pattern(i / UC_MSG, i % UC_MSG);
	qp = create_uc_qp();
	fd = bi_tcp_connect(host, UC_PORT);
	peer = exchange(fd, qp, psn, true);
	connect_uc(qp, psn, &peer);
	bi_recv_line(fd, line, sizeof(line));
	if (strcmp(line, "READY"))
		bi_die("server_ready", "got '%s'", line);

	for (i = 0; i < UC_MSGS; i++) {
		rc = post_write_imm(qp, i, i * UC_MSG, UC_MSG, peer.addr + (uint64_t)i * UC_MSG,
				    peer.rkey, i);
		if (rc)
			bi_die("uc_writes_posted", "message %u: ibv_post_send: %s", i, strerror(rc));
		posted++;
	}
	for (i = 0; i < UC_FENCES; i++) {
		uint32_t off = UC_MSGS * UC_MSG + i * UC_FENCE_LEN;

		rc = post_write_imm(qp, UC_MSGS + i, off, UC_FENCE_LEN, peer.addr + off,
				    peer.rkey, UC_FENCE_TAG | i);
		if (rc)
			bi_die("uc_writes_posted", "fence %u: ibv_post_send: %s", i, strerror(rc));
		posted++;
	}
	bi_ok("uc_writes_posted");
	/* The sender cannot know what the fabric lost: every WRITE succeeds. */
	for (i = 0; i < posted; i++) {
		if (!bi_poll(cq, &wc)) {
			bi_fail("uc_sender_all_success", "%u of %u completions, then none for %d ms",
				i, posted, BI_TIMEOUT_MS);
			break;
		}
		if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE &&
		    wc.wr_id == i)
			ok++;
		else
			bad++;
		if (wc.status != IBV_WC_SUCCESS)
			printf("completion %u: wr_id %" PRIu64 " %s\n", i, wc.wr_id,
			       bi_wc_status(wc.status));
	}
	bi_check(ok == posted && !bad, "uc_sender_all_success",
		 "%u of %u WRITEs completed successfully in order, %u otherwise", ok, posted, bad);
	bi_count("sender_writes", posted);
	bi_send_line(fd, "SENT %u", ok);
	bi_recv_line(fd, line, sizeof(line));
	bi_check(!strncmp(line, "BYE", 3), "server_done", "got '%s'", line);
	close(fd);
	bi_check_kernel_log();
	return bi_done();
}

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

static void post_recvs(struct ibv_qp *qp, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct ibv_sge sge = {
			.addr = (uint64_t)(uintptr_t)(buf + UC_SCRATCH),
			.length = 16,
			.lkey = mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 },
				   *bad;
		int rc = ibv_post_recv(qp, &wr, &bad);

		if (rc)
			bi_die("uc_recvs_posted", "RECV %u: %s", i, strerror(rc));
	}
	bi_ok("uc_recvs_posted");
}

/* Bytes at the start of message m that carry the pattern. */
static uint32_t written_prefix(uint32_t m)
{
	const uint8_t *p = buf + (size_t)m * UC_MSG;
	uint32_t o = 0;

	while (o < UC_MSG && p[o] == pattern(m, o))
		o++;
	return o;
}

static bool untouched_from(uint32_t m, uint32_t from)
{
	const uint8_t *p = buf + (size_t)m * UC_MSG;
	uint32_t o;

	for (o = from; o < UC_MSG; o++)
		if (p[o] != UC_UNTOUCHED)
			return false;
	return true;
}

static int server(void)
{
	const uint32_t psn = 0x7000;
	bool complete[UC_MSGS] = { false };
	uint32_t i, n_complete = 0, n_lost = 0, lost_first = 0, partial = 0, tail = 0;
	uint32_t fences = 0, bad_cqes = 0, dup = 0, corrupt = 0, ragged = 0;
	struct bi_peer peer;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	char line[128];
	unsigned int sent;
	int fd, n;

	bi_open(&dev, false);
	setup(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	qp = create_uc_qp();
	fd = bi_tcp_accept(UC_PORT);
	peer = exchange(fd, qp, psn, false);
	connect_uc(qp, psn, &peer);
	/* RECVs once the QP is out of RESET (a QP in RESET takes none). */
	post_recvs(qp, UC_MSGS + UC_FENCES);
	bi_send_line(fd, "READY");

	/* Completions until the first fence's: by then every message before
	 * it has landed or been lost (one path, in order).
	 */
	while (!fences) {
		uint32_t imm;

		if (!bi_poll(cq, &wc)) {
			bi_fail("uc_fence_arrived", "no fence within %d ms (%u messages complete)",
				BI_TIMEOUT_MS, n_complete);
			break;
		}
		imm = ntohl(wc.imm_data);
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		    !(wc.wc_flags & IBV_WC_WITH_IMM)) {
			printf("completion: status %s opcode %d flags 0x%x\n",
			       bi_wc_status(wc.status), wc.opcode, wc.wc_flags);
			bad_cqes++;
		} else if ((imm & 0xff000000u) == UC_FENCE_TAG) {
			fences++;
		} else if (imm >= UC_MSGS || complete[imm]) {
			printf("completion: immediate %u again or unknown\n", imm);
			dup++;
		} else {
			complete[imm] = true;
			n_complete++;
			if (wc.byte_len != UC_MSG) {
				printf("message %u: byte_len %u\n", imm, wc.byte_len);
				bad_cqes++;
			}
		}
	}
	if (fences)
		bi_ok("uc_fence_arrived");
	/* A later fence may have completed meanwhile; nothing else may. */
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 1) {
		if (wc.status == IBV_WC_SUCCESS &&
		    (ntohl(wc.imm_data) & 0xff000000u) == UC_FENCE_TAG)
			fences++;
		else
			bad_cqes++;
	}
	bi_check(n == 0, "uc_cq_polled", "ibv_poll_cq: %d", n);
	bi_check(!bad_cqes && !dup, "uc_receive_completions_well_formed",
		 "%u bad completions, %u repeated or unknown immediates", bad_cqes, dup);

	bi_recv_line(fd, line, sizeof(line));
	bi_check(sscanf(line, "SENT %u", &sent) == 1 && sent == UC_MSGS + UC_FENCES,
		 "uc_client_sent_everything", "got '%s'", line);

	for (i = 0; i < UC_MSGS; i++) {
		uint32_t pre = written_prefix(i);

		if (complete[i]) {
			if (pre != UC_MSG) {
				printf("message %u: completed, but byte %u differs\n", i, pre);
				corrupt++;
			}
			continue;
		}
		/* Lost: whole packets up to the lost one, nothing after it. */
		n_lost++;
		if (pre % UC_MTU || pre == UC_MSG || !untouched_from(i, pre)) {
			printf("message %u: lost, %u bytes written, the rest %s\n", i, pre,
			       untouched_from(i, pre) ? "untouched" : "written");
			ragged++;
			continue;
		}
		printf("message %u: lost at packet %u of %u\n", i, pre / UC_MTU, UC_PKTS);
		partial += pre / UC_MTU;
		tail += UC_PKTS - 1 - pre / UC_MTU;
		if (!pre)
			lost_first++;
	}
	bi_check(!corrupt, "uc_complete_messages_intact", "%u completed messages differ", corrupt);
	bi_check(!ragged, "uc_lost_messages_rest_not_written",
		 "%u lost messages are not a prefix of whole packets and untouched bytes", ragged);
	bi_check(n_lost > 0, "uc_some_message_lost", "%u of %u messages lost", n_lost, UC_MSGS);
	bi_check(n_complete > n_lost, "uc_most_messages_complete", "%u complete, %u lost",
		 n_complete, n_lost);
	bi_count("complete", n_complete);
	bi_count("lost", n_lost);
	bi_count("lost_at_first", lost_first);
	bi_count("partial_packets", partial);
	bi_count("tail_packets", tail);
	bi_count("fences_seen", fences);
	bi_send_line(fd, "BYE");
	close(fd);
	bi_check_kernel_log();
	return bi_done();
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc == 3 && !strcmp(argv[1], "client"))
		return client(argv[2]);
	fprintf(stderr, "usage: uc_loss server | uc_loss client HOST\n");
	return 2;
}
