#include "vp/nic/firmware/firmware.h"

#include <mprdma/regs_util.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "vp/nic/context_memory.h"

namespace mprdma::nic {

namespace {

constexpr uint32_t kFwVersion = 0x00010000;
// REG_MR reads its page list this many entries (64 KiB) at a time.
constexpr uint64_t kPageListChunk = 8192;

void fail(mpr_cmd_comp& c, uint8_t status, uint32_t syndrome = MPR_CMD_SYN_NONE) {
  c.status = status;
  c.syndrome = syndrome;
}

int log2_floor(uint64_t v) {
  int r = -1;
  while (v) {
    v >>= 1;
    ++r;
  }
  return r;
}

bool all_zero(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

// RoCEv2 GIDs of this NIC are IPv4-mapped IPv6 addresses.
bool is_ipv4_mapped(const uint8_t gid[16]) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kPrefix, sizeof kPrefix) == 0;
}

}  // namespace

QpTransitionRule qp_transition_rule(uint8_t from, uint8_t to) {
  constexpr uint32_t S = MPR_QP_ATTR_STATE;
  if (to == MPR_QPS_RESET || to == MPR_QPS_ERR) return {from <= MPR_QPS_ERR, S, 0};
  switch (from) {
    case MPR_QPS_RESET:
      if (to == MPR_QPS_INIT)
        return {true, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS, 0};
      break;
    case MPR_QPS_INIT:
      if (to == MPR_QPS_INIT)
        return {true, 0, MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS};
      if (to == MPR_QPS_RTR)
        return {true,
                S | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                    MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_MAX_DEST_RD_ATOMIC | MPR_QP_ATTR_MIN_RNR_TIMER,
                MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_PKEY_INDEX};
      break;
    case MPR_QPS_RTR:
      if (to == MPR_QPS_RTS)
        return {true,
                S | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_TIMEOUT | MPR_QP_ATTR_RETRY_CNT |
                    MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_MAX_QP_RD_ATOMIC,
                MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_MIN_RNR_TIMER};
      break;
    case MPR_QPS_RTS:
      if (to == MPR_QPS_RTS)
        return {true, 0,
                MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_MIN_RNR_TIMER};
      break;
    default:
      break;
  }
  return {};
}

QpTransitionRule qp_transition_rule_ud(uint8_t from, uint8_t to) {
  constexpr uint32_t S = MPR_QP_ATTR_STATE;
  constexpr uint32_t Q = MPR_QP_ATTR_QKEY;
  if (to == MPR_QPS_RESET || to == MPR_QPS_ERR) return {from <= MPR_QPS_ERR, S, 0};
  switch (from) {
    case MPR_QPS_RESET:
      if (to == MPR_QPS_INIT) return {true, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | Q, 0};
      break;
    case MPR_QPS_INIT:
      if (to == MPR_QPS_INIT) return {true, 0, MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | Q};
      if (to == MPR_QPS_RTR) return {true, S, MPR_QP_ATTR_PKEY_INDEX | Q};
      break;
    case MPR_QPS_RTR:
      if (to == MPR_QPS_RTS) return {true, S | MPR_QP_ATTR_SQ_PSN, MPR_QP_ATTR_CUR_STATE | Q};
      break;
    case MPR_QPS_RTS:
      if (to == MPR_QPS_RTS) return {true, 0, MPR_QP_ATTR_CUR_STATE | Q};
      break;
    default:
      break;
  }
  return {};
}

QpTransitionRule qp_transition_rule_uc(uint8_t from, uint8_t to) {
  // Linux's ib_modify_qp_is_ok table, UC column: the RC attributes less
  // those of acknowledgements (timeout, retry_cnt, rnr_retry, min_rnr_timer)
  // and of READ/atomics (max_rd_atomic, max_dest_rd_atomic). UC has no use
  // for them, and like Linux we refuse them (BAD_ATTR) rather than ignore
  // them: a caller passing them believes it configures something that does
  // not exist on this QP type.
  constexpr uint32_t S = MPR_QP_ATTR_STATE;
  if (to == MPR_QPS_RESET || to == MPR_QPS_ERR) return {from <= MPR_QPS_ERR, S, 0};
  switch (from) {
    case MPR_QPS_RESET:
      if (to == MPR_QPS_INIT)
        return {true, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS, 0};
      break;
    case MPR_QPS_INIT:
      if (to == MPR_QPS_INIT)
        return {true, 0, MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS};
      if (to == MPR_QPS_RTR)
        return {
            true,
            S | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN | MPR_QP_ATTR_RQ_PSN,
            MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_PKEY_INDEX};
      break;
    case MPR_QPS_RTR:
      if (to == MPR_QPS_RTS)
        return {true, S | MPR_QP_ATTR_SQ_PSN, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS};
      break;
    case MPR_QPS_RTS:
      if (to == MPR_QPS_RTS) return {true, 0, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS};
      break;
    default:
      break;
  }
  return {};
}

const char* Firmware::opcode_name(uint16_t opcode) {
  switch (opcode) {
    case MPR_CMD_NOP:
      return "NOP";
    case MPR_CMD_QUERY_DEVICE:
      return "QUERY_DEVICE";
    case MPR_CMD_QUERY_PORT:
      return "QUERY_PORT";
    case MPR_CMD_QUERY_COUNTERS:
      return "QUERY_COUNTERS";
    case MPR_CMD_SET_GID:
      return "SET_GID";
    case MPR_CMD_MAP_ICM:
      return "MAP_ICM";
    case MPR_CMD_ALLOC_PD:
      return "ALLOC_PD";
    case MPR_CMD_DEALLOC_PD:
      return "DEALLOC_PD";
    case MPR_CMD_REG_MR:
      return "REG_MR";
    case MPR_CMD_DEREG_MR:
      return "DEREG_MR";
    case MPR_CMD_CREATE_EQ:
      return "CREATE_EQ";
    case MPR_CMD_DESTROY_EQ:
      return "DESTROY_EQ";
    case MPR_CMD_CREATE_CQ:
      return "CREATE_CQ";
    case MPR_CMD_DESTROY_CQ:
      return "DESTROY_CQ";
    case MPR_CMD_CREATE_QP:
      return "CREATE_QP";
    case MPR_CMD_MODIFY_QP:
      return "MODIFY_QP";
    case MPR_CMD_QUERY_QP:
      return "QUERY_QP";
    case MPR_CMD_DESTROY_QP:
      return "DESTROY_QP";
    case MPR_CMD_CREATE_SRQ:
      return "CREATE_SRQ";
    case MPR_CMD_MODIFY_SRQ:
      return "MODIFY_SRQ";
    case MPR_CMD_QUERY_SRQ:
      return "QUERY_SRQ";
    case MPR_CMD_DESTROY_SRQ:
      return "DESTROY_SRQ";
  }
  return "UNKNOWN";
}

const char* Firmware::status_name(uint8_t status) {
  switch (status) {
    case MPR_CMD_OK:
      return "OK";
    case MPR_CMD_BAD_OPCODE:
      return "BAD_OPCODE";
    case MPR_CMD_BAD_PARAM:
      return "BAD_PARAM";
    case MPR_CMD_BAD_HANDLE:
      return "BAD_HANDLE";
    case MPR_CMD_NO_RESOURCES:
      return "NO_RESOURCES";
    case MPR_CMD_BAD_STATE:
      return "BAD_STATE";
    case MPR_CMD_BAD_ATTR:
      return "BAD_ATTR";
    case MPR_CMD_BUSY:
      return "BUSY";
    case MPR_CMD_DMA_ERROR:
      return "DMA_ERROR";
    case MPR_CMD_INTERNAL:
      return "INTERNAL";
    case MPR_CMD_NO_ICM:
      return "NO_ICM";
  }
  return "UNKNOWN";
}

void Firmware::run() {
  mpr_cmd cmd;
  while (hal_.next_command(cmd)) hal_.complete_command(execute(cmd));
}

mpr_cmd_comp Firmware::execute(const mpr_cmd& cmd) {
  mpr_cmd_comp c{};
  c.cmd_id = cmd.hdr.cmd_id;
  c.status = MPR_CMD_OK;
  if (cmd.hdr.rsvd0 != 0) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
    return c;
  }
  switch (cmd.hdr.opcode) {
    case MPR_CMD_NOP:
      break;
    case MPR_CMD_QUERY_DEVICE:
      query_device(cmd, c);
      break;
    case MPR_CMD_QUERY_PORT:
      query_port(cmd, c);
      break;
    case MPR_CMD_QUERY_COUNTERS: {
      const mpr_port_counters n = hal_.counters();
      write_output(cmd, c, &n, sizeof n);
      break;
    }
    case MPR_CMD_SET_GID:
      set_gid(cmd, c);
      break;
    case MPR_CMD_MAP_ICM:
      map_icm(cmd, c);
      break;
    case MPR_CMD_ALLOC_PD:
      alloc_pd(cmd, c);
      break;
    case MPR_CMD_DEALLOC_PD:
      dealloc_pd(cmd, c);
      break;
    case MPR_CMD_REG_MR:
      reg_mr(cmd, c);
      break;
    case MPR_CMD_DEREG_MR:
      dereg_mr(cmd, c);
      break;
    case MPR_CMD_CREATE_EQ:
      create_eq(cmd, c);
      break;
    case MPR_CMD_DESTROY_EQ:
      destroy_eq(cmd, c);
      break;
    case MPR_CMD_CREATE_CQ:
      create_cq(cmd, c);
      break;
    case MPR_CMD_DESTROY_CQ:
      destroy_cq(cmd, c);
      break;
    case MPR_CMD_CREATE_QP:
      create_qp(cmd, c);
      break;
    case MPR_CMD_MODIFY_QP:
      modify_qp(cmd, c);
      break;
    case MPR_CMD_QUERY_QP:
      query_qp(cmd, c);
      break;
    case MPR_CMD_DESTROY_QP:
      destroy_qp(cmd, c);
      break;
    case MPR_CMD_CREATE_SRQ:
      create_srq(cmd, c);
      break;
    case MPR_CMD_MODIFY_SRQ:
      modify_srq(cmd, c);
      break;
    case MPR_CMD_QUERY_SRQ:
      query_srq(cmd, c);
      break;
    case MPR_CMD_DESTROY_SRQ:
      destroy_srq(cmd, c);
      break;
    default:
      fail(c, MPR_CMD_BAD_OPCODE);
      break;
  }
  return c;
}

bool Firmware::write_output(const mpr_cmd& cmd, Comp& c, const void* data, size_t len) {
  if (cmd.hdr.out_mailbox == 0 || cmd.hdr.out_len < len) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
    return false;
  }
  if (!hal_.dma_write(cmd.hdr.out_mailbox, data, len)) {
    fail(c, MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);
    return false;
  }
  return true;
}

void Firmware::query_device(const mpr_cmd& cmd, Comp& c) {
  const NicLimits& l = hal_.contexts().limits();
  mpr_device_attr a{};
  a.fw_version = kFwVersion;
  a.max_qp = static_cast<uint32_t>(l.max_qp);
  a.max_qp_wr = static_cast<uint32_t>(l.max_qp_wr);
  a.max_sge = static_cast<uint32_t>(l.max_sge);
  a.max_cq = static_cast<uint32_t>(l.max_cq);
  a.max_cqe = static_cast<uint32_t>(l.max_cqe);
  a.max_mr = static_cast<uint32_t>(l.max_mr);
  a.max_pd = static_cast<uint32_t>(l.max_pd);
  a.max_srq = static_cast<uint32_t>(l.max_srq);
  a.max_srq_wr = static_cast<uint32_t>(std::min<int64_t>(l.max_qp_wr, 1 << 16));
  a.max_srq_sge = static_cast<uint32_t>(std::min<int64_t>(
      l.max_sge,
      ((1u << MPR_SRQ_LOG_STRIDE_MAX) - sizeof(mpr_wqe_srq_next)) / sizeof(mpr_wqe_data)));
  a.max_mr_size = uint64_t{1} << 40;
  a.page_size_cap = ((uint64_t{1} << 31) - 1) & ~uint64_t{0xfff};  // 4 KiB .. 1 GiB
  a.max_qp_rd_atom = static_cast<uint32_t>(l.max_rd_atomic);
  a.max_inline = static_cast<uint32_t>(l.max_inline);
  a.max_eq = static_cast<uint32_t>(l.max_eq);
  a.num_uar_pages = static_cast<uint32_t>(l.num_uar_pages);
  a.max_gids = static_cast<uint32_t>(l.max_gids);
  a.max_msg_size = MPR_MAX_MSG_SIZE;
  a.icm_pages = hal_.contexts().icm().pages();
  // As the CAPS register reads, with the engines this NIC offers.
  a.cap_flags = fixed_caps() | hal_.transports().caps();
  // The fields the caller knows: interface 1.0's layout at least.
  const size_t len = std::min<size_t>(cmd.hdr.out_len, sizeof a);
  if (len < MPR_DEVICE_ATTR_V1_SIZE) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  write_output(cmd, c, &a, len);
}

void Firmware::query_port(const mpr_cmd& cmd, Comp& c) {
  PortInfo p = hal_.port();
  mpr_port_attr a{};
  a.state = p.link_up ? MPR_PORT_ACTIVE : MPR_PORT_DOWN;
  a.max_mtu = p.max_mtu;
  a.active_mtu = p.max_mtu;
  a.speed_mbps = p.speed_mbps;
  std::memcpy(a.mac, p.mac.data(), 6);
  write_output(cmd, c, &a, sizeof a);
}

void Firmware::set_gid(const mpr_cmd& cmd, Comp& c) {
  const mpr_cmd_set_gid& in = cmd.u.set_gid;
  if (in.rsvd) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
  // Any GID may be stored (the host's GID table mirrors its netdev's
  // addresses); only IPv4-mapped ones can source RoCEv2 packets, which
  // MODIFY_QP checks. An all-zero GID clears the entry.
  const bool ok = all_zero(in.gid, sizeof in.gid) ? hal_.contexts().clear_gid(in.index)
                                                  : hal_.contexts().set_gid(in.index, in.gid);
  if (!ok) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX);
}

void Firmware::map_icm(const mpr_cmd& cmd, Comp& c) {
  Icm& icm = hal_.contexts().icm();
  const mpr_cmd_map_icm& in = cmd.u.map_icm;
  if (in.rsvd) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
  if (in.log_chunk < MPR_ICM_PAGE_SHIFT || in.log_chunk > MPR_ICM_LOG_CHUNK_MAX)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT);
  if (in.num_chunks == 0 || in.num_chunks > MPR_ICM_MAP_MAX)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  const uint64_t chunk_pages = uint64_t{1} << (in.log_chunk - MPR_ICM_PAGE_SHIFT);
  // Every chunk must start inside ICM (the last may reach past its end).
  if (in.first_page % chunk_pages != 0 || in.first_page >= icm.pages() ||
      (in.num_chunks - 1) * chunk_pages >= icm.pages() - in.first_page)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX);
  if (cmd.hdr.in_mailbox == 0 || cmd.hdr.in_len != in.num_chunks * 8u)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  std::vector<uint64_t> list(in.num_chunks);
  if (!hal_.dma_read(cmd.hdr.in_mailbox, list.data(), list.size() * 8))
    return fail(c, MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);
  // Every address is checked before any is mapped: a bad list changes nothing.
  const uint64_t chunk_bytes = chunk_pages * Icm::kPageBytes;
  for (uint64_t pa : list)
    if (pa == 0 || (pa & (chunk_bytes - 1)) || !hal_.host_memory(pa, chunk_bytes))
      return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  for (uint64_t i = 0; i < list.size(); ++i)
    for (uint64_t p = 0; p < chunk_pages; ++p) {
      const uint64_t page = in.first_page + i * chunk_pages + p;
      if (page >= icm.pages()) break;
      icm.map(static_cast<uint32_t>(page), list[i] + p * Icm::kPageBytes);
    }
}

void Firmware::alloc_pd(const mpr_cmd&, Comp& c) {
  int64_t pdn = hal_.contexts().alloc_pd();
  if (pdn < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  c.out[0] = static_cast<uint32_t>(pdn);
}

void Firmware::dealloc_pd(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  uint32_t pdn = cmd.u.pd.pdn;
  if (!ctx.pd_valid(pdn)) return fail(c, MPR_CMD_BAD_HANDLE);
  if (ctx.pd_refs(pdn)) return fail(c, MPR_CMD_BUSY);
  ctx.free_pd(pdn);
}

void Firmware::reg_mr(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const mpr_cmd_reg_mr& in = cmd.u.reg_mr;
  if (!ctx.pd_valid(in.pdn)) return fail(c, MPR_CMD_BAD_HANDLE);
  if (in.access & ~MPR_ACCESS_ALL) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS);
  // IB: remote write and remote atomic need local write.
  if ((in.access & (MPR_ACCESS_REMOTE_WRITE | MPR_ACCESS_REMOTE_ATOMIC)) &&
      !(in.access & MPR_ACCESS_LOCAL_WRITE))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS);
  if (in.page_shift < 12 || in.page_shift > 30)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT);
  if (in.length == 0 || in.length > (uint64_t{1} << 40) || in.iova + in.length < in.iova)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  const uint64_t page = uint64_t{1} << in.page_shift;
  const uint64_t first = in.iova & ~(page - 1);
  const uint64_t pages = (in.iova + in.length - first + page - 1) >> in.page_shift;
  if (pages != in.num_pages) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  if (cmd.hdr.in_mailbox == 0 || cmd.hdr.in_len != pages * 8)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  // More pages than the whole MTT can never fit: refuse before reading a
  // page list that can reach 2^28 entries (2 GiB).
  if (pages > static_cast<uint64_t>(ctx.limits().max_mtt)) return fail(c, MPR_CMD_NO_RESOURCES);

  int64_t base = ctx.alloc_mtt(static_cast<uint32_t>(pages));
  if (base < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  int64_t key = ctx.alloc_mr();
  auto undo = [&] {
    if (key >= 0) ctx.free_mr(static_cast<uint32_t>(key));
    ctx.free_mtt(static_cast<uint32_t>(base), static_cast<uint32_t>(pages));
  };
  if (key < 0) {
    undo();
    return fail(c, MPR_CMD_NO_RESOURCES);
  }
  if (!ctx.icm().mapped(IcmTable::mpt, ctx.mr_index(static_cast<uint32_t>(key)), 1) ||
      !ctx.icm().mapped(IcmTable::mtt, static_cast<uint64_t>(base), pages)) {
    undo();
    return fail(c, MPR_CMD_NO_ICM);
  }
  // The page list is read a piece at a time straight into the MTT, so the
  // firmware never holds more than kPageListChunk entries of it; every page
  // must be host memory the NIC may use (not a hole, not the MSI window:
  // else a peer's WRITE would be dropped after its ACK, or raise MSIs).
  std::vector<uint64_t> chunk(std::min<uint64_t>(pages, kPageListChunk));
  for (uint64_t done = 0; done < pages;) {
    const uint64_t n = std::min<uint64_t>(pages - done, kPageListChunk);
    if (!hal_.dma_read(cmd.hdr.in_mailbox + done * 8, chunk.data(), n * 8)) {
      undo();
      return fail(c, MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);
    }
    for (uint64_t i = 0; i < n; ++i) {
      if ((chunk[i] & (page - 1)) || !hal_.host_memory(chunk[i], page)) {
        undo();
        return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
      }
      ctx.set_mtt(static_cast<uint32_t>(base + done + i), chunk[i]);
    }
    done += n;
  }
  mpr_mpt* m = ctx.mr(static_cast<uint32_t>(key));
  m->iova = in.iova;
  m->length = in.length;
  m->pdn = in.pdn;
  m->access = in.access;
  m->mtt_base = static_cast<uint32_t>(base);
  m->num_pages = static_cast<uint32_t>(pages);
  m->page_shift = static_cast<uint8_t>(in.page_shift);
  ctx.pd_ref(in.pdn, +1);
  c.out[0] = static_cast<uint32_t>(key);
}

void Firmware::dereg_mr(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  mpr_mpt* m = ctx.mr(cmd.u.dereg_mr.key);
  if (!m) return fail(c, MPR_CMD_BAD_HANDLE);
  ctx.free_mtt(m->mtt_base, m->num_pages);
  ctx.pd_ref(m->pdn, -1);
  ctx.free_mr(cmd.u.dereg_mr.key);
}

void Firmware::create_eq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const mpr_cmd_create_eq& in = cmd.u.create_eq;
  if (in.log_size < 1 || in.log_size > 16) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE);
  if (in.base == 0 || (in.base & 63) ||
      !hal_.host_memory(in.base, (uint64_t{1} << in.log_size) * sizeof(mpr_eqe)))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  if (in.vector >= 32) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_VECTOR);
  int64_t eqn = ctx.alloc_eq();
  if (eqn < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  mpr_eqc* e = ctx.eq(static_cast<uint32_t>(eqn));
  e->base = in.base;
  e->log_size = static_cast<uint8_t>(in.log_size);
  e->vector = in.vector;
  c.out[0] = static_cast<uint32_t>(eqn);
}

void Firmware::destroy_eq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  mpr_eqc* e = ctx.eq(cmd.u.handle.handle);
  if (!e) return fail(c, MPR_CMD_BAD_HANDLE);
  if (e->num_cqs) return fail(c, MPR_CMD_BUSY);
  ctx.free_eq(cmd.u.handle.handle);
}

void Firmware::create_cq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const NicLimits& l = ctx.limits();
  const mpr_cmd_create_cq& in = cmd.u.create_cq;
  // log_size is bounded before it is used as a shift count.
  if (in.log_size < 1 || in.log_size > 24 ||
      (uint64_t{1} << in.log_size) > static_cast<uint64_t>(l.max_cqe))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE);
  if (in.base == 0 || (in.base & 63) || (in.dbrec & 3))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  if (in.uar_index >= static_cast<uint64_t>(l.num_uar_pages))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR);
  // CQE slots of 32 (0 = 32), 64 or 128 bytes; inline receive needs room
  // in the slot before the 32-byte CQE.
  const uint8_t log_cqe = in.log_cqe_size ? in.log_cqe_size : MPR_CQ_LOG_CQE_SIZE_MIN;
  if (log_cqe < MPR_CQ_LOG_CQE_SIZE_MIN || log_cqe > MPR_CQ_LOG_CQE_SIZE_MAX ||
      ((in.flags & MPR_CQ_F_INLINE_RECV) && log_cqe == MPR_CQ_LOG_CQE_SIZE_MIN))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_STRIDE);
  if ((in.flags & ~MPR_CQ_F_INLINE_RECV) || in.rsvd)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
  if (!hal_.host_memory(in.base, uint64_t{1} << (in.log_size + log_cqe)) ||
      (in.dbrec && !hal_.host_memory(in.dbrec, 4)))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  mpr_eqc* e = ctx.eq(in.eqn);
  if (!e) return fail(c, MPR_CMD_BAD_HANDLE);
  int64_t cqn = ctx.alloc_cq();
  if (cqn < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  if (!ctx.icm().mapped(IcmTable::cqc, static_cast<uint64_t>(cqn), 1)) {
    ctx.free_cq(static_cast<uint32_t>(cqn));
    return fail(c, MPR_CMD_NO_ICM);
  }
  mpr_cqc* q = ctx.cq(static_cast<uint32_t>(cqn));
  q->base = in.base;
  q->dbrec = in.dbrec;
  q->eqn = in.eqn;
  q->uar_index = in.uar_index;
  q->log_size = static_cast<uint8_t>(in.log_size);
  q->log_cqe_size = log_cqe;
  q->flags = in.flags;
  ++e->num_cqs;
  c.out[0] = static_cast<uint32_t>(cqn);
}

void Firmware::destroy_cq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  mpr_cqc* q = ctx.cq(cmd.u.handle.handle);
  if (!q) return fail(c, MPR_CMD_BAD_HANDLE);
  if (q->num_qps) return fail(c, MPR_CMD_BUSY);
  if (mpr_eqc* e = ctx.eq(q->eqn)) --e->num_cqs;
  ctx.free_cq(cmd.u.handle.handle);
}

void Firmware::create_qp(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const NicLimits& l = ctx.limits();
  const mpr_cmd_create_qp& in = cmd.u.create_qp;
  const int max_log_wr = log2_floor(static_cast<uint64_t>(l.max_qp_wr));
  if (in.qp_type != MPR_QPT_RC && in.qp_type != MPR_QPT_UC && in.qp_type != MPR_QPT_UD &&
      in.qp_type != MPR_QPT_GSI)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_QP_TYPE);
  // The GSI QP is a UD QP that answers to QPN 1 on the wire: one per NIC.
  const bool gsi = in.qp_type == MPR_QPT_GSI;
  if (gsi && ctx.gsi_qpn()) return fail(c, MPR_CMD_BUSY, MPR_CMD_SYN_QP_TYPE);
  const bool ud = in.qp_type == MPR_QPT_UD || gsi;
  // UC, like UD, has no transport engine: nothing is acknowledged or
  // retransmitted.
  const bool no_engine = ud || in.qp_type == MPR_QPT_UC;
  if (in.flags & ~MPR_CREATE_QP_F_SRQ) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
  const bool use_srq = in.flags & MPR_CREATE_QP_F_SRQ;
  // The QP's engine: one the NIC offers; datagrams and UC have none
  // (go-back-N's slot, unused).
  const TransportOffer offer = hal_.transports();
  const uint8_t transport =
      in.transport == MPR_TRANSPORT_DEFAULT ? offer.default_kind : in.transport;
  if (transport >= 32 || !(offer.kinds >> transport & 1) ||
      (no_engine && in.transport != MPR_TRANSPORT_DEFAULT && in.transport != MPR_TRANSPORT_GBN))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT);
  if (in.sq_log_size < 1 || in.sq_log_size > max_log_wr)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE);
  if (in.sq_log_stride < MPR_SQ_LOG_STRIDE_MIN || in.sq_log_stride > MPR_SQ_LOG_STRIDE_MAX)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_STRIDE);
  if (in.sq_base == 0 || (in.sq_base & 63) ||
      !hal_.host_memory(in.sq_base, uint64_t{1} << (in.sq_log_size + in.sq_log_stride)))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  if (!check_receive_side(in, c)) return;
  if (in.uar_index >= static_cast<uint64_t>(l.num_uar_pages))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR);
  // Inline room: after the control segment and the remote segment (RC) or
  // the UD address segment (UD), and the inline header.
  const uint32_t stride_room = (1u << in.sq_log_stride) - sizeof(mpr_wqe_ctrl) -
                               (ud ? sizeof(mpr_wqe_ud) : sizeof(mpr_wqe_raddr)) -
                               sizeof(mpr_wqe_inline);
  if (in.max_inline > static_cast<uint64_t>(l.max_inline) || in.max_inline > stride_room)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  if (!ctx.pd_valid(in.pdn)) return fail(c, MPR_CMD_BAD_HANDLE);
  mpr_cqc* scq = ctx.cq(in.send_cqn);
  mpr_cqc* rcq = ctx.cq(in.recv_cqn);
  if (!scq || !rcq) return fail(c, MPR_CMD_BAD_HANDLE);
  mpr_srqc* srq = use_srq ? ctx.srq(in.srqn) : nullptr;
  if (use_srq && (!srq || srq->pdn != in.pdn)) return fail(c, MPR_CMD_BAD_HANDLE);

  int64_t qpn = ctx.alloc_qp();
  if (qpn < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  if (!ctx.icm().mapped(IcmTable::qpc, ctx.qp_index(static_cast<uint32_t>(qpn)), 1)) {
    ctx.free_qp(static_cast<uint32_t>(qpn));
    return fail(c, MPR_CMD_NO_ICM);
  }
  mpr_qpc* q = ctx.qp(static_cast<uint32_t>(qpn));
  q->sq_base = in.sq_base;
  q->rq_base = in.rq_base;
  q->pdn = in.pdn;
  q->send_cqn = in.send_cqn;
  q->recv_cqn = in.recv_cqn;
  q->uar_index = in.uar_index;
  q->max_inline = in.max_inline;
  q->qp_type = gsi ? uint8_t{MPR_QPT_UD} : in.qp_type;
  q->state = MPR_QPS_RESET;
  q->sq_log_size = in.sq_log_size;
  q->sq_log_stride = in.sq_log_stride;
  q->rq_log_size = in.rq_log_size;
  q->rq_log_stride = in.rq_log_stride;
  q->transport = no_engine ? uint8_t{MPR_TRANSPORT_GBN} : transport;
  q->sq_sig_all = in.sq_sig_all;
  q->flags = in.flags;
  q->srqn = use_srq ? in.srqn : 0;
  if (srq) ++srq->num_qps;
  ctx.pd_ref(in.pdn, +1);
  ++scq->num_qps;
  ++rcq->num_qps;
  if (gsi) ctx.set_gsi_qpn(static_cast<uint32_t>(qpn));
  c.out[0] = static_cast<uint32_t>(qpn);
}

void Firmware::modify_qp(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const NicLimits& l = ctx.limits();
  const mpr_cmd_modify_qp& in = cmd.u.modify_qp;
  const mpr_qp_attr& a = in.attr;
  mpr_qpc* q = ctx.qp(in.qpn);
  if (!q) return fail(c, MPR_CMD_BAD_HANDLE);
  const uint8_t from = q->state;
  const uint32_t mask = a.attr_mask;
  const uint8_t to = (mask & MPR_QP_ATTR_STATE) ? a.qp_state : from;
  if (to > MPR_QPS_ERR) return fail(c, MPR_CMD_BAD_PARAM, MPR_QP_ATTR_STATE);
  if ((mask & MPR_QP_ATTR_CUR_STATE) && a.cur_state != from)
    return fail(c, MPR_CMD_BAD_STATE, MPR_QP_ATTR_CUR_STATE);

  const bool ud = q->qp_type == MPR_QPT_UD;
  QpTransitionRule rule = ud                         ? qp_transition_rule_ud(from, to)
                          : q->qp_type == MPR_QPT_UC ? qp_transition_rule_uc(from, to)
                                                     : qp_transition_rule(from, to);
  if (!rule.allowed) return fail(c, MPR_CMD_BAD_STATE, MPR_QP_ATTR_STATE);
  const uint32_t missing = rule.required & ~mask;
  if (missing) return fail(c, MPR_CMD_BAD_ATTR, missing & (~missing + 1));
  const uint32_t extra = mask & ~(rule.required | rule.optional | MPR_QP_ATTR_STATE);
  if (extra) return fail(c, MPR_CMD_BAD_ATTR, extra & (~extra + 1));

  // Value checks, for the attributes present.
  const uint8_t port_mtu = hal_.port().max_mtu;
  struct Check {
    uint32_t bit;
    bool bad;
  };
  const Check checks[] = {
      {MPR_QP_ATTR_ACCESS_FLAGS, (a.access_flags & ~MPR_ACCESS_ALL) != 0},
      {MPR_QP_ATTR_PKEY_INDEX, a.pkey_index != 0},
      {MPR_QP_ATTR_PORT, a.port_num != 1},
      {MPR_QP_ATTR_PATH_MTU, a.path_mtu < MPR_MTU_256 || a.path_mtu > port_mtu},
      {MPR_QP_ATTR_TIMEOUT, a.timeout > 31},
      {MPR_QP_ATTR_RETRY_CNT, a.retry_cnt > 7},
      {MPR_QP_ATTR_RNR_RETRY, a.rnr_retry > 7},
      {MPR_QP_ATTR_MIN_RNR_TIMER, a.min_rnr_timer > 31},
      {MPR_QP_ATTR_MAX_QP_RD_ATOMIC, a.max_rd_atomic > l.max_rd_atomic},
      {MPR_QP_ATTR_MAX_DEST_RD_ATOMIC, a.max_dest_rd_atomic > l.max_rd_atomic},
      {MPR_QP_ATTR_SQ_PSN, a.sq_psn > 0xffffff},
      {MPR_QP_ATTR_RQ_PSN, a.rq_psn > 0xffffff},
      {MPR_QP_ATTR_DEST_QPN, a.dest_qpn > 0xffffff},
      {MPR_QP_ATTR_AV, !ctx.gid(a.sgid_index) || !is_ipv4_mapped(ctx.gid(a.sgid_index)) ||
                           !is_ipv4_mapped(a.dgid) || a.hop_limit == 0 || all_zero(a.dmac, 6)},
  };
  for (const Check& chk : checks)
    if ((mask & chk.bit) && chk.bad) return fail(c, MPR_CMD_BAD_PARAM, chk.bit);
  // UC responders take SENDs and WRITEs only: REMOTE_READ and
  // REMOTE_ATOMIC are accepted in the flags (applications pass the RC set)
  // and have no effect, as no READ or atomic request exists on UC.
  // The Q_Key word is reserved on RC and UC QPs (and ignored without QKEY on
  // UD).
  if (a.rsvd0 || (!ud && a.qkey)) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);

  // Apply: copy each present attribute into the context's attribute block.
  mpr_qp_attr& s = q->attr;
  if (mask & MPR_QP_ATTR_ACCESS_FLAGS) s.access_flags = a.access_flags;
  if (mask & MPR_QP_ATTR_PKEY_INDEX) s.pkey_index = a.pkey_index;
  if (mask & MPR_QP_ATTR_PORT) s.port_num = a.port_num;
  if (mask & MPR_QP_ATTR_PATH_MTU) s.path_mtu = a.path_mtu;
  if (mask & MPR_QP_ATTR_TIMEOUT) s.timeout = a.timeout;
  if (mask & MPR_QP_ATTR_RETRY_CNT) s.retry_cnt = a.retry_cnt;
  if (mask & MPR_QP_ATTR_RNR_RETRY) s.rnr_retry = a.rnr_retry;
  if (mask & MPR_QP_ATTR_MIN_RNR_TIMER) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & MPR_QP_ATTR_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a.max_rd_atomic;
  if (mask & MPR_QP_ATTR_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & MPR_QP_ATTR_SQ_PSN) s.sq_psn = a.sq_psn;
  if (mask & MPR_QP_ATTR_RQ_PSN) s.rq_psn = a.rq_psn;
  if (mask & MPR_QP_ATTR_DEST_QPN) s.dest_qpn = a.dest_qpn;
  if (mask & MPR_QP_ATTR_QKEY) s.qkey = a.qkey;
  if (mask & MPR_QP_ATTR_AV) {
    s.sgid_index = a.sgid_index;
    s.hop_limit = a.hop_limit;
    s.traffic_class = a.traffic_class;
    s.udp_sport = a.udp_sport;
    std::memcpy(s.dgid, a.dgid, sizeof s.dgid);
    std::memcpy(s.dmac, a.dmac, sizeof s.dmac);
  }
  if (to == MPR_QPS_RESET) {
    // RESET forgets everything but the creation parameters.
    s = mpr_qp_attr{};
    q->sq_pi = q->rq_pi = 0;
  }
  q->state = to;
  s.qp_state = to;
  if (to != from || to == MPR_QPS_RESET) hal_.qp_state_changed(in.qpn, from, to);
}

void Firmware::query_qp(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const mpr_qpc* q = ctx.qp(cmd.u.qpn.qpn);
  if (!q) return fail(c, MPR_CMD_BAD_HANDLE);
  mpr_qp_attr a = q->attr;
  a.qp_state = q->state;
  a.cur_state = q->state;
  a.attr_mask = 0;
  write_output(cmd, c, &a, sizeof a);
}

void Firmware::destroy_qp(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const uint32_t qpn = cmd.u.qpn.qpn;
  mpr_qpc* q = ctx.qp(qpn);
  if (!q) return fail(c, MPR_CMD_BAD_HANDLE);
  hal_.qp_destroyed(qpn);
  ctx.pd_ref(q->pdn, -1);
  if (mpr_cqc* s = ctx.cq(q->send_cqn)) --s->num_qps;
  if (mpr_cqc* r = ctx.cq(q->recv_cqn)) --r->num_qps;
  if (q->flags & MPR_CREATE_QP_F_SRQ)
    if (mpr_srqc* s = ctx.srq(q->srqn)) --s->num_qps;
  ctx.free_qp(qpn);
}

bool Firmware::check_receive_side(const mpr_cmd_create_qp& in, Comp& c) {
  const int max_log_wr = log2_floor(static_cast<uint64_t>(hal_.contexts().limits().max_qp_wr));
  if (in.flags & MPR_CREATE_QP_F_SRQ) {
    // No ring of its own: a ring named anyway would be a caller that
    // believes it posts RECVs there.
    if (in.rq_base || in.rq_log_size || in.rq_log_stride) {
      fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_SRQ);
      return false;
    }
    return true;
  }
  if (in.srqn) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
    return false;
  }
  if (in.rq_log_size < 1 || in.rq_log_size > max_log_wr) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE);
    return false;
  }
  if (in.rq_log_stride < MPR_RQ_LOG_STRIDE_MIN || in.rq_log_stride > MPR_RQ_LOG_STRIDE_MAX) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_STRIDE);
    return false;
  }
  if (in.rq_base == 0 || (in.rq_base & 63) ||
      !hal_.host_memory(in.rq_base, uint64_t{1} << (in.rq_log_size + in.rq_log_stride))) {
    fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
    return false;
  }
  return true;
}

void Firmware::create_srq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const NicLimits& l = ctx.limits();
  const mpr_cmd_create_srq& in = cmd.u.create_srq;
  const int max_log_wr = log2_floor(static_cast<uint64_t>(l.max_qp_wr));
  if (in.rsvd0) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED);
  // Slots are named by 16-bit indices (next_index, CQE wqe_index).
  if (in.log_size < 1 || in.log_size > std::min(max_log_wr, 16))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE);
  if (in.log_stride < MPR_SRQ_LOG_STRIDE_MIN || in.log_stride > MPR_SRQ_LOG_STRIDE_MAX)
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_STRIDE);
  if (in.base == 0 || (in.base & 63) ||
      !hal_.host_memory(in.base, uint64_t{1} << (in.log_size + in.log_stride)))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  if (in.uar_index >= static_cast<uint64_t>(l.num_uar_pages))
    return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR);
  if (in.limit > (1u << in.log_size)) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LIMIT);
  if (!ctx.pd_valid(in.pdn)) return fail(c, MPR_CMD_BAD_HANDLE);
  const int64_t srqn = ctx.alloc_srq();
  if (srqn < 0) return fail(c, MPR_CMD_NO_RESOURCES);
  mpr_srqc* s = ctx.srq(static_cast<uint32_t>(srqn));
  s->base = in.base;
  s->pdn = in.pdn;
  s->uar_index = in.uar_index;
  s->log_size = in.log_size;
  s->log_stride = in.log_stride;
  s->limit = in.limit;
  ctx.pd_ref(in.pdn, +1);
  c.out[0] = static_cast<uint32_t>(srqn);
}

void Firmware::modify_srq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const mpr_cmd_modify_srq& in = cmd.u.modify_srq;
  mpr_srqc* s = ctx.srq(in.srqn);
  if (!s) return fail(c, MPR_CMD_BAD_HANDLE);
  // Resizing would move a ring the NIC is reading: not offered (the
  // device attributes say so: no IBV_DEVICE_SRQ_RESIZE).
  if (in.attr_mask & ~MPR_SRQ_ATTR_LIMIT) return fail(c, MPR_CMD_BAD_ATTR, MPR_SRQ_ATTR_MAX_WR);
  if (!(in.attr_mask & MPR_SRQ_ATTR_LIMIT)) return;
  if (in.limit > (1u << s->log_size)) return fail(c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LIMIT);
  // Checked as QPs take WQEs (as rxe does): an SRQ already below the new
  // limit raises the event at the next WQE taken.
  s->limit = in.limit;
}

void Firmware::query_srq(const mpr_cmd& cmd, Comp& c) {
  const mpr_srqc* s = hal_.contexts().srq(cmd.u.handle.handle);
  if (!s) return fail(c, MPR_CMD_BAD_HANDLE);
  c.out[0] = s->limit;
  c.out[1] = s->posted - s->taken;
  c.out[2] = s->num_qps;
  c.out[3] = 1u << s->log_size;
}

void Firmware::destroy_srq(const mpr_cmd& cmd, Comp& c) {
  ContextMemory& ctx = hal_.contexts();
  const uint32_t srqn = cmd.u.handle.handle;
  mpr_srqc* s = ctx.srq(srqn);
  if (!s) return fail(c, MPR_CMD_BAD_HANDLE);
  if (s->num_qps) return fail(c, MPR_CMD_BUSY);
  hal_.srq_destroyed(srqn);
  ctx.pd_ref(s->pdn, -1);
  ctx.free_srq(srqn);
}

}  // namespace mprdma::nic
