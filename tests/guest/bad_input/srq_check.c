// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * srq_check: shared receive queues from a guest, the bad input among them
 * (the "srq" case of bad_input_test.py).
 *
 *   srq_check server         on g1: owns the SRQ and drives the test
 *   srq_check client HOST    on g0: two RC QPs that send when told to
 *
 * The server creates an SRQ and two RC QPs (A, B) taking their RECVs from
 * it, and checks what must be refused: a RECV posted to a QP of the SRQ
 * (EINVAL) and destroying the SRQ while QPs use it (EBUSY). Then, over the
 * QPs connected to the client's:
 *   1. the SRQ holds one WQE, with a bad lkey; the client SENDs on B: the
 *      error completion is B's (LOC_PROT_ERR), B goes to ERR with
 *      IBV_EVENT_QP_LAST_WQE_REACHED, the client's SEND fails;
 *   2. eight good WQEs, the limit armed at 6; the client SENDs three on A:
 *      they complete on A in the SRQ's order with the client's data (the
 *      SRQ and QP A unharmed), and taking the third leaves 5 < 6:
 *      IBV_EVENT_SRQ_LIMIT_REACHED for this SRQ, the limit disarmed (0);
 *   3. the SRQ is destroyed once its QPs are.
 *
 * Client commands (one line each, over TCP; bi_common.h):
 *   QPS <qpnA> <psnA> <qpnB> <psnB> <gid>   create two QPs and connect them
 *                                           -> QPS <qpnA> <psnA> <qpnB> <psnB> <gid>
 *   SEND <qp 0|1> <count> <byte>            SENDs of SRQ_MSG bytes of <byte>,
 *                                           each waited for -> SENT <status> ...
 *   QUIT                                    -> BYE <failures>
 * Console markers as bi_common.h; BI-COUNT error_cqes, command_errors and
 * raw_commands (none) for bad_input_test.py.
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

#define SRQ_PORT (BI_PORT + 7)
#define SRQ_MSG 64
#define SRQ_WR 16
#define SRQ_GOOD 8
#define SRQ_LIMIT 6
#define SRQ_SENDS 3
#define BAD_WRID 0xbadull
#define GOOD_WRID 100u

static struct bi_dev dev;
static long long error_cqes;

/* ------------------------------------------------------------------ */
/* Client                                                              */
/* ------------------------------------------------------------------ */

static int client(const char *host)
{
	struct ibv_qp *qp[2];
	char line[256], hex[64], mine[33];
	struct bi_peer local[2], peer[2];
	int fd, i;

	bi_open(&dev, false);
	fd = bi_tcp_connect(host, SRQ_PORT);
	for (;;) {
		bi_recv_line(fd, line, sizeof(line));
		if (!strncmp(line, "QPS ", 4)) {
			memset(peer, 0, sizeof(peer));
			memset(local, 0, sizeof(local));
			if (sscanf(line + 4, "%" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %40s",
				   &peer[0].qpn, &peer[0].psn, &peer[1].qpn, &peer[1].psn,
				   hex) != 5 || bi_hex_to_gid(hex, &peer[0].gid))
				bi_die("client_qps", "bad line %s", line);
			peer[1].gid = peer[0].gid;
			for (i = 0; i < 2; i++) {
				qp[i] = bi_create_qp(&dev);
				local[i].qpn = qp[i]->qp_num;
				local[i].psn = (qp[i]->qp_num * 7919u) & 0xffffff;
				if (bi_connect_qp(qp[i], &local[i], &peer[i]))
					bi_die("client_connect", "QP %u: %s", qp[i]->qp_num,
					       strerror(errno));
			}
			bi_gid_to_hex(&dev.gid, mine);
			bi_send_line(fd, "QPS %u %u %u %u %s", local[0].qpn, local[0].psn,
				     local[1].qpn, local[1].psn, mine);
		} else if (!strncmp(line, "SEND ", 5)) {
			unsigned int idx, count, byte, n;
			char reply[200] = "SENT";
			struct ibv_wc wc;

			if (sscanf(line + 5, "%u %u %x", &idx, &count, &byte) != 3 || idx > 1 ||
			    count > 16)
				bi_die("client_send", "bad line %s", line);
			for (n = 0; n < count; n++) {
				memset(dev.buf + n * SRQ_MSG, (int)byte, SRQ_MSG);
				if (bi_post(qp[idx], IBV_WR_SEND, n, (uintptr_t)dev.buf + n * SRQ_MSG,
					    SRQ_MSG, dev.mr->lkey, 0, 0))
					bi_die("client_send", "post: %s", strerror(errno));
				/* One at a time: the server's SRQ is taken in order. */
				if (!bi_poll(dev.cq, &wc)) {
					strcat(reply, " timeout");
					break;
				}
				if (wc.status != IBV_WC_SUCCESS)
					error_cqes++;
				snprintf(reply + strlen(reply), sizeof(reply) - strlen(reply),
					 " %d", wc.status);
			}
			bi_send_line(fd, "%s", reply);
		} else if (!strcmp(line, "QUIT")) {
			struct ibv_wc wc;

			/* The failed QP flushes nothing more: nothing was posted. */
			bi_check(ibv_poll_cq(dev.cq, 1, &wc) == 0, "no_stray_cqes",
				 "a completion of QP %u, status %d", wc.qp_num, wc.status);
			bi_send_line(fd, "BYE %d", bi_failures);
			break;
		} else {
			bi_die("client_command", "unknown line %s", line);
		}
	}
	for (i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	bi_close(&dev);
	bi_count("error_cqes", error_cqes);
	bi_count("command_errors", 0);
	bi_count("raw_commands", 0);
	bi_check_kernel_log();
	return bi_done();
}

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

/* Waits up to BI_TIMEOUT_MS for an asynchronous event of `type` (others
 * are acknowledged and skipped); its element is stored in *element. */
static bool wait_event(enum ibv_event_type type, void **element)
{
	struct pollfd p = { .fd = dev.ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	while (poll(&p, 1, BI_TIMEOUT_MS) == 1) {
		if (ibv_get_async_event(dev.ctx, &ev))
			return false;
		printf("event %s\n", ibv_event_type_str(ev.event_type));
		if (ev.event_type == type) {
			*element = type == IBV_EVENT_SRQ_LIMIT_REACHED ||
					   type == IBV_EVENT_SRQ_ERR ?
				   (void *)ev.element.srq : (void *)ev.element.qp;
			ibv_ack_async_event(&ev);
			return true;
		}
		ibv_ack_async_event(&ev);
	}
	return false;
}

static struct ibv_qp *create_srq_qp(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = dev.cq,
		.recv_cq = dev.cq,
		.srq = srq,
		.cap = { .max_send_wr = 4, .max_send_sge = 1,
			 /* Ignored with an SRQ. */
			 .max_recv_wr = 64, .max_recv_sge = 4 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &attr);

	if (!qp)
		bi_die("srq_qp_created", "ibv_create_qp: %s", strerror(errno));
	bi_check(attr.cap.max_recv_wr == 0 && attr.cap.max_recv_sge == 0, "srq_qp_created",
		 "receive caps %u/%u granted to a QP of an SRQ", attr.cap.max_recv_wr,
		 attr.cap.max_recv_sge);
	return qp;
}

static int post_srq(struct ibv_srq *srq, uint64_t wr_id, uint32_t off, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)dev.buf + off, .length = 4096, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* Asks the client for `count` SENDs of `byte` on its QP `idx`; returns the
 * statuses' line. */
static void client_send(int fd, int idx, int count, unsigned int byte, char *reply,
			size_t size)
{
	bi_send_line(fd, "SEND %d %d %x", idx, count, byte);
	bi_recv_line(fd, reply, size);
}

static bool all_bytes(const uint8_t *p, size_t len, uint8_t byte)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != byte)
			return false;
	return true;
}

static int server(void)
{
	struct ibv_srq_init_attr sinit = { .attr = { .max_wr = SRQ_WR, .max_sge = 1 } };
	struct ibv_device_attr dattr;
	struct ibv_srq_attr sattr;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	struct bi_peer local[2] = { 0 }, peer[2] = { 0 };
	struct ibv_qp *qp[2];
	struct ibv_srq *srq;
	struct ibv_wc wc;
	char line[256], hex[64], mine[33];
	void *element = NULL;
	int fd, i, err;

	bi_open(&dev, false);
	if (ibv_query_device(dev.ctx, &dattr))
		bi_die("srq_device_caps", "ibv_query_device: %s", strerror(errno));
	printf("max_srq %d max_srq_wr %d max_srq_sge %d\n", dattr.max_srq, dattr.max_srq_wr,
	       dattr.max_srq_sge);
	bi_check(dattr.max_srq > 0 && dattr.max_srq_wr >= SRQ_WR && dattr.max_srq_sge >= 1,
		 "srq_device_caps", "max_srq %d max_srq_wr %d max_srq_sge %d", dattr.max_srq,
		 dattr.max_srq_wr, dattr.max_srq_sge);

	srq = ibv_create_srq(dev.pd, &sinit);
	if (!srq)
		bi_die("srq_created", "ibv_create_srq: %s", strerror(errno));
	bi_check(sinit.attr.max_wr >= SRQ_WR && sinit.attr.max_sge >= 1, "srq_created",
		 "max_wr %u max_sge %u", sinit.attr.max_wr, sinit.attr.max_sge);
	/* Beyond what the device offers: refused. */
	sinit.attr.max_wr = (uint32_t)dattr.max_srq_wr + 1;
	errno = 0;
	bi_check(ibv_create_srq(dev.pd, &sinit) == NULL && errno == EINVAL,
		 "srq_beyond_max_srq_wr_einval", "errno %d", errno);

	qp[0] = create_srq_qp(srq);
	qp[1] = create_srq_qp(srq);

	/* A RECV of a QP of an SRQ: refused, as hardware would. */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)dev.buf, .length = 64,
				       .lkey = dev.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

		err = ibv_post_recv(qp[0], &wr, &bad);
		bi_check(err == EINVAL && bad == &wr, "srq_qp_post_recv_einval",
			 "ibv_post_recv: %d", err);
	}
	/* In use by two QPs. */
	err = ibv_destroy_srq(srq);
	bi_check(err == EBUSY, "srq_destroy_in_use_ebusy", "ibv_destroy_srq: %d", err);
	/* A resize is not offered. */
	memset(&sattr, 0, sizeof(sattr));
	sattr.max_wr = 2 * SRQ_WR;
	err = ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR);
	bi_check(err == EINVAL || err == EOPNOTSUPP, "srq_resize_refused", "ibv_modify_srq: %d",
		 err);

	fd = bi_tcp_accept(SRQ_PORT);
	for (i = 0; i < 2; i++) {
		local[i].qpn = qp[i]->qp_num;
		local[i].psn = (qp[i]->qp_num * 104729u) & 0xffffff;
	}
	bi_gid_to_hex(&dev.gid, mine);
	bi_send_line(fd, "QPS %u %u %u %u %s", local[0].qpn, local[0].psn, local[1].qpn,
		     local[1].psn, mine);
	bi_recv_line(fd, line, sizeof(line));
	if (sscanf(line, "QPS %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %40s",
		   &peer[0].qpn, &peer[0].psn, &peer[1].qpn, &peer[1].psn, hex) != 5 ||
	    bi_hex_to_gid(hex, &peer[0].gid))
		bi_die("server_connect", "bad line %s", line);
	peer[1].gid = peer[0].gid;
	for (i = 0; i < 2; i++)
		if (bi_connect_qp(qp[i], &local[i], &peer[i]))
			bi_die("server_connect", "QP %u: %s", qp[i]->qp_num, strerror(errno));

	/* 1. The only WQE has a key the NIC does not know; B consumes it. */
	err = post_srq(srq, BAD_WRID, 0, dev.mr->lkey ^ 0x00ab0000);
	bi_check(!err, "srq_bad_lkey_posted", "ibv_post_srq_recv: %d", err);
	client_send(fd, 1, 1, 0x5a, line, sizeof(line));
	printf("client: %s\n", line);
	bi_check(strncmp(line, "SENT ", 5) == 0 && atoi(line + 5) != IBV_WC_SUCCESS,
		 "srq_bad_lkey_sender_error", "%s", line);
	if (bi_poll(dev.cq, &wc)) {
		if (wc.status != IBV_WC_SUCCESS)
			error_cqes++;
		bi_check(wc.qp_num == qp[1]->qp_num && wc.wr_id == BAD_WRID &&
				 wc.status == IBV_WC_LOC_PROT_ERR,
			 "srq_bad_lkey_error_cqe_on_consuming_qp",
			 "QP %u wr_id %#" PRIx64 " status %s (B is %u)", wc.qp_num, wc.wr_id,
			 bi_wc_status(wc.status), qp[1]->qp_num);
	} else {
		bi_fail("srq_bad_lkey_error_cqe_on_consuming_qp", "no completion");
	}
	bi_check(wait_event(IBV_EVENT_QP_LAST_WQE_REACHED, &element) && element == qp[1],
		 "srq_bad_lkey_last_wqe_event", "no LAST_WQE_REACHED for QP B");
	bi_check(ibv_query_qp(qp[1], &qattr, IBV_QP_STATE, &qinit) == 0 &&
			 qattr.qp_state == IBV_QPS_ERR,
		 "srq_bad_lkey_qp_in_err", "QP B in state %d", qattr.qp_state);
	bi_check(ibv_query_qp(qp[0], &qattr, IBV_QP_STATE, &qinit) == 0 &&
			 qattr.qp_state == IBV_QPS_RTS,
		 "srq_other_qp_still_rts", "QP A in state %d", qattr.qp_state);

	/* 2. Good WQEs and the limit. */
	for (i = 0; i < SRQ_GOOD; i++) {
		memset(dev.buf + 4096 * (i + 1), 0, 4096);
		err = post_srq(srq, GOOD_WRID + i, 4096 * (i + 1), dev.mr->lkey);
		if (err)
			bi_fail("srq_good_posted", "WQE %d: %d", i, err);
	}
	memset(&sattr, 0, sizeof(sattr));
	sattr.srq_limit = SRQ_LIMIT;
	err = ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT);
	memset(&sattr, 0, sizeof(sattr));
	bi_check(!err && !ibv_query_srq(srq, &sattr) && sattr.srq_limit == SRQ_LIMIT &&
			 sattr.max_wr >= SRQ_WR,
		 "srq_limit_armed", "modify %d, limit %u max_wr %u", err, sattr.srq_limit,
		 sattr.max_wr);
	client_send(fd, 0, SRQ_SENDS, 0x33, line, sizeof(line));
	printf("client: %s\n", line);
	bi_check(!strcmp(line, "SENT 0 0 0"), "srq_good_sends_complete", "%s", line);
	for (i = 0; i < SRQ_SENDS; i++) {
		if (!bi_poll(dev.cq, &wc)) {
			bi_fail("srq_good_recvs_after_bad_lkey", "completion %d missing", i);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS)
			error_cqes++;
		/* Taken in the list's order, the bad slot given back before. */
		bi_check(wc.status == IBV_WC_SUCCESS && wc.qp_num == qp[0]->qp_num &&
				 wc.wr_id == GOOD_WRID + (uint64_t)i && wc.byte_len == SRQ_MSG &&
				 all_bytes(dev.buf + 4096 * (i + 1), SRQ_MSG, 0x33),
			 "srq_good_recvs_after_bad_lkey",
			 "QP %u wr_id %" PRIu64 " status %s len %u", wc.qp_num, wc.wr_id,
			 bi_wc_status(wc.status), wc.byte_len);
	}
	bi_check(wait_event(IBV_EVENT_SRQ_LIMIT_REACHED, &element) && element == srq,
		 "srq_limit_event", "no SRQ_LIMIT_REACHED for the SRQ");
	memset(&sattr, 0, sizeof(sattr));
	bi_check(!ibv_query_srq(srq, &sattr) && sattr.srq_limit == 0, "srq_limit_disarmed",
		 "limit %u after the event", sattr.srq_limit);

	/* 3. Teardown: the SRQ goes once its QPs are gone. */
	bi_send_line(fd, "QUIT");
	bi_recv_line(fd, line, sizeof(line));
	bi_check(!strcmp(line, "BYE 0"), "client_clean", "%s", line);
	bi_check(ibv_poll_cq(dev.cq, 1, &wc) == 0, "no_stray_cqes", "QP %u status %d",
		 wc.qp_num, wc.status);
	for (i = 0; i < 2; i++)
		if (ibv_destroy_qp(qp[i]))
			bi_fail("srq_destroyed_after_qps", "QP %d: %s", i, strerror(errno));
	err = ibv_destroy_srq(srq);
	bi_check(!err, "srq_destroyed_after_qps", "ibv_destroy_srq: %d", err);
	close(fd);
	bi_close(&dev);
	bi_count("error_cqes", error_cqes);
	bi_check_kernel_log();
	return bi_done();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc == 3 && !strcmp(argv[1], "client"))
		return client(argv[2]);
	fprintf(stderr, "usage: srq_check server | srq_check client HOST\n");
	return 2;
}
