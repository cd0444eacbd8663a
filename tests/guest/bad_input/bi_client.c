// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * bi_client: the misbehaving side of the bad-input tests (runs on g0 as
 * root, against bi_server on g1).
 *
 *   bi_client lkey|dma|doorbell|admin|ud SERVER_IP
 *
 * Each test feeds the NIC one kind of bad input, checks that it answers as
 * hardware would (error completion, command status, asynchronous event, or
 * a silent drop that the simulator counts), and ends with a well-formed
 * RDMA WRITE whose data the server verifies: the NIC must keep working.
 * BI-COUNT lines give the figures bad_input_test.py compares with the
 * counters in results.json.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bi_common.h"

static struct bi_dev dev;
static int srv = -1;		/* TCP connection to bi_server */
static char reply[512];
/* Raw admin commands the NIC answered, and those with a status other than OK. */
static long long raw_commands;
static long long command_errors;
/* Non-successful CQEs seen on this side. */
static long long error_cqes;

struct conn {
	struct ibv_qp *qp;
	struct bi_peer peer;
};

static void request(const char *fmt, const char *arg)
{
	bi_send_line(srv, fmt, arg);
	bi_recv_line(srv, reply, sizeof(reply));
}

/* A new QP of ours, connected to a new QP of the server. */
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
	bi_send_line(srv, "CONNECT %u %u %s", local.qpn, local.psn, hex);
	bi_recv_line(srv, reply, sizeof(reply));
	if (sscanf(reply, "QP %" SCNu32 " %" SCNu32 " %40s %" SCNu64 " %" SCNu32 " %" SCNu32,
		   &c.peer.qpn, &c.peer.psn, peer_hex, &addr, &c.peer.rkey, &c.peer.len) != 6 ||
	    bi_hex_to_gid(peer_hex, &c.peer.gid))
		bi_die("connect", "server answered '%s'", reply);
	c.peer.addr = addr;
	err = bi_connect_qp(c.qp, &local, &c.peer);
	if (err)
		bi_die("connect", "QP %u to RTS: %s", local.qpn, strerror(err));
	printf("BI-INFO QP %u connected to server QP %u\n", local.qpn, c.peer.qpn);
	return c;
}

/* The next CQE must be wr_id's with this status (and vendor_err = the NIC's
 * syndrome, unless syndrome < 0).
 */
static bool expect_wc(const char *check, uint64_t wr_id, enum ibv_wc_status status,
		      int syndrome)
{
	struct ibv_wc wc;

	if (!bi_poll(dev.cq, &wc)) {
		bi_fail(check, "no completion for wr_id %" PRIu64 " within %d ms", wr_id,
			BI_TIMEOUT_MS);
		return false;
	}
	if (wc.status != IBV_WC_SUCCESS)
		error_cqes++;
	return bi_check(wc.wr_id == wr_id && wc.status == status &&
			(syndrome < 0 || wc.vendor_err == (uint32_t)syndrome),
			check, "wr_id %" PRIu64 " status %s vendor_err %u, expected wr_id %" PRIu64
			" %s syndrome %d", wc.wr_id, bi_wc_status(wc.status), wc.vendor_err, wr_id,
			bi_wc_status(status), syndrome);
}

/* Nothing may be left in the CQ. */
static void expect_empty_cq(const char *check)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(dev.cq, 1, &wc);

	bi_check(n == 0, check, "a CQE is waiting: QP %u wr_id %" PRIu64 " status %s",
		 wc.qp_num, wc.wr_id, bi_wc_status(wc.status));
}

static void expect_qp_state(const char *check, struct ibv_qp *qp, enum ibv_qp_state want)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int err = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);

	bi_check(!err && attr.qp_state == want, check, "err %d state %d, expected %d", err,
		 attr.qp_state, want);
}

/*
 * The proof that the NIC still works: a WRITE of len bytes of `byte` on a
 * fresh connection completes successfully, and the server finds the bytes.
 */
static void write_and_verify(const char *check, uint32_t off, uint32_t len, uint8_t byte)
{
	struct conn c = new_conn();
	char args[64];

	memset(dev.buf + off, byte, len);
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 0x600d, (uintptr_t)dev.buf + off, len,
		    dev.mr->lkey, c.peer.addr + off, c.peer.rkey))
		bi_fail(check, "ibv_post_send: %s", strerror(errno));
	else if (expect_wc(check, 0x600d, IBV_WC_SUCCESS, 0)) {
		snprintf(args, sizeof(args), "%u %u %u", off, len, byte);
		request("CHECK %s", args);
		bi_check(!strcmp(reply, "OK"), "server_sees_data", "CHECK %s: %s", args, reply);
	}
	ibv_destroy_qp(c.qp);
}

/* One raw admin command whose status (and syndrome, unless < 0) is known. */
static struct mpr_cmd_comp expect_cmd(const char *check, struct mpr_cmd *cmd, const void *in,
				      size_t in_bytes, void *out, size_t out_size,
				      uint8_t status, int syndrome)
{
	struct mpr_cmd_comp comp = { 0 };
	int err = bi_raw(dev.raw_fd, cmd, in, in_bytes, &comp, out, out_size);

	if (err) {
		bi_fail(check, "admin_raw refused the command: %s", strerror(-err));
		return comp;
	}
	raw_commands++;
	if (comp.status != MPR_CMD_OK)
		command_errors++;
	bi_check(comp.status == status && (syndrome < 0 || comp.syndrome == (uint32_t)syndrome),
		 check, "status %u syndrome %u, expected status %u syndrome %d", comp.status,
		 comp.syndrome, status, syndrome);
	return comp;
}

/* admin_raw itself must refuse the request (EINVAL): nothing reaches the NIC. */
static void expect_refused(const char *check, const void *req, size_t len)
{
	ssize_t n = write(dev.raw_fd, req, len);

	bi_check(n < 0 && errno == EINVAL, check, "write of %zu bytes returned %zd (%s)", len, n,
		 n < 0 ? strerror(errno) : "accepted");
}

static void finish(void)
{
	expect_empty_cq("no_stray_cqes");
	request("%s", "QUIT");
	bi_check(!strncmp(reply, "BYE 0", 5), "server_clean", "server answered '%s'", reply);
	bi_check_kernel_log();
	bi_count("raw_commands", raw_commands);
	bi_count("command_errors", command_errors);
	bi_count("error_cqes", error_cqes);
}

/* ---------------------------------------------------------------------- */
/* 1. Wrong lkeys                                                           */
/* ---------------------------------------------------------------------- */

static void test_lkey(void)
{
	struct conn c;
	uint32_t bad = dev.mr->lkey ^ 0x00ab0000; /* another MPT index: unknown */
	uint8_t *buf2;
	struct ibv_mr *mr2;
	uint32_t freed;
	unsigned int wqpn;
	int status, vendor;

	/* An unknown lkey fails the WQE; the QP goes to ERR and everything
	 * behind it, posted before or after, is flushed.
	 */
	c = new_conn();
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 1, (uintptr_t)dev.buf, 256, bad, c.peer.addr,
		    c.peer.rkey) ||
	    bi_post(c.qp, IBV_WR_RDMA_WRITE, 2, (uintptr_t)dev.buf, 256, dev.mr->lkey,
		    c.peer.addr, c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("lkey_unknown_loc_prot_err", 1, IBV_WC_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
	expect_wc("lkey_unknown_then_flush", 2, IBV_WC_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
	/* The provider does not know the NIC moved the QP to ERR: the post
	 * succeeds and the NIC flushes the WQE at once.
	 */
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 3, (uintptr_t)dev.buf, 256, dev.mr->lkey,
		    c.peer.addr, c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("lkey_later_post_flushed", 3, IBV_WC_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
	expect_qp_state("lkey_qp_in_err", c.qp, IBV_QPS_ERR);
	ibv_destroy_qp(c.qp);

	/* A valid lkey, but the SGE reaches past the end of its MR. */
	c = new_conn();
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 4, (uintptr_t)dev.buf + BI_BUF_LEN - 64, 256,
		    dev.mr->lkey, c.peer.addr, c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("lkey_out_of_bounds_loc_prot_err", 4, IBV_WC_LOC_PROT_ERR, MPR_SYN_LKEY_BOUNDS);
	ibv_destroy_qp(c.qp);

	/* The lkey of an MR deregistered since. */
	buf2 = aligned_alloc(4096, 4096);
	mr2 = ibv_reg_mr(dev.pd, buf2, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!buf2 || !mr2)
		bi_die("reg_mr", "second MR: %s", strerror(errno));
	freed = mr2->lkey;
	ibv_dereg_mr(mr2);
	c = new_conn();
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 5, (uintptr_t)buf2, 64, freed, c.peer.addr,
		    c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("lkey_deregistered_loc_prot_err", 5, IBV_WC_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
	ibv_destroy_qp(c.qp);
	free(buf2);

	/* A RECV with a wrong lkey at the responder: the RECV completes with
	 * LOC_PROT_ERR, the responder NAKs (remote operational error) and
	 * raises QP_FATAL on its QP; our SEND completes with REM_OP_ERR.
	 */
	c = new_conn();
	request("%s", "RECVBAD");
	if (!bi_check(!strcmp(reply, "OK"), "server_posted_bad_recv", "%s", reply))
		return;
	if (bi_post(c.qp, IBV_WR_SEND, 6, (uintptr_t)dev.buf, 64, dev.mr->lkey, 0, 0))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("recv_bad_lkey_sender_rem_op_err", 6, IBV_WC_REM_OP_ERR, MPR_SYN_NAK_REM_OP);
	request("%s", "WAITRECV");
	bi_check(sscanf(reply, "WC %d %d %u", &status, &vendor, &wqpn) == 3 &&
		 status == IBV_WC_LOC_PROT_ERR && vendor == MPR_SYN_BAD_LKEY &&
		 wqpn == c.peer.qpn, "recv_bad_lkey_receiver_loc_prot_err",
		 "server's completion: %s", reply);
	request("%s", "EVENT");
	bi_check(sscanf(reply, "EVENT %d %u", &status, &wqpn) == 2 &&
		 status == IBV_EVENT_QP_FATAL && wqpn == c.peer.qpn,
		 "recv_bad_lkey_receiver_qp_fatal_event", "server's event: %s", reply);
	ibv_destroy_qp(c.qp);

	write_and_verify("nic_works_after_bad_lkeys", 0, 4096, 0x5e);
}

/* ---------------------------------------------------------------------- */
/* Raw admin commands                                                       */
/* ---------------------------------------------------------------------- */

static void cmd_init(struct mpr_cmd *cmd, uint16_t opcode)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->hdr.opcode = opcode;
}

/*
 * A CREATE_QP every check of which passes, with its rings at `ram`, an
 * address inside the guest's RAM (the NIC refuses rings outside it). The
 * rings are not ours, but nothing makes the NIC write there: a QP created
 * this way stays in RESET, no doorbell names it, and it is destroyed at once
 * (or, as expected, never created).
 */
static void valid_create_qp(struct mpr_cmd *cmd, uint64_t ram)
{
	cmd_init(cmd, MPR_CMD_CREATE_QP);
	cmd->u.create_qp.sq_base = ram;
	cmd->u.create_qp.rq_base = ram + 4096;
	cmd->u.create_qp.pdn = dev.pdn;
	cmd->u.create_qp.send_cqn = dev.cqn;
	cmd->u.create_qp.recv_cqn = dev.cqn;
	cmd->u.create_qp.uar_index = 0;
	cmd->u.create_qp.qp_type = MPR_QPT_RC;
	cmd->u.create_qp.sq_log_size = 1;
	cmd->u.create_qp.sq_log_stride = 6;
	cmd->u.create_qp.rq_log_size = 1;
	cmd->u.create_qp.rq_log_stride = 4;
}

/* A REG_MR every check of which passes but the page list (not given). */
static void valid_reg_mr(struct mpr_cmd *cmd)
{
	cmd_init(cmd, MPR_CMD_REG_MR);
	cmd->hdr.in_mailbox = BI_RAW_MAILBOX;
	cmd->hdr.in_len = 8;
	cmd->u.reg_mr.length = 4096;
	cmd->u.reg_mr.pdn = dev.pdn;
	cmd->u.reg_mr.access = MPR_ACCESS_LOCAL_WRITE;
	cmd->u.reg_mr.page_shift = 12;
	cmd->u.reg_mr.num_pages = 1;
}

static void destroy_raw(const char *check, uint16_t opcode, uint32_t handle)
{
	struct mpr_cmd cmd;

	cmd_init(&cmd, opcode);
	cmd.u.handle.handle = handle;	/* pdn, key and qpn share the offset */
	expect_cmd(check, &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
}

/*
 * A raw command that must be refused with BAD_PARAM / SYN_ADDRESS because
 * an address in it is not guest RAM the NIC may use. Should the NIC accept
 * it anyway, the object goes again at once (`destroy`, unless 0), so that
 * the run goes on as if it had been refused.
 */
static void expect_address_refused(const char *check, struct mpr_cmd *cmd, const void *in,
				   size_t in_bytes, uint16_t destroy)
{
	struct mpr_cmd_comp comp = expect_cmd(check, cmd, in, in_bytes, NULL, 0,
					      MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);

	if (comp.status == MPR_CMD_OK && destroy)
		destroy_raw("wrongly_created_object_destroyed", destroy, comp.out[0]);
}

/* ---------------------------------------------------------------------- */
/* 2. DMA outside the guest's RAM                                           */
/* ---------------------------------------------------------------------- */

/* A REG_MR of two 4 KiB pages in our verbs PD, local access; the page
 * list (16 bytes) is the command's input.
 */
static void two_page_reg_mr(struct mpr_cmd *cmd, uint64_t iova)
{
	valid_reg_mr(cmd);
	cmd->hdr.in_len = 16;
	cmd->u.reg_mr.iova = iova;
	cmd->u.reg_mr.length = 2 * 4096;
	cmd->u.reg_mr.num_pages = 2;
}

/* A CREATE_CQ on the driver's EQ 0 every check of which passes. */
static void valid_create_cq(struct mpr_cmd *cmd, uint64_t base, uint64_t dbrec)
{
	cmd_init(cmd, MPR_CMD_CREATE_CQ);
	cmd->u.create_cq.base = base;
	cmd->u.create_cq.dbrec = dbrec;
	cmd->u.create_cq.log_size = 1;
}

/*
 * The firmware checks every address software hands it against the host's
 * memory map: MR pages, rings, CQ records and ICM chunks must be guest RAM
 * the NIC may use (not a hole, not the MSI window 0xFEE00000-0xFEEFFFFF),
 * or the command fails with BAD_PARAM / SYN_ADDRESS and changes nothing.
 * Each refusal below has a twin, the same command with addresses inside
 * RAM, which the NIC accepts: the address is what it refuses. (A PC has no
 * RAM in the MSI window: a page there is outside RAM as well, so which of
 * the two rules refuses it cannot be told from a guest.)
 *
 * The data-path DMA faults the old version of this case provoked (a WRITE
 * from an MR whose pages cannot be read: LOC_PROT_ERR / DMA_FAULT; a READ
 * from a peer's MR whose pages cannot be read: REM_OP_ERR and QP_FATAL at
 * the peer) can no longer be set up from a guest, as no such MR can be
 * registered. They are covered where memory can go away after
 * registration, through the host's IOMMU (RootComplex::revoke_dma):
 * tests/vp/host/errors_test.cc WriteFromAnMrOverUnbackedMemoryFailsWithDmaFault
 * and ReadFromARemoteMrOverUnbackedMemoryIsARemoteOperationalError, and
 * tests/vp/host/unreachable_test.cc (rings and records that go away).
 */
static void test_dma(void)
{
	const uint64_t iova = 0x200000;
	struct mpr_device_attr attr;
	struct mpr_cmd cmd;
	struct mpr_cmd_comp comp;
	uint64_t mtt[2], beyond = bi_outside_ram(2 * 4096), ram = bi_inside_ram();
	int status, syndrome;

	/* The control: two pages of RAM are accepted (an MR over memory that
	 * is not ours, with local access only, never used, deregistered at
	 * once).
	 */
	mtt[0] = ram;
	mtt[1] = ram + 4096;
	two_page_reg_mr(&cmd, iova);
	comp = expect_cmd("reg_mr_pages_in_ram_accepted", &cmd, mtt, sizeof(mtt), NULL, 0,
			  MPR_CMD_OK, 0);
	if (comp.status == MPR_CMD_OK)
		destroy_raw("dereg_mr_pages_in_ram", MPR_CMD_DEREG_MR, comp.out[0]);

	/* Both pages outside RAM; the first in RAM and the second outside
	 * (every page is checked, not the first alone); the second in the MSI
	 * window (a WRITE there would raise interrupts).
	 */
	mtt[0] = beyond;
	mtt[1] = beyond + 4096;
	two_page_reg_mr(&cmd, iova);
	expect_address_refused("reg_mr_pages_outside_ram_refused", &cmd, mtt, sizeof(mtt),
			       MPR_CMD_DEREG_MR);
	mtt[0] = ram;
	mtt[1] = beyond;
	two_page_reg_mr(&cmd, iova);
	expect_address_refused("reg_mr_second_page_outside_ram_refused", &cmd, mtt, sizeof(mtt),
			       MPR_CMD_DEREG_MR);
	mtt[1] = BI_MSI_WINDOW;
	two_page_reg_mr(&cmd, iova);
	expect_address_refused("reg_mr_page_in_msi_window_refused", &cmd, mtt, sizeof(mtt),
			       MPR_CMD_DEREG_MR);

	/* Queues: a QP whose send or receive ring is outside RAM or in the MSI
	 * window; the same QP with both rings in RAM is created (and
	 * destroyed unused).
	 */
	valid_create_qp(&cmd, ram);
	comp = expect_cmd("create_qp_rings_in_ram_accepted", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK,
			  0);
	if (comp.status == MPR_CMD_OK)
		destroy_raw("destroy_qp_rings_in_ram", MPR_CMD_DESTROY_QP, comp.out[0]);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.sq_base = beyond;
	expect_address_refused("create_qp_send_ring_outside_ram_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_QP);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.rq_base = beyond;
	expect_address_refused("create_qp_recv_ring_outside_ram_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_QP);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.sq_base = BI_MSI_WINDOW;
	expect_address_refused("create_qp_ring_in_msi_window_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_QP);

	/* A CQ whose ring or consumer record is outside RAM or in the MSI
	 * window; with both in RAM it is created (on EQ 0, no QP, never
	 * armed, destroyed at once).
	 */
	valid_create_cq(&cmd, ram, ram + 4096);
	comp = expect_cmd("create_cq_in_ram_accepted", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
	if (comp.status == MPR_CMD_OK)
		destroy_raw("destroy_cq_in_ram", MPR_CMD_DESTROY_CQ, comp.out[0]);
	valid_create_cq(&cmd, beyond, ram + 4096);
	expect_address_refused("create_cq_ring_outside_ram_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_CQ);
	valid_create_cq(&cmd, ram, beyond);
	expect_address_refused("create_cq_record_outside_ram_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_CQ);
	valid_create_cq(&cmd, ram, BI_MSI_WINDOW);
	expect_address_refused("create_cq_record_in_msi_window_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_CQ);

	/* An EQ whose ring is outside RAM or in the MSI window (its events
	 * would be writes the root complex takes for interrupts); in RAM it is
	 * created (no CQ uses it: it never gets an event).
	 */
	cmd_init(&cmd, MPR_CMD_CREATE_EQ);
	cmd.u.create_eq.base = ram;
	cmd.u.create_eq.log_size = 1;
	comp = expect_cmd("create_eq_in_ram_accepted", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
	if (comp.status == MPR_CMD_OK)
		destroy_raw("destroy_eq_in_ram", MPR_CMD_DESTROY_EQ, comp.out[0]);
	cmd.u.create_eq.base = beyond;
	expect_address_refused("create_eq_ring_outside_ram_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_EQ);
	cmd.u.create_eq.base = BI_MSI_WINDOW;
	expect_address_refused("create_eq_ring_in_msi_window_refused", &cmd, NULL, 0,
			       MPR_CMD_DESTROY_EQ);

	/* MAP_ICM of the NIC's last ICM page to a chunk outside RAM or in the
	 * MSI window. The driver has mapped all ICM: an accepted command would
	 * move that page (the NIC's context memory) out of reach, which the
	 * rest of the run would show; refused, nothing is remapped.
	 */
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(attr);
	expect_cmd("query_device_icm_pages", &cmd, NULL, 0, &attr, sizeof(attr), MPR_CMD_OK, 0);
	cmd_init(&cmd, MPR_CMD_MAP_ICM);
	cmd.hdr.in_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.in_len = 8;
	cmd.u.map_icm.first_page = attr.icm_pages ? attr.icm_pages - 1 : 0;
	cmd.u.map_icm.num_chunks = 1;
	cmd.u.map_icm.log_chunk = 12;
	expect_address_refused("map_icm_chunk_outside_ram_refused", &cmd, &beyond, 8, 0);
	mtt[0] = BI_MSI_WINDOW;
	expect_address_refused("map_icm_chunk_in_msi_window_refused", &cmd, mtt, 8, 0);

	/* REG_MR whose input mailbox (the page list) is outside RAM: the read
	 * of the list fails at the root complex (dma_read_service_errors).
	 */
	two_page_reg_mr(&cmd, iova);
	cmd.hdr.in_mailbox = beyond;
	expect_cmd("reg_mr_mailbox_outside_ram_dma_error", &cmd, NULL, 0, NULL, 0,
		   MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);

	/* QUERY_DEVICE whose output mailbox is outside RAM: the output is a
	 * posted write the NIC cannot see fail, so the command succeeds; the
	 * root complex drops the write and counts it (dropped_output_writes).
	 */
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	cmd.hdr.out_mailbox = beyond;
	cmd.hdr.out_len = sizeof(struct mpr_device_attr);
	expect_cmd("query_device_output_outside_ram", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
	bi_count("dropped_output_writes", 1);

	/* The responder side: the server's NIC refuses an MR over pages
	 * outside its RAM just the same, so a peer can no longer be given an
	 * rkey whose data the NIC would drop after ACKing it.
	 */
	request("RAWMR %s", "7 8192");
	bi_check(sscanf(reply, "REFUSED %d %d", &status, &syndrome) == 2 &&
		 status == MPR_CMD_BAD_PARAM && syndrome == MPR_CMD_SYN_ADDRESS,
		 "server_reg_mr_outside_ram_refused", "server answered '%s'", reply);

	/* The PD number bi_open() inferred is the verbs PD's: the NIC refuses
	 * to free it while our MR uses it.
	 */
	cmd_init(&cmd, MPR_CMD_DEALLOC_PD);
	cmd.u.pd.pdn = dev.pdn;
	expect_cmd("verbs_pd_number_confirmed_busy", &cmd, NULL, 0, NULL, 0, MPR_CMD_BUSY, -1);

	write_and_verify("nic_works_after_dma_outside_ram", 0, 4096, 0x3c);
}

/* ---------------------------------------------------------------------- */
/* 3. Doorbells for destroyed QPs and other bad doorbells                   */
/* ---------------------------------------------------------------------- */

/* Our NIC's sysfs folder. */
static void nic_sysfs(char *dir, size_t size)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char path[512];

	if (!d)
		bi_die("sysfs", "no /sys/bus/pci/devices");
	while ((e = readdir(d))) {
		unsigned int vendor = 0, device = 0;
		FILE *f;

		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%x", &vendor) != 1)
			vendor = 0;
		fclose(f);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%x", &device) != 1)
			device = 0;
		fclose(f);
		if (vendor == MPR_PCI_VENDOR_ID && device == MPR_PCI_DEVICE_ID) {
			snprintf(dir, size, "/sys/bus/pci/devices/%s", e->d_name);
			closedir(d);
			return;
		}
	}
	closedir(d);
	bi_die("sysfs", "no %04x:%04x device", MPR_PCI_VENDOR_ID, MPR_PCI_DEVICE_ID);
}

/*
 * The UAR pages this process has mapped, one per open device context: the
 * provider maps its context's page first, so it is the 4 KiB uverbs
 * mapping at offset 0 (the first mmap key of the context). Writing through
 * them rings exactly what the provider rings. Returns how many there are.
 */
static int uar_mappings(volatile uint8_t **va, int max)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!maps)
		bi_die("uar", "cannot read /proc/self/maps");
	while (fgets(line, sizeof(line), maps) && n < max) {
		uint64_t start, end, offset;

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64, &start, &end,
			   &offset) != 3 || offset != 0 || end - start != MPR_UAR_PAGE_SIZE)
			continue;
		va[n++] = (volatile uint8_t *)(uintptr_t)start;
	}
	fclose(maps);
	return n;
}

static void ring(volatile uint8_t *uar, uint32_t off, uint64_t value)
{
	/* One aligned 64-bit store, as the provider rings; the mapping is
	 * uncached, so stores reach the NIC in program order.
	 */
	*(volatile uint64_t *)(uar + off) = value;
}

static void test_doorbell(void)
{
	volatile uint8_t *va[4];
	volatile uint8_t *own, *foreign;
	struct ibv_context *other;
	struct ibv_qp *reset_qp;
	char path[600], dir[300];
	uint32_t dead_qpn;
	struct conn c;
	struct ibv_wc wc;
	void *bar;
	int n, fd;

	/* For the record: can root map BAR2 through sysfs? (Not needed: the
	 * doorbells below go through the provider's own mappings.)
	 */
	nic_sysfs(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/resource2", dir);
	fd = open(path, O_RDWR | O_SYNC);
	bar = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	printf("BI-INFO mmap of %s: %s\n", path, bar == MAP_FAILED ? strerror(errno) : "works");
	if (bar != MAP_FAILED)
		munmap(bar, 4096);
	if (fd >= 0)
		close(fd);

	n = uar_mappings(va, 4);
	if (n != 1)
		bi_die("uar", "%d UAR mappings in this process, expected 1", n);
	own = va[0];
	/* A second context of this process has a UAR page of its own: the
	 * page another process would ring.
	 */
	other = ibv_open_device(dev.ctx->device);
	if (!other)
		bi_die("uar", "second context: %s", strerror(errno));
	n = uar_mappings(va, 4);
	if (n != 2)
		bi_die("uar", "%d UAR mappings after a second context, expected 2", n);
	foreign = va[0] == own ? va[1] : va[0];

	/* The path works to begin with. */
	c = new_conn();
	memset(dev.buf, 0x11, 4096);
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 1, (uintptr_t)dev.buf, 4096, dev.mr->lkey,
		    c.peer.addr, c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	expect_wc("write_before_bad_doorbells", 1, IBV_WC_SUCCESS, 0);

	/* A QP in RESET: its doorbell is dropped (requester.doorbells_dropped). */
	reset_qp = bi_create_qp(&dev);
	ring(own, MPR_UAR_SQ_DB, MPR_SQ_DB(reset_qp->qp_num, 1));

	/* The QP is destroyed; its SQ and RQ doorbells, rung on its own page
	 * with the next producer indices, name no QP (hostif.bad_doorbells).
	 */
	dead_qpn = c.qp->qp_num;
	if (ibv_destroy_qp(c.qp))
		bi_die("destroy_qp", "%s", strerror(errno));
	ring(own, MPR_UAR_SQ_DB, MPR_SQ_DB(dead_qpn, 2));
	ring(own, MPR_UAR_RQ_DB, MPR_RQ_DB(dead_qpn, 1));
	/* A CQ that does not exist, and an EQ doorbell on a user page (only
	 * page 0 may ring EQs): cq.bad_doorbells.
	 */
	ring(own, MPR_UAR_CQ_DB, MPR_CQ_DB(0xabcde, MPR_CQ_DB_ARM_NEXT, 0));
	ring(own, MPR_UAR_EQ_DB, MPR_EQ_DB(0, 1, 0));
	/* An offset with no doorbell: hostif.bad_doorbells. */
	ring(own, 0x020, 0x1234);

	/* A new QP (it usually gets the dead QP's number back). Its doorbell
	 * rung on another context's page is dropped (hostif.bad_doorbells);
	 * one claiming far more WQEs than the ring holds is dropped too
	 * (requester.doorbells_dropped).
	 */
	c = new_conn();
	printf("BI-INFO new QP %u (the destroyed one was %u)\n", c.qp->qp_num, dead_qpn);
	ring(foreign, MPR_UAR_SQ_DB, MPR_SQ_DB(c.qp->qp_num, 3));
	ring(own, MPR_UAR_SQ_DB, MPR_SQ_DB(c.qp->qp_num, 0x8000));

	/* A doorbell on a live QP in RTS claiming one WQE more than was
	 * posted: the NIC fetches the never-written slot 0 (zeros: opcode
	 * NOP, which it rejects), completes it with an error and moves the
	 * QP to ERR, as hardware trusting its doorbell would. Only this QP of
	 * this process suffers.
	 */
	{
		struct conn liar = new_conn();

		ring(own, MPR_UAR_SQ_DB, MPR_SQ_DB(liar.qp->qp_num, 1));
		if (bi_poll(dev.cq, &wc)) {
			error_cqes += wc.status != IBV_WC_SUCCESS;
			bi_check(wc.qp_num == liar.qp->qp_num && wc.status == IBV_WC_LOC_QP_OP_ERR &&
				 wc.vendor_err == MPR_SYN_BAD_OPCODE, "doorbell_ahead_of_wqes_error_cqe",
				 "CQE: QP %u status %s vendor_err %u", wc.qp_num,
				 bi_wc_status(wc.status), wc.vendor_err);
		} else {
			bi_fail("doorbell_ahead_of_wqes_error_cqe", "no completion");
		}
		expect_qp_state("doorbell_ahead_of_wqes_qp_in_err", liar.qp, IBV_QPS_ERR);
		ibv_destroy_qp(liar.qp);
	}

	/* The doorbells above reached the NIC before this WRITE's (uncached
	 * stores, in order): when its CQE is in, they have been handled. Had
	 * any been taken, the NIC would have fetched WQEs that were never
	 * posted and the CQE below would not be this WRITE's success.
	 */
	memset(dev.buf + 8192, 0x22, 4096);
	if (bi_post(c.qp, IBV_WR_RDMA_WRITE, 2, (uintptr_t)dev.buf + 8192, 4096, dev.mr->lkey,
		    c.peer.addr + 8192, c.peer.rkey))
		bi_die("post", "ibv_post_send: %s", strerror(errno));
	if (bi_poll(dev.cq, &wc))
		bi_check(wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS && wc.qp_num == c.qp->qp_num,
			 "nic_works_after_bad_doorbells", "CQE: QP %u wr_id %" PRIu64 " status %s",
			 wc.qp_num, wc.wr_id, bi_wc_status(wc.status));
	else
		bi_fail("nic_works_after_bad_doorbells", "no completion");
	expect_empty_cq("no_cqe_for_bad_doorbells");
	expect_qp_state("reset_qp_still_reset", reset_qp, IBV_QPS_RESET);
	request("CHECK %s", "0 4096 17");
	bi_check(!strcmp(reply, "OK"), "server_sees_first_write", "%s", reply);
	request("CHECK %s", "8192 4096 34");
	bi_check(!strcmp(reply, "OK"), "server_sees_later_write", "%s", reply);

	ibv_destroy_qp(c.qp);
	ibv_destroy_qp(reset_qp);
	ibv_close_device(other);
	bi_count("bad_qp_doorbells", 4);
	bi_count("dropped_sq_doorbells", 2);
	bi_count("bad_cq_eq_doorbells", 2);
}

/* ---------------------------------------------------------------------- */
/* 4. Garbage admin commands                                                */
/* ---------------------------------------------------------------------- */

static uint64_t rng_state = 0x6d70726461ull; /* fixed: the same garbage every run */

static uint64_t rng(void)
{
	/* xorshift64 */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void garbage(int count, bool keep_header)
{
	static const uint16_t opcodes[] = {
		MPR_CMD_NOP, MPR_CMD_QUERY_DEVICE, MPR_CMD_QUERY_PORT, MPR_CMD_SET_GID,
		MPR_CMD_ALLOC_PD, MPR_CMD_DEALLOC_PD, MPR_CMD_REG_MR, MPR_CMD_DEREG_MR,
		MPR_CMD_CREATE_EQ, MPR_CMD_DESTROY_EQ, MPR_CMD_CREATE_CQ, MPR_CMD_DESTROY_CQ,
		MPR_CMD_CREATE_QP, MPR_CMD_MODIFY_QP, MPR_CMD_QUERY_QP, MPR_CMD_DESTROY_QP,
	};
	int i, answered = 0, refused = 0, bad_status = 0, ok = 0, created = 0;

	for (i = 0; i < count; i++) {
		struct mpr_cmd cmd;
		struct mpr_cmd_comp comp;
		uint64_t words[16];
		uint16_t destroy;
		int err, j;

		for (j = 0; j < 16; j++)
			words[j] = rng();
		memcpy(&cmd, words, sizeof(cmd));
		if (keep_header) {
			/* Past the reserved-field check, into each command's own. */
			cmd.hdr.opcode = opcodes[rng() % 16];
			cmd.hdr.rsvd0 = 0;
		}
		err = bi_raw(dev.raw_fd, &cmd, NULL, 0, &comp, NULL, 0);
		if (err == -EINVAL) {
			/* A mailbox range touching RAM: the driver's refusal. */
			refused++;
			continue;
		}
		if (err) {
			bi_fail("garbage_answered", "command %d (opcode %#x): %s", i,
				cmd.hdr.opcode, strerror(-err));
			return;
		}
		answered++;
		raw_commands++;
		if (comp.status > MPR_CMD_DMA_ERROR)
			bad_status++;
		if (comp.status != MPR_CMD_OK) {
			command_errors++;
			continue;
		}
		ok++;
		/* Whatever it created goes again: it is not the driver's. */
		switch (cmd.hdr.opcode) {
		case MPR_CMD_ALLOC_PD: destroy = MPR_CMD_DEALLOC_PD; break;
		case MPR_CMD_REG_MR: destroy = MPR_CMD_DEREG_MR; break;
		case MPR_CMD_CREATE_EQ: destroy = MPR_CMD_DESTROY_EQ; break;
		case MPR_CMD_CREATE_CQ: destroy = MPR_CMD_DESTROY_CQ; break;
		case MPR_CMD_CREATE_QP: destroy = MPR_CMD_DESTROY_QP; break;
		default: continue;
		}
		destroy_raw("garbage_object_destroyed", destroy, comp.out[0]);
		created++;
	}
	printf("BI-INFO %d garbage commands%s: %d answered (%d OK, %d created an object), %d refused by the driver\n",
	       count, keep_header ? " (valid opcode, zero rsvd0)" : "", answered, ok, created,
	       refused);
	bi_check(answered > count * 9 / 10, keep_header ? "garbage_commands_answered"
		 : "random_commands_answered", "only %d of %d", answered, count);
	bi_check(!bad_status, keep_header ? "garbage_statuses_defined" : "random_statuses_defined",
		 "%d completions with a status beyond DMA_ERROR", bad_status);
}

static void test_admin(void)
{
	uint64_t beyond = bi_outside_ram(4 * 4096), ram = bi_inside_ram();
	static const uint16_t unknown[] = { 0x06, 0x0f, 0x14, 0x24, 0x34, 0x40, 0xff, 0x1234,
					    0xffff };
	struct mpr_device_attr attr;
	struct mpr_port_attr port;
	struct mpr_qp_attr qattr;
	struct mpr_cmd cmd;
	struct mpr_cmd_comp comp;
	uint8_t big[sizeof(cmd) + 4097];
	uint64_t mtt;
	struct conn c;
	size_t i;

	/* --- refused by admin_raw itself ---------------------------------- */
	memset(big, 0, sizeof(big));
	expect_refused("raw_short_write_refused", big, 64);
	expect_refused("raw_oversized_input_refused", big, sizeof(big));
	cmd_init(&cmd, MPR_CMD_NOP);
	memcpy(big, &cmd, sizeof(cmd));
	expect_refused("raw_input_without_mailbox_refused", big, sizeof(cmd) + 8);
	cmd.hdr.in_mailbox = ram;
	cmd.hdr.in_len = 8;
	expect_refused("raw_input_mailbox_in_ram_refused", &cmd, sizeof(cmd));
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	cmd.hdr.out_mailbox = ram;
	cmd.hdr.out_len = sizeof(attr);
	expect_refused("raw_output_mailbox_in_ram_refused", &cmd, sizeof(cmd));
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = 4097;
	expect_refused("raw_output_mailbox_too_long_refused", &cmd, sizeof(cmd));

	/* --- the NIC's answers -------------------------------------------- */
	cmd_init(&cmd, MPR_CMD_NOP);
	expect_cmd("nop_ok", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		cmd_init(&cmd, unknown[i]);
		expect_cmd("unknown_opcode_bad_opcode", &cmd, NULL, 0, NULL, 0,
			   MPR_CMD_BAD_OPCODE, 0);
	}
	cmd_init(&cmd, MPR_CMD_NOP);
	cmd.hdr.rsvd0 = 1;
	expect_cmd("header_reserved_nonzero", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_RESERVED);

	/* Handles that do not exist. */
	cmd_init(&cmd, MPR_CMD_DEALLOC_PD);
	expect_cmd("dealloc_pd_0_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE, -1);
	cmd.u.pd.pdn = 0xffffffff;
	expect_cmd("dealloc_pd_huge_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE, -1);
	cmd_init(&cmd, MPR_CMD_DEREG_MR);
	cmd.u.dereg_mr.key = 0xdeadbeef;
	expect_cmd("dereg_mr_unknown_key_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	/* Our MR's index with another generation: an old key. */
	cmd.u.dereg_mr.key = dev.mr->lkey ^ 0x80;
	expect_cmd("dereg_mr_stale_key_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	cmd_init(&cmd, MPR_CMD_DESTROY_EQ);
	cmd.u.handle.handle = 31;
	expect_cmd("destroy_eq_unknown_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	cmd.u.handle.handle = 0xffffffff;
	expect_cmd("destroy_eq_huge_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE, -1);
	cmd_init(&cmd, MPR_CMD_DESTROY_CQ);
	cmd.u.handle.handle = 0xffffff;
	expect_cmd("destroy_cq_unknown_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	for (i = 0; i < 3; i++) {
		static const uint32_t qpns[] = { 0, 1, 0xffffff };

		cmd_init(&cmd, MPR_CMD_DESTROY_QP);
		cmd.u.qpn.qpn = qpns[i];
		expect_cmd("destroy_qp_unknown_bad_handle", &cmd, NULL, 0, NULL, 0,
			   MPR_CMD_BAD_HANDLE, -1);
	}
	cmd_init(&cmd, MPR_CMD_MODIFY_QP);
	cmd.u.modify_qp.qpn = 0x123456;
	cmd.u.modify_qp.attr.attr_mask = MPR_QP_ATTR_STATE;
	cmd.u.modify_qp.attr.qp_state = MPR_QPS_ERR;
	expect_cmd("modify_qp_unknown_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE, -1);
	cmd_init(&cmd, MPR_CMD_QUERY_QP);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(qattr);
	cmd.u.qpn.qpn = 0x123456;
	expect_cmd("query_qp_unknown_bad_handle", &cmd, NULL, 0, &qattr, sizeof(qattr),
		   MPR_CMD_BAD_HANDLE, -1);
	cmd_init(&cmd, MPR_CMD_CREATE_CQ);
	cmd.u.create_cq.base = ram;
	cmd.u.create_cq.log_size = 1;
	cmd.u.create_cq.eqn = 31;
	expect_cmd("create_cq_unknown_eq_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.pdn = 0xffff;
	expect_cmd("create_qp_unknown_pd_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.send_cqn = 0xffffff;
	expect_cmd("create_qp_unknown_cq_bad_handle", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.pdn = 0;
	mtt = beyond;
	expect_cmd("reg_mr_pd_0_bad_handle", &cmd, &mtt, sizeof(mtt), NULL, 0, MPR_CMD_BAD_HANDLE,
		   -1);

	/* Handles of objects in use (ours and the driver's): refused as busy. */
	c = new_conn();
	cmd_init(&cmd, MPR_CMD_DESTROY_EQ);
	cmd.u.handle.handle = 0;
	expect_cmd("destroy_drivers_eq0_busy", &cmd, NULL, 0, NULL, 0, MPR_CMD_BUSY, -1);
	cmd_init(&cmd, MPR_CMD_DESTROY_CQ);
	cmd.u.handle.handle = dev.cqn;
	expect_cmd("destroy_cq_in_use_busy", &cmd, NULL, 0, NULL, 0, MPR_CMD_BUSY, -1);
	cmd_init(&cmd, MPR_CMD_DEALLOC_PD);
	cmd.u.pd.pdn = dev.pdn;
	expect_cmd("dealloc_pd_in_use_busy", &cmd, NULL, 0, NULL, 0, MPR_CMD_BUSY, -1);
	/* Our QP, read through admin_raw: in RTS. */
	cmd_init(&cmd, MPR_CMD_QUERY_QP);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(qattr);
	cmd.u.qpn.qpn = c.qp->qp_num;
	expect_cmd("query_own_qp_ok", &cmd, NULL, 0, &qattr, sizeof(qattr), MPR_CMD_OK, 0);
	bi_check(qattr.qp_state == MPR_QPS_RTS, "query_own_qp_rts", "state %u", qattr.qp_state);
	/* Bad modifications of our live QP: nothing may change. */
	cmd_init(&cmd, MPR_CMD_MODIFY_QP);
	cmd.u.modify_qp.qpn = c.qp->qp_num;
	cmd.u.modify_qp.attr.attr_mask = MPR_QP_ATTR_STATE;
	cmd.u.modify_qp.attr.qp_state = 7;
	expect_cmd("modify_qp_state_7_bad_param", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_QP_ATTR_STATE);
	cmd.u.modify_qp.attr.qp_state = MPR_QPS_INIT;
	expect_cmd("modify_qp_rts_to_init_bad_state", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_STATE,
		   MPR_QP_ATTR_STATE);
	cmd.u.modify_qp.attr.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_CUR_STATE;
	cmd.u.modify_qp.attr.qp_state = MPR_QPS_RTS;
	cmd.u.modify_qp.attr.cur_state = MPR_QPS_RESET;
	expect_cmd("modify_qp_wrong_cur_state", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_STATE,
		   MPR_QP_ATTR_CUR_STATE);
	cmd.u.modify_qp.attr.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_PATH_MTU;
	cmd.u.modify_qp.attr.path_mtu = MPR_MTU_256;
	expect_cmd("modify_qp_rts_path_mtu_not_allowed", &cmd, NULL, 0, NULL, 0,
		   MPR_CMD_BAD_ATTR, MPR_QP_ATTR_PATH_MTU);
	cmd.u.modify_qp.attr.attr_mask = 0;
	cmd.u.modify_qp.attr.qkey = 1; /* reserved on RC QPs */
	expect_cmd("modify_qp_reserved_nonzero", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_RESERVED);
	expect_qp_state("own_qp_still_rts", c.qp, IBV_QPS_RTS);
	ibv_destroy_qp(c.qp);

	/* MAP_ICM that must change nothing: the driver's ICM stays mapped (the
	 * NIC keeps working, which the rest of this run shows).
	 */
	mtt = 0x200000;
	cmd_init(&cmd, MPR_CMD_MAP_ICM);
	cmd.hdr.in_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.in_len = 8;
	cmd.u.map_icm.num_chunks = 1;
	cmd.u.map_icm.log_chunk = 11;
	expect_cmd("map_icm_chunk_too_small", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_PAGE_SHIFT);
	cmd.u.map_icm.log_chunk = 12;
	cmd.u.map_icm.first_page = 0xffffffffu;
	expect_cmd("map_icm_beyond_icm", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_INDEX);
	cmd.u.map_icm.first_page = 0;
	cmd.u.map_icm.log_chunk = 22;
	expect_cmd("map_icm_unaligned_chunk", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ADDRESS);

	/* Fields out of range, one per command. */
	cmd_init(&cmd, MPR_CMD_QUERY_COUNTERS);
	expect_cmd("query_counters_no_mailbox", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	expect_cmd("query_device_no_mailbox", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = 16;
	expect_cmd("query_device_short_mailbox", &cmd, NULL, 0, &attr, 16, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	cmd_init(&cmd, MPR_CMD_QUERY_PORT);
	expect_cmd("query_port_no_mailbox", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	cmd_init(&cmd, MPR_CMD_SET_GID);
	cmd.u.set_gid.index = 99;
	expect_cmd("set_gid_index_99", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_INDEX);
	cmd.u.set_gid.index = 15;
	cmd.u.set_gid.rsvd = 1;
	expect_cmd("set_gid_reserved_nonzero", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_RESERVED);

	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.qp_type = 8; /* IBV_QPT_RAW_PACKET: not offered (UC is, since CAPS.UC) */
	expect_cmd("create_qp_raw_packet_type", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_QP_TYPE);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.flags = 0x80; /* no such flag */
	expect_cmd("create_qp_reserved_nonzero", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_RESERVED);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.transport = 2;
	expect_cmd("create_qp_mp_rdma_transport", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_TRANSPORT);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.sq_log_size = 40;
	expect_cmd("create_qp_log_size_40", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LOG_SIZE);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.sq_log_stride = 5;
	expect_cmd("create_qp_stride_32", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_STRIDE);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.sq_base = ram + 0x41;
	expect_cmd("create_qp_unaligned_ring", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ADDRESS);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.uar_index = 0xffff;
	expect_cmd("create_qp_uar_out_of_range", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_UAR);
	valid_create_qp(&cmd, ram);
	cmd.u.create_qp.max_inline = 100000;
	expect_cmd("create_qp_max_inline_too_big", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);

	cmd_init(&cmd, MPR_CMD_CREATE_EQ);
	cmd.u.create_eq.base = ram;
	expect_cmd("create_eq_log_size_0", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LOG_SIZE);
	cmd.u.create_eq.log_size = 1;
	cmd.u.create_eq.base = 0;
	expect_cmd("create_eq_base_0", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ADDRESS);
	cmd.u.create_eq.base = ram;
	cmd.u.create_eq.vector = 40;
	expect_cmd("create_eq_vector_40", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_VECTOR);

	cmd_init(&cmd, MPR_CMD_CREATE_CQ);
	cmd.u.create_cq.base = ram;
	cmd.u.create_cq.log_size = 25;
	expect_cmd("create_cq_log_size_25", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LOG_SIZE);
	cmd.u.create_cq.log_size = 1;
	cmd.u.create_cq.dbrec = 2;
	expect_cmd("create_cq_unaligned_dbrec", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ADDRESS);
	cmd.u.create_cq.dbrec = 0;
	cmd.u.create_cq.uar_index = 5000;
	expect_cmd("create_cq_uar_out_of_range", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_UAR);

	/* The page list names a page outside RAM, which the NIC would refuse
	 * too, but with SYN_ADDRESS: each check below must refuse the command
	 * before the page list is read, with its own syndrome (and no MR ever
	 * covers RAM that is not ours).
	 */
	mtt = beyond;
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.access = 0x10;
	expect_cmd("reg_mr_unknown_access", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ACCESS);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.access = MPR_ACCESS_REMOTE_WRITE;
	expect_cmd("reg_mr_remote_write_without_local", &cmd, &mtt, 8, NULL, 0,
		   MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.page_shift = 11;
	expect_cmd("reg_mr_page_shift_11", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_PAGE_SHIFT);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.length = 0;
	expect_cmd("reg_mr_length_0", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.iova = ~0ull - 100;
	expect_cmd("reg_mr_wrapping_range", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	valid_reg_mr(&cmd);
	cmd.u.reg_mr.num_pages = 3;
	expect_cmd("reg_mr_wrong_page_count", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	valid_reg_mr(&cmd);
	cmd.hdr.in_mailbox = 0;
	expect_cmd("reg_mr_no_mailbox", &cmd, NULL, 0, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_LENGTH);
	/* 2^40 bytes in 4 KiB pages: 2^28 page addresses (2 GiB of page list)
	 * that the NIC must refuse before reading them.
	 */
	valid_reg_mr(&cmd);
	cmd.hdr.in_mailbox = beyond;
	cmd.hdr.in_len = 0x80000000u;
	cmd.u.reg_mr.length = 1ull << 40;
	cmd.u.reg_mr.num_pages = 1u << 28;
	expect_cmd("reg_mr_2g_page_list_no_resources", &cmd, NULL, 0, NULL, 0,
		   MPR_CMD_NO_RESOURCES, -1);
	/* A page in RAM, one byte off its boundary: the alignment alone
	 * refuses it.
	 */
	mtt = ram + 1;
	valid_reg_mr(&cmd);
	expect_cmd("reg_mr_unaligned_page", &cmd, &mtt, 8, NULL, 0, MPR_CMD_BAD_PARAM,
		   MPR_CMD_SYN_ADDRESS);

	/* Every EQ the NIC has, then one more: NO_RESOURCES. The driver holds
	 * EQ 0; ours share one ring on a page of RAM that is not ours (the NIC
	 * refuses rings outside RAM), which the NIC never writes: no CQ uses
	 * these EQs, so they never get an event, and they go again at once.
	 */
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(attr);
	expect_cmd("query_device_max_eq", &cmd, NULL, 0, &attr, sizeof(attr), MPR_CMD_OK, 0);
	if (attr.max_eq >= 2 && attr.max_eq <= 64) {
		uint32_t eqns[64];
		uint32_t neq;

		for (neq = 0; neq < attr.max_eq - 1; neq++) {
			cmd_init(&cmd, MPR_CMD_CREATE_EQ);
			cmd.u.create_eq.base = ram;
			cmd.u.create_eq.log_size = 1;
			cmd.u.create_eq.vector = 31;
			comp = expect_cmd("create_eq_until_full", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
			eqns[neq] = comp.out[0];
		}
		expect_cmd("create_eq_beyond_max_eq_no_resources", &cmd, NULL, 0, NULL, 0,
			   MPR_CMD_NO_RESOURCES, -1);
		while (neq--)
			destroy_raw("destroy_eq_after_full", MPR_CMD_DESTROY_EQ, eqns[neq]);
	} else {
		bi_fail("create_eq_beyond_max_eq_no_resources", "max_eq %u", attr.max_eq);
	}

	/* Verbs with absurd sizes: ib_core refuses what is beyond the
	 * device's limits (EINVAL); within them, rings larger than one
	 * contiguous allocation (4 MiB) fail with ENOMEM, quietly: the kernel
	 * log check at the end catches allocation warnings.
	 */
	{
		struct ibv_device_attr da;
		struct ibv_qp_init_attr qa = {
			.send_cq = dev.cq,
			.recv_cq = dev.cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_recv_wr = 1, .max_recv_sge = 1 },
		};
		struct ibv_cq *cq;
		struct ibv_qp *qp;

		if (ibv_query_device(dev.ctx, &da))
			bi_die("query_device", "%s", strerror(errno));
		cq = ibv_create_cq(dev.ctx, da.max_cqe + 1, NULL, NULL, 0);
		bi_check(!cq && errno == EINVAL, "create_cq_beyond_max_cqe_einval", "%s",
			 cq ? "created" : strerror(errno));
		cq = ibv_create_cq(dev.ctx, da.max_cqe, NULL, NULL, 0);
		bi_check(!cq && errno == ENOMEM, "create_cq_128mib_ring_enomem", "%s",
			 cq ? "created" : strerror(errno));
		qa.cap.max_send_wr = da.max_qp_wr + 1;
		qp = ibv_create_qp(dev.pd, &qa);
		bi_check(!qp && errno == EINVAL, "create_qp_beyond_max_qp_wr_einval", "%s",
			 qp ? "created" : strerror(errno));
		qa.cap.max_send_wr = da.max_qp_wr;
		qa.cap.max_send_sge = da.max_sge;
		qp = ibv_create_qp(dev.pd, &qa);
		bi_check(!qp && errno == ENOMEM, "create_qp_8mib_ring_enomem", "%s",
			 qp ? "created" : strerror(errno));
		if (cq)
			ibv_destroy_cq(cq);
		if (qp)
			ibv_destroy_qp(qp);
	}

	/* --- random bytes ----------------------------------------------- */
	garbage(100, false);
	garbage(400, true);

	/* --- everything still works -------------------------------------- */
	cmd_init(&cmd, MPR_CMD_NOP);
	expect_cmd("nop_after_garbage", &cmd, NULL, 0, NULL, 0, MPR_CMD_OK, 0);
	cmd_init(&cmd, MPR_CMD_QUERY_DEVICE);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(attr);
	expect_cmd("query_device_after_garbage", &cmd, NULL, 0, &attr, sizeof(attr), MPR_CMD_OK,
		   0);
	bi_check(attr.fw_version == 0x00010000 && attr.max_qp > 0 && attr.max_gids > 0,
		 "query_device_output_sane", "fw %#x max_qp %u max_gids %u", attr.fw_version,
		 attr.max_qp, attr.max_gids);
	cmd_init(&cmd, MPR_CMD_QUERY_PORT);
	cmd.hdr.out_mailbox = BI_RAW_MAILBOX;
	cmd.hdr.out_len = sizeof(port);
	expect_cmd("query_port_after_garbage", &cmd, NULL, 0, &port, sizeof(port), MPR_CMD_OK, 0);
	bi_check(port.state == 4, "port_active_after_garbage", "state %u", port.state);
	{
		struct ibv_device_attr dattr;

		bi_check(ibv_query_device(dev.ctx, &dattr) == 0 && dattr.max_qp > 0,
			 "verbs_query_device_after_garbage", "%s", strerror(errno));
	}
	write_and_verify("nic_works_after_garbage", 0, 4096, 0xa5);
}

/* ---------------------------------------------------------------------- */
/* 5. Datagrams: address handles and UD sends                              */
/* ---------------------------------------------------------------------- */

static struct ibv_ah *make_ah(const union ibv_gid *dgid, int sgid_index, int global)
{
	struct ibv_ah_attr a = { .is_global = global, .port_num = 1 };

	a.grh.dgid = *dgid;
	a.grh.sgid_index = sgid_index;
	a.grh.hop_limit = 64;
	return ibv_create_ah(dev.pd, &a);
}

static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
		   uint64_t wr_id, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)dev.buf, .length = len, .lkey = dev.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

static bool is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

static void test_ud(void)
{
	struct ibv_qp *qp = bi_create_ud_qp(&dev);
	unsigned int status, len, src, byte, plen;
	union ibv_gid peer_gid;
	int refused = 0, wrong = 0, i;
	struct ibv_ah *ah;
	char hex[64];
	uint32_t sqpn;

	request("%s", "UDQP");
	if (sscanf(reply, "UDQP %" SCNu32 " %40s", &sqpn, hex) != 2 ||
	    bi_hex_to_gid(hex, &peer_gid))
		bi_die("ud_peer", "server answered '%s'", reply);

	/* The NIC sends datagrams as RoCEv2 over IPv4: an AH whose source
	 * GID is anything else (RoCEv1, IPv6 link-local) is refused, the
	 * RoCEv2 IPv4 one accepted, a GID index without an entry refused. */
	for (i = 0; i < 8; i++) {
		struct ibv_gid_entry e;
		bool usable;

		if (ibv_query_gid_ex(dev.ctx, 1, i, &e, 0))
			continue; /* no entry at this index */
		usable = e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
			 is_v4_mapped((const union ibv_gid *)&e.gid);
		errno = 0;
		ah = make_ah(&peer_gid, i, 1);
		if (!usable) {
			refused++;
			if (ah || errno != EINVAL)
				wrong++;
		} else if (!ah) {
			wrong++;
		}
		if (ah)
			ibv_destroy_ah(ah);
	}
	bi_check(refused > 0 && !wrong, "ud_ah_unusable_sgids_refused",
		 "%d GID(s) of another kind, %d answered wrongly", refused, wrong);
	errno = 0;
	ah = make_ah(&peer_gid, 200, 1);
	bi_check(!ah, "ud_ah_missing_sgid_refused", "created (errno %d)", errno);
	if (ah)
		ibv_destroy_ah(ah);
	errno = 0;
	ah = make_ah(&peer_gid, BI_GID_INDEX, 0);
	bi_check(!ah && errno == EINVAL, "ud_ah_without_grh_refused", "%p errno %d", (void *)ah,
		 errno);
	if (ah)
		ibv_destroy_ah(ah);
	ah = make_ah(&peer_gid, BI_GID_INDEX, 1);
	if (!ah)
		bi_die("ud_ah_created", "ibv_create_ah: %s", strerror(errno));
	bi_ok("ud_ah_created");

	/* No AH: refused at post, nothing reaches the NIC. */
	bi_check(ud_send(qp, NULL, sqpn, BI_QKEY, 9, 64) == EINVAL, "ud_send_without_ah_einval",
		 "posted");
	/* Datagrams the peer must drop: to a QP it does not have, and with
	 * the wrong Q_Key. Both complete here: nothing acknowledges a UD
	 * SEND. */
	memset(dev.buf, 0x55, 1100);
	if (!ud_send(qp, ah, sqpn + 0x100, BI_QKEY, 10, 64))
		expect_wc("ud_send_to_unknown_qp_completes", 10, IBV_WC_SUCCESS, -1);
	else
		bi_fail("ud_send_to_unknown_qp_completes", "post: %s", strerror(errno));
	if (!ud_send(qp, ah, sqpn, BI_QKEY ^ 1, 11, 64))
		expect_wc("ud_send_wrong_qkey_completes", 11, IBV_WC_SUCCESS, -1);
	else
		bi_fail("ud_send_wrong_qkey_completes", "post: %s", strerror(errno));
	/* Then a good one: the only datagram the server receives. */
	memset(dev.buf, 0x77, 512);
	if (!ud_send(qp, ah, sqpn, BI_QKEY, 12, 512))
		expect_wc("ud_good_send_completes", 12, IBV_WC_SUCCESS, -1);
	else
		bi_fail("ud_good_send_completes", "post: %s", strerror(errno));
	request("%s", "UDWAIT");
	bi_check(sscanf(reply, "UDWC %u %u %u %u %u", &status, &len, &src, &byte, &plen) == 5 &&
		 status == IBV_WC_SUCCESS && len == 40 + 512 && src == qp->qp_num &&
		 byte == 0x77 && plen == 512,
		 "ud_server_gets_the_good_datagram", "server answered '%s'", reply);
	request("%s", "UDNONE");
	bi_check(!strcmp(reply, "NONE"), "ud_bad_datagrams_dropped", "server answered '%s'",
		 reply);
	/* A datagram longer than the MTU: an error completion; the QP goes
	 * to ERR as after any failed WQE. */
	if (!ud_send(qp, ah, sqpn, BI_QKEY, 13, 1025))
		expect_wc("ud_send_beyond_mtu_loc_len_err", 13, IBV_WC_LOC_LEN_ERR,
			  MPR_SYN_MSG_TOO_LONG);
	else
		bi_fail("ud_send_beyond_mtu_loc_len_err", "post: %s", strerror(errno));
	expect_qp_state("ud_qp_in_err_after_oversize", qp, IBV_QPS_ERR);
	bi_check(!ibv_destroy_ah(ah), "ud_ah_destroyed", "%s", strerror(errno));
	bi_check(!ibv_destroy_qp(qp), "ud_qp_destroyed", "%s", strerror(errno));
	write_and_verify("nic_works_after_bad_datagrams", 0, 4096, 0x3c);
}

int main(int argc, char **argv)
{
	const char *test = argc > 1 ? argv[1] : "";
	bool raw = !strcmp(test, "dma") || !strcmp(test, "admin");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3 || (strcmp(test, "lkey") && strcmp(test, "dma") &&
			  strcmp(test, "doorbell") && strcmp(test, "admin") &&
			  strcmp(test, "ud"))) {
		fprintf(stderr, "usage: %s lkey|dma|doorbell|admin|ud SERVER_IP\n", argv[0]);
		return 2;
	}
	bi_open(&dev, raw);
	srv = bi_tcp_connect(argv[2], BI_PORT);
	if (!strcmp(test, "lkey"))
		test_lkey();
	else if (!strcmp(test, "dma"))
		test_dma();
	else if (!strcmp(test, "doorbell"))
		test_doorbell();
	else if (!strcmp(test, "ud"))
		test_ud();
	else
		test_admin();
	finish();
	bi_close(&dev);
	return bi_done();
}
