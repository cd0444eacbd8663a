// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * bi_server: the well-behaved peer of the bad-input tests (runs on g1).
 *
 * Accepts one TCP connection from bi_client and serves its requests, one
 * line each, answering with one line:
 *   CONNECT <qpn> <psn> <gid>  create a QP and connect it to the client's;
 *                              -> QP <qpn> <psn> <gid> <addr> <rkey> <len>
 *   RECVBAD                    post a RECV with a wrong lkey on the newest QP
 *                              -> OK | ERR <errno>
 *   WAITRECV                   wait for the next completion of the CQ
 *                              -> WC <status> <vendor_err> <qpn> | WC timeout
 *   EVENT                      wait for the next asynchronous event
 *                              -> EVENT <type> <qpn> | EVENT timeout
 *   RAWMR <access> <len>       try to register an MR whose pages lie outside
 *                              the guest's RAM (raw REG_MR in the verbs PD),
 *                              which the NIC must refuse
 *                              -> REFUSED <status> <syndrome> | RAWMR <iova> <key>
 *                                 (accepted: deregistered at QUIT) | ERR ...
 *   CHECK <off> <len> <byte>   are these bytes of the buffer all <byte>?
 *                              -> OK | BAD <off> <value>
 *   UDQP                       create a UD QP (Q_Key BI_QKEY) with UD_RECVS RECVs
 *                              of a GRH and an MTU each posted
 *                              -> UDQP <qpn> <gid>
 *   UDWAIT                     wait for the next completion of the CQ
 *                              -> UDWC <status> <byte_len> <src_qp> <byte> <len>:
 *                                 <len> payload bytes after the GRH all <byte>
 *                                 (len 0 if they differ) | UDWC timeout
 *   UDNONE                     is the CQ empty now? -> NONE | UDWC ...
 *   QUIT                       clean up -> BYE <failures>, then exit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bi_common.h"

#define MAX_QPS 32
#define MAX_RAW_MRS 4
/* The iova of raw MRs: any value works, the NIC translates through the MTT. */
#define RAW_MR_IOVA 0x40000000ull

static struct bi_dev dev;
static struct ibv_qp *qps[MAX_QPS];
static int nqps;
static uint32_t raw_keys[MAX_RAW_MRS];
static int nraw;

static void do_connect(int fd, const char *args)
{
	struct bi_peer peer = { 0 }, local = { 0 };
	char hex[64], mine[33];
	struct ibv_qp *qp;
	int err;

	if (sscanf(args, "%" SCNu32 " %" SCNu32 " %40s", &peer.qpn, &peer.psn, hex) != 3 ||
	    bi_hex_to_gid(hex, &peer.gid) || nqps == MAX_QPS) {
		bi_send_line(fd, "ERR bad CONNECT");
		return;
	}
	qp = bi_create_qp(&dev);
	local.qpn = qp->qp_num;
	local.psn = (qp->qp_num * 7919u) & 0xffffff;
	err = bi_connect_qp(qp, &local, &peer);
	if (err) {
		bi_fail("server_connect", "QP %u: %s", qp->qp_num, strerror(err));
		bi_send_line(fd, "ERR %d", err);
		ibv_destroy_qp(qp);
		return;
	}
	qps[nqps++] = qp;
	bi_gid_to_hex(&dev.gid, mine);
	bi_send_line(fd, "QP %u %u %s %" PRIu64 " %u %u", local.qpn, local.psn, mine,
		     (uint64_t)(uintptr_t)dev.buf, dev.mr->rkey, BI_BUF_LEN);
}

static void do_recvbad(int fd)
{
	/* Another MPT index than the buffer's: a key the NIC does not know. */
	struct ibv_sge sge = {
		.addr = (uintptr_t)dev.buf,
		.length = 4096,
		.lkey = dev.mr->lkey ^ 0x00ab0000,
	};
	struct ibv_recv_wr wr = { .wr_id = 0xbad, .sg_list = &sge, .num_sge = 1 }, *bad;
	int err;

	if (!nqps) {
		bi_send_line(fd, "ERR no QP");
		return;
	}
	err = ibv_post_recv(qps[nqps - 1], &wr, &bad);
	if (err)
		bi_send_line(fd, "ERR %d", err);
	else
		bi_send_line(fd, "OK");
}

static void do_waitrecv(int fd)
{
	struct ibv_wc wc;

	if (bi_poll(dev.cq, &wc))
		bi_send_line(fd, "WC %d %u %u", wc.status, wc.vendor_err, wc.qp_num);
	else
		bi_send_line(fd, "WC timeout");
}

static void do_event(int fd)
{
	struct pollfd p = { .fd = dev.ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	uint32_t qpn = 0;

	if (poll(&p, 1, BI_TIMEOUT_MS) != 1 || ibv_get_async_event(dev.ctx, &ev)) {
		bi_send_line(fd, "EVENT timeout");
		return;
	}
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		qpn = ev.element.qp->qp_num;
		break;
	default:
		break;
	}
	printf("BI-INFO async event %s on QP %u\n", ibv_event_type_str(ev.event_type), qpn);
	ibv_ack_async_event(&ev);
	bi_send_line(fd, "EVENT %d %u", ev.event_type, qpn);
}

static void do_rawmr(int fd, const char *args)
{
	uint64_t mtt[64], beyond;
	struct mpr_cmd cmd = { .hdr.opcode = MPR_CMD_REG_MR };
	struct mpr_cmd_comp comp;
	unsigned int access, len, pages, i;
	int err;

	if (sscanf(args, "%u %u", &access, &len) != 2 || !len || len > 64 * 4096 ||
	    nraw == MAX_RAW_MRS) {
		bi_send_line(fd, "ERR bad RAWMR");
		return;
	}
	pages = (len + 4095) / 4096;
	beyond = bi_outside_ram((uint64_t)pages * 4096);
	for (i = 0; i < pages; i++)
		mtt[i] = beyond + (uint64_t)i * 4096;
	cmd.hdr.in_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.in_len = pages * 8;
	cmd.u.reg_mr.iova = RAW_MR_IOVA;
	cmd.u.reg_mr.length = len;
	cmd.u.reg_mr.pdn = dev.pdn;
	cmd.u.reg_mr.access = access;
	cmd.u.reg_mr.page_shift = 12;
	cmd.u.reg_mr.num_pages = pages;
	err = bi_raw(dev.raw_fd, &cmd, mtt, pages * 8, &comp, NULL, 0);
	if (err) {
		bi_fail("server_raw_reg_mr_outside_ram_refused", "admin_raw: %s", strerror(-err));
		bi_send_line(fd, "ERR %d", err);
		return;
	}
	bi_check(comp.status == MPR_CMD_BAD_PARAM && comp.syndrome == MPR_CMD_SYN_ADDRESS,
		 "server_raw_reg_mr_outside_ram_refused", "status %u syndrome %u", comp.status,
		 comp.syndrome);
	if (comp.status != MPR_CMD_OK) {
		bi_send_line(fd, "REFUSED %u %u", comp.status, comp.syndrome);
		return;
	}
	raw_keys[nraw++] = comp.out[0];
	bi_send_line(fd, "RAWMR %llu %u", RAW_MR_IOVA, comp.out[0]);
}

#define UD_RECVS 4
#define UD_SLOT (40 + 1024)

static void do_udqp(int fd)
{
	struct ibv_qp *qp;
	char mine[33];
	int i;

	if (nqps == MAX_QPS) {
		bi_send_line(fd, "ERR too many QPs");
		return;
	}
	qp = bi_create_ud_qp(&dev);
	qps[nqps++] = qp;
	for (i = 0; i < UD_RECVS; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)dev.buf + (size_t)i * UD_SLOT,
			.length = UD_SLOT,
			.lkey = dev.mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = 0x0d00 + i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		if (ibv_post_recv(qp, &wr, &bad)) {
			bi_send_line(fd, "ERR post_recv %d", errno);
			return;
		}
	}
	bi_gid_to_hex(&dev.gid, mine);
	bi_send_line(fd, "UDQP %u %s", qp->qp_num, mine);
}

/* One completion of a UD RECV, with the payload after the GRH checked. */
static void send_udwc(int fd, const struct ibv_wc *wc)
{
	const uint8_t *p = dev.buf + (wc->wr_id - 0x0d00) * UD_SLOT + 40;
	uint32_t len = wc->byte_len > 40 ? wc->byte_len - 40 : 0, i;

	if (wc->wr_id < 0x0d00 || wc->wr_id >= 0x0d00 + UD_RECVS) {
		bi_send_line(fd, "UDWC %d %u %u 0 0 wr_id %llu", wc->status, wc->byte_len,
			     wc->src_qp, (unsigned long long)wc->wr_id);
		return;
	}
	for (i = 1; i < len; i++)
		if (p[i] != p[0])
			len = 0;
	bi_send_line(fd, "UDWC %d %u %u %u %u", wc->status, wc->byte_len, wc->src_qp,
		     len ? p[0] : 0, len);
}

static void do_udwait(int fd, bool wait)
{
	struct ibv_wc wc;
	int n = wait ? bi_poll(dev.cq, &wc) : ibv_poll_cq(dev.cq, 1, &wc);

	if (n == 1)
		send_udwc(fd, &wc);
	else
		bi_send_line(fd, wait ? "UDWC timeout" : "NONE");
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

static void cleanup(void)
{
	int i;

	for (i = 0; i < nraw; i++) {
		struct mpr_cmd cmd = { .hdr.opcode = MPR_CMD_DEREG_MR };
		struct mpr_cmd_comp comp;
		int err;

		cmd.u.dereg_mr.key = raw_keys[i];
		err = bi_raw(dev.raw_fd, &cmd, NULL, 0, &comp, NULL, 0);
		bi_check(!err && comp.status == MPR_CMD_OK, "server_raw_dereg_mr",
			 "key %#x: err %d status %u", raw_keys[i], err, comp.status);
	}
	for (i = 0; i < nqps; i++)
		if (ibv_destroy_qp(qps[i]))
			bi_fail("server_destroy_qp", "QP %u: %s", qps[i]->qp_num, strerror(errno));
	bi_close(&dev);
	bi_check_kernel_log();
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : BI_PORT;
	char line[512];
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	bi_open(&dev, true);
	printf("BI-INFO server: PD %u, listening on %d\n", dev.pdn, port);
	fd = bi_tcp_accept(port);
	for (;;) {
		bi_recv_line(fd, line, sizeof(line));
		if (!strncmp(line, "CONNECT ", 8)) {
			do_connect(fd, line + 8);
		} else if (!strcmp(line, "RECVBAD")) {
			do_recvbad(fd);
		} else if (!strcmp(line, "WAITRECV")) {
			do_waitrecv(fd);
		} else if (!strcmp(line, "EVENT")) {
			do_event(fd);
		} else if (!strncmp(line, "RAWMR ", 6)) {
			do_rawmr(fd, line + 6);
		} else if (!strcmp(line, "UDQP")) {
			do_udqp(fd);
		} else if (!strcmp(line, "UDWAIT")) {
			do_udwait(fd, true);
		} else if (!strcmp(line, "UDNONE")) {
			do_udwait(fd, false);
		} else if (!strncmp(line, "CHECK ", 6)) {
			do_check(fd, line + 6);
		} else if (!strcmp(line, "QUIT")) {
			cleanup();
			bi_send_line(fd, "BYE %d", bi_failures);
			close(fd);
			return bi_done();
		} else {
			bi_send_line(fd, "ERR unknown request");
		}
	}
}
