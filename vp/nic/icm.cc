#include "vp/nic/icm.h"

#include <algorithm>

namespace mprdma::nic {

namespace {
constexpr int idx(IcmTable t) { return static_cast<int>(t); }
}  // namespace

const char* icm_table_name(IcmTable t) {
  switch (t) {
    case IcmTable::qpc:
      return "qpc";
    case IcmTable::cqc:
      return "cqc";
    case IcmTable::mpt:
      return "mpt";
    case IcmTable::mtt:
      return "mtt";
    case IcmTable::count_:
      break;
  }
  return "?";
}

uint64_t Icm::qpc_entry_bytes(uint64_t engine_state_bytes) {
  uint64_t e = kQpcEntryBytes;
  while (e < 128 + engine_state_bytes) e *= 2;
  return e;
}

Icm::Icm(const NicLimits& l, uint64_t qpc_entry_bytes) : qpc_entry_bytes_(qpc_entry_bytes) {
  entries_[idx(IcmTable::qpc)] = static_cast<uint64_t>(l.max_qp);
  entries_[idx(IcmTable::cqc)] = static_cast<uint64_t>(l.max_cq);
  entries_[idx(IcmTable::mpt)] = static_cast<uint64_t>(l.max_mr);
  entries_[idx(IcmTable::mtt)] = static_cast<uint64_t>(l.max_mtt);
  uint64_t at = 0;
  for (int t = 0; t < idx(IcmTable::count_); ++t) {
    offset_[t] = at;
    const uint64_t bytes = entries_[t] * entry_bytes(static_cast<IcmTable>(t));
    at += (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  }
  page_pa_.assign(at / kPageBytes, 0);
  page_mapped_.assign(at / kPageBytes, false);
}

uint64_t Icm::entry_bytes(IcmTable t) const {
  switch (t) {
    case IcmTable::qpc:
      return qpc_entry_bytes_;
    case IcmTable::cqc:
      return kCqcEntryBytes;
    case IcmTable::mpt:
      return kMptEntryBytes;
    case IcmTable::mtt:
      return kMttEntryBytes;
    case IcmTable::count_:
      break;
  }
  return 0;
}

uint64_t Icm::entries(IcmTable t) const { return entries_[idx(t)]; }
uint64_t Icm::table_offset(IcmTable t) const { return offset_[idx(t)]; }
uint64_t Icm::entry_offset(IcmTable t, uint64_t index) const {
  return offset_[idx(t)] + index * entry_bytes(t);
}

bool Icm::map(uint32_t page, uint64_t pa) {
  if (page >= page_pa_.size() || (pa & (kPageBytes - 1))) return false;
  if (!page_mapped_[page]) ++mapped_count_;
  page_mapped_[page] = true;
  page_pa_[page] = pa;
  return true;
}

bool Icm::mapped(IcmTable t, uint64_t first, uint64_t count) const {
  if (count == 0) return true;
  if (first >= entries(t) || count > entries(t) - first) return false;
  const uint64_t p0 = entry_offset(t, first) / kPageBytes;
  const uint64_t p1 = (entry_offset(t, first + count) - 1) / kPageBytes;
  for (uint64_t p = p0; p <= p1; ++p)
    if (!page_mapped_[p]) return false;
  return true;
}

std::optional<uint64_t> Icm::pa(IcmTable t, uint64_t index) const {
  if (index >= entries(t)) return std::nullopt;
  const uint64_t off = entry_offset(t, index);
  const uint64_t page = off / kPageBytes;
  if (!page_mapped_[page]) return std::nullopt;
  return page_pa_[page] + off % kPageBytes;
}

std::vector<Icm::Piece> Icm::pieces(IcmTable t, uint64_t index, uint64_t bytes) const {
  std::vector<Piece> out;
  if (index >= entries(t)) return out;
  uint64_t off = entry_offset(t, index);
  const uint64_t end = off + bytes;
  while (off < end) {
    const uint64_t page = off / kPageBytes;
    if (page >= page_mapped_.size() || !page_mapped_[page]) return {};
    const uint64_t in_page = off % kPageBytes;
    const uint64_t len = std::min(end - off, kPageBytes - in_page);
    const uint64_t pa = page_pa_[page] + in_page;
    if (!out.empty() && out.back().pa + out.back().len == pa)
      out.back().len += static_cast<uint32_t>(len);
    else
      out.push_back(Piece{pa, static_cast<uint32_t>(len)});
    off += len;
  }
  return out;
}

void Icm::clear() {
  page_pa_.assign(page_pa_.size(), 0);
  page_mapped_.assign(page_mapped_.size(), false);
  mapped_count_ = 0;
}

}  // namespace mprdma::nic
